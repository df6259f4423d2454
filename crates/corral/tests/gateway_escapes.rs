//! The gateway under attack (issue 15, item 6): requests crafted by a
//! tenant, for real (as root, against a real `corral gateway`).
//!
//! * a tenant speaks FastCGI to the gateway itself (TCP on loopback, or a
//!   unix socket it can reach) and forges `REMOTE_USER`, `HTTPS`,
//!   `REMOTE_ADDR`: refused by the peer's uid;
//! * idle, truncated and half-sent connections: closed (and logged) after
//!   the idle timeout; a tenant's connection flood and one allowed uid's
//!   connections cannot take every slot from the web server;
//! * suEXEC checks as the tenant: a symlink in the tenant's web space to a
//!   host path only root can see answers exactly as one to a missing path.
//!
//! The tenant's clients are real processes running as the tenant's uid (a
//! small perl FastCGI pipe: connect, send what is on stdin, copy the answer
//! to stdout until the gateway closes). Everything started here (the
//! gateway, those clients) is stopped by pid, and every file removed, also
//! when a test fails. Only loopback traffic.

mod common;

use common::*;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static N: AtomicU32 = AtomicU32::new(0);

const ENV_CGI: &str = r#"#!/bin/sh
printf 'Content-Type: text/plain\r\n\r\n'
echo "uid=$(id -u)"
echo "remote_user=$REMOTE_USER"
echo "https=$HTTPS"
echo "remote_addr=$REMOTE_ADDR"
"#;

/// Connect (tcp HOST:PORT or unix PATH), send stdin, print "connected" on
/// stderr, copy the answer to stdout until the peer closes.
const CLIENT_PL: &str = r#"
use strict; use IO::Socket::INET; use IO::Socket::UNIX;
my ($kind, $addr) = @ARGV;
my $s = $kind eq 'unix'
  ? IO::Socket::UNIX->new(Peer => $addr, Type => SOCK_STREAM())
  : IO::Socket::INET->new(PeerAddr => $addr, Proto => 'tcp');
die "connect $addr: $!\n" unless $s;
binmode STDIN; binmode STDOUT; binmode $s;
local $/; my $req = <STDIN>;
syswrite($s, $req) if defined $req && length $req;
print STDERR "connected\n";
my $buf;
while (1) { my $n = sysread($s, $buf, 65536); last if !$n; syswrite(STDOUT, $buf); }
print STDERR "closed\n";
"#;

/// A gateway of this test's own, and the tenant clients it started.
struct Gw {
    env: Env,
    tmp: tempfile::TempDir,
    gateway: Option<Child>,
    /// `tcp:127.0.0.1:PORT` or `unix:PATH`.
    listen: String,
    dir_name: String,
    clients: Vec<Child>,
}

impl Gw {
    fn tcp(args: &[&str]) -> Gw {
        let port = free_port();
        Gw::start(&format!("tcp:127.0.0.1:{port}"), args)
    }

    fn unix(args: &[&str]) -> Gw {
        Gw::start("unix:", args)
    }

    fn start(listen: &str, args: &[&str]) -> Gw {
        Gw::start_with_profile(listen, args, "")
    }

