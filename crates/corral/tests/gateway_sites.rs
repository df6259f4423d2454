//! Real sites through `corral gateway` (issue 19), for real (as root):
//!
//! * the shipped web server snippets — config/nginx-corral.conf,
//!   apache-corral.conf, lighttpd-corral.conf, nginx-corral-git.conf — used
//!   as shipped (only the socket, the port and the site's paths rewritten)
//!   in front of a real nginx, Apache 2.4 and lighttpd: a CGI and a php-cgi
//!   page answer 200 with no error log line, a 1 MiB upload goes through;
//! * cgit and gitweb from Debian's packages as system CGI programs for a
//!   tenant: pages identical to plain fcgiwrap's (timestamps aside);
//! * dropped request variables are logged once per name, with their rule;
//! * the access log has one correct line per request of an h2load run.
//!
//! Every server listens on 127.0.0.1 with its own config, pid and log
//! files in a temp dir, and is stopped by pid afterwards (also when a test
//! fails); the site's files are removed.

mod common;

use common::*;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

static N: AtomicU32 = AtomicU32::new(0);

const HELLO_CGI: &str = "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\necho \"hello uid=$(id -u) sf=$SCRIPT_FILENAME\"\n";

/// No #! line, not executable: runs through the map's interpreter.
const PAGE_PHP: &str =
    "<?php echo 'php uid=', posix_getuid(), ' sf=', $_SERVER['SCRIPT_FILENAME'], \"\\n\";\n";

const UPLOAD_CGI: &str =
    "#!/bin/sh\nn=$(wc -c | tr -d ' ')\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\necho \"got=$n\"\n";

/// The gateway's map for these sites.
const MAP: &str = r#"
system_cgi = ["/usr/lib/cgit", "/usr/share/gitweb"]
pass_env = ["CGIT_CONFIG", "GITWEB_CONFIG"]
[interpreters]
".php" = "/usr/bin/php-cgi"
"#;

/// A gateway (unix socket of group www-data, a map, an access log), the
/// site's directory in T1's home standing for the snippets' `/home/alice`,
/// and the web servers started for it.
struct Site {
    env: Env,
    tmp: tempfile::TempDir,
    dir_name: String,
    gateway: Option<Child>,
    servers: Vec<Child>,
    /// Error logs of the servers, printed when a test fails.
    error_logs: Vec<PathBuf>,
}

