//! Shared pieces of the live cgroup tests: a unique test parent under
//! `corral/` removed on drop (also on panic), child processes killed and
//! reaped on drop, a loop device detached on drop, and CPU measurement.
#![allow(dead_code)]

use corral_limits::{Backend, TenantCgroup};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Live tests run one at a time: CPU measurements must not compete.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// The host's backend. These tests create real cgroups, so they need root,
/// like the rest of corral's suite (scripts/test.sh runs as root): without
/// it they fail instead of passing without having tested anything.
pub fn host_backend() -> Backend {
    assert!(
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() } == 0,
        "the live cgroup tests create cgroups: run them as root (scripts/test.sh does), \
         or run only the unit tests (cargo test -p corral-limits --lib)"
    );
    Backend::detect("corral")
        .unwrap_or_else(|e| panic!("cgroup detection failed on this host: {e}"))
}

/// A skipped test says so where people see it: on stderr, which libtest
/// does not capture when written to directly (unlike `println!`).
pub fn skip(test: &str, reason: &str) {
    let _ = writeln!(std::io::stderr(), "SKIP {test}: {reason}");
}

/// `corral/test-<pid>-<n>`: the parent of this test's tenants.
pub struct TestParent {
    pub backend: Backend,
    tenants: Mutex<Vec<TenantCgroup>>,
}

impl TestParent {
    pub fn new(host: &Backend) -> TestParent {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "corral/test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        TestParent {
            backend: host.clone().with_parent(&name).unwrap(),
            tenants: Mutex::new(Vec::new()),
        }
    }

    pub fn tenant(&self, name: &str) -> TenantCgroup {
        let cg = TenantCgroup::create(&self.backend, name)
            .unwrap_or_else(|e| panic!("create {name}: {e}"));
        self.tenants
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(cg.clone());
        cg
    }
}

impl Drop for TestParent {
    fn drop(&mut self) {
        for cg in self
            .tenants
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            if let Err(e) = cg.remove() {
                eprintln!("cleanup: removing {}: {e}", cg.name());
            }
        }
        for dir in self.backend.parent_dirs() {
            if let Err(e) = std::fs::remove_dir(&dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    eprintln!("cleanup: removing {}: {e}", dir.display());
                }
            }
            // And `corral/` itself once nothing is below it (rmdir refuses
            // otherwise; corral recreates it on demand).
            if let Some(top) = dir.parent() {
                let _ = std::fs::remove_dir(top);
            }
        }
    }
}

/// A child process, killed (by its pid) and reaped on drop.
pub struct ChildGuard(pub Child);

impl ChildGuard {
    pub fn pid(&self) -> i32 {
        self.0.id() as i32
    }

    /// Waits for exit, at most `limit`; None if still running.
    pub fn wait_for(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let until = Instant::now() + limit;
        loop {
            if let Some(st) = self.0.try_wait().unwrap() {
                return Some(st);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Starts `sh -c script` inside `cg`: the shell waits on stdin until it has
/// been moved into the cgroup, so everything the script does is counted.
/// Scripts bound their own run time (`timeout -s KILL`).
pub fn spawn_in(cg: &TenantCgroup, script: &str) -> ChildGuard {
    let child = Command::new("sh")
        .arg("-c")
        .arg(format!("read go; {script}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawning sh");
    let mut g = ChildGuard(child);
    cg.add_pid(g.pid())
        .unwrap_or_else(|e| panic!("add_pid: {e}"));
    let mut stdin = g.0.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    g
}

/// CPU used by the cgroup over `secs` of wall time, as a fraction of one
/// core (cpuacct.usage / cpu.stat deltas).
pub fn cpu_fraction(cg: &TenantCgroup, secs: f64) -> f64 {
    let u0 = cg.usage().unwrap().cpu_usage_ns;
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let u1 = cg.usage().unwrap().cpu_usage_ns;
    let wall = t0.elapsed().as_nanos() as f64;
    (u1 - u0) as f64 / wall
}

/// Two busy loops (demand: two cores), bounded to `secs`.
pub fn busy_loops(cg: &TenantCgroup, secs: u32) -> ChildGuard {
    spawn_in(
        cg,
        &format!("exec timeout -s KILL {secs} sh -c 'while :; do :; done & while :; do :; done'"),
    )
}

/// A loop device on a sparse temp file, detached on drop.
pub struct LoopDevice {
    pub dev: PathBuf,
    _file: tempfile::NamedTempFile,
}

impl LoopDevice {
    /// Err(reason) when loop devices cannot be used here.
    pub fn new(size: u64) -> Result<LoopDevice, String> {
        let file = tempfile::Builder::new()
            .prefix("corral-limits-loop")
            .tempfile_in("/var/tmp")
            .map_err(|e| e.to_string())?;
        file.as_file().set_len(size).map_err(|e| e.to_string())?;
        let out = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(file.path())
            .output()
            .map_err(|e| format!("running losetup: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "losetup --find --show failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let dev = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        Ok(LoopDevice { dev, _file: file })
    }

    pub fn path(&self) -> &Path {
        &self.dev
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        match Command::new("losetup").arg("-d").arg(&self.dev).status() {
            Ok(s) if s.success() => {}
            other => eprintln!("cleanup: losetup -d {}: {other:?}", self.dev.display()),
        }
    }
}
