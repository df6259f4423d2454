//! Protocol layer of corral's FastCGI gateway (the fcgiwrap replacement that
//! runs CGI scripts inside tenant sandboxes).
//!
//! This crate only speaks protocols; it does no I/O and makes no policy
//! decisions:
//!
//! * [`record`] — FastCGI 1.0 records (§3.3, §5): header, an incremental
//!   [`RecordDecoder`] and the record encoders.
//! * [`params`] — FastCGI name-value pairs (§3.4), decoded across several
//!   `FCGI_PARAMS` records with memory limits.
//! * [`request`] — the per-connection state machine
//!   [`Connection`]: request ids, roles,
//!   multiplexing and management records (§3.3, §4, §5, §6.2).
//! * [`cgi`] — the CGI/1.1 response side (RFC 3875 §6): parsing the script's
//!   header block and re-serialising it for the web server.
//! * [`env`](mod@env) — building a CGI environment from FastCGI params.
//!
//! Every parser here accepts arbitrary bytes without panicking and with
//! bounded memory; they are fuzzed (see `fuzz/` at the repository root).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cgi;
pub mod env;
pub mod params;
pub mod record;
pub mod request;

pub use cgi::{
    cgi_head_to_fastcgi_stdout, error_response, CgiError, CgiHead, CgiHeaderParser, Redirect,
};
pub use env::{cgi_env_from_params, CgiEnv, DropReason, DroppedParam, EnvVar};
pub use params::{ParamsDecoder, ParamsError, ParamsLimits};
pub use record::{
    DecodeError, EncodeError, ProtocolStatus, Record, RecordDecoder, RecordHeader, RecordType, Role,
};
pub use request::{Connection, ConnectionConfig, ConnectionError, Event, RequestEnded};
