//! Who is on the other end of a FastCGI connection, and whether they may
//! speak to the gateway at all.
//!
//! Whoever speaks FastCGI to the gateway says what the web server alone
//! should say: `REMOTE_USER`, `HTTPS`, `REMOTE_ADDR`, which tenant's
//! script runs. A tenant must never be such a peer.
//!
//! * unix socket: the socket's mode and group are the first defence; the
//!   peer's credentials (`SO_PEERCRED`, taken by the kernel at `connect`)
//!   are checked too when allowed users are configured.
//! * TCP: anyone on the host can connect to a loopback port, so the peer's
//!   socket is looked up in the kernel's socket table with `sock_diag`
//!   (`NETLINK_SOCK_DIAG`, `SOCK_DIAG_BY_FAMILY`, the exact 4-tuple: what
//!   `ss -e` shows as `uid:`) and its owner must be an allowed uid. The
//!   owner of a socket is the fsuid of the process that created it; passing
//!   it to another process does not change it. A peer socket that is not
//!   a live, open socket (already closed: a time-wait or orphaned socket
//!   reports no inode and uid 0) or is not found in the gateway's network
//!   namespace (another host, another namespace) has no owner to check and
//!   is refused, unless its address is one of `FCGI_WEB_SERVER_ADDRS` (a
//!   web server on another host).

use crate::log;
use nix::sys::socket::{
    recv, sendto, setsockopt, socket, sockopt, AddressFamily, MsgFlags, NetlinkAddr, SockFlag,
    SockProtocol, SockType,
};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The connection's other end, for the log and the per-uid count.
#[derive(Debug, Clone)]
pub struct Peer {
    /// The peer process's uid; None for a web server on another host.
    pub uid: Option<u32>,
    /// "127.0.0.1:41234 uid 33", "uid 33 pid 812".
    pub desc: String,
}

/// `SOCK_DIAG_BY_FAMILY` (linux/sock_diag.h).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_HDRLEN: usize = 16;
/// `struct inet_diag_req_v2`.
const REQ_LEN: usize = 56;
/// `struct inet_diag_msg`, up to `idiag_inode`.
const MSG_LEN: usize = 72;
/// TCP states of a connected socket (net/tcp_states.h): ESTABLISHED,
/// FIN_WAIT1, FIN_WAIT2, CLOSE_WAIT, LAST_ACK, CLOSING. Not TIME_WAIT,
/// NEW_SYN_RECV or LISTEN, which are not the peer's own socket.
const CONNECTED: [u8; 6] = [1, 4, 5, 8, 9, 11];

/// What the socket table says about a TCP peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// A live socket of this uid.
    Uid(u32),
    /// Found, but not a live socket any more (closed, time-wait): no owner.
    Gone,
    /// Not in this network namespace's table.
    NotLocal,
}

/// A `NETLINK_SOCK_DIAG` socket for looking TCP peers up (one per
/// listener; lookups are a send and a receive, answered synchronously by
/// the kernel).
pub struct SockDiag {
    fd: OwnedFd,
    seq: u32,
}

