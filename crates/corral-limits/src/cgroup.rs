//! A tenant's cgroup: `<hierarchy>/<parent>/<tenant>` in every hierarchy
//! (v1) or in the unified tree (v2). Creating, joining, killing, removing.
//! Limits are in `apply.rs`, counters in `stats.rs`.

use crate::backend::{check_rel, Backend, Controller, Kind, V2_REQUIRED, V2_WANTED};
use crate::error::{CgroupError, Result};
use crate::fsutil::{mkdir, read_pids, read_text, write_value};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long [`TenantCgroup::kill_all`] keeps killing before giving up.
pub const KILL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long [`TenantCgroup::remove`] retries rmdir on EBUSY.
pub const RMDIR_TIMEOUT: Duration = Duration::from_secs(3);
/// How long [`TenantCgroup::create`] retries when a concurrent remover takes
/// the empty parent away between our mkdirs (bounded by time, not by count:
/// on a slow machine ten quick losses in a row do happen).
const CREATE_TIMEOUT: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct TenantCgroup {
    backend: Backend,
    name: String,
}

/// Opens, for writing, the file through which a process moves *itself*
/// into the cgroup at `dir` by writing "0" to it: `tasks` on cgroup v1,
/// `cgroup.procs` on v2 (which has no `tasks`).
///
/// Why not `cgroup.procs` everywhere: moving a whole thread group takes the
/// kernel's global threadgroup lock for writing, which waits for an RCU grace
/// period: 5-11 ms per write measured on this project's v1 test machine.
/// Writing "0" to `tasks` moves only the calling thread, which the kernel
/// (Linux >= 6.2) does without that lock: 0.25 ms for eight hierarchies. For
/// a single-threaded process, such as a child between fork and exec, moving
/// its one thread is moving the process. Older kernels take the lock either
/// way, so this is never slower. Only a single-threaded caller may use it.
pub fn open_self_entry(dir: &Path) -> Result<OwnedFd> {
    let open = |name: &str| std::fs::OpenOptions::new().write(true).open(dir.join(name));
    let f = match open("tasks") {
        Err(e) if e.kind() == io::ErrorKind::NotFound => open("cgroup.procs")
            .map_err(|e| CgroupError::io("opening", dir.join("cgroup.procs"), e))?,
        r => r.map_err(|e| CgroupError::io("opening", dir.join("tasks"), e))?,
    };
    Ok(f.into())
}

fn is_enoent(e: &CgroupError) -> bool {
    e.raw_os_error() == Some(libc::ENOENT)
}

/// `dir` and every cgroup below it, children before parents.
fn subtree(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(CgroupError::io("listing", dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| CgroupError::io("listing", dir, e))?;
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            out.extend(subtree(&entry.path())?);
        }
    }
    out.push(dir.to_path_buf());
    Ok(out)
}

/// mkdir of a parent level. EEXIST is fine even if a remover takes the
/// directory away right after: the next step then fails with ENOENT and
/// [`TenantCgroup::create`] starts over.
fn mkdir_parent(level: &Path) -> Result<()> {
    match std::fs::create_dir(level) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
            Err(CgroupError::io("creating", level, e))
        }
        _ => Ok(()),
    }
}

/// Enables the wanted v2 controllers in `dir/cgroup.subtree_control`.
fn enable_v2_controllers(dir: &Path) -> Result<()> {
    let avail_path = dir.join("cgroup.controllers");
    let avail = read_text(&avail_path)?;
    let avail: Vec<&str> = avail.split_whitespace().collect();
    if let Some(missing) = V2_REQUIRED.iter().find(|c| !avail.contains(c)) {
        return Err(CgroupError::NoCgroups(format!(
            "controller {missing} is not available in {} (has [{}]); delegate it to this cgroup",
            avail_path.display(),
            avail.join(" ")
        )));
    }
    let ctl = dir.join("cgroup.subtree_control");
    let enabled = read_text(&ctl)?;
    let enabled: Vec<&str> = enabled
        .split_whitespace()
        .map(|w| w.trim_start_matches('+'))
        .collect();
    let add: Vec<String> = V2_WANTED
        .iter()
        .filter(|c| avail.contains(c) && !enabled.contains(c))
        .map(|c| format!("+{c}"))
        .collect();
    if add.is_empty() {
        return Ok(());
    }
    write_value(&ctl, &add.join(" "))
}

