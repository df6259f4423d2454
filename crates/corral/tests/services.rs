//! Supervised per-tenant services (issue: every way in, part 2): a real
//! PHP-FPM pool, socket-activated inside the tenant's sandbox, serving a
//! real nginx (127.0.0.1 only); restarted when it crashes, stopped when
//! idle, gone with the sandbox. And the `corral service` commands, the
//! restart policy, socket activation of any program (LISTEN_FDS/LISTEN_PID)
//! and the refusal of a socket in a tenant-writable directory.

mod common;

use common::*;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

const T4: &str = "corral-t4";

fn status(env: &Env, tenant: &str, name: &str) -> serde_json::Value {
    let out = env.ok(&["--json", "service", "status", tenant, name]);
    serde_json::from_str(out.lines().next().expect("one line per service")).unwrap()
}

/// Host pids whose command line mentions `needle` (this test's unique
/// FPM config path or marker).
fn processes_with(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmd).contains(needle) {
            out.push(pid);
        }
    }
    out
}

#[test]
fn php_fpm_is_socket_activated_restarted_idle_stopped_and_gone_with_the_sandbox() {
    let env = Env::new();
    let run = RunDir::new("fpm");
    let sock = run.0.join("fpm").join(format!("{T3}.sock"));
    let conf = format!("/etc/corral-fpm-{}.conf", std::process::id());
    env.default_profile_with(&format!(
        r#"
[services.php]
command = ["/usr/sbin/php-fpm8.2", "--nodaemonize", "--fpm-config", "{conf}"]
listen = "{run}/fpm/$USER.sock"
listen_group = "www-data"
idle_timeout = "2s"
stop_signal = "SIGQUIT"
log = "{run}/log/$USER/php.log"

[[mount]]
type = "file"
dst = "{conf}"
content = """
[global]
error_log = /proc/self/fd/2
daemonize = no
[www]
listen = {run}/fpm/$USER.sock
pm = ondemand
pm.max_children = 4
pm.process_idle_timeout = 1s
catch_workers_output = yes
"""

[[mount]]
type = "ro-bind"
src = "$HOME/svc-test-{pid}"
dst = "/srv"
"#,
        run = run.0.display(),
        pid = std::process::id(),
    ));
    let www = HomeDir(home_of(T3).join(format!("svc-test-{}", std::process::id())));
    write_home_file(
        T3,
        &format!("svc-test-{}/who.php", std::process::id()),
        "<?php echo posix_getpwuid(posix_geteuid())['name'], ' ', gethostname(), ' ', \
         getmypid(), ' ', file_exists('/etc/shadow') ? 'shadow' : 'no-shadow', \"\\n\";",
        0o644,
    );
    let _ = &www;

    env.ok(&["up", T3]);
    // The socket exists from `up` on, for the web server's group only; no
    // FPM runs yet.
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = std::fs::symlink_metadata(&sock).expect("the socket exists after up");
    assert!(m.file_type().is_socket());
    assert_eq!((m.uid(), m.mode() & 0o777), (0, 0o660));
    let www_data = corral_users::Db::system()
        .group_by_name("www-data")
        .unwrap()
        .unwrap()
        .gid;
    assert_eq!(m.gid(), www_data);
    let st = status(&env, T3, "php");
    assert_eq!(st["state"], "waiting", "{st}");
    assert!(st["pid"].is_null());
    assert!(
        processes_with(&conf).is_empty(),
        "FPM runs before any request"
    );

    // The first request starts FPM inside the sandbox, as the tenant.
    let nginx = Nginx::start(&sock);
    let (code, body) = nginx.get("/who.php");
    assert_eq!(code, 200, "{body}");
    let words: Vec<&str> = body.split_whitespace().collect();
    assert_eq!(words[0], T3, "{body}");
    assert_eq!(words[1], T3, "the sandbox's hostname: {body}");
    assert!(
        words[2].parse::<u32>().unwrap() < 100,
        "a pid of the sandbox: {body}"
    );
    assert_eq!(words[3], "no-shadow", "{body}");
    let st = status(&env, T3, "php");
    assert_eq!(st["state"], "running", "{st}");
    let first_pid = st["pid"].as_i64().unwrap();
    let hosts = processes_with(&conf);
    assert!(!hosts.is_empty());
    // Every FPM process is in the tenant's cgroup.
    let procs: Vec<String> = env
        .cgroup_dirs()
        .iter()
        .filter_map(|d| std::fs::read_to_string(d.join(T3).join("cgroup.procs")).ok())
        .collect();
    for p in &hosts {
        assert!(
            procs.iter().any(|l| l.lines().any(|x| x == p.to_string())),
            "FPM pid {p} outside the tenant's cgroup"
        );
    }

    // The tenant's own code kills the master (a crash): the init restarts it.
    env.sh(T3, &format!("kill -9 {first_pid}"));
    assert!(
        wait_until(Duration::from_secs(10), || {
            let st = status(&env, T3, "php");
            st["restarts"].as_u64() == Some(1) && st["state"] == "running"
        }),
        "not restarted: {}",
        status(&env, T3, "php")
    );
    assert_ne!(status(&env, T3, "php")["pid"].as_i64().unwrap(), first_pid);
    assert_eq!(nginx.get("/who.php").0, 200);

    // Idle (no worker for 2 s): stopped, no FPM process left; the socket
    // still answers the next request, which starts it again.
    assert!(
        wait_until(Duration::from_secs(20), || status(&env, T3, "php")["state"]
            == "waiting"),
        "not stopped when idle: {}",
        status(&env, T3, "php")
    );
    assert!(
        wait_until(Duration::from_secs(5), || processes_with(&conf).is_empty()),
        "FPM processes left after the idle stop: {:?}",
        processes_with(&conf)
    );
    let starts = status(&env, T3, "php")["starts"].as_u64().unwrap();
    let (code, body) = nginx.get("/who.php");
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        status(&env, T3, "php")["starts"].as_u64().unwrap(),
        starts + 1
    );

    // The log: FPM's own lines and corral's, timestamped.
    let log = env.ok(&["service", "logs", T3, "php", "-n", "200"]);
    for want in [
        "corral: connection: starting (socket activation)",
        "using inherited socket fd=3",
        "ended: signal SIGKILL",
        "idle for 2 s: stopping",
    ] {
        assert!(log.contains(want), "no {want:?} in the log:\n{log}");
    }
    assert!(
        log.lines()
            .all(|l| l.as_bytes().get(4) == Some(&b'-') && l.contains("Z ")),
        "{log}"
    );

    // Down: no FPM process, no socket.
    env.ok(&["down", T3]);
    assert!(
        wait_until(Duration::from_secs(5), || processes_with(&conf).is_empty()),
        "FPM processes left after down: {:?}",
        processes_with(&conf)
    );
    assert!(!sock.exists(), "the socket outlived the sandbox");
}

