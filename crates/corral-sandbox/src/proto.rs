//! The init's control protocol: typed messages over a SOCK_SEQPACKET unix
//! socket that only the host side can reach (the socket file lives in the
//! state dir, which is never mounted into the sandbox; the init also checks
//! SO_PEERCRED). One JSON message per packet; stdio fds travel as
//! SCM_RIGHTS next to a `Spawn`.
//!
//! A connection serves one request to its end: once nothing it started
//! runs any more (its last `Exited` is sent), the init closes it, unless
//! the request asked to keep it ([`SpawnRequest::keep`]: the gateway's
//! pooled connections, which then carry the next request). When the client
//! closes it first, the init kills whatever it started that is not a
//! detached service.

pub use corral_security::{Failure, Step};
use serde::{Deserialize, Serialize};

/// Bumped whenever a message changes shape; `corral up` does not reuse a
/// sandbox whose init speaks another version: it takes it down and builds
/// it anew.
pub const VERSION: u32 = 5;
/// Largest message either side sends.
pub const MAX_MESSAGE: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpawnRequest {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Working directory inside the sandbox.
    pub cwd: String,
    /// Kill the process group after this many milliseconds (0 = never).
    pub timeout_ms: u64,
    /// A service: the init keeps it after the client goes away.
    pub detach: bool,
    /// Reply `Spawned { pid }` as soon as the command has exec'd (always on
    /// for `detach`). Without it the only reply is `Exited`, or `Failed` if
    /// the command could not be started: one message and one wake-up less
    /// per spawn for clients that only wait for the end (`corral run`, the
    /// gateway); they signal their command with `Signal { pid: 0, .. }`.
    #[serde(default)]
    pub announce: bool,
    /// How many fds (stdin, stdout, stderr, in order) ride with the message;
    /// missing ones become /dev/null.
    pub nfds: u8,
    /// The caller's CPU affinity, nice value and I/O priority, which the
    /// command takes (bounded: see [`ProcAttrs`]); None: the init's.
    #[serde(default)]
    pub attrs: Option<ProcAttrs>,
    /// Keep the connection open once the command has exited (its `Exited`
    /// sent), for the client's next request: the gateway keeps a few idle
    /// connections per init instead of connecting for every request. A
    /// client that sees its request end otherwise (no `Exited`) closes the
    /// connection, which kills whatever it started, as without `keep`. An
    /// init that predates the field ignores it and closes the connection
    /// (the client's next send on it fails, and it connects anew).
    #[serde(default)]
    pub keep: bool,
}

/// Process attributes a command takes from whoever asked for it (`corral
/// run`), as a child of that process would: CPU affinity (within the
/// sandbox's cpuset), nice value (never below 0: a root caller's negative
/// nice is not the tenant's to keep) and I/O priority (the real-time class
/// becomes best-effort).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProcAttrs {
    /// CPUs the caller may run on; empty: no change.
    pub cpus: Vec<u32>,
    pub nice: i32,
    /// ioprio_get()'s value (class << 13 | data); None: no change.
    pub ioprio: Option<u16>,
}

impl ProcAttrs {
    /// This process's attributes.
    pub fn of_self() -> ProcAttrs {
        let cpus = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
            .map(|set| {
                (0..nix::sched::CpuSet::count() as u32)
                    .filter(|&c| set.is_set(c as usize).unwrap_or(false))
                    .collect()
            })
            .unwrap_or_default();
        // SAFETY: getpriority takes integers; errno distinguishes -1.
        let nice = unsafe {
            *libc::__errno_location() = 0;
            let n = libc::getpriority(libc::PRIO_PROCESS, 0);
            if n == -1 && *libc::__errno_location() != 0 {
                0
            } else {
                n
            }
        };
        // SAFETY: ioprio_get(IOPRIO_WHO_PROCESS, 0) takes integers.
        let io = unsafe { libc::syscall(libc::SYS_ioprio_get, 1, 0) };
        ProcAttrs {
            cpus,
            nice,
            ioprio: u16::try_from(io).ok(),
        }
    }

