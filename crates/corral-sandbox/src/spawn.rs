//! Starting a tenant process: everything is prepared (allocated) before
//! the child exists; the child only makes raw syscalls on that memory, then
//! execs.
//!
//! The child is a vfork-style clone (`CLONE_VM`, as glibc's posix_spawn):
//! it runs on its own small stack in the parent's memory, and the parent
//! sleeps until it has exec'd or exited. Nothing is copied (a fork of the
//! init copied its page tables and then took a copy-on-write fault for each
//! page the child touched, only for exec to throw it all away: a third of
//! the init's time per spawn), and when [`Exec::spawn`] returns the outcome
//! is known: a failure before exec is written by the child into the
//! parent's memory as (step, errno).
//!
//! Not `CLONE_VFORK`: its parent sleeps unconditionally, and from the uid
//! change on the tenant may SIGSTOP the child (escape test
//! `a_child_stopped_before_its_exec_does_not_wedge_the_init`): the init
//! would sleep with it. The parent waits instead on the word the kernel
//! clears when the child execs or exits (`CLONE_CHILD_CLEARTID`, the futex
//! that pthread_join waits on), a tenth of a second at a time, and kills a
//! child it finds stopped. That the tenant cannot read or write the shared
//! memory meanwhile is the uid change's job (corral-security, step 2).
use corral_profile::plan::Plan;
use corral_security::{Failure, Step};
use nix::errno::Errno;
use nix::unistd::Pid;
use std::ffi::CString;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("{0}: command not found in the sandbox")]
    NotFound(String),
    #[error("bad argument: {0}")]
    Nul(String),
    /// A step of starting the child failed (see [`Step`]).
    #[error(transparent)]
    Failed(#[from] Failure),
}

impl SpawnError {
    fn failed(step: Step, errno: Errno) -> SpawnError {
        SpawnError::Failed(Failure::new(step, errno))
    }

    /// Exit status a shell would use for this failure.
    pub fn exit_code(&self) -> i32 {
        match self {
            SpawnError::NotFound(_) => 127,
            SpawnError::Failed(Failure {
                step: Step::Exec,
                errno: Errno::ENOENT,
            }) => 127,
            SpawnError::Failed(Failure {
                step: Step::Exec, ..
            }) => 126,
            _ => 125,
        }
    }

    /// The failure as the tenant init reports it (`Reply::Failed`).
    pub fn to_reply(&self) -> (Step, i32) {
        match self {
            SpawnError::NotFound(_) => (Step::Resolve, libc::ENOENT),
            SpawnError::Nul(_) => (Step::Arguments, libc::EINVAL),
            SpawnError::Failed(f) => (f.step, f.errno as i32),
        }
    }

    /// The inverse of [`SpawnError::to_reply`] for a spawn of `argv`.
    pub fn from_reply(argv: &[String], step: Step, errno: i32) -> SpawnError {
        match step {
            Step::Resolve => SpawnError::NotFound(argv.first().cloned().unwrap_or_default()),
            step => SpawnError::Failed(Failure::from_raw(step, errno)),
        }
    }
}

/// A fully prepared exec: nothing left to allocate in the child.
pub struct Exec<'a> {
    path: CString,
    argv: Vec<CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    envp: Vec<CString>,
    envp_ptrs: Vec<*const libc::c_char>,
    cwd: CString,
    rlimits: Vec<(libc::c_int, libc::rlimit)>,
    security: &'a corral_security::Prepared,
    /// fds to become 0, 1, 2 (None: keep what we have).
    stdio: [Option<RawFd>; 3],
    new_session: bool,
    controlling_tty: bool,
    /// fds 3..3+N stay open across exec (`corral run --preserve-fds N`).
    preserve_fds: i32,
    /// fds to become 3, 4, ... (a service's listening sockets); at most
    /// [`MAX_PASSED_FDS`].
    pass_fds: Vec<RawFd>,
    /// The `LISTEN_PID=` entry of `envp`, filled in by the child with its
    /// own pid (sd_listen_fds checks it); owned by this Exec (see Drop).
    listen_pid: Option<*mut u8>,
    /// stdin is the caller's controlling terminal and the caller is in the
    /// foreground: hand the terminal to the child's new process group.
    foreground_tty: bool,
    /// Signals to set back to SIG_DFL in the child; None: all of them.
    reset_signals: Option<&'a [libc::c_int]>,
    /// See `ExecSpec::reset_sched`. A tenant never inherits a policy or a
    /// slice.
    reset_sched: bool,
    reset_oom: bool,
    subreaper: bool,
    attrs: Option<Attrs>,
}

fn cstr(s: &str) -> Result<CString, SpawnError> {
    CString::new(s).map_err(|_| SpawnError::Nul(s.to_string()))
}

/// Find `prog` on `PATH` as seen by this process now (call it after joining
/// the sandbox's mount namespace, so the lookup happens inside).
pub fn resolve(prog: &str, path_var: &str) -> Option<PathBuf> {
    if prog.contains('/') {
        return Some(PathBuf::from(prog));
    }
    for dir in path_var.split(':').filter(|d| !d.is_empty()) {
        let p = Path::new(dir).join(prog);
        if let Ok(m) = std::fs::metadata(&p) {
            use std::os::unix::fs::PermissionsExt;
            if m.is_file() && m.permissions().mode() & 0o111 != 0 {
                return Some(p);
            }
        }
    }
    None
}

