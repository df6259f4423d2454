//! The tenant init: pid 1 of the sandbox's pid namespace. It builds the
//! rootfs (single-threaded, freshly exec'd — the safest place for it), then
//! holds the namespaces, reaps zombies and serves spawn requests on the
//! control socket until SIGTERM, when it kills everything in the sandbox.

use crate::proto::{self, InitStatus, Reply, Request, SetupReply, SpawnRequest};
use crate::spawn::{ChildStack, Exec, ExecSpec};
use corral_profile::plan::Plan;
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::socket::{
    accept4, getsockopt, recvmsg, send, sockopt, ControlMessageOwned, MsgFlags, SockFlag,
};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{IoSliceMut, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What keeps the init from serving: sent to `corral up` as the
/// `SetupReply::Failed` message.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("open /dev/null: {0}")]
    DevNull(#[source] std::io::Error),
    #[error("read setup: {0}")]
    ReadSetup(#[source] std::io::Error),
    #[error("decode setup: {0}")]
    DecodeSetup(#[source] serde_json::Error),
    #[error(transparent)]
    Rootfs(#[from] crate::rootfs::RootfsError),
    #[error("sethostname {hostname}: {errno}")]
    Hostname {
        hostname: String,
        #[source]
        errno: Errno,
    },
    #[error(transparent)]
    Limits(Box<corral_limits::LimitError>),
    #[error(transparent)]
    Security(#[from] corral_security::SecurityError),
    #[error("drop the capability bounding set: {0}")]
    BoundingSet(#[source] Errno),
    #[error("install the seccomp filter in the init: {0}")]
    Seccomp(#[source] Errno),
    #[error("map the spawn stack: {0}")]
    Stack(#[source] crate::spawn::SpawnError),
    #[error("map the receive buffer: {0}")]
    Buffer(#[source] std::io::Error),
    #[error("receive the services' sockets: {0}")]
    ServiceFds(#[source] Errno),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Setup {
    pub plan: Plan,
    /// Empty host directory the new root is built on.
    pub root: PathBuf,
    /// With net = "private" and a resolver on the host's loopback: the
    /// address that relays DNS to it (the tenants' gateway), which the sandbox's
    /// /etc/resolv.conf names instead (crate::net).
    #[serde(default)]
    pub dns_relay: Option<std::net::Ipv4Addr>,
}

struct Child {
    /// The connection that gets its `Exited` (None: a detached service).
    conn: Option<u64>,
    deadline: Option<Instant>,
    timed_out: bool,
}

/// What the init starts processes with: every child is the tenant,
/// hardened the same way.
struct Spawner {
    security: corral_security::Prepared,
    /// What a child must set back to SIG_DFL (the init's dispositions never
    /// change after setup: it reads signals through a signalfd).
    reset_signals: Vec<libc::c_int>,
    /// It serves with a time slice of its own (`short_slice`), or under
    /// another policy than SCHED_OTHER: children are set back. Taken once,
    /// when serving starts.
    reset_sched: bool,
    /// The host protected the init from the OOM killer (lifecycle): its
    /// children go back to 0.
    reset_oom: bool,
    /// The tenant is suspended: no new process starts.
    suspended: bool,
    rlimits: Vec<(libc::c_int, u64, u64)>,
    devnull: OwnedFd,
    /// The stack every spawned child runs on until its exec.
    stack: ChildStack,
}

struct Init {
    /// The tenants' seccomp filter, installed in the init after setup.
    filter: Option<corral_security::Filter>,
    spawner: Spawner,
    /// The profile's environment rules and workdir, for `Run` requests.
    env_rules: corral_profile::plan::EnvPlan,
    workdir: String,
    services: crate::services::Supervisor,
    conns: HashMap<u64, OwnedFd>,
    /// Connections whose client asked to keep them once idle
    /// ([`SpawnRequest::keep`]).
    kept: std::collections::HashSet<u64>,
    children: HashMap<i32, Child>,
    next_conn: u64,
    spawned_total: u64,
    /// One receive buffer for the init's whole life (see [`RecvBuf`]).
    buf: RecvBuf,
}

/// The init's one receive buffer, for requests and for the services'
/// output on its way to their logs: an anonymous mapping, so a page is
/// resident only once a message was written to it, and pages a large
/// message used go back to the kernel afterwards. An idle init is what a
/// server has thousands of: the `vec![0u8; 64 KiB]` this replaces came
/// from heap that the Rust runtime had already extended before `main`, so
/// calloc cleared it and 60 KiB of zeros stayed resident in every init
/// (measured with /proc/PID/pagemap).
struct RecvBuf(memmap2::MmapMut);

impl RecvBuf {
    const PAGE: usize = 4096;

    fn new() -> std::io::Result<RecvBuf> {
        memmap2::MmapMut::map_anon(proto::MAX_MESSAGE).map(RecvBuf)
    }

    /// After a message of `used` bytes: every page but the first goes back.
    fn release(&mut self, used: usize) {
        if used > Self::PAGE {
            let len = self.0.len() - Self::PAGE;
            // SAFETY: `&mut self`: no reference into the mapping is alive;
            // discarded pages of a private anonymous mapping read as zeros
            // afterwards, and the buffer is always written before it is read.
            let _ = unsafe {
                self.0
                    .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, Self::PAGE, len)
            };
        }
    }
}

/// Entry point of the corral-init binary. fd 3: setup stream, fd 4: control listener.
pub fn main() -> ! {
    // SAFETY: `corral up` passes exactly these two fds to the exec'd init.
    let (mut setup, listener) = unsafe { (std::fs::File::from_raw_fd(3), OwnedFd::from_raw_fd(4)) };
    for fd in [3, 4] {
        // SAFETY: fcntl on our own fds.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    // The listener is polled: accept must never block the loop.
    // SAFETY: fcntl on our own fd.
    unsafe {
        libc::fcntl(
            4,
            libc::F_SETFL,
            libc::fcntl(4, libc::F_GETFL) | libc::O_NONBLOCK,
        )
    };
    // Whatever else `corral up`'s caller leaked to us (a make jobserver,
    // a test harness pipe...) must not live on in the sandbox's pid 1.
    let _ = corral_security::fds::close_fds_from(5);
    // Never hold the caller's terminal or pipes open.
    let devnull = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map(OwnedFd::from);
    if let Ok(d) = &devnull {
        for fd in 0..3 {
            // SAFETY: dup2 onto stdio.
            unsafe { libc::dup2(d.as_raw_fd(), fd) };
        }
    }
    // Tenant processes must not be able to read our memory or /proc/1/exe.
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    let result = devnull
        .map_err(InitError::DevNull)
        .and_then(|d| prepare(&mut setup, d));
    let init = match result {
        Ok(i) => i,
        Err(e) => {
            let message = e.to_string();
            let _ = send_setup(&mut setup, &SetupReply::Failed { message });
            std::process::exit(1);
        }
    };
    let mut init = init;
    if let Some(f) = init.filter.take() {
        if let Err(e) = f.apply() {
            let _ = send_setup(
                &mut setup,
                &SetupReply::Failed {
                    message: InitError::Seccomp(e).to_string(),
                },
            );
            std::process::exit(1);
        }
    }
    // Serving stays SCHED_OTHER, unlike the gateway's threads: as a batch
    // task the init did not preempt the script running on its CPU when a
    // spawn request came, and waited there for the script's time slice
    // (0.25-0.7 ms behind a CGI program, up to a php-cgi's whole run) while
    // the other CPU went idle, since the load balancer leaves a task that
    // ran within `sched_migration_cost` where it is (`perf sched timehist`:
    // a CPU idle 20 % of an unpinned cgi large run, 3 % with fcgiwrap).
    // Switched before Ready, so whoever sees the sandbox up sees its init as
    // it will stay.
    crate::spawn::neutral_attributes();
    // A short time slice: a spawn request then runs at once on a busy CPU
    // (see `SERVER_SLICE_NS`); its children go back to the default.
    let short = crate::spawn::short_slice();
    init.spawner.reset_sched = short || crate::spawn::unusual_policy();
    init.spawner.reset_oom = crate::spawn::oom_score_adjusted();
    if send_setup(&mut setup, &SetupReply::Ready).is_err() {
        std::process::exit(1);
    }
    drop(setup);
    // Give back what setup used (the plan's JSON, the mount work): an idle
    // init should cost as little memory as possible.
    // SAFETY: malloc_trim only releases free heap memory.
    unsafe { libc::malloc_trim(0) };
    init.services.start_at_up(&mut init.spawner);
    init.serve(listener)
}

/// One message on connection `id` and the fds riding with it; (0, []) at
/// end of stream or on error, None when there was nothing to read.
fn receive(
    conns: &HashMap<u64, OwnedFd>,
    id: u64,
    buf: &mut [u8],
) -> Option<(usize, Vec<OwnedFd>)> {
    let mut cmsg = nix::cmsg_space!([RawFd; 3]);
    let fd = conns.get(&id)?.as_raw_fd();
    let mut iov = [IoSliceMut::new(buf)];
    match recvmsg::<()>(fd, &mut iov, Some(&mut cmsg), MsgFlags::MSG_CMSG_CLOEXEC) {
        Ok(m) => Some((m.bytes, rights(&m))),
        Err(Errno::EAGAIN) | Err(Errno::EINTR) => None,
        Err(_) => Some((0, Vec::new())),
    }
}

/// The one message of fds `corral up` sends after the plan.
fn receive_fds(setup: &std::fs::File) -> Result<Vec<OwnedFd>, Errno> {
    let mut byte = [0u8; 1];
    let mut iov = [IoSliceMut::new(&mut byte)];
    let mut cmsg = nix::cmsg_space!([RawFd; crate::services::MAX_FDS]);
    let m = recvmsg::<()>(
        setup.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    if m.bytes != 1 || m.flags.contains(MsgFlags::MSG_CTRUNC) {
        return Err(Errno::EPROTO);
    }
    Ok(rights(&m))
}

/// The fds that came with a message (SCM_RIGHTS), now ours.
fn rights(m: &nix::sys::socket::RecvMsg<'_, '_, ()>) -> Vec<OwnedFd> {
    let mut fds = Vec::new();
    for c in m.cmsgs().into_iter().flatten() {
        if let ControlMessageOwned::ScmRights(v) = c {
            // SAFETY: fds received via SCM_RIGHTS are ours.
            fds.extend(v.into_iter().map(|f| unsafe { OwnedFd::from_raw_fd(f) }));
        }
    }
    fds
}

impl Spawner {
    // The ExecSpec's varying parts, one by one: a struct for them would
    // only be unpacked again here.
    #[allow(clippy::too_many_arguments)]
    fn spawn(
        &mut self,
        argv: &[String],
        env: &[(String, String)],
        cwd: &str,
        stdio: [Option<RawFd>; 3],
        pass_fds: &[RawFd],
        subreaper: bool,
        attrs: Option<&crate::proto::ProcAttrs>,
    ) -> Result<Pid, crate::spawn::SpawnError> {
        if self.suspended {
            return Err(crate::spawn::SpawnError::Failed(
                corral_security::Failure::from_raw(corral_security::Step::Fork, libc::EACCES),
            ));
        }
        let spec = ExecSpec {
            argv,
            env,
            cwd,
            stdio,
            new_session: true,
            controlling_tty: false,
            preserve_fds: 0,
            pass_fds,
            listen_pid: !pass_fds.is_empty(),
            reset_signals: Some(&self.reset_signals),
            reset_sched: self.reset_sched,
            reset_oom: self.reset_oom,
            subreaper,
            attrs,
        };
        Exec::prepare(&self.security, &self.rlimits, spec)?.spawn(&mut self.stack)
    }
}

impl crate::services::supervisor::Spawn for Spawner {
    fn spawn_service(
        &mut self,
        argv: &[String],
        env: &[(String, String)],
        cwd: &str,
        stdout: RawFd,
        pass_fds: &[RawFd],
    ) -> Result<i32, crate::spawn::SpawnError> {
        let null = self.devnull.as_raw_fd();
        self.spawn(
            argv,
            env,
            cwd,
            [Some(null), Some(stdout), Some(stdout)],
            pass_fds,
            false,
            None,
        )
        .map(|p| p.as_raw())
    }
}

/// SIGKILL a command the init started and everything it started: its
/// process group, and every descendant, also those that left the group or
/// the session (`setsid`) or were orphaned by a double fork (the command is
/// a child subreaper, `PR_SET_CHILD_SUBREAPER`, so orphans below it stay its
/// descendants while it runs). Everything is stopped first and the tree
/// read again until it holds no new process (a stopped process cannot fork;
/// a killed parent would hand its children to the init before they are
/// found), then killed. Descendants are read from
/// `/proc/PID/task/TID/children`.
fn kill_tree(pid: i32) {
    let send = |p: i32, sig| {
        let _ = kill(Pid::from_raw(p), sig);
    };
    send(-pid, Signal::SIGSTOP);
    send(pid, Signal::SIGSTOP);
    let mut all: Vec<i32> = Vec::new();
    for _ in 0..16 {
        let new: Vec<i32> = descendants(pid)
            .into_iter()
            .filter(|p| !all.contains(p))
            .collect();
        if new.is_empty() {
            break;
        }
        for p in new {
            send(p, Signal::SIGSTOP);
            all.push(p);
        }
    }
    send(-pid, Signal::SIGKILL);
    send(pid, Signal::SIGKILL);
    for p in all {
        send(p, Signal::SIGKILL);
    }
}

/// Every live descendant of `pid` (breadth first; at most 65536).
fn descendants(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut queue = std::collections::VecDeque::from([pid]);
    while let Some(p) = queue.pop_front() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let path = t.path().join("children");
            let Ok(text) = std::fs::read_to_string(path) else {
                continue;
            };
            for c in text
                .split_whitespace()
                .filter_map(|c| c.parse::<i32>().ok())
            {
                if out.len() < 65536 && !out.contains(&c) {
                    out.push(c);
                    queue.push_back(c);
                }
            }
        }
    }
    out
}

/// A request as [`proto::decode`] reads it, except that a `Run`'s
/// `caller_env` holds only the variables the profile keeps (`env.keep`,
/// which is all the init uses of it). The caller's whole environment (often
/// 40 variables, 2 KiB) is read in place, without a `String` for each name
/// and value: on the hot path of `corral run` those allocations were most
/// of the init's own time per request (docs/benchmarks.md, "corral run at
/// the C floor"). A `Run` with an escaped string in its environment (a
/// borrowed `&str` cannot hold one) is read the ordinary way.
fn decode_request(
    b: &[u8],
    rules: &corral_profile::plan::EnvPlan,
) -> Result<Request, serde_json::Error> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct RunOnly<'a> {
        #[serde(rename = "Run", borrow)]
        run: RunInPlace<'a>,
    }
    // Every field of `proto::RunRequest`, and no other: a field added there
    // and not here makes this parse fail, and the request is read the
    // ordinary way below instead of losing the field.
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct RunInPlace<'a> {
        argv: Vec<String>,
        #[serde(borrow)]
        caller_env: Vec<(&'a str, &'a str)>,
        extra_env: Vec<(String, String)>,
        cwd: Option<String>,
        nfds: u8,
        #[serde(default)]
        attrs: Option<proto::ProcAttrs>,
    }
    let kept = |k: &str| rules.keep.iter().any(|name| name == k);
    if b.starts_with(br#"{"Run":"#) {
        if let Ok(RunOnly { run: r }) = serde_json::from_slice::<RunOnly>(b) {
            return Ok(Request::Run(proto::RunRequest {
                argv: r.argv,
                caller_env: r
                    .caller_env
                    .into_iter()
                    .filter(|(k, _)| kept(k))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                extra_env: r.extra_env,
                cwd: r.cwd,
                nfds: r.nfds,
                attrs: r.attrs,
            }));
        }
    }
    let mut request = proto::decode::<Request>(b)?;
    if let Request::Run(r) = &mut request {
        r.caller_env.retain(|(k, _)| kept(k));
    }
    Ok(request)
}

fn failed_reply(e: &crate::spawn::SpawnError) -> Reply {
    let (step, errno) = e.to_reply();
    Reply::Failed { step, errno }
}

fn send_setup(f: &mut std::fs::File, r: &SetupReply) -> std::io::Result<()> {
    let b = proto::encode(r);
    f.write_all(&(b.len() as u32).to_le_bytes())?;
    f.write_all(&b)
}

fn prepare(setup: &mut std::fs::File, devnull: OwnedFd) -> Result<Init, InitError> {
    let mut len = [0u8; 4];
    setup.read_exact(&mut len).map_err(InitError::ReadSetup)?;
    let mut buf = vec![0u8; u32::from_le_bytes(len) as usize];
    setup.read_exact(&mut buf).map_err(InitError::ReadSetup)?;
    let s: Setup = serde_json::from_slice(&buf).map_err(InitError::DecodeSetup)?;
    drop(buf);
    // The services' sockets and log directories follow the plan, made on
    // the host by `corral up` (services::host), before the root changes.
    let service_fds = if s.plan.services.is_empty() {
        Vec::new()
    } else {
        receive_fds(setup).map_err(InitError::ServiceFds)?
    };
    crate::rootfs::build(&s.plan, &s.root, s.dns_relay)?;
    if s.plan.namespaces.uts {
        nix::unistd::sethostname(&s.plan.hostname).map_err(|errno| InitError::Hostname {
            hostname: s.plan.hostname.clone(),
            errno,
        })?;
    }
    let limits = corral_limits::Limits::from_source(&s.plan.limits)
        .map_err(|e| InitError::Limits(Box::new(e)))?;
    let groups: Vec<libc::gid_t> = s.plan.tenant.groups.iter().map(|g| g.1).collect();
    // The seccomp filter is installed in the init itself once setup is done
    // (see `main`): every child inherits it instead of compiling and loading
    // it again per spawn (which cost ~30% of the init's time per request),
    // and the init, which needs none of the denied calls any more, is
    // confined by it too.
    let filter = corral_security::seccomp::build(&s.plan.seccomp)?;
    let mut inherited = s.plan.seccomp.clone();
    inherited.enabled = false;
    let security =
        corral_security::prepare(&inherited, s.plan.tenant.uid, s.plan.tenant.gid, &groups)?
            .drop_bounding_set_for_children()
            .map_err(InitError::BoundingSet)?;
    // /dev/null inside the sandbox if the profile has one (what spawned
    // processes get for missing stdio); else the host one we opened before.
    let devnull = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map(OwnedFd::from)
        .unwrap_or(devnull);
    let stack = ChildStack::new().map_err(InitError::Stack)?;
    let buf = RecvBuf::new().map_err(InitError::Buffer)?;
    let services = crate::services::Supervisor::new(
        s.plan.services.clone(),
        service_fds,
        s.plan
            .env
            .set
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        (s.plan.tenant.uid, s.plan.tenant.gid),
    );
    Ok(Init {
        spawner: Spawner {
            stack,
            rlimits: limits.rlimits(),
            reset_signals: crate::spawn::non_default_signals(),
            reset_sched: false,
            reset_oom: false,
            suspended: false,
            security,
            devnull,
        },
        env_rules: s.plan.env.clone(),
        workdir: s.plan.workdir.to_string_lossy().into_owned(),
        filter,
        services,
        conns: HashMap::new(),
        kept: std::collections::HashSet::new(),
        children: HashMap::new(),
        next_conn: 1,
        spawned_total: 0,
        buf,
    })
}

impl Init {
    fn serve(mut self, listener: OwnedFd) -> ! {
        let mut mask = SigSet::empty();
        for s in [
            Signal::SIGCHLD,
            Signal::SIGTERM,
            Signal::SIGINT,
            Signal::SIGHUP,
        ] {
            mask.add(s);
        }
        mask.thread_block().expect("block signals");
        let sfd = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
            .expect("signalfd");
        // A child that ended before the signals were blocked (an at-up
        // service that failed at once) sent its SIGCHLD to no one.
        self.reap();
        loop {
            let ids: Vec<u64> = self.conns.keys().copied().collect();
            let timeout = self.next_deadline();
            let mut ready = Vec::new();
            let mut watched = Vec::new();
            {
                let mut fds = vec![
                    PollFd::new(sfd.as_fd(), PollFlags::POLLIN),
                    PollFd::new(listener.as_fd(), PollFlags::POLLIN),
                ];
                for id in &ids {
                    fds.push(PollFd::new(self.conns[id].as_fd(), PollFlags::POLLIN));
                }
                for (fd, w) in self.services.watches() {
                    fds.push(PollFd::new(fd, PollFlags::POLLIN));
                    watched.push(w);
                }
                match poll(&mut fds, timeout) {
                    Ok(_) | Err(Errno::EINTR) => {}
                    Err(_) => continue,
                }
                let ev = |f: &PollFd| f.revents().map(|r| !r.is_empty()).unwrap_or(false);
                for f in &fds {
                    ready.push(ev(f));
                }
            }
            if ready[0] {
                while let Ok(Some(info)) = sfd.read_signal() {
                    if info.ssi_signo == Signal::SIGCHLD as u32 {
                        self.reap();
                    } else {
                        self.shutdown();
                    }
                }
            }
            if ready[1] {
                self.accept(&listener);
            }
            for (i, id) in ids.iter().enumerate() {
                if ready[2 + i] {
                    self.handle(*id);
                }
            }
            for (i, w) in watched.into_iter().enumerate() {
                if ready[2 + ids.len() + i] {
                    let used = self.services.ready(w, &mut self.buf.0, &mut self.spawner);
                    self.buf.release(used);
                }
            }
            self.expire();
            self.services.tick(&mut self.spawner);
        }
    }

    fn next_deadline(&self) -> PollTimeout {
        let now = Instant::now();
        let children = self.children.values().filter_map(|c| c.deadline).min();
        let services = self.services.next_deadline();
        match children.into_iter().chain(services).min() {
            None => PollTimeout::NONE,
            Some(d) => {
                let ms = d.saturating_duration_since(now).as_millis().min(60_000) as i32;
                PollTimeout::try_from(ms + 1).unwrap_or(PollTimeout::MAX)
            }
        }
    }

    fn accept(&mut self, listener: &OwnedFd) {
        while let Ok(fd) = accept4(
            listener.as_raw_fd(),
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        ) {
            // SAFETY: accept4 returned a new fd that we own.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            // Only root on the host may drive the init.
            match getsockopt(&fd, sockopt::PeerCredentials) {
                Ok(c) if c.uid() == 0 => {
                    let id = self.next_conn;
                    self.conns.insert(id, fd);
                    self.next_conn += 1;
                    // Clients send their request right after connecting:
                    // serve it in this wake-up (nothing there yet: EAGAIN,
                    // and the poll loop picks it up later).
                    self.handle(id);
                }
                _ => drop(fd),
            }
        }
    }

    fn handle(&mut self, id: u64) {
        let received = receive(&self.conns, id, &mut self.buf.0);
        // Requests own their data: the buffer is free again before handling.
        let decoded = received.map(|(n, fds)| {
            let request = (n > 0).then(|| decode_request(&self.buf.0[..n], &self.env_rules));
            self.buf.release(n);
            (request, fds)
        });
        let (request, fds) = match decoded {
            None => return, // nothing to read after all (EAGAIN/EINTR)
            Some((None, _)) => {
                self.disconnect(id);
                return;
            }
            Some((Some(r), fds)) => (r, fds),
        };
        // A foreground run's client reads the first reply to its `Run` (or
        // unannounced `Spawn`) as the request's answer: `Failed` or `Error`
        // there mean nothing was started, and the lean `corral`
        // (crates/corral-front) then has the full CLI ask again. So once a
        // command runs, its connection gets `Error` only in answer to a
        // request of the client's own (its `Signal { pid: 0 }` gets
        // `Status`), and the command never holds that connection (the
        // client's socket is close-on-exec and never among its stdio).
        let reply = match request {
            Ok(Request::Spawn(req)) => self.spawn(id, &req, fds),
            Ok(Request::Run(run)) => {
                let env = crate::spawn::environment_of(
                    &self.env_rules,
                    run.caller_env.into_iter(),
                    &run.extra_env,
                );
                let cwd = run.cwd.unwrap_or_else(|| self.workdir.clone());
                let req = SpawnRequest {
                    argv: run.argv,
                    env,
                    cwd,
                    timeout_ms: 0,
                    detach: false,
                    announce: false,
                    nfds: run.nfds,
                    attrs: run.attrs,
                    keep: false,
                };
                self.spawn(id, &req, fds)
            }
            Ok(Request::Signal { pid, signal }) => Some(self.signal(id, pid, signal)),
            Ok(Request::Status) => Some(Reply::Status(self.status())),
            Ok(Request::Suspend { on }) => {
                self.suspend(on);
                Some(Reply::Status(self.status()))
            }
            Ok(Request::Service { op, name }) => Some(
                match self
                    .services
                    .control(op, name.as_deref(), &mut self.spawner)
                {
                    Ok(list) => Reply::Services(list),
                    Err(message) => Reply::Error { message },
                },
            ),
            Err(e) => Some(Reply::Error {
                message: format!("bad request: {e}"),
            }),
        };
        if let Some(reply) = reply {
            self.reply(id, &reply);
        }
    }

    fn reply(&mut self, id: u64, r: &Reply) {
        if let Some(fd) = self.conns.get(&id) {
            // Blocking briefly is fine: replies are tiny and the peer reads them.
            let _ = send(fd.as_raw_fd(), &proto::encode(r), MsgFlags::MSG_NOSIGNAL);
        }
    }

    fn spawn(&mut self, id: u64, req: &SpawnRequest, fds: Vec<OwnedFd>) -> Option<Reply> {
        let null = self.spawner.devnull.as_raw_fd();
        let stdio = [0, 1, 2].map(|i| Some(fds.get(i).map(|f| f.as_raw_fd()).unwrap_or(null)));
        // A session of its own (setsid in the child), not only a process
        // group (setpgid would save the autogroup setsid makes, ~13 us per
        // spawn): a process may send SIGCONT to any process of its own
        // session whatever the credentials, so a command left in the init's
        // session could signal the init (escape test
        // `the_init_cannot_be_signalled_traced_or_read`).
        match self.spawner.spawn(
            &req.argv,
            &req.env,
            &req.cwd,
            stdio,
            &[],
            true,
            req.attrs.as_ref(),
        ) {
            Ok(pid) => {
                self.spawned_total += 1;
                if req.keep {
                    self.kept.insert(id);
                } else {
                    self.kept.remove(&id);
                }
                let deadline = (req.timeout_ms > 0)
                    .then(|| Instant::now() + Duration::from_millis(req.timeout_ms));
                self.children.insert(
                    pid.as_raw(),
                    Child {
                        conn: (!req.detach).then_some(id),
                        deadline,
                        timed_out: false,
                    },
                );
                // It has exec'd (spawn returns only then). Unannounced, the
                // one reply is `Exited`, when it has exited.
                (req.announce || req.detach).then_some(Reply::Spawned { pid: pid.as_raw() })
            }
            Err(e) => Some(failed_reply(&e)),
        }
    }

    fn signal(&mut self, id: u64, pid: i32, signal: i32) -> Reply {
        let sig = Signal::try_from(signal).unwrap_or(Signal::SIGKILL);
        if pid == 0 {
            for (p, _) in self.children.iter().filter(|(_, c)| c.conn == Some(id)) {
                // Its process group once it has one (setsid before exec).
                if kill(Pid::from_raw(-p), sig).is_err() {
                    let _ = kill(Pid::from_raw(*p), sig);
                }
            }
            return Reply::Status(self.status());
        }
        match self.children.get(&pid) {
            Some(c) if c.conn == Some(id) => {
                let _ = kill(Pid::from_raw(-pid), sig);
                Reply::Status(self.status())
            }
            _ => Reply::Error {
                message: format!("pid {pid} was not spawned by this connection"),
            },
        }
    }

    fn status(&self) -> InitStatus {
        InitStatus {
            version: proto::VERSION,
            children: (self.children.len() + self.services.running()) as u32,
            services: (self.children.values().filter(|c| c.conn.is_none()).count()
                + self.services.running()) as u32,
            spawned_total: self.spawned_total,
        }
    }

    fn reap(&mut self) {
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) => self.exited(pid.as_raw(), Some(code), None),
                Ok(WaitStatus::Signaled(pid, sig, _)) => {
                    self.exited(pid.as_raw(), None, Some(sig as i32))
                }
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }

    fn exited(&mut self, pid: i32, code: Option<i32>, signal: Option<i32>) {
        if self.services.exited(pid, code, signal, &mut self.spawner) {
            return;
        }
        // Orphans re-parented to us are reaped too; only our own spawns report.
        if let Some(Child {
            conn: Some(id),
            timed_out,
            ..
        }) = self.children.remove(&pid)
        {
            self.reply(
                id,
                &Reply::Exited {
                    pid,
                    code,
                    signal,
                    timed_out,
                },
            );
            // Nothing the connection started runs any more: its work is
            // done, and the init closes it now instead of being woken
            // again only to see the client close it (the client still
            // reads what was sent before).
            // A kept connection stays for its client's next request.
            if !self.kept.contains(&id) && !self.children.values().any(|c| c.conn == Some(id)) {
                self.conns.remove(&id);
            }
        }
    }

    fn expire(&mut self) {
        let now = Instant::now();
        for (pid, c) in self.children.iter_mut() {
            if c.deadline.is_some_and(|d| d <= now) && !c.timed_out {
                c.timed_out = true;
                c.deadline = None;
                kill_tree(*pid);
            }
        }
    }

    /// The client went away: whatever it started (and didn't detach) ends.
    fn disconnect(&mut self, id: u64) {
        self.conns.remove(&id);
        self.kept.remove(&id);
        for (pid, c) in self.children.iter_mut() {
            if c.conn == Some(id) {
                c.conn = None;
                kill_tree(*pid);
            }
        }
    }

    /// Suspended: every process of the sandbox but the init is stopped
    /// (SIGSTOP), and the spawner refuses new ones (services included) until
    /// resumed (SIGCONT to all). The init itself keeps answering, so the
    /// CLI can report the state and resume it. SIGSTOP rather than the
    /// cgroup freezer: the freezer would stop the init with the rest.
    fn suspend(&mut self, on: bool) {
        self.spawner.suspended = on;
        let sig = if on { Signal::SIGSTOP } else { Signal::SIGCONT };
        if std::process::id() == 1 {
            // pid 1 of its own namespace: -1 reaches exactly the sandbox.
            let _ = kill(Pid::from_raw(-1), sig);
        } else {
            for p in descendants(std::process::id() as i32) {
                let _ = kill(Pid::from_raw(p), sig);
            }
        }
    }

    fn shutdown(&mut self) -> ! {
        self.services.kill_all();
        if std::process::id() == 1 {
            // pid 1 of its own namespace: -1 reaches exactly the sandbox.
            let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
        } else {
            for pid in self.children.keys() {
                let _ = kill(Pid::from_raw(-pid), Signal::SIGKILL);
            }
        }
        std::process::exit(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{ProcAttrs, RunRequest};
    use corral_profile::plan::EnvPlan;

    fn rules() -> EnvPlan {
        EnvPlan {
            keep: vec!["PATH".into(), "LANG".into(), "QUOTED".into()],
            set: Default::default(),
        }
    }

    fn run(caller_env: &[(&str, &str)]) -> Request {
        Request::Run(RunRequest {
            argv: vec!["/bin/echo".into(), "a \"b\"".into()],
            caller_env: caller_env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            extra_env: vec![("X".into(), "1".into())],
            cwd: Some("/srv".into()),
            nfds: 3,
            attrs: Some(ProcAttrs {
                cpus: vec![0, 1],
                nice: 5,
                ioprio: None,
            }),
        })
    }

    #[test]
    fn a_run_request_keeps_only_the_callers_variables_the_profile_keeps() {
        // In place (no escapes in the environment) and the ordinary way
        // (an escaped value), the same request comes out: the kept
        // variables in the caller's order, everything else as sent.
        for quoted in ["plain", "with \"quotes\" and \\ and \t"] {
            let sent = run(&[
                ("HOME", "/root"),
                ("PATH", "/usr/bin:/bin"),
                ("SECRET", "x"),
                ("QUOTED", quoted),
                ("LANG", "C.UTF-8"),
            ]);
            let got = decode_request(&proto::encode(&sent), &rules()).unwrap();
            let want = run(&[
                ("PATH", "/usr/bin:/bin"),
                ("QUOTED", quoted),
                ("LANG", "C.UTF-8"),
            ]);
            assert_eq!(got, want, "value {quoted:?}");
        }
    }

    #[test]
    fn other_requests_and_bad_ones_decode_as_before() {
        for req in [
            Request::Signal { pid: 0, signal: 15 },
            Request::Status,
            Request::Suspend { on: true },
        ] {
            assert_eq!(decode_request(&proto::encode(&req), &rules()).unwrap(), req);
        }
        let good = String::from_utf8(proto::encode(&run(&[("PATH", "/bin")]))).unwrap();
        for bad in [
            format!("{good} trailing"),
            good.replacen("\"nfds\":3", "\"nfds\":300", 1),
            format!("{},\"Status\":null}}", &good[..good.len() - 1]),
            "{\"Run\":{}}".to_string(),
        ] {
            let ordinary = proto::decode::<Request>(bad.as_bytes()).map(|_| ());
            let here = decode_request(bad.as_bytes(), &rules()).map(|_| ());
            assert!(ordinary.is_err(), "{bad}");
            assert_eq!(
                here.unwrap_err().to_string(),
                ordinary.unwrap_err().to_string(),
                "{bad}"
            );
        }
    }
}
