//! `corral check` and `corral profile`.

use crate::cli::{CheckArgs, ProfileCmd};
use crate::ctx::Ctx;
use crate::out::{out, outln};

/// The configuration directory's other files, when present: who is caged
/// at login (access.toml) and the gateway's map (gateway.toml), each read
/// by the same code as the programs that use it.
fn check_other_files(ctx: &Ctx) -> anyhow::Result<()> {
    let access = ctx.config_dir.join("access.toml");
    if access.exists() {
        corral_access::config::AccessConfig::load(&access, true)?;
        outln!("{}: ok", access.display());
    }
    let map = ctx.config_dir.join("gateway.toml");
    if map.exists() {
        corral_gateway::TenantMap::load(&map)?;
        outln!("{}: ok", map.display());
    }
    let network = ctx.config_dir.join("network.toml");
    let net = corral_sandbox::net::Net::new(ctx.net_config()?)
        .map_err(|e| anyhow::anyhow!("{}: {e}", network.display()))?;
    if network.exists() {
        outln!("{}: ok", network.display());
    }
    // Both only where private tenants have been brought up since the boot
    // (corral wrote its rules).
    if net.rules_file().exists() {
        if let Some(w) = corral_sandbox::net::host_port_range().and_then(port_range_warning) {
            eprintln!("warning: {w}");
        }
    }
    // The table gone: a firewall reload flushed it.
    if net.rules_file().exists() && corral_sandbox::net::table_present(&net.table()) == Some(false)
    {
        eprintln!(
            "warning: the tenants' firewall table inet {} is missing (a firewall reload's \
             `flush ruleset`?): private tenants that are up now are not isolated from each \
             other nor from the host's listeners; the next `corral up` installs it again, and \
             `include \"{}\"` after the flush in /etc/nftables.conf keeps it across reloads \
             (docs/security.md)",
            net.table(),
            net.rules_file().display()
        );
    }
    Ok(())
}

/// Private tenants are masqueraded to source ports the host's own
/// ephemeral range leaves free (`corral_sandbox::net::tenant_ports`); a
/// host whose range leaves fewer than `MIN_TENANT_PORTS` gets a warning.
fn port_range_warning(host: (u16, u16)) -> Option<String> {
    corral_sandbox::net::tenant_ports(host).is_none().then(|| {
        format!(
            "net.ipv4.ip_local_port_range is {} {}: it leaves fewer than {} ports of \
             1024-65535 for the connections of tenants with net = \"private\", so they are \
             masqueraded to the host's own source ports, and a tenant's new connection can \
             meet a server's TIME_WAIT socket of one of the host's (the server refuses the \
             SYN, the tenant retries a second later); narrow the host's range (the kernel's \
             default is 32768 60999)",
            host.0,
            host.1,
            corral_sandbox::net::MIN_TENANT_PORTS
        )
    })
}

pub fn check(ctx: &Ctx, a: CheckArgs) -> anyhow::Result<i32> {
    let explicit = a.file.is_some();
    let file = a
        .file
        .unwrap_or_else(|| ctx.config_dir.join("profile.toml"));
    if explicit && !file.exists() {
        anyhow::bail!("{}: no such file", file.display());
    }
    if file.exists() {
        let plan = corral_profile::check_file(&file)?;
        outln!("{}: ok", file.display());
        // Sources that depend on the tenant are only known for a real one
        // (`--tenant`): the stand-in `example` has no home.
        for w in skipped_binds(&plan, None) {
            if !w.per_tenant {
                eprintln!("warning: {}", w.message);
            }
        }
        let net = std::fs::read_to_string(&file)
            .ok()
            .and_then(|t| toml::from_str::<toml::Value>(&t).ok())
            .and_then(|v| v.get("namespaces")?.get("net")?.as_str().map(String::from));
        if net.as_deref() == Some("host") {
            warn_host_net(&file.display().to_string());
        }
    } else {
        // No profile.toml: the built-in default is what tenants get.
        corral_profile::check_str(
            corral_profile::DEFAULT_PROFILE,
            std::path::Path::new(corral_profile::BUILTIN_PROFILE),
        )?;
        outln!(
            "{}: absent, so the built-in default profile applies: ok",
            file.display()
        );
    }
    if !explicit {
        check_other_files(ctx)?;
    }
    if let Some(t) = a.tenant {
        let plan = corral_profile::load(&ctx.config_dir, &t)?;
        corral_limits::Limits::from_source(&plan.limits)?;
        outln!("tenant {t}: ok (digest {})", &plan.digest()[..12]);
        for w in skipped_binds(&plan, None) {
            eprintln!("warning: tenant {t}: {}", w.message);
        }
        if plan.namespaces.net == corral_profile::plan::NetMode::Host {
            warn_host_net(&format!("tenant {t}"));
        }
    }
    Ok(0)
}

