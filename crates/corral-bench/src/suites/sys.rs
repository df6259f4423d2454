//! Processes the suites start: every load and every exec is bounded in time
//! (a watchdog kills its process group), servers run in sessions of their own
//! and are stopped as process groups by pid, and Ctrl-C / SIGTERM only sets a
//! flag that the suites check between steps (so cleanup always runs).

use std::fs::File;
use std::io::{Read, Seek};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::error::{BenchError, Result};
use crate::suites::tools;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
    // A second Ctrl-C gets the default action (the cleanup of the first
    // one is what is running). Only Ctrl-C: SIGTERM and SIGHUP often come
    // twice for one request to stop (timeout(1) signals its command and
    // then the command's whole process group, which holds the command
    // again), and dying on the second one would leave the servers, the
    // sandboxes and their cgroups behind.
    if sig == libc::SIGINT {
        // SAFETY: signal(2) is async-signal-safe; SIG_DFL is a valid disposition.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
}

/// Catch SIGINT, SIGTERM and SIGHUP: they set the interrupt flag.
pub fn install_interrupt_handler() {
    for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic and calls signal(2),
        // both async-signal-safe.
        unsafe { libc::signal(s, on_signal as *const () as libc::sighandler_t) };
    }
}

/// Whether the run was interrupted.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// `Err(Interrupted)` once Ctrl-C was pressed.
pub fn check_interrupt() -> Result<()> {
    if interrupted() {
        Err(BenchError::Interrupted)
    } else {
        Ok(())
    }
}

/// Sleep in small steps, returning early when interrupted.
pub fn sleep(d: Duration) {
    let end = Instant::now() + d;
    while !interrupted() {
        let now = Instant::now();
        if now >= end {
            break;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(50)));
    }
}

/// Grace between the watchdog's SIGTERM and its SIGKILL: `corral run`
/// forwards SIGTERM to the tenant's process, which lives in a process group
/// of its own; a SIGKILL would leave it running until `corral down`.
const KILL_GRACE: Duration = Duration::from_secs(2);

/// The one watchdog thread: stops an armed process group when its deadline
/// passes or the run is interrupted (SIGTERM, then SIGKILL after
/// [`KILL_GRACE`]).
struct Watchdog {
    /// (process group, deadline, stopped on interrupt too).
    armed: Mutex<Vec<(i32, Instant, bool)>>,
    /// Groups signalled, with when SIGTERM was sent.
    fired: Mutex<Vec<(i32, Instant)>>,
}

fn watchdog() -> &'static Arc<Watchdog> {
    static W: OnceLock<Arc<Watchdog>> = OnceLock::new();
    W.get_or_init(|| {
        let w = Arc::new(Watchdog {
            armed: Mutex::new(Vec::new()),
            fired: Mutex::new(Vec::new()),
        });
        let t = Arc::clone(&w);
        std::thread::Builder::new()
            .name("bench-watchdog".into())
            .spawn(move || loop {
                std::thread::sleep(Duration::from_millis(20));
                let now = Instant::now();
                let armed = t.armed.lock().unwrap_or_else(|e| e.into_inner());
                let mut fired = t.fired.lock().unwrap_or_else(|e| e.into_inner());
                for &(pgid, deadline, interruptible) in armed.iter() {
                    if !((interruptible && interrupted()) || now >= deadline) {
                        continue;
                    }
                    // Both kills: kill(2) of a process group we created whose
                    // leader is not reaped yet (it stays armed until then,
                    // so its pgid cannot have been reused).
                    match fired.iter().find(|(p, _)| *p == pgid) {
                        None => {
                            // SAFETY: kill(2) takes no pointers; the group
                            // is ours and its leader unreaped (see above).
                            unsafe { libc::kill(-pgid, libc::SIGTERM) };
                            fired.push((pgid, now));
                        }
                        Some((_, at)) if now >= *at + KILL_GRACE => {
                            // SAFETY: as for the SIGTERM above.
                            unsafe { libc::kill(-pgid, libc::SIGKILL) };
                        }
                        Some(_) => {}
                    }
                }
            })
            .expect("spawn the watchdog thread");
        w
    })
}

