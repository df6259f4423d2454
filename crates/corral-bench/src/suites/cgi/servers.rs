//! The web side of the cgi suite: one nginx (1 worker, 127.0.0.1 on an
//! ephemeral port, temporary prefix) with one location per (mode, tenant,
//! script), an fcgiwrap pool per (mode, tenant), the corral gateway when it
//! exists, and the per-request trampolines. Every server runs in a session of
//! its own, pinned to the server CPU, and is stopped as a process group.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::error::{BenchError, Result};
use crate::suites::env::Tenant;
use crate::suites::sys::{self, Server};
use crate::suites::{arg, nginx};

/// Where things are.
pub struct Layout {
    pub dir: PathBuf,
    pub cpu: Option<usize>,
}

impl Layout {
    pub fn sock_dir(&self, t: &Tenant) -> PathBuf {
        self.dir.join("sock").join(&t.name)
    }
    pub fn socket(&self, mode: &str, t: &Tenant) -> PathBuf {
        self.sock_dir(t).join(format!("{mode}.sock"))
    }
    pub fn gateway_socket(&self) -> PathBuf {
        self.dir.join("sock").join("gateway.sock")
    }
    pub fn wrap(&self, mode: &str, t: &Tenant, script: &str) -> PathBuf {
        self.dir.join("wrap").join(mode).join(&t.name).join(script)
    }
    pub fn url_path(mode: &str, t: &Tenant, script: &str) -> String {
        format!("/{mode}/{}/{script}", t.name)
    }
    fn logs(&self) -> PathBuf {
        self.dir.join("logs")
    }
    pub fn log(&self, name: &str) -> PathBuf {
        self.logs().join(format!("{name}.log"))
    }
    /// `argv` as a command, under `taskset -c CPU` when pinning.
    pub fn pinned(&self, argv: &[String]) -> Command {
        sys::pinned(self.cpu, argv)
    }

    pub fn create(dir: PathBuf, cpu: Option<usize>, tenants: &[Tenant]) -> Result<Layout> {
        let l = Layout { dir, cpu };
        for d in [
            l.dir.clone(),
            l.dir.join("sock"),
            l.dir.join("wrap"),
            l.logs(),
            l.dir.join("nginx"),
            l.dir.join("nginx/tmp"),
        ] {
            mkdir(&d, 0o755)?;
        }
        for t in tenants {
            let d = l.sock_dir(t);
            mkdir(&d, 0o755)?;
            std::os::unix::fs::chown(&d, Some(t.uid), Some(t.gid))
                .map_err(|e| BenchError::io(&d, e))?;
        }
        Ok(l)
    }
}

fn mkdir(d: &Path, mode: u32) -> Result<()> {
    std::fs::create_dir_all(d).map_err(|e| BenchError::io(d, e))?;
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode))
        .map_err(|e| BenchError::io(d, e))
}

/// Install the trampoline for (mode, tenant, script): a copy of cgi-exec at
/// the SCRIPT_FILENAME nginx passes, and `<that>.argv` (see bench/c/cgi-exec.c).
pub fn install_trampoline(
    l: &Layout,
    cgi_exec: &Path,
    mode: &str,
    t: &Tenant,
    script: &Path,
    prefix: &[String],
) -> Result<()> {
    let name = script
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("script");
    let dst = l.wrap(mode, t, name);
    if let Some(parent) = dst.parent() {
        mkdir(parent, 0o755)?;
        if let Some(pp) = parent.parent() {
            mkdir(pp, 0o755)?;
        }
    }
    std::fs::copy(cgi_exec, &dst).map_err(|e| BenchError::io(&dst, e))?;
    std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| BenchError::io(&dst, e))?;
    let mut bytes = Vec::new();
    let real = arg(script);
    for a in std::iter::once(&real)
        .chain(prefix.iter())
        .chain(std::iter::once(&real))
    {
        bytes.extend_from_slice(a.as_bytes());
        bytes.push(0);
    }
    let argv = PathBuf::from(format!("{}.argv", dst.display()));
    std::fs::write(&argv, bytes).map_err(|e| BenchError::io(&argv, e))?;
    std::fs::set_permissions(&argv, std::fs::Permissions::from_mode(0o644))
        .map_err(|e| BenchError::io(&argv, e))
}

