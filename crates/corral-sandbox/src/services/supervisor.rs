//! The init's service supervisor: one state machine per service, driven by
//! the init's poll loop (readable listening sockets and output pipes,
//! deadlines) and by its reaping of children.
//!
//! States: `waiting` (on-demand, no process; a connection starts it) →
//! `running` → (exit) `backoff` → `running`..., or `stopping` (stop
//! signal sent, SIGKILL at the stop timeout) → `waiting`/`stopped`.
//!
//! Idle stop (on-demand services): every few seconds the init looks at the
//! service's main process; it is busy while it has children (PHP-FPM with
//! `pm = ondemand` forks a worker per burst of requests and ends it
//! `pm.process_idle_timeout` after the last). After `idle_timeout` without a
//! busy look, the service gets its stop signal; the listening socket stays
//! with the init, so a connection arriving meanwhile waits in its backlog
//! and starts the service again.

use super::log::LogFile;
use crate::proto::{ServiceOp, ServiceStatus};
use crate::spawn::SpawnError;
use corral_profile::plan::{Restart, ServicePlan, StartMode};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How the init starts a process for the supervisor (its spawner, as the
/// tenant, hardened like every command of the sandbox).
pub trait Spawn {
    fn spawn_service(
        &mut self,
        argv: &[String],
        env: &[(String, String)],
        cwd: &str,
        stdout: RawFd,
        pass_fds: &[RawFd],
    ) -> Result<i32, SpawnError>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Waiting,
    Running,
    Stopping,
    BackOff,
    Stopped,
}

impl State {
    fn name(self) -> &'static str {
        match self {
            State::Waiting => "waiting",
            State::Running => "running",
            State::Stopping => "stopping",
            State::BackOff => "backoff",
            State::Stopped => "stopped",
        }
    }
}

/// What follows once a stopping service has exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    /// Idle or `service stop`: back to `waiting` (on-demand) or `stopped`.
    Rest,
    Restart,
}

/// A run shorter than this counts as a failure for the back-off.
const STABLE: Duration = Duration::from_secs(10);
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

struct Service {
    plan: ServicePlan,
    listeners: Vec<OwnedFd>,
    log: LogFile,
    state: State,
    then: Then,
    pid: Option<i32>,
    /// Read end of the pipe that is the service's stdout and stderr.
    output: Option<OwnedFd>,
    since: SystemTime,
    started: Instant,
    starts: u64,
    restarts: u64,
    /// Consecutive runs that ended before [`STABLE`].
    failures: u32,
    last_exit: Option<String>,
    last_error: Option<String>,
    /// `backoff`: when to start again; `stopping`: when to SIGKILL;
    /// `running` with an idle timeout: the next idle look.
    deadline: Option<Instant>,
    last_busy: Instant,
    workers: u32,
}

/// Something for the init to poll on behalf of the supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    /// A listening socket of a waiting service: a connection is queued.
    Listener(usize),
    /// Output of a running service.
    Output(usize),
}

pub struct Supervisor {
    services: Vec<Service>,
    /// The profile's `env.set`, under every service's own `env`.
    base_env: Vec<(String, String)>,
    /// Sandbox view of /proc, for the idle looks (None: no /proc mounted).
    proc_ok: bool,
    /// The tenant: owner of the services' output pipes.
    owner: (u32, u32),
}

impl Supervisor {
    /// `fds` as `corral up` sent them: per service its sockets, then its
    /// log directory ([`super::host::prepare`]).
    pub fn new(
        plans: Vec<ServicePlan>,
        fds: Vec<OwnedFd>,
        base_env: Vec<(String, String)>,
        owner: (u32, u32),
    ) -> Supervisor {
        let mut fds = fds.into_iter();
        let now = Instant::now();
        let services = plans
            .into_iter()
            .filter_map(|plan| {
                let listeners: Vec<OwnedFd> = fds.by_ref().take(plan.listen.len()).collect();
                let dir = fds.next()?;
                let name = plan
                    .log
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| format!("{}.log", plan.name));
                let log = LogFile::new(dir, name, plan.log_max_size, plan.log_keep);
                Some(Service {
                    state: match plan.start {
                        StartMode::OnDemand => State::Waiting,
                        StartMode::AtUp => State::Stopped,
                    },
                    plan,
                    listeners,
                    log,
                    then: Then::Rest,
                    pid: None,
                    output: None,
                    since: SystemTime::now(),
                    started: now,
                    starts: 0,
                    restarts: 0,
                    failures: 0,
                    last_exit: None,
                    last_error: None,
                    deadline: None,
                    last_busy: now,
                    workers: 0,
                })
            })
            .collect();
        Supervisor {
            services,
            base_env,
            proc_ok: std::path::Path::new("/proc/self/task").exists(),
            owner,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.services.is_empty()
    }

