//! Async client of a tenant init's control socket (SOCK_SEQPACKET, one JSON
//! message per packet, stdio fds as SCM_RIGHTS; see
//! `corral_sandbox::proto`). One request at a time per connection: when it
//! closes before the request's `Exited`, the init kills whatever the
//! request started. A connection whose request ended with its `Exited` is
//! idle and goes back to its tenant's [`Pool`] for the next request (asked
//! for with `SpawnRequest::keep`): no socket, connect, accept, credential
//! check and epoll registration per request.

use corral_sandbox::proto::{self, Reply, Request};
use nix::errno::Errno;
use nix::sys::socket::{
    connect, recv, sendmsg, socket, AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType,
    UnixAddr,
};
use std::io::IoSlice;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("connect to {path}: {errno}")]
    Connect { path: String, errno: Errno },
    #[error("send to the tenant init: {0}")]
    Send(Errno),
    #[error("receive from the tenant init: {0}")]
    Recv(Errno),
    #[error("the tenant init closed the control connection")]
    Closed,
    #[error("undecodable message from the tenant init: {0}")]
    Decode(#[source] serde_json::Error),
    #[error("a reply of {size} bytes from the tenant init (at most {max} expected)")]
    ReplyTooLarge { size: usize, max: usize },
    #[error("request of {size} bytes is larger than the control protocol allows ({max})")]
    TooLarge { size: usize, max: usize },
}

/// Largest reply read from the init.
const REPLY_BUF: usize = 8192;

pub struct Control {
    fd: AsyncFd<OwnedFd>,
}

impl Control {
    /// Connect without blocking the runtime: a full listen backlog
    /// (EAGAIN) is retried with a short back-off until `patience` runs out.
    pub async fn connect(path: &Path, patience: Duration) -> Result<Control, ControlError> {
        let err = |errno| ControlError::Connect {
            path: path.display().to_string(),
            errno,
        };
        let fd = socket(
            AddressFamily::Unix,
            SockType::SeqPacket,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
            None,
        )
        .map_err(err)?;
        let addr = UnixAddr::new(path).map_err(err)?;
        let start = tokio::time::Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            match connect(fd.as_raw_fd(), &addr) {
                Ok(()) => break,
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) if start.elapsed() < patience => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                Err(e) => return Err(err(e)),
            }
        }
        // SAFETY: the OwnedFd moves into the AsyncFd, which keeps it open
        // (and never hands it out for closing) until the AsyncFd is dropped.
        let fd =
            unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE | Interest::WRITABLE) };
        Ok(Control {
            fd: fd.map_err(|e| err(io_errno(&e.into())))?,
        })
    }

    /// Send one request with `fds` (stdin, stdout, stderr) attached.
    pub async fn send(&self, req: &Request, fds: &[RawFd]) -> Result<(), ControlError> {
        let body = proto::encode(req);
        if body.len() > proto::MAX_MESSAGE {
            return Err(ControlError::TooLarge {
                size: body.len(),
                max: proto::MAX_MESSAGE,
            });
        }
        loop {
            let mut guard = self
                .fd
                .writable()
                .await
                .map_err(|e| ControlError::Send(io_errno(&e)))?;
            let r = guard.try_io(|fd| {
                let iov = [IoSlice::new(&body)];
                let rights = [ControlMessage::ScmRights(fds)];
                let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &rights };
                sendmsg::<()>(fd.as_raw_fd(), &iov, cmsgs, MsgFlags::MSG_NOSIGNAL, None)
                    .map_err(std::io::Error::from)
            });
            match r {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Ok(Err(e)) => return Err(ControlError::Send(io_errno(&e))),
                Err(_would_block) => continue,
            }
        }
    }

    /// The next reply. Cancel-safe: a message is only taken off the socket
    /// in the same poll that returns it.
    pub async fn recv(&self) -> Result<Reply, ControlError> {
        // Replies are small (Spawned, Exited...); a longer one would be
        // truncated by SOCK_SEQPACKET, which MSG_TRUNC reports as its full
        // length, and is refused below.
        let mut buf = [0u8; REPLY_BUF];
        loop {
            let mut guard = self
                .fd
                .readable()
                .await
                .map_err(|e| ControlError::Recv(io_errno(&e)))?;
            match guard.try_io(|fd| {
                recv(fd.as_raw_fd(), &mut buf, MsgFlags::MSG_TRUNC).map_err(std::io::Error::from)
            }) {
                Ok(Ok(0)) => return Err(ControlError::Closed),
                Ok(Ok(n)) if n > buf.len() => {
                    return Err(ControlError::ReplyTooLarge {
                        size: n,
                        max: buf.len(),
                    })
                }
                Ok(Ok(n)) => return proto::decode(&buf[..n]).map_err(ControlError::Decode),
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Ok(Err(e)) => return Err(ControlError::Recv(io_errno(&e))),
                Err(_would_block) => continue,
            }
        }
    }
}

/// Idle connections to one tenant init (each had its request end with an
/// `Exited`, so nothing of it is left to kill and no reply is pending).
#[derive(Default)]
pub struct Pool {
    idle: std::sync::Mutex<Vec<Control>>,
}

impl Pool {
    /// Idle connections kept per init; more are closed (each one is a
    /// descriptor in the init's poll set).
    pub const MAX_IDLE: usize = 16;

    /// An idle connection, most recently used first.
    pub fn take(&self) -> Option<Control> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    /// Keep `c` for the next request (only after its request's `Exited`).
    pub fn put(&self, c: Control) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < Self::MAX_IDLE {
            idle.push(c);
        }
    }

    pub fn idle(&self) -> usize {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

fn io_errno(e: &std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

/// Which end of a [`pipe`] the gateway keeps (and reads or writes through
/// tokio); the other end is the child's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ours {
    Read,
    Write,
}

/// A pipe for a child's stdio: `(read end, write end)`, both close-on-exec
/// (the init dup2s the child's end onto 0/1/2, which clears the flag there).
/// The gateway's end is non-blocking, the child's blocks: a script expects
/// blocking stdio. Made here with one `fcntl` on the gateway's end (O_NONBLOCK
/// is a flag of each end's open file), so that end can go to tokio's
/// `from_owned_fd_unchecked`: `from_owned_fd` checks with an `fstat` and
/// sets the flag with `F_GETFL` and `F_SETFL`, three calls per end and two
/// ends per request.
pub fn pipe(ours: Ours) -> Result<(OwnedFd, OwnedFd), Errno> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let mine = match ours {
        Ours::Read => &r,
        Ours::Write => &w,
    };
    // F_SETFL ignores the access mode: this sets O_NONBLOCK and clears the
    // other status flags, of which a new pipe has none.
    nix::fcntl::fcntl(
        std::os::fd::AsRawFd::as_raw_fd(mine),
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )?;
    Ok((r, w))
}
