//! Which namespaces a plan asks for, creating them ([`create`]: unshare in
//! an intermediate child, the identity maps of a user namespace, the first
//! process), persisting them as bind-mounted ns files under the state dir,
//! and joining them again with one setns per file.

use corral_profile::plan::{Namespaces, NetMode};
use corral_security::{Failure, Step};
use nix::errno::Errno;
use nix::mount::{umount2, MntFlags};
use nix::sched::CloneFlags;
use nix::unistd::{fork, ForkResult};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;

/// Namespace file names in the order they are joined: user first (it grants
/// the rights for the rest), mnt last (it changes how paths resolve).
pub fn names(ns: &Namespaces) -> Vec<&'static str> {
    let mut v = Vec::new();
    if ns.user {
        v.push("user");
    }
    if ns.ipc {
        v.push("ipc");
    }
    if ns.uts {
        v.push("uts");
    }
    if ns.net != NetMode::Host {
        v.push("net");
    }
    if ns.cgroup {
        v.push("cgroup");
    }
    if ns.pid {
        v.push("pid");
    }
    v.push("mnt");
    v
}

/// The unshare(2) flags for the namespaces a plan asks for.
pub fn clone_flags(ns: &Namespaces) -> CloneFlags {
    let mut f = CloneFlags::CLONE_NEWNS;
    for (on, flag) in [
        (ns.pid, CloneFlags::CLONE_NEWPID),
        (ns.ipc, CloneFlags::CLONE_NEWIPC),
        (ns.uts, CloneFlags::CLONE_NEWUTS),
        (ns.cgroup, CloneFlags::CLONE_NEWCGROUP),
        (ns.net != NetMode::Host, CloneFlags::CLONE_NEWNET),
        (ns.user, CloneFlags::CLONE_NEWUSER),
    ] {
        if on {
            f |= flag;
        }
    }
    f
}

fn flag_of(name: &str) -> CloneFlags {
    match name {
        "user" => CloneFlags::CLONE_NEWUSER,
        "ipc" => CloneFlags::CLONE_NEWIPC,
        "uts" => CloneFlags::CLONE_NEWUTS,
        "net" => CloneFlags::CLONE_NEWNET,
        "cgroup" => CloneFlags::CLONE_NEWCGROUP,
        "pid" => CloneFlags::CLONE_NEWPID,
        _ => CloneFlags::CLONE_NEWNS,
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{what} {path}: {errno}")]
pub struct NsError {
    pub what: &'static str,
    pub path: String,
    pub errno: Errno,
}

fn e(what: &'static str, path: &Path) -> impl FnOnce(Errno) -> NsError {
    let path = path.display().to_string();
    move |errno| NsError { what, path, errno }
}

/// Unmount every namespace file an older corral bind-mounted under `dir`
/// (a private mount of its own), and the dir itself. Missing pieces are
/// fine: a sandbox brought up by this corral has none.
pub fn release(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for ent in rd.flatten() {
            let _ = umount2(&ent.path(), MntFlags::MNT_DETACH);
            let _ = std::fs::remove_file(ent.path());
        }
    }
    let _ = umount2(dir, MntFlags::MNT_DETACH);
    let _ = std::fs::remove_dir(dir);
}

/// Open every namespace file under `dir` (before joining any: after the
/// mount namespace changes, the host's /proc is no longer visible).
pub fn open(dir: &Path, names: &[String]) -> Result<Vec<(OwnedFd, CloneFlags)>, NsError> {
    names
        .iter()
        .map(|n| {
            let p = dir.join(n);
            let fd = nix::fcntl::open(
                &p,
                nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )
            .map_err(e("open namespace", &p))?;
            // SAFETY: fresh fd from open(2), owned here only.
            let fd: OwnedFd = unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) };
            Ok((fd, flag_of(n)))
        })
        .collect()
}

/// Join the namespaces. The calling process must be single-threaded (a
/// mount namespace can't be joined by a process sharing its fs struct). The
/// pid namespace applies to children forked afterwards.
pub fn join(fds: &[(OwnedFd, CloneFlags)]) -> Result<(), NsError> {
    for (fd, flag) in fds {
        nix::sched::setns(fd.as_fd(), *flag).map_err(|errno| NsError {
            what: "setns",
            path: format!("{flag:?}"),
            errno,
        })?;
    }
    Ok(())
}

