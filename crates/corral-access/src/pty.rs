//! A terminal of the sandbox's own for an interactive login, like `su --pty`
//! or `docker exec -t`: the session's programs get the slave of a pty opened
//! in the sandbox's devpts, and the login's process relays between it and
//! the caller's terminal. No tenant process ever holds the caller's
//! terminal, so nothing the tenant leaves behind can read from it (or push
//! input into it) after the session.

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::Signal;
use nix::sys::termios::{self, SetArg, Termios};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// The master and slave of a new pty.
pub struct Pty {
    pub master: OwnedFd,
    pub slave: OwnedFd,
}

/// Open a pty in the devpts of the calling process's mount namespace
/// (`/dev/pts/ptmx`: inside a sandbox, its own devpts instance), with the
/// window size of `size_from` if that is a terminal, its slave owned by
/// `owner` with mode 0620 as a login's terminal is.
pub fn open(owner: Option<libc::uid_t>, size_from: RawFd) -> Result<Pty, Errno> {
    // SAFETY: a NUL-terminated path; the fd is checked and owned below.
    let m = unsafe {
        libc::open(
            c"/dev/pts/ptmx".as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    };
    if m < 0 {
        return Err(Errno::last());
    }
    // SAFETY: `m` was just opened and is owned by nobody else.
    let master = unsafe { OwnedFd::from_raw_fd(m) };
    let unlock: libc::c_int = 0;
    // SAFETY: TIOCSPTLCK reads an int; TIOCGPTPEER opens the slave of this
    // master directly (no path lookup that could be raced).
    let s = unsafe {
        if libc::ioctl(m, libc::TIOCSPTLCK, &unlock) < 0 {
            return Err(Errno::last());
        }
        libc::ioctl(
            m,
            libc::TIOCGPTPEER,
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    };
    if s < 0 {
        return Err(Errno::last());
    }
    // SAFETY: `s` was just opened and is owned by nobody else.
    let slave = unsafe { OwnedFd::from_raw_fd(s) };
    if let Some(uid) = owner {
        nix::unistd::fchown(slave.as_raw_fd(), Some(uid.into()), None)?;
        nix::sys::stat::fchmod(
            slave.as_raw_fd(),
            nix::sys::stat::Mode::from_bits_truncate(0o620),
        )?;
    }
    copy_size(size_from, m);
    Ok(Pty { master, slave })
}

fn copy_size(from: RawFd, to: RawFd) {
    // SAFETY: winsize is plain data on the stack; TIOCGWINSZ/TIOCSWINSZ
    // read and write exactly one.
    unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        if libc::ioctl(from, libc::TIOCGWINSZ, &mut ws) == 0 {
            libc::ioctl(to, libc::TIOCSWINSZ, &ws);
        }
    }
}

/// Is `fd` a terminal of the devpts instance mounted at /dev/pts (inside a
/// sandbox: its own)? A terminal from elsewhere (the caller's, handed in by
/// su) is not.
pub fn is_local_terminal(fd: RawFd) -> bool {
    // SAFETY: isatty only queries the fd.
    if unsafe { libc::isatty(fd) } != 1 {
        return false;
    }
    match (
        nix::sys::stat::fstat(fd),
        nix::sys::stat::stat("/dev/pts/ptmx"),
    ) {
        (Ok(t), Ok(p)) => t.st_dev == p.st_dev,
        _ => false,
    }
}

/// The caller's terminal in raw mode while this lives (the inner pty does
/// the line discipline), restored on drop.
struct Raw {
    fd: RawFd,
    saved: Termios,
}

impl Raw {
    fn set(fd: RawFd) -> Option<Raw> {
        // SAFETY: fd 0/1 of this process outlive the guard.
        let b = unsafe { BorrowedFd::borrow_raw(fd) };
        let saved = termios::tcgetattr(b).ok()?;
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        termios::tcsetattr(b, SetArg::TCSANOW, &raw).ok()?;
        Some(Raw { fd, saved })
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: as in `set`.
        let b = unsafe { BorrowedFd::borrow_raw(self.fd) };
        let _ = termios::tcsetattr(b, SetArg::TCSADRAIN, &self.saved);
    }
}

/// Signals the relay acts on itself, besides those it passes on to the
/// shell (`corral_sandbox::forward`): window size changes go to the inner
/// pty, the end of the shell ends the relay.
const OWN: [Signal; 2] = [Signal::SIGWINCH, Signal::SIGCHLD];

/// Relay between this process's stdin/stdout (the caller's terminal) and
/// `master` until `child` ends; returns its status as a shell reports it.
pub fn relay(master: OwnedFd, child: Pid) -> Result<i32, Errno> {
    let signals = corral_sandbox::forward::Forwarding::start_with(&OWN)?;
    let _raw = Raw::set(0);
    let mut stdin_open = true;
    let mut buf = [0u8; 16 * 1024];
    // Checked at the start (a child that ended before the handler was
    // installed) and after each SIGCHLD, not on every chunk relayed.
    let mut child_may_have_ended = true;
    let code = loop {
        if std::mem::take(&mut child_may_have_ended) {
            if let Some(code) = reap(child)? {
                break code;
            }
        }
        // SAFETY: fd 0 outlives this loop.
        let stdin = unsafe { BorrowedFd::borrow_raw(0) };
        let mut fds = vec![
            PollFd::new(signals.fd(), PollFlags::POLLIN),
            PollFd::new(master.as_fd(), PollFlags::POLLIN),
        ];
        if stdin_open {
            fds.push(PollFd::new(stdin, PollFlags::POLLIN));
        }
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
        let ready = |i: usize| {
            fds.get(i)
                .and_then(|f| f.revents())
                .is_some_and(|r| !r.is_empty())
        };
        let (sig, out, inp) = (ready(0), ready(1), ready(2));
        if sig {
            for s in signals.pending() {
                if s == libc::SIGCHLD {
                    child_may_have_ended = true;
                } else if s == libc::SIGWINCH {
                    copy_size(0, master.as_raw_fd());
                } else {
                    // SAFETY: kill with plain arguments.
                    unsafe { libc::kill(child.as_raw(), s) };
                }
            }
        }
        if out && !pump(master.as_raw_fd(), 1, &mut buf) {
            // EIO: no process holds the slave any more.
            break wait(child)?;
        }
        if inp && !pump(0, master.as_raw_fd(), &mut buf) {
            stdin_open = false;
        }
    };
    // What the shell wrote last, still buffered in the pty.
    let _ = nix::fcntl::fcntl(
        master.as_raw_fd(),
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    );
    while pump(master.as_raw_fd(), 1, &mut buf) {}
    drop(signals); // the previous dispositions come back
    Ok(code)
}

/// Copy one read's worth from `from` to `to`; false at end of input or on
/// an error of either side.
fn pump(from: RawFd, to: RawFd, buf: &mut [u8]) -> bool {
    let n = match nix::unistd::read(from, buf) {
        Ok(0) | Err(_) => return false,
        Ok(n) => n,
    };
    let mut done = 0;
    while done < n {
        // SAFETY: `to` is open for the caller's lifetime (stdout or the
        // relay's master), longer than this borrow.
        let to_fd = unsafe { BorrowedFd::borrow_raw(to) };
        match nix::unistd::write(to_fd, &buf[done..n]) {
            Ok(w) => done += w,
            Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) => {
                let mut p = [PollFd::new(to_fd, PollFlags::POLLOUT)];
                let _ = poll(&mut p, PollTimeout::NONE);
            }
            Err(_) => return false,
        }
    }
    true
}

fn status_code(st: WaitStatus) -> Option<i32> {
    match st {
        WaitStatus::Exited(_, c) => Some(c),
        WaitStatus::Signaled(_, s, _) => Some(128 + s as i32),
        _ => None,
    }
}

fn reap(child: Pid) -> Result<Option<i32>, Errno> {
    match waitpid(child, Some(WaitPidFlag::WNOHANG)) {
        Ok(st) => Ok(status_code(st)),
        Err(Errno::EINTR) => Ok(None),
        Err(e) => Err(e),
    }
}

fn wait(child: Pid) -> Result<i32, Errno> {
    loop {
        match waitpid(child, None) {
            Ok(st) => {
                if let Some(c) = status_code(st) {
                    return Ok(c);
                }
            }
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
}
