//! `up` and `down`: build a tenant's persisted sandbox, and take it apart.
//!
//! The sequence (validate first, then a straight line of steps):
//! 1. lock the tenant (flock), so concurrent first uses build one sandbox;
//! 2. create the tenant's cgroup;
//! 3. create the namespaces ([`namespaces::create`]): an intermediate
//!    child moves itself into the cgroup, unshares the namespaces and forks
//!    the init (pid 1 of the new pid namespace), which execs corral-init
//!    with the setup socket and the control listener; a failure comes back
//!    as its step and real errno;
//! 4. send the plan; while the init builds the rootfs and pivots, apply the
//!    limits and write plan.json; wait for its Ready;
//! 5. persist the namespace files, write state.json, then limits.json (the
//!    fast `corral run` starts from it) atomically.
//!
//! Any failure after step 2 undoes everything done so far.

use crate::namespaces;
use crate::phases::{self, Phases};
use crate::proto::{self, SetupReply};
use crate::state::{now_unix, process_start, write_atomic, Layout, TenantDir, TenantState};
use corral_limits::{Backend, Limits, TenantCgroup};
use corral_profile::plan::{NetMode, Plan};
use corral_security::{Failure, Step};
use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::sys::socket::{socket, socketpair, AddressFamily, SockFlag, SockType, UnixAddr};
use nix::unistd::Pid;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    #[error("{0}: {1}")]
    Sys(String, #[source] Errno),
    #[error("cgroup of {tenant}: {source}")]
    Cgroup {
        tenant: String,
        #[source]
        source: Box<corral_limits::CgroupError>,
    },
    /// The init's own report of what failed while it built the sandbox.
    #[error("tenant init for {tenant} failed to build the sandbox: {message}")]
    Setup { tenant: String, message: String },
    #[error("start the tenant init of {tenant}: {source}")]
    Start {
        tenant: String,
        #[source]
        source: namespaces::CreateError,
    },
    #[error("the init path {} holds a NUL byte", path.display())]
    InitPath { path: PathBuf },
    #[error("the tenant init of {tenant} gave no answer within {timeout:?}")]
    Timeout { tenant: String, timeout: Duration },
    /// EOF without an answer: the init died (e.g. exec failed) before it
    /// could say why.
    #[error(
        "the tenant init of {tenant} exited before it answered (could corral-init be executed?)"
    )]
    NoAnswer { tenant: String },
    #[error("the tenant init of {tenant} answered something else than a setup reply: {source}")]
    BadAnswer {
        tenant: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("the tenant init of {tenant} exited right after setup")]
    ExitedAfterSetup { tenant: String },
    #[error(transparent)]
    Ns(#[from] namespaces::NsError),
    #[error("the /tmp of {tenant}: {source}")]
    TmpDir {
        tenant: String,
        #[source]
        source: Box<crate::rootfs::RootfsError>,
    },
    #[error("the size cap of {tenant}'s /tmp ({}): {source}", dir.display())]
    TmpQuota {
        tenant: String,
        dir: PathBuf,
        #[source]
        source: crate::quota::QuotaError,
    },
    #[error("network of {tenant}: {source}")]
    Net {
        tenant: String,
        #[source]
        source: crate::net::NetError,
    },
    #[error("tenant {tenant}: {source}")]
    Services {
        tenant: String,
        #[source]
        source: Box<crate::services::host::HostError>,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SandboxError {
    let w = what.into();
    move |e| SandboxError::Io(w, e)
}
fn sys(what: impl Into<String>) -> impl FnOnce(Errno) -> SandboxError {
    let w = what.into();
    move |e| SandboxError::Sys(w, e)
}

pub struct UpOptions {
    /// Path of the corral-init binary.
    pub init: PathBuf,
    /// cgroup parent (below the cgroup root), e.g. "corral".
    pub cgroup_parent: String,
    /// The tenants' network (routed veths), subnet and egress policy (`net = "private"`).
    pub net: crate::net::NetConfig,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpOutcome {
    Created {
        pid: i32,
    },
    /// Already running; `stale` when the profile changed since it was built.
    AlreadyUp {
        pid: i32,
        stale: bool,
    },
}

/// An exclusive flock on the tenant's lock file ([`Layout::lock_file`]),
/// released on drop. Lock files are never removed (removing a lock file
/// others may be waiting on would let two holders in).
pub struct TenantLock(#[allow(dead_code)] nix::fcntl::Flock<std::fs::File>);

pub fn lock(layout: &Layout, tenant: &str) -> Result<TenantLock, SandboxError> {
    let dir = layout.locks();
    std::fs::create_dir_all(&dir).map_err(io(format!("create {}", dir.display())))?;
    let p = layout.lock_file(tenant);
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&p)
        .map_err(io(format!("open {}", p.display())))?;
    let l = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| SandboxError::Sys(format!("lock {}", p.display()), e))?;
    Ok(TenantLock(l))
}

/// Bring the tenant up (idempotent).
pub fn up(
    layout: &Layout,
    plan: &Plan,
    limits: &Limits,
    opts: &UpOptions,
) -> Result<UpOutcome, SandboxError> {
    let name = &plan.tenant.name;
    let mut t = Phases::start("up", name);
    let _lock = lock(layout, name)?;
    phases::mark(&mut t, "lock");
    let dir = layout.tenant(name);
    let st = dir.read_state();
    phases::mark(&mut t, "state");
    match st {
        Ok(Some(st)) if st.init_alive() && st.proto == proto::VERSION => {
            return Ok(UpOutcome::AlreadyUp {
                pid: st.init_pid,
                stale: st.digest != plan.digest(),
            });
        }
        Ok(None) => {}
        Err(e) if e.kind() != std::io::ErrorKind::InvalidData => {
            return Err(io(format!("read {}", dir.state().display()))(e))
        }
        // A dead or incompatible sandbox, or a state file a crash cut short
        // or that was damaged while its init ran: clear it, with whatever
        // still runs in the tenant's cgroup, before building anew.
        _ => {
            teardown_locked(layout, name, Some(&opts.cgroup_parent), &mut t)?;
        }
    }
    create(layout, &dir, plan, limits, opts, &mut t)
}

fn create(
    layout: &Layout,
    dir: &TenantDir,
    plan: &Plan,
    limits: &Limits,
    opts: &UpOptions,
    t: &mut Option<Phases>,
) -> Result<UpOutcome, SandboxError> {
    let mut undo = Undo {
        layout: layout.clone(),
        tenant: plan.tenant.name.clone(),
        cgroup_parent: opts.cgroup_parent.clone(),
        armed: true,
        init: None,
        plan: None,
    };
    for d in [&layout.state_dir, &layout.tenants(), &dir.dir] {
        std::fs::create_dir_all(d).map_err(io(format!("create {}", d.display())))?;
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))
            .map_err(io(format!("chmod {}", d.display())))?;
    }
    std::fs::create_dir_all(dir.root()).map_err(io("create root mount point"))?;
    std::fs::create_dir_all(dir.entry()).map_err(io("create entry dir"))?;
    phases::mark(t, "dirs");
    let cgroup = |source| SandboxError::Cgroup {
        tenant: plan.tenant.name.clone(),
        source: Box::new(source),
    };
    let backend = Backend::detect(&opts.cgroup_parent).map_err(cgroup)?;
    let cg = TenantCgroup::create(&backend, &plan.tenant.name).map_err(cgroup)?;
    phases::mark(t, "cgroup");

    // The services' sockets exist from here on; undone with the rest
    // (prepare removes its own on failure).
    let service_fds =
        crate::services::host::prepare(plan).map_err(|source| SandboxError::Services {
            tenant: plan.tenant.name.clone(),
            source: Box::new(source),
        })?;
    undo.plan = Some(plan.clone());
    cap_tmp(plan)?;
    let listener = control_listener(&dir.control())?;
    let (setup_host, setup_init) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(sys("socketpair"))?;
    phases::mark(t, "services");
    let pid = start_init(plan, opts, &cg, setup_init, listener)?;
    undo.init = Some(pid);
    protect_from_oom(plan, pid)?;
    phases::mark(t, "start");
    // The init waits for its plan: its network is ready before it runs
    // anything of the tenant's.
    let dns_relay = if plan.namespaces.net == NetMode::Private {
        attach_net(dir, plan, opts, pid)?
    } else {
        None
    };
    phases::mark(t, "net");

    let mut setup = std::fs::File::from(setup_host);
    let msg = serde_json::to_vec(&crate::init::Setup {
        plan: plan.clone(),
        root: dir.root(),
        dns_relay,
    })
    .expect("setup serializes");
    setup
        .write_all(&(msg.len() as u32).to_le_bytes())
        .and_then(|_| setup.write_all(&msg))
        .map_err(io("send the plan to the tenant init"))?;
    if !service_fds.is_empty() {
        send_fds(&setup, &service_fds)
            .map_err(sys("send the services' sockets to the tenant init"))?;
        drop(service_fds);
    }
    phases::mark(t, "send plan");
    // While the init execs and builds the rootfs (most of `up`'s time): the
    // limits and plan.json. Nothing of the tenant's runs before the init
    // answers Ready, so every limit is in place before the first tenant
    // process starts.
    cg.apply(limits).map_err(cgroup)?;
    write_atomic(
        &dir.plan(),
        &serde_json::to_vec(plan).expect("plan serializes"),
        0o600,
    )
    .map_err(io("write plan.json"))?;
    phases::mark(t, "limits");
    match read_reply(&mut setup, &plan.tenant.name, Duration::from_secs(30))? {
        SetupReply::Ready => {}
        SetupReply::Failed { message } => {
            return Err(SandboxError::Setup {
                tenant: plan.tenant.name.clone(),
                message,
            })
        }
    }
    phases::mark(t, "ready");
    let names = namespaces::names(&plan.namespaces);
    let init_start = process_start(pid).ok_or_else(|| SandboxError::ExitedAfterSetup {
        tenant: plan.tenant.name.clone(),
    })?;
    let st = TenantState {
        tenant: plan.tenant.name.clone(),
        init_pid: pid,
        init_start,
        digest: plan.digest(),
        created_unix: now_unix(),
        proto: proto::VERSION,
        namespaces: names.iter().map(|s| s.to_string()).collect(),
        cgroup: Some(plan.tenant.name.clone()),
        cgroup_parent: opts.cgroup_parent.clone(),
        cgroup_dirs: cg.dirs(),
    };
    write_atomic(
        &dir.state(),
        &serde_json::to_vec_pretty(&st).expect("state serializes"),
        0o600,
    )
    .map_err(io("write state.json"))?;
    // Last: `corral run`'s fast path (join::run_fast) starts from
    // limits.json, so it never reaches a sandbox that is not complete.
    write_atomic(
        &dir.limits(),
        &serde_json::to_vec(limits).expect("limits serialize"),
        0o600,
    )
    .map_err(io("write limits.json"))?;
    phases::mark(t, "state files");
    undo.armed = false;
    Ok(UpOutcome::Created { pid })
}

