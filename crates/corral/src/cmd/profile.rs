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
    Ok(())
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
        corral_profile::check_file(&file)?;
        outln!("{}: ok", file.display());
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
        if plan.namespaces.net == corral_profile::plan::NetMode::Host {
            warn_host_net(&format!("tenant {t}"));
        }
    }
    Ok(0)
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
    }
    Ok(0)
}