    /// Start the `at-up` services (once the sandbox is ready).
    pub fn start_at_up(&mut self, sp: &mut dyn Spawn) {
        for i in 0..self.services.len() {
            if self.services[i].plan.start == StartMode::AtUp {
                self.start(i, sp);
            }
        }
    }

    /// Services with a main process.
    pub fn running(&self) -> usize {
        self.services.iter().filter(|s| s.pid.is_some()).count()
    }

    /// What to poll now, each with what it means.
    pub fn watches(&self) -> Vec<(BorrowedFd<'_>, Watch)> {
        let mut out = Vec::new();
        for (i, s) in self.services.iter().enumerate() {
            if s.state == State::Waiting {
                out.extend(s.listeners.iter().map(|l| (l.as_fd(), Watch::Listener(i))));
            }
            if let Some(o) = &s.output {
                out.push((o.as_fd(), Watch::Output(i)));
            }
        }
        out
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.services.iter().filter_map(|s| s.deadline).min()
    }

    /// A watched fd is ready (readable, or hung up). Returns how many
    /// bytes of `buf` it used.
    pub fn ready(&mut self, w: Watch, buf: &mut [u8], sp: &mut dyn Spawn) -> usize {
        match w {
            Watch::Listener(i) => {
                if self.services[i].state == State::Waiting {
                    self.services[i]
                        .log
                        .note("connection: starting (socket activation)");
                    self.start(i, sp);
                }
                0
            }
            Watch::Output(i) => self.services[i].pump(buf),
        }
    }

    /// Deadlines that have passed: back-off restarts, idle looks, kills.
    pub fn tick(&mut self, sp: &mut dyn Spawn) {
        let now = Instant::now();
        for i in 0..self.services.len() {
            let due = self.services[i].deadline.is_some_and(|d| d <= now);
            if !due {
                continue;
            }
            self.services[i].deadline = None;
            match self.services[i].state {
                // After a failed run that is not restarted (an on-demand
                // service with `restart = "never"`...), back to waiting:
                // a connection still queued starts it then, not at once
                // (a program that fails at once would otherwise be
                // respawned in a tight loop).
                State::BackOff if self.services[i].then == Then::Rest => self.services[i].rest(),
                State::BackOff => self.start(i, sp),
                State::Stopping => {
                    let s = &mut self.services[i];
                    if let Some(pid) = s.pid {
                        s.log.note(&format!(
                            "still running {} ms after {}: SIGKILL",
                            s.plan.stop_timeout_ms,
                            corral_profile::signal_name(s.plan.stop_signal)
                        ));
                        kill_group(pid, Signal::SIGKILL);
                    }
                }
                State::Running => self.idle_look(i, now),
                State::Waiting | State::Stopped => {}
            }
        }
    }

    fn idle_look(&mut self, i: usize, now: Instant) {
        let proc_ok = self.proc_ok;
        let s = &mut self.services[i];
        let Some(pid) = s.pid else { return };
        let idle = Duration::from_millis(s.plan.idle_timeout_ms);
        // Without /proc the service never counts as idle.
        let workers = if proc_ok { children(pid) } else { None };
        s.workers = workers.unwrap_or(0);
        // Unknown counts as busy: never stop what cannot be looked at. A
        // connection waiting in a listening socket's backlog is work too:
        // a service that has not taken it yet (a slow start on a loaded
        // host) is not idle, and stopping it would only start it again.
        if workers.is_none_or(|n| n > 0) || s.listeners.iter().any(|l| pending(l.as_fd())) {
            s.last_busy = now;
        }
        if now.duration_since(s.last_busy) >= idle {
            s.log.note(&format!(
                "idle for {} s: stopping",
                idle.as_secs_f64().round()
            ));
            self.stop(i, Then::Rest, "stopped: idle");
        } else {
            s.deadline = Some(now + look_every(idle));
        }
    }

