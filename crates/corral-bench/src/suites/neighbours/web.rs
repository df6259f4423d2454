//! The server side of the neighbours suite: per tenant a virtual host
//! (`siteN.test`) with a static `index.html` and an `info.php` calling
//! `phpinfo()`, PHP served by the tenant's own PHP-FPM pool started with
//! `corral run --detach` (so it runs inside the tenant's sandbox and
//! cgroup), and one nginx on the host with a server block per host name.
//!
//! The pool listens on a Unix socket in the tenant's home, which the
//! sandbox binds read-write at the same path: nginx on the host reaches it
//! there (`listen.mode = 0666`; the home and the bench directory are
//! traversable).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{BenchError, Result};
use crate::suites::env::{BenchEnv, Tenant};
use crate::suites::sys::{self, Server};
use crate::suites::{nginx, tools};

/// One virtual host and the tenant owning it.
#[derive(Debug, Clone)]
pub struct Site {
    /// `site1` …
    pub name: String,
    /// `site1.test`
    pub host: String,
    pub tenant: Tenant,
    /// Document root in the tenant's home.
    pub root: PathBuf,
    /// PHP-FPM files (configuration, socket, logs) in the tenant's home.
    pub fpm: PathBuf,
}

impl Site {
    pub fn socket(&self) -> PathBuf {
        self.fpm.join("php.sock")
    }
    pub fn pool_conf(&self) -> PathBuf {
        self.fpm.join("pool.conf")
    }
    pub fn fpm_log(&self) -> PathBuf {
        self.fpm.join("php-fpm.log")
    }
}

pub const STATIC_PATH: &str = "/index.html";
pub const PHP_PATH: &str = "/info.php";

/// Workers per pool (`pm = static`): a fixed pool, so results do not
/// depend on process spawning during the run.
pub const FPM_CHILDREN: u32 = 5;

/// The static page of a site (about the article's 140 bytes).
pub fn index_html(site: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html><head><title>{site}</title></head>\n<body><h1>Welcome to {site}</h1><p>static page</p></body></html>\n"
    )
}

/// PHP-FPM's configuration for one site: global section and one pool,
/// every path in the tenant's home (FPM runs as the tenant, so `user` and
/// `group` are not set).
pub fn pool_conf(site: &Site) -> String {
    let d = site.fpm.display();
    format!(
        "; written by corral-bench neighbours\n\
         [global]\npid = {d}/php-fpm.pid\nerror_log = {d}/php-fpm.log\ndaemonize = no\n\n\
         [{name}]\nlisten = {sock}\nlisten.mode = 0666\nlisten.backlog = 4096\n\
         pm = static\npm.max_children = {FPM_CHILDREN}\npm.max_requests = 0\n\
         catch_workers_output = yes\nphp_admin_value[memory_limit] = 128M\n",
        name = site.name,
        sock = site.socket().display(),
    )
}

/// Write every site's pages and pool configuration into its tenant's home.
pub fn install(env: &mut BenchEnv, tenants: &[Tenant]) -> Result<Vec<Site>> {
    let mut sites = Vec::new();
    for (i, t) in tenants.iter().enumerate() {
        let name = format!("site{}", i + 1);
        let site = Site {
            host: format!("{name}.test"),
            root: env.home_dir(t, "neighbours/www")?,
            fpm: env.home_dir(t, "neighbours/fpm")?,
            tenant: t.clone(),
            name,
        };
        env.write_file(
            t,
            &site.root.join("index.html"),
            &index_html(&site.name),
            0o644,
        )?;
        env.write_file(t, &site.root.join("info.php"), "<?php\nphpinfo();\n", 0o644)?;
        env.write_file(t, &site.pool_conf(), &pool_conf(&site), 0o644)?;
        let _ = std::fs::remove_file(site.socket());
        sites.push(site);
    }
    Ok(sites)
}

/// PHP-FPM's binary: `php-fpm` on PATH, else the newest `/usr/sbin/php-fpmX.Y`.
pub fn find_php_fpm() -> Option<PathBuf> {
    if let Some(p) = crate::machine::find_tool("php-fpm") {
        return Some(p);
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir("/usr/sbin")
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with("php-fpm") && n[7..].chars().all(|c| c.is_ascii_digit() || c == '.')
            })
        })
        .collect();
    v.sort();
    v.pop()
}

