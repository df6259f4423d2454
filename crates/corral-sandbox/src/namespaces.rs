//! Which namespaces a plan asks for, persisting them as bind-mounted ns files
//! under the state dir, and joining them again with one setns per file.

use corral_profile::plan::{NetMode, Plan};
use nix::errno::Errno;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::CloneFlags;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

/// Namespace file names in the order they are joined: user first (it grants
/// the rights for the rest), mnt last (it changes how paths resolve).
pub fn names(plan: &Plan) -> Vec<&'static str> {
    let ns = &plan.namespaces;
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
    if ns.net == NetMode::None {
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

pub fn clone_flags(plan: &Plan) -> CloneFlags {
    let ns = &plan.namespaces;
    let mut f = CloneFlags::CLONE_NEWNS;
    for (on, flag) in [
        (ns.pid, CloneFlags::CLONE_NEWPID),
        (ns.ipc, CloneFlags::CLONE_NEWIPC),
        (ns.uts, CloneFlags::CLONE_NEWUTS),
        (ns.cgroup, CloneFlags::CLONE_NEWCGROUP),
        (ns.net == NetMode::None, CloneFlags::CLONE_NEWNET),
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

/// Bind-mount /proc/<pid>/ns/<name> onto <dir>/<name> for every name. `dir`
/// first becomes a private mount of its own, so the namespace mounts neither
/// propagate anywhere nor create mount-namespace loops.
pub fn persist(pid: i32, dir: &Path, names: &[&str]) -> Result<(), NsError> {
    std::fs::create_dir_all(dir).map_err(|err| NsError {
        what: "create",
        path: dir.display().to_string(),
        errno: Errno::from_raw(err.raw_os_error().unwrap_or(0)),
    })?;
    mount(Some(dir), dir, None::<&str>, MsFlags::MS_BIND, None::<&str>)
        .map_err(e("bind ns dir", dir))?;
    mount(
        None::<&str>,
        dir,
        None::<&str>,
        MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(e("make private", dir))?;
    for name in names {
        let target = dir.join(name);
        std::fs::File::create(&target).map_err(|err| NsError {
            what: "create",
            path: target.display().to_string(),
            errno: Errno::from_raw(err.raw_os_error().unwrap_or(0)),
        })?;
        let src = format!("/proc/{pid}/ns/{name}");
        mount(
            Some(src.as_str()),
            &target,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(e("persist namespace", &target))?;
    }
    Ok(())
}

/// Undo `persist`: unmount every ns file and the private dir itself. Missing
/// pieces are fine (this also cleans up after a half-finished `up`).
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

/// Open every persisted namespace file (before joining any: after the mount
/// namespace changes, the state dir is no longer visible).
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
