//! corral sandboxes: a tenant's namespaces and rootfs, built once by a tiny
//! per-tenant init, persisted as namespace files, and joined in O(1).
//!
//! profile → plan → [`lifecycle::up`] ([`namespaces`], [`rootfs`], [`init`])
//! → `corral run` through the init ([`via_init`]) or by setns ([`join`]) /
//! [`client::Client`] spawns → [`lifecycle::down`].

pub mod client;
pub mod forward;
mod fsutil;
pub mod init;
pub mod join;
pub mod lifecycle;
pub mod namespaces;
pub mod net;
pub mod phases;
pub mod proto;
pub mod quota;
pub mod rootfs;
pub mod services;
pub mod source;
pub mod spawn;
pub mod state;
pub mod via_init;

pub use lifecycle::{down, stop_ahead, up, SandboxError, UpOptions, UpOutcome};
pub use state::{InitWatch, Layout};
