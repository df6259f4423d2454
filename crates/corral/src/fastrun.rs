//! `corral run` on a running sandbox, answered by the lean `corral` program
//! without the full CLI: read the plain command line ([`RunLine`]), check
//! the tenant name and its suspension, close inherited fds, and hand the
//! command to the tenant init ([`via_init::run_fast`]). Any other case (not
//! up, a terminal on stdin, `--preserve-fds`, `--detach`, a line only clap
//! reads, any error before the request is sent) is declined before anything
//! is started, and the full CLI answers it from the start, with the same
//! messages and exit statuses as ever (`cmd/run.rs` takes the same steps in
//! the same order).

use crate::runline::{run_command_args, RunLine};
use corral_sandbox::join::{JoinError, RunOptions};
use corral_sandbox::{via_init, Layout};
use std::ffi::OsString;

/// `--env NAME=VALUE` values as pairs.
pub fn parse_env(v: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    v.iter()
        .map(|s| match s.split_once('=') {
            Some((k, val)) if !k.is_empty() => Ok((k.to_string(), val.to_string())),
            _ => anyhow::bail!("--env {s:?}: expected NAME=VALUE"),
        })
        .collect()
}

/// Whether a foreground `corral run` takes the setns join instead of the
/// init's spawn: an interactive terminal (it becomes the command's
/// controlling terminal), extra fds, or `CORRAL_RUN_SETNS` set.
pub fn wants_setns(preserve_fds: u16) -> bool {
    // SAFETY: isatty only queries fd 0.
    let interactive = unsafe { libc::isatty(0) } == 1;
    interactive || preserve_fds > 0 || std::env::var_os("CORRAL_RUN_SETNS").is_some()
}

/// A foreground run's outcome as corral's exit status: the command's own,
/// or the entry-limit and could-not-start statuses (said on stderr here);
/// other errors are the caller's to report (status 125).
pub fn exit_status(tenant: &str, result: Result<i32, JoinError>) -> Result<i32, JoinError> {
    match result {
        Ok(code) => Ok(code),
        Err(e @ JoinError::EntryLimit { .. }) => {
            eprintln!("corral: {e}");
            Ok(crate::EXIT_ENTRY_LIMIT)
        }
        Err(JoinError::Spawn(e)) => {
            eprintln!("corral: {tenant}: {e}");
            Ok(e.exit_code())
        }
        Err(e) => Err(e),
    }
}

/// `corral`'s command line (`argv[0]` included) answered on the fast path:
/// `Some(exit status)` once the tenant init took the command; `None` when
/// declined, with nothing started (the caller runs the full CLI).
pub fn answer(argv: &[OsString]) -> Option<i32> {
    let args = run_command_args(argv.get(1..)?)?;
    let line = RunLine::parse(&args, |v| std::env::var_os(v))?;
    if line.detach || line.preserve_fds > 0 {
        return None;
    }
    corral_users::check_user_name(&line.tenant).ok()?;
    corral_profile::suspend::check(&line.config_dir, &line.tenant).ok()?;
    let env = parse_env(&line.env).ok()?;
    // As `cmd/run.rs`: nothing the caller leaked reaches the tenant or
    // corral (the full CLI, if it answers after all, closes them too).
    corral_security::fds::close_fds_from(3).ok()?;
    if wants_setns(0) {
        return None;
    }
    let opts = RunOptions {
        argv: line.command,
        cwd: line.cwd,
        env,
        preserve_fds: 0,
    };
    let result = match via_init::run_fast(&Layout::new(&line.state_dir), &line.tenant, &opts) {
        Ok(None) => return None,
        Ok(Some(code)) => Ok(code),
        Err(e) => Err(e),
    };
    Some(match exit_status(&line.tenant, result) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("corral: {}", crate::error_line(&e.into()));
            crate::EXIT_FAILURE
        }
    })
}
