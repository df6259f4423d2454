//! Every login path lands in the tenant's sandbox and cgroup (issue: every
//! way in, part 1), tested with the real programs: an OpenSSH server started
//! here on a loopback port with its own host key, config and PAM service
//! (an interactive session through a pty, `ssh host CMD`, scp both ways, an
//! sftp batch), Debian's cron daemon, su and runuser. Both mechanisms:
//! `pam_corral.so` in the PAM session stack, and `corral-shell` as the
//! tenant's login shell. Everything started here is stopped, and every file
//! written outside the test's own directories (a PAM service file, a login
//! shell set with usermod) is put back, also when a test fails.
//!
//! Proof of "inside": the same mount and pid namespaces as `corral run
//! TENANT`, pid 1 being the tenant's init, the cgroup namespace's root as the
//! process's cgroup, the seccomp filter, no_new_privs and an empty
//! capability bounding set, other tenants' homes out of sight; and from the
//! host, the session's processes listed in the tenant's cgroup.

mod common;

use common::*;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The admin account of these tests: uid >= 1000 like the tenants, but
/// exempt in the access config, so never caged.
const ADMIN: &str = "corral-t4";

/// Printed by a session, compared with `corral run`'s view.
const PROOF: &str = r#"echo "PID1=$(tr '\0' ' ' </proc/1/cmdline)"; echo "MNT=$(readlink /proc/self/ns/mnt)"; echo "PIDNS=$(readlink /proc/self/ns/pid)"; echo "CG=$(grep -m1 ':pids:' /proc/self/cgroup)"; grep -E '^(NoNewPrivs|Seccomp|CapBnd):' /proc/self/status | tr -d '\t'; echo "UID=$(id -un)"; echo "HOMES=$(ls /home | tr '\n' ' ')""#;

/// The value of `KEY=` or `KEY:` in a session's output: from the last line
/// that has it (an interactive shell echoes the command line first, and a
/// terminal adds escape sequences before it).
fn field<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .rev()
        .find_map(|l| {
            let l = l.trim_end_matches('\r');
            [format!("{key}="), format!("{key}:")]
                .iter()
                .find_map(|k| l.find(k.as_str()).map(|i| &l[i + k.len()..]))
        })
        .unwrap_or_else(|| panic!("no {key} in:\n{out}"))
        .trim()
}

