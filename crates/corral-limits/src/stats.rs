//! Usage and fault counters of a tenant's cgroup, and parsers for the
//! kernel's stat file formats (tested on captured contents).

use crate::backend::{Controller, Kind};
use crate::cgroup::TenantCgroup;
use crate::error::{CgroupError, Result};
use crate::kept::{FdBudget, KeptFile};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Resource use so far (counters since the cgroup was created, and current
/// memory and process counts).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub cpu_usage_ns: u64,
    pub memory_bytes: u64,
    pub processes: u64,
    pub io_read_bytes: u64,
    pub io_write_bytes: u64,
    pub io_read_ops: u64,
    pub io_write_ops: u64,
}

/// How often limits were hit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Faults {
    /// CFS periods in which the cgroup was throttled.
    pub cpu_throttled_periods: u64,
    pub cpu_throttled_ns: u64,
    /// v2: memory.events `max`; v1: memory.failcnt.
    pub memory_max_hits: u64,
    pub oom_kills: u64,
    /// Forks refused by pids.max.
    pub pids_max_hits: u64,
    /// No kernel counts IO throttling events: always `None` for now.
    pub io_throttled: Option<u64>,
}

fn parse_err(path: &Path, what: &'static str, content: &str) -> CgroupError {
    CgroupError::Parse {
        path: path.to_path_buf(),
        what,
        content: content.to_string(),
    }
}

/// "key value" lines (cpu.stat, memory.events, pids.events, memory.oom_control).
pub(crate) fn parse_keyed(text: &str) -> BTreeMap<&str, u64> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (k, v) = (it.next()?, it.next()?);
            Some((k, v.parse().ok()?))
        })
        .collect()
}

/// v1 blkio.throttle.io_service_bytes / io_serviced: "7:0 Read 524288"
/// lines per device (plus Write, Sync, Async, Discard, Total) and a final
/// "Total N". Returns (read, write) summed over devices.
pub(crate) fn parse_blkio_v1(text: &str) -> Option<(u64, u64)> {
    let (mut r, mut w) = (0u64, 0u64);
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            [_dev, "Read", n] => r = r.checked_add(n.parse().ok()?)?,
            [_dev, "Write", n] => w = w.checked_add(n.parse().ok()?)?,
            [_, _, n] | [_, n] => {
                n.parse::<u64>().ok()?;
            }
            [] => {}
            _ => return None,
        }
    }
    Some((r, w))
}

/// v2 io.stat: "254:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0" per
/// device. Returns (rbytes, wbytes, rios, wios) summed over devices.
pub(crate) fn parse_io_stat(text: &str) -> Option<[u64; 4]> {
    let mut sums = [0u64; 4];
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        for kv in line.split_whitespace().skip(1) {
            let (k, v) = kv.split_once('=')?;
            let idx = match k {
                "rbytes" => 0,
                "wbytes" => 1,
                "rios" => 2,
                "wios" => 3,
                _ => continue,
            };
            sums[idx] = sums[idx].checked_add(v.parse().ok()?)?;
        }
    }
    Some(sums)
}

/// Where [`TenantCgroup::usage`] and [`TenantCgroup::faults`] read the
/// cgroup's files from.
trait Files {
    /// The text of a controller's file; `Ok(None)` if the file is not there.
    fn read(&self, c: Controller, name: &str) -> Result<Option<String>>;
    /// The file's path (for error messages).
    fn path(&self, c: Controller, name: &str) -> PathBuf;
}

fn not_mounted(c: Controller) -> CgroupError {
    CgroupError::NoCgroups(format!("the {} controller is not mounted", c.name()))
}

/// Each read looks the whole path up.
struct ByPath<'a>(&'a TenantCgroup);

impl Files for ByPath<'_> {
    fn read(&self, c: Controller, name: &str) -> Result<Option<String>> {
        let path = self.0.file(c, name).ok_or_else(|| not_mounted(c))?;
        match std::fs::read_to_string(&path) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(CgroupError::io("reading", path, e)),
        }
    }
    fn path(&self, c: Controller, name: &str) -> PathBuf {
        self.0.file(c, name).unwrap_or_default()
    }
}

/// Opens files relative to descriptors of the cgroup's directories, each
/// directory opened once, when first needed: on cgroupfs looking up a
/// file's whole path costs more than reading it (kernfs revalidates every
/// component).
struct ByDir<'a> {
    cg: &'a TenantCgroup,
    /// (hierarchy directory, its descriptor once opened).
    dirs: Vec<(PathBuf, std::cell::OnceCell<std::fs::File>)>,
}