    fn start(&mut self, i: usize, sp: &mut dyn Spawn) {
        let s = &mut self.services[i];
        if s.pid.is_some() {
            return;
        }
        let mut env = self.base_env.clone();
        for (k, v) in &s.plan.env {
            env.retain(|(ek, _)| ek != k);
            env.push((k.clone(), v.clone()));
        }
        if !s.listeners.is_empty() {
            let n = s.listeners.len();
            env.push(("LISTEN_FDS".into(), n.to_string()));
            env.push((
                "LISTEN_FDNAMES".into(),
                vec![s.plan.name.as_str(); n].join(":"),
            ));
            let fpm: Vec<String> = s
                .plan
                .listen
                .iter()
                .enumerate()
                .map(|(k, p)| format!("{}={}", p.display(), 3 + k))
                .collect();
            env.push(("FPM_SOCKETS".into(), fpm.join(",")));
        }
        // What the previous run wrote last, before its pipe is replaced.
        if s.output.is_some() {
            let mut buf = [0u8; 4096];
            for _ in 0..64 {
                if s.pump(&mut buf) == 0 {
                    break;
                }
            }
        }
        let (rd, wr) = match pipe(self.owner) {
            Ok(p) => p,
            Err(e) => {
                s.last_error = Some(format!("pipe: {e}"));
                s.log.note(&format!("cannot start: pipe: {e}"));
                s.then = Then::Restart;
                self.back_off(i);
                return;
            }
        };
        let pass: Vec<RawFd> = s.listeners.iter().map(|l| l.as_raw_fd()).collect();
        let cwd = s.plan.workdir.to_string_lossy().into_owned();
        match sp.spawn_service(&s.plan.command, &env, &cwd, wr.as_raw_fd(), &pass) {
            Ok(pid) => {
                drop(wr);
                s.pid = Some(pid);
                s.output = Some(rd);
                s.starts += 1;
                s.last_error = None;
                s.started = Instant::now();
                s.last_busy = s.started;
                s.set(State::Running);
                s.then = Then::Rest;
                s.deadline = (s.plan.start == StartMode::OnDemand && s.plan.idle_timeout_ms > 0)
                    .then(|| s.started + look_every(Duration::from_millis(s.plan.idle_timeout_ms)));
                s.log.note(&format!("started, pid {pid} (in the sandbox)"));
            }
            Err(e) => {
                let msg = e.to_string();
                let prog = s.plan.command.first().map_or("", String::as_str);
                s.log.note(&format!("cannot start {prog:?}: {msg}"));
                s.last_error = Some(msg);
                s.failures += 1;
                s.then = Then::Restart;
                self.back_off(i);
            }
        }
    }

    fn back_off(&mut self, i: usize) {
        let s = &mut self.services[i];
        let delay = backoff(s.failures);
        s.set(State::BackOff);
        s.deadline = Some(Instant::now() + delay);
        s.log
            .note(&format!("restarting in {} ms", delay.as_millis()));
    }

    fn stop(&mut self, i: usize, then: Then, why: &str) {
        let s = &mut self.services[i];
        match (s.state, s.pid) {
            (State::Running | State::Stopping, Some(pid)) => {
                if s.state == State::Running {
                    let sig = Signal::try_from(s.plan.stop_signal).unwrap_or(Signal::SIGTERM);
                    let _ = kill(Pid::from_raw(pid), sig);
                    s.deadline =
                        Some(Instant::now() + Duration::from_millis(s.plan.stop_timeout_ms));
                    s.last_exit = Some(why.to_string());
                }
                s.set(State::Stopping);
                s.then = then;
            }
            _ => {
                s.deadline = None;
                s.rest();
            }
        }
    }

