//! Entering a tenant's sandbox from a login: bring it up on first use (with
//! the `corral` binary, as `corral up` would), then either enter with the
//! calling process and harden it ([`enter_session`], for the PAM module),
//! or hand the pieces to `corral-shell` ([`target`]).

use crate::config::AccessConfig;
use corral_sandbox::join::{self, Entered, JoinError, Target};
use corral_sandbox::state::Layout;
use corral_security::Errno;
use std::process::{Command, Stdio};

/// A caged user, as the login names it.
pub type Tenant = corral_users::User;

#[derive(Debug, thiserror::Error)]
pub enum EnterError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// `corral up` failed; its own last words (another process's stderr).
    #[error("{tenant}: the sandbox could not be brought up: {message}")]
    Up { tenant: String, message: String },
    #[error("{tenant}: cannot run {corral}: {source}")]
    Exec {
        tenant: String,
        corral: String,
        source: std::io::Error,
    },
    #[error("{tenant}: {source}")]
    Join {
        tenant: String,
        #[source]
        source: JoinError,
    },
    #[error("{tenant}: harden the session ({step}): {errno}")]
    Harden {
        tenant: String,
        step: &'static str,
        errno: Errno,
    },
    #[error("{tenant}: {source}")]
    Security {
        tenant: String,
        #[source]
        source: corral_security::SecurityError,
    },
    /// `corral suspend`: the login is refused.
    #[error(transparent)]
    Suspended(#[from] corral_profile::suspend::Suspended),
    #[error("no passwd entry for uid {0}")]
    NoUser(u32),
    #[error("user database: {0}")]
    Users(#[source] std::io::Error),
}

/// The tenant's running sandbox, brought up with `corral up` if it is not.
pub fn target(cfg: &AccessConfig, tenant: &str) -> Result<Target, EnterError> {
    corral_profile::suspend::check(&cfg.config_dir, tenant)?;
    let layout = Layout::new(&cfg.state_dir);
    let join_err = |source| EnterError::Join {
        tenant: tenant.into(),
        source,
    };
    match join::load(&layout, tenant) {
        Ok(t) => Ok(t),
        Err(JoinError::NotUp(_)) => {
            bring_up(cfg, tenant)?;
            join::load(&layout, tenant).map_err(join_err)
        }
        Err(e) => Err(join_err(e)),
    }
}

/// `corral up TENANT` with the config's directories, a clean environment
/// and no terminal: the login's environment must not steer it.
fn bring_up(cfg: &AccessConfig, tenant: &str) -> Result<(), EnterError> {
    // The process opening the session may reap its children itself
    // (a SIGCHLD handler or SIG_IGN in sshd, cron or su), which would take
    // corral's exit status from us: the default disposition meanwhile.
    let _sigchld = DefaultSigchld::set();
    let out = Command::new(&cfg.corral)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .arg("--state-dir")
        .arg(&cfg.state_dir)
        .arg("--config-dir")
        .arg(&cfg.config_dir)
        .arg("--cgroup-parent")
        .arg(&cfg.cgroup_parent)
        .args(["up", "--", tenant])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|source| EnterError::Exec {
            tenant: tenant.into(),
            corral: cfg.corral.display().to_string(),
            source,
        })?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stderr);
    let message = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim_start_matches("corral: ").to_string())
        .unwrap_or_else(|| format!("corral up exited with {}", out.status));
    Err(EnterError::Up {
        tenant: tenant.into(),
        message,
    })
}

/// SIGCHLD at its default disposition while this lives; the previous one
/// is put back on drop.
struct DefaultSigchld(Option<nix::sys::signal::SigAction>);

impl DefaultSigchld {
    fn set() -> DefaultSigchld {
        use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
        let dfl = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
        // SAFETY: installing the default disposition runs no code of ours.
        DefaultSigchld(unsafe { sigaction(Signal::SIGCHLD, &dfl) }.ok())
    }
}