/// Join the init's new network namespace to the host by a routed veth pair
/// ([`crate::net`]); net.json says what to remove at `down`. Returns the
/// DNS relay's address when the host's resolver is on its loopback.
fn attach_net(
    dir: &TenantDir,
    plan: &Plan,
    opts: &UpOptions,
    pid: i32,
) -> Result<Option<std::net::Ipv4Addr>, SandboxError> {
    let err = |source| SandboxError::Net {
        tenant: plan.tenant.name.clone(),
        source,
    };
    let net = crate::net::Net::new(opts.net.clone()).map_err(err)?;
    // Leases are host-wide: the owner names the state dir too (tests and
    // several corral instances share the tenants' network).
    let owner = dir.dir.display().to_string();
    let attached = crate::net::attach(&net, &owner, pid).map_err(err)?;
    if let Err(e) = write_atomic(
        &dir.net(),
        &serde_json::to_vec(&attached).expect("net state serializes"),
        0o600,
    ) {
        crate::net::detach(&attached);
        return Err(io("write net.json")(e));
    }
    Ok(crate::net::loopback_nameserver(&opts.net.resolv_conf).map(|_| attached.gateway))
}

/// Removes a half-built sandbox when `up` fails part-way.
struct Undo {
    layout: Layout,
    tenant: String,
    cgroup_parent: String,
    armed: bool,
    init: Option<i32>,
    /// Whose service sockets to remove.
    plan: Option<Plan>,
}

