//! Entry processes (like CloudLinux EP): at most `limit` concurrent entries
//! into a tenant's sandbox, counted with lock files so that it works across
//! processes and a slot held by a crashed process comes back by itself.
//!
//! The directory holds `slot.0` .. `slot.<limit-1>`; an entry holds one of
//! them with `flock(LOCK_EX|LOCK_NB)`. The kernel drops the lock when the
//! last descriptor of that open file goes away, including on a crash. A
//! refused entry increments `rejections`, a counter updated under its own lock.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::kept::{FdBudget, KeptFile, Stamp};

#[derive(Debug, thiserror::Error)]
pub enum EntryError {
    #[error("all {limit} entry process slots are in use")]
    Full { limit: u32 },
    #[error("entry process limit must be at least 1, got {0}")]
    InvalidLimit(u32),
    #[error("{op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> EntryError + 'a {
    move |source| EntryError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// Where [`EntrySlots::try_acquire`] starts looking: a slot below this.
/// A start anywhere below the limit created a file per slot over time (a
/// limit of 500 left 500 files, each one created by a request): on a state
/// directory on ext4 (/run is no tmpfs without systemd) a creation costs
/// about 330 µs against 5 µs on tmpfs (the inode allocator skips recently
/// deleted inodes), and the gateway's first thousand requests after `corral
/// up` ran at 65-85 % of their later rate. With 32, ten concurrent entries
/// find a free slot at the first try two times in three.
pub const START_WINDOW: u32 = 32;

/// The slots of one tenant.
#[derive(Debug, Clone)]
pub struct EntrySlots {
    dir: PathBuf,
    limit: u32,
}

/// A held slot; dropping it (or the process dying) frees the slot.
#[derive(Debug)]
pub struct EntryGuard {
    file: File,
    slot: u32,
}

impl EntryGuard {
    pub fn slot(&self) -> u32 {
        self.slot
    }
}

impl AsFd for EntryGuard {
    /// The locked descriptor (O_CLOEXEC). A child that should keep the slot
    /// while it runs can get a duplicate of it; the slot is then free only
    /// when both the guard and the child's copy are gone.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

pub(crate) fn open_rw(path: &Path) -> Result<File, EntryError> {
    // std opens with O_CLOEXEC.
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(io_err("opening", path))
}

/// flock(2) on a file, retrying EINTR. The lock is never explicitly
/// released: it goes with the last descriptor of the open file (so a forked
/// copy of a guard cannot free the slot behind its owner's back).
pub(crate) fn flock(file: &File, op: libc::c_int) -> Result<(), io::Error> {
    loop {
        // SAFETY: the descriptor is valid for the borrow of `file`; flock
        // touches no memory.
        if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Tries an exclusive lock without waiting: Ok(false) when someone holds it.
pub(crate) fn try_lock(file: &File, path: &Path) -> Result<bool, EntryError> {
    lock_nb(file).map_err(io_err("locking", path))
}

/// [`try_lock`] without a path: the caller names the file only on error
/// (the gateway's pool, which would otherwise format one per request).
pub(crate) fn lock_nb(file: &File) -> Result<bool, io::Error> {
    match flock(file, libc::LOCK_EX | libc::LOCK_NB) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `slot.<N>`.
fn is_slot(name: &std::ffi::OsStr) -> bool {
    name.to_str()
        .and_then(|n| n.strip_prefix("slot."))
        .is_some_and(|i| i.parse::<u32>().is_ok())
}

/// A slot file found by listing; `None` if removed since (the tenant went
/// down).
fn open_listed(path: &Path) -> Result<Option<File>, EntryError> {
    match File::open(path) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err("opening", path)(e)),
    }
}

/// The rejection counter's value, read under a shared lock from offset 0.
fn read_counter(f: &mut File, path: &Path) -> Result<u64, EntryError> {
    flock(f, libc::LOCK_SH).map_err(io_err("locking", path))?;
    let mut text = String::new();
    f.read_to_string(&mut text)
        .map_err(io_err("reading", path))?;
    if text.trim().is_empty() {
        // Created by a first rejection that has not written yet.
        return Ok(0);
    }
    text.trim().parse().map_err(|_| {
        io_err("parsing", path)(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("not a count: {text:?}"),
        ))
    })
}

/// Every `flock` lock held on the machine, read from /proc/locks in one go:
/// the (device, inode) of each file locked for writing, as a held entry slot
/// is. One read per round stands for a lock probe (a lock and an unlock) of
/// every slot of every tenant ([`EntryWatch::read`]).
#[derive(Debug, Default)]
pub struct HeldLocks(std::collections::HashSet<(u64, u64)>);

/// The inode of the initial pid namespace (`PROC_PID_INIT_INO`).
const INIT_PID_NS: &str = "pid:[4026531836]";

impl HeldLocks {
    /// `None` where /proc/locks does not show every lock: it leaves out
    /// the locks of processes outside the reader's pid namespace unless that
    /// is the initial one.
    pub fn read() -> Option<HeldLocks> {
        let ns = std::fs::read_link("/proc/self/ns/pid").ok()?;
        if ns.as_os_str() != INIT_PID_NS {
            return None;
        }
        Some(HeldLocks::parse(
            &std::fs::read_to_string("/proc/locks").ok()?,
        ))
    }

