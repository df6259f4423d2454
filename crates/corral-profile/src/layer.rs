//! One file (template or tenant override) read against the schema, values
//! still unexpanded; and the overlay of a tenant override on a template.

use crate::doc::{Entry, Table, L};
use crate::error::{invalid, ProfileError, Source};
use crate::limits::{self, LimitEntry};
use crate::mounts::{self, RawMount};
use crate::plan::{NetMode, SeccompAction};
use crate::services::{self, RawService};
use crate::values::{self, ENV_NAME, GROUP_NAME, SYSCALL_NAME};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TmpKind {
    Disk,
    Tmpfs,
}

#[derive(Debug, Default)]
pub(crate) struct NsLayer {
    pub pid: Option<L<bool>>,
    pub ipc: Option<L<bool>>,
    pub uts: Option<L<bool>>,
    pub cgroup: Option<L<bool>>,
    pub user: Option<L<bool>>,
    pub net: Option<L<NetMode>>,
}

#[derive(Debug, Default)]
pub(crate) struct TmpLayer {
    pub kind: Option<L<TmpKind>>,
    pub dir: Option<L<String>>,
    pub size: Option<L<u64>>,
}

#[derive(Debug, Default)]
pub(crate) struct SeccompLayer {
    pub enabled: Option<L<bool>>,
    pub action: Option<L<SeccompAction>>,
    pub allow_ptrace: Option<L<bool>>,
    pub allow_io_uring: Option<L<bool>>,
    pub deny: Option<Vec<L<String>>>,
    pub allow: Option<Vec<L<String>>>,
}

/// Everything one file says; `None` where it says nothing.
#[derive(Debug, Default)]
pub(crate) struct Layer {
    pub hostname: Option<L<String>>,
    pub workdir: Option<L<String>>,
    pub shell: Option<L<String>>,
    pub plan: Option<L<String>>,
    /// Supplementary groups the tenant keeps inside (by name).
    pub groups: Option<Vec<L<String>>>,
    /// Accounts below this uid are not tenants (template only).
    pub tenant_min_uid: Option<L<u32>>,
    /// Accounts that are tenants whatever their uid (template only).
    pub tenant_allow: Option<Vec<L<String>>>,
    pub ns: NsLayer,
    pub env_keep: Option<Vec<L<String>>>,
    pub env_set: Option<BTreeMap<String, L<String>>>,
    pub tmp: TmpLayer,
    pub seccomp: SeccompLayer,
    /// `[limits]`, flattened, in file order.
    pub limits: Vec<LimitEntry>,
    pub mounts: Vec<RawMount>,
    pub services: Vec<RawService>,
}

const TOP_KEYS: &[&str] = &[
    "hostname",
    "workdir",
    "shell",
    "plan",
    "groups",
    "tenant_min_uid",
    "tenant_allow",
    "namespaces",
    "env",
    "tmp",
    "seccomp",
    "limits",
    "mount",
    "services",
];

pub(crate) fn parse(src: Source<'_>) -> Result<Layer, ProfileError> {
    let doc = toml_edit::ImDocument::parse(src.text).map_err(|e| src.syntax_error(&e))?;
    let root = Table::root(src, doc.as_table());
    root.check_keys(TOP_KEYS)?;
    let string = |key| root.get(key).map(|e| e.string()).transpose();
    let mut layer = Layer {
        hostname: string("hostname")?,
        workdir: string("workdir")?,
        shell: string("shell")?,
        plan: string("plan")?,
        ..Layer::default()
    };
    layer.groups = root
        .get("groups")
        .map(|e| names(&e, values::is_group_name, GROUP_NAME))
        .transpose()?;
    if let Some(e) = root.get("tenant_min_uid") {
        let n = e.integer()?;
        let uid = u32::try_from(n.v)
            .ok()
            .filter(|&u| u >= 1)
            .ok_or_else(|| n.invalid("a uid from 1 to 4294967295", n.v.to_string()))?;
        layer.tenant_min_uid = Some(n.map(|_| uid));
    }
    layer.tenant_allow = root
        .get("tenant_allow")
        .map(|e| names(&e, values::is_tenant_name, values::TENANT_NAME))
        .transpose()?;
    if let Some(e) = root.get("namespaces") {
        layer.ns = namespaces(&e.table()?)?;
    }
    if let Some(e) = root.get("env") {
        let t = e.table()?;
        t.check_keys(&["keep", "set"])?;
        layer.env_keep = t
            .get("keep")
            .map(|e| names(&e, values::is_env_name, ENV_NAME))
            .transpose()?;
        layer.env_set = t.get("set").map(|e| env_set(&e)).transpose()?;
    }
    if let Some(e) = root.get("tmp") {
        layer.tmp = tmp(&e.table()?)?;
    }
    if let Some(e) = root.get("seccomp") {
        layer.seccomp = seccomp(&e.table()?)?;
    }
    if let Some(e) = root.get("limits") {
        limits::flatten(&e.table()?, "", &mut layer.limits)?;
    }
    if let Some(e) = root.get("mount") {
        layer.mounts = e
            .tables()?
            .iter()
            .map(mounts::parse)
            .collect::<Result<_, _>>()?;
    }
    if let Some(e) = root.get("services") {
        layer.services = services::parse(&e.table()?)?;
    }
    Ok(layer)
}