impl SockDiag {
    pub fn new() -> std::io::Result<SockDiag> {
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkSockDiag,
        )?;
        // The kernel answers inside sendto; the timeout only bounds a
        // surprise.
        setsockopt(
            &fd,
            sockopt::ReceiveTimeout,
            &nix::sys::time::TimeVal::new(1, 0),
        )?;
        Ok(SockDiag { fd, seq: 0 })
    }

    /// The owner of the socket at `peer` connected to `local` (the
    /// addresses of an accepted connection, seen from the gateway).
    pub fn owner(&mut self, local: SocketAddr, peer: SocketAddr) -> std::io::Result<Owner> {
        // A v4 client reaching a dual-stack listener shows as ::ffff:a.b.c.d:
        // its socket is AF_INET (or, rarely, AF_INET6 with mapped addresses).
        if let (SocketAddr::V6(l), SocketAddr::V6(p)) = (local, peer) {
            if let (Some(l4), Some(p4)) = (l.ip().to_ipv4_mapped(), p.ip().to_ipv4_mapped()) {
                let v4 = self.query(
                    SocketAddr::new(l4.into(), l.port()),
                    SocketAddr::new(p4.into(), p.port()),
                )?;
                if v4 != Owner::NotLocal {
                    return Ok(v4);
                }
            }
        }
        self.query(local, peer)
    }

    fn query(&mut self, local: SocketAddr, peer: SocketAddr) -> std::io::Result<Owner> {
        let family = match peer {
            SocketAddr::V4(_) => libc::AF_INET as u8,
            SocketAddr::V6(_) => libc::AF_INET6 as u8,
        };
        self.seq = self.seq.wrapping_add(1);
        let mut req = Vec::with_capacity(NLMSG_HDRLEN + REQ_LEN);
        req.extend_from_slice(&((NLMSG_HDRLEN + REQ_LEN) as u32).to_ne_bytes());
        req.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        req.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
        req.extend_from_slice(&self.seq.to_ne_bytes());
        req.extend_from_slice(&0u32.to_ne_bytes());
        // inet_diag_req_v2: family, protocol, ext, pad, states.
        req.extend_from_slice(&[family, libc::IPPROTO_TCP as u8, 0, 0]);
        req.extend_from_slice(&u32::MAX.to_ne_bytes());
        // inet_diag_sockid of the peer's socket: its source is the peer.
        req.extend_from_slice(&sockid(peer, local));
        let kernel = NetlinkAddr::new(0, 0);
        sendto(self.fd.as_raw_fd(), &req, &kernel, MsgFlags::empty())?;
        let mut buf = [0u8; 8192];
        loop {
            let n = recv(self.fd.as_raw_fd(), &mut buf, MsgFlags::empty())?;
            let msg = &buf[..n];
            if n < NLMSG_HDRLEN {
                return Err(std::io::Error::other("short netlink message"));
            }
            let kind = u16::from_ne_bytes([msg[4], msg[5]]);
            let seq = u32::from_ne_bytes(msg[8..12].try_into().unwrap());
            if seq != self.seq {
                // An answer to an earlier query that timed out: skip it.
                continue;
            }
            let body = &msg[NLMSG_HDRLEN..];
            if kind == NLMSG_ERROR {
                let errno = body
                    .get(..4)
                    .map(|b| -i32::from_ne_bytes(b.try_into().unwrap()))
                    .unwrap_or(libc::EIO);
                return match errno {
                    libc::ENOENT => Ok(Owner::NotLocal),
                    e => Err(std::io::Error::from_raw_os_error(e)),
                };
            }
            if kind != SOCK_DIAG_BY_FAMILY || body.len() < MSG_LEN {
                return Err(std::io::Error::other(format!(
                    "unexpected sock_diag answer (type {kind}, {} bytes)",
                    body.len()
                )));
            }
            // The same 4-tuple, or the lookup fell back to something else
            // (a listener on the peer's port).
            if body[4..4 + 36] != sockid(peer, local)[..36] {
                return Ok(Owner::NotLocal);
            }
            let state = body[1];
            let uid = u32::from_ne_bytes(body[64..68].try_into().unwrap());
            let inode = u32::from_ne_bytes(body[68..72].try_into().unwrap());
            if !CONNECTED.contains(&state) || inode == 0 {
                return Ok(Owner::Gone);
            }
            return Ok(Owner::Uid(uid));
        }
    }
}

/// `struct inet_diag_sockid` of the socket bound to `src`, connected to
/// `dst`: ports big-endian, addresses in network order (IPv4 in the first
/// word), interface 0, no cookie.
fn sockid(src: SocketAddr, dst: SocketAddr) -> [u8; 48] {
    let mut id = [0u8; 48];
    id[0..2].copy_from_slice(&src.port().to_be_bytes());
    id[2..4].copy_from_slice(&dst.port().to_be_bytes());
    let addr = |ip: IpAddr, out: &mut [u8]| match ip {
        IpAddr::V4(a) => out[..4].copy_from_slice(&a.octets()),
        IpAddr::V6(a) => out.copy_from_slice(&a.octets()),
    };
    addr(src.ip(), &mut id[4..20]);
    addr(dst.ip(), &mut id[20..36]);
    // idiag_if = 0, idiag_cookie = INET_DIAG_NOCOOKIE.
    id[40..48].copy_from_slice(&[0xff; 8]);
    id
}

/// Who may connect, how many connections each uid may hold, and the log of
/// refusals (at most one line per uid and second: a tenant that connects in
/// a loop must not flood the log).
pub struct Gate {
    /// Root and the configured users.
    allowed: Vec<u32>,
    /// Whether unix peers are checked too (allowed users configured).
    check_unix: bool,
    pub per_uid: usize,
    held: Mutex<HashMap<Option<u32>, usize>>,
    quiet: Mutex<HashMap<Option<u32>, (Instant, u64)>>,
}

/// A connection counted against its uid until dropped.
pub struct Held {
    gate: Arc<Gate>,
    uid: Option<u32>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut h = self.gate.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = h.get_mut(&self.uid) {
            *n -= 1;
            if *n == 0 {
                h.remove(&self.uid);
            }
        }
    }
}

impl Gate {
    /// `allow`: uids allowed besides root; None: not configured (TCP: root
    /// only; unix: the socket's mode decides).
    pub fn new(allow: Option<&[u32]>, per_uid: usize) -> Gate {
        let mut allowed = vec![0];
        allowed.extend(allow.unwrap_or_default());
        Gate {
            allowed,
            check_unix: allow.is_some(),
            per_uid: per_uid.max(1),
            held: Mutex::default(),
            quiet: Mutex::default(),
        }
    }

    pub fn allowed_uids(&self) -> &[u32] {
        &self.allowed
    }

    /// Whether a unix peer of `uid` may speak FastCGI.
    pub fn unix_allowed(&self, uid: u32) -> bool {
        !self.check_unix || self.allowed.contains(&uid)
    }

    /// Whether a TCP peer of `uid` may speak FastCGI.
    pub fn tcp_allowed(&self, uid: u32) -> bool {
        self.allowed.contains(&uid)
    }

