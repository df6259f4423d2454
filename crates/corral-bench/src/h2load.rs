//! Parsing h2load (nghttp2-client 1.52, Debian 12) output.
//!
//! Two inputs:
//!
//! * **stdout** — the summary block (`finished in …`, `requests: …`,
//!   `status codes: …`, `traffic: …` and the min/max/mean/sd table).
//!   h2load **exits 0 even when every request failed**: always look at
//!   [`H2loadSummary::failure`] (or the `failed` figure).
//! * **`--log-file`** — one tab-separated line per *completed* response:
//!   request start time in µs since the Unix epoch, HTTP status (`-1` for a
//!   failed stream), µs from start to end of response. Requests whose
//!   connection failed or was closed before a response are not logged at all.
//!   Further columns may be appended by later versions and are ignored.
//!
//! Units: h2load's `KB`/`MB` are binary (1024, 1024²): `traffic: 247.07KB
//! (253000)` is 253000 / 1024. Durations are printed as `us`, `ms` or `s`.

use crate::error::{BenchError, Result};
use crate::results::{Better, Samples};
use crate::stats;

/// Figure names written by [`record`]; the CGI report layout uses them.
pub mod fig {
    pub const SECONDS: &str = "seconds";
    pub const REQ_PER_S: &str = "req_per_s";
    pub const KIB_PER_S: &str = "kib_per_s";
    pub const SUCCEEDED: &str = "succeeded";
    pub const FAILED: &str = "failed";
    pub const P50_MS: &str = "p50_ms";
    pub const P90_MS: &str = "p90_ms";
    pub const P99_MS: &str = "p99_ms";
}

/// The `requests:` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Requests {
    pub total: u64,
    pub started: u64,
    pub done: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub errored: u64,
    pub timeout: u64,
}

/// The `status codes:` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatusCodes {
    pub s2xx: u64,
    pub s3xx: u64,
    pub s4xx: u64,
    pub s5xx: u64,
}

/// The `traffic:` line, exact byte counts (the numbers in parentheses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Traffic {
    pub total: u64,
    pub headers: u64,
    pub data: u64,
}

/// One row of the min/max/mean/sd table; times in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Spread {
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub sd: f64,
    /// The `+/- sd` column: share of samples within one sd, in percent.
    pub within_sd_pct: f64,
}

/// Everything h2load prints at the end of a run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct H2loadSummary {
    /// Wall time of the run (`finished in`), seconds.
    pub finished_s: f64,
    pub req_per_s: f64,
    /// Throughput, bytes per second.
    pub bytes_per_s: f64,
    pub requests: Requests,
    pub status: StatusCodes,
    pub traffic: Option<Traffic>,
    pub time_for_request: Option<Spread>,
    pub time_for_connect: Option<Spread>,
    pub time_to_first_byte: Option<Spread>,
    /// Per-client request rate (req/s), not a time.
    pub req_per_s_per_client: Option<Spread>,
}

impl H2loadSummary {
    /// `None` if every request succeeded, else a one-line explanation.
    /// Needed because h2load's exit status does not say.
    pub fn failure(&self) -> Option<String> {
        let r = &self.requests;
        (r.failed > 0 || r.succeeded < r.total).then(|| {
            format!(
                "{} of {} requests failed ({} errored, {} timed out; status 4xx {}, 5xx {})",
                r.total - r.succeeded,
                r.total,
                r.errored,
                r.timeout,
                self.status.s4xx,
                self.status.s5xx
            )
        })
    }
}

