//! The two requests the front sends to a tenant init and the replies it
//! reads, in the init's protocol (crates/corral-sandbox/src/proto.rs: one
//! JSON message per SOCK_SEQPACKET packet). Written out here because that
//! module needs the standard library; corral-sandbox's `front_wire` test
//! includes this file and checks both directions against `proto`.

use alloc::string::String;
use alloc::vec::Vec;
use serde::Serialize;

/// `Request::Run` (proto::RunRequest).
#[derive(Serialize)]
pub struct RunRequest<'a> {
    pub argv: &'a [String],
    pub caller_env: Vec<(&'a str, &'a str)>,
    pub extra_env: &'a [(String, String)],
    pub cwd: Option<&'a str>,
    pub nfds: u8,
    pub attrs: Option<ProcAttrs>,
}

/// proto::ProcAttrs: the caller's CPU affinity, nice value and I/O
/// priority, which the command gets.
#[derive(Serialize)]
pub struct ProcAttrs {
    pub cpus: Vec<u32>,
    pub nice: i32,
    pub ioprio: Option<u16>,
}

/// The requests, externally tagged as serde does for proto::Request.
#[derive(Serialize)]
pub enum Request<'a> {
    Run(RunRequest<'a>),
    Signal { pid: i32, signal: i32 },
}

pub fn encode(r: &Request) -> Vec<u8> {
    serde_json::to_vec(r).unwrap_or_default()
}

/// What a reply means to a foreground run.
#[derive(Debug, PartialEq)]
pub enum Reply {
    /// The command ended: its exit status as a shell reports it.
    Exited(i32),
    /// The init could not start the command (`Failed`), or refused the
    /// request (`Error`): nothing ran.
    NotStarted,
    /// `Error`, or anything else (answers to `Signal` requests).
    Other { error: bool },
}

/// A reply packet; `None` if it is not one.
pub fn decode(b: &[u8]) -> Option<Reply> {
    let v: serde_json::Value = serde_json::from_slice(b).ok()?;
    if let Some(e) = v.get("Exited") {
        let int = |k: &str| e.get(k).and_then(|x| x.as_i64()).map(|x| x as i32);
        return Some(Reply::Exited(match (int("code"), int("signal")) {
            (Some(c), _) => c,
            (None, Some(s)) => 128 + s,
            (None, None) => 128,
        }));
    }
    if v.get("Failed").is_some() {
        return Some(Reply::NotStarted);
    }
    Some(Reply::Other {
        error: v.get("Error").is_some(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_mean_what_the_full_cli_makes_of_them() {
        let d = |s: &str| decode(s.as_bytes());
        let exited = |code: &str, signal: &str| {
            d(&alloc::format!(
                r#"{{"Exited":{{"pid":2,"code":{code},"signal":{signal},"timed_out":false}}}}"#
            ))
        };
        assert_eq!(exited("7", "null"), Some(Reply::Exited(7)));
        assert_eq!(exited("null", "9"), Some(Reply::Exited(128 + 9)));
        assert_eq!(exited("null", "null"), Some(Reply::Exited(128)));
        assert_eq!(
            d(r#"{"Failed":{"step":"Resolve","errno":2}}"#),
            Some(Reply::NotStarted)
        );
        assert_eq!(
            d(r#"{"Error":{"message":"no"}}"#),
            Some(Reply::Other { error: true })
        );
        assert_eq!(d(r#""Status""#), Some(Reply::Other { error: false }));
        assert_eq!(d("{not json"), None);
    }

    #[test]
    fn requests_are_externally_tagged() {
        let s = encode(&Request::Signal { pid: 0, signal: 15 });
        assert_eq!(s, br#"{"Signal":{"pid":0,"signal":15}}"#);
    }
}