impl<'a> ByDir<'a> {
    fn new(cg: &'a TenantCgroup) -> ByDir<'a> {
        let dirs = cg
            .dirs()
            .into_iter()
            .map(|d| (d, std::cell::OnceCell::new()))
            .collect();
        ByDir { cg, dirs }
    }

    fn dir(&self, c: Controller) -> Result<(PathBuf, &std::fs::File)> {
        let dir = self.cg.dir(c).ok_or_else(|| not_mounted(c))?;
        let (_, cell) = self
            .dirs
            .iter()
            .find(|(d, _)| *d == dir)
            .ok_or_else(|| not_mounted(c))?;
        if let Some(f) = cell.get() {
            return Ok((dir, f));
        }
        let f = std::fs::File::open(&dir).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => CgroupError::NotFound { path: dir.clone() },
            _ => CgroupError::io("opening", &dir, e),
        })?;
        Ok((dir, cell.get_or_init(|| f)))
    }

    /// Opens a controller's file; `Ok(None)` if it is not there. A missing
    /// directory is [`CgroupError::NotFound`].
    fn open(&self, c: Controller, name: &str) -> Result<Option<std::fs::File>> {
        use nix::fcntl::{openat, OFlag};
        use std::os::fd::{AsRawFd, FromRawFd};
        let (dir, fd) = self.dir(c)?;
        match openat(
            Some(fd.as_raw_fd()),
            name,
            OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
            nix::sys::stat::Mode::empty(),
        ) {
            // SAFETY: `raw` was just returned by openat and is owned by
            // nothing else; the File closes it.
            Ok(raw) => Ok(Some(unsafe { std::fs::File::from_raw_fd(raw) })),
            Err(nix::errno::Errno::ENOENT) => Ok(None),
            Err(e) => Err(CgroupError::io("opening", dir.join(name), e.into())),
        }
    }
}

