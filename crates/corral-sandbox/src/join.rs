//! `corral run`: join a running tenant's namespaces (one setns per persisted
//! namespace file: O(1), no /proc scan), fork, drop privileges, exec.

use crate::lifecycle::SandboxError;
use crate::namespaces;
use crate::spawn::{environment, ChildStack, Exec, ExecSpec, SpawnError};
use crate::state::{Layout, TenantState};
use corral_limits::{Backend, EntryGuard, EntrySlots, Limits, TenantCgroup};
use corral_profile::plan::Plan;
use nix::sched::CloneFlags;
use nix::sys::signal::{self, SigHandler, Signal};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicI32, Ordering};

#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error("tenant {0} is not up")]
    NotUp(String),
    #[error("tenant {tenant}: entry-process limit reached ({limit} running)")]
    EntryLimit { tenant: String, limit: u32 },
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    #[error("{0}")]
    Other(String),
}

/// What a join needs from the state dir, loaded once.
pub struct Target {
    pub state: TenantState,
    pub plan: Plan,
    pub limits: Limits,
}

pub fn load(layout: &Layout, tenant: &str) -> Result<Target, JoinError> {
    let dir = layout.tenant(tenant);
    let state = match dir.read_state() {
        Ok(Some(s)) if s.init_alive() => s,
        // Dead, never up, or a state file a crash cut short: (re)build.
        Ok(_) => return Err(JoinError::NotUp(tenant.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            return Err(JoinError::NotUp(tenant.to_string()))
        }
        Err(e) => {
            return Err(JoinError::Other(format!(
                "read {}: {e}",
                dir.state().display()
            )))
        }
    };
    let raw = std::fs::read(dir.plan())
        .map_err(|e| JoinError::Other(format!("read {}: {e}", dir.plan().display())))?;
    let plan: Plan = serde_json::from_slice(&raw)
        .map_err(|e| JoinError::Other(format!("parse {}: {e}", dir.plan().display())))?;
    // Live changes (`corral limits set`) live in limits.json; the plan's
    // limits are the fallback for a state dir written without it.
    let limits = match std::fs::read(dir.limits()) {
        Ok(b) => serde_json::from_slice(&b)
            .map_err(|e| JoinError::Other(format!("parse {}: {e}", dir.limits().display())))?,
        Err(_) => Limits::from_source(&plan.limits).map_err(|e| JoinError::Other(e.to_string()))?,
    };
    Ok(Target {
        state,
        plan,
        limits,
    })
}

/// Take an entry-process slot for the tenant (released when the guard drops).
pub fn entry(layout: &Layout, t: &Target) -> Result<Option<EntryGuard>, JoinError> {
    entry_slot(layout, &t.state.tenant, t.limits.entry_processes)
}

fn entry_slot(
    layout: &Layout,
    tenant: &str,
    limit: Option<u32>,
) -> Result<Option<EntryGuard>, JoinError> {
    let Some(limit) = limit else { return Ok(None) };
    let slots = EntrySlots::open(&layout.tenant(tenant).entry(), limit)
        .map_err(|e| JoinError::Other(e.to_string()))?;
    match slots.try_acquire() {
        Ok(g) => Ok(Some(g)),
        Err(corral_limits::EntryError::Full { limit }) => Err(JoinError::EntryLimit {
            tenant: tenant.to_string(),
            limit,
        }),
        Err(e) => Err(JoinError::Other(e.to_string())),
    }
}

pub struct RunOptions {
    pub argv: Vec<String>,
    pub cwd: Option<String>,
    pub env: Vec<(String, String)>,
    /// Keep the caller's fds 3..3+N open in the command.
    pub preserve_fds: i32,
}

static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    }
}

