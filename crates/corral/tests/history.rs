//! Usage history (`corral daemon`, `corral history`), for real: a tenant
//! that hits its process limit and its CPU limit shows those faults in
//! `history --by-fault` with process snapshots; a collector killed with
//! SIGKILL leaves a valid database that lost at most its last round; an
//! alert rule posts JSON to a webhook (a TcpListener here) and runs a
//! command, once per rate-limit period. The daemon samples every 200 ms and
//! is stopped by pid (SIGTERM, then SIGKILL) also when a test fails.

mod common;
use common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// CPU for a few hundred ms, bounded by a count.
const BURN: &str = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done";
/// More forks than the process limit allows; the sleeps end by themselves.
const FORKS: &str = "for i in $(seq 12); do sleep 2 & done; wait";

struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Daemon {
    fn start(env: &Env, db: &Path) -> Daemon {
        let log = env.state_dir().join(format!("daemon-{}.log", N.next()));
        let file = std::fs::File::create(&log).unwrap();
        let child = env
            .cmd()
            .args(["daemon", "--interval", "200ms", "--db"])
            .arg(db)
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("start corral daemon");
        Daemon { child, log }
    }

    /// Started on this test's database, once it has stored two rounds.
    fn start_sampling(env: &Env) -> Daemon {
        let d = Daemon::start(env, &db(env));
        assert!(
            wait_until(Duration::from_secs(10), || db(env).exists()
                && samples(&db(env)).len() >= 2),
            "no samples: {}",
            d.log()
        );
        d
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn pid(&self) -> nix::unistd::Pid {
        nix::unistd::Pid::from_raw(self.child.id() as i32)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = nix::sys::signal::kill(self.pid(), nix::sys::signal::Signal::SIGTERM);
            let done = wait_until(Duration::from_secs(5), || {
                matches!(self.child.try_wait(), Ok(Some(_)))
            });
            if !done {
                let _ = self.child.kill();
            }
        }
        let _ = self.child.wait();
    }
}

/// A counter for log file names.
struct Counter(std::sync::atomic::AtomicU32);
impl Counter {
    fn next(&self) -> u32 {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}
static N: Counter = Counter(std::sync::atomic::AtomicU32::new(0));

fn db(env: &Env) -> PathBuf {
    env.state_dir().join("history.db")
}

/// `corral history ARGS --json --db DB`, parsed.
fn history(env: &Env, args: &[&str]) -> serde_json::Value {
    let db = db(env);
    let mut all = vec!["history"];
    all.extend(args);
    all.extend(["--json", "--db", db.to_str().unwrap()]);
    serde_json::from_str(&env.ok(&all)).unwrap()
}

fn tenant_row<'a>(v: &'a serde_json::Value, tenant: &str) -> Option<&'a serde_json::Value> {
    v.as_array()?.iter().find(|r| r["tenant"] == tenant)
}

