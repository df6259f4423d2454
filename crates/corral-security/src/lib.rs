//! corral-security: what makes a tenant process unprivileged between fork
//! and exec: capability bounding set, uid/gid/groups, capabilities,
//! no_new_privs, inherited descriptors, and a seccomp filter.
//!
//! Each feature is split in two. *Prepare* runs before fork and may allocate,
//! read files and fail with a [`SecurityError`]. *Apply* runs in the forked
//! child and is async-signal-safe: raw system calls only, no allocation, no
//! locks, because the parent may be multi-threaded (a tokio gateway) and the
//! child inherits only a snapshot of its locks and allocator state.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let plan: corral_profile::plan::SeccompPlan = unimplemented!();
//! let prepared = corral_security::prepare(&plan, 1000, 1000, &[1000])?;
//! // SAFETY: the child only runs allocation-free code, then execs or _exits.
//! match unsafe { libc::fork() } {
//!     0 => {
//!         // ... join the sandbox's namespaces ...
//!         if let Err((step, errno)) = prepared.apply_in_child() {
//!             let _report = step.encode(errno); // write it to the error pipe
//!             // SAFETY: leaves the child without running the parent's
//!             // destructors or atexit handlers.
//!             unsafe { libc::_exit(127) };
//!         }
//!         // ... execve ...
//!         # Ok(())
//!     }
//!     _pid => { /* read the error pipe, wait */ Ok(()) }
//! }
//! # }
//! ```
//!
//! The order of the steps and the deny list are explained in
//! docs/security.md.

pub mod caps;
pub mod error;
pub mod fds;
pub mod identity;
pub mod seccomp;
mod sequence;
pub mod step;
mod sys;
pub mod syscalls;

pub use error::SecurityError;
pub use nix::errno::Errno;
pub use seccomp::{default_deny_list, Filter};
pub use sequence::{prepare, FdAction, Prepared};
pub use step::{Failure, Step};
