//! Forwarding the signals a terminal or a supervisor sends (INT, TERM, HUP,
//! QUIT, USR1, USR2) to a command that runs in a sandbox: the one mechanism
//! behind both foreground paths of `corral run`. A handler writes each
//! signal's number into a self-pipe; the waiting loop reads it and passes
//! the signal on (with kill(2) to a child of ours, as a `Signal` request to
//! the tenant init for a spawn of the init's).
//!
//! [`Blocked`] is the same for a single-threaded waiter without a child of
//! its own (`corral run` through the tenant init, the hot path): the
//! signals are blocked and read from a signalfd, two system calls instead
//! of a pipe, six handlers installed and six restored (docs/benchmarks.md,
//! "corral run at the C floor").

use nix::errno::Errno;
use nix::sys::signal::{self, SigHandler, Signal};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

/// The signals that are passed on.
pub const FORWARDED: [Signal; 6] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
];

/// The write end of the live [`Forwarding`]'s pipe (-1: none).
static PIPE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn to_pipe(sig: libc::c_int) {
    let fd = PIPE.load(Ordering::Relaxed);
    if fd >= 0 {
        let b = sig as u8;
        // SAFETY: write(2) of one byte from the stack is async-signal-safe.
        unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
    }
}

/// While alive, the [`FORWARDED`] signals are caught into a self-pipe;
/// dropped, their previous dispositions come back (a caller that goes on,
/// e.g. after a refused request, keeps no handler writing to a closed fd,
/// and one that ignored SIGHUP still ignores it).
pub struct Forwarding {
    read: OwnedFd,
    _write: OwnedFd,
    previous: Vec<(Signal, SigHandler)>,
}

impl Forwarding {
    /// Catch the forwarded signals from now on. One at a time per process
    /// (the handler writes to the one pipe).
    pub fn start() -> Result<Forwarding, Errno> {
        Self::start_with(&[])
    }

    /// [`Forwarding::start`], also catching `extra` signals into the pipe
    /// (for the caller to act on: a terminal relay's SIGWINCH and SIGCHLD).
    pub fn start_with(extra: &[Signal]) -> Result<Forwarding, Errno> {
        let (read, write) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)?;
        PIPE.store(write.as_raw_fd(), Ordering::Relaxed);
        let mut f = Forwarding {
            read,
            _write: write,
            previous: Vec::with_capacity(FORWARDED.len() + extra.len()),
        };
        for &s in FORWARDED.iter().chain(extra) {
            // SAFETY: `to_pipe` only calls write(2), which is async-signal-safe.
            if let Ok(old) = unsafe { signal::signal(s, SigHandler::Handler(to_pipe)) } {
                f.previous.push((s, old));
            }
        }
        Ok(f)
    }

    /// Readable when a signal is pending.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.read.as_fd()
    }

    /// The signals caught since the last call, in order.
    pub fn pending(&self) -> Vec<i32> {
        let mut b = [0u8; 16];
        match nix::unistd::read(self.read.as_raw_fd(), &mut b) {
            Ok(n) => b[..n].iter().map(|&s| i32::from(s)).collect(),
            Err(_) => Vec::new(),
        }
    }
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        for &(s, old) in &self.previous {
            // SAFETY: putting back the disposition `start` replaced.
            unsafe { signal::signal(s, old) }.ok();
        }
        PIPE.store(-1, Ordering::Relaxed);
    }
}

/// While alive, the [`FORWARDED`] signals are blocked in the calling thread
/// and read from a signalfd; dropped, the signals not read yet are
/// discarded (as [`Forwarding`]'s pipe discards them) and the previous
/// mask comes back. For a process whose only thread is the caller's
/// (`corral run`): another thread with the signals unblocked would take
/// them with their default action instead. A caller's ignored signal is
/// still read (a blocked signal is queued whatever its disposition), as
/// [`Forwarding`]'s handler caught it.
pub struct Blocked {
    fd: nix::sys::signalfd::SignalFd,
    previous: nix::sys::signal::SigSet,
}

impl Blocked {
    pub fn start() -> Result<Blocked, Errno> {
        let mut set = nix::sys::signal::SigSet::empty();
        for s in FORWARDED {
            set.add(s);
        }
        let previous = set.thread_swap_mask(nix::sys::signal::SigmaskHow::SIG_BLOCK)?;
        let flags =
            nix::sys::signalfd::SfdFlags::SFD_CLOEXEC | nix::sys::signalfd::SfdFlags::SFD_NONBLOCK;
        match nix::sys::signalfd::SignalFd::with_flags(&set, flags) {
            Ok(fd) => Ok(Blocked { fd, previous }),
            Err(e) => {
                let _ = previous.thread_set_mask();
                Err(e)
            }
        }
    }

    /// Readable when a signal is pending.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The signals received since the last call, in order.
    pub fn pending(&self) -> Vec<i32> {
        let mut out = Vec::new();
        while let Ok(Some(info)) = self.fd.read_signal() {
            out.push(info.ssi_signo as i32);
        }
        out
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        let _ = self.pending();
        let _ = self.previous.thread_set_mask();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_reach_the_pipe_and_dispositions_come_back() {
        // SAFETY: setting a plain disposition.
        unsafe { signal::signal(Signal::SIGUSR2, SigHandler::SigIgn) }.unwrap();
        let f = Forwarding::start().unwrap();
        assert!(f.pending().is_empty());
        for s in [Signal::SIGUSR1, Signal::SIGUSR2] {
            signal::raise(s).unwrap();
        }
        let mut got = Vec::new();
        for _ in 0..100 {
            got.extend(f.pending());
            if got.len() == 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(got, [libc::SIGUSR1, libc::SIGUSR2]);
        drop(f);
        assert_eq!(PIPE.load(Ordering::Relaxed), -1);
        // SAFETY: reading the disposition back by setting it again.
        let usr2 = unsafe { signal::signal(Signal::SIGUSR2, SigHandler::SigDfl) }.unwrap();
        assert_eq!(usr2, SigHandler::SigIgn, "an ignored signal stays ignored");
        // SAFETY: as above.
        let usr1 = unsafe { signal::signal(Signal::SIGUSR1, SigHandler::SigDfl) }.unwrap();
        assert_eq!(usr1, SigHandler::SigDfl);
    }

    #[test]
    fn blocked_signals_are_read_in_order_and_the_mask_comes_back() {
        use nix::sys::signal::SigSet;
        let before = SigSet::thread_get_mask().unwrap();
        let b = Blocked::start().unwrap();
        assert!(b.pending().is_empty());
        // Directed at this thread: another thread of the test harness
        // must not take a process-directed signal.
        let to_self = |s: Signal| {
            // SAFETY: a signal to the calling thread, which blocks it.
            let r = unsafe { libc::pthread_kill(libc::pthread_self(), s as i32) };
            assert_eq!(r, 0);
        };
        to_self(Signal::SIGUSR1);
        to_self(Signal::SIGHUP);
        let mut got = b.pending();
        got.sort();
        assert_eq!(got, [libc::SIGHUP, libc::SIGUSR1]);
        to_self(Signal::SIGUSR2);
        // Dropped with a signal unread: discarded, not delivered (SIGUSR2's
        // default action would end the test process).
        drop(b);
        let after = SigSet::thread_get_mask().unwrap();
        for s in FORWARDED {
            assert_eq!(after.contains(s), before.contains(s), "{s:?} as before");
        }
    }
}