/// Parse h2load's stdout (stderr may be mixed in; unknown lines are skipped).
pub fn parse_summary(text: &str) -> Result<H2loadSummary> {
    let err = |m: String| BenchError::parse("h2load", m);
    let mut s = H2loadSummary::default();
    let (mut finished, mut requests, mut status) = (false, false, false);
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("finished in ") {
            // finished in 2.29ms, 87183.96 req/s, 25.61MB/s
            let parts: Vec<&str> = rest.split(',').map(str::trim).collect();
            if parts.len() != 3 {
                return Err(err(format!("unexpected line: {line}")));
            }
            s.finished_s =
                parse_duration(parts[0]).ok_or_else(|| err(format!("bad duration in: {line}")))?;
            s.req_per_s = parts[1]
                .strip_suffix(" req/s")
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| err(format!("bad req/s in: {line}")))?;
            s.bytes_per_s =
                parse_rate(parts[2]).ok_or_else(|| err(format!("bad rate in: {line}")))?;
            finished = true;
        } else if let Some(rest) = line.strip_prefix("requests:") {
            let c = counts(rest).map_err(|m| err(format!("{m} in: {line}")))?;
            let get = |k: &str| c.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
            s.requests = Requests {
                total: get("total").ok_or_else(|| err(format!("no total in: {line}")))?,
                started: get("started").unwrap_or(0),
                done: get("done").unwrap_or(0),
                succeeded: get("succeeded")
                    .ok_or_else(|| err(format!("no succeeded in: {line}")))?,
                failed: get("failed").unwrap_or(0),
                errored: get("errored").unwrap_or(0),
                timeout: get("timeout").unwrap_or(0),
            };
            requests = true;
        } else if let Some(rest) = line.strip_prefix("status codes:") {
            let c = counts(rest).map_err(|m| err(format!("{m} in: {line}")))?;
            let get = |k: &str| c.iter().find(|(n, _)| n == k).map(|(_, v)| *v).unwrap_or(0);
            s.status = StatusCodes {
                s2xx: get("2xx"),
                s3xx: get("3xx"),
                s4xx: get("4xx"),
                s5xx: get("5xx"),
            };
            status = true;
        } else if let Some(rest) = line.strip_prefix("traffic:") {
            s.traffic = parse_traffic(rest);
        } else if let Some((label, values)) = line.split_once(':') {
            let label = label.trim();
            let is_time = label.starts_with("time ");
            let target = match label {
                "time for request" => &mut s.time_for_request,
                "time for connect" => &mut s.time_for_connect,
                "time to 1st byte" => &mut s.time_to_first_byte,
                "req/s" => &mut s.req_per_s_per_client,
                _ => continue,
            };
            *target = Some(
                parse_spread(values, is_time)
                    .ok_or_else(|| err(format!("bad table row: {line}")))?,
            );
        }
    }
    if !finished || !requests || !status {
        return Err(err(
            "no summary (missing `finished in`, `requests:` or `status codes:` line)".into(),
        ));
    }
    Ok(s)
}

/// `200 total, 200 started, …` → [("total", 200), …].
fn counts(s: &str) -> std::result::Result<Vec<(String, u64)>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (n, name) = p
                .split_once(' ')
                .ok_or_else(|| format!("bad count `{p}`"))?;
            let n = n.parse().map_err(|_| format!("bad count `{p}`"))?;
            Ok((name.trim().to_string(), n))
        })
        .collect()
}

fn parse_traffic(s: &str) -> Option<Traffic> {
    // 247.07KB (253000) total, 36.72KB (37600) headers (space savings 0.00%), 200.39KB (205200) data
    let mut t = Traffic::default();
    for part in s.split(',') {
        let open = part.find('(')?;
        let close = open + part[open..].find(')')?;
        let n: u64 = part[open + 1..close].trim().parse().ok()?;
        match part[close + 1..].split_whitespace().next()? {
            "total" => t.total = n,
            "headers" => t.headers = n,
            "data" => t.data = n,
            _ => {}
        }
    }
    Some(t)
}

fn parse_spread(values: &str, is_time: bool) -> Option<Spread> {
    let v: Vec<&str> = values.split_whitespace().collect();
    if v.len() < 4 {
        return None;
    }
    let num = |x: &str| {
        if is_time {
            parse_duration(x)
        } else {
            x.parse().ok()
        }
    };
    Some(Spread {
        min: num(v[0])?,
        max: num(v[1])?,
        mean: num(v[2])?,
        sd: num(v[3])?,
        within_sd_pct: v
            .get(4)
            .and_then(|p| p.strip_suffix('%')?.parse().ok())
            .unwrap_or(f64::NAN),
    })
}

/// `52us`, `1.58ms`, `69.04s` → seconds.
pub fn parse_duration(s: &str) -> Option<f64> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ns") {
        (n, 1e-9)
    } else if let Some(n) = s.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else {
        return None;
    };
    num.parse::<f64>().ok().map(|v| v * scale)
}

/// `25.61MB/s`, `7.00KB/s`, `0B/s` → bytes per second (binary prefixes).
pub fn parse_rate(s: &str) -> Option<f64> {
    let s = s.trim().strip_suffix("/s")?.strip_suffix('B')?;
    let (num, scale) = match s.chars().last()? {
        'K' => (&s[..s.len() - 1], 1024.0),
        'M' => (&s[..s.len() - 1], 1024.0 * 1024.0),
        'G' => (&s[..s.len() - 1], 1024.0 * 1024.0 * 1024.0),
        'T' => (&s[..s.len() - 1], 1024f64.powi(4)),
        _ => (s, 1.0),
    };
    num.parse::<f64>().ok().map(|v| v * scale)
}