/// Assert that `out` (the PROOF of a session) was printed inside `tenant`'s
/// sandbox, as `corral run` sees it (`reference`).
fn assert_inside(out: &str, reference: &str, tenant: &str, what: &str) {
    assert_eq!(
        field(out, "PID1"),
        format!("corral-init: {tenant}"),
        "{what}: pid 1\n{out}"
    );
    for k in ["MNT", "PIDNS"] {
        assert_eq!(
            field(out, k),
            field(reference, k),
            "{what}: {k} namespace\n{out}"
        );
    }
    assert_eq!(
        field(out, "CG"),
        field(reference, "CG"),
        "{what}: cgroup\n{out}"
    );
    assert!(
        field(out, "CG").ends_with(":/"),
        "{what}: at the tenant cgroup's root\n{out}"
    );
    assert_eq!(field(out, "NoNewPrivs"), "1", "{what}\n{out}");
    assert_eq!(field(out, "Seccomp"), "2", "{what}\n{out}");
    assert_eq!(field(out, "CapBnd"), "0000000000000000", "{what}\n{out}");
    assert_eq!(field(out, "UID"), tenant, "{what}\n{out}");
    assert_eq!(
        field(out, "HOMES"),
        tenant,
        "{what}: other homes are hidden\n{out}"
    );
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

static N: AtomicU32 = AtomicU32::new(0);

/// A root-owned directory of this test (sshd's StrictModes and
/// corral-shell's config check refuse a world-writable /var/tmp), with the
/// access config and a setuid copy of corral-shell.
struct Fixture {
    env: Env,
    dir: PathBuf,
}

impl Fixture {
    fn new(exempt: &[&str]) -> Fixture {
        let env = Env::new();
        env.default_profile_with("");
        let dir = PathBuf::from(format!(
            "/run/corral-logins-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let f = Fixture { env, dir };
        let exempt: Vec<String> = exempt.iter().map(|e| format!("{e:?}")).collect();
        std::fs::write(
            f.access_config(),
            format!(
                "min_uid = 1000\nexempt = [{}]\nstate_dir = {:?}\nconfig_dir = {:?}\ncgroup_parent = {:?}\ncorral = {:?}\n",
                exempt.join(", "),
                f.env.state_dir(),
                f.env.config_dir(),
                f.env.parent,
                corral_bin(),
            ),
        )
        .unwrap();
        let shell = f.dir.join("corral-shell");
        std::fs::copy(corral_bin().with_file_name("corral-shell"), &shell).unwrap();
        std::fs::set_permissions(&shell, std::fs::Permissions::from_mode(0o4755)).unwrap();
        f
    }

    fn access_config(&self) -> PathBuf {
        self.dir.join("corral-access.toml")
    }

    fn shell(&self) -> PathBuf {
        self.dir.join("corral-shell")
    }

    /// `corral run TENANT -- sh -c PROOF`: the reference view.
    fn reference(&self, tenant: &str) -> String {
        self.env.sh(tenant, PROOF)
    }

    /// A PAM service file for `service`: account and session by pam_unix,
    /// then (with `caged`) pam_corral.so, removed on drop.
    fn pam_service(&self, path: &Path, caged: bool) -> FileGuard {
        let mut text = String::from(
            "auth sufficient pam_rootok.so\nauth required pam_deny.so\n\
             account required pam_unix.so\nsession required pam_unix.so\n",
        );
        if caged {
            text.push_str(&format!(
                "session required {} config={} debug\n",
                pam_module().display(),
                self.access_config().display()
            ));
        }
        FileGuard::write(path, &text)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The PAM module: built by scripts/test.sh (CORRAL_PAM_MODULE), or here
/// with the same command (scripts/lib.sh: build_pam_module).
fn pam_module() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            if let Some(p) = std::env::var_os("CORRAL_PAM_MODULE") {
                return PathBuf::from(p);
            }
            let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
            let st = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
                .current_dir(&repo)
                .env("CARGO_TARGET_DIR", repo.join("target/pam"))
                .env_remove("RUSTFLAGS")
                .env_remove("CARGO_BUILD_TARGET")
                .args(["build", "-q", "-p", "pam-corral"])
                .status()
                .expect("run cargo to build pam_corral.so");
            assert!(st.success(), "building pam_corral.so failed");
            repo.join("target/pam/debug/libpam_corral.so")
        })
        .clone()
}

/// A file this test wrote where the system keeps its own (a PAM service);
/// removed, or its former content put back, on drop.
struct FileGuard {
    path: PathBuf,
    old: Option<Vec<u8>>,
}

impl FileGuard {
    fn write(path: &Path, text: &str) -> FileGuard {
        let old = std::fs::read(path).ok();
        std::fs::write(path, text).unwrap();
        FileGuard {
            path: path.into(),
            old,
        }
    }
}

impl Drop for FileGuard {
    fn drop(&mut self) {
        match &self.old {
            Some(b) => {
                let _ = std::fs::write(&self.path, b);
            }
            None => {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

/// A user's login shell set with usermod, put back on drop.
struct ShellGuard {
    user: String,
    old: String,
}

impl ShellGuard {
    fn set(user: &str, shell: &Path) -> ShellGuard {
        let old = String::from_utf8(
            Command::new("getent")
                .args(["passwd", user])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .trim()
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
        let st = Command::new("usermod")
            .arg("-s")
            .arg(shell)
            .arg(user)
            .status()
            .unwrap();
        assert!(st.success(), "usermod -s {} {user}", shell.display());
        ShellGuard {
            user: user.into(),
            old,
        }
    }
}

impl Drop for ShellGuard {
    fn drop(&mut self) {
        let _ = Command::new("usermod")
            .args(["-s", &self.old, &self.user])
            .status();
    }
}

/// An OpenSSH server on a loopback port, its own host key and config, its
/// PAM service named after the program (sshd takes `__progname`): a symlink
/// `corral-test-sshd-N` to /usr/sbin/sshd in the fixture's directory.
struct Sshd {
    child: Child,
    port: u16,
    dir: PathBuf,
    _pam: FileGuard,
}

impl Sshd {
    fn start(f: &Fixture, caged: bool) -> Sshd {
        let dir = f.dir.join("sshd");
        std::fs::create_dir(&dir).unwrap();
        std::fs::create_dir_all("/run/sshd").unwrap(); // privilege separation
        let keygen = |name: &str| {
            let st = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(dir.join(name))
                .status()
                .unwrap();
            assert!(st.success(), "ssh-keygen");
        };
        keygen("hostkey");
        keygen("client");
        let keys = dir.join("keys");
        std::fs::create_dir(&keys).unwrap();
        let public = std::fs::read(dir.join("client.pub")).unwrap();
        for u in [T1, T2, T3, ADMIN] {
            std::fs::write(keys.join(u), &public).unwrap();
        }
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let service = format!(
            "corral-test-{}-{name}",
            f.dir.file_name().unwrap().to_string_lossy()
        );
        let pam = f.pam_service(&Path::new("/etc/pam.d").join(&service), caged);
        let port = free_port();
        std::fs::write(
            dir.join("sshd_config"),
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/hostkey\nPidFile {d}/sshd.pid\n\
                 AuthorizedKeysFile {d}/keys/%u\nUsePAM yes\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPermitRootLogin no\nPermitUserRC no\n\
                 Subsystem sftp /usr/lib/openssh/sftp-server\nLogLevel VERBOSE\n",
                d = dir.display()
            ),
        )
        .unwrap();
        let prog = dir.join(&service);
        std::os::unix::fs::symlink("/usr/sbin/sshd", &prog).unwrap();
        let log = std::fs::File::create(dir.join("log")).unwrap();
        let child = Command::new(&prog)
            .arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(dir.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start sshd");
        let s = Sshd {
            child,
            port,
            dir,
            _pam: pam,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "sshd did not listen:\n{}",
                s.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    fn opts(&self, port_flag: &str) -> Vec<String> {
        [
            "-F",
            "none",
            "-i",
            &self.dir.join("client").to_string_lossy(),
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
            "-o",
            "BatchMode=yes",
            port_flag,
            &self.port.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    /// `ssh user@127.0.0.1 CMD`, bounded in time.
    fn ssh(&self, user: &str, cmd: &str) -> Output {
        let mut c = Command::new("ssh");
        c.args(self.opts("-p"))
            .arg(format!("{user}@127.0.0.1"))
            .arg(cmd);
        bounded(c, None)
    }

    /// An interactive session (`ssh -tt`: a pty on the server) that types
    /// `input`, line by line, into the login shell.
    fn ssh_tty(&self, user: &str, input: &str) -> Output {
        let mut c = Command::new("ssh");
        c.args(self.opts("-p"))
            .arg("-tt")
            .arg(format!("{user}@127.0.0.1"));
        bounded(c, Some(input))
    }

    fn scp(&self, from: &str, to: &str) -> Output {
        let mut c = Command::new("scp");
        c.args(self.opts("-P")).args(["-q", from, to]);
        bounded(c, None)
    }

    fn sftp(&self, user: &str, batch: &str) -> Output {
        let mut c = Command::new("sftp");
        c.args(self.opts("-P"))
            .args(["-q", "-b", "-"])
            .arg(format!("{user}@127.0.0.1"));
        bounded(c, Some(batch))
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }
}

/// Run `c` with `input` on stdin (written slowly, after the session has
/// started, for an interactive shell) and at most 60 s.
fn bounded(mut c: Command, input: Option<&str>) -> Output {
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawn client");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.map(str::to_string);
    let writer = std::thread::spawn(move || {
        if let Some(text) = input {
            std::thread::sleep(Duration::from_millis(500));
            for line in text.lines() {
                let _ = writeln!(stdin, "{line}");
                std::thread::sleep(Duration::from_millis(100));
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    });
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(o) => o.unwrap(),
        Err(_) => {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            panic!("client did not finish within 60 s");
        }
    };
    let _ = writer.join();
    out
}

/// The pids in the tenant's cgroup (pids controller), from the host.
fn cgroup_pids(env: &Env, tenant: &str) -> Vec<i32> {
    let dir = env
        .cgroup_dirs()
        .into_iter()
        .find(|d| d.starts_with("/sys/fs/cgroup/pids"))
        .map(|d| d.join(tenant))
        .unwrap_or_else(|| {
            PathBuf::from("/sys/fs/cgroup")
                .join(&env.parent)
                .join(tenant)
        });
    // Not there yet (the session that brings the tenant up is starting): none.
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.parse().ok())
        .collect()
}

fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .replace('\0', " ")
                .trim()
                .to_string()
        })
        .unwrap_or_default()
}

/// While a session runs `sleep MARK`, that process is in the tenant's cgroup.
fn assert_session_in_cgroup(env: &Env, tenant: &str, start: impl FnOnce(&str) -> Child) {
    let mark = format!("7.{}", 100 + N.fetch_add(1, Ordering::Relaxed));
    let mut session = start(&format!("sleep {mark}"));
    let deadline = Instant::now() + Duration::from_secs(15);
    let found = loop {
        let pids = cgroup_pids(env, tenant);
        if pids.iter().any(|&p| cmdline(p) == format!("sleep {mark}")) {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = session.wait();
    assert!(
        found,
        "the session's `sleep {mark}` never showed up in {tenant}'s cgroup"
    );
}

fn ssh_spawn(sshd: &Sshd, user: &str, cmd: &str) -> Child {
    Command::new("ssh")
        .args(sshd.opts("-p"))
        .arg(format!("{user}@127.0.0.1"))
        .arg(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Every SSH path of one tenant: command, interactive pty, scp both ways,
/// sftp; checked against `corral run`'s view.
fn ssh_paths_land_inside(f: &Fixture, sshd: &Sshd, tenant: &str) {
    let reference = f.reference(tenant);

    let o = sshd.ssh(tenant, PROOF);
    assert!(
        o.status.success(),
        "ssh {tenant} CMD: {}\nsshd:\n{}",
        text(&o),
        sshd.log()
    );
    assert_inside(
        &String::from_utf8_lossy(&o.stdout),
        &reference,
        tenant,
        "ssh CMD",
    );
    assert_session_in_cgroup(&f.env, tenant, |cmd| ssh_spawn(sshd, tenant, cmd));

    // Interactive, through a pty: the terminal is one of the sandbox's devpts.
    let o = sshd.ssh_tty(
        tenant,
        &format!(
            "{PROOF}\n[ \"$(stat -c %d \"$(tty)\")\" = \"$(stat -c %d /dev/pts/ptmx)\" ] && echo PTY=own || echo PTY=foreign\nexit 3"
        ),
    );
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        o.status.code(),
        Some(3),
        "ssh -tt: {}\nsshd:\n{}",
        text(&o),
        sshd.log()
    );
    assert_inside(&out, &reference, tenant, "interactive ssh");
    assert_eq!(field(&out, "PTY"), "own", "{out}");

    // scp both ways: the file lands in the home, owned by the tenant.
    let local = f.dir.join("upload.txt");
    std::fs::write(&local, "uploaded by scp\n").unwrap();
    let name = format!("scp-{}.txt", N.fetch_add(1, Ordering::Relaxed));
    let o = sshd.scp(
        &local.to_string_lossy(),
        &format!("{tenant}@127.0.0.1:{name}"),
    );
    assert!(
        o.status.success(),
        "scp up: {}\nsshd:\n{}",
        text(&o),
        sshd.log()
    );
    let landed = home_of(tenant).join(&name);
    assert_eq!(
        std::fs::read_to_string(&landed).unwrap(),
        "uploaded by scp\n"
    );
    assert_eq!(
        std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&landed).unwrap()),
        uid_of(tenant)
    );
    let back = f.dir.join("download.txt");
    let o = sshd.scp(
        &format!("{tenant}@127.0.0.1:{name}"),
        &back.to_string_lossy(),
    );
    assert!(o.status.success(), "scp down: {}", text(&o));
    assert_eq!(std::fs::read_to_string(&back).unwrap(), "uploaded by scp\n");
    // Through scp, a host path outside the sandbox is not there.
    let o = sshd.scp(
        &format!("{tenant}@127.0.0.1:/etc/shadow"),
        &back.to_string_lossy(),
    );
    assert!(!o.status.success(), "scp of /etc/shadow: {}", text(&o));

    // sftp-server subsystem: put, ls, get.
    let sname = format!("sftp-{}.txt", N.fetch_add(1, Ordering::Relaxed));
    let sback = f.dir.join("sftp-back.txt");
    let o = sshd.sftp(
        tenant,
        &format!(
            "put {} {sname}\nls -1\nget {sname} {}\nls -1 /home\n",
            local.display(),
            sback.display()
        ),
    );
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "sftp: {}\nsshd:\n{}",
        text(&o),
        sshd.log()
    );
    assert!(out.contains(&sname), "sftp ls: {out}");
    assert_eq!(
        std::fs::read_to_string(home_of(tenant).join(&sname)).unwrap(),
        "uploaded by scp\n"
    );
    assert_eq!(
        std::fs::read_to_string(&sback).unwrap(),
        "uploaded by scp\n"
    );
    let homes: Vec<&str> = out.lines().filter(|l| l.starts_with("/home/")).collect();
    assert_eq!(
        homes,
        [format!("/home/{tenant}")],
        "sftp sees only its home: {out}"
    );
    for n in [name, sname] {
        let _ = std::fs::remove_file(home_of(tenant).join(n));
    }
}

#[test]
fn pam_module_cages_ssh_scp_and_sftp_and_lets_admins_through() {
    let f = Fixture::new(&[ADMIN]);
    // T2 cannot be built: its override is invalid.
    f.env
        .write_config(&format!("tenants/{T2}.toml"), "hostname = 5\n");
    let sshd = Sshd::start(&f, true);

    // T1 is not up: its first login brings the sandbox up.
    ssh_paths_land_inside(&f, &sshd, T1);

    // An exempt admin logs in on the bare host.
    let o = sshd.ssh(ADMIN, PROOF);
    assert!(o.status.success(), "admin: {}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        !field(&out, "PID1").starts_with("corral-init"),
        "admin caged:\n{out}"
    );
    assert_eq!(field(&out, "NoNewPrivs"), "0", "{out}");

    // A tenant whose sandbox cannot be built gets no session at all.
    let o = sshd.ssh(T2, "echo LOGGED-IN");
    assert!(!o.status.success(), "{}", text(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("LOGGED-IN"));
    assert!(
        sshd.log().contains("pam_open_session"),
        "sshd log:\n{}",
        sshd.log()
    );

    // A login is an entry process: with a limit of 1, a second concurrent
    // session of T3 is refused while the first holds the slot.
    f.env.write_config(
        &format!("tenants/{T3}.toml"),
        "[limits]\nentry_processes = 1\n",
    );
    let mut first = ssh_spawn(&sshd, T3, "sleep 4");
    let deadline = Instant::now() + Duration::from_secs(15);
    while !cgroup_pids(&f.env, T3)
        .iter()
        .any(|&p| cmdline(p) == "sleep 4")
    {
        assert!(
            Instant::now() < deadline,
            "first session of {T3} never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = sshd.ssh(T3, "echo SECOND");
    let _ = first.wait();
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("SECOND"),
        "{}",
        text(&o)
    );
    // Once the first session's sshd has gone, its slot is free again.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let o = sshd.ssh(T3, "echo THIRD");
        if String::from_utf8_lossy(&o.stdout).contains("THIRD") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the slot was never freed: {}",
            text(&o)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn corral_shell_cages_ssh_scp_and_sftp_without_the_pam_module() {
    let f = Fixture::new(&[ADMIN]);
    let sshd = Sshd::start(&f, false);
    let _shell = ShellGuard::set(T2, &f.shell());
    let _admin_shell = ShellGuard::set(ADMIN, &f.shell());
    f.env.ok(&["up", T2]);
    ssh_paths_land_inside(&f, &sshd, T2);

    // An exempt admin whose shell is corral-shell gets a plain host shell.
    let o = sshd.ssh(ADMIN, PROOF);
    assert!(o.status.success(), "admin: {}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        !field(&out, "PID1").starts_with("corral-init"),
        "admin caged:\n{out}"
    );

    // A sandbox that cannot be built: refused, with the reason.
    f.env.ok(&["down", T2]);
    f.env
        .write_config(&format!("tenants/{T2}.toml"), "hostname = 5\n");
    let o = sshd.ssh(T2, "echo LOGGED-IN");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("LOGGED-IN"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("session refused") && err.contains("hostname"),
        "{}",
        text(&o)
    );
}

/// A shell script run with `unshare -m --propagation slave`: `binds` are
/// bind-mounted over system files in that private mount namespace only (the
/// PAM services su, su-l, runuser, cron; cron's tables), so the system's
/// own configuration is never edited and nothing is left when it ends.
/// `tenant` is brought up on the host first. In the private namespace its
/// persisted `ns/mnt` is the empty file under the bind mount (the kernel
/// does not copy a mount-namespace file's bind mount into a new mount
/// namespace): the PAM module then enters through the init's /proc entries
/// (`join::enter`), as it does for a service in a mount namespace of its own.
fn private_mounts(f: &Fixture, tenant: &str, binds: &[(PathBuf, &str)], script: &str) -> Command {
    f.env.ok(&["up", tenant]);
    let mut s = String::from("set -e\n");
    for (src, dst) in binds {
        s.push_str(&format!("mount --bind '{}' '{dst}'\n", src.display()));
    }
    s.push_str(script);
    let mut c = Command::new("unshare");
    c.args(["-m", "--propagation", "slave", "sh", "-c", &s]);
    c
}

/// Tests that use [`private_mounts`] take turns (one cron daemon at a time).
static PRIVATE_NS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn private_ns_turn() -> std::sync::MutexGuard<'static, ()> {
    PRIVATE_NS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The sections of a script's output that begins each with `== NAME`.
fn sections(out: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = Vec::new();
    for l in out.lines() {
        match l.strip_prefix("== ") {
            Some(name) => v.push((name.to_string(), String::new())),
            None => {
                if let Some(last) = v.last_mut() {
                    last.1.push_str(l);
                    last.1.push('\n');
                }
            }
        }
    }
    v
}

#[test]
fn su_and_runuser_land_inside() {
    let _turn = private_ns_turn();
    let f = Fixture::new(&[ADMIN]);
    let pam = f.dir.join("pam-su");
    let _g = f.pam_service(&pam, true);
    let binds: Vec<(PathBuf, &str)> = ["su", "su-l", "runuser", "runuser-l"]
        .iter()
        .map(|s| match *s {
            "su" => "/etc/pam.d/su",
            "su-l" => "/etc/pam.d/su-l",
            "runuser" => "/etc/pam.d/runuser",
            _ => "/etc/pam.d/runuser-l",
        })
        .map(|dst| (pam.clone(), dst))
        .collect();
    let script = format!(
        "echo '== su -'; su - {T1} -c \"$1\"\n\
         echo '== su'; su {T1} -c \"$1\"\n\
         echo '== runuser -u'; runuser -u {T1} -- sh -c \"$1\"\n\
         echo '== runuser -l'; runuser -l {T1} -c \"$1\"\n\
         echo '== su admin'; su {ADMIN} -c \"$1\"\n"
    );
    let o = private_mounts(&f, T1, &binds, &script)
        .arg("sh")
        .arg(PROOF)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let reference = f.reference(T1);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let parts = sections(&out);
    let names: Vec<&str> = parts.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["su -", "su", "runuser -u", "runuser -l", "su admin"],
        "{out}"
    );
    for (what, proof) in &parts[..4] {
        assert_inside(proof, &reference, T1, what);
    }
    // An exempt user passes through untouched.
    assert!(
        !field(&parts[4].1, "PID1").starts_with("corral-init"),
        "{out}"
    );
    assert_eq!(field(&parts[4].1, "NoNewPrivs"), "0", "{out}");
}

#[test]
fn a_cron_job_runs_inside_the_sandbox() {
    let _turn = private_ns_turn();
    let f = Fixture::new(&[ADMIN]);
    let pam = f.dir.join("pam-cron");
    let _g = f.pam_service(&pam, true);
    // cron's tables of this test only: no /etc/crontab jobs, no other users'.
    let spool = f.dir.join("crontabs");
    std::fs::create_dir(&spool).unwrap();
    let crond = f.dir.join("cron.d");
    std::fs::create_dir(&crond).unwrap();
    let etc_crontab = f.dir.join("crontab");
    std::fs::write(&etc_crontab, "SHELL=/bin/sh\n").unwrap();
    let proof = home_of(T1).join(format!("cron-proof-{}", std::process::id()));
    let _ = std::fs::remove_file(&proof);
    let tab = spool.join(T1);
    // The job's shell is /bin/sh, not the login shell: only PAM cages it.
    std::fs::write(
        &tab,
        format!(
            "* * * * * ({}) > {}.tmp 2>&1; mv {}.tmp {}\n",
            PROOF.replace('%', "\\%"),
            proof.display(),
            proof.display(),
            proof.display()
        ),
    )
    .unwrap();
    let st = Command::new("chown")
        .arg(format!("{T1}:crontab"))
        .arg(&tab)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::set_permissions(&tab, std::fs::Permissions::from_mode(0o600)).unwrap();
    let binds = [
        (pam.clone(), "/etc/pam.d/cron"),
        (spool.clone(), "/var/spool/cron/crontabs"),
        (crond.clone(), "/etc/cron.d"),
        (etc_crontab.clone(), "/etc/crontab"),
    ];
    let log = std::fs::File::create(f.dir.join("cron.log")).unwrap();
    // In its own process group, which this test ends (cron forks per job).
    let mut cron = private_mounts(&f, T1, &binds, "exec cron -f -L 15")
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start cron");
    let deadline = Instant::now() + Duration::from_secs(75);
    let mut reference = None;
    while !proof.exists() && Instant::now() < deadline {
        if reference.is_none()
            && f.env
                .state_dir()
                .join("tenants")
                .join(T1)
                .join("limits.json")
                .exists()
        {
            reference = Some(f.reference(T1));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(cron.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = cron.wait();
    let out = std::fs::read_to_string(&proof).unwrap_or_else(|e| {
        panic!(
            "the cron job left no proof within 75 s ({e}); cron log:\n{}",
            std::fs::read_to_string(f.dir.join("cron.log")).unwrap_or_default()
        )
    });
    let _ = std::fs::remove_file(&proof);
    let reference = reference.unwrap_or_else(|| f.reference(T1));
    assert_inside(&out, &reference, T1, "cron job");
}
