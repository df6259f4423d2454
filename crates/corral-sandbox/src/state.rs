//! The state directory: where a tenant's persisted sandbox is found.
//!
//! ```text
//! <state>/locks/<name>.lock  flock: serialises up/down/restart of the tenant
//!                            (outside its directory, which down removes)
//! <state>/tenants/<name>/
//!     state.json    init pid + start time, profile digest, creation time
//!     plan.json     the plan the sandbox was built from (read by `run`)
//!     control.sock  the init's control socket (host side only)
//!     root/         empty mount point used while the rootfs is built
//!     limits.json   effective limits (plan + `corral limits set`)
//!     entry/        entry-process slots
//! ```

use corral_limits::{FdBudget, KeptFile};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantState {
    pub tenant: String,
    /// Host pid of the tenant init.
    pub init_pid: i32,
    /// The init's start time (clock ticks since boot, /proc/PID/stat field 22):
    /// together with the pid it identifies the process across pid reuse.
    pub init_start: u64,
    pub digest: String,
    pub created_unix: u64,
    pub proto: u32,
    /// The sandbox's namespaces (/proc/INIT/ns/NAME), in join order.
    pub namespaces: Vec<String>,
    /// The tenant's cgroup name below the cgroup parent, if limits are on.
    pub cgroup: Option<String>,
    pub cgroup_parent: String,
    /// The tenant cgroup's directory in every hierarchy, so a join moves into
    /// it without parsing /proc/self/mountinfo (which grows with the number
    /// of tenants: each one adds its namespace mounts).
    #[serde(default)]
    pub cgroup_dirs: Vec<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct Layout {
    pub state_dir: PathBuf,
}

impl Layout {
    pub fn new(state_dir: impl Into<PathBuf>) -> Layout {
        Layout {
            state_dir: state_dir.into(),
        }
    }
    pub fn tenants(&self) -> PathBuf {
        self.state_dir.join("tenants")
    }
    /// The tenants' lock files (never removed: see `lifecycle::lock`).
    pub fn locks(&self) -> PathBuf {
        self.state_dir.join("locks")
    }
    pub fn lock_file(&self, tenant: &str) -> PathBuf {
        self.locks().join(format!("{tenant}.lock"))
    }
    pub fn tenant(&self, name: &str) -> TenantDir {
        TenantDir {
            dir: self.tenants().join(name),
        }
    }
    /// Names of every tenant with a state directory.
    pub fn list(&self) -> std::io::Result<Vec<String>> {
        let mut v = Vec::new();
        match std::fs::read_dir(self.tenants()) {
            Ok(rd) => {
                for e in rd {
                    let e = e?;
                    if e.file_type()?.is_dir() {
                        v.push(e.file_name().to_string_lossy().into_owned());
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        v.sort();
        Ok(v)
    }
}

#[derive(Debug, Clone)]
pub struct TenantDir {
    pub dir: PathBuf,
}

impl TenantDir {
    pub fn state(&self) -> PathBuf {
        self.dir.join("state.json")
    }
    pub fn plan(&self) -> PathBuf {
        self.dir.join("plan.json")
    }
    pub fn control(&self) -> PathBuf {
        self.dir.join("control.sock")
    }
    pub fn ns(&self) -> PathBuf {
        self.dir.join("ns")
    }
    pub fn root(&self) -> PathBuf {
        self.dir.join("root")
    }
    /// The effective limits of the running sandbox (plan + live changes).
    pub fn limits(&self) -> PathBuf {
        self.dir.join("limits.json")
    }
    pub fn entry(&self) -> PathBuf {
        self.dir.join("entry")
    }
    /// The veth pair, address and lease `up` made (`net = "private"`).
    pub fn net(&self) -> PathBuf {
        self.dir.join("net.json")
    }

    /// The state, if written. A file that does not parse is an
    /// `InvalidData` error: what a crash can leave of a state file (see
    /// [`write_atomic`]); `up` and `run` treat it as a dead sandbox.
    pub fn read_state(&self) -> std::io::Result<Option<TenantState>> {
        match std::fs::read(self.state()) {
            Ok(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Write `data` to `path` atomically: a temp file in the same directory,
/// renamed over the target, so a reader sees the old file or the new one.
///
/// Not fsync'd: everything in the state dir describes running processes
/// and means nothing after a crash of the machine (the inits are gone, and
/// the next `up` or `run` rebuilds; a state file that a crash left empty
/// reads as `InvalidData`, which counts as dead). Three fsyncs cost 1-1.5 ms
/// of `corral up` where the state dir is on disk (it is on tmpfs when /run is).
pub fn write_atomic(path: &Path, data: &[u8], mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)?;
    f.write_all(data)?;
    drop(f);
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Start time of a process (field 22 of /proc/PID/stat) if it exists and is
/// not a zombie.
pub fn process_start(pid: i32) -> Option<u64> {
    start_time(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Field 22 of a /proc/PID/stat line, unless the state says zombie or dead.
fn start_time(s: &str) -> Option<u64> {
    // The command name (field 2) may contain spaces and parens: split after the last ')'.
    let rest = s.get(s.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split(' ').collect();
    // rest starts at field 3 (state).
    if fields.first().copied() == Some("Z") || fields.first().copied() == Some("X") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

impl TenantState {
    /// The init named by this state is still the process that was started.
    pub fn init_alive(&self) -> bool {
        process_start(self.init_pid) == Some(self.init_start)
    }
}

/// A tenant's init watched through a pidfd, for what asks every few seconds
/// whether every tenant's init still runs (the history collector,
/// `/metrics`): one `poll` instead of opening and reading /proc/PID/stat.
/// The pidfd is counted in an [`FdBudget`].
#[derive(Debug)]
pub struct InitWatch(KeptFile);

impl InitWatch {
    /// The init `st` names, if it runs. The start time is checked after the
    /// pidfd is opened, so the pidfd is that process's and not a later one's
    /// with the same pid. `None` also where pidfds are missing (before Linux
    /// 5.3) or the budget is spent: [`TenantState::init_alive`] then.
    pub fn open(st: &TenantState, budget: &FdBudget) -> Option<InitWatch> {
        use std::os::fd::{FromRawFd, OwnedFd, RawFd};
        // SAFETY: pidfd_open takes a pid and flags and touches no memory.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, st.init_pid, 0) };
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` was just returned by pidfd_open (with O_CLOEXEC, its
        // default) and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        if !st.init_alive() {
            return None;
        }
        budget.keep(std::fs::File::from(fd)).ok().map(InitWatch)
    }

    /// The init has not exited. A pidfd turns readable when its process
    /// exits, zombie or reaped, as [`TenantState::init_alive`] takes a
    /// zombie for dead.
    pub fn alive(&self) -> bool {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        use std::os::fd::AsFd;
        let mut fds = [PollFd::new(self.0.as_fd(), PollFlags::POLLIN)];
        loop {
            match poll(&mut fds, PollTimeout::ZERO) {
                Ok(0) => return true,
                Ok(_) => return false,
                Err(nix::errno::Errno::EINTR) => {}
                // Cannot tell: ask /proc (the caller's fallback).
                Err(_) => return false,
            }
        }
    }
}

pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A /proc/PID/stat line for `comm` in `state`, started at `start`.
    fn stat(comm: &str, state: &str, start: u64) -> String {
        let mut f: Vec<String> = vec!["4242".into(), format!("({comm})"), state.into()];
        f.extend((4..=21).map(|i| i.to_string()));
        f.push(start.to_string());
        f.extend((23..=52).map(|_| "0".to_string()));
        f.join(" ") + "\n"
    }

    #[test]
    fn start_time_is_field_22_whatever_the_command_name() {
        assert_eq!(start_time(&stat("corral-init", "S", 123456)), Some(123456));
        for comm in ["a b", "x) (y", "))", "(", ") R 1 2 3"] {
            assert_eq!(start_time(&stat(comm, "R", 77)), Some(77), "{comm:?}");
        }
        assert_eq!(
            start_time(&stat("gone", "Z", 5)),
            None,
            "a zombie is not alive"
        );
        assert_eq!(start_time(&stat("gone", "X", 5)), None);
        assert_eq!(start_time(""), None);
        assert_eq!(start_time("1 (cut"), None);
        assert_eq!(start_time("1 (short) S 1 2"), None);
        assert_eq!(start_time("1 (x)"), None, "nothing after the name");
    }

    #[test]
    fn this_process_has_a_start_time_and_a_dead_pid_none() {
        let me = process_start(std::process::id() as i32).expect("our own stat");
        assert!(me > 0);
        assert_eq!(process_start(i32::MAX), None);
    }

    fn state(tenant: &str) -> TenantState {
        TenantState {
            tenant: tenant.into(),
            init_pid: i32::MAX,
            init_start: 1,
            digest: "d".into(),
            created_unix: 2,
            proto: 3,
            namespaces: vec!["pid".into(), "mnt".into()],
            cgroup: Some(tenant.into()),
            cgroup_parent: "corral".into(),
            cgroup_dirs: vec![PathBuf::from("/sys/fs/cgroup/corral/t")],
        }
    }

    #[test]
    fn an_init_watch_sees_its_process_exit_and_refuses_another() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let mut st = state("w");
        st.init_pid = child.id() as i32;
        st.init_start = process_start(st.init_pid).unwrap();
        let budget = FdBudget::new(4);
        let watch = InitWatch::open(&st, &budget).expect("a running init");
        assert!(watch.alive());
        assert_eq!(budget.available(), 3);
        // Another process with the pid (a later start time) is not watched.
        let other = TenantState {
            init_start: st.init_start + 1,
            ..st.clone()
        };
        assert!(InitWatch::open(&other, &budget).is_none());
        child.kill().unwrap();
        // Exited, not reaped yet (a zombie): dead for both.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while watch.alive() {
            assert!(
                std::time::Instant::now() < deadline,
                "still alive after SIGKILL"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!st.init_alive());
        child.wait().unwrap();
        assert!(!watch.alive());
        assert!(InitWatch::open(&st, &budget).is_none());
        drop(watch);
        assert_eq!(budget.available(), 4);
    }

    #[test]
    fn state_files_read_back_and_damage_is_invalid_data() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let t = layout.tenant("web");
        assert!(t.read_state().unwrap().is_none(), "never written");
        std::fs::create_dir_all(&t.dir).unwrap();
        let st = state("web");
        write_atomic(&t.state(), &serde_json::to_vec(&st).unwrap(), 0o600).unwrap();
        assert_eq!(t.read_state().unwrap(), Some(st.clone()));
        assert!(!st.init_alive(), "no such pid");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(t.state()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let leftovers: Vec<_> = std::fs::read_dir(&t.dir).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temp file left behind");
        // What a crash can leave: empty or cut short.
        for damaged in [&b""[..], &b"{\"tenant\": \"web\""[..]] {
            std::fs::write(t.state(), damaged).unwrap();
            let e = t.read_state().unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        }
        // A state written before cgroup_dirs existed still reads.
        let mut v = serde_json::to_value(state("web")).unwrap();
        v.as_object_mut().unwrap().remove("cgroup_dirs");
        std::fs::write(t.state(), serde_json::to_vec(&v).unwrap()).unwrap();
        assert!(t.read_state().unwrap().unwrap().cgroup_dirs.is_empty());
    }

    #[test]
    fn layout_paths_and_listing() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        assert_eq!(
            layout.list().unwrap(),
            Vec::<String>::new(),
            "no tenants dir yet"
        );
        let t = layout.tenant("web");
        let base = dir.path().join("tenants/web");
        assert_eq!(t.dir, base);
        assert_eq!(t.state(), base.join("state.json"));
        assert_eq!(t.plan(), base.join("plan.json"));
        assert_eq!(t.control(), base.join("control.sock"));
        assert_eq!(t.ns(), base.join("ns"));
        assert_eq!(t.root(), base.join("root"));
        assert_eq!(t.limits(), base.join("limits.json"));
        assert_eq!(t.entry(), base.join("entry"));
        assert_eq!(
            layout.lock_file("web"),
            dir.path().join("locks/web.lock"),
            "outside the tenant's directory, which down removes"
        );
        for name in ["web", "api", "blog"] {
            std::fs::create_dir_all(layout.tenant(name).dir).unwrap();
        }
        std::fs::write(layout.tenants().join("stray-file"), "").unwrap();
        assert_eq!(
            layout.list().unwrap(),
            ["api", "blog", "web"],
            "sorted, dirs only"
        );
    }
}