impl Drop for DefaultSigchld {
    fn drop(&mut self) {
        if let Some(old) = &self.0 {
            // SAFETY: restoring the disposition the process had before.
            unsafe { nix::sys::signal::sigaction(nix::sys::signal::Signal::SIGCHLD, old) }.ok();
        }
    }
}

/// What a session module keeps after [`enter_session`].
pub struct Session {
    /// Holds the entry-process slot for as long as the session lives.
    pub entered: Entered,
    /// The profile's `env.set`, for the session's environment.
    pub env: Vec<(String, String)>,
}

/// Put the calling process, the one that opens a login session (sshd's
/// monitor, cron's job runner, su), into the tenant's sandbox, so that every
/// process it starts for the session is born inside: entry slot, cgroup,
/// namespaces ([`join::enter`]), the plan's rlimits, then the hardening
/// `corral run` applies to a command, as far as it fits a process that goes
/// on as root to start the session: an empty capability bounding set (the
/// user's programs can gain no capability), no_new_privs (no setuid
/// program works inside), every descriptor above stdio close-on-exec, and
/// the tenant's seccomp filter, inherited by everything the session runs.
/// The process must be single-threaded.
pub fn enter_session(cfg: &AccessConfig, tenant: &str) -> Result<Session, EnterError> {
    let t = target(cfg, tenant)?;
    let layout = Layout::new(&cfg.state_dir);
    let entered = join::enter(&layout, &t).map_err(|source| EnterError::Join {
        tenant: tenant.into(),
        source,
    })?;
    let harden = |step: &'static str| {
        move |errno: Errno| EnterError::Harden {
            tenant: tenant.into(),
            step,
            errno,
        }
    };
    for &(res, soft, hard) in &entered.rlimits {
        let lim = libc::rlimit {
            rlim_cur: soft,
            rlim_max: hard,
        };
        // SAFETY: a pointer to an rlimit on the stack.
        if unsafe { libc::setrlimit(res as _, &lim) } < 0 {
            return Err(harden("rlimit")(Errno::last()));
        }
    }
    let last_cap = corral_security::caps::last_cap().map_err(|source| EnterError::Security {
        tenant: tenant.into(),
        source,
    })?;
    corral_security::caps::drop_bounding_set(last_cap)
        .map_err(harden("capability bounding set"))?;
    corral_security::caps::clear_ambient().map_err(harden("ambient capabilities"))?;
    corral_security::caps::set_no_new_privs().map_err(harden("no_new_privs"))?;
    corral_security::fds::cloexec_fds_from(3).map_err(harden("close-on-exec"))?;
    if let Some(filter) = entered.security.filter() {
        filter.apply().map_err(harden("seccomp"))?;
    }
    let env = t
        .plan
        .env
        .set
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Ok(Session { entered, env })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A session process that ignores SIGCHLD (children reaped by the
    /// kernel) still gets `corral up`'s status and last words.
    #[test]
    fn bring_up_reports_corral_up_s_failure_even_with_sigchld_ignored() {
        use nix::sys::signal::{signal, SigHandler, Signal};
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("corral");
        std::fs::write(
            &fake,
            "#!/bin/sh\necho \"args: $*\" >&2\necho 'corral: profile.toml:3:1: bad' >&2\nexit 3\n",
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let cfg = AccessConfig {
            corral: fake,
            ..AccessConfig::default()
        };
        // SAFETY: SIG_IGN runs no code; restored below.
        let old = unsafe { signal(Signal::SIGCHLD, SigHandler::SigIgn) }.unwrap();
        let r = bring_up(&cfg, "alice");
        // SAFETY: restoring the previous disposition.
        unsafe { signal(Signal::SIGCHLD, old) }.unwrap();
        match r {
            Err(EnterError::Up { tenant, message }) => {
                assert_eq!(tenant, "alice");
                assert_eq!(message, "profile.toml:3:1: bad");
            }
            other => panic!("expected EnterError::Up, got {other:?}"),
        }
    }
}