/// Wait for a Unix socket to appear, then let the nginx worker (nobody) in.
fn open_socket(server: &mut Server, sock: &Path) -> Result<()> {
    sys::wait_ready(server, Duration::from_secs(10), || {
        std::fs::metadata(sock)
            .map(|m| m.file_type().is_socket())
            .unwrap_or(false)
    })?;
    std::fs::set_permissions(sock, std::fs::Permissions::from_mode(0o666))
        .map_err(|e| BenchError::io(sock, e))
}

/// Start an fcgiwrap pool of `workers` for (mode, tenant).
pub fn start_fcgiwrap(
    l: &Layout,
    fcgiwrap: &Path,
    mode: &str,
    t: &Tenant,
    as_tenant: bool,
    workers: usize,
) -> Result<Server> {
    let sock = l.socket(mode, t);
    let argv = vec![
        arg(fcgiwrap),
        "-c".into(),
        workers.to_string(),
        "-s".into(),
        format!("unix:{}", sock.display()),
    ];
    let mut c = l.pinned(&argv);
    c.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .current_dir("/");
    if as_tenant {
        sys::as_user(&mut c, t.uid, t.gid);
    }
    let mut s = Server::start(
        &format!("fcgiwrap {mode} {}", t.name),
        &mut c,
        &l.log(&format!("fcgiwrap-{mode}-{}", t.name)),
    )?;
    open_socket(&mut s, &sock)?;
    Ok(s)
}

/// Whether `corral gateway` exists in this build (`--help` succeeds).
pub fn gateway_available(corral: &Path) -> bool {
    let mut c = Command::new(corral);
    c.args(["gateway", "--help"]);
    sys::run_bounded(&mut c, Duration::from_secs(10), sys::Output::Discard)
        .map(|f| f.success())
        .unwrap_or(false)
}

/// Start `corral gateway --listen unix:…` with the run's state and config.
pub fn start_gateway(l: &Layout, corral: &Path, global: &[String]) -> Result<Server> {
    let sock = l.gateway_socket();
    let mut argv = vec![arg(corral)];
    argv.extend(global.iter().cloned());
    argv.extend([
        "gateway".into(),
        "--listen".into(),
        format!("unix:{}", sock.display()),
    ]);
    let mut c = l.pinned(&argv);
    c.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .current_dir("/");
    let mut s = Server::start("corral gateway", &mut c, &l.log("gateway"))?;
    open_socket(&mut s, &sock)?;
    Ok(s)
}

/// One nginx location.
pub struct Location {
    pub path: String,
    pub socket: PathBuf,
    pub script_filename: PathBuf,
    pub document_root: PathBuf,
    pub extra: Vec<(String, String)>,
}

/// nginx.conf for `locations` on 127.0.0.1:`port`.
pub fn nginx_conf(prefix: &Path, port: u16, locations: &[Location]) -> String {
    let p = prefix.display();
    let mut s = format!(
        "worker_processes 1;\ndaemon off;\npid {p}/nginx.pid;\nerror_log {p}/error.log warn;\n\
         events {{ worker_connections 4096; }}\n\
         http {{\n  access_log off;\n  keepalive_requests 10000000;\n  keepalive_timeout 300s;\n\
         \x20 client_body_temp_path {p}/tmp/body;\n  proxy_temp_path {p}/tmp/proxy;\n  fastcgi_temp_path {p}/tmp/fastcgi;\n\
         \x20 uwsgi_temp_path {p}/tmp/uwsgi;\n  scgi_temp_path {p}/tmp/scgi;\n\
         \x20 server {{\n    listen 127.0.0.1:{port} backlog=4096;\n    server_name localhost;\n"
    );
    for l in locations {
        s.push_str(&format!(
            "    location = {} {{\n      fastcgi_pass unix:{};\n",
            l.path,
            l.socket.display()
        ));
        s.push_str(&nginx::fastcgi_params(
            &l.path,
            &l.script_filename.display().to_string(),
            &l.document_root.display().to_string(),
        ));
        for (k, v) in &l.extra {
            s.push_str(&format!("      fastcgi_param {k} \"{v}\";\n"));
        }
        s.push_str("    }\n");
    }
    s.push_str("    location / { return 404; }\n  }\n}\n");
    s
}