    /// A child of the init exited: true if it was a service's main process.
    pub fn exited(
        &mut self,
        pid: i32,
        code: Option<i32>,
        signal: Option<i32>,
        sp: &mut dyn Spawn,
    ) -> bool {
        let Some(i) = self.services.iter().position(|s| s.pid == Some(pid)) else {
            return false;
        };
        let s = &mut self.services[i];
        s.pid = None;
        s.workers = 0;
        // Whatever it forked and left behind goes with it (its session's
        // process group: the pgid stays reserved while any member lives).
        kill_group(pid, Signal::SIGKILL);
        let how = match (code, signal) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(sig)) => format!(
                "signal {}",
                Signal::try_from(sig).map_or_else(|_| sig.to_string(), |s| s.as_str().to_string())
            ),
            _ => "ended".to_string(),
        };
        s.log.note(&format!("pid {pid} ended: {how}"));
        if s.started.elapsed() >= STABLE {
            s.failures = 0;
        }
        if s.state == State::Stopping {
            s.deadline = None;
            if s.then == Then::Restart {
                self.start(i, sp);
            } else {
                s.rest();
            }
            return true;
        }
        let failed = code != Some(0);
        s.last_exit = Some(how);
        let again = match s.plan.restart {
            Restart::Always => true,
            Restart::OnFailure => failed,
            Restart::Never => false,
        };
        let short = s.started.elapsed() < STABLE;
        if again {
            s.restarts += 1;
            if short {
                s.failures += 1;
            }
            s.then = Then::Restart;
            self.back_off(i);
        } else if short && s.plan.start == StartMode::OnDemand {
            // Not restarted, but a connection may still be queued (or the
            // program left its socket readable): wait before it can start
            // again. A clean exit waits the shortest back-off; failures add up.
            if failed {
                s.failures += 1;
            } else {
                s.failures = 0;
            }
            s.then = Then::Rest;
            self.back_off(i);
        } else {
            s.deadline = None;
            s.rest();
        }
        true
    }

    /// `corral service start|stop|restart|status`.
    pub fn control(
        &mut self,
        op: ServiceOp,
        name: Option<&str>,
        sp: &mut dyn Spawn,
    ) -> Result<Vec<ServiceStatus>, String> {
        let picked: Vec<usize> = match name {
            None => (0..self.services.len()).collect(),
            Some(n) => match self.services.iter().position(|s| s.plan.name == n) {
                Some(i) => vec![i],
                None => {
                    let names: Vec<&str> =
                        self.services.iter().map(|s| s.plan.name.as_str()).collect();
                    return Err(if names.is_empty() {
                        format!("no service {n:?}: this sandbox has no services")
                    } else {
                        format!("no service {n:?}; this sandbox has: {}", names.join(", "))
                    });
                }
            },
        };
        for &i in &picked {
            match op {
                ServiceOp::Status => {
                    if let Some(pid) = self.services[i].pid {
                        if self.proc_ok {
                            self.services[i].workers = children(pid).unwrap_or(0);
                        }
                    }
                }
                ServiceOp::Start => {
                    if self.services[i].state == State::Stopping {
                        // Started again as soon as it has stopped.
                        self.services[i].then = Then::Restart;
                    } else if self.services[i].pid.is_none() {
                        self.services[i].failures = 0;
                        self.services[i].log.note("start (corral service start)");
                        self.start(i, sp);
                    }
                }
                ServiceOp::Stop => {
                    self.services[i].log.note("stop (corral service stop)");
                    self.stop(i, Then::Rest, "stopped: corral service stop");
                }
                ServiceOp::Restart => {
                    self.services[i]
                        .log
                        .note("restart (corral service restart)");
                    if self.services[i].pid.is_some() {
                        self.stop(i, Then::Restart, "stopped: corral service restart");
                    } else {
                        self.services[i].failures = 0;
                        self.start(i, sp);
                    }
                }
            }
        }
        Ok(picked.iter().map(|&i| self.services[i].status()).collect())
    }

    /// Stop every service now (the sandbox goes down): SIGKILL to each
    /// service's process group.
    pub fn kill_all(&mut self) {
        for s in &self.services {
            if let Some(pid) = s.pid {
                kill_group(pid, Signal::SIGKILL);
            }
        }
    }
}

