//! Regenerates `tests/fixtures/nginx_*.bin`: the raw bytes a real nginx sends
//! to a FastCGI application for one GET with a query string and one POST
//! with a body.
//!
//! Needs nginx (`apt-get install -y nginx-light`) and root, so it is
//! ignored by default:
//!
//! ```text
//! cargo test -p corral-fastcgi --test nginx_capture -- --ignored
//! ```
//!
//! nginx runs in the foreground as a single process (`master_process off`)
//! with a temporary prefix, listening on a loopback port; `fastcgi_pass`
//! points at a capture listener in this test, which records what arrives,
//! answers with a small response, and closes. nginx is stopped with SIGTERM
//! sent to the pid from its pid file (checked to be the child this test
//! started). The fixtures are checked by `nginx_fixtures.rs`, which needs no
//! nginx.

#[allow(dead_code)]
mod common;

use std::fs;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use corral_fastcgi::record::{encode_stdout, encode_stdout_end};
use corral_fastcgi::{Connection, ConnectionConfig, Event};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// nginx started by this test; stopped on drop, also when a step panics.
struct Nginx {
    child: Child,
    pid_file: PathBuf,
}

impl Nginx {
    fn start(prefix: &Path, conf: &Path) -> Self {
        let child = Command::new(nginx_binary())
            .arg("-p")
            .arg(prefix)
            .arg("-c")
            .arg(conf)
            .arg("-e")
            .arg(prefix.join("error.log"))
            .stdin(Stdio::null())
            .spawn()
            .expect("start nginx");
        Self {
            child,
            pid_file: prefix.join("nginx.pid"),
        }
    }

    /// Stops nginx through the pid in its pid file, which must be our child.
    fn stop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let pid = fs::read_to_string(&self.pid_file)
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok());
        match pid {
            Some(pid) if u32::try_from(pid).ok() == Some(self.child.id()) => {
                let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
            }
            // No pid file yet (or not ours): stop the child we spawned.
            _ => {
                let _ = self.child.kill();
            }
        }
        let _ = self.child.wait();
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        self.stop();
    }
}

fn nginx_binary() -> PathBuf {
    ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|path| path.exists())
        .expect("nginx not found: apt-get install -y nginx-light")
}

fn free_loopback_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local address").port()
}

fn nginx_conf(prefix: &Path, port: u16, upstream_port: u16) -> String {
    let p = prefix.display();
    format!(
        "daemon off;\n\
         master_process off;\n\
         worker_processes 1;\n\
         pid {p}/nginx.pid;\n\
         error_log {p}/error.log info;\n\
         events {{ worker_connections 32; }}\n\
         http {{\n\
             access_log off;\n\
             client_body_temp_path {p}/client_body;\n\
             fastcgi_temp_path {p}/fastcgi;\n\
             proxy_temp_path {p}/proxy;\n\
             uwsgi_temp_path {p}/uwsgi;\n\
             scgi_temp_path {p}/scgi;\n\
             server {{\n\
                 listen 127.0.0.1:{port};\n\
                 server_name fixture.test;\n\
                 root {p}/www;\n\
                 location /cgi-bin/ {{\n\
                     include /etc/nginx/fastcgi_params;\n\
                     fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name;\n\
                     fastcgi_pass 127.0.0.1:{upstream_port};\n\
                 }}\n\
             }}\n\
         }}\n"
    )
}

/// Reads one request from nginx, answers it, and returns the raw bytes read.
fn capture_one(stream: &mut TcpStream) -> Vec<u8> {
    stream
        .set_read_timeout(Some(IO_TIMEOUT))
        .expect("set read timeout");
    let mut connection = Connection::new(ConnectionConfig::default());
    let (mut raw, mut events, mut replies) = (Vec::new(), Vec::new(), Vec::new());
    let mut buf = [0u8; 4096];
    let id = loop {
        let n = stream.read(&mut buf).expect("read from nginx");
        assert!(
            n > 0,
            "nginx closed the connection before the end of FCGI_STDIN"
        );
        raw.extend_from_slice(&buf[..n]);
        connection
            .process(&buf[..n], &mut replies, &mut events)
            .expect("valid FastCGI");
        if let Some(Event::StdinEnd { id }) = events.last() {
            break *id;
        }
    };
    let mut response = Vec::new();
    encode_stdout(
        id,
        b"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\ncaptured\n",
        &mut response,
    );
    encode_stdout_end(id, &mut response);
    let ended = connection
        .end_request(id, 0, &mut response)
        .expect("request active");
    stream.write_all(&response).expect("answer nginx");
    if !ended.keep_conn {
        let _ = stream.shutdown(Shutdown::Both);
    }
    raw
}

/// Sends `request` to nginx and returns the HTTP response.
fn http_exchange(port: u16, request: &[u8]) -> String {
    let deadline = Instant::now() + IO_TIMEOUT;
    let mut stream = loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(stream) => break stream,
            Err(error)
                if error.kind() == ErrorKind::ConnectionRefused && Instant::now() < deadline =>
            {
                thread::sleep(Duration::from_millis(50));
            }
            Err(error) => panic!("connect to nginx on port {port}: {error}"),
        }
    };
    stream
        .set_read_timeout(Some(IO_TIMEOUT))
        .expect("set read timeout");
    stream.write_all(request).expect("send request");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("read response");
    String::from_utf8_lossy(&response).into_owned()
}

#[test]
#[ignore = "needs nginx and root; regenerates tests/fixtures/nginx_*.bin"]
fn capture_nginx_fastcgi_traffic() {
    let prefix = tempfile::Builder::new()
        .prefix("corral-fastcgi-nginx-")
        .tempdir()
        .expect("temp dir");
    fs::create_dir(prefix.path().join("www")).expect("create docroot");

    let upstream = TcpListener::bind("127.0.0.1:0").expect("bind capture listener");
    let upstream_port = upstream.local_addr().expect("capture address").port();
    let (captured_tx, captured_rx) = mpsc::channel();
    let capture = thread::spawn(move || {
        for _ in 0..2 {
            let (mut stream, _) = upstream.accept().expect("accept nginx");
            captured_tx
                .send(capture_one(&mut stream))
                .expect("hand over capture");
        }
    });

    let port = free_loopback_port();
    let conf = prefix.path().join("nginx.conf");
    fs::write(&conf, nginx_conf(prefix.path(), port, upstream_port)).expect("write nginx.conf");
    let mut nginx = Nginx::start(prefix.path(), &conf);

    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    fs::create_dir_all(&fixtures).expect("create fixtures dir");
    let exchanges = [
        (common::GET_FIXTURE, common::get_request().into_bytes()),
        (common::POST_FIXTURE, common::post_request()),
    ];
    for (fixture, request) in exchanges {
        let response = http_exchange(port, &request);
        let log = fs::read_to_string(prefix.path().join("error.log")).unwrap_or_default();
        assert!(
            response.starts_with("HTTP/1.1 200"),
            "{fixture}: {response}\n{log}"
        );
        assert!(response.contains("captured\n"), "{fixture}: {response}");
        let raw = captured_rx
            .recv_timeout(IO_TIMEOUT)
            .expect("captured request");
        fs::write(fixtures.join(fixture), &raw).expect("write fixture");
        eprintln!("{fixture}: {} bytes", raw.len());
    }

    nginx.stop();
    capture.join().expect("capture thread");
    prefix.close().expect("remove temp prefix");
}
