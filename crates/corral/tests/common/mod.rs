//! Shared harness for corral's integration tests (run as root, for real);
//! corral-bench's tests use it too (`#[path]`).
//! Every test gets its own config dir, state dir and cgroup parent
//! (`corral/t<pid>-<n>`), and on drop takes down every tenant it brought up
//! and removes its cgroups, also when the test panics.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

static N: AtomicU32 = AtomicU32::new(0);

/// Test tenants created by scripts/test-users.sh.
pub const T1: &str = "corral-t1";
pub const T2: &str = "corral-t2";
pub const T3: &str = "corral-t3";

/// The corral binary under test: the one next to the test binary's
/// directory (target/<host>/debug/deps/..), where scripts/test.sh builds
/// the front program (crates/corral-front, a workspace of its own, so not
/// a Cargo binary of this package) and Cargo puts corral-cli and
/// corral-init.
pub fn corral_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let p = exe.parent().and_then(Path::parent).unwrap().join("corral");
    assert!(
        p.is_file(),
        "{} missing: build corral first (scripts/lib.sh: build_front debug, and cargo build -p corral --bins with the same \
         --target; scripts/test.sh builds the whole workspace)",
        p.display()
    );
    p
}

pub fn ensure_users() {
    let ok = [T1, T2, T3].iter().all(|u| {
        corral_users::Db::system()
            .user_by_name(u)
            .ok()
            .flatten()
            .is_some()
    });
    if !ok {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/test-users.sh");
        let st = Command::new(&script)
            .status()
            .expect("run scripts/test-users.sh");
        assert!(st.success(), "scripts/test-users.sh failed");
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "corral's integration tests build namespaces and cgroups: run them as root"
    );
}

pub struct Env {
    pub state: tempfile::TempDir,
    pub config: tempfile::TempDir,
    pub parent: String,
}

/// PHP's programs and libraries in the page cache, as on a server that has
/// run PHP once since its boot. A tenant reads what is not cached through
/// its plan's IO limit (the default plan: 1 MiB/s, docs/limits.md): on a
/// cold cache (a fresh boot, `drop_caches`) a sandboxed php-cgi took longer
/// to fault in its ~40 MB than the gateway's 30 s timeout, and the tests
/// that start PHP failed with a 504. Run once per test binary, on the
/// host (no tenant's limit), for the PHP binaries that are installed.
fn warm_php() {
    static WARM: std::sync::Once = std::sync::Once::new();
    WARM.call_once(|| {
        for bin in ["/usr/bin/php-cgi", "/usr/sbin/php-fpm8.2", "/usr/bin/php"] {
            if Path::new(bin).exists() {
                let _ = Command::new(bin)
                    .arg("-v")
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status();
            }
        }
    });
}

impl Env {
    pub fn new() -> Env {
        require_root();
        ensure_users();
        warm_php();
        let n = N.fetch_add(1, Ordering::Relaxed);
        let base = std::path::Path::new("/var/tmp");
        Env {
            state: tempfile::Builder::new()
                .prefix("corral-test-state")
                .tempdir_in(base)
                .unwrap(),
            config: tempfile::Builder::new()
                .prefix("corral-test-config")
                .tempdir_in(base)
                .unwrap(),
            parent: format!("corral/t{}-{n}", std::process::id()),
        }
    }

    pub fn state_dir(&self) -> &Path {
        self.state.path()
    }

    pub fn config_dir(&self) -> &Path {
        self.config.path()
    }

    pub fn cmd(&self) -> Command {
        let mut c = Command::new(corral_bin());
        c.env("CORRAL_STATE_DIR", self.state.path())
            .env("CORRAL_CONFIG_DIR", self.config.path())
            .env("CORRAL_CGROUP_PARENT", &self.parent)
            .env_remove("CORRAL_INIT");
        c
    }

