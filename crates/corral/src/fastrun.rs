//! Steps of a foreground `corral run` that `cmd/run.rs` takes, and that
//! the lean `corral` program (crates/corral-front) takes in the same order
//! on its fast path: the `--env` values, the choice of the setns join, the
//! exit status.

use corral_sandbox::join::JoinError;

/// `--env NAME=VALUE` values as pairs ([`crate::runline::env_pairs`], the
/// rule the lean `corral` shares).
pub fn parse_env(v: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    crate::runline::env_pairs(v).map_err(|s| anyhow::anyhow!("--env {s:?}: expected NAME=VALUE"))
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
