//! Descriptors kept open across readings, for what reads every tenant every
//! few seconds (the history collector, `/metrics`): an [`FdBudget`] bounds
//! how many are kept, a [`KeptFile`] gives its descriptor back when closed,
//! and a [`Stamp`] tells whether a kept regular file changed since it was
//! read (one `fstat`, no path lookup).

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How many descriptors the readers sharing it may keep open together.
/// Beyond it a reader opens (and closes) at every reading what it could not
/// keep.
#[derive(Debug, Clone)]
pub struct FdBudget(Arc<AtomicUsize>);

/// The soft `RLIMIT_NOFILE` [`FdBudget::from_nofile_limit`] raises to, if
/// the hard limit allows: enough for a few thousand tenants' files, without
/// handing a million to the commands the process starts.
pub const NOFILE_WANTED: u64 = 65536;

/// Descriptors [`FdBudget::from_nofile_limit`] leaves to the rest of the
/// process (its database, sockets, alert commands' pipes, the files read
/// without being kept).
pub const NOFILE_RESERVE: u64 = 1024;

impl FdBudget {
    pub fn new(descriptors: usize) -> FdBudget {
        FdBudget(Arc::new(AtomicUsize::new(descriptors)))
    }

    /// Raises this process's soft `RLIMIT_NOFILE` towards its hard limit
    /// (to at most [`NOFILE_WANTED`], never lowering it) and budgets all of
    /// the soft limit but [`NOFILE_RESERVE`], which is left to everything
    /// else the process opens. A limit that cannot be read budgets nothing.
    pub fn from_nofile_limit() -> FdBudget {
        use nix::sys::resource::{getrlimit, setrlimit, Resource};
        let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
            return FdBudget::new(0);
        };
        let want = hard.min(NOFILE_WANTED).max(soft);
        let soft = if want > soft && setrlimit(Resource::RLIMIT_NOFILE, want, hard).is_ok() {
            want
        } else {
            soft
        };
        FdBudget::new(usize::try_from(soft.saturating_sub(NOFILE_RESERVE)).unwrap_or(usize::MAX))
    }

    /// Descriptors that may still be kept.
    pub fn available(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    /// Keeps `file` if the budget allows; gives it back otherwise.
    pub fn keep(&self, file: File) -> Result<KeptFile, File> {
        match self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        {
            Ok(_) => Ok(KeptFile {
                file,
                budget: self.clone(),
            }),
            Err(_) => Err(file),
        }
    }
}

/// A descriptor counted in an [`FdBudget`], given back when closed.
#[derive(Debug)]
pub struct KeptFile {
    file: File,
    budget: FdBudget,
}

impl std::ops::Deref for KeptFile {
    type Target = File;
    fn deref(&self) -> &File {
        &self.file
    }
}

impl Drop for KeptFile {
    fn drop(&mut self) {
        self.budget.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// How long after its last change a file's metadata is trusted to show the
/// next change: file times have the kernel's coarse clock granularity (a
/// few ms), so a file changed again within the same tick looks unchanged.
/// A stamp taken sooner is [`Stamp::settled`] false and the file is read
/// again (git's "racy clean" rule).
pub(crate) const SETTLE: Duration = Duration::from_secs(2);

/// What `fstat` says of a file: changed contents (in place or by a rename
/// over it) change the stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    size: i64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    /// Still linked: a file renamed over or removed has no links left.
    linked: bool,
}

impl Stamp {
    /// The stamp of an open file.
    pub fn of(file: &impl AsFd) -> std::io::Result<Stamp> {
        let st = nix::sys::stat::fstat(file.as_fd().as_raw_fd())?;
        Ok(Stamp {
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size,
            mtime: (st.st_mtime, st.st_mtime_nsec),
            ctime: (st.st_ctime, st.st_ctime_nsec),
            linked: st.st_nlink > 0,
        })
    }

    /// The file's device.
    pub fn dev(&self) -> u64 {
        self.dev
    }

    pub fn ino(&self) -> u64 {
        self.ino
    }

    /// Last changed long enough ago for the next change to show.
    pub fn settled(&self) -> bool {
        self.settled_at(SystemTime::now())
    }

    fn settled_at(&self, now: SystemTime) -> bool {
        let at = |(s, ns): (i64, i64)| {
            SystemTime::UNIX_EPOCH + Duration::new(s.max(0) as u64, ns.clamp(0, 999_999_999) as u32)
        };
        let changed = at(self.mtime).max(at(self.ctime));
        now.duration_since(changed).is_ok_and(|d| d >= SETTLE)
    }

    /// `file` (kept open since this stamp was taken) is unchanged, still
    /// linked, and was settled then.
    pub fn unchanged(&self, file: &impl AsFd) -> bool {
        self.unchanged_at(file, SystemTime::now())
    }

    fn unchanged_at(&self, file: &impl AsFd, now: SystemTime) -> bool {
        self.linked && self.settled_at(now) && Stamp::of(file).is_ok_and(|st| st == *self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_bounds_kept_files_and_gets_them_back() {
        let dir = tempfile::tempdir().unwrap();
        let open = || File::create(dir.path().join("f")).unwrap();
        let budget = FdBudget::new(2);
        let a = budget.keep(open()).unwrap();
        let b = budget.keep(open()).unwrap();
        assert!(budget.keep(open()).is_err(), "a third is refused");
        assert_eq!(budget.available(), 0);
        drop((a, b));
        assert_eq!(budget.available(), 2);
    }

    #[test]
    fn a_stamp_changes_with_the_file_and_trusts_only_settled_times() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "1").unwrap();
        let f = File::open(&path).unwrap();
        let stamp = Stamp::of(&f).unwrap();
        assert!(stamp.linked);
        assert!(!stamp.settled(), "just written");
        assert!(!stamp.unchanged(&f), "not trusted yet");
        let later = SystemTime::now() + SETTLE + Duration::from_millis(10);
        assert!(stamp.unchanged_at(&f, later), "settled and the same");
        // Changed in place (the same size: only the times tell).
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&path, "2").unwrap();
        assert!(
            !stamp.unchanged_at(&f, later + SETTLE),
            "rewritten in place"
        );
        // Renamed over: the kept file has no link left.
        let stamp = Stamp::of(&f).unwrap();
        std::fs::write(dir.path().join("g"), "3").unwrap();
        std::fs::rename(dir.path().join("g"), &path).unwrap();
        assert!(!stamp.unchanged_at(&f, later + SETTLE * 2), "renamed over");
        assert!(!Stamp::of(&f).unwrap().linked);
    }
}