#[test]
fn service_commands_restart_policy_and_listen_fds() {
    let env = Env::new();
    let run = RunDir::new("cmd");
    let marker = format!("corral-svc-marker-{}", std::process::id());
    env.default_profile_with(&format!(
        r#"
[services.app]
command = ["/bin/sh", "-c", "echo app says hello; sleep 1000; : {marker}"]
restart = "always"

[services.flaky]
command = ["/bin/sh", "-c", "echo flaky fails; exit 3"]
log = "{run}/log/$USER/flaky.log"

[services.echo]
command = ["/usr/bin/python3", "-c", "import os,socket\ns=socket.socket(fileno=3)\nc,_=s.accept()\nc.sendall(('%s %s %s %s' % (os.environ['LISTEN_FDS'], os.environ['LISTEN_PID'] == str(os.getpid()), os.environ['LISTEN_FDNAMES'], os.environ['FPM_SOCKETS'])).encode())\nc.close()"]
listen = "{run}/echo.sock"
listen_mode = "0600"
idle_timeout = 0
restart = "never"
log = "{run}/log/$USER/echo.log"

[services.broken]
command = ["/bin/sh", "-c", "exit 1"]
listen = "{run}/broken.sock"
restart = "never"
log = "{run}/log/$USER/broken.log"

[services.missing]
command = ["no-such-program-here"]
start = "at-up"
restart = "never"
log = "{run}/log/$USER/missing.log"
"#,
        run = run.0.display()
    ));
    env.ok(&["up", T2]);
    // at-up services run from `up` on (the default log dir is used).
    let app_log = PathBuf::from(format!("/var/log/corral/{T2}/app.log"));
    let _cleanup = HomeDir(app_log.parent().unwrap().to_path_buf());
    let st = status(&env, T2, "app");
    assert_eq!(st["state"], "running", "{st}");
    let pid1 = st["pid"].as_i64().unwrap();
    assert_eq!(processes_with(&marker).len(), 1);

    // stop / start / restart, each settled when the command returns.
    let out = env.ok(&["service", "stop", T2, "app"]);
    assert!(out.contains(&format!("{T2}/app: stopped")), "{out}");
    assert!(processes_with(&marker).is_empty());
    env.ok(&["service", "start", T2, "app"]);
    let pid2 = status(&env, T2, "app")["pid"].as_i64().unwrap();
    env.ok(&["service", "restart", T2, "app"]);
    let pid3 = status(&env, T2, "app")["pid"].as_i64().unwrap();
    assert!(pid1 != pid2 && pid2 != pid3, "{pid1} {pid2} {pid3}");
    // Each run's line, timestamped (the init writes it when it reads it).
    let hellos = || {
        std::fs::read_to_string(&app_log)
            .unwrap_or_default()
            .matches("Z app says hello")
            .count()
    };
    assert!(
        wait_until(Duration::from_secs(5), || hellos() >= 3),
        "{}",
        std::fs::read_to_string(&app_log).unwrap_or_default()
    );

    // on-failure (the default) restarts a failing program, with back-off.
    env.ok(&["service", "start", T2, "flaky"]);
    assert!(
        wait_until(Duration::from_secs(10), || status(&env, T2, "flaky")
            ["restarts"]
            .as_u64()
            .unwrap()
            >= 3),
        "{}",
        status(&env, T2, "flaky")
    );
    let flog = std::fs::read_to_string(run.0.join(format!("log/{T2}/flaky.log"))).unwrap();
    assert!(
        flog.contains("ended: exit code 3") && flog.contains("restarting in 200 ms"),
        "{flog}"
    );
    env.ok(&["service", "stop", T2, "flaky"]);

    // Socket activation of any program: fd 3, LISTEN_FDS, LISTEN_PID.
    let mut c = std::os::unix::net::UnixStream::connect(run.0.join("echo.sock")).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut got = String::new();
    c.read_to_string(&mut got).unwrap();
    assert_eq!(
        got,
        format!("1 True echo {}=3", run.0.join("echo.sock").display())
    );

    // An on-demand program that fails at once, not restarted, with a
    // connection waiting: started again by that connection, but after a
    // back-off each time, not in a tight loop.
    let _waiting = std::os::unix::net::UnixStream::connect(run.0.join("broken.sock")).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let starts = status(&env, T2, "broken")["starts"].as_u64().unwrap();
    assert!((2..=6).contains(&starts), "{starts} starts in 1.5 s");

    // A program that is not there: the start fails, says why, exits non-zero.
    let o = env.run(&["service", "start", T2, "missing"]);
    assert!(!o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("command not found in the sandbox"), "{out}");

    // Unknown names: the error lists what there is.
    let o = env.run(&["service", "status", T2, "nosuch"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no service \"nosuch\"") && err.contains("app, flaky, echo, broken, missing"),
        "{err}"
    );

    // ls lists every service of every running tenant.
    let ls = env.ok(&["service", "ls"]);
    for name in ["app", "flaky", "echo", "broken", "missing"] {
        assert!(
            ls.lines().any(|l| l.starts_with(T2) && l.contains(name)),
            "{ls}"
        );
    }
    env.ok(&["down", T2]);
    assert!(processes_with(&marker).is_empty());
}