    /// With `extra` appended to the default profile (e.g. a [[mount]]).
    fn start_with_profile(listen: &str, args: &[&str], extra: &str) -> Gw {
        let env = Env::new();
        env.default_profile_with(extra);
        let tmp = tempfile::Builder::new()
            .prefix("corral-gwesc-test")
            .tempdir_in("/var/tmp")
            .unwrap();
        // Tenants must reach a unix socket in here (when the test says so).
        std::fs::set_permissions(
            tmp.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o711),
        )
        .unwrap();
        let listen = if listen == "unix:" {
            format!("unix:{}", tmp.path().join("gw.sock").display())
        } else {
            listen.to_string()
        };
        let mut g = Gw {
            env,
            tmp,
            gateway: None,
            listen,
            dir_name: format!(
                "gwesc-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ),
            clients: Vec::new(),
        };
        for t in [T1, T2, T3] {
            let d = g.dir(t);
            std::fs::create_dir_all(&d).unwrap();
            let u = corral_users::Db::system().user_by_name(t).unwrap().unwrap();
            nix::unistd::chown(&d, Some(u.uid.into()), Some(u.gid.into())).unwrap();
            set_mode(&d, 0o755);
        }
        let log = std::fs::File::create(g.tmp.path().join("gateway.log")).unwrap();
        let child = g
            .env
            .cmd()
            .args(["gateway", "--listen", &g.listen, "--timeout", "20"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start corral gateway");
        g.gateway = Some(child);
        let up = wait_until(Duration::from_secs(10), || {
            g.log().contains("listening on")
                || g.gateway.as_mut().unwrap().try_wait().unwrap().is_some()
        });
        assert!(
            up && g.gateway.as_mut().unwrap().try_wait().unwrap().is_none(),
            "the gateway did not start: {}",
            g.log()
        );
        g
    }

    fn dir(&self, tenant: &str) -> PathBuf {
        home_of(tenant).join(&self.dir_name)
    }

    fn script(&self, tenant: &str, name: &str, text: &str) -> PathBuf {
        write_home_file(tenant, &format!("{}/{name}", self.dir_name), text, 0o755)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.tmp.path().join("gateway.log")).unwrap_or_default()
    }

    /// (kind, address) for the perl client.
    fn addr(&self) -> (&str, &str) {
        if let Some(a) = self.listen.strip_prefix("tcp:") {
            ("tcp", a)
        } else {
            ("unix", self.listen.strip_prefix("unix:").unwrap())
        }
    }

    /// A connection from this (root) process: the web server's role.
    fn connect(&self) -> Conn {
        let (kind, addr) = self.addr();
        let c = if kind == "tcp" {
            Conn::Tcp(std::net::TcpStream::connect(addr).expect("connect to the gateway"))
        } else {
            Conn::Unix(std::os::unix::net::UnixStream::connect(addr).expect("connect"))
        };
        c.set_read_timeout(Duration::from_secs(30));
        c
    }

    /// One request as root; the answer, or None if the gateway closed the
    /// connection without one.
    fn request(&self, params: &[(&str, &str)]) -> Option<Answer> {
        let mut c = self.connect();
        c.write_all(&request_bytes(1, params, true)).unwrap();
        let mut raw = Vec::new();
        let _ = c.read_to_end(&mut raw);
        Answer::parse(&raw)
    }

    /// One request as root for `script` (GET, plus `more` params): the
    /// answer and the gateway's log lines written meanwhile.
    fn ask_logged(&self, script: &Path, more: &[(&str, &str)]) -> (Answer, String) {
        let before = self.log().len();
        let mut params = vec![
            ("SCRIPT_FILENAME", script.to_str().unwrap()),
            ("REQUEST_METHOD", "GET"),
        ];
        params.extend_from_slice(more);
        let a = self.request(&params).expect("an answer");
        (a, self.log()[before..].to_string())
    }

    /// Start a client as `tenant` (a real process with the tenant's uid and
    /// gid, no supplementary groups) sending `bytes`; returns its index.
    fn tenant_client(&mut self, tenant: &str, bytes: &[u8]) -> usize {
        let u = corral_users::Db::system()
            .user_by_name(tenant)
            .unwrap()
            .unwrap();
        let (kind, addr) = self.addr();
        let (kind, addr) = (kind.to_string(), addr.to_string());
        let err = std::fs::File::create(self.client_err(self.clients.len())).unwrap();
        let mut c = Command::new("perl")
            .args(["-e", CLIENT_PL, &kind, &addr])
            .current_dir("/")
            .uid(u.uid)
            .gid(u.gid)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .expect("start the tenant's client (perl)");
        c.stdin.take().unwrap().write_all(bytes).unwrap();
        self.clients.push(c);
        self.clients.len() - 1
    }

    fn client_err(&self, i: usize) -> PathBuf {
        self.tmp.path().join(format!("client-{i}.err"))
    }

    fn client_connected(&self, i: usize) -> bool {
        std::fs::read_to_string(self.client_err(i))
            .unwrap_or_default()
            .contains("connected")
    }

    fn client_exited(&mut self, i: usize) -> bool {
        self.clients[i].try_wait().unwrap().is_some()
    }

    /// Wait (bounded) for client `i` to end; its stdout.
    fn client_output(&mut self, i: usize, timeout: Duration) -> Vec<u8> {
        let ended = wait_until(timeout, || self.clients[i].try_wait().unwrap().is_some());
        if !ended {
            let _ = self.clients[i].kill();
        }
        let _ = self.clients[i].wait();
        let mut out = Vec::new();
        if let Some(mut o) = self.clients[i].stdout.take() {
            let _ = o.read_to_end(&mut out);
        }
        assert!(ended, "tenant client {i} still running after {timeout:?}");
        out
    }
}

impl Drop for Gw {
    fn drop(&mut self) {
        for c in &mut self.clients {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            eprintln!("--- gateway log\n{}", self.log());
        }
        if let Some(mut g) = self.gateway.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(g.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let stopped = wait_until(Duration::from_secs(30), || {
                g.try_wait().ok().flatten().is_some()
            });
            if !stopped {
                let _ = g.kill();
            }
            let _ = g.wait();
        }
        for t in [T1, T2, T3] {
            let _ = std::fs::remove_dir_all(self.dir(t));
        }
    }
}

enum Conn {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl Conn {
    fn set_read_timeout(&self, t: Duration) {
        match self {
            Conn::Tcp(s) => s.set_read_timeout(Some(t)).unwrap(),
            Conn::Unix(s) => s.set_read_timeout(Some(t)).unwrap(),
        }
    }
}

impl Read for Conn {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.read(b),
            Conn::Unix(s) => s.read(b),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.write(b),
            Conn::Unix(s) => s.write(b),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What the gateway answered to one request.
#[derive(Debug, PartialEq, Eq)]
struct Answer {
    status: u16,
    body: String,
}

impl Answer {
    /// From the raw FastCGI bytes: None without a complete FCGI_END_REQUEST.
    fn parse(raw: &[u8]) -> Option<Answer> {
        use corral_gateway::fastcgi::record::{RecordDecoder, RecordType};
        let mut dec = RecordDecoder::new();
        let mut input = raw;
        let mut stdout = Vec::new();
        while let Ok(Some(r)) = dec.decode(&mut input) {
            match r.kind {
                RecordType::Stdout => stdout.extend_from_slice(&r.content),
                RecordType::EndRequest => {
                    let text = String::from_utf8_lossy(&stdout).into_owned();
                    let (head, body) = text.split_once("\r\n\r\n")?;
                    let status = head
                        .lines()
                        .find_map(|l| l.strip_prefix("Status: "))
                        .and_then(|s| s.split(' ').next())
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(200);
                    return Some(Answer {
                        status,
                        body: body.to_string(),
                    });
                }
                _ => {}
            }
        }
        None
    }
}

/// A complete FastCGI request (no body).
fn request_bytes(id: u16, params: &[(&str, &str)], end_stdin: bool) -> Vec<u8> {
    use corral_gateway::fastcgi::params::encode_pairs;
    use corral_gateway::fastcgi::record::{
        encode_begin_request, encode_stream, encode_stream_end, Role, Stream,
    };
    let mut out = Vec::new();
    encode_begin_request(id, Role::Responder, false, &mut out);
    let mut p = Vec::new();
    encode_pairs(params.iter().copied(), &mut p).unwrap();
    encode_stream(Stream::Params, id, &p, &mut out);
    encode_stream_end(Stream::Params, id, &mut out);
    if end_stdin {
        encode_stream_end(Stream::Stdin, id, &mut out);
    }
    out
}

/// Log text without each line's leading timestamp.
fn without_times(log: &str) -> String {
    log.lines()
        .map(|l| l.split_once(' ').map_or(l, |(_, rest)| rest))
        .collect::<Vec<_>>()
        .join("\n")
}

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn forged(script: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("SCRIPT_FILENAME", script.display().to_string()),
        ("REQUEST_METHOD", "GET".into()),
        ("REMOTE_USER", "admin".into()),
        ("HTTPS", "on".into()),
        ("REMOTE_ADDR", "10.1.2.3".into()),
    ]
}

fn pairs<'a>(v: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    v.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// A tenant on the host's loopback speaks FastCGI to a TCP gateway itself,
/// forging what only the web server may say (REMOTE_USER, HTTPS,
/// REMOTE_ADDR), for another tenant's script: refused, by its uid, and
/// logged; the web server (root here) is still served.
#[test]
fn a_tenant_cannot_speak_fastcgi_to_a_tcp_gateway() {
    let mut g = Gw::tcp(&[]);
    let script = g.script(T2, "env.cgi", ENV_CGI);
    let params = forged(&script);
    // The web server may set these: it is the one that knows.
    let a = g.request(&pairs(&params)).expect("root is served");
    assert_eq!(a.status, 200, "{a:?}");
    assert!(a.body.contains("remote_user=admin"), "{a:?}");

    let i = g.tenant_client(T1, &request_bytes(1, &pairs(&params), true));
    let out = g.client_output(i, Duration::from_secs(20));
    let answer = Answer::parse(&out);
    assert!(
        answer.is_none(),
        "a tenant's own FastCGI request was served: {answer:?}"
    );
    let log = g.log();
    let uid = uid_of(T1);
    assert!(
        log.lines()
            .any(|l| l.contains("refused") && l.contains(&format!("uid {uid}"))),
        "the refusal names the uid: {log}"
    );
}

/// The same over a unix socket a tenant can reach (a socket mode that is
/// too open): the peer's credentials (SO_PEERCRED) decide; a uid given
/// with --allow-user is served.
#[test]
fn a_unix_socket_peer_must_be_an_allowed_uid() {
    let t3 = T3.to_string();
    let mut g = Gw::unix(&["--socket-mode", "666", "--allow-user", &t3]);
    let script = g.script(T2, "env.cgi", ENV_CGI);
    let params = forged(&script);
    let i = g.tenant_client(T1, &request_bytes(1, &pairs(&params), true));
    let refused = Answer::parse(&g.client_output(i, Duration::from_secs(20)));
    assert!(refused.is_none(), "served to T1: {refused:?}");
    let uid = uid_of(T1);
    assert!(
        g.log()
            .lines()
            .any(|l| l.contains("refused") && l.contains(&format!("uid {uid}"))),
        "{}",
        g.log()
    );
    // The allowed uid (standing for the web server's) is served.
    let i = g.tenant_client(T3, &request_bytes(1, &pairs(&params), true));
    let a = Answer::parse(&g.client_output(i, Duration::from_secs(20)));
    let a = a.expect("the allowed uid is served");
    assert!(
        a.status == 200 && a.body.contains(&format!("uid={}", uid_of(T2))),
        "{a:?}"
    );
    // And root always.
    assert_eq!(g.request(&pairs(&params)).map(|a| a.status), Some(200));
}

/// A tenant opens as many idle connections as the gateway takes
/// (--max-conns): the web server's request must still be answered.
#[test]
fn a_tenant_connection_flood_cannot_starve_the_web_server() {
    let mut g = Gw::tcp(&["--max-conns", "8"]);
    let script = g.script(T1, "ok.cgi", ENV_CGI);
    let flood: Vec<usize> = (0..12).map(|_| g.tenant_client(T1, b"")).collect();
    assert!(
        wait_until(Duration::from_secs(10), || flood
            .iter()
            .all(|&i| g.client_connected(i))),
        "the tenant's clients connected"
    );
    let t = Instant::now();
    let mut c = g.connect();
    c.set_read_timeout(Duration::from_secs(10));
    let params = forged(&script);
    c.write_all(&request_bytes(1, &pairs(&params), true))
        .unwrap();
    let mut raw = Vec::new();
    let _ = c.read_to_end(&mut raw);
    let a = Answer::parse(&raw);
    assert!(
        a.as_ref().is_some_and(|a| a.status == 200),
        "the web server's request after {:?}: {a:?}",
        t.elapsed()
    );
    // The tenant's connections were closed at once, not held.
    assert!(
        wait_until(Duration::from_secs(5), || flood
            .iter()
            .all(|&i| g.client_exited(i))),
        "the tenant's connections are still open"
    );
}

/// Connections that send nothing, a truncated record, unfinished params, or
/// params trickled a byte at a time, are closed after the idle timeout even
/// from an allowed peer, with a log line naming the peer; meanwhile a normal
/// request is answered.
#[test]
fn idle_and_half_sent_connections_are_closed_and_logged() {
    use corral_gateway::fastcgi::params::encode_pairs;
    use corral_gateway::fastcgi::record::{encode_begin_request, encode_stream, Role, Stream};
    let g = Gw::tcp(&["--max-conns", "8", "--idle-timeout", "2"]);
    let script = g.script(T1, "ok.cgi", ENV_CGI);
    let params = forged(&script);
    // Begin + a params record that never ends (no empty FCGI_PARAMS).
    let mut unfinished = Vec::new();
    encode_begin_request(1, Role::Responder, false, &mut unfinished);
    let mut p = Vec::new();
    encode_pairs(pairs(&params), &mut p).unwrap();
    encode_stream(Stream::Params, 1, &p, &mut unfinished);
    // Half a record: a header announcing 100 bytes, 10 of them sent.
    let truncated = [&[1u8, 4, 0, 1, 0, 100, 0, 0][..], &[0u8; 10]].concat();
    // A body that stops half-way (the script waits for the rest).
    let reader = g.script(
        T1,
        "read.cgi",
        "#!/bin/sh\ncat >/dev/null\nprintf 'Content-Type: text/plain\\n\\nread\\n'\n",
    );
    let reader = reader.display().to_string();
    let mut stalled = request_bytes(
        1,
        &[
            ("SCRIPT_FILENAME", reader.as_str()),
            ("REQUEST_METHOD", "POST"),
            ("CONTENT_LENGTH", "100"),
        ],
        false,
    );
    encode_stream(Stream::Stdin, 1, b"0123456789", &mut stalled);
    let mut idle = Vec::new();
    let t = Instant::now();
    for what in [
        &b""[..],
        &b""[..],
        &unfinished,
        &unfinished,
        &truncated,
        &stalled,
    ] {
        let mut c = g.connect();
        c.write_all(what).unwrap();
        idle.push(c);
    }
    // A slow loris: the params a byte at a time, one byte a second (each
    // within the timeout; the whole never is).
    let mut loris = g.connect();
    let loris_bytes = request_bytes(1, &pairs(&params), true);
    let mut loris_closed = None;
    for (n, b) in loris_bytes.iter().enumerate().take(8) {
        if loris.write_all(&[*b]).is_err() {
            loris_closed = Some(n);
            break;
        }
        std::thread::sleep(Duration::from_millis(700));
    }
    // 7 of 8 slots are taken: a normal request is still answered.
    assert_eq!(g.request(&pairs(&params)).map(|a| a.status), Some(200));
    for (n, c) in idle.iter_mut().enumerate() {
        c.set_read_timeout(Duration::from_secs(10));
        let mut b = [0u8; 64];
        let r = c.read(&mut b);
        assert!(
            matches!(r, Ok(0)),
            "connection {n}: {r:?} after {:?}",
            t.elapsed()
        );
    }
    loris.set_read_timeout(Duration::from_secs(10));
    let mut b = [0u8; 64];
    let r = loris.read(&mut b);
    assert!(
        loris_closed.is_some() || matches!(r, Ok(0)),
        "the slow loris is still open: {r:?}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "closed after {:?}",
        t.elapsed()
    );
    let log = g.log();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("idle timeout: "))
        .collect();
    assert!(
        lines.iter().any(|l| l.contains("truncated FastCGI record")),
        "{log}"
    );
    assert!(
        lines.iter().any(|l| l.contains("unfinished FCGI_PARAMS")),
        "{log}"
    );
    assert!(
        lines
            .iter()
            .all(|l| l.contains("127.0.0.1:") && l.contains("uid 0")),
        "every line names the peer: {log}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("FCGI_STDIN stalled for request 1") && l.contains("read.cgi")),
        "{log}"
    );
    assert!(lines.len() >= 7, "{log}");
}

/// One allowed uid (T3 standing for a second web server) cannot take every
/// connection: beyond --max-conns-per-uid its connections are refused at
/// once, and root's request is answered.
#[test]
fn one_allowed_uid_cannot_take_every_connection() {
    let t3 = T3.to_string();
    let mut g = Gw::tcp(&[
        "--max-conns",
        "8",
        "--max-conns-per-uid",
        "4",
        "--allow-user",
        &t3,
        "--idle-timeout",
        "60",
    ]);
    let script = g.script(T1, "ok.cgi", ENV_CGI);
    let held: Vec<usize> = (0..6).map(|_| g.tenant_client(T3, b"")).collect();
    assert!(wait_until(Duration::from_secs(10), || held
        .iter()
        .all(|&i| g.client_connected(i))));
    // Two of six are refused (closed at once), four stay.
    assert!(
        wait_until(Duration::from_secs(5), || held
            .iter()
            .filter(|&&i| g.client_exited(i))
            .count()
            == 2),
        "{}",
        g.log()
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        held.iter().filter(|&&i| g.client_exited(i)).count(),
        2,
        "exactly the connections over the cap were closed"
    );
    let params = forged(&script);
    assert_eq!(g.request(&pairs(&params)).map(|a| a.status), Some(200));
    let uid = uid_of(T3);
    assert!(
        g.log()
            .lines()
            .any(|l| l.contains(&format!("uid {uid}")) && l.contains("--max-conns-per-uid")),
        "{}",
        g.log()
    );
}

/// suEXEC checks run as the tenant: a symlink in T1's web space to a file
/// under a root-only (0700) host directory, and one to a missing file there,
/// (also through a symlinked directory, and with the tenant named by the
/// map) answer the same: status, body and log line.
#[test]
fn a_symlink_cannot_probe_host_paths_only_root_can_see() {
    let hidden = tempfile::Builder::new()
        .prefix("corral-gwesc-hidden")
        .tempdir_in("/var/tmp")
        .unwrap();
    set_mode(hidden.path(), 0o700);
    let secret = hidden.path().join("secret.cgi");
    std::fs::write(&secret, "#!/bin/sh\necho hi\n").unwrap();
    set_mode(&secret, 0o755);
    let missing = hidden.path().join("missing.cgi");

    for mapped in [false, true] {
        let map_args: Vec<String> = if mapped {
            let m = hidden.path().with_extension("map.toml");
            let home = home_of(T1);
            std::fs::write(
                &m,
                format!("[docroots]\n{:?} = {T1:?}\n", home.display().to_string()),
            )
            .unwrap();
            vec!["--map".into(), m.display().to_string()]
        } else {
            Vec::new()
        };
        let args: Vec<&str> = map_args.iter().map(String::as_str).collect();
        let g = Gw::tcp(&args);
        let d = g.dir(T1);
        std::os::unix::fs::symlink(&secret, d.join("exists.cgi")).unwrap();
        std::os::unix::fs::symlink(&missing, d.join("absent.cgi")).unwrap();
        std::os::unix::fs::symlink(hidden.path(), d.join("hdir")).unwrap();
        let ask = |p: PathBuf| {
            let before = g.log().len();
            let a = g
                .request(&[
                    ("SCRIPT_FILENAME", p.to_str().unwrap()),
                    ("REQUEST_METHOD", "GET"),
                ])
                .expect("an answer");
            // The log line, with its time and the name asked for taken out.
            let log = without_times(&g.log()[before..])
                .replace(p.to_str().unwrap(), "PATH")
                .replace(secret.to_str().unwrap(), "TARGET")
                .replace(missing.to_str().unwrap(), "TARGET");
            (a, log)
        };
        let (a, la) = ask(d.join("exists.cgi"));
        let (b, lb) = ask(d.join("absent.cgi"));
        assert_eq!(a, b, "mapped={mapped}: the answers tell the paths apart");
        assert_eq!(la, lb, "mapped={mapped}: the log lines differ");
        assert!(a.status >= 400, "{a:?}");
        let (a, la) = ask(d.join("hdir/secret.cgi"));
        let (b, lb) = ask(d.join("hdir/missing.cgi"));
        assert_eq!(a, b, "mapped={mapped} through a directory link");
        assert_eq!(la.replace("secret", "X"), lb.replace("missing", "X"));
        // The tenant's own script still runs.
        let ok = g.script(T1, "ok.cgi", ENV_CGI);
        let (a, _) = ask(ok);
        assert_eq!(a.status, 200, "mapped={mapped}: {a:?}");
        let _ = std::fs::remove_file(hidden.path().with_extension("map.toml"));
    }
}

/// System CGI directories (issue 19): only the directories the operator
/// lists, only regular files owned by root and not writable by group or
/// others, in root's directories. A request cannot run an arbitrary
/// root-owned program, nor reach one through a link, `..`, a tenant's file
/// or directory placed in a listed directory; a good one runs as the
/// tenant whose document root the request names, inside its sandbox.
#[test]
fn system_cgi_directories_open_no_hole() {
    // Not under /var/tmp: that is a link to /tmp inside the sandboxes.
    let sys = tempfile::Builder::new()
        .prefix("corral-gwesc-sys")
        .tempdir_in("/srv")
        .unwrap();
    let sysd = sys.path().to_path_buf();
    set_mode(&sysd, 0o755);
    let program = |name: &str, mode: u32| {
        let p = sysd.join(name);
        std::fs::write(&p, ENV_CGI).unwrap();
        set_mode(&p, mode);
        p
    };
    let good = program("good.cgi", 0o755);
    program("gw.cgi", 0o775);
    program("setuid.cgi", 0o4755);
    program("noexec.cgi", 0o644);
    let theirs = program("theirs.cgi", 0o755);
    let t1 = corral_users::Db::system()
        .user_by_name(T1)
        .unwrap()
        .unwrap();
    nix::unistd::chown(&theirs, Some(t1.uid.into()), None).unwrap();
    std::os::unix::fs::symlink("/usr/bin/id", sysd.join("link.cgi")).unwrap();
    let sub = sysd.join("sub");
    std::fs::create_dir(&sub).unwrap();
    set_mode(&sub, 0o755);
    std::fs::copy(&good, sub.join("in-tenant-dir.cgi")).unwrap();
    set_mode(&sub.join("in-tenant-dir.cgi"), 0o755);
    nix::unistd::chown(&sub, Some(t1.uid.into()), None).unwrap();
    let open = sysd.join("open");
    std::fs::create_dir(&open).unwrap();
    set_mode(&open, 0o777);
    std::fs::copy(&good, open.join("x.cgi")).unwrap();
    set_mode(&open.join("x.cgi"), 0o755);

    // Removed when the test ends, also when it fails.
    let map = tempfile::Builder::new()
        .prefix("corral-gwesc-sys")
        .suffix(".toml")
        .tempfile_in("/var/tmp")
        .unwrap();
    std::fs::write(
        map.path(),
        format!("system_cgi = [{:?}]\n", sysd.display().to_string()),
    )
    .unwrap();
    // The listed directory is visible in the sandboxes, as /usr/lib/cgi-bin is.
    let bind = format!(
        "[[mount]]\ntype = \"ro-bind\"\nsrc = {:?}\n",
        sysd.display().to_string()
    );
    let g = Gw::start_with_profile("unix:", &["--map", map.path().to_str().unwrap()], &bind);
    let docroot = g.dir(T1);
    let ask = |script: &Path, docroot: &Path| {
        g.ask_logged(script, &[("DOCUMENT_ROOT", docroot.to_str().unwrap())])
    };
    let refused = |script: &Path, docroot: &Path, rule: &str| {
        let (a, log) = ask(script, docroot);
        assert_eq!(a.status, 403, "{} answered {a:?}", script.display());
        assert!(
            log.contains(&format!("rule \"{rule}\"")),
            "{}: expected rule {rule}: {log}",
            script.display()
        );
        log
    };

    // The good program runs as the tenant whose document root it is, in
    // its sandbox (its uid), and the log names that tenant.
    let (a, _) = ask(&good, &docroot);
    assert_eq!(a.status, 200, "{a:?}");
    assert!(a.body.contains(&format!("uid={}", t1.uid)), "{a:?}");
    assert!(g.env.init_pid(T1) > 0, "T1's sandbox is up");

    // Any other root-owned program: root's space is no tenant's.
    refused(Path::new("/usr/bin/id"), &docroot, "min-uid");
    // Out of the listed directory with '..', or through a link.
    let dotdot = format!("{}/../../../usr/bin/id", sysd.display());
    refused(Path::new(&dotdot), &docroot, "dotdot");
    refused(&sysd.join("link.cgi"), &docroot, "symlink-escape");
    // Unsafe files and directories in the listed directory.
    refused(&sysd.join("gw.cgi"), &docroot, "writable");
    refused(&sysd.join("setuid.cgi"), &docroot, "setid");
    refused(&sysd.join("noexec.cgi"), &docroot, "executable");
    let log = refused(&theirs, &docroot, "owner");
    assert!(log.contains(&format!("[{T1} ")), "names the tenant: {log}");
    refused(&sub.join("in-tenant-dir.cgi"), &docroot, "dir-owner");
    refused(&open.join("x.cgi"), &docroot, "dir-writable");
    // A document root in root's space (or none) chooses no tenant.
    refused(&good, Path::new("/var/www"), "min-uid");
    let (a, log) = g.ask_logged(&good, &[]);
    assert_eq!(a.status, 403, "{a:?}");
    assert!(log.contains("rule \"document-root\""), "{log}");
    // A tenant's own link to the system program: the tenant rules apply (the
    // file is root's, and root is no tenant).
    let link = g.dir(T2).join("cgit.cgi");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(uid_of(T2)), None).unwrap();
    refused(&link, &g.dir(T2), "min-uid");
}