    /// "1: FLOCK  ADVISORY  WRITE 1117 fe:00:9980132 0 EOF" lines (device
    /// major and minor in hex); a waiter ("3: -> FLOCK ...") holds nothing.
    fn parse(text: &str) -> HeldLocks {
        let held = text
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let [_, "FLOCK", _, "WRITE", _, id, ..] = f.as_slice() else {
                    return None;
                };
                let mut it = id.split(':');
                let major = u32::from_str_radix(it.next()?, 16).ok()?;
                let minor = u32::from_str_radix(it.next()?, 16).ok()?;
                let ino = it.next()?.parse().ok()?;
                Some((libc::makedev(major, minor), ino))
            })
            .collect();
        HeldLocks(held)
    }

    fn holds(&self, dev: u64, ino: u64) -> bool {
        self.0.contains(&(dev, ino))
    }
}

/// [`EntrySlots::observe`]'s readings for a reader that comes back every few
/// seconds (the history collector, `/metrics`): the directory, its slot
/// files and the counter stay open, within an [`FdBudget`]. The directory is
/// listed again only when it changed, the counter read again only when it
/// changed ([`Stamp`]), and each slot is looked up in [`HeldLocks`] or, without
/// them, probed with a lock and an unlock on its kept descriptor: no path
/// lookup, open or close per reading. Whatever
/// cannot be kept (no budget left, no directory yet, an error) is read as an
/// observer reads it.
#[derive(Debug)]
pub struct EntryWatch {
    dir: PathBuf,
    budget: FdBudget,
    kept: Option<Watched>,
}

#[derive(Debug)]
struct Watched {
    dir: KeptFile,
    /// The directory's stamp when it was listed.
    listed: Stamp,
    /// Path, descriptor, device and inode.
    slots: Vec<(PathBuf, KeptFile, u64, u64)>,
    /// The listing had a `rejections` file.
    has_counter: bool,
    /// The counter, its stamp and its value when last read.
    counter: Option<(KeptFile, Stamp, u64)>,
    /// /proc/locks was seen to name a lock taken here on a slot by the
    /// device and inode `fstat` gives (not so on every filesystem: overlayfs
    /// reports another inode): until then the slots are probed.
    locks_agree: bool,
}

impl Watched {
    /// Takes the first free slot's lock, reads /proc/locks and lets go:
    /// whether it names the slot's device and inode. No free slot: not yet.
    fn locks_agree(slots: &[(PathBuf, KeptFile, u64, u64)]) -> Result<bool, EntryError> {
        for (path, f, dev, ino) in slots {
            if !try_lock(f, path)? {
                continue;
            }
            let seen = HeldLocks::read().is_some_and(|l| l.holds(*dev, *ino));
            flock(f, libc::LOCK_UN).map_err(io_err("unlocking", path))?;
            return Ok(seen);
        }
        Ok(false)
    }
}

impl EntryWatch {
    pub fn new(dir: &Path, budget: FdBudget) -> EntryWatch {
        EntryWatch {
            dir: dir.to_path_buf(),
            budget,
            kept: None,
        }
    }

