//! The system calls rustix has no wrapper for, made directly (x86-64:
//! number in rax, arguments in rdi, rsi, rdx, r10; the kernel clobbers rcx
//! and r11). A negative return is -errno.

use rustix::io::Errno;

/// # Safety
/// The call must be one whose arguments are plain integers or pointers
/// valid for what the kernel reads or writes through them.
unsafe fn syscall4(nr: usize, a: usize, b: usize, c: usize, d: usize) -> Result<usize, Errno> {
    let ret: isize;
    // SAFETY: the caller's; `syscall` touches no memory of ours but
    // through the pointer arguments.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") a,
            in("rsi") b,
            in("rdx") c,
            in("r10") d,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    if (-4095..0).contains(&ret) {
        Err(Errno::from_raw_os_error(-ret as i32))
    } else {
        Ok(ret as usize)
    }
}

const SYS_RT_SIGACTION: usize = 13;
const SYS_RT_SIGPROCMASK: usize = 14;
const SYS_FCNTL: usize = 72;
const F_GETFD: usize = 1;
const SIGPIPE: usize = 13;
const SIG_IGN: usize = 1;
const SYS_IOPRIO_GET: usize = 252;
const SYS_SIGNALFD4: usize = 289;
const SYS_CLOSE_RANGE: usize = 436;

const SIG_BLOCK: usize = 0;
const SIG_SETMASK: usize = 2;
const SFD_CLOEXEC: usize = 0o2000000;
const SFD_NONBLOCK: usize = 0o4000;

/// A signal set as the kernel takes it (64 bits on x86-64).
pub type SigSet = u64;

pub fn sigset(signals: &[i32]) -> SigSet {
    signals.iter().fold(0, |set, &s| set | 1 << (s - 1))
}

/// Block `set`; returns the mask before.
pub fn block(set: SigSet) -> Result<SigSet, Errno> {
    let mut old: SigSet = 0;
    // SAFETY: rt_sigprocmask reads and writes 8-byte sets at valid pointers.
    unsafe {
        syscall4(
            SYS_RT_SIGPROCMASK,
            SIG_BLOCK,
            &set as *const SigSet as usize,
            &mut old as *mut SigSet as usize,
            8,
        )?;
    }
    Ok(old)
}

/// Set the signal mask back to `set`.
pub fn set_mask(set: SigSet) {
    // SAFETY: as in `block`, no old set asked for.
    let _ = unsafe {
        syscall4(
            SYS_RT_SIGPROCMASK,
            SIG_SETMASK,
            &set as *const SigSet as usize,
            0,
            8,
        )
    };
}

/// A non-blocking, close-on-exec signalfd for `set`.
pub fn signalfd(set: SigSet) -> Result<rustix::fd::OwnedFd, Errno> {
    // SAFETY: signalfd4 reads an 8-byte set; a new fd comes back.
    let fd = unsafe {
        syscall4(
            SYS_SIGNALFD4,
            usize::MAX, // -1: a new signalfd
            &set as *const SigSet as usize,
            8,
            SFD_CLOEXEC | SFD_NONBLOCK,
        )?
    };
    // SAFETY: a descriptor the kernel just made for us alone.
    Ok(unsafe { <rustix::fd::OwnedFd as rustix::fd::FromRawFd>::from_raw_fd(fd as i32) })
}

/// This process's I/O priority (ioprio_get(IOPRIO_WHO_PROCESS, 0)).
pub fn ioprio() -> Result<u16, Errno> {
    // SAFETY: integers only.
    let p = unsafe { syscall4(SYS_IOPRIO_GET, 1, 0, 0, 0)? };
    u16::try_from(p).map_err(|_| Errno::RANGE)
}

/// close_range(first, ~0U, 0): every descriptor from `first` on.
pub fn close_from(first: u32) -> Result<(), Errno> {
    // SAFETY: integers only; nothing of ours is open from `first` on.
    unsafe { syscall4(SYS_CLOSE_RANGE, first as usize, u32::MAX as usize, 0, 0)? };
    Ok(())
}

const SYS_EXECVE: usize = 59;
const SYS_EXIT_GROUP: usize = 231;

/// exit_group(code): the end of the program.
pub fn exit(code: i32) -> ! {
    // SAFETY: integers only; the call does not return.
    let _ = unsafe { syscall4(SYS_EXIT_GROUP, code as usize, 0, 0, 0) };
    unreachable!("exit_group returned")
}

/// execve(path, argv, envp); returns only on failure.
///
/// # Safety
/// `path` NUL-terminated; `argv` and `envp` NULL-terminated arrays of
/// pointers to NUL-terminated strings.
pub unsafe fn execve(
    path: &core::ffi::CStr,
    argv: *const *const u8,
    envp: *const *const u8,
) -> Errno {
    // SAFETY: the caller's.
    match unsafe {
        syscall4(
            SYS_EXECVE,
            path.as_ptr() as usize,
            argv as usize,
            envp as usize,
            0,
        )
    } {
        Err(e) => e,
        Ok(_) => Errno::INVAL,
    }
}

/// Standard input, output or error (0, 1, 2) as a borrowed descriptor.
pub fn stdio(fd: i32) -> rustix::fd::BorrowedFd<'static> {
    debug_assert!((0..3).contains(&fd));
    // SAFETY: fds 0-2 are open from the start of `main` on
    // ([`open_closed_stdio`]) and this program never closes them.
    unsafe { rustix::fd::BorrowedFd::borrow_raw(fd) }
}

/// Open /dev/null on each of fds 0-2 that is closed, in order, so that
/// each open lands on the lowest free number, the closed one (as the
/// standard library's start-up does). An error if one cannot be.
pub fn open_closed_stdio() -> Result<(), Errno> {
    for fd in 0..3 {
        // SAFETY: F_GETFD only asks whether the number is open.
        let probe = unsafe { syscall4(SYS_FCNTL, fd, F_GETFD, 0, 0) };
        match probe {
            Err(Errno::BADF) => {
                let null = rustix::fs::open(
                    "/dev/null",
                    rustix::fs::OFlags::RDWR,
                    rustix::fs::Mode::empty(),
                )?;
                let got = rustix::fd::IntoRawFd::into_raw_fd(null);
                if got as usize != fd {
                    return Err(Errno::BADF);
                }
            }
            Err(e) => return Err(e),
            Ok(_) => {}
        }
    }
    Ok(())
}

/// SIGPIPE ignored (rt_sigaction with SIG_IGN, which needs no restorer).
pub fn ignore_sigpipe() {
    // struct kernel_sigaction on x86-64: handler, flags, restorer, mask.
    let act: [usize; 4] = [SIG_IGN, 0, 0, 0];
    // SAFETY: rt_sigaction reads a 32-byte kernel_sigaction; no old one
    // asked for.
    let _ = unsafe { syscall4(SYS_RT_SIGACTION, SIGPIPE, act.as_ptr() as usize, 0, 8) };
}
