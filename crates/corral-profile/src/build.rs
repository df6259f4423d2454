//! Layers (template, tenant override) + tenant + plan → a validated `Plan`.

use crate::doc::L;
use crate::error::{line_starts, Location, ProfileError, Source};
use crate::expand::expand;
use crate::layer::{self, check_tmp, Layer, TmpKind};
use crate::limits::{self, LimitsPlanFile};
use crate::plan::{
    EnvPlan, LimitsSource, Namespaces, NetMode, Plan, SeccompAction, SeccompPlan, Tenant, TmpPlan,
};
use crate::values::{abs_path, abs_path_not_root, is_hostname, HOSTNAME};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub(crate) const DEFAULT_KEEP: &[&str] = &["LANG", "LC_ALL", "TZ", "TERM"];
pub(crate) const DEFAULT_SET: &[(&str, &str)] = &[
    ("PATH", "/usr/local/bin:/usr/bin:/bin"),
    ("HOME", "$HOME"),
    ("USER", "$USER"),
    ("LOGNAME", "$USER"),
    ("SHELL", "/bin/sh"),
];
pub(crate) const DEFAULT_TMP_DIR: &str = "/var/lib/corral/tmp/$USER";

/// A file's text and the name to show for it.
pub(crate) struct Input<'a> {
    pub text: &'a str,
    pub path: &'a Path,
}

/// Read the template and the optional tenant override, resolve limits, build.
pub(crate) fn assemble(
    template: Input<'_>,
    over: Option<Input<'_>>,
    tenant: Tenant,
    plans: LimitsPlanFile,
) -> Result<Plan, ProfileError> {
    let lines = line_starts(template.text);
    let mut layer = layer::parse(Source {
        path: template.path,
        text: template.text,
        lines: &lines,
    })?;
    let mut sources = vec![template.path.to_path_buf()];
    if let Some(over) = over {
        let lines = line_starts(over.text);
        let over_layer = layer::parse(Source {
            path: over.path,
            text: over.text,
            lines: &lines,
        })?;
        if let Some(m) = &over_layer.tenant_min_uid {
            return Err(m.invalid(
                "tenant_min_uid only in the template (profile.toml): it is host-wide",
                m.v.to_string(),
            ));
        }
        if let Some(a) = over_layer.tenant_allow.as_ref().and_then(|v| v.first()) {
            return Err(a.invalid(
                "tenant_allow only in the template (profile.toml): it is host-wide",
                format!("{:?}", a.v),
            ));
        }
        layer = layer.overlay(over_layer);
        sources.push(over.path.to_path_buf());
    }
    if matches!(plans, LimitsPlanFile::Resolve(_)) {
        check_account(&layer, &tenant)?;
    }
    let defaults = Defaults {
        at: Location {
            file: template.path.to_path_buf(),
            line: 1,
            column: 1,
        },
    };
    let plan = layer
        .plan
        .clone()
        .unwrap_or_else(|| defaults.value("plan", "default"));
    let limits = limits::resolve(
        &plan,
        plans,
        std::mem::take(&mut layer.limits),
        &mut sources,
    )?;
    build(layer, tenant, limits, sources, &defaults)
}

/// Tenants are accounts, not system users: a uid below the template's
/// `tenant_min_uid` (default: UID_MIN of /etc/login.defs, else 1000) is
/// refused unless `tenant_allow` names the account. (The gateway's own
/// min-uid rule applies the same idea to script owners.)
fn check_account(layer: &Layer, tenant: &Tenant) -> Result<(), ProfileError> {
    let (min, from) = match &layer.tenant_min_uid {
        Some(m) => (m.v, "tenant_min_uid of the profile".to_string()),
        None => (
            login_defs_uid_min(),
            "UID_MIN of /etc/login.defs".to_string(),
        ),
    };
    let allowed = layer
        .tenant_allow
        .iter()
        .flatten()
        .any(|a| a.v == tenant.name);
    if tenant.uid >= min || allowed {
        return Ok(());
    }
    Err(ProfileError::Tenant {
        name: tenant.name.clone(),
        expected: format!(
            "an account with a uid from {min} ({from}), or one named in tenant_allow (profile.toml)"
        ),
        found: format!("uid {} (a system account)", tenant.uid),
    })
}

/// UID_MIN from /etc/login.defs; 1000 when it says nothing.
fn login_defs_uid_min() -> u32 {
    std::fs::read_to_string("/etc/login.defs")
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                let mut w = l.split_whitespace();
                (w.next() == Some("UID_MIN")).then(|| w.next()?.parse().ok())?
            })
        })
        .unwrap_or(1000)
}

/// Values the files leave out. Errors about them point at the template's
/// first line and say the value is a default.
struct Defaults {
    at: Location,
}

impl Defaults {
    fn value(&self, key: &str, v: &str) -> L<String> {
        L {
            v: v.to_string(),
            at: self.at.clone(),
            key: format!("{key} (not set; default {v:?})"),
        }
    }
}

fn expanded(l: &L<String>, tenant: &Tenant) -> Result<L<String>, ProfileError> {
    Ok(L {
        v: expand(l, tenant)?,
        ..l.clone()
    })
}

/// The shell a tenant gets inside its sandbox when the profile names none:
/// its login shell from passwd, unless that is corral's own login shell
/// (`corral-shell`, which enters the sandbox), then the system's bash.
pub fn real_shell(login: &Path) -> PathBuf {
    if login.file_name().is_some_and(|n| n == "corral-shell") {
        PathBuf::from("/bin/bash")
    } else {
        login.to_path_buf()
    }
}