    /// Slots held now and entries refused so far: what
    /// [`EntrySlots::in_use`] and [`EntrySlots::rejections`] of an observer
    /// answer. `held`: the locks held now ([`HeldLocks::read`]); without
    /// them each slot is probed.
    pub fn read(&mut self, held: Option<&HeldLocks>) -> Result<(u32, u64), EntryError> {
        match self.read_kept(held) {
            Ok(Some(r)) => Ok(r),
            Ok(None) | Err(_) => {
                self.kept = None;
                let seen = EntrySlots::observe(&self.dir, 1);
                Ok((seen.in_use()?, seen.rejections()?))
            }
        }
    }

    /// Descriptors kept now.
    pub fn open_files(&self) -> usize {
        self.kept
            .as_ref()
            .map_or(0, |w| 1 + w.slots.len() + usize::from(w.counter.is_some()))
    }

    /// `Ok(None)`: nothing to keep (no directory, no budget).
    fn read_kept(&mut self, locks: Option<&HeldLocks>) -> Result<Option<(u32, u64)>, EntryError> {
        if !self
            .kept
            .as_ref()
            .is_some_and(|w| w.listed.unchanged(&*w.dir))
        {
            self.kept = None;
            self.kept = self.list()?;
        }
        let Some(w) = self.kept.as_mut() else {
            return Ok(None);
        };
        if locks.is_some() && !w.locks_agree {
            w.locks_agree = Watched::locks_agree(&w.slots)?;
        }
        let locks = locks.filter(|_| w.locks_agree);
        let mut held = 0;
        for (path, f, dev, ino) in &w.slots {
            if let Some(locks) = locks {
                held += u32::from(locks.holds(*dev, *ino));
            } else if try_lock(f, path)? {
                flock(f, libc::LOCK_UN).map_err(io_err("unlocking", path))?;
            } else {
                held += 1;
            }
        }
        let rejections = match &w.counter {
            _ if !w.has_counter => 0,
            Some((f, stamp, n)) if stamp.unchanged(&**f) => *n,
            _ => {
                w.counter = None;
                let path = self.dir.join("rejections");
                let mut f = File::open(&path).map_err(io_err("opening", &path))?;
                // Taken before reading: a change while reading changes it.
                let stamp = Stamp::of(&f).map_err(io_err("reading", &path))?;
                let n = read_counter(&mut f, &path)?;
                // The shared lock goes with the descriptor's open file.
                flock(&f, libc::LOCK_UN).map_err(io_err("unlocking", &path))?;
                if let Ok(k) = self.budget.keep(f) {
                    w.counter = Some((k, stamp, n));
                }
                n
            }
        };
        Ok(Some((held, rejections)))
    }

    fn list(&self) -> Result<Option<Watched>, EntryError> {
        let dir = match File::open(&self.dir) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err("opening", &self.dir)(e)),
        };
        // Taken before listing: a change while listing changes it.
        let listed = Stamp::of(&dir).map_err(io_err("reading", &self.dir))?;
        let Ok(dir) = self.budget.keep(dir) else {
            return Ok(None);
        };
        let mut w = Watched {
            dir,
            listed,
            slots: Vec::new(),
            has_counter: false,
            counter: None,
            locks_agree: false,
        };
        for entry in std::fs::read_dir(&self.dir).map_err(io_err("listing", &self.dir))? {
            let entry = entry.map_err(io_err("listing", &self.dir))?;
            let name = entry.file_name();
            if name == "rejections" {
                w.has_counter = true;
            }
            if !is_slot(&name) {
                continue;
            }
            let path = entry.path();
            let Some(file) = open_listed(&path)? else {
                continue;
            };
            let st = Stamp::of(&file).map_err(io_err("reading", &path))?;
            let Ok(file) = self.budget.keep(file) else {
                return Ok(None);
            };
            w.slots.push((path, file, st.dev(), st.ino()));
        }
        Ok(Some(w))
    }
}

impl EntrySlots {
    /// Slots in `dir` (created 0700 if missing) for `limit` concurrent entries.
    pub fn open(dir: &Path, limit: u32) -> Result<EntrySlots, EntryError> {
        if limit == 0 {
            return Err(EntryError::InvalidLimit(limit));
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io_err("creating", dir))?;
        Ok(EntrySlots {
            dir: dir.to_path_buf(),
            limit,
        })
    }