/// A process that has entered a tenant's sandbox with [`enter`]: it holds
/// an entry slot (released on drop), sits in the tenant's cgroup and has
/// joined every namespace (the pid namespace applies to its children). What
/// its children need to become the tenant is prepared.
pub struct Entered {
    pub slot: Option<EntryGuard>,
    /// The privilege-dropping sequence and seccomp filter for the tenant.
    pub security: corral_security::Prepared,
    /// The plan's rlimits, for [`Exec::prepare`].
    pub rlimits: Vec<(libc::c_int, u64, u64)>,
}

/// Enter the tenant's sandbox with the calling process, which must be
/// single-threaded (setns into a mount namespace requires it): take an
/// entry slot, move into the cgroup (first, while host paths are visible:
/// children are then born inside it, and a fork, unlike a migration, is
/// refused at the process limit), prepare the tenant's security sequence,
/// then setns into each persisted namespace. `corral run`'s setns path,
/// `corral-shell` and `pam_corral.so` start here.
pub fn enter(layout: &Layout, t: &Target) -> Result<Entered, JoinError> {
    let dir = layout.tenant(&t.state.tenant);
    let slot = entry(layout, t)?;
    join_cgroup(&t.state)?;
    let groups: Vec<libc::gid_t> = t.plan.tenant.groups.iter().map(|g| g.1).collect();
    let security = corral_security::prepare(
        &t.plan.seccomp,
        t.plan.tenant.uid,
        t.plan.tenant.gid,
        &groups,
    )
    .map_err(|e| JoinError::Other(e.to_string()))?;
    let rlimits = t.limits.rlimits();
    let mut fds = namespaces::open(&dir.ns(), &t.state.namespaces).map_err(SandboxError::from)?;
    if !fds.iter().all(|(fd, _)| is_nsfs(fd)) {
        fds = open_through_proc(t)?;
    }
    namespaces::join(&fds).map_err(SandboxError::from)?;
    Ok(Entered {
        slot,
        security,
        rlimits,
    })
}

/// Is `fd` a namespace (nsfs) file?
fn is_nsfs(fd: &std::os::fd::OwnedFd) -> bool {
    const NSFS_MAGIC: i64 = 0x6e73_6673;
    nix::sys::statfs::fstatfs(fd).is_ok_and(|s| s.filesystem_type().0 == NSFS_MAGIC)
}

/// The namespaces from the init's /proc entries. For a process in a mount
/// namespace made after `corral up` (a service started with systemd's
/// `PrivateTmp=`, a test's `unshare -m`): the kernel does not copy a bind
/// mount of a mount-namespace file into a new mount namespace, so there the
/// persisted `ns/mnt` is the empty file under it. The init is checked to be
/// the one the state names after the files are open (a pid reused in
/// between would have another start time).
fn open_through_proc(t: &Target) -> Result<Vec<(OwnedFd, CloneFlags)>, JoinError> {
    let dir = std::path::PathBuf::from(format!("/proc/{}/ns", t.state.init_pid));
    let fds = namespaces::open(&dir, &t.state.namespaces).map_err(SandboxError::from)?;
    if !t.state.init_alive() || !fds.iter().all(|(fd, _)| is_nsfs(fd)) {
        return Err(JoinError::NotUp(t.state.tenant.clone()));
    }
    Ok(fds)
}

/// Join the tenant and run a command in the foreground; returns its exit
/// status the way a shell reports it (128+N for signal N).
pub fn run(layout: &Layout, t: &Target, opts: &RunOptions) -> Result<i32, JoinError> {
    let entered = enter(layout, t)?;
    let (security, rlimits) = (&entered.security, &entered.rlimits);
    let env = environment(&t.plan, std::env::vars(), &opts.env);
    let cwd = opts
        .cwd
        .clone()
        .unwrap_or_else(|| t.plan.workdir.to_string_lossy().into_owned());
    let spec = ExecSpec {
        argv: &opts.argv,
        env: &env,
        cwd: &cwd,
        stdio: [None; 3],
        new_session: false,
        controlling_tty: false,
        preserve_fds: opts.preserve_fds,
        cgroup_entry: Vec::new(),
        reset_signals: None,
        reset_sched: crate::spawn::unusual_policy(),
    };
    let exec = Exec::prepare(security, rlimits, spec)?;
    let pid = exec.spawn(&mut ChildStack::new()?)?;
    let code = wait_forwarding(pid);
    // Take the terminal back if the child had it (SIGTTOU ignored meanwhile).
    // SAFETY: signal disposition and tcsetpgrp calls with plain arguments.
    unsafe {
        if libc::isatty(0) == 1 && libc::tcgetpgrp(0) == pid.as_raw() {
            let old = libc::signal(libc::SIGTTOU, libc::SIG_IGN);
            libc::tcsetpgrp(0, libc::getpgrp());
            libc::signal(libc::SIGTTOU, old);
        }
    }
    code
}