fn build(
    layer: Layer,
    tenant: Tenant,
    limits: LimitsSource,
    sources: Vec<PathBuf>,
    defaults: &Defaults,
) -> Result<Plan, ProfileError> {
    let hostname = layer
        .hostname
        .unwrap_or_else(|| defaults.value("hostname", "$USER"));
    let hostname = expanded(&hostname, &tenant)?;
    if !is_hostname(&hostname.v) {
        let expected = format!("{HOSTNAME} (after expansion; set hostname for this tenant)");
        return Err(hostname.invalid(expected, format!("{:?}", hostname.v)));
    }
    let workdir = layer
        .workdir
        .unwrap_or_else(|| defaults.value("workdir", "$HOME"));
    let workdir = abs_path(&expanded(&workdir, &tenant)?)?;
    let mut tenant = tenant;
    // Supplementary groups apply inside only when the profile names them:
    // membership granted for the host (ssl-cert reads /etc/ssl/private,
    // adm reads logs) is not the tenant's business in its sandbox.
    let keep: Vec<String> = layer.groups.iter().flatten().map(|g| g.v.clone()).collect();
    let primary = tenant.gid;
    tenant
        .groups
        .retain(|(name, gid)| *gid == primary || keep.contains(name));
    tenant.shell = match layer.shell {
        Some(shell) => abs_path(&expanded(&shell, &tenant)?)?,
        None => real_shell(&tenant.shell),
    };

    let flag = |l: Option<L<bool>>, default: bool| l.map_or(default, |l| l.v);
    let ns = layer.ns;
    let namespaces = Namespaces {
        mount: true,
        pid: flag(ns.pid, true),
        ipc: flag(ns.ipc, true),
        uts: flag(ns.uts, true),
        cgroup: flag(ns.cgroup, true),
        net: ns.net.map_or(NetMode::Private, |l| l.v),
        user: flag(ns.user, false),
    };

    let keep = match layer.env_keep {
        Some(list) => list.into_iter().map(|l| l.v).collect(),
        None => DEFAULT_KEEP.iter().map(|s| s.to_string()).collect(),
    };
    let set = layer.env_set.unwrap_or_else(|| {
        DEFAULT_SET
            .iter()
            .map(|(k, v)| (k.to_string(), defaults.value(&format!("env.set.{k}"), v)))
            .collect()
    });
    let set = set
        .into_iter()
        .map(|(k, v)| Ok((k, expand(&v, &tenant)?)))
        .collect::<Result<BTreeMap<_, _>, ProfileError>>()?;

    check_tmp(&layer.tmp)?;
    let tmp = match layer.tmp.kind.map_or(TmpKind::Disk, |k| k.v) {
        TmpKind::Disk => {
            let dir = layer
                .tmp
                .dir
                .unwrap_or_else(|| defaults.value("tmp.dir", DEFAULT_TMP_DIR));
            TmpPlan::Disk {
                host_dir: abs_path_not_root(&expanded(&dir, &tenant)?)?,
                size: layer.tmp.size.map(|s| s.v),
            }
        }
        TmpKind::Tmpfs => TmpPlan::Tmpfs {
            size: layer.tmp.size.map(|s| s.v),
        },
    };

    let sc = layer.seccomp;
    let names = |l: Option<Vec<L<String>>>| {
        let mut out: Vec<String> = Vec::new();
        for name in l.unwrap_or_default() {
            if !out.contains(&name.v) {
                out.push(name.v);
            }
        }
        out
    };
    let seccomp = SeccompPlan {
        enabled: flag(sc.enabled, true),
        action: sc.action.map_or(SeccompAction::Errno, |l| l.v),
        allow_ptrace: flag(sc.allow_ptrace, false),
        allow_io_uring: flag(sc.allow_io_uring, false),
        deny: names(sc.deny),
        allow: names(sc.allow),
    };

    let services = layer
        .services
        .iter()
        .filter(|s| s.enabled)
        .map(|s| s.lower(&tenant, &workdir))
        .collect::<Result<Vec<_>, _>>()?;
    check_sockets_unique(&services, &layer.services)?;
    let mounts = layer
        .mounts
        .iter()
        .map(|m| m.lower(&tenant))
        .collect::<Result<_, _>>()?;
    let mount_origins = layer.mounts.iter().map(|m| m.origin()).collect();
    Ok(Plan {
        hostname: hostname.v,
        workdir,
        namespaces,
        mounts,
        tmp,
        env: EnvPlan { keep, set },
        seccomp,
        limits,
        sources,
        tenant,
        services,
        mount_origins,
    })
}

/// Two services of one tenant cannot listen on the same path.
fn check_sockets_unique(
    plans: &[crate::plan::ServicePlan],
    raw: &[crate::services::RawService],
) -> Result<(), ProfileError> {
    for (i, a) in plans.iter().enumerate() {
        for b in &plans[..i] {
            if let Some(p) = a.listen.iter().find(|p| b.listen.contains(p)) {
                let at = raw
                    .iter()
                    .find(|r| r.name.v == a.name)
                    .expect("lowered from raw");
                return Err(at.name.invalid(
                    format!(
                        "socket paths of its own (service {} listens on it too)",
                        b.name
                    ),
                    format!("{:?}", p.display()),
                ));
            }
        }
    }
    Ok(())
}
