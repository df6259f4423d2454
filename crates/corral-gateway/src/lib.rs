//! corral's FastCGI gateway: a FastCGI responder (the role fcgiwrap plays
//! behind nginx) that runs each CGI script inside its tenant's persisted
//! sandbox, through the tenant init's control socket — no namespace build
//! and no extra exec per request.
//!
//! A request goes: [`conn`] (FastCGI records, via `corral_fastcgi`) →
//! [`request`] → [`tenants::Tenants::prepare`] ([`safety`] checks with the
//! [`map`], sandbox up, entry slot) → [`control`] (spawn with three pipes
//! and the [`cgienv`] environment) → stdout parsed as a CGI response and
//! streamed back, stderr logged, stdin streamed in.
//!
//! [`safety`] and [`map`] are also used by `corral cgi`, the wrapper for
//! servers without FastCGI.

pub mod cgienv;
mod conn;
pub mod control;
pub mod fsid;
mod link;
pub mod log;
pub mod map;
pub mod peer;
mod request;
pub mod safety;
pub mod server;
pub mod tenants;
pub mod users;

pub use map::TenantMap;
pub use server::{parse_web_server_addrs, run, run_blocking, Listen, Options, SUSPENDED_PAGE};
pub use tenants::{Failure, Sandboxes};

/// The protocol crate, for the `corral cgi` wrapper (error pages, CGI environment).
pub use corral_fastcgi as fastcgi;
