//! Small helpers shared by the allocation-free parts: turning a raw syscall
//! return value into `Result<_, Errno>` without touching anything but errno.

use nix::errno::Errno;

/// `Ok(ret)` for a non-negative libc/syscall return value, else the errno.
/// Reading errno is a thread-local load: async-signal-safe.
#[inline]
pub(crate) fn check(ret: libc::c_long) -> Result<libc::c_long, Errno> {
    if ret < 0 {
        Err(Errno::last())
    } else {
        Ok(ret)
    }
}

/// [`check`] for functions returning `c_int`.
#[inline]
pub(crate) fn check_int(ret: libc::c_int) -> Result<libc::c_int, Errno> {
    check(libc::c_long::from(ret)).map(|r| r as libc::c_int)
}

/// `prctl(2)` with every argument passed as the `unsigned long` the kernel
/// reads (an untyped `0` would be an `int` in a variadic call, leaving the
/// upper half of the register undefined; some options insist on zeros).
#[inline]
pub(crate) fn prctl(
    option: libc::c_int,
    arg2: libc::c_ulong,
    arg3: libc::c_ulong,
) -> Result<libc::c_int, Errno> {
    // SAFETY: every option this crate uses (PR_CAPBSET_READ/DROP,
    // PR_CAP_AMBIENT, PR_SET/GET_NO_NEW_PRIVS, PR_SET_KEEPCAPS,
    // PR_SET_DUMPABLE) takes integers only and reads
    // or writes none of our memory.
    check_int(unsafe { libc::prctl(option, arg2, arg3, 0 as libc::c_ulong, 0 as libc::c_ulong) })
}
