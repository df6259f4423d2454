//! The listener, the signals and the state every request shares.
//!
//! * SIGTERM/SIGINT: stop accepting, answer new requests on open
//!   connections with 503, let in-flight requests finish (bounded by the
//!   request timeout plus a grace period), close idle connections, exit.
//! * SIGHUP: reload the map file (a broken file is logged and the old map
//!   stays).

use crate::log;
use crate::map::TenantMap;
use crate::peer::{Gate, Owner, Peer, SockDiag};
use crate::tenants::{Sandboxes, Tenants};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, UnixListener};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{watch, Notify, Semaphore};

/// Where the gateway listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    Unix(PathBuf),
    Tcp(std::net::SocketAddr),
}

impl std::str::FromStr for Listen {
    type Err = String;
    fn from_str(s: &str) -> Result<Listen, String> {
        if let Some(p) = s.strip_prefix("unix:") {
            if !p.starts_with('/') {
                return Err(format!("{s:?}: expected unix:/absolute/path"));
            }
            Ok(Listen::Unix(PathBuf::from(p)))
        } else if let Some(a) = s.strip_prefix("tcp:") {
            a.parse()
                .map(Listen::Tcp)
                .map_err(|e| format!("{s:?}: expected tcp:ADDR:PORT ({e})"))
        } else {
            Err(format!("{s:?}: expected unix:PATH or tcp:ADDR:PORT"))
        }
    }
}

#[derive(Clone)]
pub struct Options {
    pub listen: Listen,
    /// With TCP: the web servers allowed to connect (FastCGI §3.2's
    /// `FCGI_WEB_SERVER_ADDRS`); empty: any.
    pub web_server_addrs: Vec<std::net::IpAddr>,
    pub timeout: Duration,
    pub max_conns: u32,
    /// Most connections one peer uid may hold at once (see [`Gate`]).
    pub max_conns_per_uid: u32,
    /// How long a connection may take to send a request's params (from
    /// its start, or from the end of the previous request), and how long
    /// it may pause in a request body; then it is closed (and logged).
    pub idle_timeout: Duration,
    /// Uids allowed to speak FastCGI besides root; None: not configured
    /// (TCP: root only; unix: the socket's mode and group decide).
    pub allow_uids: Option<Vec<u32>>,
    pub map_file: Option<PathBuf>,
    /// Mode and group of a unix socket (only the web server should reach it).
    pub socket_mode: u32,
    pub socket_gid: Option<u32>,
    /// The page (HTML) a suspended tenant's visitors get with 503.
    pub suspended_page: String,
    /// Where the access log goes (one JSON line per request); None: no
    /// access log.
    pub access_log: Option<log::AccessTarget>,
}

/// The built-in suspended page.
pub const SUSPENDED_PAGE: &str = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Site suspended</title></head>\n<body><h1>This site is suspended</h1><p>Please contact the site's owner or the hosting provider.</p></body></html>\n";

/// Requests being served, to wait for at shutdown.
#[derive(Default)]
pub struct InFlight {
    n: AtomicUsize,
    zero: Notify,
}

pub struct InFlightGuard<'a>(&'a InFlight);

impl InFlight {
    pub fn enter(&self) -> InFlightGuard<'_> {
        self.n.fetch_add(1, Ordering::SeqCst);
        InFlightGuard(self)
    }
    pub fn count(&self) -> usize {
        self.n.load(Ordering::SeqCst)
    }
}

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        if self.0.n.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.zero.notify_waiters();
        }
    }
}

pub struct Shared {
    pub tenants: Tenants,
    pub timeout: Duration,
    pub max_conns: u32,
    pub idle_timeout: Duration,
    /// What a suspended tenant's visitors get (HTML).
    pub suspended_page: String,
    pub inflight: InFlight,
    /// The stdin of a script whose request has no body.
    pub devnull: std::fs::File,
    /// The gateway's CPU affinity, nice value and I/O priority when not a
    /// fresh process's: its scripts take them (bounded like `corral run`'s),
    /// as a CGI forked by fcgiwrap would. Read once at start.
    pub attrs: Option<corral_sandbox::proto::ProcAttrs>,
    /// One JSON line per request (`--access-log`).
    pub access: Option<log::AccessLog>,
    /// Names of dropped request variables already logged (each is logged
    /// once per gateway process).
    pub dropped_logged: std::sync::Mutex<std::collections::HashSet<String>>,
    drain: watch::Sender<bool>,
}

impl Shared {
    pub fn draining(&self) -> bool {
        *self.drain.borrow()
    }
    pub fn drain_signal(&self) -> watch::Receiver<bool> {
        self.drain.subscribe()
    }
}

