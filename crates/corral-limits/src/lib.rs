//! corral-limits: per-tenant resource limits.
//!
//! - [`Limits`]: typed limits parsed from a plan's `[limits]` (with file and
//!   line in errors) or set key by key.
//! - [`Backend`] and [`TenantCgroup`]: the tenant's cgroup on cgroup v2 or
//!   v1 (hybrid hosts), with limits applied live, usage and fault counters.
//! - [`EntrySlots`]: concurrent entry process limit, across processes.
//! - [`Limits::rlimits`]: setrlimit values for a new process.
//!
//! See docs/limits.md for keys, units and the backend mapping.

mod apply;
mod backend;
mod cgroup;
mod device;
pub mod entry;
mod entry_pool;
mod error;
mod fsutil;
pub mod kept;
mod spec;
mod stats;
#[cfg(test)]
mod testfs;
mod value;

pub use apply::{Step, CPU_PERIOD_US};
pub use backend::{Backend, Controller, Kind, DEFAULT_PARENT};
pub use cgroup::{open_self_entry, TenantCgroup, KILL_TIMEOUT, RMDIR_TIMEOUT};
pub use device::DeviceId;
pub use entry::{EntryError, EntryGuard, EntrySlots, EntryWatch, HeldLocks};
pub use entry_pool::{PooledEntry, SlotPool};
pub use error::{CgroupError, LimitError, Problem, Result};
pub use kept::{FdBudget, KeptFile, Stamp, NOFILE_RESERVE, NOFILE_WANTED};
pub use spec::{IoLimits, Limits, Rlimits, KEYS};
pub use stats::{CgroupReader, Faults, Usage};
pub use value::format_size;
