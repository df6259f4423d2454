//! The load clients: one h2load per client machine (network namespace),
//! `--h1 -D SECONDS -c USERS` against one virtual host, pinned to the
//! client CPU, under `timeout` and the watchdog; and the article's per-host
//! figures (siege's transactions, availability, response time, transaction
//! rate, throughput, longest and failed transactions, plus p99) computed
//! from h2load's summary and `--log-file`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{BenchError, Result};
use crate::h2load::{self, H2loadSummary, LogEntry};
use crate::stats;
use crate::suites::{arg, tools};

/// One client's run against one host.
#[derive(Debug, Clone)]
pub struct ClientRun {
    pub users: u64,
    pub summary: H2loadSummary,
    /// Log entries (every completed response).
    pub log: Vec<LogEntry>,
}

/// The article's per-host figures (a host may have several clients).
#[derive(Debug, Clone, PartialEq)]
pub struct HostFigures {
    pub users: u64,
    /// Successful (2xx/3xx) responses.
    pub transactions: u64,
    /// Requests that got no successful response (4xx/5xx, errors, timeouts).
    pub failed: u64,
    /// transactions / (transactions + failed), percent.
    pub availability: f64,
    /// Successful transactions per second (sum over the host's clients).
    pub trans_per_s: f64,
    /// Response bodies (error pages included, as siege counts them), MiB
    /// per second (siege's "Throughput").
    pub throughput_mb_s: f64,
    /// Over the successful responses of the log, milliseconds.
    pub mean_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub longest_ms: Option<f64>,
}

/// Combine the runs of a host's clients.
pub fn host_figures(runs: &[&ClientRun]) -> HostFigures {
    let mut f = HostFigures {
        users: 0,
        transactions: 0,
        failed: 0,
        availability: 0.0,
        trans_per_s: 0.0,
        throughput_mb_s: 0.0,
        mean_ms: None,
        p99_ms: None,
        longest_ms: None,
    };
    let mut ok_ms: Vec<f64> = Vec::new();
    for r in runs {
        let q = &r.summary.requests;
        f.users += r.users;
        f.transactions += q.succeeded;
        f.failed += q.total.saturating_sub(q.succeeded);
        if r.summary.finished_s > 0.0 {
            // Not h2load's req/s: it counts every response, 5xx included
            // (fixture neighbours-h2load-502-D1: 0 succeeded, "20.00 req/s").
            f.trans_per_s += q.succeeded as f64 / r.summary.finished_s;
            if let Some(t) = r.summary.traffic {
                f.throughput_mb_s += t.data as f64 / r.summary.finished_s / (1024.0 * 1024.0);
            }
        }
        ok_ms.extend(
            r.log
                .iter()
                .filter(|e| (200..400).contains(&e.status))
                .map(|e| e.duration_us as f64 / 1000.0),
        );
    }
    let attempts = f.transactions + f.failed;
    if attempts > 0 {
        f.availability = f.transactions as f64 / attempts as f64 * 100.0;
    }
    f.mean_ms = stats::mean(&ok_ms);
    if let Some(p) = stats::percentiles(&ok_ms, &[99.0, 100.0]) {
        f.p99_ms = Some(p[0]);
        f.longest_ms = Some(p[1]);
    }
    f
}

/// One planned client: which network namespace, host, users.
#[derive(Debug, Clone)]
pub struct ClientSpec {
    /// `ip netns exec NS` prefix.
    pub netns: Vec<String>,
    /// `http://198.18.x.y:PORT/path`.
    pub url: String,
    /// Host name sent as `:authority` (HTTP/1.1 `Host`).
    pub host: String,
    pub users: u64,
    pub log: PathBuf,
}

/// Hard limit of one client: the duration plus a minute (`timeout -k 5`),
/// the watchdog 30 s later.
pub fn limit(duration_s: u64) -> Duration {
    Duration::from_secs(duration_s + 60)
}

/// The client's argv: `ip netns exec NS [taskset -c CPU] timeout -k 5 LIMIT
/// h2load --h1 -D SECONDS -c USERS -H ':authority: HOST' --log-file=F URL`.
pub fn argv(c: &ClientSpec, duration_s: u64, cpu: Option<usize>) -> Vec<String> {
    let find = |t: tools::Tool| arg(&t.find().unwrap_or_else(|| t.name.into()));
    let mut v = c.netns.clone();
    if let Some(cpu) = cpu {
        v.extend([find(tools::TASKSET), "-c".into(), cpu.to_string()]);
    }
    v.extend([
        find(tools::TIMEOUT),
        "-k".into(),
        "5".into(),
        limit(duration_s).as_secs().to_string(),
        find(tools::H2LOAD),
        "--h1".into(),
        "-D".into(),
        duration_s.to_string(),
        "-c".into(),
        c.users.to_string(),
        "-H".into(),
        format!(":authority: {}", c.host),
        format!("--log-file={}", c.log.display()),
        c.url.clone(),
    ]);
    v
}