/// Identity uid/gid maps for a user namespace `corral up` created: tenants
/// keep their real ids (file ownership stays meaningful), while the init's
/// root is confined to capabilities over the sandbox's own namespaces.
pub fn write_identity_maps(pid: i32) -> std::io::Result<()> {
    for f in ["uid_map", "gid_map"] {
        std::fs::write(format!("/proc/{pid}/{f}"), "0 0 4294967295\n")?;
    }
    Ok(())
}

/// What the processes [`create`] starts tell it, one 8-byte record each
/// over a pipe (allocation-free: the writers are forked children).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// The intermediate child has a new user namespace: write its uid/gid
    /// maps, then let it go on.
    MapIds,
    /// The new namespaces' first process runs: its host pid.
    Started(i32),
    /// A step failed (in the intermediate child or the first process).
    Failed(Failure),
}

/// Record codes besides the [`Step`] codes of a failure.
const STARTED: u32 = 0;
const MAP_IDS: u32 = u32::MAX;

impl Report {
    pub fn encode(self) -> [u8; 8] {
        let (code, value) = match self {
            Report::Failed(f) => return f.step.encode(f.errno),
            Report::Started(pid) => (STARTED, pid),
            Report::MapIds => (MAP_IDS, 0),
        };
        let mut out = [0u8; 8];
        out[..4].copy_from_slice(&code.to_le_bytes());
        out[4..].copy_from_slice(&value.to_le_bytes());
        out
    }

    pub fn decode(bytes: [u8; 8]) -> Option<Report> {
        let [c0, c1, c2, c3, v0, v1, v2, v3] = bytes;
        match u32::from_le_bytes([c0, c1, c2, c3]) {
            STARTED => Some(Report::Started(i32::from_le_bytes([v0, v1, v2, v3]))),
            MAP_IDS => Some(Report::MapIds),
            _ => Step::decode(bytes).map(|(step, errno)| Report::Failed(Failure::new(step, errno))),
        }
    }
}

/// Starting the first process of new namespaces failed.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// What a child reported: the step and its errno.
    #[error(transparent)]
    Child(#[from] Failure),
    /// A system call of the parent's own.
    #[error("{what}: {errno}")]
    Parent {
        what: &'static str,
        #[source]
        errno: Errno,
    },
    #[error("write the uid/gid maps of pid {pid}: {source}")]
    Maps {
        pid: i32,
        #[source]
        source: std::io::Error,
    },
    #[error("the intermediate child ended without a report ({status:?})")]
    NoReport { status: nix::sys::wait::WaitStatus },
}

fn write_report(fd: &OwnedFd, r: Report) {
    let b = r.encode();
    // SAFETY: writing a stack buffer to a pipe we own; async-signal-safe.
    unsafe { libc::write(fd.as_raw_fd(), b.as_ptr().cast(), b.len()) };
}

/// Fail in a forked child: report, then leave without running anything of
/// the parent's (atexit handlers, buffers).
fn child_fails(fd: &OwnedFd, step: Step, errno: Errno) -> ! {
    write_report(fd, Report::Failed(Failure::new(step, errno)));
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(1) }
}