    /// Another program (`taskset`, `nice`, a shell that execs corral) with
    /// the same environment [`Env::cmd`] gives corral: this test's state
    /// dir, config dir and cgroup parent.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        for (k, v) in self.cmd().get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        c
    }

    /// `corral stats TENANT --json` over a `window_ms` window: the tenant's row.
    pub fn stats(&self, tenant: &str, window_ms: u64) -> serde_json::Value {
        let v: serde_json::Value = serde_json::from_str(&self.ok(&[
            "stats",
            tenant,
            "--json",
            "--interval-ms",
            &window_ms.to_string(),
        ]))
        .unwrap();
        v[0].clone()
    }

    /// Run corral with `args`; returns the output (does not check status).
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("spawn corral")
    }

    /// Run corral and assert success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "corral {args:?} failed ({:?}):\nstdout: {}\nstderr: {}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    }

    /// `corral run TENANT -- sh -c SCRIPT`, asserting success; returns stdout.
    pub fn sh(&self, tenant: &str, script: &str) -> String {
        self.ok(&["run", tenant, "--", "/bin/sh", "-c", script])
    }

    pub fn write_config(&self, rel: &str, text: &str) {
        let p = self.config.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// The built-in default profile with a per-test disk /tmp location.
    pub fn default_profile_with(&self, extra: &str) {
        let tmp = self.state.path().join("tmp");
        let default_dir = "dir = \"/var/lib/corral/tmp/$USER\"";
        let sessions = "src = \"/var/lib/corral/php-sessions/$USER\"";
        for moved in [default_dir, sessions] {
            assert!(
                corral_profile::DEFAULT_PROFILE.contains(moved),
                "the default profile's {moved} moved"
            );
        }
        // `extra` is appended: use it for tables such as [[mount]].
        let text = format!("{}\n{extra}\n", corral_profile::DEFAULT_PROFILE)
            .replace(default_dir, &format!("dir = \"{}/$USER\"", tmp.display()))
            .replace(
                sessions,
                &format!("src = \"{}/$USER\"", self.sessions_dir().display()),
            );
        self.write_config("profile.toml", &text);
    }

    /// Where [`Env::default_profile_with`] puts the tenants' PHP session
    /// directories (`<sessions_dir>/<tenant>`).
    pub fn sessions_dir(&self) -> PathBuf {
        self.state.path().join("php-sessions")
    }

    pub fn state(&self, tenant: &str) -> serde_json::Value {
        let p = self
            .state
            .path()
            .join("tenants")
            .join(tenant)
            .join("state.json");
        serde_json::from_slice(
            &std::fs::read(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display())),
        )
        .unwrap()
    }

    pub fn init_pid(&self, tenant: &str) -> i32 {
        self.state(tenant)["init_pid"].as_i64().unwrap() as i32
    }

    /// cgroup directories of this test's parent that exist right now.
    pub fn cgroup_dirs(&self) -> Vec<PathBuf> {
        let mut v = Vec::new();
        if let Ok(rd) = std::fs::read_dir("/sys/fs/cgroup") {
            for e in rd.flatten() {
                let p = e.path().join(&self.parent);
                if p.is_dir() {
                    v.push(p);
                }
            }
        }
        v
    }

    pub fn mounts_mentioning_state(&self) -> Vec<String> {
        let s = self.state.path().to_string_lossy().into_owned();
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .filter(|l| l.contains(&s))
            .map(String::from)
            .collect()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let tenants = self.state.path().join("tenants");
        if let Ok(rd) = std::fs::read_dir(&tenants) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let _ = self.run(&["down", &name]);
            }
        }
        // Remove this test's cgroup parents, deepest first.
        for dir in self.cgroup_dirs() {
            let mut dirs: Vec<PathBuf> = walk_dirs(&dir);
            dirs.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
            for d in dirs {
                let _ = std::fs::remove_dir(&d);
            }
        }
        // And corral's own top-level parent, once no test (or tenant) uses
        // it any more: rmdir refuses while anything is below it, and corral
        // recreates it on demand. In every hierarchy, also where this test's
        // parent is already gone (a bench run removes its own).
        if let (Some(top), Ok(rd)) = (
            self.parent.split('/').next().filter(|t| !t.is_empty()),
            std::fs::read_dir("/sys/fs/cgroup"),
        ) {
            for e in rd.flatten() {
                let _ = std::fs::remove_dir(e.path().join(top));
            }
        }
        for m in self.mounts_mentioning_state() {
            if let Some(mp) = m.split(' ').nth(4) {
                let _ = nix::mount::umount2(mp, nix::mount::MntFlags::MNT_DETACH);
            }
        }
    }
}

fn walk_dirs(p: &Path) -> Vec<PathBuf> {
    let mut v = vec![p.to_path_buf()];
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                v.extend(walk_dirs(&e.path()));
            }
        }
    }
    v
}

pub fn uid_of(user: &str) -> u32 {
    corral_users::Db::system()
        .user_by_name(user)
        .unwrap()
        .unwrap()
        .uid
}

pub fn home_of(user: &str) -> PathBuf {
    corral_users::Db::system()
        .user_by_name(user)
        .unwrap()
        .unwrap()
        .home
}

/// Write a file into a tenant's home, owned by the tenant.
pub fn write_home_file(user: &str, rel: &str, content: &str, mode: u32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let u = corral_users::Db::system()
        .user_by_name(user)
        .unwrap()
        .unwrap();
    let p = u.home.join(rel);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
        nix::unistd::chown(parent, Some(u.uid.into()), Some(u.gid.into())).unwrap();
    }
    std::fs::write(&p, content).unwrap();
    nix::unistd::chown(&p, Some(u.uid.into()), Some(u.gid.into())).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    p
}