/// How a bounded run ended.
#[derive(Debug, Clone)]
pub struct Finished {
    /// Exit code, or 128 + signal.
    pub code: i32,
    /// Killed by the watchdog (time limit or interrupt).
    pub timed_out: bool,
    pub wall: Duration,
    /// User + system CPU of the process and its reaped descendants.
    pub cpu: Duration,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    pub fn success(&self) -> bool {
        self.code == 0 && !self.timed_out
    }

    /// The last lines of stderr (or stdout), for error messages.
    pub fn tail(&self) -> String {
        let text = if self.stderr.trim().is_empty() {
            &self.stdout
        } else {
            &self.stderr
        };
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let start = lines.len().saturating_sub(4);
        lines[start..].join(" | ")
    }

    /// `exit 1: <tail>` / `timed out after 60 s` for notes.
    pub fn describe(&self, limit: Duration) -> String {
        if self.timed_out {
            if interrupted() {
                "interrupted".into()
            } else {
                format!("timed out after {} s (killed)", limit.as_secs())
            }
        } else {
            let t = self.tail();
            if t.is_empty() {
                format!("exit status {}", self.code)
            } else {
                format!("exit status {}: {t}", self.code)
            }
        }
    }
}

/// What to do with the output of a bounded run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Keep stdout and stderr (in anonymous temporary files, no pipes to drain).
    Capture,
    /// Discard stdout, keep stderr (error messages).
    Stderr,
    /// Discard both (tight timing loops).
    Discard,
}

/// Run `cmd` in a new process group with stdin from /dev/null, kill the
/// whole group if it runs longer than `limit` (or on Ctrl-C), and return its
/// status, times and output. The wall time spans spawn to reap.
pub fn run_bounded(cmd: &mut Command, limit: Duration, output: Output) -> Result<Finished> {
    spawn_bounded(cmd, limit, output)?.wait()
}

/// [`run_bounded`] with the output captured, for a step that must succeed:
/// how it ended if it exited 0; else `Interrupted` when Ctrl-C killed it (not
/// a failure), or `suite`'s error "`what`: exit status … / timed out …".
pub fn run_ok(
    cmd: &mut Command,
    limit: Duration,
    suite: &'static str,
    what: impl std::fmt::Display,
) -> Result<Finished> {
    let f = run_bounded(cmd, limit, Output::Capture)?;
    if f.success() {
        return Ok(f);
    }
    check_interrupt()?;
    Err(BenchError::suite(
        suite,
        format!("{what}: {}", f.describe(limit)),
    ))
}

/// Like [`run_bounded`] but for cleanup: runs (and is only killed at its
/// deadline) even after Ctrl-C.
pub fn run_cleanup(cmd: &mut Command, limit: Duration) -> Result<Finished> {
    spawn_inner(cmd, limit, Output::Capture, false)?.wait()
}

/// A bounded process that is running (see [`spawn_bounded`]).
pub struct Running {
    pid: i32,
    program: String,
    start: Instant,
    out: Option<File>,
    err: Option<File>,
    reaped: bool,
}

/// Start `cmd` like [`run_bounded`] without waiting (several may run at once).
pub fn spawn_bounded(cmd: &mut Command, limit: Duration, output: Output) -> Result<Running> {
    check_interrupt()?;
    spawn_inner(cmd, limit, output, true)
}

fn spawn_inner(
    cmd: &mut Command,
    limit: Duration,
    output: Output,
    interruptible: bool,
) -> Result<Running> {
    let tmp = || tempfile::tempfile().map_err(|e| BenchError::io("temporary file", e));
    let out = if output == Output::Capture {
        Some(tmp()?)
    } else {
        None
    };
    let err = if output == Output::Discard {
        None
    } else {
        Some(tmp()?)
    };
    let to_stdio = |f: &Option<File>| -> Result<Stdio> {
        Ok(match f {
            Some(f) => Stdio::from(
                f.try_clone()
                    .map_err(|e| BenchError::io("temporary file", e))?,
            ),
            None => Stdio::null(),
        })
    };
    cmd.stdin(Stdio::null())
        .stdout(to_stdio(&out)?)
        .stderr(to_stdio(&err)?);
    cmd.process_group(0);
    let program = cmd.get_program().to_string_lossy().into_owned();
    let w = watchdog();
    let start = Instant::now();
    let child = cmd.spawn().map_err(|e| BenchError::io(&program, e))?;
    let pid = child.id() as i32;
    drop(child); // we reap it ourselves with wait4; dropping a Child does not wait
    w.armed
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((pid, start + limit, interruptible));
    Ok(Running {
        pid,
        program,
        start,
        out,
        err,
        reaped: false,
    })
}

