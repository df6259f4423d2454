//! Shared harness: run a probe in a forked child and report how it ended.
//!
//! The test binary is multi-threaded (the test harness), exactly the
//! situation corral's callers are in, so a child only does what the crate
//! promises is safe after fork: raw system calls and the *apply* half.

#![allow(dead_code)] // each test binary uses its own subset

use std::sync::Mutex;
use std::time::{Duration, Instant};

use corral_profile::plan::{SeccompAction, SeccompPlan};
use corral_security::{caps, Filter, Prepared};

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Exited(i32),
    Signaled(i32),
}

/// Exit code base when `apply_in_child` fails: 200 + the step's code.
pub const SETUP_FAILED: i32 = 200;
/// Exit code when the child closure panicked.
pub const CHILD_PANICKED: i32 = 199;

pub const NOBODY: u32 = 65534;
pub const NOGROUP: u32 = 65534;

/// One fork at a time per test binary: keeps timing sane and children few.
static FORK_LOCK: Mutex<()> = Mutex::new(());

pub fn require_root() {
    assert_eq!(
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() },
        0,
        "these tests fork children that change ids: run them as root"
    );
}

/// Fork; the child runs `child` and `_exit`s with what it returns. The parent
/// waits up to 20 s, then kills the child and fails the test.
pub fn in_child(child: impl FnOnce() -> i32) -> Outcome {
    in_child_with(child, |_| ())
}

/// Like [`in_child`], but `parent` runs with the child's pid before the wait
/// (the child may block until the parent is done looking at it).
pub fn in_child_with<T>(
    child: impl FnOnce() -> i32,
    parent: impl FnOnce(libc::pid_t) -> T,
) -> Outcome
where
    T: Sized,
{
    require_root();
    let _guard = FORK_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: the child only runs `child` (raw syscalls and apply-half code)
    // and then `_exit`s; it never returns into the test harness.
    match unsafe { libc::fork() } {
        -1 => panic!("fork: {}", std::io::Error::last_os_error()),
        0 => {
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child))
                .unwrap_or(CHILD_PANICKED);
            // SAFETY: ends the child without running the parent's atexit
            // handlers or destructors.
            unsafe { libc::_exit(code) }
        }
        pid => {
            parent(pid);
            wait(pid, Duration::from_secs(20))
        }
    }
}

/// Wait for `pid` with a deadline; on timeout kill it and panic.
pub fn wait(pid: libc::pid_t, timeout: Duration) -> Outcome {
    let deadline = Instant::now() + timeout;
    loop {
        let mut status = 0;
        // SAFETY: `status` is a live int; WNOHANG never blocks.
        let ret = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if ret == pid {
            if libc::WIFEXITED(status) {
                return Outcome::Exited(libc::WEXITSTATUS(status));
            }
            if libc::WIFSIGNALED(status) {
                return Outcome::Signaled(libc::WTERMSIG(status));
            }
            continue; // stopped/continued: keep waiting
        }
        assert!(
            ret == 0,
            "waitpid({pid}): {}",
            std::io::Error::last_os_error()
        );
        if Instant::now() > deadline {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            // SAFETY: reaping it; a null status pointer is allowed.
            unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
            panic!("child {pid} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// errno of the last failed call, as an exit code (0 if `ret` is not -1).
pub fn errno_of(ret: libc::c_long) -> i32 {
    if ret == -1 {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(255)
    } else {
        0
    }
}

/// A raw system call, returning its errno (0 on success).
pub fn raw(nr: libc::c_long, a: [u64; 6]) -> i32 {
    // SAFETY: callers pass arguments the kernel validates (garbage pointers
    // get EFAULT); no Rust memory is handed out.
    errno_of(unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) })
}

/// Arguments that every denied system call rejects harmlessly if it ever got
/// through (bad pointers → EFAULT, bad flags/commands → EINVAL, fd -1 → EBADF).
pub const POISON: [u64; 6] = [u64::MAX; 6];

/// `clone(flags | SIGCHLD)` with fork semantics. A new process `_exit`s at
/// once; the caller gets 0 after reaping it, or the errno.
pub fn raw_clone(flags: u64) -> i32 {
    // SAFETY: stack 0 means fork-like (the new process continues on a copy
    // of this stack); it only calls _exit.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags | libc::SIGCHLD as u64,
            0u64,
            0u64,
            0u64,
            0u64,
        )
    };
    if ret == 0 {
        // SAFETY: leaving the new process at once.
        unsafe { libc::_exit(0) }
    }
    if ret < 0 {
        return errno_of(ret);
    }
    let mut status = 0;
    // SAFETY: reaping our own child into a live int.
    unsafe { libc::waitpid(ret as libc::pid_t, &mut status, 0) };
    0
}

/// Detach from the test's controlling terminal, so even vhangup is harmless.
pub fn setsid() {
    // SAFETY: no arguments; a forked child is never a group leader.
    unsafe { libc::setsid() };
}

pub fn plan(action: SeccompAction) -> SeccompPlan {
    SeccompPlan {
        action,
        ..SeccompPlan::default_policy()
    }
}

pub fn filter(plan: &SeccompPlan) -> Filter {
    corral_security::seccomp::build(plan)
        .unwrap()
        .expect("enabled plan builds a filter")
}

/// Child as root with only no_new_privs and `filter` applied (no id or cap
/// changes, so a syscall the filter lets through really runs as root), then
/// `probe`. With `None`, the unfiltered control.
pub fn probe_as_root(filter: Option<&Filter>, probe: impl FnOnce() -> i32) -> Outcome {
    in_child(|| {
        setsid();
        if let Some(f) = filter {
            if caps::set_no_new_privs().is_err() || f.apply().is_err() {
                return SETUP_FAILED;
            }
        }
        probe()
    })
}

/// Child that applies the whole prepared sequence, then `probe`.
pub fn probe_after_sequence(prepared: &Prepared, probe: impl FnOnce() -> i32) -> Outcome {
    in_child(|| {
        setsid();
        if let Err((step, _)) = prepared.apply_in_child() {
            return SETUP_FAILED + i32::from(step.code());
        }
        probe()
    })
}

pub fn eperm() -> Outcome {
    Outcome::Exited(libc::EPERM)
}

pub fn sigsys() -> Outcome {
    Outcome::Signaled(libc::SIGSYS)
}