/// A string that must be one of a few words.
pub(crate) fn choice<T: Copy>(e: &Entry<'_>, options: &[(&str, T)]) -> Result<L<T>, ProfileError> {
    let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
    let expected = format!("one of {}", names.join(", "));
    let s = e.string().map_err(|_| e.wrong_type(&expected))?;
    match options.iter().find(|(n, _)| *n == s.v) {
        Some(&(_, v)) => Ok(s.map(|_| v)),
        None => Err(s.invalid(expected, format!("{:?}", s.v))),
    }
}

fn namespaces(t: &Table<'_>) -> Result<NsLayer, ProfileError> {
    t.check_keys(&["mount", "pid", "ipc", "uts", "cgroup", "net", "user"])?;
    let flag = |key| t.get(key).map(|e| e.boolean()).transpose();
    if let Some(mount) = flag("mount")? {
        if !mount.v {
            return Err(mount.invalid("true (a sandbox always has a mount namespace)", "false"));
        }
    }
    let net = t.get("net").map(|e| {
        choice(
            &e,
            &[
                ("private", NetMode::Private),
                ("host", NetMode::Host),
                ("none", NetMode::None),
            ],
        )
    });
    Ok(NsLayer {
        pid: flag("pid")?,
        ipc: flag("ipc")?,
        uts: flag("uts")?,
        cgroup: flag("cgroup")?,
        user: flag("user")?,
        net: net.transpose()?,
    })
}

/// An array of strings that must each pass `ok`.
fn names(
    e: &Entry<'_>,
    ok: fn(&str) -> bool,
    expected: &str,
) -> Result<Vec<L<String>>, ProfileError> {
    let list = e.strings()?;
    match list.iter().find(|s| !ok(&s.v)) {
        Some(bad) => Err(bad.invalid(expected, format!("{:?}", bad.v))),
        None => Ok(list),
    }
}

fn env_set(e: &Entry<'_>) -> Result<BTreeMap<String, L<String>>, ProfileError> {
    let t = e.table()?;
    let mut set = BTreeMap::new();
    for (name, _) in t.inner.iter() {
        let Some(entry) = t.get(name) else { continue };
        if !values::is_env_name(name) {
            return Err(invalid(
                &entry.key_at,
                &t.path,
                ENV_NAME,
                format!("{name:?}"),
            ));
        }
        set.insert(name.to_string(), entry.string()?);
    }
    Ok(set)
}

fn tmp(t: &Table<'_>) -> Result<TmpLayer, ProfileError> {
    t.check_keys(&["kind", "dir", "size"])?;
    let kind = t
        .get("kind")
        .map(|e| choice(&e, &[("disk", TmpKind::Disk), ("tmpfs", TmpKind::Tmpfs)]));
    let layer = TmpLayer {
        kind: kind.transpose()?,
        dir: t.get("dir").map(|e| e.string()).transpose()?,
        size: t.get("size").map(|e| values::size(&e)).transpose()?,
    };
    check_tmp(&layer)?;
    Ok(layer)
}

