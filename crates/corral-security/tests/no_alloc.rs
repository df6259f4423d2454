//! `apply_in_child` must not allocate: in the child of a multi-threaded
//! parent, the allocator's lock may be held by a thread that no longer
//! exists. This binary's allocator exits the process with a sentinel code if
//! it is called while the child has forbidden it.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

use common::*;
use corral_profile::plan::SeccompAction;
use corral_security::{prepare, FdAction};

/// Exit code of a child that allocated while forbidden.
const ALLOCATED: i32 = 77;

static FORBIDDEN: AtomicBool = AtomicBool::new(false);

struct Tripwire;

// SAFETY: delegates to the system allocator; the tripwire only adds an
// `_exit` before allocating, which never returns.
unsafe impl GlobalAlloc for Tripwire {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if FORBIDDEN.load(Ordering::Relaxed) {
            // SAFETY: ends the process at once, without allocating.
            unsafe { libc::_exit(ALLOCATED) }
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if FORBIDDEN.load(Ordering::Relaxed) {
            // SAFETY: as above.
            unsafe { libc::_exit(ALLOCATED) }
        }
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Tripwire = Tripwire;

fn forbid_then(f: impl FnOnce() -> i32) -> i32 {
    FORBIDDEN.store(true, Ordering::Relaxed);
    let code = f();
    FORBIDDEN.store(false, Ordering::Relaxed);
    code
}

#[test]
fn apply_in_child_does_not_allocate() {
    for action in [SeccompAction::Errno, SeccompAction::Kill] {
        for fds in [
            FdAction::Keep,
            FdAction::Close { from: 3 },
            FdAction::CloseOnExec { from: 3 },
        ] {
            let mut p = plan(action);
            p.deny = vec!["uname".into()];
            let prepared = prepare(&p, NOBODY, NOGROUP, &[NOGROUP, 100])
                .unwrap()
                .with_fds(fds);
            let outcome = in_child(|| {
                forbid_then(|| match prepared.apply_in_child() {
                    Ok(()) => 0,
                    Err((step, _)) => SETUP_FAILED + i32::from(step.code()),
                })
            });
            assert_eq!(outcome, Outcome::Exited(0), "{action:?} {fds:?}");
        }
    }
}

#[test]
fn a_failing_apply_does_not_allocate_either() {
    let prepared = prepare(&plan(SeccompAction::Errno), NOBODY, NOGROUP, &[NOGROUP]).unwrap();
    let outcome = in_child(|| {
        // Already unprivileged: the first step fails with EPERM.
        if corral_security::identity::become_user(NOBODY, NOGROUP, &[]).is_err() {
            return 1;
        }
        forbid_then(|| match prepared.apply_in_child() {
            Ok(()) => 2,
            Err((step, errno)) => {
                let _wire = step.encode(errno);
                SETUP_FAILED + i32::from(step.code())
            }
        })
    });
    assert_eq!(outcome, Outcome::Exited(SETUP_FAILED + 1));
}

#[test]
fn the_tripwire_works() {
    let outcome = in_child(|| forbid_then(|| std::hint::black_box(vec![1u8; 16]).len() as i32));
    assert_eq!(outcome, Outcome::Exited(ALLOCATED));
}