/// Start nginx on 127.0.0.1 (see [`nginx::start`]).
pub fn start_nginx(l: &Layout, nginx: &Path, locations: &[Location]) -> Result<(Server, u16)> {
    let prefix = l.dir.join("nginx");
    let start = nginx::Start {
        binary: nginx,
        prefix: &prefix,
        log: &l.log("nginx"),
        cpu: l.cpu,
        bind: Ipv4Addr::LOCALHOST,
        probe: Ipv4Addr::LOCALHOST,
        suite: "cgi",
    };
    nginx::start(&start, |port| nginx_conf(&prefix, port, locations))
}

/// `GET path` over HTTP/1.0; `Ok(())` if the answer is 200 and contains `expect`.
pub fn check(port: u16, path: &str, expect: &str) -> std::result::Result<(), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .map_err(|e| format!("send: {e}"))?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&buf);
    let status = text.lines().next().unwrap_or("").trim().to_string();
    if !status.contains(" 200") {
        return Err(format!("{path}: {status:?}"));
    }
    if !text.contains(expect) {
        let body: String = text.chars().take(200).collect();
        return Err(format!("{path}: unexpected body {body:?}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_conf_has_one_exact_location_per_entry() {
        let loc = Location {
            path: "/bare/alice/helloworld".into(),
            socket: "/w/sock/alice/bare.sock".into(),
            script_filename: "/w/wrap/bare/alice/helloworld".into(),
            document_root: "/home/alice/x".into(),
            extra: vec![],
        };
        let c = nginx_conf(Path::new("/w/nginx"), 8080, &[loc]);
        assert!(c.contains("listen 127.0.0.1:8080"), "{c}");
        assert!(c.contains("worker_processes 1;"));
        assert!(c.contains("location = /bare/alice/helloworld {"));
        assert!(c.contains("fastcgi_pass unix:/w/sock/alice/bare.sock;"));
        assert!(c.contains("fastcgi_param SCRIPT_FILENAME \"/w/wrap/bare/alice/helloworld\";"));
        assert!(c.contains("fastcgi_param REDIRECT_STATUS \"200\";"));
        assert!(c.contains("fastcgi_temp_path /w/nginx/tmp/fastcgi;"));
    }

    #[test]
    fn trampoline_argument_file_is_nul_separated() {
        let dir = tempfile::tempdir().unwrap();
        let l = Layout {
            dir: dir.path().to_path_buf(),
            cpu: None,
        };
        let fake = dir.path().join("cgi-exec");
        std::fs::write(&fake, b"#!/bin/true\n").unwrap();
        let t = Tenant {
            name: "alice".into(),
            uid: 1,
            gid: 1,
            home: "/home/alice".into(),
        };
        install_trampoline(
            &l,
            &fake,
            "bubblewrap",
            &t,
            Path::new("/home/alice/cgi/hello"),
            &["/usr/bin/bwrap".into(), "--".into()],
        )
        .unwrap();
        let argv = std::fs::read(l.dir.join("wrap/bubblewrap/alice/hello.argv")).unwrap();
        assert_eq!(
            argv,
            b"/home/alice/cgi/hello\0/usr/bin/bwrap\0--\0/home/alice/cgi/hello\0"
        );
    }
}
