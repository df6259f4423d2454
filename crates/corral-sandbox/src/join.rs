//! Joining a running tenant's sandbox with setns: load what a join needs
//! from the state dir ([`load`], [`load_or_up`]), enter it with the calling
//! process ([`enter`]: entry slot, cgroup, one setns per persisted
//! namespace file: O(1), no /proc scan), then fork, drop privileges and
//! exec ([`run`]). `corral run`'s other path, a spawn of the tenant init
//! through its control socket, is [`crate::via_init`].

use crate::lifecycle::SandboxError;
use crate::namespaces;
use crate::spawn::{environment, ChildStack, Exec, ExecSpec, SpawnError};
use crate::state::{Layout, TenantState};
use corral_limits::{Backend, EntryGuard, EntrySlots, Limits, TenantCgroup};
use corral_profile::plan::Plan;
use nix::errno::Errno;
use nix::sched::CloneFlags;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

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
    #[error("read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("parse {}: {source}", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(transparent)]
    Limits(Box<corral_limits::LimitError>),
    #[error("entry slot: {0}")]
    Entry(#[source] corral_limits::EntryError),
    #[error("join cgroup: {0}")]
    Cgroup(#[source] Box<corral_limits::CgroupError>),
    #[error("join cgroup {}: {source}", dir.display())]
    CgroupMove {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Security(#[from] corral_security::SecurityError),
    /// A system call of this process's own (not the command's) failed.
    #[error("{what}: {errno}")]
    Sys {
        what: &'static str,
        #[source]
        errno: Errno,
    },
    #[error("connect to {}: {errno}", path.display())]
    Connect {
        path: PathBuf,
        #[source]
        errno: Errno,
    },
    #[error("the tenant init went away: {0}")]
    InitGone(#[source] Errno),
    /// The init answered the request itself with `Error` (its words).
    #[error("the tenant init refused the request: {message}")]
    Refused { message: String },
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
        Err(source) => {
            return Err(JoinError::Read {
                path: dir.state(),
                source,
            })
        }
    };
    let path = dir.plan();
    let raw = std::fs::read(&path).map_err(|source| JoinError::Read {
        path: path.clone(),
        source,
    })?;
    let plan: Plan =
        serde_json::from_slice(&raw).map_err(|source| JoinError::Parse { path, source })?;
    // Live changes (`corral limits set`) live in limits.json; the plan's
    // limits are the fallback for a state dir written without it.
    let limits = match std::fs::read(dir.limits()) {
        Ok(b) => serde_json::from_slice(&b).map_err(|source| JoinError::Parse {
            path: dir.limits(),
            source,
        })?,
        Err(_) => Limits::from_source(&plan.limits).map_err(|e| JoinError::Limits(Box::new(e)))?,
    };
    Ok(Target {
        state,
        plan,
        limits,
    })
}

/// [`load`], bringing the tenant up with `up` first when it is not up (the
/// one "bring it up on first use" of every caller that starts commands).
pub fn load_or_up<E: From<JoinError>>(
    layout: &Layout,
    tenant: &str,
    up: impl FnOnce() -> Result<(), E>,
) -> Result<Target, E> {
    match load(layout, tenant) {
        Err(JoinError::NotUp(_)) => {
            up()?;
            Ok(load(layout, tenant)?)
        }
        other => Ok(other?),
    }
}

/// Take an entry-process slot for the tenant (released when the guard drops).
pub fn entry(layout: &Layout, t: &Target) -> Result<Option<EntryGuard>, JoinError> {
    entry_slot(layout, &t.state.tenant, t.limits.entry_processes)
}

pub(crate) fn entry_slot(
    layout: &Layout,
    tenant: &str,
    limit: Option<u32>,
) -> Result<Option<EntryGuard>, JoinError> {
    let Some(limit) = limit else { return Ok(None) };
    let slots =
        EntrySlots::open(&layout.tenant(tenant).entry(), limit).map_err(JoinError::Entry)?;
    match slots.try_acquire() {
        Ok(g) => Ok(Some(g)),
        Err(corral_limits::EntryError::Full { limit }) => Err(JoinError::EntryLimit {
            tenant: tenant.to_string(),
            limit,
        }),
        Err(e) => Err(JoinError::Entry(e)),
    }
}

pub struct RunOptions {
    pub argv: Vec<String>,
    pub cwd: Option<String>,
    pub env: Vec<(String, String)>,
    /// Keep the caller's fds 3..3+N open in the command.
    pub preserve_fds: i32,
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
/// then setns into each of the init's namespaces. `corral run`'s setns path,
/// `corral-shell` and `pam_corral.so` start here.
pub fn enter(layout: &Layout, t: &Target) -> Result<Entered, JoinError> {
    let slot = entry(layout, t)?;
    join_cgroup(&t.state)?;
    let groups: Vec<libc::gid_t> = t.plan.tenant.groups.iter().map(|g| g.1).collect();
    let security = corral_security::prepare(
        &t.plan.seccomp,
        t.plan.tenant.uid,
        t.plan.tenant.gid,
        &groups,
    )?;
    let rlimits = t.limits.rlimits();
    let fds = open_namespaces(t)?;
    namespaces::join(&fds).map_err(SandboxError::from)?;
    Ok(Entered {
        slot,
        security,
        rlimits,
    })
}

/// The sandbox's namespaces, opened through its init's /proc/PID/ns (in
/// join order, before joining any). The init is checked to be the process
/// the state names *after* the files are open: a pid reused in between
/// would have another start time, so the files are the init's.
///
/// Nothing is bind-mounted on the host for a sandbox: an earlier corral kept
/// every namespace as a bind mount under the state dir (7 host mounts per
/// tenant), and every `unshare(CLONE_NEWNS)` copies the whole host mount
/// table, every pivot_root detaches it again, so `corral up` and `down` grew
/// with the number of tenants (measured: 24 -> 52 ms up, 22 -> 37 ms down
/// with 7,000 more host mounts, what 1,000 tenants added). Joining through
/// /proc costs the same opens and one read of /proc/PID/stat.
fn open_namespaces(t: &Target) -> Result<Vec<(OwnedFd, CloneFlags)>, JoinError> {
    let dir = std::path::PathBuf::from(format!("/proc/{}/ns", t.state.init_pid));
    let fds = namespaces::open(&dir, &t.state.namespaces);
    if !t.state.init_alive() {
        return Err(JoinError::NotUp(t.state.tenant.clone()));
    }
    Ok(fds.map_err(SandboxError::from)?)
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
    // The same attributes as through the init: the caller's, bounded.
    let attrs = crate::proto::ProcAttrs::of_self();
    let spec = ExecSpec {
        argv: &opts.argv,
        env: &env,
        cwd: &cwd,
        stdio: [None; 3],
        new_session: false,
        controlling_tty: false,
        preserve_fds: opts.preserve_fds,
        pass_fds: &[],
        listen_pid: false,
        reset_signals: None,
        reset_sched: crate::spawn::unusual_policy(),
        reset_oom: false,
        subreaper: false,
        attrs: Some(&attrs),
    };
    let exec = Exec::prepare(security, rlimits, spec)?;
    // Caught before the command exists: a signal sent to `corral run` the
    // moment the command has started (it may already have printed) is passed
    // on, not taken with its default action by `corral run` itself (which
    // would end it and leave the command running without it). The child
    // resets every disposition before exec.
    let forwarding = crate::forward::Forwarding::start().map_err(|errno| JoinError::Sys {
        what: "signal pipe",
        errno,
    })?;
    let pid = exec.spawn(&mut ChildStack::new()?)?;
    let code = wait_forwarding(forwarding, pid);
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
    let cgroup = |e| JoinError::Cgroup(Box::new(e));
    let dirs = if !st.cgroup_dirs.is_empty() {
        st.cgroup_dirs.clone()
    } else if let Some(cg) = &st.cgroup {
        // State written by an older corral: find the cgroup the slow way.
        let backend = Backend::detect(&st.cgroup_parent).map_err(cgroup)?;
        TenantCgroup::open(&backend, cg).map_err(cgroup)?.dirs()
    } else {
        return Ok(());
    };
    let single = std::fs::read_dir("/proc/self/task")
        .map(|d| d.count() == 1)
        .unwrap_or(false);
    for d in &dirs {
        let (file, value) = if single {
            (
                std::fs::File::from(corral_limits::open_self_entry(d).map_err(cgroup)?),
                "0".to_string(),
            )
        } else {
            let p = d.join("cgroup.procs");
            (
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .map_err(|source| JoinError::CgroupMove { dir: p, source })?,
                std::process::id().to_string(),
            )
        };
        std::io::Write::write_all(&mut &file, value.as_bytes()).map_err(|source| {
            JoinError::CgroupMove {
                dir: d.clone(),
                source,
            }
        })?;
    }
    Ok(())
}

/// Wait for `pid`, a child of this process, forwarding the signals a
/// terminal or a supervisor sends ([`crate::forward::FORWARDED`]) to it
/// meanwhile; returns its status as a shell reports it (128+N for signal N).
/// `forwarding` was started before `pid` was spawned, so that no signal
/// sent once the command runs finds this process without its handler.
pub fn wait_forwarding(forwarding: crate::forward::Forwarding, pid: Pid) -> Result<i32, JoinError> {
    let sys = |what| move |errno| JoinError::Sys { what, errno };
    // SAFETY: integer arguments; a non-negative result is a new fd we own.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    if raw < 0 {
        return Err(sys("pidfd_open")(Errno::last()));
    }
    // SAFETY: pidfd_open returned this descriptor, which nothing else owns.
    let pidfd =
        unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw as i32) };
    loop {
        match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, c)) => return Ok(c),
            Ok(WaitStatus::Signaled(_, s, _)) => return Ok(128 + s as i32),
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(sys("wait")(e)),
        }
        let mut fds = [
            nix::poll::PollFd::new(forwarding.fd(), nix::poll::PollFlags::POLLIN),
            nix::poll::PollFd::new(
                std::os::fd::AsFd::as_fd(&pidfd),
                nix::poll::PollFlags::POLLIN,
            ),
        ];
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(sys("poll")(e)),
        }
        for sig in forwarding.pending() {
            // SAFETY: kill with integer arguments, to our own child.
            unsafe { libc::kill(pid.as_raw(), sig) };
        }
    }
}
