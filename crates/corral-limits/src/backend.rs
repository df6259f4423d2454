//! Which cgroup setup to use: v2 (unified) or v1 (one hierarchy per
//! controller), found from /proc/self/mountinfo, or injected for tests.

use crate::error::{CgroupError, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// A v1 controller corral uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Controller {
    Cpu,
    Cpuacct,
    Memory,
    Pids,
    Blkio,
    Freezer,
}

impl Controller {
    pub const ALL: [Controller; 6] = [
        Controller::Cpu,
        Controller::Cpuacct,
        Controller::Memory,
        Controller::Pids,
        Controller::Blkio,
        Controller::Freezer,
    ];
    /// Needed for v1; blkio and freezer are used when mounted.
    pub const REQUIRED: [Controller; 4] = [
        Controller::Cpu,
        Controller::Cpuacct,
        Controller::Memory,
        Controller::Pids,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Controller::Cpu => "cpu",
            Controller::Cpuacct => "cpuacct",
            Controller::Memory => "memory",
            Controller::Pids => "pids",
            Controller::Blkio => "blkio",
            Controller::Freezer => "freezer",
        }
    }

    pub fn from_name(s: &str) -> Option<Controller> {
        Controller::ALL.into_iter().find(|c| c.name() == s)
    }
}

/// v2 controllers enabled for tenants; io is optional.
pub(crate) const V2_REQUIRED: [&str; 3] = ["cpu", "memory", "pids"];
pub(crate) const V2_WANTED: [&str; 4] = ["cpu", "memory", "pids", "io"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// Controller → mount point of its hierarchy (shared by co-mounted controllers).
    V1 { dirs: BTreeMap<Controller, PathBuf> },
    /// The cgroup2 mount point.
    V2 { root: PathBuf },
}

/// A cgroup setup plus corral's parent cgroup in it (default `corral`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backend {
    kind: Kind,
    parent: PathBuf,
    sysfs: PathBuf,
}

pub const DEFAULT_PARENT: &str = "corral";