impl Drop for Undo {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Some(pid) = self.init {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            wait_gone(pid, Duration::from_secs(5));
        }
        // A new sandbox's pair is never a bridge's port.
        let net = crate::net::Attached::read(&self.layout.tenant(&self.tenant).net());
        let _ = remove_all(
            &self.layout,
            &self.tenant,
            Some(&self.cgroup_parent),
            net.map(|a| (a, false)),
            &mut None,
        );
        if let Some(plan) = &self.plan {
            crate::services::host::remove(plan);
        }
    }
}

/// The services' fds, as one message after the plan (see `init::receive_fds`).
/// A disk /tmp with a size: its directory made (as the init would) and put
/// under a project quota, here on the host (see `quota`).
fn cap_tmp(plan: &Plan) -> Result<(), SandboxError> {
    let corral_profile::plan::TmpPlan::Disk {
        host_dir,
        size: Some(size),
    } = &plan.tmp
    else {
        return Ok(());
    };
    let t = &plan.tenant;
    let fd = crate::rootfs::prepare_tenant_dir(host_dir, t.uid, t.gid).map_err(|e| {
        SandboxError::TmpDir {
            tenant: t.name.clone(),
            source: Box::new(e),
        }
    })?;
    crate::quota::cap(fd.as_fd(), t.uid, *size).map_err(|source| SandboxError::TmpQuota {
        tenant: t.name.clone(),
        dir: host_dir.clone(),
        source,
    })
}