/// Start the site's pool as a service of its tenant's init (`corral run
/// --detach --log`) and wait for its socket.
pub fn start_fpm(env: &BenchEnv, site: &Site, php_fpm: &Path) -> Result<()> {
    let mut c = env.corral_cmd();
    c.args(["run", "--detach", "--log"])
        .arg(site.fpm.join("stdout.log"))
        .arg(&site.tenant.name)
        .arg("--")
        .arg(php_fpm)
        .args(["-F", "-y"])
        .arg(site.pool_conf());
    sys::run_ok(
        &mut c,
        Duration::from_secs(30),
        "neighbours",
        format!("corral run --detach {} php-fpm", site.tenant.name),
    )?;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        sys::check_interrupt()?;
        let up = std::fs::metadata(site.socket())
            .map(|m| m.file_type().is_socket())
            .unwrap_or(false);
        if up {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            return Err(BenchError::suite(
                "neighbours",
                format!(
                    "{}: php-fpm's socket {} did not appear in 30 s: {}",
                    site.tenant.name,
                    site.socket().display(),
                    sys::log_tail(&site.fpm_log(), 3)
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// nginx.conf: one worker (pinned by the caller), a server block per site
/// listening on every client-facing address.
pub fn nginx_conf(prefix: &Path, listen: &[Ipv4Addr], port: u16, sites: &[Site]) -> String {
    let p = prefix.display();
    let mut s = format!(
        "worker_processes 1;\nworker_rlimit_nofile 16384;\ndaemon off;\npid {p}/nginx.pid;\nerror_log {p}/error.log warn;\n\
         events {{ worker_connections 8192; }}\n\
         http {{\n  access_log off;\n  keepalive_requests 10000000;\n  keepalive_timeout 300s;\n\
         \x20 default_type text/html;\n\
         \x20 client_body_temp_path {p}/tmp/body;\n  proxy_temp_path {p}/tmp/proxy;\n  fastcgi_temp_path {p}/tmp/fastcgi;\n\
         \x20 uwsgi_temp_path {p}/tmp/uwsgi;\n  scgi_temp_path {p}/tmp/scgi;\n"
    );
    for (i, site) in sites.iter().enumerate() {
        s.push_str("  server {\n");
        for a in listen {
            // Socket options go on one `listen` per address only.
            let opts = if i == 0 { " backlog=4096" } else { "" };
            s.push_str(&format!("    listen {a}:{port}{opts};\n"));
        }
        s.push_str(&format!(
            "    server_name {};\n    root {};\n    location = {STATIC_PATH} {{ }}\n    location = {PHP_PATH} {{\n      fastcgi_pass unix:{};\n",
            site.host,
            site.root.display(),
            site.socket().display()
        ));
        s.push_str(&nginx::fastcgi_params(
            "$fastcgi_script_name",
            "$document_root$fastcgi_script_name",
            "$document_root",
        ));
        s.push_str("    }\n    location / { return 404; }\n  }\n");
    }
    s.push_str("}\n");
    s
}

/// Start nginx in `dir`, its port free on every address and `listen[0]`
/// probed (see [`nginx::start`]).
pub fn start_nginx(
    dir: &Path,
    listen: &[Ipv4Addr],
    sites: &[Site],
    cpu: Option<usize>,
) -> Result<(Server, u16)> {
    let binary = tools::NGINX.find().unwrap_or_else(|| "nginx".into());
    let start = nginx::Start {
        binary: &binary,
        prefix: dir,
        log: &dir.join("nginx.log"),
        cpu,
        bind: Ipv4Addr::UNSPECIFIED,
        probe: listen[0],
        suite: "neighbours",
    };
    nginx::start(&start, |port| nginx_conf(dir, listen, port, sites))
}

/// `GET path` with `Host: host` over HTTP/1.0; the body if the answer is 200.
pub fn get(addr: SocketAddrV4, host: &str, path: &str) -> std::result::Result<String, String> {
    let mut s = TcpStream::connect_timeout(&addr.into(), Duration::from_secs(10))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
        .map_err(|e| format!("send: {e}"))?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text.lines().next().unwrap_or("").trim().to_string();
    if !status.contains(" 200") {
        return Err(format!("http://{host}{path}: {status:?}"));
    }
    Ok(text)
}

/// phpinfo()'s `System` row: `Linux <hostname> <release> …`. Inside the
/// tenant's sandbox the hostname is the sandbox's own (its UTS namespace).
pub fn phpinfo_hostname(page: &str) -> Option<String> {
    let i = page.find(">System <")?;
    let rest = &page[i..];
    let v = rest.find("class=\"v\">")? + "class=\"v\">".len();
    rest[v..].split_whitespace().nth(1).map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site() -> Site {
        Site {
            name: "site2".into(),
            host: "site2.test".into(),
            tenant: Tenant {
                name: "bob".into(),
                uid: 1,
                gid: 1,
                home: "/home/bob".into(),
            },
            root: "/home/bob/.b/www".into(),
            fpm: "/home/bob/.b/fpm".into(),
        }
    }

    #[test]
    fn pool_listens_in_the_home_world_writable() {
        let c = pool_conf(&site());
        assert!(
            c.contains("[site2]\nlisten = /home/bob/.b/fpm/php.sock\nlisten.mode = 0666\n"),
            "{c}"
        );
        assert!(c.contains("pm = static\npm.max_children = 5\n"), "{c}");
        assert!(!c.contains("\nuser ="), "{c}");
    }

    #[test]
    fn nginx_has_a_server_block_per_host_on_every_address() {
        let addrs = [Ipv4Addr::new(198, 18, 1, 1), Ipv4Addr::new(198, 18, 1, 5)];
        let c = nginx_conf(Path::new("/p"), &addrs, 8080, &[site(), site()]);
        // The second server block repeats the addresses without options.
        assert!(
            c.contains("  server {\n    listen 198.18.1.1:8080;\n    listen 198.18.1.5:8080;\n"),
            "{c}"
        );
        assert!(c.contains("worker_processes 1;"), "{c}");
        assert!(c.contains("worker_rlimit_nofile 16384;"), "{c}");
        assert!(
            c.contains(
                "listen 198.18.1.1:8080 backlog=4096;\n    listen 198.18.1.5:8080 backlog=4096;"
            ),
            "{c}"
        );
        assert!(
            c.contains("server_name site2.test;\n    root /home/bob/.b/www;"),
            "{c}"
        );
        assert!(
            c.contains("fastcgi_pass unix:/home/bob/.b/fpm/php.sock;"),
            "{c}"
        );
        assert!(
            c.contains("fastcgi_param SCRIPT_FILENAME \"$document_root$fastcgi_script_name\";"),
            "{c}"
        );
    }

    #[test]
    fn hostname_from_phpinfo() {
        let page = "<tr><td class=\"e\">System </td><td class=\"v\">Linux corral-t1 6.18.44 #1 SMP x86_64 </td></tr>";
        assert_eq!(phpinfo_hostname(page).as_deref(), Some("corral-t1"));
        assert_eq!(phpinfo_hostname("no table"), None);
    }
}