/// Create new namespaces (`flags`, from [`clone_flags`]) and start their
/// first process: fork an intermediate child, which runs `prepare` (e.g.
/// moves itself into a cgroup: the cgroup namespace is rooted where the
/// unsharing process is), unshares, waits while this process writes the
/// identity uid/gid maps of a new user namespace, and forks the first
/// process (pid 1 of a new pid namespace), which runs `start` (an exec: it
/// returns only with the errno of a failure, reported as
/// [`Step::ExecInit`]). Returns that process's host pid once it has exec'd,
/// or the step that failed with its real errno.
///
/// `prepare` and `start` run in forked children: async-signal-safe calls on
/// memory prepared before, no allocation. `start` may dup2 onto fds below
/// 10 (the report pipe lives above them).
pub fn create(
    flags: CloneFlags,
    prepare: impl Fn() -> Result<(), Failure>,
    start: impl Fn() -> Errno,
) -> Result<i32, CreateError> {
    let parent = |what| move |errno| CreateError::Parent { what, errno };
    let user = flags.contains(CloneFlags::CLONE_NEWUSER);
    let cloexec = nix::fcntl::OFlag::O_CLOEXEC;
    let (go_r, go_w) = nix::unistd::pipe2(cloexec).map_err(parent("pipe"))?;
    let (report_r, low) = nix::unistd::pipe2(cloexec).map_err(parent("pipe"))?;
    // Above the fds `start` may set up (it dup2s onto small numbers).
    let high = nix::fcntl::fcntl(low.as_raw_fd(), nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(10))
        .map_err(parent("dup the report pipe"))?;
    drop(low);
    // SAFETY: fcntl just returned this descriptor, which nothing else owns.
    let report_w = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(high) };
    // SAFETY: the children run only async-signal-safe calls (write, read,
    // unshare, fork, and what `prepare`/`start` do) on memory prepared
    // before the fork.
    match unsafe { fork() }.map_err(parent("fork"))? {
        ForkResult::Child => {
            if let Err(f) = prepare() {
                child_fails(&report_w, f.step, f.errno);
            }
            // SAFETY: unshare takes only flags.
            if unsafe { libc::unshare(flags.bits()) } < 0 {
                child_fails(&report_w, Step::Unshare, Errno::last());
            }
            if user {
                write_report(&report_w, Report::MapIds);
                let mut b = [0u8; 1];
                // SAFETY: a one-byte read into a stack buffer.
                match unsafe { libc::read(go_r.as_raw_fd(), b.as_mut_ptr().cast(), 1) } {
                    1 => {}
                    0 => child_fails(&report_w, Step::MapIds, Errno::EPIPE),
                    _ => child_fails(&report_w, Step::MapIds, Errno::last()),
                }
            }
            // SAFETY: as above; the grandchild only runs `start`.
            let first = unsafe { libc::fork() };
            if first == 0 {
                // The pipe is close-on-exec: an exec that works closes it.
                child_fails(&report_w, Step::ExecInit, start());
            }
            if first < 0 {
                child_fails(&report_w, Step::Fork, Errno::last());
            }
            write_report(&report_w, Report::Started(first));
            // SAFETY: leaving the forked child without unwinding.
            unsafe { libc::_exit(0) }
        }
        ForkResult::Parent { child } => {
            drop(go_r);
            drop(report_w);
            let outcome = read_reports(child.as_raw(), &report_r, &go_w);
            if outcome.is_err() {
                let _ = nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL);
            }
            let status = nix::sys::wait::waitpid(child, None)
                .map_err(parent("wait for the intermediate child"))?;
            match outcome? {
                Some(pid) => Ok(pid),
                None => Err(CreateError::NoReport { status }),
            }
        }
    }
}