/// The init's `oom_score_adj`: a tenant that fills its memory cgroup (with
/// /dev/shm or tmpfs pages, which count against no process) must not get
/// the OOM killer to pick its init and so rebuild its sandbox at will.
/// Docker gives its shim the same -999. Written here, by root on the host,
/// which also sets the floor (`oom_score_adj_min`) the tenant's processes
/// inherit; each child the init starts goes back to 0 before its uid change,
/// while it still holds CAP_SYS_RESOURCE, which moves that floor back to 0
/// too (spawn.rs). With a user namespace the child has no CAP_SYS_RESOURCE
/// over the host, so the floor would stay at -999 and a tenant process could
/// lower its own score to the init's: the init keeps 0 there.
pub const INIT_OOM_SCORE_ADJ: i32 = -999;

fn protect_from_oom(plan: &Plan, pid: i32) -> Result<(), SandboxError> {
    if plan.namespaces.user {
        return Ok(());
    }
    match std::fs::write(
        format!("/proc/{pid}/oom_score_adj"),
        INIT_OOM_SCORE_ADJ.to_string(),
    ) {
        // Lowering needs CAP_SYS_RESOURCE, which some containers' root
        // lacks: there the init keeps 0 and /dev/shm's cap (rootfs) is what
        // stands (docs/security.md).
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => Ok(()),
        r => r.map_err(io("set the tenant init's oom_score_adj")),
    }
}

fn send_fds(setup: &std::fs::File, fds: &[OwnedFd]) -> Result<(), Errno> {
    let raw: Vec<std::os::fd::RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let iov = [std::io::IoSlice::new(&[0u8])];
    nix::sys::socket::sendmsg::<()>(
        setup.as_raw_fd(),
        &iov,
        &[nix::sys::socket::ControlMessage::ScmRights(&raw)],
        nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
        None,
    )?;
    Ok(())
}