pub struct ExecSpec<'a> {
    pub argv: &'a [String],
    pub env: &'a [(String, String)],
    pub cwd: &'a str,
    pub stdio: [Option<RawFd>; 3],
    pub new_session: bool,
    /// With `new_session`: make stdin (a terminal) the new session's
    /// controlling terminal, as a login does (`corral-shell`'s own pty).
    pub controlling_tty: bool,
    pub preserve_fds: i32,
    /// fds that become 3, 4, ... in the child (then `preserve_fds` counts
    /// from after them); at most [`MAX_PASSED_FDS`].
    pub pass_fds: &'a [RawFd],
    /// Set `LISTEN_PID` to the child's pid (socket activation, with `pass_fds`).
    pub listen_pid: bool,
    /// The signals whose disposition differs from SIG_DFL in the forking
    /// process, if it knows them ([`non_default_signals`], taken once by a
    /// long-lived spawner); None resets every signal in the child.
    pub reset_signals: Option<&'a [libc::c_int]>,
    /// The forking process runs under another policy than SCHED_OTHER
    /// ([`unusual_policy`], taken once by a long-lived spawner) or with a
    /// time slice of its own ([`short_slice`]): the child goes back to
    /// SCHED_OTHER with the default slice ([`normal_scheduling`]).
    pub reset_sched: bool,
    /// The forking process has a non-zero `oom_score_adj`
    /// ([`oom_score_adjusted`]): the child writes 0 to its own, as root,
    /// before its uid change.
    pub reset_oom: bool,
    /// Make the child a child subreaper (`PR_SET_CHILD_SUBREAPER`, kept
    /// across exec): what its descendants orphan stays below it, where the
    /// init can find and kill it (init.rs: `kill_tree`).
    pub subreaper: bool,
    /// CPU affinity, nice value and I/O priority to take (the caller's:
    /// see [`crate::proto::ProcAttrs`]); None: the spawner's own.
    pub attrs: Option<&'a crate::proto::ProcAttrs>,
}

/// [`crate::proto::ProcAttrs`] made ready for the child (no allocation).
struct Attrs {
    cpus: Option<libc::cpu_set_t>,
    nice: i32,
    ioprio: Option<libc::c_int>,
}

impl Attrs {
    fn from(a: &crate::proto::ProcAttrs) -> Attrs {
        let cpus = (!a.cpus.is_empty()).then(|| {
            // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET write into it.
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            for &c in &a.cpus {
                if (c as usize) < libc::CPU_SETSIZE as usize {
                    // SAFETY: c is below CPU_SETSIZE, within `set`.
                    unsafe { libc::CPU_SET(c as usize, &mut set) };
                }
            }
            set
        });
        // Never below 0 (a negative nice of a root caller is not the
        // tenant's), never above 19.
        let nice = a.nice.clamp(0, 19);
        // Real-time I/O (class 1) becomes best-effort (class 2) at the
        // same level; none (0), best-effort and idle (3) pass.
        let ioprio = a.ioprio.map(|p| {
            let (class, data) = (p >> 13, p & 0x1fff);
            let class = if class == 1 { 2 } else { class };
            libc::c_int::from(class << 13 | data.min(7))
        });
        Attrs { cpus, nice, ioprio }
    }
}

