//! `corral metrics`: the exposition passes `promtool check metrics`, and a
//! real Prometheus server (Debian's `prometheus`, scripts/install-deps.sh)
//! scrapes `corral metrics serve` and answers queries for the tenant's
//! series. Everything started here is stopped by pid (SIGTERM, then SIGKILL)
//! also when the test fails.

mod common;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A few hundred ms of CPU in the tenant, bounded by a count.
const BURN: &str = "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done";

/// A started server, stopped on drop: SIGTERM, up to 5 s, then SIGKILL.
struct Server {
    child: Child,
    what: &'static str,
    log: std::path::PathBuf,
}

impl Server {
    fn start(what: &'static str, mut cmd: Command, log: &Path) -> Server {
        let file = std::fs::File::create(log).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("start {what}: {e}"));
        Server {
            child,
            what,
            log: log.to_path_buf(),
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn assert_running(&mut self) {
        if let Ok(Some(st)) = self.child.try_wait() {
            panic!("{} exited ({st}):\n{}", self.what, self.log());
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let exited = wait_until(Duration::from_secs(5), || {
                matches!(self.child.try_wait(), Ok(Some(_)))
            });
            if !exited {
                let _ = self.child.kill();
            }
        }
        let _ = self.child.wait();
    }
}

/// A plain HTTP/1.1 GET on loopback: (status, headers, body).
fn get(port: u16, target: &str, accept: Option<&str>) -> std::io::Result<(u16, String, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{accept}Connection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Ok((status, head.to_string(), body))
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// The value of one series in a text exposition.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

fn series(name: &str, tenant: &str) -> String {
    format!("{name}{{tenant=\"{tenant}\"}}")
}

/// `corral metrics serve` on a free loopback port, answering; its log in `dir`.
fn serve(env: &Env, dir: &Path) -> (Server, u16) {
    let port = free_port();
    let mut cmd = env.cmd();
    cmd.args(["metrics", "serve", "--listen", &format!("127.0.0.1:{port}")]);
    let mut corral = Server::start("corral metrics serve", cmd, &dir.join("corral.log"));
    let ready = wait_until(Duration::from_secs(10), || {
        corral.assert_running();
        get(port, "/metrics", None).is_ok_and(|(s, _, _)| s == 200)
    });
    assert!(
        ready,
        "corral metrics serve did not answer:\n{}",
        corral.log()
    );
    (corral, port)
}

fn up_and_burn(env: &Env) {
    env.default_profile_with("");
    env.ok(&["up", T1]);
    env.sh(T1, BURN);
}

#[test]
fn dump_passes_promtool_and_shows_the_tenants_usage_and_limits() {
    let env = Env::new();
    up_and_burn(&env);
    let o = env.run(&["metrics", "dump"]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        o.status.success(),
        "corral metrics dump: {:?}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        o.stderr.is_empty(),
        "no tenant should fail to read: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus: scripts/install-deps.sh)");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let lint = promtool.wait_with_output().unwrap();
    assert!(
        lint.status.success() && lint.stdout.is_empty() && lint.stderr.is_empty(),
        "promtool check metrics ({:?}):\n{}{}\n--- exposition:\n{text}",
        lint.status,
        String::from_utf8_lossy(&lint.stdout),
        String::from_utf8_lossy(&lint.stderr)
    );

    let cpu = value(&text, &series("corral_tenant_cpu_seconds_total", T1)).expect("cpu series");
    assert!(cpu > 0.1, "the burner's CPU time is counted: {cpu}");
    for (name, want) in [
        ("corral_tenant_up", Some(1.0)),
        ("corral_tenant_cpu_limit_cores", Some(1.0)),
        (
            "corral_tenant_memory_limit_bytes",
            Some((1u64 << 30) as f64),
        ),
        ("corral_tenant_processes_limit", Some(100.0)),
        ("corral_tenant_entry_processes_limit", Some(20.0)),
        ("corral_tenant_entry_processes", Some(0.0)),
        ("corral_tenant_oom_kills_total", Some(0.0)),
        ("corral_tenant_processes_limit_hits_total", Some(0.0)),
        ("corral_tenant_memory_bytes", None),
        ("corral_tenant_processes", None),
        ("corral_tenant_io_read_bytes_total", None),
        ("corral_tenant_cpu_throttled_seconds_total", None),
        ("corral_tenant_start_time_seconds", None),
    ] {
        let v =
            value(&text, &series(name, T1)).unwrap_or_else(|| panic!("{name} missing:\n{text}"));
        if let Some(want) = want {
            assert_eq!(v, want, "{name}");
        }
    }
    assert!(value(&text, &series("corral_tenant_memory_bytes", T1)).unwrap() > 0.0);
    assert_eq!(value(&text, "corral_tenants{state=\"up\"}"), Some(1.0));
    assert_eq!(value(&text, "corral_scrape_errors_total"), Some(0.0));

    // The OpenMetrics form: same samples, OpenMetrics' own lines.
    let om = env.ok(&["metrics", "dump", "--openmetrics"]);
    assert!(om.ends_with("# EOF\n"), "{om}");
    assert!(
        om.contains("# TYPE corral_tenant_cpu_seconds counter\n"),
        "{om}"
    );
    assert!(
        om.contains("# UNIT corral_tenant_memory_bytes bytes\n"),
        "{om}"
    );
}

#[test]
fn serve_refuses_a_non_loopback_address_without_allow_remote() {
    let env = Env::new();
    let o = env.run(&["metrics", "serve", "--listen", "0.0.0.0:9717"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--allow-remote"), "{err}");
}

#[test]
fn prometheus_scrapes_the_endpoint_and_its_api_returns_the_tenants_series() {
    let env = Env::new();
    up_and_burn(&env);
    let dir = tempfile::Builder::new()
        .prefix("corral-test-prometheus")
        .tempdir_in("/var/tmp")
        .unwrap();

    let (mut corral, port) = serve(&env, dir.path());

    // What the endpoint says, by the client's Accept header.
    let (status, head, body) = get(port, "/metrics", None).unwrap();
    assert_eq!(status, 200);
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    assert!(value(&body, &series("corral_tenant_cpu_seconds_total", T1)).unwrap() > 0.0);
    let (_, head, body) = get(
        port,
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
    )
    .unwrap();
    assert!(head.contains("application/openmetrics-text"), "{head}");
    assert!(body.ends_with("# EOF\n"));
    assert_eq!(get(port, "/nothing", None).unwrap().0, 404);

    let web = free_port();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
             scrape_configs:\n  - job_name: corral\n    static_configs:\n      \
             - targets: ['127.0.0.1:{port}']\n"
        ),
    )
    .unwrap();
    let mut cmd = Command::new("prometheus");
    cmd.arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{web}"))
        .current_dir(dir.path());
    let mut prom = Server::start("prometheus", cmd, &dir.path().join("prometheus.log"));

    // PromQL: corral_tenant_cpu_seconds_total{tenant="corral-t1"}, URL-encoded.
    let query = |q: &str| -> Option<serde_json::Value> {
        let enc: String = q
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-' | b'.' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let (status, _, body) = get(web, &format!("/api/v1/query?query={enc}"), None).ok()?;
        (status == 200).then_some(())?;
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        let first = v["data"]["result"].get(0)?.clone();
        Some(first)
    };
    let cpu_query = format!("corral_tenant_cpu_seconds_total{{tenant=\"{T1}\"}}");
    let start = Instant::now();
    let mut found = None;
    while start.elapsed() < Duration::from_secs(30) {
        prom.assert_running();
        corral.assert_running();
        if let Some(r) = query(&cpu_query) {
            found = Some(r);
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let r = found.unwrap_or_else(|| {
        panic!(
            "no {cpu_query} from Prometheus after 30 s\n--- prometheus:\n{}\n--- corral:\n{}",
            prom.log(),
            corral.log()
        )
    });
    assert_eq!(r["metric"]["job"], "corral", "{r}");
    assert_eq!(r["metric"]["tenant"], T1, "{r}");
    let cpu: f64 = r["value"][1].as_str().unwrap().parse().unwrap();
    assert!(cpu > 0.0, "{r}");
    eprintln!(
        "Prometheus: {cpu_query} = {cpu} after {:?}",
        start.elapsed()
    );

    // The same scrape holds the other families, typed as declared.
    let mem = query(&format!(
        "corral_tenant_memory_limit_bytes{{tenant=\"{T1}\"}}"
    ))
    .unwrap();
    assert_eq!(mem["value"][1], (1u64 << 30).to_string(), "{mem}");
    let up = query(&format!("corral_tenant_up{{tenant=\"{T1}\"}}")).unwrap();
    assert_eq!(up["value"][1], "1", "{up}");
    let target_up = query("up{job=\"corral\"}").unwrap();
    assert_eq!(target_up["value"][1], "1", "{target_up}");
}

/// `corral metrics serve` keeps every tenant's files open between scrapes
/// (docs/metrics.md, "What a scrape costs"): a tenant taken down and up
/// again (a new init, a new cgroup of the same name) and given new limits is
/// read through new files, never the old run's, and its counters keep moving.
#[test]
fn serve_follows_a_tenant_taken_down_and_up_again() {
    let env = Env::new();
    up_and_burn(&env);
    let dir = tempfile::tempdir().unwrap();
    let (mut corral, port) = serve(&env, dir.path());
    let scrape = || {
        let (status, _, body) = get(port, "/metrics", None).unwrap();
        assert_eq!(status, 200);
        assert_eq!(
            value(&body, "corral_scrape_errors_total"),
            Some(0.0),
            "{body}"
        );
        body
    };
    let at = |body: &str, name: &str| {
        value(body, &series(name, T1)).unwrap_or_else(|| panic!("{name} missing:\n{body}"))
    };
    let first = scrape();
    let cpu_first = at(&first, "corral_tenant_cpu_seconds_total");
    assert!(cpu_first > 0.1, "the burner's CPU time: {cpu_first}");
    assert_eq!(at(&first, "corral_tenant_processes_limit"), 100.0);

    env.ok(&["down", T1]);
    let down = scrape();
    assert_eq!(
        value(&down, "corral_tenants{state=\"up\"}"),
        Some(0.0),
        "{down}"
    );
    assert_eq!(
        value(&down, &series("corral_tenant_cpu_seconds_total", T1)),
        None
    );

    env.ok(&["up", T1]);
    env.ok(&["limits", "set", T1, "processes=50"]);
    let again = scrape();
    assert_eq!(at(&again, "corral_tenant_up"), 1.0);
    assert_eq!(
        at(&again, "corral_tenant_processes_limit"),
        50.0,
        "the new limits.json"
    );
    let cpu_again = at(&again, "corral_tenant_cpu_seconds_total");
    assert!(
        cpu_again < cpu_first,
        "the new cgroup counts from zero: {cpu_again} after {cpu_first}"
    );
    env.sh(T1, BURN);
    let burnt = scrape();
    let cpu_burnt = at(&burnt, "corral_tenant_cpu_seconds_total");
    assert!(
        cpu_burnt > cpu_again + 0.05,
        "counters move through the kept files: {cpu_burnt} after {cpu_again}"
    );
    // Down and up again between two scrapes.
    env.ok(&["down", T1]);
    env.ok(&["up", T1]);
    let cycled = scrape();
    assert_eq!(at(&cycled, "corral_tenant_up"), 1.0);
    let cpu_cycled = at(&cycled, "corral_tenant_cpu_seconds_total");
    assert!(
        cpu_cycled < cpu_burnt,
        "the new run's cgroup, not the old one's: {cpu_cycled} after {cpu_burnt}"
    );
    corral.assert_running();
}