fn control_listener(path: &Path) -> Result<OwnedFd, SandboxError> {
    let _ = std::fs::remove_file(path);
    let fd = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(sys("socket"))?;
    let addr = UnixAddr::new(path).map_err(sys(format!("socket path {}", path.display())))?;
    nix::sys::socket::bind(fd.as_raw_fd(), &addr)
        .map_err(sys(format!("bind {}", path.display())))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(io("chmod control socket"))?;
    nix::sys::socket::listen(
        &fd,
        nix::sys::socket::Backlog::new(256).expect("valid backlog"),
    )
    .map_err(sys("listen"))?;
    Ok(fd)
}

/// Start the tenant init in new namespaces ([`namespaces::create`]): the
/// intermediate child first moves itself into the tenant's cgroup, and the
/// init (pid 1 of the new pid namespace) execs corral-init in a session of
/// its own with the setup socket as fd 3 and the control listener as fd 4.
fn start_init(
    plan: &Plan,
    opts: &UpOptions,
    cg: &TenantCgroup,
    setup: OwnedFd,
    listener: OwnedFd,
) -> Result<i32, SandboxError> {
    let tenant = &plan.tenant.name;
    let init = std::ffi::CString::new(opts.init.as_os_str().as_encoded_bytes()).map_err(|_| {
        SandboxError::InitPath {
            path: opts.init.clone(),
        }
    })?;
    let arg0 =
        std::ffi::CString::new(format!("corral-init: {tenant}")).expect("tenant names have no NUL");
    let argv = [arg0.as_ptr(), std::ptr::null()];
    let envp = [
        c"CORRAL_INIT_FDS=3,4".as_ptr(),
        c"GLIBC_TUNABLES=glibc.malloc.tcache_count=0".as_ptr(),
        std::ptr::null(),
    ];
    // The child moves itself into the cgroup before it unshares: the cgroup
    // namespace is rooted where the unsharing process is (see
    // `corral_limits::open_self_entry` for why the child and not us).
    let entry = cg.self_entry_fds().map_err(|source| SandboxError::Cgroup {
        tenant: tenant.clone(),
        source: Box::new(source),
    })?;
    let join_cgroup = || {
        for fd in &entry {
            // SAFETY: writing a static byte to an fd opened before the fork.
            if unsafe { libc::write(fd.as_raw_fd(), b"0".as_ptr().cast(), 1) } != 1 {
                return Err(Failure::new(Step::JoinCgroup, Errno::last()));
            }
        }
        Ok(())
    };
    let exec_init = || {
        // SAFETY: setsid, fcntl, dup2 and execve on fds and C strings
        // prepared before the fork. A session of its own: no terminal
        // signal (Ctrl-C, hangup) aimed at whoever started the sandbox
        // reaches the init. Both fds move above 9 first, so neither dup2
        // clobbers the other; dup2 clears FD_CLOEXEC on the copies.
        unsafe {
            libc::setsid();
            let a = libc::fcntl(setup.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10);
            let b = libc::fcntl(listener.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10);
            libc::dup2(a, 3);
            libc::dup2(b, 4);
            libc::execve(init.as_ptr(), argv.as_ptr(), envp.as_ptr());
        }
        Errno::last()
    };
    namespaces::create(
        namespaces::clone_flags(&plan.namespaces),
        join_cgroup,
        exec_init,
    )
    .map_err(|source| SandboxError::Start {
        tenant: tenant.clone(),
        source,
    })
}