    /// The slots in `dir` for reading their counters ([`Self::in_use`],
    /// [`Self::rejections`]) without creating anything: an observer (the
    /// metrics endpoint) must not recreate the directory of a tenant that
    /// `corral down` is removing. A missing directory reads as 0 and 0.
    pub fn observe(dir: &Path, limit: u32) -> EntrySlots {
        EntrySlots {
            dir: dir.to_path_buf(),
            limit,
        }
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    pub(crate) fn slot_path(&self, i: u32) -> PathBuf {
        self.dir.join(format!("slot.{i}"))
    }

    /// Takes a free slot, or fails with [`EntryError::Full`] (and counts the
    /// rejection). The search starts at a pid- and time-based slot among the
    /// first [`START_WINDOW`] so that concurrent entries rarely try the same
    /// files, and goes up from there: the slot files that exist are about
    /// the window plus the peak concurrency, not the limit.
    pub fn try_acquire(&self) -> Result<EntryGuard, EntryError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let start = (std::process::id() ^ nanos) % self.limit.min(START_WINDOW);
        // Two passes: a slot briefly locked by `in_use`'s probe or by an
        // entry that is leaving is not a reason to refuse.
        for _pass in 0..2 {
            for k in 0..self.limit {
                let slot = (start + k) % self.limit;
                let path = self.slot_path(slot);
                let file = open_rw(&path)?;
                if try_lock(&file, &path)? {
                    return Ok(EntryGuard { file, slot });
                }
            }
        }
        self.count_rejection()?;
        Err(EntryError::Full { limit: self.limit })
    }

    fn counter_path(&self) -> PathBuf {
        self.dir.join("rejections")
    }

    pub(crate) fn count_rejection(&self) -> Result<(), EntryError> {
        let path = self.counter_path();
        let mut f = open_rw(&path)?;
        // Held for a read and a write only, so waiting is short.
        flock(&f, libc::LOCK_EX).map_err(io_err("locking", &path))?;
        let mut text = String::new();
        f.read_to_string(&mut text)
            .map_err(io_err("reading", &path))?;
        let n: u64 = text.trim().parse().unwrap_or(0);
        f.seek(SeekFrom::Start(0))
            .map_err(io_err("writing", &path))?;
        f.set_len(0).map_err(io_err("writing", &path))?;
        f.write_all(format!("{}\n", n + 1).as_bytes())
            .map_err(io_err("writing", &path))?;
        Ok(())
    }

