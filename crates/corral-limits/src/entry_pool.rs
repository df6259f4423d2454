//! Entry slots for a process that enters a tenant's sandbox many times a
//! second and lives on (the FastCGI gateway): its slot files stay open
//! between its entries.
//!
//! [`EntrySlots::try_acquire`] opens slot files until one locks and closes
//! the others: right for a command that enters once. The gateway entered
//! that way for every request, and under load (a hundred requests in
//! flight, most of them its own) a request tried about nine slots that were
//! held, eight of them by the gateway itself: 26 of its 86 system calls per
//! request were `openat`, `flock` and `close` of slot files. A [`SlotPool`]
//! knows which slots its own entries hold and skips them without a system
//! call, keeps the descriptors it opened (within an [`FdBudget`]), and
//! frees a slot with an explicit unlock instead of a close, so an entry
//! costs one `flock` on a kept descriptor.
//!
//! The slots stay shared with every other way in (`corral run`, SSH, cron):
//! a slot another process holds fails the lock and is passed over, as
//! before; the limit counts every entry wherever it comes from.

use std::fs::File;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::entry::{flock, lock_nb, open_rw, EntryError, EntrySlots};
use crate::kept::{FdBudget, KeptFile};

/// One tenant's slots, for one long-lived process (see the module docs).
#[derive(Debug)]
pub struct SlotPool {
    slots: EntrySlots,
    budget: FdBudget,
    state: Arc<Mutex<PoolState>>,
}

/// Indexed by slot; grown up to the highest slot touched, not the limit.
#[derive(Debug, Default)]
struct PoolState {
    /// Held now by one of this pool's entries.
    ours: Vec<bool>,
    /// Open, unlocked by us, kept for the next search (another process may
    /// hold its lock).
    idle: Vec<Option<SlotFile>>,
}

impl PoolState {
    fn ours(&self, slot: usize) -> bool {
        self.ours.get(slot).copied().unwrap_or(false)
    }

    fn set_ours(&mut self, slot: usize, held: bool) {
        if self.ours.len() <= slot {
            self.ours.resize(slot + 1, false);
        }
        self.ours[slot] = held;
    }

    fn take_idle(&mut self, slot: usize) -> Option<SlotFile> {
        self.idle.get_mut(slot).and_then(Option::take)
    }

    fn put_idle(&mut self, slot: usize, file: SlotFile) {
        if self.idle.len() <= slot {
            self.idle.resize_with(slot + 1, || None);
        }
        self.idle[slot] = Some(file);
    }
}

/// A slot file's descriptor: counted in the budget (kept between entries)
/// or not (closed after its entry, as [`EntrySlots::try_acquire`] does).
#[derive(Debug)]
enum SlotFile {
    Kept(KeptFile),
    Once(File),
}

impl std::ops::Deref for SlotFile {
    type Target = File;
    fn deref(&self) -> &File {
        match self {
            SlotFile::Kept(k) => k,
            SlotFile::Once(f) => f,
        }
    }
}

/// A held slot of a [`SlotPool`]; dropping it frees the slot.
///
/// Unlike [`crate::EntryGuard`] it lends out no descriptor: the slot is
/// freed with an explicit unlock, which would also free it for any copy of
/// the descriptor. Its file is opened `O_CLOEXEC` and never passed on, so
/// there is none (a fork's copy lives only until the child's exec, and a
/// copy being closed frees nothing).
#[derive(Debug)]
pub struct PooledEntry {
    file: Option<SlotFile>,
    slot: u32,
    state: Arc<Mutex<PoolState>>,
}

impl PooledEntry {
    pub fn slot(&self) -> u32 {
        self.slot
    }
}

fn lock(state: &Mutex<PoolState>) -> MutexGuard<'_, PoolState> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

impl SlotPool {
    /// `budget` bounds the descriptors kept by every pool that shares it;
    /// beyond it a slot file is opened and closed per entry.
    pub fn new(slots: EntrySlots, budget: FdBudget) -> SlotPool {
        SlotPool {
            slots,
            budget,
            state: Arc::default(),
        }
    }

    /// Descriptors kept open now (idle and held).
    pub fn open_files(&self) -> usize {
        let st = lock(&self.state);
        st.idle.iter().flatten().count() + st.ours.iter().filter(|h| **h).count()
    }