fn read_reply(
    f: &mut std::fs::File,
    tenant: &str,
    timeout: Duration,
) -> Result<SetupReply, SandboxError> {
    use std::os::fd::AsFd;
    let tenant = tenant.to_string();
    let mut pfd = [nix::poll::PollFd::new(
        f.as_fd(),
        nix::poll::PollFlags::POLLIN,
    )];
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    let n = nix::poll::poll(
        &mut pfd,
        nix::poll::PollTimeout::try_from(ms).unwrap_or(nix::poll::PollTimeout::MAX),
    )
    .map_err(sys("wait for the tenant init"))?;
    if n == 0 {
        return Err(SandboxError::Timeout { tenant, timeout });
    }
    let mut len = [0u8; 4];
    // The init writes its errors into this socket; EOF without an answer
    // means it died (e.g. exec failed) before it could say why.
    if f.read_exact(&mut len).is_err() {
        return Err(SandboxError::NoAnswer { tenant });
    }
    let mut buf = vec![0u8; u32::from_le_bytes(len) as usize];
    f.read_exact(&mut buf)
        .map_err(io("read the init's answer"))?;
    proto::decode(&buf).map_err(|source| SandboxError::BadAnswer { tenant, source })
}

/// Wait until `pid` is gone or a zombie: woken by its pidfd the moment it
/// exits (`down` took at least one 5 ms polling step when it slept between
/// looks); polling /proc only where pidfds are missing (before Linux 5.3).
pub fn wait_gone(pid: i32, timeout: Duration) -> bool {
    let start = Instant::now();
    // SAFETY: pidfd_open takes a pid and flags and touches no memory.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if raw >= 0 {
        // SAFETY: pidfd_open just returned this descriptor, owned by nothing else.
        let pidfd = unsafe { OwnedFd::from_raw_fd(raw as i32) };
        loop {
            // Checked after the pidfd exists: an exit before it is seen here.
            if process_start(pid).is_none() {
                return true;
            }
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                return false;
            }
            let ms = u16::try_from(left.as_millis().max(1)).unwrap_or(u16::MAX);
            let mut fds = [nix::poll::PollFd::new(
                pidfd.as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms)) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(_) => break,
            }
        }
    }
    while start.elapsed() < timeout {
        if process_start(pid).is_none() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// Take a tenant's sandbox down: stop the init (which kills everything in
/// the pid namespace), release the namespace files, remove the cgroup and
/// the state. Returns false if the tenant was not up.
pub fn down(layout: &Layout, tenant: &str) -> Result<bool, SandboxError> {
    let mut t = Phases::start("down", tenant);
    let _lock = lock(layout, tenant)?;
    phases::mark(&mut t, "lock");
    teardown_locked(layout, tenant, None, &mut t)
}

/// Ask a tenant's init to stop (SIGTERM) without waiting: `down` of several
/// tenants does this for a batch before taking each down, so that their
/// inits exit together and the kernel tears their network namespaces down
/// in one go instead of one after another (see `net::detach_after_exit`).
/// Returns whether the sandbox was up (its `down` may then find the init
/// gone already). Does nothing for a tenant without a sandbox (and creates
/// nothing, not even its lock file).
pub fn stop_ahead(layout: &Layout, tenant: &str) -> Result<bool, SandboxError> {
    let dir = layout.tenant(tenant);
    if !dir.dir.exists() {
        return Ok(false);
    }
    let _lock = lock(layout, tenant)?;
    match dir.read_state() {
        // A tenant a bridged corral attached is left to its own `down`,
        // which must see its host end on the bridge before the pair goes
        // (to retire the bridge once empty: `net::detach_after_exit`).
        Ok(Some(st))
            if st.init_alive()
                && !crate::net::Attached::read(&dir.net())
                    .is_some_and(|a| crate::net::on_old_bridge(&a)) =>
        {
            let _ = kill(Pid::from_raw(st.init_pid), Signal::SIGTERM);
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Stop and remove a tenant's sandbox; `cgroup_parent` is where its cgroup
/// is when the state does not say (unreadable state).
fn teardown_locked(
    layout: &Layout,
    tenant: &str,
    cgroup_parent: Option<&str>,
    t: &mut Option<Phases>,
) -> Result<bool, SandboxError> {
    let dir = layout.tenant(tenant);
    let st = dir.read_state().ok().flatten();
    // Its network, and whether a bridged corral attached it, asked while
    // its pair still exists (see `net::detach_after_exit`).
    let net = crate::net::Attached::read(&dir.net()).map(|a| {
        let on_bridge = crate::net::on_old_bridge(&a);
        (a, on_bridge)
    });
    let mut was_up = false;
    if let Some(st) = &st {
        if st.init_alive() {
            was_up = true;
            let pid = Pid::from_raw(st.init_pid);
            let _ = kill(pid, Signal::SIGTERM);
            if !wait_gone(st.init_pid, Duration::from_secs(5)) {
                let _ = kill(pid, Signal::SIGKILL);
                wait_gone(st.init_pid, Duration::from_secs(5));
            }
        }
    }
    phases::mark(t, "stop");
    if !dir.dir.exists() {
        return Ok(was_up);
    }
    remove_all(
        layout,
        tenant,
        st.as_ref()
            .map(|s| s.cgroup_parent.as_str())
            .or(cgroup_parent),
        net,
        t,
    )?;
    Ok(was_up)
}

/// `net`: its `net.json` and whether it was on a bridged corral's bridge,
/// both read before its init was stopped (`net::on_old_bridge`).
fn remove_all(
    layout: &Layout,
    tenant: &str,
    cgroup_parent: Option<&str>,
    net: Option<(crate::net::Attached, bool)>,
    t: &mut Option<Phases>,
) -> Result<(), SandboxError> {
    let dir = layout.tenant(tenant);
    // An older corral kept each sandbox's namespaces as bind mounts under
    // ns/: a sandbox it brought up is cleaned up here too.
    namespaces::release(&dir.ns());
    if let Some((a, on_bridge)) = &net {
        crate::net::detach_after_exit(a, *on_bridge);
    }
    phases::mark(t, "net");
    // The services' sockets, named in the plan the sandbox was built with.
    if let Some(plan) = std::fs::read(dir.plan())
        .ok()
        .and_then(|b| serde_json::from_slice::<Plan>(&b).ok())
    {
        crate::services::host::remove(&plan);
    }
    phases::mark(t, "services");
    if let Some(parent) = cgroup_parent {
        if let Ok(backend) = Backend::detect(parent) {
            if let Ok(cg) = TenantCgroup::open(&backend, tenant) {
                cg.remove().map_err(|source| SandboxError::Cgroup {
                    tenant: tenant.to_string(),
                    source: Box::new(source),
                })?;
            }
        }
    }
    phases::mark(t, "cgroup");
    for f in [
        dir.state(),
        dir.plan(),
        dir.limits(),
        dir.control(),
        dir.net(),
    ] {
        let _ = std::fs::remove_file(f);
    }
    let _ = std::fs::remove_dir_all(dir.entry());
    let _ = std::fs::remove_dir(dir.root());
    let r = std::fs::remove_dir(&dir.dir)
        .or_else(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Ok(())
            } else {
                Err(e)
            }
        })
        .map_err(io(format!("remove {}", dir.dir.display())));
    phases::mark(t, "files");
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_gone_returns_when_the_process_exits_and_not_before() {
        let mut quick = std::process::Command::new("sleep")
            .arg("0.2")
            .spawn()
            .unwrap();
        let t = Instant::now();
        // Woken by the exit (a zombie until reaped below), long before the limit.
        assert!(wait_gone(quick.id() as i32, Duration::from_secs(10)));
        let took = t.elapsed();
        assert!(
            took >= Duration::from_millis(150) && took < Duration::from_secs(5),
            "{took:?}"
        );
        quick.wait().unwrap();
        let mut slow = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let t = Instant::now();
        assert!(!wait_gone(slow.id() as i32, Duration::from_millis(200)));
        assert!(
            t.elapsed() >= Duration::from_millis(200),
            "{:?}",
            t.elapsed()
        );
        slow.kill().unwrap();
        slow.wait().unwrap();
        // Already gone (reaped): at once.
        assert!(wait_gone(slow.id() as i32, Duration::from_secs(10)));
    }
}