/// Interpreters by extension: a tenant's script without a #! line (or its
/// executable bit) runs through the map's interpreter; the other rules on
/// the script still hold, and an interpreter that is not root's is refused.
#[test]
fn interpreters_keep_the_script_rules() {
    let d = tempfile::Builder::new()
        .prefix("corral-gwesc-interp")
        .tempdir_in("/var/tmp")
        .unwrap();
    set_mode(d.path(), 0o755);
    // The tenant's own program, named as an interpreter (removed when the
    // test ends, also when it fails).
    let fake = RemoveOnDrop(write_home_file(
        T2,
        "corral-gwesc-interp.sh",
        "#!/bin/sh\nexec /bin/sh \"$@\"\n",
        0o755,
    ));
    let map = d.path().join("map.toml");
    std::fs::write(
        &map,
        format!(
            "[interpreters]\n\".sh\" = \"/bin/sh\"\n\".evil\" = {:?}\n",
            fake.0.display().to_string()
        ),
    )
    .unwrap();
    let g = Gw::unix(&["--map", map.to_str().unwrap()]);
    let body = ENV_CGI.replace("#!/bin/sh\n", "");
    let plain = write_home_file(T1, &format!("{}/page.sh", g.dir_name), &body, 0o644);
    let (a, _) = g.ask_logged(&plain, &[]);
    assert_eq!(a.status, 200, "{a:?}");
    assert!(a.body.contains(&format!("uid={}", uid_of(T1))), "{a:?}");
    let open = write_home_file(T1, &format!("{}/open.sh", g.dir_name), &body, 0o664);
    let evil = write_home_file(T1, &format!("{}/x.evil", g.dir_name), &body, 0o644);
    for (p, status, rule) in [(&open, 403, "writable"), (&evil, 500, "interpreter")] {
        let (a, log) = g.ask_logged(p, &[]);
        assert_eq!(a.status, status, "{}: {a:?}", p.display());
        assert!(log.contains(&format!("rule \"{rule}\"")), "{log}");
    }
}

/// A file removed when this goes out of scope.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