/// Checks a relative cgroup path: non-empty components, no `.`/`..`.
pub(crate) fn check_rel(what: &'static str, name: &str, allow_nested: bool) -> Result<PathBuf> {
    let bad = |reason| {
        Err(CgroupError::BadName {
            what,
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() || name.len() > 255 * 4 {
        return bad("must be 1 to 1020 bytes");
    }
    if name.contains('\0') || name.contains('\n') {
        return bad("contains NUL or newline");
    }
    if name.starts_with('/') || name.ends_with('/') || name.contains("//") {
        return bad("must be relative, without empty components");
    }
    if !allow_nested && name.contains('/') {
        return bad("must be a single path component");
    }
    let p = PathBuf::from(name);
    if p.components().any(|c| !matches!(c, Component::Normal(_))) {
        return bad("must not contain . or ..");
    }
    Ok(p)
}

/// Undoes mountinfo's octal escapes (`\040` for space...).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// cgroup mounts from mountinfo text: (fstype, mount point, super options).
pub(crate) fn cgroup_mounts(mountinfo: &str) -> Vec<(String, PathBuf, Vec<String>)> {
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let pre: Vec<&str> = pre.split(' ').collect();
        let post: Vec<&str> = post.split(' ').collect();
        if pre.len() < 5 || post.len() < 3 {
            continue;
        }
        let fstype = post[0];
        if fstype != "cgroup" && fstype != "cgroup2" {
            continue;
        }
        let opts = post[2].split(',').map(str::to_string).collect();
        out.push((fstype.to_string(), PathBuf::from(unescape(pre[4])), opts));
    }
    out
}

impl Backend {
    /// Detects the host's setup: v2 when a cgroup2 mount offers cpu, memory
    /// and pids; else v1 when cpu, cpuacct, memory and pids hierarchies are
    /// mounted (blkio and freezer are used when present).
    pub fn detect(parent: &str) -> Result<Backend> {
        let path = Path::new("/proc/self/mountinfo");
        let text =
            std::fs::read_to_string(path).map_err(|e| CgroupError::io("reading", path, e))?;
        Backend::detect_from(&text, |p| std::fs::read_to_string(p).ok())?.with_parent(parent)
    }

    /// [`Backend::detect`] on given mountinfo text; `read` reads a v2 root's
    /// `cgroup.controllers`.
    pub fn detect_from(mountinfo: &str, read: impl Fn(&Path) -> Option<String>) -> Result<Backend> {
        let mounts = cgroup_mounts(mountinfo);
        let mut seen = Vec::new();
        for (fstype, dir, _) in mounts.iter().filter(|m| m.0 == "cgroup2") {
            let ctl = read(&dir.join("cgroup.controllers")).unwrap_or_default();
            let have: Vec<&str> = ctl.split_whitespace().collect();
            if V2_REQUIRED.iter().all(|c| have.contains(c)) {
                return Ok(Backend::v2_at(dir));
            }
            seen.push(format!(
                "{fstype} at {} with controllers [{}]",
                dir.display(),
                have.join(" ")
            ));
        }
        let mut dirs = BTreeMap::new();
        for (_, dir, opts) in mounts.iter().filter(|m| m.0 == "cgroup") {
            for c in opts.iter().filter_map(|o| Controller::from_name(o)) {
                dirs.entry(c).or_insert_with(|| dir.clone());
            }
        }
        let missing: Vec<&str> = Controller::REQUIRED
            .iter()
            .filter(|c| !dirs.contains_key(c))
            .map(|c| c.name())
            .collect();
        if missing.is_empty() {
            return Ok(Backend::v1_at(dirs));
        }
        if !dirs.is_empty() {
            let found: Vec<&str> = dirs.keys().map(|c| c.name()).collect();
            seen.push(format!(
                "v1 hierarchies [{}] (missing {})",
                found.join(" "),
                missing.join(" ")
            ));
        }
        if seen.is_empty() {
            seen.push("no cgroup filesystem is mounted".into());
        }
        Err(CgroupError::NoCgroups(format!(
            "need cgroup2 with cpu, memory and pids, or v1 cpu, cpuacct, memory and pids; found {}",
            seen.join("; ")
        )))
    }

    /// A v1 setup with the given hierarchy directories (parent `corral`).
    pub fn v1_at(dirs: impl IntoIterator<Item = (Controller, PathBuf)>) -> Backend {
        Backend {
            kind: Kind::V1 {
                dirs: dirs.into_iter().collect(),
            },
            parent: DEFAULT_PARENT.into(),
            sysfs: "/sys".into(),
        }
    }

    /// A v2 setup rooted at `root` (parent `corral`).
    pub fn v2_at(root: impl Into<PathBuf>) -> Backend {
        Backend {
            kind: Kind::V2 { root: root.into() },
            parent: DEFAULT_PARENT.into(),
            sysfs: "/sys".into(),
        }
    }

    /// Sets the parent cgroup, a relative path below each hierarchy's root
    /// (for example `corral`, or `system.slice/corral.service/tenants`).
    pub fn with_parent(mut self, parent: &str) -> Result<Backend> {
        self.parent = check_rel("parent", parent, true)?;
        Ok(self)
    }

    /// Sets where block devices are looked up (`/sys` by default).
    pub fn with_sysfs(mut self, sysfs: impl Into<PathBuf>) -> Backend {
        self.sysfs = sysfs.into();
        self
    }

    pub fn kind(&self) -> &Kind {
        &self.kind
    }

    pub fn is_v2(&self) -> bool {
        matches!(self.kind, Kind::V2 { .. })
    }

    pub fn parent(&self) -> &Path {
        &self.parent
    }

    pub fn sysfs(&self) -> &Path {
        &self.sysfs
    }

    /// v1: whether a controller is mounted. v2: always true for cpu, cpuacct
    /// (cpu.stat), memory and pids; io and freezer are probed per cgroup.
    pub fn has(&self, c: Controller) -> bool {
        match &self.kind {
            Kind::V1 { dirs } => dirs.contains_key(&c),
            Kind::V2 { .. } => true,
        }
    }

    /// The distinct hierarchy roots (v1: one per mount; v2: the one root).
    pub fn roots(&self) -> Vec<PathBuf> {
        match &self.kind {
            Kind::V1 { dirs } => {
                let mut v: Vec<PathBuf> = dirs.values().cloned().collect();
                v.sort();
                v.dedup();
                v
            }
            Kind::V2 { root } => vec![root.clone()],
        }
    }

    /// The parent cgroup's directory in every hierarchy.
    pub fn parent_dirs(&self) -> Vec<PathBuf> {
        self.roots()
            .into_iter()
            .map(|r| r.join(&self.parent))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's mountinfo (Debian 12 VM, hybrid cgroups, 6.18 kernel).
    const HYBRID: &str = "\
22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    /// systemd-style hybrid with cpu,cpuacct co-mounted.
    const COMOUNTED: &str = "\
25 18 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
30 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,cpu,cpuacct
31 25 0:28 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,memory
32 25 0:29 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,pids
33 25 0:30 / /sys/fs/cgroup/my\\040blkio rw,nosuid,nodev,noexec,relatime shared:17 - cgroup cgroup rw,blkio
";

    const UNIFIED: &str = "\
25 18 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

    #[test]
    fn hybrid_host_is_v1_with_separate_mounts() {
        let b = Backend::detect_from(HYBRID, |_| Some(String::new())).unwrap();
        let Kind::V1 { dirs } = b.kind() else {
            panic!("{b:?}")
        };
        assert_eq!(dirs[&Controller::Cpu], Path::new("/sys/fs/cgroup/cpu"));
        assert_eq!(
            dirs[&Controller::Cpuacct],
            Path::new("/sys/fs/cgroup/cpuacct")
        );
        assert_eq!(
            dirs[&Controller::Freezer],
            Path::new("/sys/fs/cgroup/freezer")
        );
        assert_eq!(dirs.len(), 6);
        assert_eq!(b.parent_dirs().len(), 6);
        assert_eq!(b.parent(), Path::new("corral"));
    }

    #[test]
    fn comounted_cpu_cpuacct_share_one_dir() {
        let b = Backend::detect_from(COMOUNTED, |_| Some("hugetlb\n".into())).unwrap();
        let Kind::V1 { dirs } = b.kind() else {
            panic!("{b:?}")
        };
        assert_eq!(dirs[&Controller::Cpu], dirs[&Controller::Cpuacct]);
        assert_eq!(
            dirs[&Controller::Blkio],
            Path::new("/sys/fs/cgroup/my blkio")
        );
        assert!(!b.has(Controller::Freezer));
        assert_eq!(b.roots().len(), 4, "cpu,cpuacct counted once");
    }

    #[test]
    fn unified_needs_cpu_memory_pids() {
        let b = Backend::detect_from(UNIFIED, |p| {
            assert_eq!(p, Path::new("/sys/fs/cgroup/cgroup.controllers"));
            Some("cpuset cpu io memory hugetlb pids rdma misc\n".into())
        })
        .unwrap();
        assert_eq!(b, Backend::v2_at("/sys/fs/cgroup"));
        let e = Backend::detect_from(UNIFIED, |_| Some("cpu io\n".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("with controllers [cpu io]"), "{e}");
        let e = Backend::detect_from("", |_| None).unwrap_err().to_string();
        assert!(e.contains("no cgroup filesystem is mounted"), "{e}");
    }

    #[test]
    fn parent_names() {
        let b = Backend::v2_at("/x");
        assert_eq!(
            b.clone()
                .with_parent("system.slice/corral.service/t")
                .unwrap()
                .parent(),
            Path::new("system.slice/corral.service/t")
        );
        for bad in ["", "/abs", "a/../b", "a//b", "..", "a/", "a\nb"] {
            assert!(b.clone().with_parent(bad).is_err(), "{bad:?}");
        }
        assert!(check_rel("tenant", "a/b", false).is_err());
        assert!(check_rel("tenant", "alice", false).is_ok());
    }
}