/// The parent's side of [`create`]: read reports until every writer is
/// gone (the intermediate child has exited and the first process has
/// exec'd or failed). The first failure wins; `Ok(None)`: no pid reported.
fn read_reports(child: i32, from: &OwnedFd, go: &OwnedFd) -> Result<Option<i32>, CreateError> {
    let mut started = None;
    let mut failed = None;
    loop {
        let mut b = [0u8; 8];
        match nix::unistd::read(from.as_raw_fd(), &mut b) {
            Ok(8) => {}
            Ok(_) => break, // EOF (records are written whole)
            Err(Errno::EINTR) => continue,
            Err(errno) => {
                return Err(CreateError::Parent {
                    what: "read the start-up report",
                    errno,
                })
            }
        }
        match Report::decode(b) {
            Some(Report::MapIds) => {
                write_identity_maps(child)
                    .map_err(|source| CreateError::Maps { pid: child, source })?;
                nix::unistd::write(go, b"m").map_err(|errno| CreateError::Parent {
                    what: "resume the intermediate child",
                    errno,
                })?;
            }
            Some(Report::Started(pid)) => started = Some(pid),
            Some(Report::Failed(f)) => {
                failed.get_or_insert(f);
            }
            None => {
                return Err(CreateError::Parent {
                    what: "read the start-up report",
                    errno: Errno::EPROTO,
                })
            }
        }
    }
    match failed {
        Some(f) => Err(f.into()),
        None => Ok(started),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(on: bool) -> Namespaces {
        Namespaces {
            mount: true,
            pid: on,
            ipc: on,
            uts: on,
            cgroup: on,
            net: if on { NetMode::None } else { NetMode::Host },
            user: on,
        }
    }

    #[test]
    fn namespaces_are_joined_user_first_and_mount_last() {
        assert_eq!(
            names(&all(true)),
            ["user", "ipc", "uts", "net", "cgroup", "pid", "mnt"]
        );
        assert_eq!(
            names(&all(false)),
            ["mnt"],
            "a sandbox is a mount namespace"
        );
        let mut ns = all(false);
        ns.pid = true;
        ns.net = NetMode::None;
        assert_eq!(names(&ns), ["net", "pid", "mnt"]);
    }

    #[test]
    fn unshare_flags_match_the_namespace_files() {
        assert_eq!(clone_flags(&all(false)), CloneFlags::CLONE_NEWNS);
        let every = CloneFlags::CLONE_NEWNS
            | CloneFlags::CLONE_NEWPID
            | CloneFlags::CLONE_NEWIPC
            | CloneFlags::CLONE_NEWUTS
            | CloneFlags::CLONE_NEWCGROUP
            | CloneFlags::CLONE_NEWNET
            | CloneFlags::CLONE_NEWUSER;
        assert_eq!(clone_flags(&all(true)), every);
        // Every combination: the files joined are exactly the namespaces created.
        for bits in 0..64u32 {
            let on = |i: u32| bits & (1 << i) != 0;
            let ns = Namespaces {
                mount: true,
                pid: on(0),
                ipc: on(1),
                uts: on(2),
                cgroup: on(3),
                net: if on(4) { NetMode::None } else { NetMode::Host },
                user: on(5),
            };
            let joined = names(&ns)
                .iter()
                .fold(CloneFlags::empty(), |f, n| f | flag_of(n));
            assert_eq!(joined, clone_flags(&ns), "{ns:?}");
        }
    }

    #[test]
    fn start_up_reports_round_trip() {
        for r in [
            Report::MapIds,
            Report::Started(1),
            Report::Started(4_194_304),
            Report::Failed(Failure::new(Step::Unshare, Errno::EPERM)),
            Report::Failed(Failure::new(Step::ExecInit, Errno::ENOENT)),
            Report::Failed(Failure::new(Step::JoinCgroup, Errno::EBUSY)),
        ] {
            assert_eq!(Report::decode(r.encode()), Some(r));
        }
        assert_eq!(Report::decode([99, 0, 0, 0, 0, 0, 0, 0]), None);
    }

    /// [`create`] with no new namespace (unshare(0) needs no privilege):
    /// the reports of the real pipe, without root.
    #[test]
    fn create_reports_the_first_process_or_the_step_that_failed() {
        let exec = |path: &'static std::ffi::CStr| {
            move || {
                let argv = [path.as_ptr(), std::ptr::null()];
                let envp = [std::ptr::null()];
                // SAFETY: NUL-terminated arrays of C strings on the stack.
                unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
                Errno::last()
            }
        };
        let pid = create(CloneFlags::empty(), || Ok(()), exec(c"/bin/true")).unwrap();
        assert!(pid > 0);
        // Not our child (the intermediate one forked it): wait until it is gone.
        let gone = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            crate::state::process_start(pid).is_none()
        });
        assert!(gone, "pid {pid} still runs");

        match create(
            CloneFlags::empty(),
            || Ok(()),
            exec(c"/nonexistent/corral-init"),
        ) {
            Err(CreateError::Child(f)) => {
                assert_eq!(f, Failure::new(Step::ExecInit, Errno::ENOENT))
            }
            other => panic!("expected an exec failure, got {other:?}"),
        }
        let refuse = || Err(Failure::new(Step::JoinCgroup, Errno::EACCES));
        match create(CloneFlags::empty(), refuse, exec(c"/bin/true")) {
            Err(CreateError::Child(f)) => {
                assert_eq!(
                    f.to_string(),
                    "move into the tenant's cgroup: EACCES: Permission denied"
                )
            }
            other => panic!("expected the prepare step's failure, got {other:?}"),
        }
    }
}
