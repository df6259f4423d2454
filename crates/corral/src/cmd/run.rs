//! `corral run`: foreground (join the namespaces) or --detach (a service of
//! the tenant init).

use crate::cli::RunArgs;
use crate::ctx::Ctx;
use corral::fastrun::{exit_status, parse_env, wants_setns};
use corral_sandbox::client::Client;
use corral_sandbox::join::{self, JoinError, RunOptions, Target};
use corral_sandbox::proto::{Failure, Reply, Request, SpawnRequest};
use corral_sandbox::via_init;

use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

/// Load the join target, bringing the tenant up on first use.
pub fn target(ctx: &Ctx, tenant: &str) -> anyhow::Result<Target> {
    join::load_or_up(&ctx.layout, tenant, || {
        super::tenants::up_one(ctx, tenant).map(drop)
    })
}

pub fn run(ctx: &Ctx, a: RunArgs) -> anyhow::Result<i32> {
    crate::ctx::check_tenant_name(&a.tenant)?;
    // One stat: a suspended tenant's sandbox may be up (stopped) and would
    // otherwise take the command.
    corral_profile::suspend::check(&ctx.config_dir, &a.tenant)?;
    let env = parse_env(&a.env)?;
    // Preserved fds must really be the caller's: checked before corral opens
    // any fd of its own, which could otherwise land in that range.
    let keep = 3 + i32::from(a.preserve_fds);
    for fd in 3..keep {
        // SAFETY: F_GETFD/F_GETFL only query the descriptor table.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        anyhow::ensure!(
            flags >= 0,
            "--preserve-fds {}: fd {fd} is not open",
            a.preserve_fds
        );
        // A directory (or O_PATH) fd would be a handle on the host's tree.
        let dir = nix::sys::stat::fstat(fd)
            .map(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
            .unwrap_or(true);
        anyhow::ensure!(!dir && flags & libc::O_PATH == 0, "--preserve-fds: fd {fd} is a directory or O_PATH descriptor; only files, pipes and sockets may be passed");
    }
    // Nothing else the caller leaked may reach the tenant or corral itself.
    corral_security::fds::close_fds_from(keep)
        .map_err(|e| anyhow::anyhow!("close inherited fds: {e}"))?;
    // Spawning through the init is the faster path (see via_init);
    // an interactive terminal or extra fds need the setns join instead.
    let setns = wants_setns(a.preserve_fds);
    if a.detach {
        let t = target(ctx, &a.tenant)?;
        return detach(ctx, &t, &a, env);
    }
    let opts = RunOptions {
        argv: a.command,
        cwd: a.cwd,
        env,
        preserve_fds: i32::from(a.preserve_fds),
    };
    if !setns {
        // A running sandbox: straight to its init (via_init::run_fast).
        // (The name was checked on entry.)
        match via_init::run_fast(&ctx.layout, &a.tenant, &opts) {
            Ok(Some(code)) => return Ok(code),
            Ok(None) => {}
            Err(e) => return finish(&a.tenant, Err(e)),
        }
    }
    let t = target(ctx, &a.tenant)?;
    let result = if setns {
        join::run(&ctx.layout, &t, &opts)
    } else {
        via_init::run_via_init(&ctx.layout, &t, &opts)
    };
    finish(&a.tenant, result)
}

/// A foreground run's outcome as corral's exit status
/// ([`corral::fastrun::exit_status`], which the lean `corral` uses too).
fn finish(tenant: &str, result: Result<i32, JoinError>) -> anyhow::Result<i32> {
    Ok(exit_status(tenant, result)?)
}

fn detach(ctx: &Ctx, t: &Target, a: &RunArgs, extra: Vec<(String, String)>) -> anyhow::Result<i32> {
    let dir = ctx.layout.tenant(&t.state.tenant);
    let devnull = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    let out = match &a.log {
        Some(p) => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o640)
            .open(p)
            .map_err(|e| anyhow::anyhow!("--log {}: {e}", p.display()))?,
        None => devnull.try_clone()?,
    };
    let env = corral_sandbox::spawn::environment(&t.plan, std::env::vars(), &extra);
    let req = SpawnRequest {
        argv: a.command.clone(),
        env,
        cwd: a
            .cwd
            .clone()
            .unwrap_or_else(|| t.plan.workdir.to_string_lossy().into_owned()),
        timeout_ms: 0,
        detach: true,
        announce: true,
        nfds: 3,
        attrs: None,
        keep: false,
    };
    let c = Client::connect(&dir.control())
        .map_err(|e| anyhow::anyhow!("connect to {}: {e}", dir.control().display()))?;
    match c.call(
        &Request::Spawn(req),
        &[devnull.as_raw_fd(), out.as_raw_fd(), out.as_raw_fd()],
    )? {
        Reply::Spawned { pid } => {
            if ctx.json {
                crate::out::outln!(
                    "{}",
                    serde_json::json!({"tenant": t.state.tenant, "pid": pid})
                );
            } else {
                crate::out::outln!(
                    "{}: started pid {pid} (pid inside the sandbox)",
                    t.state.tenant
                );
            }
            Ok(0)
        }
        Reply::Failed { step, errno } => {
            anyhow::bail!("{}: {}", t.state.tenant, Failure::from_raw(step, errno))
        }
        other => anyhow::bail!("unexpected answer from the tenant init: {other:?}"),
    }
}
