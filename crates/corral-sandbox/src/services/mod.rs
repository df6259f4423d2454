//! Supervised per-tenant services (`[services.NAME]` of the profile): a
//! PHP-FPM pool, an app server... run as the tenant inside its sandbox.
//!
//! - [`host`]: `corral up` creates each service's listening sockets on the
//!   host (root-owned, group and mode from the profile) and opens its log
//!   directory, and hands both to the init with the plan. The sockets exist
//!   from `up` to `down`, whether the service runs or not.
//! - [`supervisor`]: the init (pid 1 of the sandbox) starts the services
//!   (at `up`, or on the first connection for socket activation), passes
//!   them the sockets as fds 3, 4, ... (`LISTEN_FDS`/`LISTEN_PID`, and
//!   `FPM_SOCKETS` for PHP-FPM), restarts them with back-off, stops idle
//!   ones, and writes their output to the log ([`log`]).

pub mod host;
pub mod log;
pub mod supervisor;

pub use supervisor::Supervisor;

/// Most fds (sockets and log directories) a sandbox's services take.
pub const MAX_FDS: usize = 64;