impl<'a> Exec<'a> {
    /// `security` is prepared once per sandbox (see `corral_security::prepare`).
    pub fn prepare(
        security: &'a corral_security::Prepared,
        rlimits: &[(libc::c_int, u64, u64)],
        spec: ExecSpec<'a>,
    ) -> Result<Exec<'a>, SpawnError> {
        let prog = spec
            .argv
            .first()
            .ok_or_else(|| SpawnError::NotFound(String::new()))?;
        let path_var = spec
            .env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_str())
            .unwrap_or("/usr/bin:/bin");
        let path = resolve(prog, path_var).ok_or_else(|| SpawnError::NotFound(prog.clone()))?;
        let argv = spec
            .argv
            .iter()
            .map(|a| cstr(a))
            .collect::<Result<Vec<_>, _>>()?;
        let envp = spec
            .env
            .iter()
            .map(|(k, v)| cstr(&format!("{k}={v}")))
            .collect::<Result<Vec<_>, _>>()?;
        if spec.pass_fds.len() > MAX_PASSED_FDS {
            return Err(SpawnError::failed(Step::Stdio, Errno::EMFILE));
        }
        let listen_pid = spec
            .listen_pid
            .then(|| Box::into_raw(Box::new(*LISTEN_PID_BUF)).cast::<u8>());
        let mut e = Exec {
            path: cstr(&path.to_string_lossy())?,
            argv,
            argv_ptrs: Vec::new(),
            envp,
            envp_ptrs: Vec::new(),
            cwd: cstr(spec.cwd)?,
            rlimits: rlimits
                .iter()
                .map(|&(r, soft, hard)| {
                    (
                        r,
                        libc::rlimit {
                            rlim_cur: soft,
                            rlim_max: hard,
                        },
                    )
                })
                .collect(),
            security,
            stdio: spec.stdio,
            new_session: spec.new_session,
            controlling_tty: spec.new_session && spec.controlling_tty,
            preserve_fds: spec.pass_fds.len() as i32 + spec.preserve_fds,
            pass_fds: spec.pass_fds.to_vec(),
            listen_pid,
            // SAFETY: isatty/tcgetpgrp/getpgrp only query; done in the parent.
            foreground_tty: !spec.new_session
                && unsafe { libc::isatty(0) == 1 && libc::tcgetpgrp(0) == libc::getpgrp() },
            reset_signals: spec.reset_signals,
            reset_sched: spec.reset_sched,
            reset_oom: spec.reset_oom,
            subreaper: spec.subreaper,
            attrs: spec.attrs.map(Attrs::from),
        };
        e.argv_ptrs = e
            .argv
            .iter()
            .map(|a| a.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect();
        e.envp_ptrs = e
            .envp
            .iter()
            .map(|a| a.as_ptr())
            .chain(e.listen_pid.map(|p| p.cast_const().cast::<libc::c_char>()))
            .chain(std::iter::once(std::ptr::null()))
            .collect();
        Ok(e)
    }

    /// Start the child and let it exec. Returns its pid once it has exec'd;
    /// a child that failed before (or at) exec has been reaped already.
    /// `stack` is the child's stack while it runs (see [`ChildStack`]).
    pub fn spawn(&self, stack: &mut ChildStack) -> Result<Pid, SpawnError> {
        let mut report = Report { step: 0, errno: 0 };
        let ctx = ChildCtx {
            exec: self,
            report: &mut report,
        };
        // No signal handler of the parent may run in the child, which shares
        // its memory: everything is blocked across the clone; the child
        // resets the dispositions, then unblocks.
        // SAFETY: sigset operations on stack memory.
        let old = unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            old
        };
        // Cleared by the kernel (and a futex wake) when the child execs or
        // exits: CLONE_CHILD_CLEARTID.
        let running = AtomicU32::new(1);
        // SAFETY: the child runs `child_main` on `stack` (ours alone: &mut)
        // and only makes raw syscalls on memory prepared before; this thread
        // keeps `ctx`, `report`, `running` and the stack alive and untouched
        // (see `wait_exec`) until the child has exec'd or exited.
        let pid = unsafe {
            libc::clone(
                child_main,
                stack.top(),
                libc::CLONE_VM | libc::CLONE_CHILD_CLEARTID | libc::SIGCHLD,
                (&ctx as *const ChildCtx).cast_mut().cast(),
                std::ptr::null_mut::<libc::pid_t>(),
                std::ptr::null_mut::<libc::c_void>(),
                running.as_ptr().cast::<libc::pid_t>(),
            )
        };
        let clone_err = Errno::last();
        // SAFETY: restoring the mask saved above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
        if pid < 0 {
            return Err(SpawnError::failed(Step::Fork, clone_err));
        }
        let child = Pid::from_raw(pid);
        let stopped = wait_exec(child, &running);
        // SAFETY: the child is done with `report` (exec'd or exited).
        let report = unsafe { std::ptr::read_volatile(&report) };
        if stopped {
            let _ = nix::sys::wait::waitpid(child, None);
            return Err(SpawnError::failed(Step::Exec, Errno::ECANCELED));
        }
        if report.step != 0 {
            let _ = nix::sys::wait::waitpid(child, None);
            return Err(SpawnError::failed(
                Step::from_code(report.step).unwrap_or(Step::Exec),
                Errno::from_raw(report.errno),
            ));
        }
        Ok(child)
    }

    fn child(&self, report: *mut Report) -> ! {
        let fail = |step: Step, errno: Errno| -> ! {
            // SAFETY: `report` lives in the parent, which waits until we
            // exit (wait_exec); _exit is async-signal-safe.
            unsafe {
                std::ptr::write_volatile(
                    report,
                    Report {
                        step: step.code(),
                        errno: errno as i32,
                    },
                );
                libc::_exit(127)
            }
        };
        // A clean signal state for the tenant's program: the init blocks the
        // signals it reads through its signalfd, Rust programs ignore SIGPIPE,
        // callers may ignore others; all of it would be inherited across exec.
        // Dispositions first, while every signal is still blocked (see
        // `spawn`), then the mask.
        // SAFETY: sigset operations on stack memory and signal(2) with
        // SIG_DFL are async-signal-safe.
        unsafe {
            // Ignored dispositions survive exec: reset every signal (whatever
            // the caller of corral ignored must not leak into the tenant).
            // The raw syscall: glibc's wrappers refuse its internal signals
            // (32, 33), which a caller may still have left ignored.
            let dfl = KernelSigaction {
                handler: libc::SIG_DFL,
                flags: 0,
                restorer: 0,
                mask: 0,
            };
            let reset = |sig: libc::c_int| {
                libc::syscall(
                    libc::SYS_rt_sigaction,
                    sig,
                    &dfl as *const KernelSigaction,
                    std::ptr::null_mut::<KernelSigaction>(),
                    8usize,
                );
            };
            match self.reset_signals {
                Some(list) => list.iter().for_each(|&sig| reset(sig)),
                None => (1..=64)
                    .filter(|&s| s != libc::SIGKILL && s != libc::SIGSTOP)
                    .for_each(reset),
            }
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        }
        if self.reset_sched {
            if let Err(e) = normal_scheduling() {
                fail(Step::Scheduler, e);
            }
        }
        if let Some(a) = &self.attrs {
            // Before the uid change: root may lower a nice value the
            // spawner raised (SCHED_BATCH aside, reset above). A CPU set
            // outside the sandbox's cpuset is refused by the kernel (EINVAL):
            // the spawner's affinity stays then.
            // SAFETY: a cpu_set_t of ours; setpriority and ioprio_set take
            // integers.
            unsafe {
                if let Some(set) = &a.cpus {
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set);
                }
                libc::setpriority(libc::PRIO_PROCESS, 0, a.nice);
                if let Some(p) = a.ioprio {
                    libc::syscall(libc::SYS_ioprio_set, 1, 0, p);
                }
            }
        }
        // SAFETY: prctl with integer arguments only.
        if self.subreaper && unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } < 0 {
            fail(Step::Session, Errno::last());
        }
        if self.reset_oom {
            if let Err(errno) = reset_oom_score() {
                fail(Step::OomScore, errno);
            }
        }
        for (target, src) in self.stdio.iter().enumerate() {
            if let Some(src) = src {
                if *src != target as RawFd {
                    // SAFETY: dup2 on fds owned by the caller; async-signal-safe.
                    if unsafe { libc::dup2(*src, target as RawFd) } < 0 {
                        fail(Step::Stdio, Errno::last());
                    }
                } else {
                    // dup2 onto itself keeps FD_CLOEXEC: clear it explicitly.
                    // SAFETY: fcntl on a valid fd.
                    unsafe { libc::fcntl(*src, libc::F_SETFD, 0) };
                }
            }
        }
        if !self.pass_fds.is_empty() {
            // Out of the way first (a source may sit on a target number),
            // then down to 3, 4, ...; the copies above are close-on-exec.
            let mut high = [0 as RawFd; MAX_PASSED_FDS];
            for (i, fd) in self.pass_fds.iter().enumerate() {
                // SAFETY: fcntl on an fd the caller owns.
                high[i] = unsafe { libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 64) };
                if high[i] < 0 {
                    fail(Step::Stdio, Errno::last());
                }
            }
            for (i, fd) in high[..self.pass_fds.len()].iter().enumerate() {
                // SAFETY: dup2 on fds we hold.
                if unsafe { libc::dup2(*fd, 3 + i as RawFd) } < 0 {
                    fail(Step::Stdio, Errno::last());
                }
            }
        }
        if let Some(buf) = self.listen_pid {
            // SAFETY: `buf` is this Exec's own LISTEN_PID buffer, read by no
            // one until our execve; getpid has no arguments.
            unsafe { write_pid(buf, libc::getpid()) };
        }
        // SAFETY: setsid has no memory arguments.
        if self.new_session && unsafe { libc::setsid() } < 0 {
            fail(Step::Session, Errno::last());
        }
        // SAFETY: TIOCSCTTY takes an int argument; fd 0 is the child's stdin.
        if self.controlling_tty && unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) } < 0 {
            fail(Step::Session, Errno::last());
        }
        if !self.new_session {
            // Its own process group: a tenant's kill(0, sig) reaches only
            // its own processes, never the caller's group on the host.
            // SAFETY: setpgid has no memory arguments.
            if unsafe { libc::setpgid(0, 0) } < 0 {
                fail(Step::Session, Errno::last());
            }
            if self.foreground_tty {
                // Take the terminal for the new group (as a shell does for a
                // job); SIGTTOU is blocked meanwhile, then the mask restored.
                // SAFETY: sigset operations on stack memory; tcsetpgrp on fd 0.
                unsafe {
                    let mut set: libc::sigset_t = std::mem::zeroed();
                    let mut old: libc::sigset_t = std::mem::zeroed();
                    libc::sigemptyset(&mut set);
                    libc::sigaddset(&mut set, libc::SIGTTOU);
                    libc::sigprocmask(libc::SIG_BLOCK, &set, &mut old);
                    libc::tcsetpgrp(0, libc::getpid());
                    libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
                }
            }
        }
        for (res, lim) in &self.rlimits {
            // SAFETY: pointer to a prepared rlimit struct.
            if unsafe { libc::setrlimit(*res as _, lim) } < 0 {
                fail(Step::Rlimit, Errno::last());
            }
        }
        if let Err((step, errno)) = self.security.apply_in_child() {
            fail(step, errno);
        }
        // The working directory is resolved only now: as the tenant (its
        // permissions apply), with every inherited fd already close-on-exec,
        // and inside the sandbox's root with no magic links, so neither
        // `--cwd /proc/self/fd/N` nor a symlink to it can start the process
        // in a host directory (runc CVE-2024-21626).
        if let Err(errno) = self.enter_cwd() {
            fail(Step::Chdir, errno);
        }
        // apply_in_child marked every fd >= 3 close-on-exec; only the
        // preserved ones are opened up again.
        for fd in 3..3 + self.preserve_fds {
            // SAFETY: fcntl on an fd number; a closed one just fails (EBADF).
            unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
        }
        // SAFETY: pointers to NUL-terminated arrays prepared by the parent.
        unsafe {
            libc::execve(
                self.path.as_ptr(),
                self.argv_ptrs.as_ptr(),
                self.envp_ptrs.as_ptr(),
            )
        };
        fail(Step::Exec, Errno::last())
    }
}

