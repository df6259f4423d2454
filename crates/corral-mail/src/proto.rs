//! The wire between `corral-sendmail` and the broker, over a SOCK_STREAM
//! unix socket: one JSON line (the sendmail command line), then the message
//! bytes up to the client's shutdown of its write side; the broker answers
//! one JSON line ([`Reply`]) and closes.

use serde::{Deserialize, Serialize};

/// The largest message the broker takes (bytes, headers included).
pub const MAX_MESSAGE: usize = 32 << 20;
/// The largest request line.
pub const MAX_LINE: usize = 64 << 10;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// sendmail's arguments, without argv[0].
    pub args: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Reply {
    /// The MTA accepted the message.
    Accepted,
    /// Not sent: the status for the caller (sysexits.h) and why.
    Refused { status: i32, reason: String },
}

/// sysexits.h codes the client exits with.
pub mod exit {
    /// Command line usage error.
    pub const USAGE: i32 = 64;
    /// Data format error (message too large, not text).
    pub const DATAERR: i32 = 65;
    /// Service unavailable (the broker is not there).
    pub const UNAVAILABLE: i32 = 69;
    /// Internal software error.
    pub const SOFTWARE: i32 = 70;
    /// Temporary failure (rate limit; try again later).
    pub const TEMPFAIL: i32 = 75;
    /// Permission denied (not a tenant the broker serves).
    pub const NOPERM: i32 = 77;
}