    /// Count a connection of `peer` against its uid: None when the uid
    /// already holds `per_uid` connections (refused, and logged).
    pub fn hold(self: &Arc<Gate>, peer: &Peer) -> Option<Held> {
        let mut h = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let n = h.entry(peer.uid).or_insert(0);
        if *n >= self.per_uid {
            drop(h);
            self.refuse(
                peer,
                format_args!(
                    "it already holds {} connections (--max-conns-per-uid)",
                    self.per_uid
                ),
            );
            return None;
        }
        *n += 1;
        Some(Held {
            gate: self.clone(),
            uid: peer.uid,
        })
    }

    /// Log a refused connection, rate-limited per uid.
    pub fn refuse(&self, peer: &Peer, why: std::fmt::Arguments<'_>) {
        let now = Instant::now();
        let mut q = self.quiet.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() > 4096 {
            q.retain(|_, (at, _)| now.duration_since(*at) < Duration::from_secs(1));
        }
        let e = q
            .entry(peer.uid)
            .or_insert((now - Duration::from_secs(2), 0));
        if now.duration_since(e.0) < Duration::from_secs(1) {
            e.1 += 1;
            return;
        }
        let more = std::mem::take(&mut e.1);
        e.0 = now;
        drop(q);
        let more = if more > 0 {
            format!(" ({more} more refused in the last second)")
        } else {
            String::new()
        };
        log::line(format_args!(
            "refused a connection from {}: {why}{more}",
            peer.desc
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tcp_peer_is_found_with_its_owner() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, peer) = l.accept().unwrap();
        let local = s.local_addr().unwrap();
        assert_eq!(peer, c.local_addr().unwrap());
        let mut d = SockDiag::new().unwrap();
        let me = nix::unistd::geteuid().as_raw();
        assert_eq!(d.owner(local, peer).unwrap(), Owner::Uid(me));
        // Our own accepted end is not the peer's socket: asked the other way
        // round, the owner is ours too, but a port nobody uses is not found.
        let nobody: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(d.owner(local, nobody).unwrap(), Owner::NotLocal);
        // The client closes: no live socket, no owner (never "uid 0").
        drop(c);
        let o = d.owner(local, peer).unwrap();
        assert!(matches!(o, Owner::Gone | Owner::NotLocal), "{o:?}");
        // Cost per lookup (the gateway does one per TCP accept).
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, peer) = l.accept().unwrap();
        let n = 2000;
        let t = Instant::now();
        for _ in 0..n {
            assert_eq!(
                d.owner(s.local_addr().unwrap(), peer).unwrap(),
                Owner::Uid(me)
            );
        }
        eprintln!(
            "sock_diag owner lookup: {:.1} µs each",
            t.elapsed().as_secs_f64() * 1e6 / n as f64
        );
        drop(c);
    }

    #[test]
    fn a_socket_made_with_another_fsuid_belongs_to_that_uid() {
        // The owner is the creator's fsuid (what a tenant's process has).
        if !nix::unistd::geteuid().is_root() {
            // Unprivileged: setfsuid to another uid is refused; the owner is us.
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (s, peer) = l.accept().unwrap();
            let mut d = SockDiag::new().unwrap();
            assert_eq!(
                d.owner(s.local_addr().unwrap(), peer).unwrap(),
                Owner::Uid(nix::unistd::geteuid().as_raw())
            );
            drop(c);
            return;
        }
        let l = std::net::TcpListener::bind("[::]:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let c = std::thread::spawn(move || {
            let _id = crate::fsid::FsIdentity::become_user(65534, 65534).unwrap();
            std::net::TcpStream::connect(("127.0.0.1", port)).unwrap()
        })
        .join()
        .unwrap();
        let (s, peer) = l.accept().unwrap();
        // A v4 client on a dual-stack listener: found as AF_INET.
        assert!(peer.ip().to_string().starts_with("::ffff:"), "{peer}");
        let mut d = SockDiag::new().unwrap();
        assert_eq!(
            d.owner(s.local_addr().unwrap(), peer).unwrap(),
            Owner::Uid(65534)
        );
        drop(c);
    }

    #[test]
    fn the_gate_counts_per_uid_and_rate_limits_its_log() {
        let g = Arc::new(Gate::new(Some(&[33]), 2));
        assert!(g.tcp_allowed(0) && g.tcp_allowed(33) && !g.tcp_allowed(1001));
        assert!(g.unix_allowed(33) && !g.unix_allowed(1001));
        let open = Gate::new(None, 8);
        assert!(open.unix_allowed(1001) && !open.tcp_allowed(1001));
        let p = Peer {
            uid: Some(33),
            desc: "uid 33".into(),
        };
        let a = g.hold(&p).unwrap();
        let _b = g.hold(&p).unwrap();
        assert!(g.hold(&p).is_none());
        // Other uids are not affected.
        let root = Peer {
            uid: Some(0),
            desc: "uid 0".into(),
        };
        assert!(g.hold(&root).is_some());
        drop(a);
        assert!(g.hold(&p).is_some());
    }
}