/// Forget what the process that brought the sandbox up had: SCHED_OTHER,
/// every CPU the sandbox's cpuset allows, nice 0, no I/O priority class
/// (an init brought up under `chrt -i` would otherwise start every
/// request as an idle-class task). Otherwise the
/// first `taskset -c 1 corral run` pinned the init, and with it every
/// command, service and request it started afterwards (the N-copies half
/// speed of the micro benchmarks). A command of `corral run` takes its
/// caller's attributes instead (`ExecSpec::attrs`).
pub fn neutral_attributes() {
    // SAFETY: a sched_param and a cpu_set_t of ours (every CPU set: the
    // kernel keeps those the cpuset allows); setpriority and ioprio_set
    // take integers.
    unsafe {
        let other = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(0, libc::SCHED_OTHER, &other);
        let mut all: libc::cpu_set_t = std::mem::zeroed();
        for c in 0..libc::CPU_SETSIZE as usize {
            libc::CPU_SET(c, &mut all);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &all);
        libc::setpriority(libc::PRIO_PROCESS, 0, 0);
        libc::syscall(libc::SYS_ioprio_set, 1, 0, 0);
    }
}

/// Write "0" to /proc/self/oom_score_adj (async-signal-safe: raw calls on
/// static strings). As root with CAP_SYS_RESOURCE this also sets the floor a
/// process may lower itself to back to 0.
fn reset_oom_score() -> Result<(), Errno> {
    // SAFETY: a static NUL-terminated path.
    let fd = unsafe {
        libc::open(
            c"/proc/self/oom_score_adj".as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(Errno::last());
    }
    // SAFETY: one byte of a static string, to the fd just opened.
    let n = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
    let errno = Errno::last();
    // SAFETY: closing the fd opened above.
    unsafe { libc::close(fd) };
    if n == 1 {
        Ok(())
    } else {
        Err(errno)
    }
}

/// Whether this process's `oom_score_adj` is not 0 (read once by a
/// long-lived spawner, after the host has set it).
pub fn oom_score_adjusted() -> bool {
    std::fs::read_to_string("/proc/self/oom_score_adj")
        .map(|s| s.trim() != "0")
        .unwrap_or(false)
}

/// Sleep until the kernel clears `running` (the child exec'd or exited).
/// A child found stopped (SIGSTOP from the tenant between its uid change and
/// its exec) is killed, and true returned, once it has gone. The futex call
/// is rustix's raw syscall: it leaves errno alone, which the child (same
/// thread-local storage) may be reading.
fn wait_exec(child: Pid, running: &AtomicU32) -> bool {
    use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
    use rustix::thread::futex;
    let slice = futex::Timespec {
        tv_sec: 0,
        tv_nsec: 100_000_000,
    };
    let mut killed = false;
    while running.load(Ordering::Acquire) != 0 {
        match futex::wait(running, futex::Flags::empty(), 1, Some(&slice)) {
            Err(e) if e == rustix::io::Errno::TIMEDOUT && !killed => {
                let flags = WaitPidFlag::WSTOPPED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
                if let Ok(WaitStatus::Stopped(..)) = waitid(Id::Pid(child), flags) {
                    let _ = nix::sys::signal::kill(child, nix::sys::signal::SIGKILL);
                    killed = true;
                }
            }
            // Woken, the word already changed, interrupted, timed out.
            _ => {}
        }
    }
    killed
}

impl Exec<'_> {
    /// chdir to the prepared cwd, confined to "/"; a missing directory
    /// falls back to "/" (like login does). Async-signal-safe.
    fn enter_cwd(&self) -> Result<(), Errno> {
        let how = OpenHow {
            flags: (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
            mode: 0,
            resolve: RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
        };
        // SAFETY: static C string.
        let root = unsafe {
            libc::open(
                c"/".as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if root < 0 {
            return Err(Errno::last());
        }
        // SAFETY: prepared NUL-terminated path and a struct open_how on the stack.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                root,
                self.cwd.as_ptr(),
                &how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            )
        } as i32;
        let err = Errno::last();
        // SAFETY: closing our own fd.
        unsafe { libc::close(root) };
        if fd < 0 {
            if err == Errno::ENOENT {
                // SAFETY: static C string.
                return if unsafe { libc::chdir(c"/".as_ptr()) } < 0 {
                    Err(Errno::last())
                } else {
                    Ok(())
                };
            }
            return Err(err);
        }
        // SAFETY: fchdir on the fd we just opened.
        let r = unsafe { libc::fchdir(fd) };
        let err = Errno::last();
        // SAFETY: closing the fd we opened above, used by nothing else.
        unsafe { libc::close(fd) };
        if r < 0 {
            return Err(err);
        }
        Ok(())
    }
}

/// Most fds [`ExecSpec::pass_fds`] takes.
pub const MAX_PASSED_FDS: usize = 16;

/// `LISTEN_PID=` and room for any pid and the NUL.
const LISTEN_PID_BUF: &[u8; 24] = b"LISTEN_PID=\0\0\0\0\0\0\0\0\0\0\0\0\0";

/// Write `pid` in decimal after `LISTEN_PID=` (async-signal-safe: no
/// allocation, no locks).
///
/// # Safety
/// `buf` points to a live buffer of `LISTEN_PID_BUF.len()` bytes.
unsafe fn write_pid(buf: *mut u8, pid: libc::pid_t) {
    let mut digits = [0u8; 12];
    let mut n = pid.max(0) as u32;
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let start = b"LISTEN_PID=".len();
    for i in 0..len {
        // SAFETY: start + len + 1 <= 11 + 10 + 1 < 24, inside the buffer.
        unsafe { *buf.add(start + i) = digits[len - 1 - i] };
    }
    // SAFETY: as above.
    unsafe { *buf.add(start + len) = 0 };
}

impl Drop for Exec<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.listen_pid.take() {
            // SAFETY: made by Box::into_raw of a [u8; 24] in `prepare`.
            drop(unsafe { Box::from_raw(p.cast::<[u8; 24]>()) });
        }
    }
}

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_IN_ROOT: u64 = 0x10;

