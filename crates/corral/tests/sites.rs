//! Real sites work out of the box (issue 19, the PHP half): PHP sessions
//! with the default profile, the warnings about `bind-try` sources that are
//! missing, and the recipes of docs/sites.md run for real: WordPress from
//! Debian's package with a real MariaDB (on a private socket) and a plain
//! PHP site of a second tenant, each served by its tenant's socket-activated
//! PHP-FPM pool (config/services-php-fpm.toml) behind nginx
//! (config/nginx-corral-fpm.conf), driven with curl like a browser.

mod common;

use common::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The whole WordPress test, MariaDB's first start included.
const BUDGET: Duration = Duration::from_secs(120);

/// What is left of [`BUDGET`]; every wait and request is bounded by it.
struct Deadline(Instant);

impl Deadline {
    fn left(&self, what: &str) -> Duration {
        let left = BUDGET.saturating_sub(self.0.elapsed());
        assert!(!left.is_zero(), "over {BUDGET:?} before {what}");
        left
    }
}

/// A MariaDB server of this test only: its own data directory, a unix
/// socket in a directory of its own, no TCP; stopped by pid on drop (the
/// directory goes with the TempDir).
struct Mariadb {
    child: Child,
    dir: tempfile::TempDir,
}

impl Mariadb {
    fn start(deadline: &Deadline) -> Mariadb {
        let dir = tempfile::Builder::new()
            .prefix("corral-test-mariadb")
            .tempdir_in("/var/tmp")
            .unwrap();
        let mysql = corral_users::Db::system()
            .user_by_name("mysql")
            .unwrap()
            .expect("the mysql user (Debian: mariadb-server)");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        for (sub, mode) in [("data", 0o700), ("run", 0o755)] {
            let p = dir.path().join(sub);
            std::fs::create_dir(&p).unwrap();
            nix::unistd::chown(&p, Some(mysql.uid.into()), Some(mysql.gid.into())).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let d = dir.path().display();
        let out = Command::new("timeout")
            .arg(deadline.left("mariadb-install-db").as_secs().to_string())
            .arg("mariadb-install-db")
            .args([
                "--no-defaults",
                &format!("--datadir={d}/data"),
                "--user=mysql",
                "--auth-root-authentication-method=socket",
                "--skip-test-db",
            ])
            .output()
            .expect("mariadb-install-db (Debian: mariadb-server)");
        assert!(
            out.status.success(),
            "mariadb-install-db: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let child = Command::new("/usr/sbin/mariadbd")
            .args([
                "--no-defaults",
                &format!("--datadir={d}/data"),
                &format!("--socket={d}/run/mysqld.sock"),
                &format!("--pid-file={d}/run/mysqld.pid"),
                &format!("--log-error={d}/error.log"),
                "--skip-networking",
                "--skip-log-bin",
                "--innodb-buffer-pool-size=32M",
                "--user=mysql",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mariadbd");
        let mut db = Mariadb { child, dir };
        let sock = db.socket();
        let up = wait_until(deadline.left("mariadbd to listen"), || {
            std::os::unix::net::UnixStream::connect(&sock).is_ok()
                || db.child.try_wait().unwrap().is_some()
        });
        assert!(
            up && db.child.try_wait().unwrap().is_none(),
            "mariadbd did not start: {}",
            std::fs::read_to_string(db.dir.path().join("error.log")).unwrap_or_default()
        );
        db
    }

    /// The directory holding the socket (what a tenant's profile binds).
    fn run_dir(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    fn socket(&self) -> PathBuf {
        self.run_dir().join("mysqld.sock")
    }

    /// Run SQL as MariaDB's root (unix_socket authentication: we are root).
    fn sql(&self, q: &str) -> String {
        let out = Command::new("mariadb")
            .args(["--no-defaults", "-uroot", "-N", "-B"])
            .arg(format!("--socket={}", self.socket().display()))
            .args(["-e", q])
            .output()
            .expect("mariadb client");
        assert!(
            out.status.success(),
            "{q}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for Mariadb {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        if !wait_until(Duration::from_secs(20), || {
            self.child.try_wait().ok().flatten().is_some()
        }) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A response: status, headers (as received), body.
struct Response {
    status: u16,
    headers: String,
    body: Vec<u8>,
}

impl Response {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// curl as a browser: it asks for http://wp.test/ and http://plain.test/
/// (port 80, so the Host header has no port, as for a real site: Debian's
/// fastcgi_params passes HTTP_HOST as nginx's $host, which drops it) and
/// connects to nginx on 127.0.0.1:`port`; a cookie jar, or none for an
/// anonymous visitor.
struct Browser<'a> {
    port: u16,
    jar: Option<PathBuf>,
    work: &'a Path,
    deadline: &'a Deadline,
}

impl Browser<'_> {
    fn request(&self, url: &str, args: &[&str]) -> Response {
        let n = REQUESTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let head = self.work.join(format!("h{n}"));
        let body = self.work.join(format!("b{n}"));
        let max = self.deadline.left(url).min(Duration::from_secs(60));
        let mut c = Command::new("curl");
        c.args(["-sS", "--max-time", &max.as_secs().max(1).to_string()])
            .arg("-D")
            .arg(&head)
            .arg("-o")
            .arg(&body)
            .args(["-w", "%{http_code}"]);
        for host in ["wp.test", "plain.test"] {
            c.arg("--connect-to")
                .arg(format!("{host}:80:127.0.0.1:{}", self.port));
        }
        if let Some(jar) = &self.jar {
            c.arg("-b").arg(jar).arg("-c").arg(jar);
        }
        let out = c.args(args).arg(url).output().expect("curl");
        assert!(
            out.status.success(),
            "curl {url}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Response {
            status: String::from_utf8_lossy(&out.stdout).parse().unwrap_or(0),
            headers: std::fs::read_to_string(&head).unwrap_or_default(),
            body: std::fs::read(&body).unwrap_or_default(),
        }
    }

    fn get(&self, url: &str) -> Response {
        self.request(url, &[])
    }

    /// POST an urlencoded form (`fields` already encoded).
    fn post_form(&self, url: &str, fields: &[(&str, &str)]) -> Response {
        let mut args = Vec::new();
        for (k, v) in fields {
            args.push("--data-urlencode".to_string());
            args.push(format!("{k}={v}"));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.request(url, &args)
    }
}

static REQUESTS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// A PNG of at least 1 MiB (noise, stored uncompressed), made with PHP's GD.
fn one_mib_png(path: &Path) -> Vec<u8> {
    let script = format!(
        "$w = 620; $im = imagecreatetruecolor($w, $w); mt_srand(19);\
         for ($y = 0; $y < $w; $y++) for ($x = 0; $x < $w; $x++) imagesetpixel($im, $x, $y, mt_rand(0, 0xFFFFFF));\
         imagepng($im, '{}', 0);",
        path.display()
    );
    let st = Command::new("php")
        .args(["-r", &script])
        .status()
        .expect("php (with GD: php-gd)");
    assert!(st.success());
    let bytes = std::fs::read(path).unwrap();
    assert!(bytes.len() >= 1 << 20, "{} bytes", bytes.len());
    bytes
}

/// The shipped nginx site (config/nginx-corral-fpm.conf) for one site:
/// its server block with the name, document root and tenant's socket
/// filled in, listening on 127.0.0.1:`port`.
fn shipped_nginx_site(port: u16, name: &str, root: &Path, socket: &Path) -> String {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/nginx-corral-fpm.conf"),
    )
    .unwrap();
    let start = text.find("server {").expect("a server block");
    let end = text[start..].find("\n}\n").expect("its end") + start + 3;
    let block = &text[start..end];
    let mut out = block.to_string();
    for (from, to) in [
        ("listen 80;", format!("listen 127.0.0.1:{port};")),
        (
            "server_name example.com www.example.com;",
            format!("server_name {name};"),
        ),
        (
            "root /home/alice/public_html;",
            format!("root {};", root.display()),
        ),
        (
            "unix:/run/corral-fpm/alice.sock",
            format!("unix:{}", socket.display()),
        ),
        // Relative includes would be looked up in the test's nginx prefix.
        (
            "include fastcgi_params;",
            "include /etc/nginx/fastcgi_params;".to_string(),
        ),
    ] {
        assert!(out.contains(from), "nginx-corral-fpm.conf: {from:?} moved");
        out = out.replace(from, &to);
    }
    out
}

/// wp-config.php for a tenant's copy of WordPress: the database on the
/// socket the tenant's profile binds at /run/mysqld, the copy's own
/// wp-content, no requests to the internet and no pseudo-cron.
fn wp_config(site_url: &str) -> String {
    let salt = |k: &str| format!("define('{k}', '{k}-corral-test-{}');\n", std::process::id());
    let salts: String = [
        "AUTH_KEY",
        "SECURE_AUTH_KEY",
        "LOGGED_IN_KEY",
        "NONCE_KEY",
        "AUTH_SALT",
        "SECURE_AUTH_SALT",
        "LOGGED_IN_SALT",
        "NONCE_SALT",
    ]
    .iter()
    .map(|k| salt(k))
    .collect();
    format!(
        "<?php\n\
         define('DB_NAME', 'wp');\n\
         define('DB_USER', 'wp');\n\
         define('DB_PASSWORD', 'wp-secret');\n\
         define('DB_HOST', 'localhost:/run/mysqld/mysqld.sock');\n\
         define('DB_CHARSET', 'utf8mb4');\n\
         define('DB_COLLATE', '');\n\
         {salts}\
         $table_prefix = 'wp_';\n\
         define('WP_HOME', '{site_url}');\n\
         define('WP_SITEURL', '{site_url}');\n\
         define('WP_HTTP_BLOCK_EXTERNAL', true);\n\
         define('DISABLE_WP_CRON', true);\n\
         define('AUTOMATIC_UPDATER_DISABLED', true);\n\
         if (!defined('ABSPATH')) define('ABSPATH', __DIR__ . '/');\n\
         require_once ABSPATH . 'wp-settings.php';\n"
    )
}

/// The plain PHP site: a session counter that also says what of the other
/// tenant it can see, and an upload form handler.
const PLAIN_INDEX: &str = r#"<?php
session_start();
$_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
echo "visits=", $_SESSION['n'], "\n";
echo "session=", session_id(), "\n";
echo "other=", @file_get_contents($_GET['other']) === false ? "unreadable" : "READABLE", "\n";
echo "homes=", implode(',', array_diff(scandir('/home'), ['.', '..'])), "\n";
echo "mysql=", file_exists('/run/mysqld/mysqld.sock') ? "yes" : "no", "\n";
"#;

const PLAIN_UPLOAD: &str = r#"<?php
$f = $_FILES['f'] ?? null;
if (!$f || $f['error'] !== UPLOAD_ERR_OK) { http_response_code(400); echo "error ", $f['error'] ?? 'none'; exit; }
$to = __DIR__ . '/uploads/' . basename($f['name']);
if (!move_uploaded_file($f['tmp_name'], $to)) { http_response_code(500); echo "not moved"; exit; }
echo "saved ", filesize($to), " ", sha1_file($to), "\n";
"#;

fn sha1_hex(path: &Path) -> String {
    let out = Command::new("sha1sum").arg(path).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// WordPress (Debian's package, copied into the tenant's home) and a
/// second tenant's plain PHP site, both as the docs/sites.md recipes say,
/// served at once by one nginx through each tenant's FPM pool inside its
/// sandbox: the install form completes, the admin logs in, uploads a
/// 1 MiB image and publishes a post an anonymous visitor reads; the plain
/// site keeps a session in its tenant's own directory, takes the same
/// upload, and sees nothing of the first tenant.
#[test]
fn wordpress_and_a_plain_php_site_work_side_by_side() {
    let deadline = Deadline(Instant::now());
    let pid = std::process::id();
    let env = Env::new();
    let run = RunDir::new("sites");
    let db = Mariadb::start(&deadline);
    db.sql(
        "CREATE DATABASE wp; CREATE USER 'wp'@'localhost' IDENTIFIED BY 'wp-secret'; \
         GRANT ALL ON wp.* TO 'wp'@'localhost';",
    );

    // The profile: the default one, every tenant with the shipped FPM
    // pool; the WordPress tenant has the database socket's directory.
    env.default_profile_with(&shipped_php_fpm(&run.0));
    env.write_config(
        &format!("tenants/{T1}.toml"),
        &format!(
            "[[mount]]\ntype = \"bind\"\nsrc = \"{}\"\ndst = \"/run/mysqld\"\n",
            db.run_dir().display()
        ),
    );
    env.ok(&["up", T1, T2]);

    // WordPress, installed by the tenant itself inside its sandbox: a copy
    // of the package's files (the package's own wp-config.php reads
    // /etc/wordpress, which is the host's: the copy gets its own).
    let wp_name = format!("wp-{pid}");
    let wp_dir = home_of(T1).join(&wp_name);
    let _wp = HomeDir(wp_dir.clone());
    let work = tempfile::tempdir().unwrap();
    let png = one_mib_png(&work.path().join("photo.png"));
    let nginx = Nginx::start_http(|port| {
        let sock = |t: &str| run.0.join("fpm").join(format!("{t}.sock"));
        format!(
            "{}\n{}",
            shipped_nginx_site(port, "wp.test", &wp_dir, &sock(T1)),
            shipped_nginx_site(
                port,
                "plain.test",
                &home_of(T2).join(format!("plain-{pid}")),
                &sock(T2)
            )
        )
    });
    let site = "http://wp.test".to_string();
    env.sh(
        T1,
        &format!(
            "cp -a /usr/share/wordpress ~/{wp_name} && cat > ~/{wp_name}/wp-config.php <<'EOF'\n{}EOF\n",
            wp_config(&site)
        ),
    );

    let admin = Browser {
        port: nginx.port,
        jar: Some(work.path().join("admin.jar")),
        work: work.path(),
        deadline: &deadline,
    };
    // The install form...
    let r = admin.get(&format!("{site}/wp-admin/install.php"));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("weblog_title"), "{}", r.text());
    // ... completes.
    let password = format!("corral-{pid}-Pw!");
    let r = admin.post_form(
        &format!("{site}/wp-admin/install.php?step=2"),
        &[
            ("weblog_title", "Corral test blog"),
            ("user_name", "admin"),
            ("admin_password", &password),
            ("admin_password2", &password),
            ("pw_weak", "on"),
            ("admin_email", "admin@wp.test"),
            ("blog_public", "0"),
            ("language", ""),
            ("Submit", "Install WordPress"),
        ],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("Success!"), "{}", r.text());
    assert_eq!(db.sql("SELECT user_login FROM wp.wp_users").trim(), "admin");

    // The admin logs in: a session cookie.
    admin.get(&format!("{site}/wp-login.php")); // sets the test cookie
    let r = admin.post_form(
        &format!("{site}/wp-login.php"),
        &[
            ("log", "admin"),
            ("pwd", &password),
            ("wp-submit", "Log In"),
            ("redirect_to", &format!("{site}/wp-admin/")),
            ("testcookie", "1"),
        ],
    );
    assert_eq!(r.status, 302, "{}{}", r.headers, r.text());
    let jar = std::fs::read_to_string(work.path().join("admin.jar")).unwrap();
    assert!(jar.contains("wordpress_logged_in_"), "{jar}");
    let r = admin.get(&format!("{site}/wp-admin/"));
    assert_eq!(r.status, 200);
    assert!(r.text().contains("Dashboard"), "not logged in");

    // Uploads a 1 MiB image, as the media page's uploader does.
    let page = admin.get(&format!("{site}/wp-admin/media-new.php")).text();
    let nonce = page
        .split("\"_wpnonce\":\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_else(|| panic!("no upload nonce in media-new.php"))
        .to_string();
    let photo = work.path().join(format!("photo-{pid}.png"));
    std::fs::write(&photo, &png).unwrap();
    let r = admin.request(
        &format!("{site}/wp-admin/async-upload.php"),
        &[
            "-F",
            &format!("async-upload=@{};type=image/png", photo.display()),
            "-F",
            &format!("name=photo-{pid}.png"),
            "-F",
            "action=upload-attachment",
            "-F",
            &format!("_wpnonce={nonce}"),
        ],
    );
    assert_eq!(r.status, 200, "{}{}", r.headers, r.text());
    let up: serde_json::Value =
        serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {}", r.text()));
    assert_eq!(up["success"], true, "{up}");
    let image_url = up["data"]["url"].as_str().unwrap().to_string();
    let rel = image_url
        .strip_prefix(&format!("{site}/"))
        .unwrap_or_else(|| panic!("{image_url}"));
    // Stored under the tenant's home, by the tenant.
    let stored = wp_dir.join(rel);
    let m = std::fs::metadata(&stored).unwrap_or_else(|e| panic!("{}: {e}", stored.display()));
    assert_eq!((m.uid(), m.len()), (uid_of(T1), png.len() as u64));

    // Publishes a post, as the editor does (the REST API, with the nonce
    // admin-ajax gives a logged-in user).
    let rest_nonce = admin
        .get(&format!("{site}/wp-admin/admin-ajax.php?action=rest-nonce"))
        .text();
    assert!(
        !rest_nonce.is_empty() && rest_nonce.chars().all(|c| c.is_ascii_alphanumeric()),
        "{rest_nonce}"
    );
    let title = format!("Hello from corral {pid}");
    let post = serde_json::json!({
        "title": title,
        "content": format!("<p>A photo:</p><img src=\"{image_url}\">"),
        "status": "publish",
    });
    let r = admin.request(
        &format!("{site}/?rest_route=/wp/v2/posts"),
        &[
            "-H",
            &format!("X-WP-Nonce: {rest_nonce}"),
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            &post.to_string(),
        ],
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let created: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let link = created["link"].as_str().unwrap().to_string();

    // An anonymous visitor reads it at its URL, and gets the image.
    let visitor = Browser {
        port: nginx.port,
        jar: None,
        work: work.path(),
        deadline: &deadline,
    };
    let r = visitor.get(&link);
    assert_eq!(r.status, 200, "{link}");
    assert!(r.text().contains(&title), "{link}: {}", r.text());
    assert!(r.text().contains(&image_url));
    let r = visitor.get(&image_url);
    assert_eq!(r.status, 200, "{image_url}");
    assert!(r.body == png, "the image served is not the one uploaded");

    // The second tenant's plain PHP site, up at the same time.
    let plain = format!("plain-{pid}");
    let _plain = HomeDir(home_of(T2).join(&plain));
    write_home_file(T2, &format!("{plain}/index.php"), PLAIN_INDEX, 0o644);
    write_home_file(T2, &format!("{plain}/upload.php"), PLAIN_UPLOAD, 0o644);
    write_home_file(T2, &format!("{plain}/uploads/.keep"), "", 0o644);
    let psite = "http://plain.test";
    let user = Browser {
        port: nginx.port,
        jar: Some(work.path().join("plain.jar")),
        work: work.path(),
        deadline: &deadline,
    };
    let secret = wp_dir.join("wp-config.php");
    let url = format!("{psite}/index.php?other={}", secret.display());
    let first = user.get(&url);
    assert_eq!(first.status, 200, "{}", first.text());
    let second = user.get(&url).text();
    assert!(first.text().contains("visits=1"), "{}", first.text());
    // The session works: the second visit is counted.
    assert!(second.contains("visits=2"), "{second}");
    assert!(second.contains("other=unreadable"), "{second}");
    assert!(second.contains(&format!("homes={T2}\n")), "{second}");
    assert!(second.contains("mysql=no"), "{second}");
    // Its session file is in the tenant's own directory, the tenant's only.
    let sid = second
        .lines()
        .find_map(|l| l.strip_prefix("session="))
        .unwrap();
    let sess = env.sessions_dir().join(T2).join(format!("sess_{sid}"));
    let m = std::fs::metadata(&sess).unwrap_or_else(|e| panic!("{}: {e}", sess.display()));
    assert_eq!((m.uid(), m.mode() & 0o777), (uid_of(T2), 0o600));
    let dir = std::fs::metadata(env.sessions_dir().join(T2)).unwrap();
    assert_eq!((dir.uid(), dir.mode() & 0o777), (uid_of(T2), 0o700));
    // The first tenant's sandbox shows its own sessions, not these.
    let listed = env.sh(T1, "ls -a /var/lib/php/sessions");
    assert!(!listed.contains(sid), "{listed}");
    // Nor can the second tenant's shell read the first's files.
    let o = env.run(&["run", T2, "--", "cat", &secret.display().to_string()]);
    assert!(!o.status.success(), "T2 read T1's wp-config.php");
    // The same 1 MiB upload, to the plain site.
    let r = user.request(
        &format!("{psite}/upload.php"),
        &["-F", &format!("f=@{};type=image/png", photo.display())],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.text().trim(),
        format!("saved {} {}", png.len(), sha1_hex(&photo))
    );
    let saved = home_of(T2)
        .join(&plain)
        .join("uploads")
        .join(format!("photo-{pid}.png"));
    assert_eq!(std::fs::metadata(&saved).unwrap().uid(), uid_of(T2));

    // Both pools ran inside their sandboxes, as their tenants.
    for t in [T1, T2] {
        let st = env.ok(&["--json", "service", "status", t, "php"]);
        let st: serde_json::Value = serde_json::from_str(st.lines().next().unwrap()).unwrap();
        assert_eq!(st["state"], "running", "{t}: {st}");
    }
    drop(nginx);
    drop(db);
    assert!(deadline.0.elapsed() < BUDGET);
}

/// PHP sessions work with the built-in default profile: each tenant's
/// /var/lib/php/sessions is its own directory, made at `up`.
#[test]
fn php_sessions_work_with_the_default_profile_each_tenant_its_own() {
    let env = Env::new();
    env.default_profile_with("");
    let script = "session_start(); $_SESSION['x'] = 1; session_write_close(); \
                  echo session_save_path(), ' ', session_id();";
    let mut ids = Vec::new();
    for t in [T1, T2] {
        env.ok(&["up", t]);
        let dir = env.sessions_dir().join(t);
        let m = std::fs::metadata(&dir).expect("made at up");
        assert_eq!((m.uid(), m.mode() & 0o777), (uid_of(t), 0o700));
        let out = env.ok(&["run", t, "--", "php", "-r", script]);
        let (path, id) = out.trim().split_once(' ').unwrap();
        assert_eq!(path, "/var/lib/php/sessions");
        let f = std::fs::metadata(dir.join(format!("sess_{id}"))).unwrap();
        assert_eq!(f.uid(), uid_of(t));
        ids.push(id.to_string());
    }
    // php-cgi (what the gateway runs) saves there too.
    let cgi = env.sh(
        T1,
        &format!(
            "cat > /tmp/s.php <<'EOF'\n<?php {script}\nEOF\nphp-cgi /tmp/s.php && rm /tmp/s.php"
        ),
    );
    // (The body after the CGI headers: Set-Cookie, the session's.)
    let body = cgi.rsplit("\r\n\r\n").next().unwrap();
    let (path, cgi_id) = body
        .trim()
        .split_once(' ')
        .unwrap_or_else(|| panic!("{cgi:?}"));
    assert!(
        cgi.contains(&format!("Set-Cookie: PHPSESSID={cgi_id}")),
        "{cgi}"
    );
    assert_eq!(path, "/var/lib/php/sessions", "{cgi}");
    let saved = env.sessions_dir().join(T1).join(format!("sess_{cgi_id}"));
    assert!(saved.exists(), "{cgi}");
    // Neither sees the other's session.
    let listed = env.sh(T1, "ls -a /var/lib/php/sessions");
    assert!(
        listed.contains(&ids[0]) && !listed.contains(&ids[1]),
        "{listed}"
    );
    // Kept across a rebuild.
    env.ok(&["restart", T1]);
    assert!(env.sh(T1, "ls /var/lib/php/sessions").contains(&ids[0]));
    // And removed with the tenant (said, not done: the test users stay).
    let out = env.ok(&["tenant", "remove", "--dry-run", T2]);
    let dir = env.sessions_dir().join(T2);
    assert!(
        out.contains(&format!("would remove its own directory {}", dir.display())),
        "{out}"
    );
}

/// `create = true` never follows what the tenant put at the source's
/// place: a symlink (to a host directory) or a directory of someone else
/// makes `up` fail, and nothing is chowned.
#[test]
fn create_refuses_a_planted_symlink_or_a_foreign_directory() {
    let env = Env::new();
    let name = format!("own-{}", std::process::id());
    env.default_profile_with(&format!(
        "[[mount]]\ntype = \"bind\"\nsrc = \"$HOME/{name}\"\ndst = \"/srv/own\"\ncreate = true\n"
    ));
    let planted = home_of(T1).join(&name);
    let _cleanup = HomeDir(planted.clone());
    // The tenant plants a link to a root-owned host directory.
    let target = tempfile::tempdir_in("/var/tmp").unwrap();
    std::os::unix::fs::symlink(target.path(), &planted).unwrap();
    std::os::unix::fs::lchown(&planted, Some(uid_of(T1)), None).unwrap();
    let o = env.run(&["up", T1]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not a directory (refusing symlinks)"), "{err}");
    assert_eq!(std::fs::metadata(target.path()).unwrap().uid(), 0);
    // A directory of someone else (root's) at that place.
    std::fs::remove_file(&planted).unwrap();
    std::fs::create_dir(&planted).unwrap();
    let o = env.run(&["up", T1]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("is owned by uid 0, not the tenant"), "{err}");
    // Made when missing, the tenant's, and bound.
    std::fs::remove_dir(&planted).unwrap();
    env.ok(&["up", T1]);
    let m = std::fs::symlink_metadata(&planted).unwrap();
    assert!(m.is_dir());
    assert_eq!((m.uid(), m.mode() & 0o777), (uid_of(T1), 0o700));
    env.sh(T1, "echo hi > /srv/own/f");
    assert_eq!(std::fs::read_to_string(planted.join("f")).unwrap(), "hi\n");
}

/// A `bind-try` whose source is missing is skipped by `up`, and said by
/// `corral check` (file:line) and `corral ls`; one whose source appears
/// later is said by `ls` until a restart binds it. The default profile's
/// own portable list (/lib32, /etc/pki...) is not reported.
#[test]
fn check_and_ls_say_when_a_bind_try_source_is_missing() {
    let env = Env::new();
    let src = PathBuf::from(format!("/srv/corral-missing-{}", std::process::id()));
    let _cleanup = HomeDir(src.clone());
    env.default_profile_with(&format!(
        "[[mount]]\ntype = \"bind-try\"\nsrc = \"{}\"\n",
        src.display()
    ));
    let profile = env.config_dir().join("profile.toml");
    let line = std::fs::read_to_string(&profile)
        .unwrap()
        .lines()
        .position(|l| l.contains("corral-missing"))
        .unwrap(); // the type line is the one above src (1-based: = index)
    let o = env.run(&["check"]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("{}:{line}:", profile.display()))
            && err.contains(&format!("{} does not exist", src.display())),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "only the profile's own: {err}");
    env.ok(&["up", T1]);
    let o = env.run(&["ls"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("{T1}: ")) && err.contains("does not exist"),
        "{err}"
    );
    // It appears: the running sandbox does not have it yet.
    std::fs::create_dir(&src).unwrap();
    let ls: serde_json::Value = serde_json::from_str(&env.ok(&["--json", "ls"])).unwrap();
    let skipped = &ls[0]["skipped_binds"];
    assert_eq!(skipped.as_array().map(Vec::len), Some(1), "{ls}");
    assert_eq!(skipped[0]["appeared"], true);
    assert_eq!(skipped[0]["src"], src.display().to_string());
    env.ok(&["restart", T1]);
    let ls: serde_json::Value = serde_json::from_str(&env.ok(&["--json", "ls"])).unwrap();
    assert_eq!(ls[0]["skipped_binds"], serde_json::json!([]), "{ls}");
    assert!(String::from_utf8_lossy(&env.run(&["check"]).stderr).is_empty());
}