/// Poll `f` every 50 ms until it holds (true) or `timeout` passes (false).
pub fn wait_until(timeout: std::time::Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    loop {
        if f() {
            return true;
        }
        if start.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A root-owned directory for a test's sockets and logs (services refuse
/// directories others can write), removed afterwards.
pub struct RunDir(pub PathBuf);

impl RunDir {
    pub fn new(tag: &str) -> RunDir {
        let p = PathBuf::from(format!("/run/corral-svc-test-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        RunDir(p)
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A directory a test fills (in a tenant's home, or a default log
/// directory), removed afterwards.
pub struct HomeDir(pub PathBuf);

impl Drop for HomeDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        // /var/log/corral, if this test made it (it is empty then).
        if self.0.starts_with("/var/log/corral") {
            let _ = std::fs::remove_dir("/var/log/corral");
        }
    }
}

/// The shipped example pool (config/services-php-fpm.toml), only its
/// socket and log moved under `run` (a [`RunDir`]).
pub fn shipped_php_fpm(run: &Path) -> String {
    let example = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/services-php-fpm.toml"),
    )
    .unwrap();
    let commented_log = "# log = \"/var/log/corral/$USER/php.log\"";
    assert!(
        example.contains(commented_log),
        "the example's log line moved"
    );
    example
        .replace("/run/corral-fpm/", &format!("{}/fpm/", run.display()))
        .replace(
            commented_log,
            &format!("log = \"{}/log/$USER/php.log\"", run.display()),
        )
}

/// A real nginx on 127.0.0.1 (workers as www-data, the group tenants'
/// FPM sockets are made for); stopped by pid on drop.
pub struct Nginx {
    child: std::process::Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
}

impl Nginx {
    /// nginx passing `*.php` under /srv to the FPM socket `socket`.
    pub fn start(socket: &Path) -> Nginx {
        Nginx::start_http(|port| {
            format!(
                "server {{\n listen 127.0.0.1:{port};\n\
                 location ~ \\.php$ {{ include /etc/nginx/fastcgi_params; fastcgi_param SCRIPT_FILENAME /srv$fastcgi_script_name; fastcgi_pass unix:{sock}; }}\n }}\n",
                sock = socket.display()
            )
        })
    }

    /// nginx with the `server` blocks `servers(port)` gives, inside an
    /// `http` block that has the mime types, no access log and its
    /// temporary files in its own directory.
    pub fn start_http(servers: impl Fn(u16) -> String) -> Nginx {
        use std::process::{Command, Stdio};
        use std::time::Duration;
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path().display();
        for _attempt in 0..5 {
            let port = free_port();
            let conf = format!(
                "worker_processes 1;\nuser www-data www-data;\npid {t}/nginx.pid;\nerror_log {t}/error.log warn;\n\
                 events {{ worker_connections 256; }}\n\
                 http {{\n include /etc/nginx/mime.types;\n access_log off;\n client_body_temp_path {t}/body;\n fastcgi_temp_path {t}/fastcgi;\n\
                 {}\n}}\n",
                servers(port)
            );
            std::fs::write(tmp.path().join("nginx.conf"), conf).unwrap();
            let mut child = Command::new("nginx")
                .arg("-p")
                .arg(tmp.path())
                .arg("-e")
                .arg(tmp.path().join("error.log"))
                .arg("-c")
                .arg(tmp.path().join("nginx.conf"))
                .args(["-g", "daemon off;"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start nginx (Debian: nginx-light)");
            let up = wait_until(Duration::from_secs(10), || {
                std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
                    || child.try_wait().unwrap().is_some()
            });
            if up && child.try_wait().unwrap().is_none() {
                return Nginx {
                    child,
                    port,
                    dir: tmp,
                };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "nginx did not start: {}",
            std::fs::read_to_string(tmp.path().join("error.log")).unwrap_or_default()
        );
    }

    /// GET `path`: (status, body).
    pub fn get(&self, path: &str) -> (u16, String) {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).unwrap();
        let status = raw
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = raw
            .split_once("\r\n\r\n")
            .map_or("", |(_, b)| b)
            .to_string();
        (status, body)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGQUIT: the master takes its workers down with it (SIGKILL
        // would orphan them); SIGKILL only if it is still there after 5 s.
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGQUIT);
        if !wait_until(std::time::Duration::from_secs(5), || {
            self.child.try_wait().ok().flatten().is_some()
        }) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// An HTTP response as [`http_request`] read it.
#[derive(Debug)]
pub struct HttpResp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One HTTP/1.0 request to a web server on 127.0.0.1:`port` (the
/// connection closes after it); `Host: 127.0.0.1` unless `headers` has one.
pub fn http_request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpResp {
    use std::io::{Read, Write};
    let mut c =
        std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect to the web server");
    c.set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .unwrap();
    let mut head = format!("{method} {path} HTTP/1.0\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str("Host: 127.0.0.1\r\n");
    }
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    c.write_all(head.as_bytes()).unwrap();
    // A server may answer (413) before taking the whole body.
    let _ = c.write_all(body);
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).expect("read the response");
    parse_http_response(&raw)
}

pub fn parse_http_response(raw: &[u8]) -> HttpResp {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .expect("status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    HttpResp {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    }
}

/// Signal a child we started, wait (bounded), then SIGKILL it.
pub fn stop_child(
    c: &mut std::process::Child,
    sig: nix::sys::signal::Signal,
    grace: std::time::Duration,
) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(c.id() as i32), sig);
    if !wait_until(grace, || matches!(c.try_wait(), Ok(Some(_)))) {
        let _ = c.kill();
    }
    let _ = c.wait();
}