/// What a child that failed before exec leaves in the parent's memory.
#[derive(Clone, Copy)]
struct Report {
    /// A [`Step::code`]; 0 while nothing failed.
    step: u8,
    errno: i32,
}

struct ChildCtx<'a> {
    exec: &'a Exec<'a>,
    report: *mut Report,
}

extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `spawn` passes a pointer to its live ChildCtx.
    let ctx = unsafe { &*(arg as *const ChildCtx) };
    ctx.exec.child(ctx.report)
}

/// The stack a vfork-style child runs on: mapped once per spawner (the
/// init keeps one for its life) with a guard page below it, so a child
/// that overflowed it would fault instead of writing into the parent's
/// memory.
pub struct ChildStack {
    base: *mut libc::c_void,
    len: usize,
}

/// The child runs a few dozen syscalls in shallow frames; glibc's
/// posix_spawn gets by with 32 KiB plus the argument sizes.
const CHILD_STACK: usize = 64 * 1024;
const GUARD: usize = 4096;

impl ChildStack {
    pub fn new() -> Result<ChildStack, SpawnError> {
        let len = CHILD_STACK + GUARD;
        // SAFETY: a fresh anonymous mapping that only this struct refers to.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(SpawnError::failed(Step::Fork, Errno::last()));
        }
        let stack = ChildStack { base, len };
        // SAFETY: the lowest page of our own mapping becomes the guard.
        if unsafe { libc::mprotect(base, GUARD, libc::PROT_NONE) } < 0 {
            return Err(SpawnError::failed(Step::Fork, Errno::last()));
        }
        Ok(stack)
    }

    /// The highest address, 16-byte aligned (stacks grow down on x86_64
    /// and aarch64).
    fn top(&mut self) -> *mut libc::c_void {
        ((self.base as usize + self.len) & !15) as *mut libc::c_void
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping; no child runs on it any more.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// The kernel's struct sigaction (x86_64 layout; glibc's differs).
#[repr(C)]
struct KernelSigaction {
    handler: usize,
    flags: u64,
    restorer: usize,
    mask: u64,
}

/// The signals whose disposition in this process is not SIG_DFL (ignored,
/// or caught): the only ones a child forked from here must reset before
/// exec. The raw syscall, as in the child: glibc's wrapper refuses its
/// internal signals (32, 33).
pub fn non_default_signals() -> Vec<libc::c_int> {
    (1..=64)
        .filter(|&s| s != libc::SIGKILL && s != libc::SIGSTOP)
        .filter(|&s| {
            let mut old = KernelSigaction {
                handler: libc::SIG_DFL,
                flags: 0,
                restorer: 0,
                mask: 0,
            };
            // SAFETY: querying only (act = NULL) into a struct on the stack.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_rt_sigaction,
                    s,
                    std::ptr::null::<KernelSigaction>(),
                    &mut old as *mut KernelSigaction,
                    8usize,
                )
            };
            r != 0 || old.handler != libc::SIG_DFL
        })
        .collect()
}