/// A `*-try` bind that `up` skips (or skipped), said where it was written.
#[derive(serde::Serialize)]
pub struct SkippedBind {
    pub src: std::path::PathBuf,
    pub dst: std::path::PathBuf,
    /// `FILE:LINE:COLUMN` of its `type`, when the plan knows it.
    pub at: Option<String>,
    /// The source exists now; the running sandbox was built without it.
    pub appeared: bool,
    #[serde(skip)]
    pub per_tenant: bool,
    #[serde(skip)]
    pub message: String,
}

/// The skipped binds of `plan` (see [`corral_sandbox::rootfs::skipped_binds`]),
/// except the built-in template's own portable list of distribution files
/// (/lib32, /etc/pki...), which are meant to be missing on some systems.
pub fn skipped_binds(
    plan: &corral_profile::Plan,
    sandbox_root: Option<&std::path::Path>,
) -> Vec<SkippedBind> {
    corral_sandbox::rootfs::skipped_binds(plan, sandbox_root)
        .into_iter()
        .filter_map(|s| {
            let origin = plan.mount_origins.get(s.index);
            if origin.is_some_and(|o| o.builtin) {
                return None;
            }
            let at = origin.map(|o| format!("{}: {}", o.at, o.key));
            let what = match &at {
                Some(at) => format!("{at}: "),
                None => String::new(),
            };
            let message = if s.appeared {
                format!(
                    "{what}{} exists now, but the running sandbox was built while it was \
                     missing and shows nothing of it at {}: `corral restart` binds it",
                    s.src.display(),
                    s.dst.display()
                )
            } else {
                format!(
                    "{what}{} does not exist, so this -try bind is skipped and the sandbox has \
                     nothing at {} (create it, then `corral restart` the tenants)",
                    s.src.display(),
                    s.dst.display()
                )
            };
            Some(SkippedBind {
                src: s.src,
                dst: s.dst,
                at,
                appeared: s.appeared,
                per_tenant: origin.is_some_and(|o| o.per_tenant),
                message,
            })
        })
        .collect()
}

/// `net = "host"` is allowed, never quiet: said on stderr, `corral check`
/// still succeeds.
fn warn_host_net(what: &str) {
    eprintln!(
        "warning: {what}: net = \"host\": the tenant shares the server's network: every \
         loopback service (Redis, memcached, MySQL over TCP, other tenants' app servers and \
         FPM pools), cloud metadata at 169.254.169.254 and every abstract Unix socket are in \
         its reach, and it can list every socket of the host; net = \"private\" (the \
         default) gives it a network of its own"
    );
}

pub fn profile(ctx: &Ctx, p: ProfileCmd) -> anyhow::Result<i32> {
    match p {
        ProfileCmd::Default => out!("{}", corral_profile::DEFAULT_PROFILE),
        ProfileCmd::Show { tenant } => {
            let plan = corral_profile::load(&ctx.config_dir, &tenant)?;
            if ctx.json {
                outln!("{}", serde_json::to_string_pretty(&plan)?);
            } else {
                out!("{}", corral_profile::render(&plan));
            }
        }
        ProfileCmd::Seccomp { tenant, out } => {
            let plan = corral_profile::load(&ctx.config_dir, &tenant)?;
            let filter = corral_security::seccomp::build(&plan.seccomp)
                .map_err(|e| anyhow::anyhow!("{tenant}: {e}"))?;
            let Some(filter) = filter else {
                anyhow::bail!(
                    "{tenant}: the profile disables seccomp ([seccomp] enabled = false): no filter"
                );
            };
            if let Some(path) = &out {
                std::fs::write(path, filter.to_bytes())
                    .map_err(|e| anyhow::anyhow!("write {}: {e}", path.display()))?;
            }
            let action = plan.seccomp.action.name();
            if ctx.json {
                let v = serde_json::json!({
                    "tenant": tenant,
                    "instructions": filter.len(),
                    "action": action,
                    "file": out,
                });
                outln!("{v}");
            } else {
                outln!(
                    "{tenant}: seccomp filter of {} BPF instructions, denied calls get {action}{}",
                    filter.len(),
                    out.map(|p| format!("; written to {}", p.display()))
                        .unwrap_or_default()
                );
            }
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_host_port_range_that_leaves_the_tenants_none_is_warned_about() {
        let w = super::port_range_warning((1024, 65535)).expect("warned");
        assert!(w.contains("ip_local_port_range is 1024 65535"), "{w}");
        assert!(super::port_range_warning((32768, 60999)).is_none());
    }
}