impl Site {
    fn start(map: &str) -> Site {
        let env = Env::new();
        env.default_profile_with("");
        let tmp = tempfile::Builder::new()
            .prefix("corral-sites-test")
            .tempdir_in("/var/tmp")
            .unwrap();
        // The web servers' workers (www-data) reach the socket in here.
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        let mut s = Site {
            env,
            tmp,
            dir_name: format!(
                "gwsites-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ),
            gateway: None,
            servers: Vec::new(),
            error_logs: Vec::new(),
        };
        for d in [s.root(), s.root().join("public_html")] {
            std::fs::create_dir_all(&d).unwrap();
            let u = corral_users::Db::system()
                .user_by_name(T1)
                .unwrap()
                .unwrap();
            nix::unistd::chown(&d, Some(u.uid.into()), Some(u.gid.into())).unwrap();
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::write(s.tmp.path().join("map.toml"), map).unwrap();
        let log = std::fs::File::create(s.tmp.path().join("gateway.log")).unwrap();
        let child = s
            .env
            .cmd()
            .args(["gateway", "--listen"])
            .arg(format!("unix:{}", s.socket().display()))
            .args(["--socket-group", "www-data", "--map"])
            .arg(s.tmp.path().join("map.toml"))
            .arg("--access-log")
            .arg(s.access_log())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start corral gateway");
        s.gateway = Some(child);
        let up = wait_until(Duration::from_secs(10), || {
            s.log().contains("listening on")
                || s.gateway.as_mut().unwrap().try_wait().unwrap().is_some()
        });
        assert!(
            up && s.socket().exists(),
            "the gateway did not start: {}",
            s.log()
        );
        s
    }

    /// The site's directory: what the snippets call /home/alice.
    fn root(&self) -> PathBuf {
        home_of(T1).join(&self.dir_name)
    }

    /// A file of the site (owned by T1), `rel` below [`Site::root`].
    fn file(&self, rel: &str, text: &str, mode: u32) -> PathBuf {
        write_home_file(T1, &format!("{}/{rel}", self.dir_name), text, mode)
    }

    fn socket(&self) -> PathBuf {
        self.tmp.path().join("gw.sock")
    }

    fn access_log(&self) -> PathBuf {
        self.tmp.path().join("access.log")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.tmp.path().join("gateway.log")).unwrap_or_default()
    }

    /// A directory of the test's own for one server, writable by www-data.
    fn server_dir(&self, name: &str) -> PathBuf {
        let d = self.tmp.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        let u = corral_users::Db::system()
            .user_by_name("www-data")
            .unwrap()
            .expect("the www-data user");
        nix::unistd::chown(&d, Some(u.uid.into()), Some(u.gid.into())).unwrap();
        d
    }

    /// config/NAME as shipped, with the gateway's socket and /home/alice
    /// replaced by this test's.
    fn shipped(&self, name: &str) -> String {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../config")
            .join(name);
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(
            text.contains("/run/corral-gateway/gateway.sock"),
            "{name} names the gateway's socket"
        );
        text.replace(
            "/run/corral-gateway/gateway.sock",
            self.socket().to_str().unwrap(),
        )
        .replace("/home/alice", self.root().to_str().unwrap())
    }

    /// Start `cmd` (a web server in the foreground) and wait until `port`
    /// answers.
    fn server(&mut self, mut cmd: Command, port: u16, error_log: PathBuf, name: &str) {
        let out = std::fs::File::create(self.tmp.path().join(format!("{name}.out"))).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e} (scripts/install-deps.sh installs it)"));
        self.servers.push(child);
        self.error_logs.push(error_log.clone());
        let up = wait_until(Duration::from_secs(15), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
                || self
                    .servers
                    .last_mut()
                    .unwrap()
                    .try_wait()
                    .unwrap()
                    .is_some()
        });
        assert!(
            up && self
                .servers
                .last_mut()
                .unwrap()
                .try_wait()
                .unwrap()
                .is_none(),
            "{name} did not start: {}\n{}",
            std::fs::read_to_string(self.tmp.path().join(format!("{name}.out")))
                .unwrap_or_default(),
            std::fs::read_to_string(&error_log).unwrap_or_default()
        );
    }

    /// nginx with `servers` (server and upstream blocks, shipped) on `port`.
    fn nginx(&mut self, servers: &str, ports: &[u16]) -> PathBuf {
        let d = self.server_dir("nginx");
        let mut text = servers.to_string();
        for p in ports {
            assert!(text.contains("listen 80;"), "a `listen 80;` per server");
            text = text.replacen("listen 80;", &format!("listen 127.0.0.1:{p};"), 1);
        }
        let t = d.display();
        let conf = format!(
            "worker_processes 2;\nuser www-data www-data;\npid {t}/nginx.pid;\nerror_log {t}/error.log warn;\n\
             events {{ worker_connections 512; }}\n\
             http {{\n access_log off;\n client_body_temp_path {t}/body;\n fastcgi_temp_path {t}/fastcgi;\n\
             {text}\n}}\n"
        );
        std::fs::write(d.join("nginx.conf"), conf).unwrap();
        // `include fastcgi_params;` as in /etc/nginx.
        std::fs::copy("/etc/nginx/fastcgi_params", d.join("fastcgi_params")).unwrap();
        let mut c = Command::new("nginx");
        c.arg("-p")
            .arg(&d)
            .arg("-e")
            .arg(d.join("error.log"))
            .arg("-c")
            .arg(d.join("nginx.conf"))
            .args(["-g", "daemon off;"]);
        let log = d.join("error.log");
        self.server(c, ports[0], log.clone(), "nginx");
        log
    }

    /// Apache 2.4 with config/apache-corral.conf included as shipped, the
    /// site's public_html as the document root, on `port`.
    fn apache(&mut self, port: u16) -> PathBuf {
        let d = self.server_dir("apache");
        std::fs::write(d.join("corral.conf"), self.shipped("apache-corral.conf")).unwrap();
        let m = "/usr/lib/apache2/modules";
        let t = d.display();
        let docroot = self.root().join("public_html");
        let docroot = docroot.display();
        let conf = format!(
            "ServerRoot /etc/apache2\nServerName 127.0.0.1\nListen 127.0.0.1:{port}\n\
             PidFile {t}/apache.pid\nDefaultRuntimeDir {t}\nErrorLog {t}/error.log\nLogLevel warn\n\
             User www-data\nGroup www-data\n\
             LoadModule mpm_event_module {m}/mod_mpm_event.so\n\
             LoadModule authz_core_module {m}/mod_authz_core.so\n\
             LoadModule mime_module {m}/mod_mime.so\nTypesConfig /etc/mime.types\n\
             LoadModule proxy_module {m}/mod_proxy.so\n\
             LoadModule proxy_fcgi_module {m}/mod_proxy_fcgi.so\n\
             DocumentRoot {docroot}\n<Directory {docroot}>\n  Require all granted\n</Directory>\n\
             Include {t}/corral.conf\n"
        );
        std::fs::write(d.join("apache2.conf"), conf).unwrap();
        let mut c = Command::new("apache2");
        c.arg("-f").arg(d.join("apache2.conf")).arg("-DFOREGROUND");
        let log = d.join("error.log");
        self.server(c, port, log.clone(), "apache");
        log
    }

    /// lighttpd with config/lighttpd-corral.conf included as shipped.
    fn lighttpd(&mut self, port: u16) -> PathBuf {
        let d = self.server_dir("lighttpd");
        std::fs::write(d.join("corral.conf"), self.shipped("lighttpd-corral.conf")).unwrap();
        let t = d.display();
        let docroot = self.root().join("public_html");
        let conf = format!(
            "server.document-root = {:?}\nserver.bind = \"127.0.0.1\"\nserver.port = {port}\n\
             server.pid-file = \"{t}/lighttpd.pid\"\nserver.errorlog = \"{t}/error.log\"\n\
             server.username = \"www-data\"\nserver.groupname = \"www-data\"\n\
             server.upload-dirs = ( \"{t}\" )\ninclude \"{t}/corral.conf\"\n",
            docroot.display().to_string()
        );
        std::fs::write(d.join("lighttpd.conf"), conf).unwrap();
        let mut c = Command::new("lighttpd");
        c.arg("-D").arg("-f").arg(d.join("lighttpd.conf"));
        let log = d.join("error.log");
        self.server(c, port, log.clone(), "lighttpd");
        log
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- gateway log\n{}", self.log());
            for l in &self.error_logs {
                eprintln!(
                    "--- {}\n{}",
                    l.display(),
                    std::fs::read_to_string(l).unwrap_or_default()
                );
            }
        }
        for s in &mut self.servers {
            stop_child(
                s,
                nix::sys::signal::Signal::SIGTERM,
                Duration::from_secs(10),
            );
        }
        if let Some(mut g) = self.gateway.take() {
            stop_child(
                &mut g,
                nix::sys::signal::Signal::SIGTERM,
                Duration::from_secs(40),
            );
        }
        let _ = std::fs::remove_dir_all(self.root());
    }
}

