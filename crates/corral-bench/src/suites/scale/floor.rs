//! The kernel's floor of an idle tenant: the peer the scale suite measures
//! corral's memory per tenant against, in the same run and at the same N.
//!
//! N processes ([`cbuild::NS_HOLDER`], a static C program that pauses) each
//! hold what a sandbox holds at the least: new mount, pid, ipc, uts and
//! cgroup namespaces, a network namespace as the bench profile's `net` asks
//! (with a veth pair whose host end is up for `private`; none for `host`), a
//! procfs of its pid namespace, and cgroups of its own in every hierarchy the
//! suite's tenants had cgroups in, next to theirs. Counted as
//! [`memory::per_tenant`] counts corral's tenants, so the difference is what
//! corral's own design adds: the rootfs (its tmpfs, the mounts), the init's
//! pages, the state files, the seccomp filter, the init's sockets.
//!
//! Everything is removed again, also on failure: the holders are killed
//! (the bench is their subreaper while they live, so it reaps them), the
//! host ends go with their namespaces, the cgroups are removed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use corral_profile::plan::NetMode;

use crate::error::{BenchError, Result};
use crate::suites::scale::memory;
use crate::suites::sys;

/// What the floor measured at one size.
#[derive(Debug, Clone)]
pub struct FloorResult {
    pub mem: memory::PerTenant,
    /// The holders' PSS, KiB each.
    pub holder_pss_kib: Vec<f64>,
    /// Mean holder PSS + kernel share + tmpfs, KiB per tenant.
    pub total_kib: f64,
    /// The network the holders had (the bench profile's).
    pub net: NetMode,
}

impl FloorResult {
    /// What each holder held besides mount, pid, ipc, uts and cgroup
    /// namespaces, a procfs and its cgroups.
    pub fn network(&self) -> &'static str {
        match self.net {
            NetMode::Private => "a network namespace with a veth pair",
            NetMode::None => "a loopback-only network namespace",
            NetMode::Host => "the host's network",
        }
    }
}

/// The cgroup roots the suite's tenants are in: every `ROOT` (a v1
/// hierarchy's mount, or the v2 mount) where `ROOT/<parent>` exists (asked
/// while they are up: `corral down --all` removes their parent).
pub fn cgroup_roots(parent: &str) -> Vec<PathBuf> {
    cgroup_roots_in(Path::new("/sys/fs/cgroup"), parent)
}

fn cgroup_roots_in(base: &Path, parent: &str) -> Vec<PathBuf> {
    if base.join(parent).is_dir() {
        return vec![base.to_path_buf()];
    }
    let mut roots: Vec<PathBuf> = std::fs::read_dir(base)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.join(parent).is_dir())
                .collect()
        })
        .unwrap_or_default();
    roots.sort();
    roots
}

/// The holders, their cgroups and host ends; all removed on drop.
struct Held {
    pids: Vec<i32>,
    /// The holders' cgroup parent, removed with what is below it.
    parent: String,
    veths: Vec<String>,
}

impl Drop for Held {
    fn drop(&mut self) {
        for &pid in &self.pids {
            // SAFETY: kill with a pid this process started and has not
            // reaped (it is the holders' subreaper), so not recycled.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        for &pid in &self.pids {
            let mut status = 0;
            // SAFETY: reaping a child of ours (adopted as subreaper).
            while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
            {}
        }
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) };
        // A host end goes with its namespace, which the kernel tears down
        // after its last process.
        let deadline = Instant::now() + Duration::from_secs(60 + self.veths.len() as u64 / 50);
        while Instant::now() < deadline
            && self
                .veths
                .iter()
                .any(|v| Path::new("/sys/class/net").join(v).exists())
        {
            sys::sleep(Duration::from_millis(50));
        }
        sys::report_cleanup(crate::suites::env::remove_cgroups(&self.parent));
    }
}