impl TenantCgroup {
    /// Creates the tenant's cgroup (and the parent, enabling v2 controllers
    /// from the root down to it). Succeeds when it already exists. A parent
    /// removed concurrently (ENOENT) is recreated, for up to a second.
    pub fn create(backend: &Backend, name: &str) -> Result<TenantCgroup> {
        check_rel("tenant name", name, false)?;
        let cg = TenantCgroup {
            backend: backend.clone(),
            name: name.to_string(),
        };
        let deadline = std::time::Instant::now() + CREATE_TIMEOUT;
        let mut attempt = 0u32;
        loop {
            match cg.try_create() {
                Err(e) if is_enoent(&e) && std::time::Instant::now() < deadline => {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(u64::from(attempt.min(10))));
                }
                Err(e) => return Err(e),
                Ok(()) => return Ok(cg),
            }
        }
    }

    fn try_create(&self) -> Result<()> {
        if let Kind::V2 { root } = self.backend.kind() {
            let mut level = root.clone();
            enable_v2_controllers(&level)?;
            for comp in self.backend.parent().components() {
                level.push(comp);
                mkdir_parent(&level)?;
                enable_v2_controllers(&level)?;
            }
        } else {
            for mut level in self.backend.roots() {
                for comp in self.backend.parent().components() {
                    level.push(comp);
                    mkdir_parent(&level)?;
                }
            }
        }
        for dir in self.dirs() {
            mkdir(&dir).map_err(|e| CgroupError::io("creating", &dir, e))?;
        }
        Ok(())
    }

    /// The tenant's existing cgroup; [`CgroupError::NotFound`] if a directory is missing.
    pub fn open(backend: &Backend, name: &str) -> Result<TenantCgroup> {
        check_rel("tenant name", name, false)?;
        let cg = TenantCgroup {
            backend: backend.clone(),
            name: name.to_string(),
        };
        if let Some(path) = cg.dirs().into_iter().find(|d| !d.is_dir()) {
            return Err(CgroupError::NotFound { path });
        }
        Ok(cg)
    }

    /// The tenant's cgroup without checking that its directories exist:
    /// for a reader that opens them anyway ([`Self::usage_and_faults`]
    /// answers [`CgroupError::NotFound`] then), saving a path lookup per
    /// hierarchy.
    pub fn named(backend: &Backend, name: &str) -> Result<TenantCgroup> {
        check_rel("tenant name", name, false)?;
        Ok(TenantCgroup {
            backend: backend.clone(),
            name: name.to_string(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The tenant's directory in every distinct hierarchy.
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.backend
            .parent_dirs()
            .into_iter()
            .map(|p| p.join(&self.name))
            .collect()
    }

    /// The directory holding `c`'s files (v2: the one directory), if mounted.
    pub fn dir(&self, c: Controller) -> Option<PathBuf> {
        match self.backend.kind() {
            Kind::V1 { dirs } => dirs
                .get(&c)
                .map(|r| r.join(self.backend.parent()).join(&self.name)),
            Kind::V2 { root } => Some(root.join(self.backend.parent()).join(&self.name)),
        }
    }

    /// v2: an `O_PATH|O_DIRECTORY|O_CLOEXEC` descriptor of the cgroup, for
    /// clone3's `CLONE_INTO_CGROUP`. v1: `None` (use [`Self::add_pid`]).
    pub fn v2_dir_fd(&self) -> Result<Option<OwnedFd>> {
        let Kind::V2 { .. } = self.backend.kind() else {
            return Ok(None);
        };
        let dir = self.dirs().remove(0);
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(&dir)
            .map_err(|e| CgroupError::io("opening", &dir, e))?;
        Ok(Some(f.into()))
    }

    /// Moves a process (all its threads) into the cgroup, in every hierarchy.
    pub fn add_pid(&self, pid: libc::pid_t) -> Result<()> {
        for dir in self.dirs() {
            write_value(&dir.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    /// One [`open_self_entry`] descriptor per hierarchy: the way a
    /// single-threaded process (a fresh fork) moves itself in.
    pub fn self_entry_fds(&self) -> Result<Vec<OwnedFd>> {
        self.dirs().iter().map(|d| open_self_entry(d)).collect()
    }

    /// Processes in the cgroup or below it, in any hierarchy; sorted.
    pub fn procs(&self) -> Result<Vec<libc::pid_t>> {
        let mut all = Vec::new();
        for top in self.dirs() {
            for dir in subtree(&top)? {
                match read_pids(&dir.join("cgroup.procs")) {
                    Ok(p) => all.extend(p),
                    // Removed while we looked: nothing in it.
                    Err(e) if is_enoent(&e) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        all.sort_unstable();
        all.dedup();
        Ok(all)
    }

    /// Kills every process in the cgroup and waits until it is empty
    /// (at most [`KILL_TIMEOUT`]). v2 uses `cgroup.kill`; otherwise the
    /// cgroup is frozen (when a freezer exists), each listed process gets
    /// SIGKILL, it is thawed, and this repeats until nothing is left.
    pub fn kill_all(&self) -> Result<()> {
        let deadline = Instant::now() + KILL_TIMEOUT;
        let kill_file = self
            .dir(Controller::Pids)
            .map(|d| d.join("cgroup.kill"))
            .filter(|p| self.backend.is_v2() && p.exists());
        loop {
            let pids = self.procs()?;
            if pids.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let path = self.dirs().remove(0);
                return Err(CgroupError::KillTimeout {
                    path,
                    pids,
                    secs: KILL_TIMEOUT.as_secs(),
                });
            }
            match &kill_file {
                Some(f) => write_value(f, "1")?,
                None => self.freeze_kill_thaw()?,
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// (file, frozen value, thawed value, how to tell it is frozen)
    fn freezer(&self) -> Option<(PathBuf, &'static str, &'static str)> {
        match self.backend.kind() {
            Kind::V1 { .. } => self
                .dir(Controller::Freezer)
                .map(|d| (d.join("freezer.state"), "FROZEN", "THAWED")),
            Kind::V2 { .. } => self
                .dir(Controller::Freezer)
                .map(|d| (d.join("cgroup.freeze"), "1", "0"))
                .filter(|f| f.0.exists()),
        }
    }

    fn is_frozen(&self, state_file: &Path) -> bool {
        if self.backend.is_v2() {
            let events = state_file.with_file_name("cgroup.events");
            read_text(&events)
                .map(|t| t.lines().any(|l| l.trim() == "frozen 1"))
                .unwrap_or(false)
        } else {
            read_text(state_file)
                .map(|t| t.trim() == "FROZEN")
                .unwrap_or(false)
        }
    }

    fn freeze_kill_thaw(&self) -> Result<()> {
        let freezer = self.freezer();
        if let Some((file, frozen, _)) = &freezer {
            write_value(file, frozen)?;
            // Frozen tasks cannot fork or exit, so the list below is complete
            // and its pids stay valid. A task stuck in FREEZING is killed anyway.
            let until = Instant::now() + Duration::from_secs(1);
            while !self.is_frozen(file) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        let result = self.procs().map(|pids| {
            for pid in pids {
                // ESRCH (already gone) is fine; anything else shows up as a timeout.
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        });
        if let Some((file, _, thawed)) = &freezer {
            write_value(file, thawed)?;
        }
        result
    }

    /// Kills everything in the cgroup and removes its directories (and any
    /// cgroups below them) in every hierarchy. Succeeds when already gone.
    pub fn remove(&self) -> Result<()> {
        self.kill_all()?;
        for top in self.dirs() {
            for dir in subtree(&top)? {
                rmdir_retrying(&dir)?;
            }
        }
        Ok(())
    }
}

/// rmdir, retrying EBUSY (a killed task not yet fully exited) for a while.
fn rmdir_retrying(dir: &Path) -> Result<()> {
    let deadline = Instant::now() + RMDIR_TIMEOUT;
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                return Err(CgroupError::RemoveTimeout {
                    path: dir.to_path_buf(),
                    secs: RMDIR_TIMEOUT.as_secs(),
                    source: e,
                })
            }
            Err(e) => return Err(CgroupError::io("removing", dir, e)),
        }
    }
}

#[cfg(test)]
#[path = "cgroup_tests.rs"]
mod tests;