/// Parse what one client left: its stdout and log file.
pub fn parse_client(users: u64, stdout: &str, log: &Path) -> Result<ClientRun> {
    let summary = h2load::parse_summary(stdout)?;
    let text = std::fs::read_to_string(log).map_err(|e| BenchError::io(log, e))?;
    Ok(ClientRun {
        users,
        summary,
        log: h2load::parse_log(&text)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h2load::{Requests, Traffic};

    fn run(users: u64, total: u64, ok: u64, rps: f64, data: u64, lat_ms: &[u64]) -> ClientRun {
        ClientRun {
            users,
            summary: H2loadSummary {
                finished_s: 10.0,
                req_per_s: rps,
                requests: Requests {
                    total,
                    succeeded: ok,
                    done: total,
                    started: total,
                    ..Requests::default()
                },
                traffic: Some(Traffic {
                    total: data,
                    headers: 0,
                    data,
                }),
                ..H2loadSummary::default()
            },
            log: lat_ms
                .iter()
                .map(|&ms| LogEntry {
                    start_us: 0,
                    status: 200,
                    duration_us: ms * 1000,
                })
                .chain(std::iter::once(LogEntry {
                    start_us: 0,
                    status: 502,
                    duration_us: 1,
                }))
                .collect(),
        }
    }

    #[test]
    fn noisy_host_adds_its_two_clients() {
        let a = run(500, 1000, 990, 99.0, 10 * 1048576, &[10, 20, 30]);
        let b = run(500, 1010, 1000, 100.0, 20 * 1048576, &[40]);
        let f = host_figures(&[&a, &b]);
        assert_eq!((f.users, f.transactions, f.failed), (1000, 1990, 20));
        assert!((f.availability - 1990.0 / 2010.0 * 100.0).abs() < 1e-9);
        assert!((f.trans_per_s - 199.0).abs() < 1e-9);
        assert!((f.throughput_mb_s - 3.0).abs() < 1e-9);
        // The 502 (1 µs) is not a transaction: mean/p99/longest over 2xx only.
        assert_eq!(f.mean_ms, Some(25.0));
        assert_eq!(f.p99_ms, Some(40.0));
        assert_eq!(f.longest_ms, Some(40.0));
    }

    fn fixture(name: &str) -> String {
        let p = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    fn captured(name: &str, users: u64) -> ClientRun {
        let p = format!("{}/tests/fixtures/{name}.log", env!("CARGO_MANIFEST_DIR"));
        parse_client(users, &fixture(&format!("{name}.txt")), Path::new(&p)).unwrap()
    }

    /// A real `h2load --h1 -D 2 -c 4 --rps 25 -H ':authority: site1.test'`
    /// from a client network namespace (neighbours-CAPTURE.txt).
    #[test]
    fn captured_duration_run() {
        let r = captured("neighbours-h2load-static-D2", 4);
        assert_eq!(r.summary.finished_s, 2.0);
        assert_eq!(r.summary.requests.total, 200);
        assert_eq!(
            r.summary.requests.started, 204,
            "in flight at the end: not counted"
        );
        assert_eq!(r.log.len(), 200, "one log line per counted response");
        let f = host_figures(&[&r]);
        assert_eq!((f.users, f.transactions, f.failed), (4, 200, 0));
        assert_eq!(f.availability, 100.0);
        assert_eq!(f.trans_per_s, 100.0);
        assert!((f.throughput_mb_s - 24000.0 / 2.0 / 1048576.0).abs() < 1e-12);
        // The log's slowest response is the summary's `time for request` max.
        assert_eq!(f.longest_ms, Some(0.468));
        assert!(
            f.p99_ms.unwrap() <= 0.468 && f.mean_ms.unwrap() > 0.2,
            "{f:?}"
        );
    }

    /// Every request answered 502 (PHP-FPM's socket missing): h2load still
    /// prints `20.00 req/s`; the suite counts no transaction.
    #[test]
    fn captured_bad_gateway_run() {
        let r = captured("neighbours-h2load-502-D1", 2);
        assert_eq!(r.summary.req_per_s, 20.0);
        assert_eq!(r.summary.status.s5xx, 20);
        let f = host_figures(&[&r]);
        assert_eq!(
            (f.transactions, f.failed, f.trans_per_s, f.availability),
            (0, 20, 0.0, 0.0)
        );
        assert_eq!((f.mean_ms, f.p99_ms, f.longest_ms), (None, None, None));
    }

    #[test]
    fn nothing_answered() {
        let f = host_figures(&[&run(10, 0, 0, 0.0, 0, &[])]);
        assert_eq!(
            (f.transactions, f.availability, f.mean_ms, f.p99_ms),
            (0, 0.0, None, None)
        );
    }

    #[test]
    fn client_argv_is_bounded_and_pinned() {
        let c = ClientSpec {
            netns: vec!["ip".into(), "netns".into(), "exec".into(), "ns1".into()],
            url: "http://198.18.0.1:8080/index.html".into(),
            host: "site1.test".into(),
            users: 100,
            log: "/tmp/l".into(),
        };
        let v = argv(&c, 8, Some(1)).join(" ");
        assert!(v.starts_with("ip netns exec ns1 "), "{v}");
        assert!(v.contains("taskset -c 1 "), "{v}");
        assert!(v.contains(" -k 5 68 "), "{v}");
        assert!(v.ends_with("--h1 -D 8 -c 100 -H :authority: site1.test --log-file=/tmp/l http://198.18.0.1:8080/index.html"), "{v}");
    }
}
