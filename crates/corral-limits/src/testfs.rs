//! Temp-directory cgroup trees for unit tests (youki style): the kernel's
//! interface files are created empty, and since writes append, each file
//! ends up holding every value written to it, one per line.

use crate::backend::{Backend, Controller};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use tempfile::TempDir;

pub(crate) struct FakeTree {
    pub tmp: TempDir,
}

impl FakeTree {
    pub fn path(&self) -> &Path {
        self.tmp.path()
    }

    /// A fake sysfs with vda (254:0), sda (8:0), loop0 (7:0) and partition vda1 (254:1).
    fn sysfs(&self) -> PathBuf {
        let sys = self.path().join("sys");
        for (name, dev) in [("vda", "254:0"), ("sda", "8:0"), ("loop0", "7:0")] {
            fs::create_dir_all(sys.join("block").join(name)).unwrap();
            fs::write(sys.join("block").join(name).join("dev"), format!("{dev}\n")).unwrap();
            fs::create_dir_all(sys.join("dev/block").join(dev)).unwrap();
        }
        fs::create_dir_all(sys.join("dev/block/254:1")).unwrap();
        fs::write(sys.join("dev/block/254:1/partition"), "1\n").unwrap();
        sys
    }

    /// v1 hierarchies for `ctrls` (each its own mount) under `<tmp>/v1`.
    pub fn v1(ctrls: &[Controller]) -> (FakeTree, Backend) {
        let t = FakeTree {
            tmp: tempfile::tempdir().unwrap(),
        };
        let mut dirs = BTreeMap::new();
        for c in ctrls {
            let d = t.path().join("v1").join(c.name());
            fs::create_dir_all(&d).unwrap();
            dirs.insert(*c, d);
        }
        let b = Backend::v1_at(dirs).with_sysfs(t.sysfs());
        (t, b)
    }

    /// A v2 root under `<tmp>/v2` whose root and `corral` parent offer `controllers`.
    pub fn v2(controllers: &str) -> (FakeTree, Backend) {
        let t = FakeTree {
            tmp: tempfile::tempdir().unwrap(),
        };
        let root = t.path().join("v2");
        for d in [root.clone(), root.join("corral")] {
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("cgroup.controllers"), format!("{controllers}\n")).unwrap();
            fs::write(d.join("cgroup.subtree_control"), "").unwrap();
        }
        let b = Backend::v2_at(&root).with_sysfs(t.sysfs());
        (t, b)
    }

    /// Creates empty interface files in `dir`.
    pub fn files(dir: &Path, names: &[&str]) {
        for n in names {
            fs::write(dir.join(n), "").unwrap();
        }
    }

    /// Every file under the tree with its content, for "nothing changed" checks.
    pub fn snapshot(&self) -> BTreeMap<PathBuf, String> {
        fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
            for e in fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(&p, out);
                } else {
                    out.insert(p.clone(), fs::read_to_string(&p).unwrap());
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(self.path(), &mut out);
        out
    }
}

pub(crate) fn read(p: impl AsRef<Path>) -> String {
    fs::read_to_string(p.as_ref()).unwrap_or_else(|e| panic!("{}: {e}", p.as_ref().display()))
}

pub(crate) const V1_FILES: &[(Controller, &[&str])] = &[
    (
        Controller::Cpu,
        &[
            "cpu.cfs_period_us",
            "cpu.cfs_quota_us",
            "cpu.shares",
            "cgroup.procs",
        ],
    ),
    (Controller::Cpuacct, &["cgroup.procs"]),
    (
        Controller::Memory,
        &[
            "memory.limit_in_bytes",
            "memory.memsw.limit_in_bytes",
            "memory.soft_limit_in_bytes",
            "cgroup.procs",
        ],
    ),
    (Controller::Pids, &["pids.max", "cgroup.procs"]),
    (
        Controller::Blkio,
        &[
            "blkio.throttle.read_bps_device",
            "blkio.throttle.write_bps_device",
            "blkio.throttle.read_iops_device",
            "blkio.throttle.write_iops_device",
            "cgroup.procs",
        ],
    ),
    (Controller::Freezer, &["freezer.state", "cgroup.procs"]),
];