/// Move this process into the tenant's cgroup, in every hierarchy. A
/// single-threaded process (what `corral run` is) moves its one thread
/// through [`corral_limits::open_self_entry`], which spares the kernel's
/// global threadgroup lock and an RCU grace period (milliseconds on cgroup
/// v1); a multi-threaded caller moves its whole thread group.
fn join_cgroup(st: &TenantState) -> Result<(), JoinError> {
    let err = |e: corral_limits::CgroupError| JoinError::Other(format!("join cgroup: {e}"));
    let dirs = if !st.cgroup_dirs.is_empty() {
        st.cgroup_dirs.clone()
    } else if let Some(cg) = &st.cgroup {
        // State written by an older corral: find the cgroup the slow way.
        let backend = Backend::detect(&st.cgroup_parent)
            .map_err(|e| JoinError::Other(format!("cgroup: {e}")))?;
        TenantCgroup::open(&backend, cg).map_err(err)?.dirs()
    } else {
        return Ok(());
    };
    let single = std::fs::read_dir("/proc/self/task")
        .map(|d| d.count() == 1)
        .unwrap_or(false);
    for d in &dirs {
        let (file, value) = if single {
            (
                std::fs::File::from(corral_limits::open_self_entry(d).map_err(err)?),
                "0".to_string(),
            )
        } else {
            let p = d.join("cgroup.procs");
            (
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .map_err(|e| JoinError::Other(format!("join cgroup {}: {e}", p.display())))?,
                std::process::id().to_string(),
            )
        };
        std::io::Write::write_all(&mut &file, value.as_bytes())
            .map_err(|e| JoinError::Other(format!("join cgroup {}: {e}", d.display())))?;
    }
    Ok(())
}

/// Wait for `pid`, a child of this process, forwarding the signals a
/// terminal or a supervisor sends (INT, TERM, HUP, QUIT, USR1, USR2) to it
/// meanwhile; returns its status as a shell reports it (128+N for signal N).
pub fn wait_forwarding(pid: Pid) -> Result<i32, JoinError> {
    CHILD.store(pid.as_raw(), Ordering::Relaxed);
    for s in FORWARDED {
        // SAFETY: `forward` only calls kill, which is async-signal-safe.
        unsafe { signal::signal(s, SigHandler::Handler(forward)) }.ok();
    }
    let code = wait_code(pid);
    for s in FORWARDED {
        // SAFETY: restoring the default disposition.
        unsafe { signal::signal(s, SigHandler::SigDfl) }.ok();
    }
    CHILD.store(0, Ordering::Relaxed);
    code
}

fn wait_code(pid: Pid) -> Result<i32, JoinError> {
    loop {
        match waitpid(pid, None) {
            Ok(WaitStatus::Exited(_, c)) => return Ok(c),
            Ok(WaitStatus::Signaled(_, s, _)) => return Ok(128 + s as i32),
            Ok(_) => continue,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(JoinError::Other(format!("wait: {e}"))),
        }
    }
}