/// The length of a file now: what is logged after it is new.
fn len(p: &Path) -> usize {
    std::fs::read(p).map(|b| b.len()).unwrap_or(0)
}

/// Lines appended to `p` since it was `from` bytes long.
fn since(p: &Path, from: usize) -> String {
    let b = std::fs::read(p).unwrap_or_default();
    String::from_utf8_lossy(&b[from.min(b.len())..]).into_owned()
}

/// A CGI and a php-cgi page through the web server on `port`: 200, run as
/// the tenant, with the script's path as given (one slash), and not one
/// line in the web server's error log or the gateway's log.
fn cgi_and_php_pages_are_clean(s: &Site, port: u16, error_log: &Path) {
    let cgi = s.file("public_html/hello.cgi", HELLO_CGI, 0o755);
    let php = s.file("public_html/page.php", PAGE_PHP, 0o644);
    let (elog, glog) = (len(error_log), s.log().len());
    let uid = uid_of(T1);
    for _round in 0..2 {
        let r = http_request(port, "GET", "/hello.cgi", &[], b"");
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(
            r.text().trim(),
            format!("hello uid={uid} sf={}", cgi.display())
        );
        let r = http_request(port, "GET", "/page.php", &[], b"");
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(
            r.text().trim(),
            format!("php uid={uid} sf={}", php.display())
        );
    }
    assert_eq!(since(error_log, elog), "", "the web server's error log");
    assert_eq!(&s.log()[glog..], "", "the gateway's log");
}