/// One `--log-file` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogEntry {
    /// Request start, µs since the Unix epoch.
    pub start_us: u64,
    /// HTTP status, -1 for a failed stream.
    pub status: i32,
    /// µs from request start to end of response.
    pub duration_us: u64,
}

/// Parse a `--log-file`. Blank lines are skipped; extra columns are ignored.
pub fn parse_log(text: &str) -> Result<Vec<LogEntry>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || BenchError::parse("h2load log", format!("line {}: `{line}`", i + 1));
        let mut f = line.split('\t');
        let mut next = || f.next().map(str::trim).ok_or_else(bad);
        let start_us = next()?.parse().map_err(|_| bad())?;
        let status = next()?.parse().map_err(|_| bad())?;
        let duration_us = next()?.parse().map_err(|_| bad())?;
        out.push(LogEntry {
            start_us,
            status,
            duration_us,
        });
    }
    Ok(out)
}

/// Latency distribution of the successful (2xx/3xx) responses of a log,
/// the same criterion h2load uses for `succeeded`. Percentiles are
/// nearest-rank, in milliseconds; `None` when nothing succeeded.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Latency {
    /// Lines in the log.
    pub logged: usize,
    /// Lines with a 2xx/3xx status (the ones measured).
    pub ok: usize,
    /// Lines with status -1 (failed streams).
    pub failed_streams: usize,
    pub min_ms: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

pub fn latency(entries: &[LogEntry]) -> Latency {
    let ms: Vec<f64> = entries
        .iter()
        .filter(|e| (200..400).contains(&e.status))
        .map(|e| e.duration_us as f64 / 1000.0)
        .collect();
    let p = stats::percentiles(&ms, &[0.0, 50.0, 90.0, 99.0, 100.0]);
    let at = |i: usize| p.as_ref().map(|v| v[i]);
    Latency {
        logged: entries.len(),
        ok: ms.len(),
        failed_streams: entries.iter().filter(|e| e.status == -1).count(),
        min_ms: at(0),
        p50_ms: at(1),
        p90_ms: at(2),
        p99_ms: at(3),
        max_ms: at(4),
    }
}

/// Push one run's figures (see [`fig`]) into `samples`.
pub fn record(samples: &mut Samples, summary: &H2loadSummary, latency: Option<&Latency>) {
    use Better::*;
    let r = &summary.requests;
    samples.push(fig::SECONDS, "s", Lower, summary.finished_s);
    samples.push(fig::REQ_PER_S, "req/s", Higher, summary.req_per_s);
    samples.push(
        fig::KIB_PER_S,
        "KiB/s",
        Higher,
        summary.bytes_per_s / 1024.0,
    );
    samples.push(fig::SUCCEEDED, "requests", Higher, r.succeeded as f64);
    samples.push(
        fig::FAILED,
        "requests",
        Lower,
        (r.total - r.succeeded.min(r.total)) as f64,
    );
    if let Some(l) = latency {
        for (name, v) in [
            (fig::P50_MS, l.p50_ms),
            (fig::P90_MS, l.p90_ms),
            (fig::P99_MS, l.p99_ms),
        ] {
            if let Some(v) = v {
                samples.push(name, "ms", Lower, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_rates() {
        assert_eq!(parse_duration("52us"), Some(52e-6));
        assert!((parse_duration("1.58ms").unwrap() - 0.00158).abs() < 1e-12);
        assert_eq!(parse_duration("69.04s"), Some(69.04));
        assert_eq!(parse_duration("12"), None);
        assert_eq!(parse_rate("0B/s"), Some(0.0));
        assert_eq!(parse_rate("7.00KB/s"), Some(7.0 * 1024.0));
        assert_eq!(parse_rate("2.00MB/s"), Some(2.0 * 1048576.0));
        assert_eq!(parse_rate("7 K/sec"), None);
    }

    #[test]
    fn rejects_non_summary() {
        assert!(parse_summary("starting benchmark...\n").is_err());
        assert!(parse_log("1\t200\n").is_err());
        assert!(parse_log("x\t200\t3\n").is_err());
    }
}
