//! Host-side client of a tenant init's control socket.

use crate::proto::{self, Reply, Request};
use nix::errno::Errno;
use nix::sys::socket::{connect, recv, sendmsg, socket, AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType, UnixAddr};
use std::io::IoSlice;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;

pub struct Client {
    fd: OwnedFd,
}

impl Client {
    pub fn connect(path: &Path) -> Result<Client, Errno> {
        let fd = socket(AddressFamily::Unix, SockType::SeqPacket, SockFlag::SOCK_CLOEXEC, None)?;
        connect(fd.as_raw_fd(), &UnixAddr::new(path)?)?;
        Ok(Client { fd })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Send one request, with `fds` (stdin, stdout, stderr) attached.
    pub fn send(&self, req: &Request, fds: &[RawFd]) -> Result<(), Errno> {
        let body = proto::encode(req);
        let iov = [IoSlice::new(&body)];
        let rights = [ControlMessage::ScmRights(fds)];
        let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &rights };
        sendmsg::<()>(self.fd.as_raw_fd(), &iov, cmsgs, MsgFlags::MSG_NOSIGNAL, None)?;
        Ok(())
    }

    /// Wait for the next reply.
    pub fn recv(&self) -> Result<Reply, Errno> {
        let mut buf = vec![0u8; proto::MAX_MESSAGE];
        loop {
            match recv(self.fd.as_raw_fd(), &mut buf, MsgFlags::empty()) {
                Ok(0) => return Err(Errno::ECONNRESET),
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