#[test]
fn apache_snippet_as_shipped_runs_cgi_and_php_cgi_cleanly() {
    let mut s = Site::start(MAP);
    let port = free_port();
    let log = s.apache(port);
    cgi_and_php_pages_are_clean(&s, port, &log);
}

#[test]
fn lighttpd_snippet_as_shipped_runs_cgi_and_php_cgi_cleanly() {
    let mut s = Site::start(MAP);
    let port = free_port();
    let log = s.lighttpd(port);
    cgi_and_php_pages_are_clean(&s, port, &log);
}

#[test]
fn nginx_snippet_as_shipped_takes_uploads_and_runs_php_cgi() {
    let mut s = Site::start(MAP);
    let port = free_port();
    let conf = s.shipped("nginx-corral.conf");
    let log = s.nginx(&conf, &[port]);
    cgi_and_php_pages_are_clean(&s, port, &log);
    s.file("public_html/upload.cgi", UPLOAD_CGI, 0o755);
    let body = vec![b'x'; 3 << 20];
    let r = http_request(port, "POST", "/upload.cgi", &[], &body);
    assert_eq!(r.status, 200, "a 3 MiB upload: {}", r.text());
    assert_eq!(r.text().trim(), format!("got={}", body.len()));
}

/// A page with what changes from one request to the next masked: cgit's
/// "generated ... at TIME" footer, gitweb's relative ages.
fn masked(page: &str) -> String {
    page.lines()
        .map(|l| {
            if l.contains("generated by") || l.contains(" ago") {
                l.chars()
                    .map(|c| if c.is_ascii_digit() { '0' } else { c })
                    .collect()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A tenant's repository, made by the tenant (fixed commit dates).
fn make_repo(s: &Site, name: &str) {
    let root = s.root();
    let script = format!(
        "set -e\nexport HOME={home} GIT_AUTHOR_DATE='2020-01-02T03:04:05Z' GIT_COMMITTER_DATE='2020-01-02T03:04:05Z'\n\
         cd {root}\nmkdir -p git work\ngit init -q --bare git/{name}.git\n\
         echo 'the {name} repository' > git/{name}.git/description\n\
         git init -q work/{name}\ncd work/{name}\n\
         git -c user.name=Alice -c user.email=alice@example.com commit -q --allow-empty -m 'first commit of {name}'\n\
         echo hello > README\ngit add README\n\
         git -c user.name=Alice -c user.email=alice@example.com commit -q -m 'add README'\n\
         git push -q ../../git/{name}.git HEAD:refs/heads/master\n",
        home = home_of(T1).display(),
        root = root.display()
    );
    let u = corral_users::Db::system()
        .user_by_name(T1)
        .unwrap()
        .unwrap();
    let o = Command::new("/bin/sh")
        .args(["-c", &script])
        .uid(u.uid)
        .gid(u.gid)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "make the repository: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// cgit and gitweb (Debian's packages, root's programs in /usr/lib/cgit and
/// /usr/share/gitweb) for T1's site, through config/nginx-corral-git.conf
/// as shipped and the gateway as system CGI programs: the tenant's
/// configuration files reach them (pass_env), they run as the tenant in its
/// sandbox, and every page is the one plain fcgiwrap (run as the tenant)
/// makes of the same requests, timestamps aside.
#[test]
fn cgit_and_gitweb_as_system_cgi_match_plain_fcgiwrap() {
    let mut s = Site::start(MAP);
    let root = s.root();
    make_repo(&s, "alpha");
    make_repo(&s, "beta");
    s.file(
        "cgitrc",
        &format!(
            "virtual-root=/cgit/\ncss=/cgit-css/cgit.css\nlogo=/cgit-css/cgit.png\nroot-title=Alice's repositories\nscan-path={}/git\n",
            root.display()
        ),
        0o644,
    );
    s.file(
        "gitweb.conf",
        &format!(
            "$projectroot = \"{}/git\";\n$site_name = \"Alice's git\";\n",
            root.display()
        ),
        0o644,
    );
    // Plain fcgiwrap, as the tenant, on a socket of its own.
    let wrap_sock = s.tmp.path().join("fcgiwrap.sock");
    let u = corral_users::Db::system()
        .user_by_name(T1)
        .unwrap()
        .unwrap();
    let wrap_dir = s.tmp.path().join("fcgiwrap");
    std::fs::create_dir(&wrap_dir).unwrap();
    nix::unistd::chown(&wrap_dir, Some(u.uid.into()), Some(u.gid.into())).unwrap();
    let wrap_sock = wrap_dir.join(wrap_sock.file_name().unwrap());
    // umask 0: nginx's workers (www-data) must be able to connect.
    let wrap = Command::new("/bin/sh")
        .arg("-c")
        .arg(format!(
            "umask 0; exec /usr/sbin/fcgiwrap -s unix:{}",
            wrap_sock.display()
        ))
        .uid(u.uid)
        .gid(u.gid)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home_of(T1))
        .stdin(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("start fcgiwrap");
    s.servers.push(wrap);
    assert!(
        wait_until(Duration::from_secs(10), || wrap_sock.exists()),
        "fcgiwrap did not start"
    );

    // Two servers from the shipped snippet: one to the gateway, the other
    // (the same, but to fcgiwrap) for comparison.
    let shipped = s.shipped("nginx-corral-git.conf");
    let plain = shipped
        .replace("corral_gateway_git", "plain_fcgiwrap")
        .replace(s.socket().to_str().unwrap(), wrap_sock.to_str().unwrap());
    let (gw_port, plain_port) = (free_port(), free_port());
    let log = s.nginx(&format!("{shipped}\n{plain}"), &[gw_port, plain_port]);

    let pages = [
        "/cgit/",
        "/cgit/alpha.git/",
        "/cgit/alpha.git/log/",
        "/cgit/alpha.git/tree/README",
        "/cgit/beta.git/commit/",
        "/cgit/alpha.git/plain/README",
        "/gitweb/",
        "/gitweb/?p=alpha.git;a=summary",
        "/gitweb/?p=beta.git;a=log",
        "/gitweb/?p=alpha.git;a=blob_plain;f=README;hb=HEAD",
    ];
    let before = len(&log);
    for page in pages {
        let a = http_request(gw_port, "GET", page, &[], b"");
        let b = http_request(plain_port, "GET", page, &[], b"");
        assert_eq!(a.status, 200, "{page} through the gateway: {}", a.text());
        assert_eq!(b.status, 200, "{page} through fcgiwrap: {}", b.text());
        assert_eq!(a.header("Content-Type"), b.header("Content-Type"), "{page}");
        assert_eq!(masked(&a.text()), masked(&b.text()), "{page}");
    }
    // What the pages show is the tenant's configuration and repositories.
    let index = http_request(gw_port, "GET", "/cgit/", &[], b"").text();
    assert!(
        index.contains("Alice&#39;s repositories") || index.contains("Alice's repositories"),
        "{index}"
    );
    assert!(index.contains("the alpha repository"), "{index}");
    let gitweb = http_request(gw_port, "GET", "/gitweb/", &[], b"").text();
    assert!(gitweb.contains("beta.git"), "{gitweb}");
    let readme = http_request(gw_port, "GET", "/cgit/alpha.git/plain/README", &[], b"");
    assert_eq!(readme.text(), "hello\n");
    assert_eq!(since(&log, before), "", "nginx's error log");
    // Run as the tenant: the access log names it for every request.
    let access = std::fs::read_to_string(s.access_log()).unwrap();
    let lines: Vec<serde_json::Value> = access
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), pages.len() + 3, "{access}");
    for l in &lines {
        assert_eq!(l["tenant"], T1, "{l}");
        assert_eq!(l["status"], 200, "{l}");
    }
    assert!(!s.log().contains("not passed"), "{}", s.log());
    // The system-wide configuration is visible in the sandbox too (the
    // default profile binds it), for sites that name no file of their own.
    if let Ok(host) = std::fs::read_to_string("/etc/cgitrc") {
        assert_eq!(s.env.ok(&["run", T1, "--", "cat", "/etc/cgitrc"]), host);
    }
}

/// A FastCGI param the gateway does not pass is logged once per name, with
/// the rule and (for a plain name) how to pass it; unsafe names are logged
/// as never passed.
#[test]
fn dropped_variables_are_logged_once_with_their_rule() {
    let mut s = Site::start("");
    s.file("public_html/hello.cgi", HELLO_CGI, 0o755);
    let port = free_port();
    let conf = s.shipped("nginx-corral.conf").replace(
        "        fastcgi_param SCRIPT_NAME $cgi_script;\n",
        "        fastcgi_param SCRIPT_NAME $cgi_script;\n        fastcgi_param CGIT_CONFIG /x/cgitrc;\n        fastcgi_param LD_PRELOAD /x/evil.so;\n        fastcgi_param IFS x;\n",
    );
    assert!(conf.contains("CGIT_CONFIG"));
    s.nginx(&conf, &[port]);
    for _ in 0..3 {
        assert_eq!(
            http_request(port, "GET", "/hello.cgi", &[], b"").status,
            200
        );
    }
    let log = s.log();
    let lines = |name: &str| {
        log.lines()
            .filter(|l| l.contains(&format!("request variable {name} not passed")))
            .collect::<Vec<_>>()
    };
    let cgit = lines("CGIT_CONFIG");
    assert_eq!(cgit.len(), 1, "{log}");
    assert!(
        cgit[0].contains("rule \"not-cgi\"") && cgit[0].contains("pass_env = [\"CGIT_CONFIG\"]"),
        "{log}"
    );
    assert!(
        cgit[0].contains(&format!("[{T1} ")),
        "names the tenant: {log}"
    );
    for name in ["LD_PRELOAD", "IFS"] {
        let l = lines(name);
        assert_eq!(l.len(), 1, "{log}");
        assert!(l[0].contains("rule \"unsafe\""), "{log}");
    }
}

/// One correct access log line per request of a 100-request h2load run
/// through nginx (the shipped snippet), plus a refused and a missing one.
#[test]
fn access_log_has_one_correct_line_per_request() {
    let mut s = Site::start(MAP);
    s.file("public_html/hello.cgi", HELLO_CGI, 0o755);
    let port = free_port();
    let conf = s.shipped("nginx-corral.conf");
    s.nginx(&conf, &[port]);
    let o = Command::new("h2load")
        .args(["--h1", "-n", "100", "-c", "4", "-T", "60"])
        .arg(format!("http://127.0.0.1:{port}/hello.cgi?x=1"))
        .output()
        .expect("h2load (Debian: nghttp2-client)");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("100 succeeded") && out.contains("100 2xx"),
        "{out}"
    );
    // A refused script (group-writable) and a missing one: their lines too.
    s.file("public_html/open.cgi", HELLO_CGI, 0o775);
    assert_eq!(http_request(port, "GET", "/open.cgi", &[], b"").status, 403);
    let text = std::fs::read_to_string(s.access_log()).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect();
    assert_eq!(lines.len(), 101, "{text}");
    let script = s.root().join("public_html/hello.cgi");
    for l in &lines[..100] {
        assert_eq!(l["tenant"], T1, "{l}");
        assert_eq!(l["method"], "GET", "{l}");
        assert_eq!(l["uri"], "/hello.cgi?x=1", "{l}");
        assert_eq!(l["status"], 200, "{l}");
        assert_eq!(l["script"], script.to_str().unwrap(), "{l}");
        assert_eq!(l["remote"], "127.0.0.1", "{l}");
        assert!(l["bytes"].as_u64().unwrap() > 20, "{l}");
        let ms = l["duration_ms"].as_f64().unwrap();
        assert!(ms > 0.0 && ms < 60_000.0, "{l}");
        assert!(
            l["time"].as_str().unwrap().ends_with('Z') && l["time"].as_str().unwrap().len() == 24,
            "{l}"
        );
    }
    let refused = &lines[100];
    assert_eq!(refused["status"], 403, "{refused}");
    assert_eq!(
        refused["tenant"], T1,
        "a refusal names the tenant: {refused}"
    );
    assert!(
        s.log().contains(&format!("403 [{T1} ")),
        "the error log names the tenant: {}",
        s.log()
    );
}