/// Hold `n` idle "tenants" as described above under the cgroup `parent`
/// (e.g. `corral/bench-PID/scale-floor`) in each of `roots`, measure, and
/// remove everything. `holder` is the compiled [`cbuild::NS_HOLDER`],
/// `work` a scratch directory.
pub fn measure(
    holder: &Path,
    roots: &[PathBuf],
    parent: &str,
    net: NetMode,
    n: usize,
    work: &Path,
) -> Result<FloorResult> {
    if roots.is_empty() {
        return Err(BenchError::suite(
            "scale",
            "the floor: no cgroup hierarchy holds the tenants' parent",
        ));
    }
    let mut held = Held {
        pids: Vec::with_capacity(n),
        parent: parent.to_string(),
        veths: Vec::new(),
    };
    for root in roots {
        let d = root.join(parent);
        // Its ancestors too, if `down --all` removed them (the run's own
        // cleanup removes those; `held` removes `parent` and below).
        std::fs::create_dir_all(&d).map_err(|e| BenchError::io(&d, e))?;
        // cgroup v2: the controllers the tenants had, for the holders too.
        let theirs = d.parent().map(|p| p.join("cgroup.subtree_control"));
        if let Some(ctl) = theirs.filter(|p| p.exists()) {
            let enabled = std::fs::read_to_string(&ctl).unwrap_or_default();
            let line: Vec<String> = enabled
                .split_whitespace()
                .map(|c| format!("+{c}"))
                .collect();
            if !line.is_empty() {
                let own = d.join("cgroup.subtree_control");
                std::fs::write(&own, line.join(" ")).map_err(|e| BenchError::io(&own, e))?;
            }
        }
    }
    // SAFETY: prctl with integer arguments only; undone when `held` drops.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    sys::sleep(Duration::from_secs(1));
    let before = memory::snapshot();
    let mut batch = String::new();
    for i in 0..n {
        sys::check_interrupt()?;
        let mut cmd = std::process::Command::new(holder);
        if net != NetMode::Host {
            cmd.arg("--net");
        }
        for root in roots {
            let d = root.join(parent).join(format!("t{i}"));
            std::fs::create_dir(&d).map_err(|e| BenchError::io(&d, e))?;
            cmd.arg(&d);
        }
        let f = sys::run_ok(
            &mut cmd,
            Duration::from_secs(30),
            "scale",
            "the floor's holder",
        )?;
        let pid: i32 = f.stdout.trim().parse().map_err(|_| {
            BenchError::suite(
                "scale",
                format!("the floor's holder printed {:?}, not a pid", f.stdout),
            )
        })?;
        held.pids.push(pid);
        if net == NetMode::Private {
            let name = format!("cfl{}_{i}", std::process::id() % 100_000);
            batch.push_str(&format!(
                "link add {name} type veth peer name eth0 netns {pid}\nlink set {name} up\n"
            ));
            held.veths.push(name);
        }
    }
    if !batch.is_empty() {
        let file = work.join("floor-veths.batch");
        std::fs::write(&file, &batch).map_err(|e| BenchError::io(&file, e))?;
        let mut ip = std::process::Command::new(
            crate::suites::tools::IP
                .find()
                .unwrap_or_else(|| "ip".into()),
        );
        ip.arg("-batch").arg(&file);
        let limit = Duration::from_secs(60 + n as u64 / 20);
        sys::run_ok(
            &mut ip,
            limit,
            "scale",
            "the floor's veth pairs (ip -batch)",
        )?;
    }
    sys::sleep(Duration::from_secs(2));
    let after = memory::snapshot();
    let holder_pss_kib: Vec<f64> = held
        .pids
        .iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok())
        .filter_map(|t| memory::parse_smaps_rollup(&t))
        .map(|(_, pss)| pss as f64)
        .collect();
    drop(held);
    let mem = memory::per_tenant(&before, &after, n);
    let pss = crate::stats::mean(&holder_pss_kib).unwrap_or(0.0);
    Ok(FloorResult {
        total_kib: pss + mem.kernel_kib + mem.tmpfs_kib,
        mem,
        holder_pss_kib,
        net,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_the_hierarchies_holding_the_parent() {
        let base = tempfile::tempdir().unwrap();
        for h in ["cpu", "memory", "pids"] {
            std::fs::create_dir_all(base.path().join(h)).unwrap();
        }
        for h in ["cpu", "memory"] {
            std::fs::create_dir_all(base.path().join(h).join("corral/run/scale")).unwrap();
        }
        assert_eq!(
            cgroup_roots_in(base.path(), "corral/run/scale"),
            vec![base.path().join("cpu"), base.path().join("memory")]
        );
        assert!(cgroup_roots_in(base.path(), "corral/other").is_empty());
        // cgroup v2: the parent right below the mount.
        std::fs::create_dir_all(base.path().join("corral/run/scale")).unwrap();
        assert_eq!(
            cgroup_roots_in(base.path(), "corral/run/scale"),
            vec![base.path().to_path_buf()]
        );
    }
}
