//! `corral suspend` / `corral unsuspend`: an operator stops a tenant (an
//! unpaid bill, a hacked site) without losing anything, and resumes it
//! exactly.
//!
//! The decision is kept in the configuration directory
//! (`corral_profile::suspend`), so it survives restarts, reboots and a wiped
//! state dir. While it holds, every way in refuses: `corral run`, `up`,
//! `restart` and the services exit with 77 and the reason; the gateway
//! answers 503 with its suspended page; logins are refused. A running
//! sandbox is not taken down: its init stops every process in it (SIGSTOP)
//! and starts no new one; `unsuspend` continues them (SIGCONT), so a job
//! picks up where it was.

use crate::ctx::Ctx;
use crate::out::outln;
use corral_profile::suspend::{self, Suspension};
use corral_sandbox::proto::{Reply, Request};

/// Tell a running init; false when the tenant is not up.
fn tell_init(ctx: &Ctx, tenant: &str, on: bool) -> anyhow::Result<bool> {
    let Some(client) = crate::ctx::init_client(ctx, tenant)? else {
        return Ok(false);
    };
    match client.call(&Request::Suspend { on }, &[]) {
        Ok(Reply::Status(_)) => Ok(true),
        Ok(Reply::Error { message }) => anyhow::bail!("{tenant}: {message}"),
        Ok(other) => anyhow::bail!("{tenant}: unexpected answer of the tenant init: {other:?}"),
        Err(e) => anyhow::bail!(
            "{tenant}: the tenant init did not answer ({e}); a sandbox built by an older corral: \
             `corral down {tenant}` (the suspension is recorded and holds)"
        ),
    }
}

pub fn suspend(ctx: &Ctx, tenant: &str, reason: Option<String>) -> anyhow::Result<i32> {
    crate::ctx::check_tenant_name(tenant)?;
    // A tenant that does not exist cannot be suspended (a typo would
    // otherwise leave a record nobody sees).
    corral_profile::load(&ctx.config_dir, tenant)?;
    // "2026-11-25T03:10:00.123Z " -> "2026-11-25 03:10 UTC".
    let t = corral_sandbox::services::log::timestamp(std::time::SystemTime::now());
    let since = format!("{} {} UTC", &t[..10], &t[11..16]);
    let s = Suspension {
        reason: reason.unwrap_or_else(|| "suspended by the operator".into()),
        since,
    };
    let path = suspend::record(&ctx.config_dir, tenant, &s)?;
    let live = tell_init(ctx, tenant, true)?;
    outln!(
        "{tenant}: suspended ({}), recorded in {}{}",
        s.reason,
        path.display(),
        if live {
            "; its processes are stopped"
        } else {
            ""
        }
    );
    Ok(0)
}

pub fn unsuspend(ctx: &Ctx, tenant: &str) -> anyhow::Result<i32> {
    crate::ctx::check_tenant_name(tenant)?;
    let was = suspend::clear(&ctx.config_dir, tenant)?;
    let live = tell_init(ctx, tenant, false)?;
    match (was, live) {
        (false, _) => outln!("{tenant}: was not suspended"),
        (true, true) => outln!("{tenant}: resumed; its processes continue"),
        (true, false) => outln!("{tenant}: no longer suspended"),
    }
    Ok(0)
}