/// Put the calling thread under SCHED_BATCH: a server that is woken by
/// its clients (the gateway by the web server and by its scripts' output)
/// then does not preempt the client that woke it, but runs when that
/// client blocks or its time slice ends. On a busy CPU this saves context
/// switches: the gateway reads a script's output and end in one wake-up
/// instead of preempting the script at its first write. Not for a server
/// others wait on to start work (the init: see its `serve` set-up). Children
/// spawned from a batch process are set back to SCHED_OTHER ([`Exec`]).
/// Failure is harmless (the policy stays as it was).
pub fn batch_scheduling() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: a pointer to a sched_param on the stack.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
}

/// `struct sched_attr` up to `sched_period` (`SCHED_ATTR_SIZE_VER0`, which
/// every kernel with `sched_setattr` takes); the libc crate has none.
#[repr(C)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    /// For SCHED_OTHER (Linux >= 6.12, EEVDF): the task's time slice in
    /// ns, clamped to 0.1-100 ms; 0 for the default. Older kernels ignore
    /// it for this policy.
    runtime: u64,
    deadline: u64,
    period: u64,
}

/// SCHED_OTHER at the calling thread's nice value, with a time slice of
/// `slice_ns` (0: the default). Async-signal-safe (raw system calls).
fn fair_slice(slice_ns: u64) -> Result<(), Errno> {
    // The raw getpriority returns 20 - nice (1..=40), never negative.
    // SAFETY: integer arguments.
    let raw = unsafe { libc::syscall(libc::SYS_getpriority, libc::PRIO_PROCESS, 0) };
    if raw < 0 {
        return Err(Errno::last());
    }
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        flags: 0,
        nice: 20 - raw as i32,
        priority: 0,
        runtime: slice_ns,
        deadline: 0,
        period: 0,
    };
    // SAFETY: a pointer to a sched_attr of ours whose size field is right.
    if unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) } < 0 {
        return Err(Errno::last());
    }
    Ok(())
}

