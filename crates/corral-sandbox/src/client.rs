//! Host-side client of a tenant init's control socket.

use crate::proto::{self, Reply, Request};
use nix::errno::Errno;
use nix::sys::socket::{
    connect, recv, sendmsg, socket, AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType,
    UnixAddr,
};
use std::io::IoSlice;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;

/// Largest reply the client accepts (the init's replies are a few hundred
/// bytes; a list of services a few KiB).
const REPLY_MAX: usize = 32 * 1024;

pub struct Client {
    fd: OwnedFd,
}

impl Client {
    pub fn connect(path: &Path) -> Result<Client, Errno> {
        let fd = socket(
            AddressFamily::Unix,
            SockType::SeqPacket,
            SockFlag::SOCK_CLOEXEC,
            None,
        )?;
        connect(fd.as_raw_fd(), &UnixAddr::new(path)?)?;
        Ok(Client { fd })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Send one request, with `fds` (stdin, stdout, stderr) attached.
    pub fn send(&self, req: &Request, fds: &[RawFd]) -> Result<(), Errno> {
        self.send_encoded(&proto::encode(req), fds)
    }

    /// [`Client::send`] of a request encoded beforehand ([`proto::encode`]).
    pub fn send_encoded(&self, body: &[u8], fds: &[RawFd]) -> Result<(), Errno> {
        let iov = [IoSlice::new(body)];
        let rights = [ControlMessage::ScmRights(fds)];
        let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &rights };
        sendmsg::<()>(
            self.fd.as_raw_fd(),
            &iov,
            cmsgs,
            MsgFlags::MSG_NOSIGNAL,
            None,
        )?;
        Ok(())
    }

    /// Wait for the next reply. Replies are small: a stack buffer (a 64 KiB
    /// zeroed heap buffer cost `corral run` 16 page faults); a longer one is
    /// reported (MSG_TRUNC gives its real length) instead of misread.
    pub fn recv(&self) -> Result<Reply, Errno> {
        let mut buf = [0u8; REPLY_MAX];
        loop {
            match recv(self.fd.as_raw_fd(), &mut buf, MsgFlags::MSG_TRUNC) {
                Ok(0) => return Err(Errno::ECONNRESET),
                Ok(n) if n > buf.len() => return Err(Errno::EMSGSIZE),
                Ok(n) => return proto::decode(&buf[..n]).map_err(|_| Errno::EPROTO),
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    pub fn call(&self, req: &Request, fds: &[RawFd]) -> Result<Reply, Errno> {
        self.send(req, fds)?;
        self.recv()
    }
}
