//! Closing, or marking close-on-exec, every file descriptor from some number
//! up, so a tenant process inherits nothing of corral's. Allocation-free.

use nix::errno::Errno;

use crate::sys::check;

/// Highest descriptor count the fallback loops walk: the kernel's default
/// `fs.nr_open`. A descriptor can only exceed the current RLIMIT_NOFILE if
/// the limit was lowered after it was opened, so the loops go up to the larger
/// of the soft and hard limits, but not past this.
const FALLBACK_CEILING: u64 = 1 << 20;

/// Close every descriptor `>= first`.
///
/// One `close_range(first, ~0U, 0)`; on kernels without it (before 5.9:
/// ENOSYS) or where an outer seccomp policy refuses it (EPERM), close them
/// one by one up to the descriptor limit.
pub fn close_fds_from(first: i32) -> Result<(), Errno> {
    match close_range(first, 0) {
        Err(Errno::ENOSYS | Errno::EPERM) => close_by_loop(first),
        other => other,
    }
}

/// Mark every descriptor `>= first` close-on-exec: they stay usable until
/// exec (an error pipe, say) and vanish then.
///
/// `close_range(first, ~0U, CLOSE_RANGE_CLOEXEC)`; kernels 5.9–5.10 know
/// close_range but not the flag (EINVAL), older ones neither (ENOSYS): then
/// `fcntl(F_SETFD)` one by one.
pub fn cloexec_fds_from(first: i32) -> Result<(), Errno> {
    match close_range(first, libc::CLOSE_RANGE_CLOEXEC) {
        Err(Errno::ENOSYS | Errno::EINVAL | Errno::EPERM) => cloexec_by_loop(first),
        other => other,
    }
}

fn close_range(first: i32, flags: libc::c_uint) -> Result<(), Errno> {
    let first = libc::c_uint::try_from(first).map_err(|_| Errno::EBADF)?;
    // SAFETY: integer arguments only; closing descriptors is what the caller
    // asked for (no Rust object in the child is used after this).
    let ret = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            libc::c_ulong::from(first),
            libc::c_ulong::from(libc::c_uint::MAX),
            libc::c_ulong::from(flags),
        )
    };
    check(ret).map(drop)
}

/// The fallback for [`close_fds_from`]: `close()` each descriptor, EBADF
/// (not open) ignored.
pub(crate) fn close_by_loop(first: i32) -> Result<(), Errno> {
    for fd in first.max(0)..fd_ceiling()? {
        // SAFETY: closing a descriptor number; EBADF for unused ones is fine.
        unsafe { libc::close(fd) };
    }
    Ok(())
}

/// The fallback for [`cloexec_fds_from`]: `fcntl(F_SETFD, FD_CLOEXEC)` on
/// each descriptor (FD_CLOEXEC is the only descriptor flag), EBADF ignored.
pub(crate) fn cloexec_by_loop(first: i32) -> Result<(), Errno> {
    for fd in first.max(0)..fd_ceiling()? {
        // SAFETY: integer arguments only.
        let ret = unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        if ret < 0 && Errno::last() != Errno::EBADF {
            return Err(Errno::last());
        }
    }
    Ok(())
}

/// One past the highest descriptor that can be open (see [`FALLBACK_CEILING`]).
fn fd_ceiling() -> Result<i32, Errno> {
    let mut limit = libc::rlimit64 {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: pid 0 is this process; no new limit (null); `limit` is a live,
    // writable rlimit64 on our stack.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_prlimit64,
            0 as libc::c_long,
            libc::RLIMIT_NOFILE as libc::c_long,
            std::ptr::null::<libc::rlimit64>(),
            &mut limit as *mut libc::rlimit64,
        )
    };
    check(ret)?;
    // Both values are u64 (RLIM_INFINITY is u64::MAX); the ceiling fits i32.
    Ok(limit.rlim_cur.max(limit.rlim_max).min(FALLBACK_CEILING) as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_first_is_rejected_by_the_fast_path() {
        assert_eq!(close_range(-1, 0), Err(Errno::EBADF));
    }

    #[test]
    fn ceiling_is_at_least_the_soft_limit() {
        let ceiling = fd_ceiling().unwrap();
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: a live, writable rlimit.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
        assert!(ceiling as u64 >= lim.rlim_cur.min(FALLBACK_CEILING));
        assert!(ceiling as u64 <= FALLBACK_CEILING);
    }

    /// Fork; run `f` in the child; its return value is the exit code. The
    /// parent polls for up to 20 s, then kills the child and fails.
    fn in_child(f: impl FnOnce() -> i32) -> i32 {
        // SAFETY: the child runs `f` (raw syscalls only) and `_exit`s.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // SAFETY: leaves the child without returning into the harness.
            unsafe { libc::_exit(f()) }
        }
        for _ in 0..10_000 {
            let mut status = 0;
            // SAFETY: `status` is a live int; WNOHANG never blocks.
            if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == pid {
                assert!(libc::WIFEXITED(status), "child status {status:#x}");
                return libc::WEXITSTATUS(status);
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        // SAFETY: killing and reaping our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        panic!("child timed out");
    }

    /// Duplicate stdout onto 5 and 700 without close-on-exec.
    fn open_two() -> bool {
        // SAFETY: dup2 onto free numbers in a child we own.
        unsafe { libc::dup2(1, 5) == 5 && libc::dup2(1, 700) == 700 }
    }

    fn fd_flags(fd: i32) -> i32 {
        // SAFETY: F_GETFD only queries the descriptor number.
        unsafe { libc::fcntl(fd, libc::F_GETFD) }
    }

    #[test]
    fn close_fallback_closes_everything_from_first() {
        let code = in_child(|| {
            if !open_two() || close_by_loop(6).is_err() {
                return 10;
            }
            // 5 stays (below first), 700 is gone, stdio untouched.
            match (fd_flags(5) >= 0, fd_flags(700) < 0, fd_flags(1) >= 0) {
                (true, true, true) => 0,
                _ => 1,
            }
        });
        assert_eq!(code, 0);
    }

    #[test]
    fn cloexec_fallback_marks_everything_from_first() {
        let code = in_child(|| {
            if !open_two() || cloexec_by_loop(6).is_err() {
                return 10;
            }
            match (fd_flags(5), fd_flags(700)) {
                (0, libc::FD_CLOEXEC) => 0,
                _ => 1,
            }
        });
        assert_eq!(code, 0);
    }
}
