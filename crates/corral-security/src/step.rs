//! The one report of a failure that crosses a process boundary: which
//! [`Step`] of starting a sandbox process failed, and its errno. A child
//! between fork and exec sends it as 8 bytes ([`Step::encode`],
//! allocation-free); the tenant init sends it to its clients as JSON (the
//! step by name); it is printed once, by whoever reports the error, as
//! [`Failure`]: "step: ERRNO: strerror".

use nix::errno::Errno;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Every step of starting a sandbox process that can fail, numbered for the
/// wire in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum Step {
    // The security sequence ([`crate::Prepared::apply_in_child`]), in order.
    DropBoundingSet = 1,
    Identity = 2,
    ClearAmbient = 3,
    ClearCapabilities = 4,
    NoNewPrivs = 5,
    Fds = 6,
    Seccomp = 7,
    // Starting a tenant process (corral-sandbox's `spawn`): before the
    // child exists, then in the child around the security sequence.
    /// The command is not on the sandbox's PATH.
    Resolve = 8,
    /// An argument or environment entry holds a NUL byte.
    Arguments = 9,
    /// clone/fork (EAGAIN at the process limit, ENOMEM).
    Fork = 10,
    /// Back to SCHED_OTHER from the spawner's batch policy.
    Scheduler = 11,
    Stdio = 12,
    Session = 13,
    Rlimit = 14,
    Chdir = 15,
    Exec = 16,
    // Starting a tenant init (corral-sandbox's `lifecycle` and
    // `namespaces`), in the intermediate child, then the init itself.
    JoinCgroup = 17,
    Unshare = 18,
    MapIds = 19,
    ExecInit = 20,
    /// Back to oom_score_adj 0 from the init's -999.
    OomScore = 21,
}

impl Step {
    /// The security sequence, in the order [`crate::Prepared::apply_in_child`]
    /// runs it (and docs/security.md describes it): the first seven codes.
    pub const SEQUENCE: &'static [Step] = Step::ALL.split_at(7).0;

    /// Every step, in order of their codes.
    pub const ALL: [Step; 21] = [
        Step::DropBoundingSet,
        Step::Identity,
        Step::ClearAmbient,
        Step::ClearCapabilities,
        Step::NoNewPrivs,
        Step::Fds,
        Step::Seccomp,
        Step::Resolve,
        Step::Arguments,
        Step::Fork,
        Step::Scheduler,
        Step::Stdio,
        Step::Session,
        Step::Rlimit,
        Step::Chdir,
        Step::Exec,
        Step::JoinCgroup,
        Step::Unshare,
        Step::MapIds,
        Step::ExecInit,
        Step::OomScore,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Step::DropBoundingSet => "drop the capability bounding set",
            Step::Identity => "switch uid, gid and groups",
            Step::ClearAmbient => "clear ambient capabilities",
            Step::ClearCapabilities => "clear capabilities",
            Step::NoNewPrivs => "set no_new_privs",
            Step::Fds => "close inherited file descriptors",
            Step::Seccomp => "install the seccomp filter",
            Step::Resolve => "find the command",
            Step::Arguments => "pass the arguments",
            Step::Fork => "start the child process",
            Step::Scheduler => "reset the scheduling policy",
            Step::Stdio => "set up stdio",
            Step::Session => "start a session",
            Step::Rlimit => "set rlimits",
            Step::Chdir => "change directory",
            Step::Exec => "exec",
            Step::JoinCgroup => "move into the tenant's cgroup",
            Step::Unshare => "unshare the namespaces",
            Step::MapIds => "map the user namespace's ids",
            Step::ExecInit => "exec corral-init",
            Step::OomScore => "reset oom_score_adj",
        }
    }

    /// The number the step has on the wire (see [`Step::encode`]).
    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(code: u8) -> Option<Step> {
        Step::ALL.into_iter().find(|s| s.code() == code)
    }

    /// A failure as 8 bytes for an error pipe (step code, then errno, both
    /// little-endian u32/i32). Allocation-free, so the child can send it.
    pub fn encode(self, errno: Errno) -> [u8; 8] {
        let mut out = [0u8; 8];
        let code = u32::from(self.code()).to_le_bytes();
        let errno = (errno as i32).to_le_bytes();
        let mut i = 0;
        while i < 4 {
            out[i] = code[i];
            out[4 + i] = errno[i];
            i += 1;
        }
        out
    }

    /// The inverse of [`Step::encode`]; `None` for an unknown step code.
    pub fn decode(bytes: [u8; 8]) -> Option<(Step, Errno)> {
        let [c0, c1, c2, c3, e0, e1, e2, e3] = bytes;
        let code = u8::try_from(u32::from_le_bytes([c0, c1, c2, c3])).ok()?;
        Some((
            Step::from_code(code)?,
            Errno::from_raw(i32::from_le_bytes([e0, e1, e2, e3])),
        ))
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A step that failed, with its errno: "exec: ENOENT: No such file or
/// directory".
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{step}: {errno}")]
pub struct Failure {
    pub step: Step,
    pub errno: Errno,
}

impl Failure {
    pub fn new(step: Step, errno: Errno) -> Failure {
        Failure { step, errno }
    }

    /// As received over the wire (an errno as a number).
    pub fn from_raw(step: Step, errno: i32) -> Failure {
        Failure::new(step, Errno::from_raw(errno))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_round_trip_through_the_wire_format() {
        for step in Step::ALL {
            for errno in [Errno::EPERM, Errno::EINVAL, Errno::ENOSYS] {
                assert_eq!(Step::decode(step.encode(errno)), Some((step, errno)));
            }
        }
        assert_eq!(Step::decode([0, 0, 0, 0, 1, 0, 0, 0]), None);
        assert_eq!(Step::decode([1, 1, 0, 0, 1, 0, 0, 0]), None);
        assert_eq!(Step::decode([22, 0, 0, 0, 1, 0, 0, 0]), None);
        let codes: Vec<u8> = Step::ALL.iter().map(|s| s.code()).collect();
        assert_eq!(
            codes,
            (1..=21).collect::<Vec<u8>>(),
            "codes follow the order"
        );
    }

    #[test]
    fn the_sequence_is_the_security_steps() {
        assert_eq!(Step::SEQUENCE.first(), Some(&Step::DropBoundingSet));
        assert_eq!(Step::SEQUENCE.last(), Some(&Step::Seccomp));
        assert_eq!(Step::SEQUENCE.len(), 7);
    }

    #[test]
    fn steps_travel_by_name_and_print_with_strerror() {
        for step in Step::ALL {
            let json = serde_json::to_string(&step).unwrap();
            assert_eq!(json, format!("\"{step:?}\""));
            assert_eq!(serde_json::from_str::<Step>(&json).unwrap(), step);
        }
        assert_eq!(
            Failure::from_raw(Step::Exec, libc::ENOENT).to_string(),
            "exec: ENOENT: No such file or directory"
        );
        assert_eq!(
            Failure::new(Step::Unshare, Errno::EPERM).to_string(),
            "unshare the namespaces: EPERM: Operation not permitted"
        );
    }
}