#[test]
fn a_socket_or_log_in_a_tenant_writable_directory_is_refused_and_nothing_is_left() {
    let env = Env::new();
    let home = home_of(T1);
    env.default_profile_with(
        "[services.php]\ncommand = [\"/bin/true\"]\nlisten = \"$HOME/php.sock\"\n",
    );
    let o = env.run(&["up", T1]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "{} must be a directory owned by root",
            home.display()
        )),
        "{err}"
    );
    assert!(!home.join("php.sock").exists());
    assert!(
        !env.state_dir().join("tenants").join(T1).exists(),
        "half-created state"
    );
    assert!(
        env.cgroup_dirs().iter().all(|d| !d.join(T1).exists()),
        "a cgroup was left"
    );
}

#[test]
fn boot_brings_up_exactly_the_tenants_with_services() {
    let env = Env::new();
    let run = RunDir::new("boot");
    env.default_profile_with("");
    env.write_config(
        &format!("tenants/{T4}.toml"),
        &format!(
            "[services.app]\ncommand = [\"/bin/sleep\", \"1000\"]\nlog = \"{}/app.log\"\n",
            run.0.display()
        ),
    );
    let dry = env.ok(&["service", "boot", "--dry-run"]);
    assert_eq!(dry.trim(), format!("{T4}: would bring up (1 service(s))"));
    assert!(!env.state_dir().join("tenants").join(T4).exists());
    let out = env.ok(&["service", "boot"]);
    assert!(out.contains(&format!("{T4}: up (1 service(s))")), "{out}");
    let up: Vec<String> = std::fs::read_dir(env.state_dir().join("tenants"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(up, [T4]);
    assert_eq!(status(&env, T4, "app")["state"], "running");
}

/// The shipped example pool (config/services-php-fpm.toml) works as
/// written, only its socket and log moved to this test's directory.
#[test]
fn the_shipped_php_fpm_example_serves_php() {
    let env = Env::new();
    let run = RunDir::new("example");
    let text = shipped_php_fpm(&run.0);
    env.default_profile_with(&format!(
        "{text}\n[[mount]]\ntype = \"ro-bind\"\nsrc = \"$HOME/svc-example-{pid}\"\ndst = \"/srv\"\n",
        pid = std::process::id()
    ));
    let _www = HomeDir(home_of(T1).join(format!("svc-example-{}", std::process::id())));
    write_home_file(
        T1,
        &format!("svc-example-{}/v.php", std::process::id()),
        "<?php echo PHP_SAPI, ' ', posix_getpwuid(posix_geteuid())['name'], \"\\n\";",
        0o644,
    );
    env.ok(&["up", T1]);
    let nginx = Nginx::start(&run.0.join("fpm").join(format!("{T1}.sock")));
    let (code, body) = nginx.get("/v.php");
    assert_eq!(
        (code, body.trim()),
        (200, format!("fpm-fcgi {T1}").as_str())
    );
    assert_eq!(status(&env, T1, "php")["state"], "running");
}

/// Two tenants configured with one socket path: the second `up` is
/// refused and the first tenant keeps its socket.
#[test]
fn a_socket_in_use_by_another_sandbox_is_never_taken_over() {
    let env = Env::new();
    let run = RunDir::new("shared");
    let sock = run.0.join("shared.sock");
    env.default_profile_with(&format!(
        "[services.app]\ncommand = [\"/bin/true\"]\nlisten = \"{}\"\nlog = \"{}/$USER.log\"\n",
        sock.display(),
        run.0.display()
    ));
    env.ok(&["up", T1]);
    let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
    let before = inode(&sock);
    let o = env.run(&["up", T2]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("is in use"), "{err}");
    assert_eq!(inode(&sock), before, "T1's socket was replaced");
    // Looked at, not connected to: T1's on-demand service did not start.
    assert_eq!(status(&env, T1, "app")["starts"], 0);
    assert!(std::os::unix::net::UnixStream::connect(&sock).is_ok());
    env.ok(&["down", T1]);
    assert!(!sock.exists());
}