    /// Entries refused since the directory was created.
    pub fn rejections(&self) -> Result<u64, EntryError> {
        let path = self.counter_path();
        let mut f = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(io_err("opening", &path)(e)),
        };
        read_counter(&mut f, &path)
    }

    /// Slots held right now, probed with a non-blocking lock on each
    /// existing slot file (including ones beyond a lowered limit).
    pub fn in_use(&self) -> Result<u32, EntryError> {
        let mut held = 0;
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            // Only an observer's slots ([`Self::observe`]) can lack the directory.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(io_err("listing", &self.dir)(e)),
        };
        for entry in entries {
            let entry = entry.map_err(io_err("listing", &self.dir))?;
            if !is_slot(&entry.file_name()) {
                continue;
            }
            let path = entry.path();
            let Some(file) = open_listed(&path)? else {
                continue;
            };
            if !try_lock(&file, &path)? {
                held += 1;
            }
        }
        Ok(held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_observer_creates_nothing_and_reads_a_missing_dir_as_zero() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("ep");
        let seen = EntrySlots::observe(&dir, 2);
        assert_eq!(seen.in_use().unwrap(), 0);
        assert_eq!(seen.rejections().unwrap(), 0);
        assert!(!dir.exists(), "observing must not create the directory");
        let slots = EntrySlots::open(&dir, 2).unwrap();
        let held = slots.try_acquire().unwrap();
        let _kept = slots.try_acquire().unwrap();
        assert!(slots.try_acquire().is_err());
        drop(held);
        assert_eq!(seen.in_use().unwrap(), 1);
        assert_eq!(seen.rejections().unwrap(), 1);
    }

    /// Entries one after another, and a burst of concurrent ones under a
    /// high limit, leave about the start window plus the peak concurrency
    /// in slot files, not one per slot of the limit.
    #[test]
    fn slot_files_follow_the_concurrency_not_the_limit() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("ep");
        let slots = EntrySlots::open(&dir, 500).unwrap();
        let files = || std::fs::read_dir(&dir).unwrap().count() as u32;
        for _ in 0..300 {
            drop(slots.try_acquire().unwrap());
        }
        assert!(files() <= START_WINDOW, "{} files", files());
        let held: Vec<_> = (0..40).map(|_| slots.try_acquire().unwrap()).collect();
        let mut got: Vec<u32> = held.iter().map(|g| g.slot()).collect();
        got.sort_unstable();
        got.dedup();
        assert_eq!(got.len(), 40, "every held slot is another one");
        assert!(files() <= START_WINDOW + 40, "{} files", files());
        assert_eq!(slots.in_use().unwrap(), 40);
        // A small limit still uses every slot.
        let small = EntrySlots::open(&t.path().join("small"), 3).unwrap();
        let all: Vec<_> = (0..3).map(|_| small.try_acquire().unwrap()).collect();
        assert!(small.try_acquire().is_err());
        drop(all);
    }

    /// A watch answers what an observer answers, before and after its
    /// kept listing and counter settle, and within its budget or beyond it.
    #[test]
    fn a_watch_reads_what_an_observer_reads() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("ep");
        let budget = FdBudget::new(10);
        let mut watch = EntryWatch::new(&dir, budget.clone());
        assert_eq!(watch.read(None).unwrap(), (0, 0), "no directory yet");
        assert_eq!(watch.open_files(), 0);
        let slots = EntrySlots::open(&dir, 2).unwrap();
        let a = slots.try_acquire().unwrap();
        assert_eq!(watch.read(None).unwrap(), (1, 0));
        let b = slots.try_acquire().unwrap();
        assert!(slots.try_acquire().is_err());
        assert_eq!(watch.read(None).unwrap(), (2, 1));
        assert_eq!(watch.open_files(), 4, "directory, 2 slots, counter");
        assert_eq!(budget.available(), 6);
        drop(a);
        assert_eq!(watch.read(None).unwrap(), (1, 1));
        let a = slots.try_acquire().unwrap();
        assert_eq!(watch.read(None).unwrap(), (2, 1), "the probe frees nothing");
        drop(a);
        // Settled: the kept listing and counter are trusted, and still
        // follow a rejection (written in place) and a slot freed.
        std::thread::sleep(crate::kept::SETTLE + std::time::Duration::from_millis(100));
        assert_eq!(watch.read(None).unwrap(), (1, 1));
        let a = slots.try_acquire().unwrap();
        assert!(slots.try_acquire().is_err());
        assert_eq!(watch.read(None).unwrap(), (2, 2));
        drop((a, b));
        assert_eq!(watch.read(None).unwrap(), (0, 2));
        assert_eq!(
            slots.try_acquire().map(|g| g.slot() < 2).ok(),
            Some(true),
            "a probed slot can be taken"
        );
        // Beyond the budget: read as an observer reads, nothing kept.
        let small = FdBudget::new(2);
        let mut partial = EntryWatch::new(&dir, small.clone());
        let _held = slots.try_acquire().unwrap();
        assert_eq!(partial.read(None).unwrap(), (1, 2));
        assert_eq!((partial.open_files(), small.available()), (0, 2));
        // The directory removed (the tenant went down): zero, nothing kept.
        drop(slots);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(watch.read(None).unwrap(), (0, 0));
        assert_eq!(watch.open_files(), 0);
        assert_eq!(budget.available(), 10);
    }

    /// /proc/locks answers what probing each slot answers.
    #[test]
    fn held_locks_count_the_slots_probing_counts() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("ep");
        let slots = EntrySlots::open(&dir, 3).unwrap();
        let a = slots.try_acquire().unwrap();
        let _b = slots.try_acquire().unwrap();
        let mut watch = EntryWatch::new(&dir, FdBudget::new(10));
        assert_eq!(watch.read(None).unwrap(), (2, 0));
        // This project's test machines run in the initial pid namespace.
        let locks = HeldLocks::read().expect("/proc/locks in the initial pid namespace");
        assert_eq!(watch.read(Some(&locks)).unwrap(), (2, 0));
        assert!(
            !watch.kept.as_ref().unwrap().locks_agree,
            "every slot held: /proc/locks is not checked yet, the slots are probed"
        );
        drop(a);
        let locks = HeldLocks::read().unwrap();
        assert_eq!(watch.read(Some(&locks)).unwrap(), (1, 0));
        assert!(
            watch.kept.as_ref().unwrap().locks_agree,
            "/proc/locks names the slot by the device and inode fstat gives"
        );
        let _a = slots.try_acquire().unwrap();
        let locks = HeldLocks::read().unwrap();
        assert_eq!(watch.read(Some(&locks)).unwrap(), (2, 0));
        assert_eq!(watch.read(None).unwrap(), (2, 0), "probing agrees");
    }

    #[test]
    fn proc_locks_lines_are_parsed() {
        let text = "1: POSIX  ADVISORY  WRITE 17848 fe:00:24 0 EOF\n\
                    2: FLOCK  ADVISORY  WRITE 11195 00:2c:9805825 0 EOF\n\
                    3: FLOCK  ADVISORY  READ 1117 fe:00:77 0 EOF\n\
                    4: FLOCK  ADVISORY  WRITE 1117 fe:01:9980132 0 EOF\n\
                    4: -> FLOCK  ADVISORY  WRITE 10279 fe:00:5 0 EOF\n";
        let held = HeldLocks::parse(text);
        assert!(held.holds(libc::makedev(0, 0x2c), 9805825));
        assert!(held.holds(libc::makedev(0xfe, 1), 9980132));
        assert!(!held.holds(libc::makedev(0xfe, 0), 24), "POSIX");
        assert!(!held.holds(libc::makedev(0xfe, 0), 77), "shared");
        assert!(!held.holds(libc::makedev(0xfe, 0), 5), "a waiter");
        assert_eq!(held.0.len(), 2);
    }

    #[test]
    fn slots_fill_refuse_and_free() {
        let t = tempfile::tempdir().unwrap();
        let slots = EntrySlots::open(&t.path().join("ep"), 3).unwrap();
        let a = slots.try_acquire().unwrap();
        let b = slots.try_acquire().unwrap();
        let c = slots.try_acquire().unwrap();
        let mut taken = [a.slot(), b.slot(), c.slot()];
        taken.sort();
        assert_eq!(taken, [0, 1, 2]);
        assert_eq!(slots.in_use().unwrap(), 3);
        assert_eq!(slots.rejections().unwrap(), 0);
        match slots.try_acquire() {
            Err(EntryError::Full { limit: 3 }) => {}
            other => panic!("expected Full, got {other:?}"),
        }
        assert_eq!(slots.rejections().unwrap(), 1);
        assert!(slots.try_acquire().is_err());
        assert_eq!(slots.rejections().unwrap(), 2);
        let freed = b.slot();
        drop(b);
        assert_eq!(slots.in_use().unwrap(), 2);
        let again = slots.try_acquire().unwrap();
        assert_eq!(again.slot(), freed);
        assert_eq!(
            slots.in_use().unwrap(),
            3,
            "the probe itself must not free or take slots"
        );
        drop((a, c, again));
        assert_eq!(slots.in_use().unwrap(), 0);
    }

    #[test]
    fn zero_limit_is_refused_and_guard_fd_is_cloexec() {
        let t = tempfile::tempdir().unwrap();
        assert!(matches!(
            EntrySlots::open(t.path(), 0),
            Err(EntryError::InvalidLimit(0))
        ));
        let g = EntrySlots::open(t.path(), 1)
            .unwrap()
            .try_acquire()
            .unwrap();
        let flags =
            nix::fcntl::fcntl(g.as_fd().as_raw_fd(), nix::fcntl::FcntlArg::F_GETFD).unwrap();
        assert_ne!(flags & libc::FD_CLOEXEC, 0);
    }
}