impl Service {
    /// One read of the output pipe into the log; false when nothing was
    /// read (empty for now, or every writer gone: then the pipe is closed).
    /// Copies what the service wrote to its log; the bytes read (0: none).
    fn pump(&mut self, buf: &mut [u8]) -> usize {
        let Some(fd) = &self.output else {
            return 0;
        };
        match nix::unistd::read(fd.as_raw_fd(), buf) {
            Ok(n) if n > 0 => {
                self.log.write(&buf[..n]);
                n
            }
            Err(nix::errno::Errno::EAGAIN) => 0,
            // EOF: the service and whatever it forked are gone.
            _ => {
                self.output = None;
                0
            }
        }
    }

    fn set(&mut self, st: State) {
        self.state = st;
        self.since = SystemTime::now();
    }

    /// No process and none wanted: waiting for a connection, or stopped.
    fn rest(&mut self) {
        self.set(match self.plan.start {
            StartMode::OnDemand => State::Waiting,
            StartMode::AtUp => State::Stopped,
        });
    }

    fn status(&self) -> ServiceStatus {
        ServiceStatus {
            name: self.plan.name.clone(),
            state: self.state.name().to_string(),
            pid: self.pid,
            workers: self.workers,
            since_ms: self
                .since
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            starts: self.starts,
            restarts: self.restarts,
            last_exit: self.last_exit.clone(),
            last_error: self.last_error.clone(),
            listen: self
                .plan
                .listen
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            start: self.plan.start.name().to_string(),
            idle_timeout_ms: self.plan.idle_timeout_ms,
            log: self.plan.log.display().to_string(),
        }
    }
}

/// How often a running on-demand service is looked at.
fn look_every(idle: Duration) -> Duration {
    (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(5))
}

fn backoff(failures: u32) -> Duration {
    let shift = failures.saturating_sub(1).min(16);
    (BACKOFF_FIRST * (1u32 << shift)).min(BACKOFF_MAX)
}

/// Whether a listening socket has a connection waiting to be accepted.
fn pending(listener: BorrowedFd) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(listener, PollFlags::POLLIN)];
    poll(&mut fds, PollTimeout::ZERO).is_ok_and(|n| n > 0)
}

/// Children of `pid` (its only thread's list; a service's main process is
/// what forks its workers).
fn children(pid: i32) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    Some(text.split_ascii_whitespace().count() as u32)
}

fn kill_group(pid: i32, sig: Signal) {
    let _ = kill(Pid::from_raw(-pid), sig);
}

/// A pipe owned by the tenant: a service may open its output again
/// (`error_log = /proc/self/fd/2`, `/dev/stderr`), which checks the pipe's
/// owner like a file's.
fn pipe(owner: (u32, u32)) -> Result<(OwnedFd, OwnedFd), nix::errno::Errno> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let (rd, wr) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    // The init never blocks on a service's output.
    fcntl(rd.as_raw_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
    nix::unistd::fchown(wr.as_raw_fd(), Some(owner.0.into()), Some(owner.1.into()))?;
    Ok((rd, wr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_100ms_to_30s() {
        assert_eq!(backoff(0), Duration::from_millis(100));
        assert_eq!(backoff(1), Duration::from_millis(100));
        assert_eq!(backoff(2), Duration::from_millis(200));
        assert_eq!(backoff(5), Duration::from_millis(1600));
        assert_eq!(backoff(9), Duration::from_millis(25_600));
        assert_eq!(backoff(10), BACKOFF_MAX);
        assert_eq!(backoff(u32::MAX), BACKOFF_MAX);
    }

    #[test]
    fn a_connection_in_the_backlog_is_pending_until_accepted() {
        use std::os::unix::net::{UnixListener, UnixStream};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let l = UnixListener::bind(&path).unwrap();
        assert!(!pending(l.as_fd()), "nothing waits yet");
        let _c = UnixStream::connect(&path).unwrap();
        assert!(pending(l.as_fd()), "a connection waits");
        let (_accepted, _) = l.accept().unwrap();
        assert!(!pending(l.as_fd()), "taken");
    }

    #[test]
    fn idle_looks_are_a_quarter_of_the_timeout_within_bounds() {
        assert_eq!(look_every(Duration::from_secs(600)), Duration::from_secs(5));
        assert_eq!(
            look_every(Duration::from_secs(2)),
            Duration::from_millis(500)
        );
        assert_eq!(
            look_every(Duration::from_millis(100)),
            Duration::from_millis(100)
        );
    }
}