/// The error for a spawn the init reports as `Failed`.
fn start_failed(argv: &[String], step: &str, errno: i32) -> JoinError {
    let errno = nix::errno::Errno::from_raw(errno);
    if step.contains("not found") {
        JoinError::Spawn(SpawnError::NotFound(
            argv.first().cloned().unwrap_or_default(),
        ))
    } else if step == "fork" {
        JoinError::Spawn(SpawnError::Fork(errno))
    } else if errno as i32 == 0 {
        // A failure without an errno: the init's own words.
        JoinError::Other(format!(
            "the tenant init could not start the command: {step}"
        ))
    } else {
        JoinError::Spawn(SpawnError::Child {
            step: if step == "exec" { "exec" } else { "start" },
            errno,
        })
    }
}

/// Self-pipe for signals to forward while a spawn through the init runs.
static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn to_pipe(sig: libc::c_int) {
    let fd = SIGNAL_PIPE.load(Ordering::Relaxed);
    if fd >= 0 {
        let b = sig as u8;
        // SAFETY: write(2) of one byte from the stack is async-signal-safe.
        unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
    }
}

/// Run a command as a spawn of the tenant's init, with this process's
/// stdin/stdout/stderr, and wait for it. The init's child is born inside
/// every namespace and the cgroup already, with the seccomp filter
/// inherited: no cgroup migration, no setns,
/// no filter compilation in this process. Measured faster than the setns
/// join, so `corral run` uses it unless it needs the caller's terminal as a
/// controlling terminal or extra fds (then [`run`] joins with setns).
/// [`run_fast`] does the same without loading the target first.
pub fn run_via_init(layout: &Layout, t: &Target, opts: &RunOptions) -> Result<i32, JoinError> {
    use crate::client::Client;
    use crate::proto::{Request, SpawnRequest};
    let dir = layout.tenant(&t.state.tenant);
    let _slot = entry(layout, t)?;
    let env = environment(&t.plan, std::env::vars(), &opts.env);
    let cwd = opts
        .cwd
        .clone()
        .unwrap_or_else(|| t.plan.workdir.to_string_lossy().into_owned());
    let req = SpawnRequest {
        argv: opts.argv.clone(),
        env,
        cwd,
        timeout_ms: 0,
        detach: false,
        announce: false,
        nfds: 3,
    };
    let client = Client::connect(&dir.control())
        .map_err(|e| JoinError::Other(format!("connect to {}: {e}", dir.control().display())))?;
    match converse(&client, &Request::Spawn(req), &opts.argv)? {
        Answer::Code(code) => Ok(code),
        Answer::Refused(message) => Err(JoinError::Other(format!(
            "the tenant init refused the spawn request: {message}"
        ))),
    }
}

/// `corral run` on a running sandbox without loading its state or plan:
/// connect to the init's control socket (it accepts only while the init
/// lives), take an entry slot (the limit from limits.json, which `corral
/// limits set` keeps current), and send a [`Request::Run`], for which the init
/// applies the profile's environment rules and workdir itself. Saves reading
/// and parsing state.json and plan.json and the /proc check on every run.
///
/// `Ok(None)`: this path does not apply (the tenant is not up, its state
/// predates limits.json, or its init predates `Run`) and nothing was
/// started; the caller takes the full path ([`load`], then [`run_via_init`]).
pub fn run_fast(
    layout: &Layout,
    tenant: &str,
    opts: &RunOptions,
) -> Result<Option<i32>, JoinError> {
    use crate::client::Client;
    use crate::proto::{Request, RunRequest};
    let dir = layout.tenant(tenant);
    let Ok(raw) = std::fs::read(dir.limits()) else {
        return Ok(None);
    };
    let Ok(limits) = serde_json::from_slice::<Limits>(&raw) else {
        return Ok(None);
    };
    let Ok(client) = Client::connect(&dir.control()) else {
        return Ok(None);
    };
    let _slot = entry_slot(layout, tenant, limits.entry_processes)?;
    let req = RunRequest {
        argv: opts.argv.clone(),
        caller_env: std::env::vars().collect(),
        extra_env: opts.env.clone(),
        cwd: opts.cwd.clone(),
        nfds: 3,
    };
    match converse(&client, &Request::Run(req), &opts.argv)? {
        Answer::Code(code) => Ok(Some(code)),
        Answer::Refused(_) => Ok(None),
    }
}

