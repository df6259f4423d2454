//! nginx as the cgi and neighbours suites run it: a prefix directory of its
//! own (`nginx.conf`, pid, `error.log`, `tmp/`), one worker, optionally
//! pinned to a CPU, on a free port, passing FastCGI requests with Debian's
//! parameters.

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::path::Path;
use std::time::Duration;

use crate::error::{BenchError, Result};
use crate::suites::arg;
use crate::suites::sys::{self, Server};

/// The `fastcgi_param` lines of a location: Debian's fastcgi_params (less
/// HTTPS) plus SCRIPT_FILENAME and REDIRECT_STATUS (php-cgi's
/// force_redirect). The script's three values are the caller's: nginx
/// variables (`$fastcgi_script_name` …) or fixed paths.
pub fn fastcgi_params(script_name: &str, script_filename: &str, document_root: &str) -> String {
    [
        ("QUERY_STRING", "$query_string"),
        ("REQUEST_METHOD", "$request_method"),
        ("CONTENT_TYPE", "$content_type"),
        ("CONTENT_LENGTH", "$content_length"),
        ("SCRIPT_NAME", script_name),
        ("SCRIPT_FILENAME", script_filename),
        ("REQUEST_URI", "$request_uri"),
        ("DOCUMENT_URI", "$document_uri"),
        ("DOCUMENT_ROOT", document_root),
        ("SERVER_PROTOCOL", "$server_protocol"),
        ("REQUEST_SCHEME", "$scheme"),
        ("GATEWAY_INTERFACE", "CGI/1.1"),
        ("SERVER_SOFTWARE", "nginx/$nginx_version"),
        ("REMOTE_ADDR", "$remote_addr"),
        ("REMOTE_PORT", "$remote_port"),
        ("SERVER_ADDR", "$server_addr"),
        ("SERVER_PORT", "$server_port"),
        ("SERVER_NAME", "$server_name"),
        ("REDIRECT_STATUS", "200"),
    ]
    .iter()
    .map(|(k, v)| format!("      fastcgi_param {k} \"{v}\";\n"))
    .collect()
}

/// A port free on `addr` (bound and released; nginx binds it next).
fn free_port(addr: Ipv4Addr) -> Result<u16> {
    let any = SocketAddrV4::new(addr, 0);
    let l = TcpListener::bind(any).map_err(|e| BenchError::io(any.to_string(), e))?;
    Ok(l.local_addr()
        .map_err(|e| BenchError::io(any.to_string(), e))?
        .port())
}

/// How to start one nginx.
pub struct Start<'a> {
    /// The nginx binary.
    pub binary: &'a Path,
    /// Its prefix (created with `tmp/` in it): nginx.conf, pid, error.log.
    pub prefix: &'a Path,
    /// Where its stdout and stderr go.
    pub log: &'a Path,
    /// `taskset -c CPU` when pinning.
    pub cpu: Option<usize>,
    /// The port is picked free on this address (`0.0.0.0`: on every one).
    pub bind: Ipv4Addr,
    /// nginx is up once a connection to this address (on the port) succeeds.
    pub probe: Ipv4Addr,
    /// The suite named in the error.
    pub suite: &'static str,
}

/// Write `conf(port)` as `nginx.conf` for a free port and start nginx with
/// it; retries on another port if the chosen one was taken meanwhile.
pub fn start(s: &Start, conf: impl Fn(u16) -> String) -> Result<(Server, u16)> {
    for d in [s.prefix.to_path_buf(), s.prefix.join("tmp")] {
        std::fs::create_dir_all(&d).map_err(|e| BenchError::io(&d, e))?;
    }
    let conf_path = s.prefix.join("nginx.conf");
    let error_log = s.prefix.join("error.log");
    let mut last = String::new();
    for _ in 0..3 {
        let port = free_port(s.bind)?;
        std::fs::write(&conf_path, conf(port)).map_err(|e| BenchError::io(&conf_path, e))?;
        let argv = vec![
            arg(s.binary),
            "-p".into(),
            arg(s.prefix),
            "-c".into(),
            arg(&conf_path),
            "-e".into(),
            arg(&error_log),
        ];
        let mut c = sys::pinned(s.cpu, &argv);
        c.current_dir(s.prefix);
        let mut server = Server::start("nginx", &mut c, s.log)?;
        let probe = SocketAddrV4::new(s.probe, port);
        match sys::wait_ready(&mut server, Duration::from_secs(10), || {
            TcpStream::connect(probe).is_ok()
        }) {
            Ok(()) => return Ok((server, port)),
            Err(BenchError::Interrupted) => return Err(BenchError::Interrupted),
            Err(e) => last = format!("{e}: {}", sys::log_tail(&error_log, 3)),
        }
    }
    Err(BenchError::suite(
        s.suite,
        format!("nginx did not start: {last}"),
    ))
}