/// `dir` belongs to disk (disk when `kind` is not given); `size` caps
/// either.
pub(crate) fn check_tmp(tmp: &TmpLayer) -> Result<(), ProfileError> {
    let kind = tmp.kind.as_ref().map_or(TmpKind::Disk, |k| k.v);
    match (kind, &tmp.dir, &tmp.size) {
        (TmpKind::Tmpfs, Some(dir), _) => Err(dir.invalid(
            "no tmp.dir with kind = \"tmpfs\" (dir is for kind = \"disk\")",
            format!("{:?}", dir.v),
        )),
        _ => Ok(()),
    }
}

fn seccomp(t: &Table<'_>) -> Result<SeccompLayer, ProfileError> {
    t.check_keys(&[
        "enabled",
        "action",
        "allow_ptrace",
        "allow_io_uring",
        "deny",
        "allow",
    ])?;
    let flag = |key| t.get(key).map(|e| e.boolean()).transpose();
    let list = |key| {
        t.get(key)
            .map(|e| names(&e, values::is_syscall_name, SYSCALL_NAME))
            .transpose()
    };
    let action = t.get("action").map(|e| {
        choice(
            &e,
            &[
                ("errno", SeccompAction::Errno),
                ("kill", SeccompAction::Kill),
            ],
        )
    });
    Ok(SeccompLayer {
        enabled: flag("enabled")?,
        action: action.transpose()?,
        allow_ptrace: flag("allow_ptrace")?,
        allow_io_uring: flag("allow_io_uring")?,
        deny: list("deny")?,
        allow: list("allow")?,
    })
}

impl Layer {
    /// A tenant override on top of this template: what `over` sets wins,
    /// `env.keep` is a union, `env.set` an overlay, mounts and limits are
    /// appended (limits apply in order, so the later value of a key wins).
    pub fn overlay(self, over: Layer) -> Layer {
        let env_keep = match (self.env_keep, over.env_keep) {
            (Some(mut base), Some(more)) => {
                for name in more {
                    if !base.iter().any(|b| b.v == name.v) {
                        base.push(name);
                    }
                }
                Some(base)
            }
            (base, more) => more.or(base),
        };
        let env_set = match (self.env_set, over.env_set) {
            (Some(mut base), Some(more)) => {
                base.extend(more);
                Some(base)
            }
            (base, more) => more.or(base),
        };
        // A new tmp kind drops the template's settings for the old kind.
        let tmp = if over.tmp.kind.is_some() {
            over.tmp
        } else {
            TmpLayer {
                kind: self.tmp.kind,
                dir: over.tmp.dir.or(self.tmp.dir),
                size: over.tmp.size.or(self.tmp.size),
            }
        };
        let (ns, sc) = (over.ns, over.seccomp);
        let mut limits = self.limits;
        limits.extend(over.limits);
        let mut mounts = self.mounts;
        mounts.extend(over.mounts);
        Layer {
            hostname: over.hostname.or(self.hostname),
            workdir: over.workdir.or(self.workdir),
            shell: over.shell.or(self.shell),
            plan: over.plan.or(self.plan),
            groups: over.groups.or(self.groups),
            // Host-wide: the template's (assemble refuses them in an override).
            tenant_min_uid: self.tenant_min_uid,
            tenant_allow: self.tenant_allow,
            ns: NsLayer {
                pid: ns.pid.or(self.ns.pid),
                ipc: ns.ipc.or(self.ns.ipc),
                uts: ns.uts.or(self.ns.uts),
                cgroup: ns.cgroup.or(self.ns.cgroup),
                user: ns.user.or(self.ns.user),
                net: ns.net.or(self.ns.net),
            },
            env_keep,
            env_set,
            tmp,
            seccomp: SeccompLayer {
                enabled: sc.enabled.or(self.seccomp.enabled),
                action: sc.action.or(self.seccomp.action),
                allow_ptrace: sc.allow_ptrace.or(self.seccomp.allow_ptrace),
                allow_io_uring: sc.allow_io_uring.or(self.seccomp.allow_io_uring),
                deny: sc.deny.or(self.seccomp.deny),
                allow: sc.allow.or(self.seccomp.allow),
            },
            limits,
            mounts,
            services: services::overlay(self.services, over.services),
        }
    }
}