impl Running {
    /// Wait for the process (its group is killed only when it timed out).
    pub fn wait(mut self) -> Result<Finished> {
        let w = watchdog();
        // Wait without reaping, disarm, then reap: the watchdog never signals
        // a group whose leader's pid could already be recycled.
        // SAFETY: siginfo_t is plain data.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: waitid on our own child with a valid siginfo buffer.
            let r = unsafe {
                libc::waitid(
                    libc::P_PID,
                    self.pid as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOWAIT,
                )
            };
            if r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break;
            }
        }
        w.armed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(p, _, _)| *p != self.pid);
        let mut status = 0;
        // SAFETY: rusage is plain data.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: reaping our own child.
            let r = unsafe { libc::wait4(self.pid, &mut status, 0, &mut ru) };
            if r == self.pid {
                break;
            }
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(BenchError::io(&self.program, e));
            }
        }
        self.reaped = true;
        let wall = self.start.elapsed();
        let timed_out = {
            let mut f = w.fired.lock().unwrap_or_else(|e| e.into_inner());
            let was = f.iter().any(|(p, _)| *p == self.pid);
            f.retain(|(p, _)| *p != self.pid);
            was
        };
        // Processes the leader left behind in its group after a normal exit
        // are left alone: `corral up` leaves the tenant init there (it does
        // not start a session of its own). On a timeout the watchdog already
        // killed the whole group.
        let code = if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            128 + libc::WTERMSIG(status)
        };
        let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
        Ok(Finished {
            code,
            timed_out,
            wall,
            cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
            stdout: read_all(self.out.take()),
            stderr: read_all(self.err.take()),
        })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.reaped {
            // An error path dropped a running process: kill and reap it.
            // SAFETY: our own, unreaped child's group.
            unsafe { libc::kill(-self.pid, libc::SIGKILL) };
            let mut st = 0;
            // SAFETY: reaping our own child.
            unsafe { libc::waitpid(self.pid, &mut st, 0) };
            watchdog()
                .armed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|(p, _, _)| *p != self.pid);
        }
    }
}

fn read_all(f: Option<File>) -> String {
    let Some(mut f) = f else { return String::new() };
    let mut s = Vec::new();
    let _ = f.rewind();
    let _ = f.read_to_end(&mut s);
    String::from_utf8_lossy(&s).into_owned()
}

/// A long-running server (nginx, fcgiwrap, the gateway) in a session of its
/// own. Dropping it stops the whole process group: SIGTERM, up to 3 s, then
/// SIGKILL. Its stderr goes to `log`.
pub struct Server {
    pub name: String,
    pub pid: i32,
    reaped: bool,
}

impl Server {
    /// Start `cmd` with setsid (so Ctrl-C on the terminal does not reach it
    /// and its whole tree is one process group), stdio to `log`.
    pub fn start(name: &str, cmd: &mut Command, log: &Path) -> Result<Server> {
        check_interrupt()?;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| BenchError::io(log, e))?;
        let f2 = f.try_clone().map_err(|e| BenchError::io(log, e))?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(f))
            .stderr(Stdio::from(f2));
        // SAFETY: setsid is async-signal-safe; nothing else runs between
        // fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| BenchError::io(cmd.get_program(), e))?;
        Ok(Server {
            name: name.to_string(),
            pid: child.id() as i32,
            reaped: false,
        })
    }

    /// The leader exited already (a server that failed to start).
    pub fn exited(&mut self) -> Option<i32> {
        if self.reaped {
            return Some(-1);
        }
        let mut status = 0;
        // SAFETY: non-blocking reap of our own child.
        let r = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
        if r == self.pid {
            self.reaped = true;
            Some(status)
        } else {
            None
        }
    }

    fn group_alive(&self) -> bool {
        // SAFETY: signal 0 only checks for existence.
        unsafe { libc::kill(-self.pid, 0) == 0 }
    }

    /// Stop the process group (idempotent).
    pub fn stop(&mut self) {
        stop_all(std::slice::from_mut(self));
    }
}