/// How the init answered a foreground request.
enum Answer {
    /// The command ran: its exit status as a shell reports it.
    Code(i32),
    /// The init's first answer was `Error`: it did not take the request.
    Refused(String),
}

const FORWARDED: [Signal; 6] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
];

/// While alive, the forwarded signals go to the self-pipe; then back to
/// their default action (a caller that goes on, e.g. after a refused
/// request, must not keep a handler writing to a closed fd).
struct Forwarding(#[allow(dead_code)] std::os::fd::OwnedFd);

impl Drop for Forwarding {
    fn drop(&mut self) {
        for s in FORWARDED {
            // SAFETY: restoring the default disposition.
            unsafe { signal::signal(s, SigHandler::SigDfl) }.ok();
        }
        SIGNAL_PIPE.store(-1, Ordering::Relaxed);
    }
}

/// Send a foreground request with this process's stdio, forward signals,
/// and wait for its end.
fn converse(
    client: &crate::client::Client,
    req: &crate::proto::Request,
    argv: &[String],
) -> Result<Answer, JoinError> {
    use crate::proto::{Reply, Request};
    let (sig_r, sig_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)
            .map_err(|e| JoinError::Other(format!("pipe: {e}")))?;
    SIGNAL_PIPE.store(std::os::fd::AsRawFd::as_raw_fd(&sig_w), Ordering::Relaxed);
    let _forwarding = Forwarding(sig_w);
    for s in FORWARDED {
        // SAFETY: `to_pipe` only calls write(2), which is async-signal-safe.
        unsafe { signal::signal(s, SigHandler::Handler(to_pipe)) }.ok();
    }
    // Unannounced: the init's only answer is the end (Exited), or Failed
    // when the command could not be started.
    client
        .send(req, &[0, 1, 2])
        .map_err(|e| JoinError::Other(format!("spawn request: {e}")))?;
    let mut first = true;
    // SAFETY: the client's socket outlives this function's polls.
    let client_fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(client.fd()) };
    loop {
        let mut fds = [
            nix::poll::PollFd::new(
                std::os::fd::AsFd::as_fd(&sig_r),
                nix::poll::PollFlags::POLLIN,
            ),
            nix::poll::PollFd::new(client_fd, nix::poll::PollFlags::POLLIN),
        ];
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::NONE) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(JoinError::Other(format!("poll: {e}"))),
        }
        let sig_ready = fds[0].revents().is_some_and(|r| !r.is_empty());
        let sock_ready = fds[1].revents().is_some_and(|r| !r.is_empty());
        if sig_ready {
            let mut b = [0u8; 16];
            if let Ok(n) = nix::unistd::read(std::os::fd::AsRawFd::as_raw_fd(&sig_r), &mut b) {
                for s in &b[..n] {
                    let _ = client.send(
                        &Request::Signal {
                            pid: 0,
                            signal: i32::from(*s),
                        },
                        &[],
                    );
                }
            }
        }
        if sock_ready {
            let reply = client.recv();
            let was_first = std::mem::replace(&mut first, false);
            match reply {
                Ok(Reply::Exited { code: Some(c), .. }) => return Ok(Answer::Code(c)),
                Ok(Reply::Exited {
                    signal: Some(s), ..
                }) => return Ok(Answer::Code(128 + s)),
                Ok(Reply::Exited { .. }) => return Ok(Answer::Code(128)),
                Ok(Reply::Failed { step, errno }) => return Err(start_failed(argv, &step, errno)),
                // Replies come in order: an error before anything else
                // answers the request itself.
                Ok(Reply::Error { message }) if was_first => return Ok(Answer::Refused(message)),
                Ok(_) => {} // answers to Signal requests
                Err(e) => return Err(JoinError::Other(format!("the tenant init went away: {e}"))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{self, Reply, Request};
    use nix::sys::socket::{
        accept, bind, listen, recv, send, socket, AddressFamily, Backlog, MsgFlags, SockFlag,
        SockType, UnixAddr,
    };
    use std::os::fd::AsRawFd;

    /// A stand-in init on the tenant's control socket: takes one request,
    /// hands it to the caller's thread, answers `reply`.
    fn fake_init(layout: &Layout, tenant: &str, reply: Reply) -> std::thread::JoinHandle<Request> {
        let path = layout.tenant(tenant).control();
        let fd = socket(
            AddressFamily::Unix,
            SockType::SeqPacket,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .unwrap();
        bind(fd.as_raw_fd(), &UnixAddr::new(&path).unwrap()).unwrap();
        listen(&fd, Backlog::new(1).unwrap()).unwrap();
        std::thread::spawn(move || {
            let c = accept(fd.as_raw_fd()).unwrap();
            let mut buf = vec![0u8; proto::MAX_MESSAGE];
            let n = recv(c, &mut buf, MsgFlags::empty()).unwrap();
            let req: Request = proto::decode(&buf[..n]).unwrap();
            send(c, &proto::encode(&reply), MsgFlags::empty()).unwrap();
            nix::unistd::close(c).unwrap();
            req
        })
    }

    fn opts() -> RunOptions {
        RunOptions {
            argv: vec!["/bin/true".into()],
            cwd: None,
            env: vec![("EXTRA".into(), "1".into())],
            preserve_fds: 0,
        }
    }

    #[test]
    fn run_fast_applies_only_to_a_running_init_that_takes_run_requests() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let t = "fast";
        std::fs::create_dir_all(layout.tenant(t).dir.clone()).unwrap();
        assert!(
            run_fast(&layout, t, &opts()).unwrap().is_none(),
            "no limits.json: not up"
        );
        std::fs::write(
            layout.tenant(t).limits(),
            serde_json::to_vec(&Limits::default()).unwrap(),
        )
        .unwrap();
        assert!(
            run_fast(&layout, t, &opts()).unwrap().is_none(),
            "no init listening"
        );

        // An init that predates Run answers Error: nothing started, full path.
        let init = fake_init(
            &layout,
            t,
            Reply::Error {
                message: "bad request: unknown variant `Run`".into(),
            },
        );
        assert!(run_fast(&layout, t, &opts()).unwrap().is_none());
        let Request::Run(req) = init.join().unwrap() else {
            panic!("expected a Run request")
        };
        assert_eq!(req.argv, ["/bin/true"]);
        assert_eq!(req.extra_env, [("EXTRA".to_string(), "1".to_string())]);
        assert_eq!(req.cwd, None, "the init picks the profile's workdir");
        assert_eq!(req.nfds, 3);
        assert!(
            req.caller_env.iter().any(|(k, _)| k == "PATH"),
            "the caller's environment goes to the init, which filters it"
        );
        std::fs::remove_file(layout.tenant(t).control()).unwrap();

        // A current init: its answer is the command's exit status.
        let init = fake_init(
            &layout,
            t,
            Reply::Exited {
                pid: 2,
                code: Some(7),
                signal: None,
                timed_out: false,
            },
        );
        assert_eq!(run_fast(&layout, t, &opts()).unwrap(), Some(7));
        init.join().unwrap();
        std::fs::remove_file(layout.tenant(t).control()).unwrap();
        let init = fake_init(
            &layout,
            t,
            Reply::Exited {
                pid: 2,
                code: None,
                signal: Some(9),
                timed_out: false,
            },
        );
        assert_eq!(run_fast(&layout, t, &opts()).unwrap(), Some(128 + 9));
        init.join().unwrap();
    }
}