    /// Takes the lowest free slot, or fails with [`EntryError::Full`] (and
    /// counts the rejection, as [`EntrySlots::try_acquire`] does). Slots
    /// this pool holds are skipped without a system call; the others are
    /// tried with the kept descriptor, or a new one. Lowest first: the slot
    /// files that exist follow the peak concurrency.
    pub fn try_acquire(&self) -> Result<PooledEntry, EntryError> {
        let limit = self.slots.limit();
        {
            let mut st = lock(&self.state);
            // Two passes, as EntrySlots::try_acquire: a slot briefly locked
            // by an observer's probe is not a reason to refuse.
            for _pass in 0..2 {
                for slot in 0..limit {
                    let i = slot as usize;
                    if st.ours(i) {
                        continue;
                    }
                    let file = match st.take_idle(i) {
                        Some(f) => f,
                        None => {
                            let f = open_rw(&self.slots.slot_path(slot))?;
                            match self.budget.keep(f) {
                                Ok(k) => SlotFile::Kept(k),
                                Err(f) => SlotFile::Once(f),
                            }
                        }
                    };
                    let locked = lock_nb(&file).map_err(|source| EntryError::Io {
                        op: "locking",
                        path: self.slots.slot_path(slot),
                        source,
                    })?;
                    if locked {
                        st.set_ours(i, true);
                        return Ok(PooledEntry {
                            file: Some(file),
                            slot,
                            state: self.state.clone(),
                        });
                    }
                    // Held by another process: the descriptor serves the
                    // next search.
                    if let SlotFile::Kept(_) = file {
                        st.put_idle(i, file);
                    }
                }
            }
        }
        self.slots.count_rejection()?;
        Err(EntryError::Full { limit })
    }
}

impl Drop for PooledEntry {
    fn drop(&mut self) {
        let Some(file) = self.file.take() else {
            return;
        };
        let i = self.slot as usize;
        let mut st = lock(&self.state);
        st.set_ours(i, false);
        match file {
            // Unlocked and kept. Should the unlock fail, the close below
            // frees the slot as a guard's does.
            SlotFile::Kept(_) if flock(&file, libc::LOCK_UN).is_ok() => st.put_idle(i, file),
            _ => drop(file),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(limit: u32, budget: usize) -> (tempfile::TempDir, SlotPool) {
        let tmp = tempfile::tempdir().unwrap();
        let slots = EntrySlots::open(&tmp.path().join("entry"), limit).unwrap();
        (tmp, SlotPool::new(slots, FdBudget::new(budget)))
    }

    #[test]
    fn a_pool_takes_the_lowest_free_slots_and_refuses_beyond_the_limit() {
        let (_tmp, p) = pool(3, 100);
        let held: Vec<_> = (0..3).map(|_| p.try_acquire().unwrap()).collect();
        assert_eq!(held.iter().map(|e| e.slot()).collect::<Vec<_>>(), [0, 1, 2]);
        assert!(matches!(
            p.try_acquire(),
            Err(EntryError::Full { limit: 3 })
        ));
        assert_eq!(p.slots.rejections().unwrap(), 1);
        drop(held);
        assert_eq!(p.try_acquire().unwrap().slot(), 0);
    }

    #[test]
    fn a_freed_slot_is_free_for_other_processes_and_its_descriptor_stays_open() {
        let (_tmp, p) = pool(2, 100);
        let e = p.try_acquire().unwrap();
        // Another entry (its own open file, as another process has) sees
        // slot 0 held and takes slot 1.
        let other = p.slots.try_acquire().unwrap();
        assert_eq!(other.slot(), 1);
        assert_eq!(p.slots.in_use().unwrap(), 2);
        drop(e);
        assert_eq!(p.slots.in_use().unwrap(), 1);
        assert_eq!(p.open_files(), 1, "slot 0's descriptor is kept, unlocked");
        // The pool passes over the slot the other entry holds.
        let again = p.try_acquire().unwrap();
        assert_eq!(again.slot(), 0);
        assert!(matches!(p.try_acquire(), Err(EntryError::Full { .. })));
        drop(other);
        assert_eq!(p.try_acquire().unwrap().slot(), 1);
    }

    #[test]
    fn without_budget_the_pool_still_counts_and_keeps_nothing() {
        let (_tmp, p) = pool(2, 0);
        let a = p.try_acquire().unwrap();
        let b = p.try_acquire().unwrap();
        assert_eq!((a.slot(), b.slot()), (0, 1));
        assert!(p.try_acquire().is_err());
        drop((a, b));
        assert_eq!(p.open_files(), 0);
        assert_eq!(p.slots.in_use().unwrap(), 0);
    }
}