    /// This process's attributes, or None when they are a fresh process's
    /// (every online CPU, nice 0, no I/O class), which a command gets anyway
    /// from the init: the gateway asks once at start, and its requests then
    /// cost the child no syscalls for an unpinned, un-niced gateway.
    pub fn of_self_unless_default() -> Option<ProcAttrs> {
        let a = ProcAttrs::of_self();
        // SAFETY: sysconf takes an integer.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        let all_cpus = usize::try_from(online).is_ok_and(|n| a.cpus.len() >= n);
        // The class is the top 3 bits; IOPRIO_CLASS_NONE is 0.
        let no_class = a.ioprio.is_none_or(|p| p >> 13 == 0);
        (!(all_cpus && a.nice == 0 && no_class)).then_some(a)
    }
}

/// `corral run`'s request: a foreground command whose environment and
/// working directory the init derives from the profile it was built with
/// (the caller's variables filtered by `env.keep`, then `env.set`, then
/// `extra_env`; `cwd` or the profile's workdir), so the client reads no
/// plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRequest {
    pub argv: Vec<String>,
    pub caller_env: Vec<(String, String)>,
    pub extra_env: Vec<(String, String)>,
    pub cwd: Option<String>,
    /// As in [`SpawnRequest::nfds`].
    pub nfds: u8,
    /// As in [`SpawnRequest::attrs`].
    #[serde(default)]
    pub attrs: Option<ProcAttrs>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Request {
    Spawn(SpawnRequest),
    Run(RunRequest),
    /// Send a signal to a process this connection spawned (pid in the
    /// sandbox), or with pid 0 to every one it spawned and is still running.
    Signal {
        pid: i32,
        signal: i32,
    },
    Status,
    /// Act on the supervised services (`name` None: every one); the reply
    /// is `Services` with their state after the action.
    Service {
        op: ServiceOp,
        name: Option<String>,
    },
    /// Suspend (stop every process of the sandbox but the init, refuse new
    /// ones) or resume it; the reply is `Status`.
    Suspend {
        on: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServiceOp {
    Status,
    Start,
    Stop,
    Restart,
}

/// One supervised service as the init sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceStatus {
    pub name: String,
    /// `waiting` (on-demand, no process: the next connection starts it),
    /// `running`, `stopping`, `backoff` (restarting after a failure),
    /// `stopped`.
    pub state: String,
    /// Main process, as a pid of the sandbox.
    pub pid: Option<i32>,
    /// Processes of the service besides the main one (e.g. FPM workers).
    pub workers: u32,
    /// Unix time (ms) of the last change of state.
    pub since_ms: u64,
    pub starts: u64,
    /// Restarts after an unexpected exit.
    pub restarts: u64,
    /// How the last run ended ("exit code 1", "signal SIGKILL", "stopped: idle"...).
    pub last_exit: Option<String>,
    /// Why the last start failed, if it did.
    pub last_error: Option<String>,
    pub listen: Vec<String>,
    pub start: String,
    pub idle_timeout_ms: u64,
    pub log: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InitStatus {
    pub version: u32,
    /// Processes the init has started and not yet reaped.
    pub children: u32,
    pub services: u32,
    pub spawned_total: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Reply {
    Spawned {
        pid: i32,
    },
    /// The child could not be started: which step failed and its errno
    /// (see [`corral_security::Failure`] for how it is printed).
    Failed {
        step: Step,
        errno: i32,
    },
    /// The spawned process ended: exit code, or the signal that killed it.
    Exited {
        pid: i32,
        code: Option<i32>,
        signal: Option<i32>,
        timed_out: bool,
    },
    Status(InitStatus),
    Services(Vec<ServiceStatus>),
    Error {
        message: String,
    },
}

/// What the init tells `corral up` once over the setup socket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SetupReply {
    Ready,
    Failed { message: String },
}

pub fn encode<T: Serialize>(m: &T) -> Vec<u8> {
    serde_json::to_vec(m).expect("protocol messages serialize")
}

pub fn decode<'a, T: Deserialize<'a>>(b: &'a [u8]) -> Result<T, serde_json::Error> {
    serde_json::from_slice(b)
}
