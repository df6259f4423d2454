//! Errors from the *prepare* half (before fork). The *apply* half reports a
//! bare [`nix::errno::Errno`] (and a [`crate::Step`]) because it must not
//! allocate.

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    /// A name in the plan's `deny` or `allow` list is not a system call of
    /// this architecture (a typo would otherwise silently leave it allowed).
    #[error("unknown system call {0:?} in the seccomp allow/deny list")]
    UnknownSyscall(String),

    /// The plan denies a system call without which no process can start or
    /// exit, so every tenant process would fail in a confusing way.
    #[error("refusing to deny {0:?}: a tenant process cannot start or exit without it")]
    EssentialSyscall(String),

    /// A syscall number that does not fit a BPF comparison (should not
    /// happen for the numbers of the syscall table).
    #[error("compiling the seccomp filter: syscall number {0}")]
    SyscallNumber(i64),

    /// An argument value or mask of a rule beyond the low 32 bits the
    /// filter compares (should not happen for the rules corral carries).
    #[error("compiling the seccomp filter: value {value:#x} for syscall {nr} does not fit the 32 bits the filter compares")]
    ArgumentValue { nr: i64, value: u64 },

    /// The kernel accepts at most `BPF_MAXINSNS` (4096) instructions.
    #[error("the seccomp filter has {0} instructions; the kernel accepts at most 4096")]
    FilterTooLarge(usize),

    /// corral only carries a system call table for x86_64 so far.
    #[error("seccomp filters are only built for x86_64, not {0}")]
    UnsupportedArch(&'static str),

    /// Tenant processes never run as root: uid 0, gid 0 or group 0 requested.
    #[error("refusing to run a tenant process with uid {uid}, gid {gid}, groups {groups:?}: id 0 is root's")]
    RootIdentity {
        uid: u32,
        gid: u32,
        groups: Vec<u32>,
    },

    /// More supplementary groups than the kernel accepts (`NGROUPS_MAX`).
    #[error("{0} supplementary groups; the kernel accepts at most 65536")]
    TooManyGroups(usize),

    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}