/// The times of the samples stored so far (none before the daemon made
/// its tables).
fn samples(db: &Path) -> Vec<i64> {
    let c = rusqlite::Connection::open(db).unwrap();
    let Ok(mut st) = c.prepare("SELECT ts FROM raw ORDER BY ts") else {
        return vec![];
    };
    let v = st
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<Vec<i64>, _>>()
        .unwrap();
    v
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn process_and_cpu_limit_faults_show_in_by_fault_with_snapshots() {
    let env = Env::new();
    env.default_profile_with("");
    env.ok(&[
        "limits",
        "set",
        T1,
        "processes=8",
        "entry_processes=4",
        "cpu=10%",
    ]);
    env.ok(&["up", T1]);
    let daemon = Daemon::start_sampling(&env);
    // Forks refused at the limit, and a busy loop held to 10% of a core.
    let _ = env.run(&["run", T1, "--", "/bin/sh", "-c", FORKS]);
    env.sh(T1, BURN);

    let mut last = serde_json::Value::Null;
    let seen = wait_until(Duration::from_secs(30), || {
        last = history(&env, &["--by-fault", "--since", "10m"]);
        tenant_row(&last, T1).is_some_and(|r| {
            r["faults_processes"].as_i64() > Some(0) && r["faults_cpu"].as_i64() > Some(0)
        })
    });
    assert!(seen, "--by-fault: {last:#}\n{}", daemon.log());
    let procs = history(&env, &["--by-fault", "processes", "--since", "10m"]);
    assert_eq!(procs.as_array().unwrap().len(), 1, "{procs:#}");
    assert_eq!(procs[0]["tenant"], T1);
    assert!(procs[0]["faults"].as_i64() > Some(0), "{procs:#}");

    // The totals show the usage against the limits.
    let all = history(&env, &["--since", "10m"]);
    let t = tenant_row(&all, T1).unwrap_or_else(|| panic!("{all:#}"));
    assert_eq!(t["cpu_limit_pct"], 10.0, "{t:#}");
    assert_eq!(t["procs_limit"], 8.0, "{t:#}");
    assert!(t["cpu_avg_pct"].as_f64() > Some(0.0), "{t:#}");
    assert!(
        t["cpu_max_pct"].as_f64() <= Some(20.0),
        "held to 10%: {t:#}"
    );
    assert!(t["mem_max_bytes"].as_f64() > Some(0.0), "{t:#}");
    assert!(t["procs_max"].as_i64() >= Some(7), "{t:#}");

    // A snapshot of the tenant's processes at the incident.
    let snaps = history(&env, &[T1, "--snapshots", "--since", "10m"]);
    let snaps = snaps.as_array().unwrap();
    assert!(!snaps.is_empty(), "no snapshot: {}", daemon.log());
    assert!(snaps.len() <= 3, "at most 3 per incident: {snaps:#?}");
    let first = &snaps[0];
    assert!(first["faults"].as_str().unwrap().contains('='), "{first:#}");
    assert!(first["total"].as_u64() >= Some(1), "{first:#}");
    assert!(
        first["procs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["cmdline"]
                .as_str()
                .is_some_and(|c| c.contains("sleep") || c.contains("sh"))),
        "{first:#}"
    );

    // The tenant's steps, and its charts.
    let steps = history(&env, &[T1, "--since", "10m", "--step", "1m"]);
    assert!(!steps.as_array().unwrap().is_empty());
    let page = env.state_dir().join("t1.html");
    env.ok(&[
        "history",
        T1,
        "--since",
        "10m",
        "--html",
        page.to_str().unwrap(),
        "--db",
        db(&env).to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<svg") && html.contains("CPU (% of one core)"));
    assert!(html.contains("Processes at fault incidents"));
    // CSV for spreadsheets: a header and the tenant's line.
    let csv = env.ok(&[
        "history",
        "--csv",
        "--since",
        "10m",
        "--db",
        db(&env).to_str().unwrap(),
    ]);
    assert!(csv.starts_with("tenant,cpu_avg_pct,"), "{csv}");
    assert!(
        csv.lines().any(|l| l.starts_with(&format!("{T1},"))),
        "{csv}"
    );
}

#[test]
fn a_killed_collector_leaves_a_valid_database_and_loses_at_most_its_last_round() {
    let env = Env::new();
    env.default_profile_with("");
    env.ok(&["up", T1]);
    let db = db(&env);
    let mut daemon = Daemon::start(&env, &db);
    assert!(
        wait_until(Duration::from_secs(10), || db.exists()
            && samples(&db).len() >= 10),
        "no samples: {}",
        daemon.log()
    );
    // A second collector on the same database refuses to start.
    let second = env
        .cmd()
        .args(["daemon", "--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(125));
    assert!(
        String::from_utf8_lossy(&second.stderr).contains("another corral daemon"),
        "{second:?}"
    );
    // Kill it in the middle of its work: while the tenant runs.
    env.sh(T1, BURN);
    let before = samples(&db);
    let killed_at = now_ms();
    daemon.child.kill().unwrap();
    daemon.child.wait().unwrap();

    let c = rusqlite::Connection::open(&db).unwrap();
    let check: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    let after = samples(&db);
    assert!(
        after.len() >= before.len() && after.starts_with(&before),
        "committed samples lost: {} before, {} after",
        before.len(),
        after.len()
    );
    let last = *after.last().unwrap();
    // One round every 200 ms: the newest sample is at most one interval
    // (plus the time a round takes on a busy machine) before the kill.
    assert!(
        killed_at - last <= 200 + 800,
        "the last sample is {} ms older than the kill",
        killed_at - last
    );
    drop(c);
    // A new collector takes over the same database and goes on.
    let daemon = Daemon::start(&env, &db);
    let n = after.len();
    assert!(
        wait_until(Duration::from_secs(10), || samples(&db).len() >= n + 3),
        "{}",
        daemon.log()
    );
}

/// Accepts one HTTP request within `timeout`: (request head, body); answers 204.
fn accept_one(l: &std::net::TcpListener, timeout: Duration) -> Option<(String, String)> {
    let start = Instant::now();
    l.set_nonblocking(true).unwrap();
    let mut s = loop {
        match l.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if start.elapsed() > timeout {
                    return None;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut head = String::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
        head.push_str(&line);
    }
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    s.write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
        .unwrap();
    Some((head, String::from_utf8(body).unwrap()))
}

#[test]
fn an_alert_posts_json_to_a_webhook_and_runs_a_command_once_per_period() {
    let env = Env::new();
    env.default_profile_with("");
    env.ok(&["limits", "set", T1, "processes=8", "entry_processes=4"]);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let out = env.state_dir().join("alert.json");
    env.write_config(
        "history.toml",
        &format!(
            "# alerts of the test\n\
             [[alert]]\n\
             name = \"process-limit\"\n\
             faults = [\"processes\"]\n\
             count = 1\n\
             period = \"30s\"\n\
             every = \"1h\"\n\
             webhook = \"http://127.0.0.1:{port}/corral/alert\"\n\
             command = [\"/bin/sh\", \"-c\", \"cat > {}\"]\n",
            out.display()
        ),
    );
    env.ok(&["up", T1]);
    let daemon = Daemon::start_sampling(&env);
    let _ = env.run(&["run", T1, "--", "/bin/sh", "-c", FORKS]);
    let (head, body) = accept_one(&listener, Duration::from_secs(20))
        .unwrap_or_else(|| panic!("no webhook call: {}", daemon.log()));
    assert!(
        head.starts_with("POST /corral/alert HTTP/1.1\r\n"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{head}"
    );
    let alert: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(alert["rule"], "process-limit");
    assert_eq!(alert["tenant"], T1);
    assert_eq!(alert["kind"], "faults");
    assert!(alert["faults"]["processes"].as_i64() > Some(0), "{alert:#}");
    assert!(alert["message"].as_str().unwrap().contains(T1), "{alert:#}");
    // The command got the same JSON on its stdin.
    assert!(
        wait_until(Duration::from_secs(10), || std::fs::read_to_string(&out)
            .is_ok_and(|s| s.contains("\"process-limit\""))),
        "the command did not run: {}",
        daemon.log()
    );
    // More faults within the hour: no second alert for this tenant.
    let _ = env.run(&["run", T1, "--", "/bin/sh", "-c", FORKS]);
    assert!(
        accept_one(&listener, Duration::from_secs(3)).is_none(),
        "a second alert within the rate limit"
    );
    let sent = history(&env, &["--alerts", "--since", "10m"]);
    assert_eq!(sent.as_array().unwrap().len(), 1, "{sent:#}");
    assert_eq!(sent[0]["rule"], "process-limit");
}

#[test]
fn history_toml_errors_name_the_file_and_line() {
    let env = Env::new();
    env.write_config(
        "history.toml",
        "interval = \"5s\"\n[[alert]]\nname = \"x\"\nfaults = [\"disk\"]\ncommand = [\"/bin/true\"]\n",
    );
    let o = env.run(&["daemon", "--db", db(&env).to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(125));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("history.toml:4: faults: unknown kind \"disk\""),
        "{err}"
    );
    assert!(!db(&env).exists(), "nothing created on a bad configuration");
}