/// The time slice of a server whose clients wait for it to start work
/// (the init): the kernel's minimum. Woken by a spawn request while a
/// script runs on its CPU, a task with the default slice (0.7-3 ms) waited
/// 0.2 ms on average for its turn (`perf sched timehist`, unpinned cgi
/// large) while the other CPU idled; with a short slice its deadline comes
/// first and it runs at once, for the 20-50 µs a request takes. It gets
/// no more CPU than before, only sooner.
pub const SERVER_SLICE_NS: u64 = 100_000;

/// Give the calling thread [`SERVER_SLICE_NS`] (Linux >= 6.12; older
/// kernels take the call and keep the default). True when the call was
/// taken: its children must then go back to the default slice
/// (`ExecSpec::reset_sched`), since a slice is inherited at fork.
pub fn short_slice() -> bool {
    fair_slice(SERVER_SLICE_NS).is_ok()
}

/// SCHED_OTHER with the default slice, the nice value kept; where
/// `sched_setattr` is missing, `sched_setscheduler`. Async-signal-safe.
fn normal_scheduling() -> Result<(), Errno> {
    match fair_slice(0) {
        Err(Errno::ENOSYS) => {
            let normal = libc::sched_param { sched_priority: 0 };
            // SAFETY: a pointer to a sched_param on the stack.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &normal) } < 0 {
                return Err(Errno::last());
            }
            Ok(())
        }
        r => r,
    }
}

/// Whether this thread runs under another scheduling policy than
/// SCHED_OTHER (then its children must be set back: see [`ExecSpec`]).
pub fn unusual_policy() -> bool {
    // SAFETY: a query without arguments.
    let policy = unsafe { libc::sched_getscheduler(0) };
    policy & !libc::SCHED_RESET_ON_FORK != libc::SCHED_OTHER
}

/// The environment a tenant process gets: cleared, then the plan's `keep`
/// names taken from `caller`, then the plan's `set` values.
pub fn environment(
    plan: &Plan,
    caller: impl Iterator<Item = (String, String)>,
    extra: &[(String, String)],
) -> Vec<(String, String)> {
    environment_of(&plan.env, caller, extra)
}