/// Stop several servers at once: SIGTERM to every group, up to 2 s for them
/// to go, then SIGKILL to what is left (fcgiwrap's workers, blocked in
/// accept, ignore SIGTERM).
pub fn stop_all(servers: &mut [Server]) {
    let signal_all = |servers: &mut [Server], sig| {
        for s in servers.iter() {
            // SAFETY: kill(2) of a process group we created (its pgid is the
            // leader's pid, which cannot be reused while the group exists).
            unsafe { libc::kill(-s.pid, sig) };
        }
    };
    let gone = |servers: &mut [Server]| {
        servers.iter_mut().all(|s| {
            s.exited();
            s.reaped && !s.group_alive()
        })
    };
    for (sig, grace) in [
        (libc::SIGTERM, Duration::from_secs(2)),
        (libc::SIGKILL, Duration::from_secs(5)),
    ] {
        signal_all(servers, sig);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if gone(servers) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Servers stopped together when dropped (also on error paths).
#[derive(Default)]
pub struct Servers(pub Vec<Server>);

impl Servers {
    pub fn push(&mut self, s: Server) {
        self.0.push(s);
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        stop_all(&mut self.0);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Wait until `ready` holds, the server dies, or `limit` passes.
pub fn wait_ready(
    server: &mut Server,
    limit: Duration,
    mut ready: impl FnMut() -> bool,
) -> Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        check_interrupt()?;
        if ready() {
            return Ok(());
        }
        if let Some(st) = server.exited() {
            return Err(BenchError::suite(
                "setup",
                format!("{} exited during startup (wait status {st})", server.name),
            ));
        }
        if Instant::now() >= deadline {
            return Err(BenchError::suite(
                "setup",
                format!("{} not ready after {} s", server.name, limit.as_secs()),
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `argv` as a command, under `taskset -c CPU` when pinning.
pub fn pinned(cpu: Option<usize>, argv: &[String]) -> Command {
    match cpu {
        Some(cpu) => {
            let mut c = Command::new(tools::TASKSET.find().unwrap_or_else(|| "taskset".into()));
            c.arg("-c").arg(cpu.to_string()).args(argv);
            c
        }
        None => {
            let mut c = Command::new(&argv[0]);
            c.args(&argv[1..]);
            c
        }
    }
}

/// The last `n` non-empty lines of a log file, joined with ` | `.
pub fn log_tail(p: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(p).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// Print what a cleanup could not undo (for `Drop`, which cannot fail).
pub fn report_cleanup(problems: Vec<String>) {
    for p in problems {
        eprintln!("corral-bench: cleanup: {p}");
    }
}

/// Run a command in a child process as `uid`/`gid` (supplementary groups
/// cleared), as the tenant would.
pub fn as_user(cmd: &mut Command, uid: u32, gid: u32) -> &mut Command {
    // std calls setgroups(0) before setgid/setuid when it runs as root.
    cmd.uid(uid).gid(gid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_runs_capture_and_time_out() {
        let f = run_bounded(
            Command::new("/bin/sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(10),
            Output::Capture,
        )
        .unwrap();
        assert_eq!(f.code, 3);
        assert_eq!(f.stdout.trim(), "out");
        assert_eq!(f.stderr.trim(), "err");
        assert!(!f.timed_out);

        // The child forks a grandchild in the same group: both are killed.
        let t = Instant::now();
        let f = run_bounded(
            Command::new("/bin/sh").args(["-c", "sleep 30 & sleep 30"]),
            Duration::from_millis(200),
            Output::Discard,
        )
        .unwrap();
        assert!(f.timed_out, "{f:?}");
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn servers_stop_as_groups() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Server::start(
            "sleepers",
            Command::new("/bin/sh").args(["-c", "sleep 60 & sleep 60 & wait"]),
            &dir.path().join("log"),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert!(s.group_alive());
        let pid = s.pid;
        s.stop();
        // SAFETY: existence check only.
        assert_ne!(unsafe { libc::kill(-pid, 0) }, 0, "group gone");
    }
}