/// Run the gateway until SIGTERM/SIGINT; returns once drained.
pub async fn run(opts: Options, sandboxes: Box<dyn Sandboxes>) -> anyhow::Result<()> {
    let map = match &opts.map_file {
        Some(p) => TenantMap::load(p)?,
        None => TenantMap::default(),
    };
    let (drain, _) = watch::channel(false);
    let devnull =
        std::fs::File::open("/dev/null").map_err(|e| anyhow::anyhow!("open /dev/null: {e}"))?;
    let access = match &opts.access_log {
        Some(t) => Some(
            log::AccessLog::open(t.clone())
                .map_err(|e| anyhow::anyhow!("--access-log {}: {e}", show_access(t)))?,
        ),
        None => None,
    };
    let shared = Arc::new(Shared {
        tenants: Tenants::new(sandboxes, map),
        timeout: opts.timeout,
        max_conns: opts.max_conns,
        idle_timeout: opts.idle_timeout,
        suspended_page: opts.suspended_page.clone(),
        inflight: InFlight::default(),
        devnull,
        attrs: corral_sandbox::proto::ProcAttrs::of_self_unless_default(),
        access,
        dropped_logged: Default::default(),
        drain,
    });
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    let gate = Arc::new(Gate::new(
        opts.allow_uids.as_deref(),
        opts.max_conns_per_uid as usize,
    ));
    let listener = bind(&opts)?;
    let peers = match (&opts.listen, &opts.allow_uids) {
        (Listen::Unix(_), None) => "peers: whoever the socket's mode lets in".to_string(),
        _ => format!("peer uids allowed: {:?}", gate.allowed_uids()),
    };
    log::line(format_args!(
        "listening on {} (timeout {}s, idle timeout {}s, max {} connections, {} per uid; {peers})",
        show(&opts.listen),
        opts.timeout.as_secs_f64(),
        opts.idle_timeout.as_secs_f64(),
        opts.max_conns,
        gate.per_uid,
    ));
    // Signals in a task of their own: the accept loop then waits on two
    // things only (no signal futures set up again for every connection).
    let (stop_tx, mut stop_rx) = watch::channel(());
    let signals = {
        let (opts, shared) = (opts.clone(), shared.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = hup.recv() => reload(&opts, &shared),
                    _ = term.recv() => break,
                    _ = int.recv() => break,
                }
            }
            let _ = stop_tx.send(());
        })
    };
    let permits = Arc::new(Semaphore::new(opts.max_conns as usize));
    let mut conns = tokio::task::JoinSet::new();
    let stop = async move {
        let _ = stop_rx.changed().await;
    };
    tokio::pin!(stop);
    loop {
        let permit = tokio::select! {
            biased;
            _ = &mut stop => break,
            p = permits.clone().acquire_owned() => p.expect("semaphore is never closed"),
        };
        // Finished connection tasks are reaped here, between accepts.
        while conns.try_join_next().is_some() {}
        tokio::select! {
            biased;
            _ = &mut stop => break,
            r = listener.accept(&shared, &gate, &mut conns, permit) => {
                if let Err(e) = r {
                    log::line(format_args!("accept: {e}"));
                    // EMFILE and friends: give the in-flight requests time to free fds.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
    signals.abort();
    drop(listener);
    if let Listen::Unix(p) = &opts.listen {
        let _ = std::fs::remove_file(p);
    }
    log::line(format_args!(
        "shutting down: draining {} in-flight request(s)",
        shared.inflight.count()
    ));
    shared.drain.send_replace(true);
    let bound = opts.timeout + Duration::from_secs(10);
    let drained =
        tokio::time::timeout(bound, async { while conns.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        log::line(format_args!(
            "{} request(s) still running after {}s: exiting anyway (their scripts are killed)",
            shared.inflight.count(),
            bound.as_secs()
        ));
    }
    Ok(())
}

fn show_access(t: &log::AccessTarget) -> String {
    match t {
        log::AccessTarget::Stderr => "-".into(),
        log::AccessTarget::File(p) => p.display().to_string(),
    }
}

fn reload(opts: &Options, shared: &Shared) {
    if let Some(a) = &shared.access {
        match a.reopen() {
            Ok(()) => {}
            Err(e) => log::line(format_args!(
                "SIGHUP: reopen the access log {}: {e}; still writing to the old file",
                show_access(a.target())
            )),
        }
    }
    let Some(p) = &opts.map_file else {
        log::line(format_args!("SIGHUP: no map file to reload"));
        return;
    };
    match TenantMap::load(p) {
        Ok(m) => {
            shared.tenants.set_map(m);
            log::line(format_args!("SIGHUP: reloaded {}", p.display()));
        }
        Err(e) => log::line(format_args!("SIGHUP: {e:#}; keeping the previous map")),
    }
}

fn show(l: &Listen) -> String {
    match l {
        Listen::Unix(p) => format!("unix:{}", p.display()),
        Listen::Tcp(a) => format!("tcp:{a}"),
    }
}

enum Listener {
    Unix(UnixListener),
    /// The listener, `FCGI_WEB_SERVER_ADDRS`, and the socket-table lookup
    /// of peers' owners.
    Tcp(
        TcpListener,
        Vec<std::net::IpAddr>,
        std::sync::Mutex<SockDiag>,
    ),
}

/// `FCGI_WEB_SERVER_ADDRS` (FastCGI §3.2): comma-separated IP addresses.
pub fn parse_web_server_addrs(v: &str) -> Result<Vec<std::net::IpAddr>, String> {
    v.split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(|a| {
            a.parse()
                .map_err(|e| format!("FCGI_WEB_SERVER_ADDRS: {a:?}: {e}"))
        })
        .collect()
}

fn bind(opts: &Options) -> anyhow::Result<Listener> {
    use anyhow::Context;
    match &opts.listen {
        Listen::Unix(p) => {
            // Only a stale socket is replaced, never another kind of file.
            if let Ok(m) = std::fs::symlink_metadata(p) {
                anyhow::ensure!(
                    m.file_type().is_socket(),
                    "{} exists and is not a socket",
                    p.display()
                );
                std::fs::remove_file(p)
                    .with_context(|| format!("remove stale socket {}", p.display()))?;
            }
            if let Some(dir) = p.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("create {}", dir.display()))?;
            }
            let l = UnixListener::bind(p).with_context(|| format!("bind {}", p.display()))?;
            if let Some(gid) = opts.socket_gid {
                nix::unistd::chown(p, None, Some(nix::unistd::Gid::from_raw(gid)))
                    .with_context(|| format!("chgrp {}", p.display()))?;
            }
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(opts.socket_mode))
                .with_context(|| format!("chmod {}", p.display()))?;
            Ok(Listener::Unix(l))
        }
        Listen::Tcp(a) => {
            if !a.ip().is_loopback() && opts.web_server_addrs.is_empty() {
                log::line(format_args!("warning: listening on {a}, not loopback, without FCGI_WEB_SERVER_ADDRS: whoever reaches it can run any tenant's scripts"));
            }
            let l = std::net::TcpListener::bind(a).with_context(|| format!("bind {a}"))?;
            l.set_nonblocking(true)?;
            let diag = SockDiag::new().context("open a NETLINK_SOCK_DIAG socket")?;
            Ok(Listener::Tcp(
                TcpListener::from_std(l)?,
                opts.web_server_addrs.clone(),
                std::sync::Mutex::new(diag),
            ))
        }
    }
}

impl Listener {
    async fn accept(
        &self,
        shared: &Arc<Shared>,
        gate: &Arc<Gate>,
        conns: &mut tokio::task::JoinSet<()>,
        permit: tokio::sync::OwnedSemaphorePermit,
    ) -> std::io::Result<()> {
        let shared = shared.clone();
        match self {
            Listener::Unix(l) => {
                let (s, _) = l.accept().await?;
                let cred = s.peer_cred()?;
                let uid = cred.uid();
                let peer = Peer {
                    uid: Some(uid),
                    desc: match cred.pid() {
                        Some(pid) => format!("uid {uid} pid {pid}"),
                        None => format!("uid {uid}"),
                    },
                };
                if !gate.unix_allowed(uid) {
                    gate.refuse(
                        &peer,
                        format_args!(
                            "uid {uid} may not speak FastCGI to the gateway (--allow-user)"
                        ),
                    );
                    return Ok(());
                }
                let Some(held) = gate.hold(&peer) else {
                    return Ok(());
                };
                let (r, w) = s.into_split();
                conns.spawn(async move {
                    crate::conn::serve(shared, r, w, peer).await;
                    drop(held);
                    drop(permit);
                });
            }
            Listener::Tcp(l, allowed, diag) => {
                let (s, addr) = l.accept().await?;
                if !allowed.is_empty() && !allowed.contains(&addr.ip()) {
                    log::line(format_args!(
                        "refused a connection from {addr}: not in FCGI_WEB_SERVER_ADDRS"
                    ));
                    return Ok(());
                }
                let Some(peer) = tcp_peer(&s, addr, allowed, gate, diag) else {
                    return Ok(());
                };
                let Some(held) = gate.hold(&peer) else {
                    return Ok(());
                };
                let _ = s.set_nodelay(true);
                let (r, w) = s.into_split();
                conns.spawn(async move {
                    crate::conn::serve(shared, r, w, peer).await;
                    drop(held);
                    drop(permit);
                });
            }
        }
        Ok(())
    }
}

/// Who is behind an accepted TCP connection, if they may speak FastCGI:
/// the owner of the peer's socket must be an allowed uid (see
/// [`crate::peer`]). A few microseconds: one netlink round trip, answered
/// by the kernel synchronously.
fn tcp_peer(
    s: &tokio::net::TcpStream,
    addr: std::net::SocketAddr,
    web_servers: &[std::net::IpAddr],
    gate: &Gate,
    diag: &std::sync::Mutex<SockDiag>,
) -> Option<Peer> {
    let unknown = Peer {
        uid: None,
        desc: addr.to_string(),
    };
    let owner = s.local_addr().and_then(|local| {
        diag.lock()
            .unwrap_or_else(|e| e.into_inner())
            .owner(local, addr)
    });
    match owner {
        Ok(Owner::Uid(uid)) => {
            let peer = Peer {
                uid: Some(uid),
                desc: format!("{addr} uid {uid}"),
            };
            if gate.tcp_allowed(uid) {
                return Some(peer);
            }
            gate.refuse(
                &peer,
                format_args!(
                    "uid {uid} may not speak FastCGI to the gateway (allowed: {:?}; --allow-user)",
                    gate.allowed_uids()
                ),
            );
        }
        // A web server on another host (explicitly listed): no local owner.
        Ok(Owner::NotLocal) if web_servers.contains(&addr.ip()) && !addr.ip().is_loopback() => {
            return Some(Peer {
                uid: None,
                desc: format!("{addr} (FCGI_WEB_SERVER_ADDRS)"),
            })
        }
        Ok(Owner::NotLocal) => gate.refuse(
            &unknown,
            format_args!("no socket of this host's network namespace: its owner cannot be checked (a remote web server must be listed in FCGI_WEB_SERVER_ADDRS)"),
        ),
        Ok(Owner::Gone) => gate.refuse(
            &unknown,
            format_args!("its socket is already closed: no owner to check"),
        ),
        Err(e) => gate.refuse(
            &unknown,
            format_args!("looking the owner of its socket up: {e}"),
        ),
    }
    None
}

/// Build a multi-threaded runtime and [`run`] on it (for callers that are
/// not async themselves, such as the `corral` command).
pub fn run_blocking(opts: Options, sandboxes: Box<dyn Sandboxes>) -> anyhow::Result<()> {
    // Every thread a batch task: woken by nginx or by a script's output, the
    // gateway runs when they block instead of preempting them (a script's
    // output and its end are then read in one wake-up; see
    // `corral_sandbox::spawn::batch_scheduling`).
    corral_sandbox::spawn::batch_scheduling();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("corral-gateway")
        .on_thread_start(corral_sandbox::spawn::batch_scheduling)
        .build()?;
    // On a worker, not on this thread: `block_on` would keep the accept
    // loop here, and every connection (nginx opens one per request) would
    // then cost a wake-up of this thread and a hand-over to a worker.
    rt.block_on(async { rt.spawn(run(opts, sandboxes)).await })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_listen_addresses() {
        assert_eq!(
            "unix:/run/g.sock".parse::<Listen>(),
            Ok(Listen::Unix(PathBuf::from("/run/g.sock")))
        );
        assert_eq!(
            "tcp:127.0.0.1:9000".parse::<Listen>(),
            Ok(Listen::Tcp("127.0.0.1:9000".parse().unwrap()))
        );
        assert_eq!(
            "tcp:[::1]:9000".parse::<Listen>(),
            Ok(Listen::Tcp("[::1]:9000".parse().unwrap()))
        );
        for bad in [
            "unix:rel.sock",
            "tcp:localhost:9000",
            "tcp:127.0.0.1",
            "/run/g.sock",
            "",
        ] {
            assert!(bad.parse::<Listen>().is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn parses_fcgi_web_server_addrs() {
        let v = parse_web_server_addrs("127.0.0.1, ::1,,127.0.0.3").unwrap();
        assert_eq!(v.len(), 3);
        assert!(parse_web_server_addrs("").unwrap().is_empty());
        let e = parse_web_server_addrs("127.0.0.1,web1").unwrap_err();
        assert!(e.contains("\"web1\""), "{e}");
    }
}