/// Reads a small file from offset 0 with `pread`, so that a descriptor kept
/// open reads the current contents every time (cgroupfs and procfs files
/// are generated anew by a read at offset 0). One `pread` for a file that
/// fits in the buffer: a read shorter than asked for is the end (kernfs
/// hands out a generated file whole, up to the size asked for).
fn pread_small(f: &std::fs::File) -> std::io::Result<String> {
    use std::os::unix::fs::FileExt;
    let mut out = vec![0u8; 4096];
    let mut len = 0;
    loop {
        match f.read_at(&mut out[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => {
                len += n;
                if len < out.len() {
                    break;
                }
                out.resize(out.len() * 2, 0);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    out.truncate(len);
    String::from_utf8(out).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

#[derive(Debug)]
enum Kept {
    Open(KeptFile),
    /// Not there when last looked for (an optional file: `io.stat` without
    /// the io controller, a `_recursive` blkio file of an old kernel).
    Missing(Instant),
}

/// How long a missing optional file is taken as missing before it is looked
/// for again (a controller enabled later shows up within this time).
const MISSING_RECHECK: Duration = Duration::from_secs(30);

/// A tenant's cgroup counter files kept open between readings, each read
/// again with one `pread` at offset 0: no path lookup, `open` or `close`
/// per reading, which is most of what reading a cgroupfs file costs (issue
/// 16: the history collector and `/metrics` read every tenant every few
/// seconds). Only the files [`Usage`] and [`Faults`] need are opened.
///
/// A cgroup that is removed makes every read of its open files fail with
/// `ENODEV`, also when a cgroup of the same name is created again: the
/// reader then drops its descriptors and opens the files anew, once, so a
/// re-created cgroup is read through new descriptors and a removed one is
/// [`CgroupError::NotFound`]. Any failed reading drops the descriptors too.
#[derive(Debug)]
pub struct CgroupReader {
    cg: TenantCgroup,
    budget: FdBudget,
    kept: Vec<(Controller, String, Kept)>,
}

impl CgroupReader {
    pub fn new(cg: TenantCgroup, budget: FdBudget) -> CgroupReader {
        CgroupReader {
            cg,
            budget,
            kept: Vec::new(),
        }
    }

    pub fn cgroup(&self) -> &TenantCgroup {
        &self.cg
    }

    /// Descriptors this reader keeps open now.
    pub fn open_files(&self) -> usize {
        self.kept
            .iter()
            .filter(|(_, _, k)| matches!(k, Kept::Open(_)))
            .count()
    }

    /// [`TenantCgroup::usage`] and [`TenantCgroup::faults`] together.
    pub fn usage_and_faults(&mut self) -> Result<(Usage, Faults)> {
        let mut attempt = 0;
        loop {
            let files = KeptFiles {
                by_dir: ByDir::new(&self.cg),
                kept: std::cell::RefCell::new(&mut self.kept),
                budget: &self.budget,
                stale: std::cell::Cell::new(false),
            };
            let r = usage_in(&self.cg, &files).and_then(|u| Ok((u, faults_in(&self.cg, &files)?)));
            let stale = files.stale.get();
            if r.is_err() {
                self.kept.clear();
            }
            attempt += 1;
            if !stale || attempt == 2 {
                return r;
            }
        }
    }
}

/// [`Files`] of a [`CgroupReader`]: kept descriptors, or opened relative to
/// the directories and kept if the budget allows.
struct KeptFiles<'a> {
    by_dir: ByDir<'a>,
    kept: std::cell::RefCell<&'a mut Vec<(Controller, String, Kept)>>,
    budget: &'a FdBudget,
    /// A kept descriptor read `ENODEV`: its cgroup was removed.
    stale: std::cell::Cell<bool>,
}

impl Files for KeptFiles<'_> {
    fn read(&self, c: Controller, name: &str) -> Result<Option<String>> {
        let mut kept = self.kept.borrow_mut();
        let at = kept.iter().position(|(kc, kn, _)| *kc == c && kn == name);
        if let Some(i) = at {
            match &kept[i].2 {
                Kept::Open(fd) => {
                    return match pread_small(fd) {
                        Ok(text) => Ok(Some(text)),
                        Err(e) => {
                            if e.raw_os_error() == Some(libc::ENODEV) {
                                self.stale.set(true);
                            }
                            Err(CgroupError::io("reading", self.path(c, name), e))
                        }
                    };
                }
                Kept::Missing(since) if since.elapsed() < MISSING_RECHECK => return Ok(None),
                Kept::Missing(_) => {
                    kept.swap_remove(i);
                }
            }
        }
        let Some(file) = self.by_dir.open(c, name)? else {
            kept.push((c, name.to_string(), Kept::Missing(Instant::now())));
            return Ok(None);
        };
        let text =
            pread_small(&file).map_err(|e| CgroupError::io("reading", self.path(c, name), e))?;
        if let Ok(fd) = self.budget.keep(file) {
            kept.push((c, name.to_string(), Kept::Open(fd)));
        }
        Ok(Some(text))
    }
    fn path(&self, c: Controller, name: &str) -> PathBuf {
        self.by_dir.cg.file(c, name).unwrap_or_default()
    }
}

/// A file that must be there.
fn required(files: &dyn Files, c: Controller, name: &str) -> Result<(String, PathBuf)> {
    let path = files.path(c, name);
    match files.read(c, name)? {
        Some(text) => Ok((text, path)),
        None => Err(CgroupError::io(
            "reading",
            path,
            std::io::Error::from(std::io::ErrorKind::NotFound),
        )),
    }
}

/// A file holding one unsigned number.
fn number(files: &dyn Files, c: Controller, name: &str) -> Result<u64> {
    let (text, path) = required(files, c, name)?;
    text.trim()
        .parse()
        .map_err(|_| parse_err(&path, "a number", &text))
}

/// Picks keys of a keyed file; `required` keys must be there.
fn keyed_in(
    files: &dyn Files,
    c: Controller,
    name: &str,
    keys: &[(&'static str, bool)],
) -> Result<Vec<u64>> {
    let (text, path) = required(files, c, name)?;
    let map = parse_keyed(&text);
    keys.iter()
        .map(|(k, required)| match map.get(k) {
            Some(v) => Ok(*v),
            None if !required => Ok(0),
            None => Err(parse_err(&path, k, &text)),
        })
        .collect()
}

impl TenantCgroup {
    fn file(&self, c: Controller, name: &str) -> Option<PathBuf> {
        self.dir(c).map(|d| d.join(name))
    }

    /// Current usage counters.
    pub fn usage(&self) -> Result<Usage> {
        usage_in(self, &ByPath(self))
    }

    /// How often limits were hit.
    pub fn faults(&self) -> Result<Faults> {
        faults_in(self, &ByPath(self))
    }

    /// [`Self::usage`] and [`Self::faults`] together, reading every file
    /// relative to the cgroup's directories, each opened once: about half the
    /// cost where many tenants are read at once. A cgroup directory that is
    /// missing is [`CgroupError::NotFound`]. What reads the same cgroup again
    /// and again keeps its files open: [`CgroupReader`].
    pub fn usage_and_faults(&self) -> Result<(Usage, Faults)> {
        CgroupReader::new(self.clone(), FdBudget::new(0)).usage_and_faults()
    }
}

fn usage_in(cg: &TenantCgroup, files: &dyn Files) -> Result<Usage> {
    let v2 = matches!(cg.backend().kind(), Kind::V2 { .. });
    let mut u = Usage::default();
    if v2 {
        u.cpu_usage_ns = keyed_in(files, Controller::Cpu, "cpu.stat", &[("usage_usec", true)])?[0]
            .saturating_mul(1000);
        u.memory_bytes = number(files, Controller::Memory, "memory.current")?;
        u.processes = number(files, Controller::Pids, "pids.current")?;
        // Without the io controller, IO usage is zero rather than an error.
        if let Some(text) = files.read(Controller::Blkio, "io.stat")? {
            let [rb, wb, ro, wo] = parse_io_stat(&text).ok_or_else(|| {
                parse_err(
                    &files.path(Controller::Blkio, "io.stat"),
                    "io.stat lines",
                    &text,
                )
            })?;
            (
                u.io_read_bytes,
                u.io_write_bytes,
                u.io_read_ops,
                u.io_write_ops,
            ) = (rb, wb, ro, wo);
        }
    } else {
        u.cpu_usage_ns = number(files, Controller::Cpuacct, "cpuacct.usage")?;
        u.memory_bytes = number(files, Controller::Memory, "memory.usage_in_bytes")?;
        u.processes = number(files, Controller::Pids, "pids.current")?;
        if cg.dir(Controller::Blkio).is_some() {
            // The _recursive files (with descendants) where the kernel has them.
            let read_pair = |name: &str| -> Result<(u64, u64)> {
                let rec = format!("{name}_recursive");
                let (text, path) = match files.read(Controller::Blkio, &rec)? {
                    Some(t) => (t, files.path(Controller::Blkio, &rec)),
                    None => required(files, Controller::Blkio, name)?,
                };
                parse_blkio_v1(&text)
                    .ok_or_else(|| parse_err(&path, "blkio per-device lines", &text))
            };
            (u.io_read_bytes, u.io_write_bytes) = read_pair("blkio.throttle.io_service_bytes")?;
            (u.io_read_ops, u.io_write_ops) = read_pair("blkio.throttle.io_serviced")?;
        }
    }
    Ok(u)
}

fn faults_in(cg: &TenantCgroup, files: &dyn Files) -> Result<Faults> {
    let v2 = matches!(cg.backend().kind(), Kind::V2 { .. });
    let mut f = Faults {
        pids_max_hits: keyed_in(files, Controller::Pids, "pids.events", &[("max", true)])?[0],
        ..Default::default()
    };
    if v2 {
        let c = keyed_in(
            files,
            Controller::Cpu,
            "cpu.stat",
            &[("nr_throttled", true), ("throttled_usec", true)],
        )?;
        (f.cpu_throttled_periods, f.cpu_throttled_ns) = (c[0], c[1].saturating_mul(1000));
        let m = keyed_in(
            files,
            Controller::Memory,
            "memory.events",
            &[("max", true), ("oom_kill", true)],
        )?;
        (f.memory_max_hits, f.oom_kills) = (m[0], m[1]);
    } else {
        let c = keyed_in(
            files,
            Controller::Cpu,
            "cpu.stat",
            &[("nr_throttled", true), ("throttled_time", true)],
        )?;
        (f.cpu_throttled_periods, f.cpu_throttled_ns) = (c[0], c[1]);
        f.memory_max_hits = number(files, Controller::Memory, "memory.failcnt")?;
        // oom_kill is missing before Linux 4.13: counted as 0 there.
        f.oom_kills = keyed_in(
            files,
            Controller::Memory,
            "memory.oom_control",
            &[("oom_kill", false)],
        )?[0];
    }
    Ok(f)
}

#[cfg(test)]
#[path = "stats_tests.rs"]
mod tests;
