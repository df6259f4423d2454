//! corral-access: every login path into a tenant's sandbox.
//!
//! A tenant reaches the server through SSH (a shell, `ssh host CMD`, scp,
//! the sftp-server subsystem), cron and su/runuser, besides CGI and `corral
//! run`. Two mechanisms put those sessions into the tenant's persisted
//! sandbox and cgroup (docs/access.md):
//!
//! - `pam_corral.so` (crate `pam-corral`), a PAM session module: the process
//!   that opens the session (sshd's monitor, cron's job runner, su) enters
//!   the sandbox itself ([`session::enter_session`]) and hardens itself the
//!   way `corral run` hardens a command (empty capability bounding set,
//!   no_new_privs, seccomp filter, descriptors close-on-exec), so every
//!   process it starts for the user is born inside;
//! - `corral-shell`, a setuid-root login shell ([`shell`]): it enters the
//!   sandbox, gives an interactive session a terminal of the sandbox's own
//!   ([`pty`]), and runs the tenant's real shell there as the tenant.
//!
//! [`config`] decides who is caged; both fail closed: a caged user whose
//! sandbox cannot be entered gets no session at all.

pub mod config;
pub mod pty;
pub mod session;
pub mod shell;

pub use config::{AccessConfig, ConfigError};
pub use session::{EnterError, Tenant};