/// [`environment`] from the plan's environment rules alone.
pub fn environment_of(
    rules: &corral_profile::plan::EnvPlan,
    caller: impl Iterator<Item = (String, String)>,
    extra: &[(String, String)],
) -> Vec<(String, String)> {
    let mut env: std::collections::BTreeMap<String, String> =
        caller.filter(|(k, _)| rules.keep.contains(k)).collect();
    for (k, v) in &rules.set {
        env.insert(k.clone(), v.clone());
    }
    for (k, v) in extra {
        env.insert(k.clone(), v.clone());
    }
    env.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_profile::plan::{EnvPlan, SeccompAction, SeccompPlan};

    fn security() -> corral_security::Prepared {
        let plan = SeccompPlan {
            enabled: false,
            action: SeccompAction::Errno,
            allow_ptrace: false,
            allow_io_uring: false,
            deny: vec![],
            allow: vec![],
        };
        corral_security::prepare(&plan, 65534, 65534, &[]).unwrap()
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn spec<'a>(argv: &'a [String], env: &'a [(String, String)]) -> ExecSpec<'a> {
        ExecSpec {
            argv,
            env,
            cwd: "/srv",
            stdio: [None; 3],
            new_session: true,
            controlling_tty: false,
            preserve_fds: 0,
            pass_fds: &[],
            listen_pid: false,
            reset_signals: None,
            reset_sched: false,
            reset_oom: false,
            subreaper: false,
            attrs: None,
        }
    }

    #[test]
    fn commands_are_found_on_the_path_given() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        use std::os::unix::fs::PermissionsExt;
        for (name, mode) in [("tool", 0o755), ("data", 0o644)] {
            std::fs::write(bin.join(name), "").unwrap();
            std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(mode))
                .unwrap();
        }
        std::fs::create_dir(bin.join("subdir")).unwrap();
        let path = format!("::/nonexistent:{}", bin.display());
        assert_eq!(resolve("tool", &path), Some(bin.join("tool")));
        assert_eq!(resolve("data", &path), None, "not executable");
        assert_eq!(resolve("subdir", &path), None, "a directory");
        assert_eq!(resolve("missing", &path), None);
        assert_eq!(
            resolve("./rel/x", ""),
            Some(PathBuf::from("./rel/x")),
            "a path is taken as it is (checked at exec, inside the sandbox)"
        );
    }

    #[test]
    fn an_exec_is_prepared_completely_before_the_child_exists() {
        let sec = security();
        let argv = strings(&["sh", "-c", "echo hi"]);
        let env = vec![("PATH".to_string(), "/bin:/usr/bin".to_string())];
        let e = Exec::prepare(
            &sec,
            &[(libc::RLIMIT_NOFILE as libc::c_int, 64, 128)],
            spec(&argv, &env),
        )
        .unwrap();
        assert!(e.path.to_str().unwrap().ends_with("/sh"), "{:?}", e.path);
        assert_eq!(e.argv_ptrs.len(), 4, "argv and its NULL");
        assert!(e.argv_ptrs[3].is_null());
        assert_eq!(
            e.argv_ptrs[1],
            e.argv[1].as_ptr(),
            "pointers into the argv it owns"
        );
        assert_eq!(e.envp_ptrs.len(), 2);
        assert!(e.envp_ptrs[1].is_null());
        assert_eq!(e.envp[0].to_str().unwrap(), "PATH=/bin:/usr/bin");
        assert_eq!(e.cwd.to_str().unwrap(), "/srv");
        assert_eq!(e.rlimits.len(), 1);
        assert_eq!(
            (e.rlimits[0].1.rlim_cur, e.rlimits[0].1.rlim_max),
            (64, 128)
        );
        assert!(
            e.new_session && !e.foreground_tty,
            "a new session never takes the terminal"
        );

        // Without PATH, the default one is searched.
        let none: Vec<(String, String)> = vec![];
        assert!(Exec::prepare(&sec, &[], spec(&argv, &none)).is_ok());
        let missing = strings(&["no-such-command-here"]);
        match Exec::prepare(&sec, &[], spec(&missing, &env)) {
            Err(e @ SpawnError::NotFound(_)) => {
                assert_eq!(e.exit_code(), 127);
                assert_eq!(
                    e.to_string(),
                    "no-such-command-here: command not found in the sandbox"
                );
            }
            _ => panic!("expected NotFound"),
        }
        assert!(matches!(
            Exec::prepare(&sec, &[], spec(&[], &env)),
            Err(SpawnError::NotFound(p)) if p.is_empty()
        ));
        let nul = strings(&["sh", "a\0b"]);
        assert!(matches!(
            Exec::prepare(&sec, &[], spec(&nul, &env)),
            Err(SpawnError::Nul(a)) if a == "a\0b"
        ));
        let nul_env = vec![("X".to_string(), "1\0".to_string())];
        assert!(matches!(
            Exec::prepare(&sec, &[], spec(&argv, &nul_env)),
            Err(SpawnError::Nul(_))
        ));
    }

    #[test]
    fn failures_survive_the_trip_through_the_init() {
        let argv = strings(&["/srv/app"]);
        for e in [
            SpawnError::NotFound("/srv/app".into()),
            SpawnError::failed(Step::Exec, Errno::EACCES),
            SpawnError::failed(Step::Exec, Errno::ENOENT),
            SpawnError::failed(Step::Chdir, Errno::ENOENT),
            SpawnError::failed(Step::Fork, Errno::EAGAIN),
            SpawnError::failed(Step::Seccomp, Errno::EINVAL),
        ] {
            let (step, errno) = e.to_reply();
            // On the wire: JSON, the step by name.
            let reply = crate::proto::Reply::Failed { step, errno };
            let json = crate::proto::encode(&reply);
            assert_eq!(
                crate::proto::decode::<crate::proto::Reply>(&json).unwrap(),
                reply
            );
            let back = SpawnError::from_reply(&argv, step, errno);
            assert_eq!(back.to_string(), e.to_string());
            assert_eq!(back.exit_code(), e.exit_code());
        }
        let codes: Vec<i32> = [
            SpawnError::NotFound(String::new()),
            SpawnError::failed(Step::Exec, Errno::ENOENT),
            SpawnError::failed(Step::Exec, Errno::EACCES),
            SpawnError::failed(Step::Chdir, Errno::EACCES),
        ]
        .iter()
        .map(SpawnError::exit_code)
        .collect();
        assert_eq!(codes, [127, 127, 126, 125], "as a shell reports them");
        assert_eq!(
            SpawnError::failed(Step::Exec, Errno::EACCES).to_string(),
            "exec: EACCES: Permission denied"
        );
        // A NUL byte is refused before anything starts; it comes back as
        // the step with EINVAL.
        assert_eq!(
            SpawnError::Nul("x".into()).to_reply(),
            (Step::Arguments, libc::EINVAL)
        );
        let json = String::from_utf8(crate::proto::encode(&crate::proto::Reply::Failed {
            step: Step::Chdir,
            errno: 13,
        }))
        .unwrap();
        assert_eq!(json, r#"{"Failed":{"step":"Chdir","errno":13}}"#);
    }

    #[test]
    fn the_environment_is_cleared_then_kept_then_set() {
        let rules = EnvPlan {
            keep: strings(&["TERM", "LANG", "ABSENT"]),
            set: [("PATH", "/usr/bin:/bin"), ("LANG", "C.UTF-8")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        let caller = [
            ("TERM", "xterm"),
            ("LANG", "de_DE"),
            ("SECRET", "x"),
            ("PATH", "/host"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let extra = vec![("TERM".to_string(), "dumb".to_string())];
        let env = environment_of(&rules, caller, &extra);
        let want: Vec<(String, String)> = [
            ("LANG", "C.UTF-8"),
            ("PATH", "/usr/bin:/bin"),
            ("TERM", "dumb"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(
            env, want,
            "sorted; set beats kept, extra beats set; the rest is gone"
        );
    }
}
