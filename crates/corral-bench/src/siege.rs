//! Parsing siege 4.0.x output (Debian 12 ships 4.0.7) and writing its rc file.
//!
//! siege prints its final statistics in one of two shapes, chosen by the rc
//! file's `json_output` (or `-j`):
//!
//! * the classic text block (`Transactions:  200 hits`, `Availability:
//!   100.00 %`, … `Shortest transaction: 0.00`), preceded by `** SIEGE 4.0.7`
//!   banners and possibly `[error] socket: …` lines;
//! * a JSON object with the same twelve statistics. **Debian's default
//!   `siegerc` sets `json_output = true`**, so an unconfigured siege on
//!   Debian 12 prints JSON.
//!
//! [`parse`] accepts both. Counting quirks of 4.0.7 (seen in the fixtures):
//! `transactions` counts responses < 500 (so 4xx are transactions),
//! `failed_transactions` counts 5xx responses and socket failures,
//! `successful_transactions` counts only responses < 400, and availability is
//! `transactions / (transactions + failed)`. Siege's `MB` is 2²⁰ bytes.

use serde::Deserialize;

use crate::error::{BenchError, Result};
use crate::results::{Better, Samples};

/// Figure names written by [`record`].
pub mod fig {
    pub const TRANS_PER_S: &str = "trans_per_s";
    pub const AVAILABILITY: &str = "availability";
    pub const RESPONSE_TIME_MS: &str = "response_time_ms";
    pub const LONGEST_MS: &str = "longest_ms";
    pub const THROUGHPUT_MB_S: &str = "throughput_mb_s";
    pub const TRANSACTIONS: &str = "transactions";
    pub const FAILED: &str = "failed";
}

/// Which shape siege printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SiegeFormat {
    Text,
    Json,
}

/// siege's final statistics.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SiegeSummary {
    pub transactions: u64,
    /// Percent.
    pub availability: f64,
    /// Seconds.
    pub elapsed_time: f64,
    /// MB (2²⁰ bytes).
    pub data_transferred: f64,
    /// Mean response time, seconds.
    pub response_time: f64,
    /// Transactions per second.
    pub transaction_rate: f64,
    /// MB per second.
    pub throughput: f64,
    /// Mean simultaneous connections.
    pub concurrency: f64,
    pub successful_transactions: u64,
    pub failed_transactions: u64,
    /// Seconds.
    pub longest_transaction: f64,
    /// Seconds.
    pub shortest_transaction: f64,
    #[serde(skip, default = "json_format")]
    pub format: SiegeFormat,
}

fn json_format() -> SiegeFormat {
    SiegeFormat::Json
}

/// Parse siege's output (text block or JSON; stderr may be mixed in).
pub fn parse(output: &str) -> Result<SiegeSummary> {
    if let (Some(open), Some(close)) = (output.find('{'), output.rfind('}')) {
        if open < close && output[open..close].contains("\"transactions\"") {
            return serde_json::from_str(&output[open..=close])
                .map_err(|e| BenchError::parse("siege", format!("JSON summary: {e}")));
        }
    }
    parse_text(output)
}

fn parse_text(output: &str) -> Result<SiegeSummary> {
    let mut vals: Vec<(String, String)> = Vec::new();
    for line in output.lines() {
        if let Some((k, v)) = line.split_once(':') {
            let v = v.split_whitespace().next().unwrap_or("").to_string();
            vals.push((k.trim().to_ascii_lowercase(), v));
        }
    }
    let raw = |key: &str| -> Result<&str> {
        vals.iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .ok_or_else(|| BenchError::parse("siege", format!("no `{key}:` line in summary")))
    };
    let f = |key: &str| -> Result<f64> {
        let v = raw(key)?;
        v.parse()
            .map_err(|_| BenchError::parse("siege", format!("`{key}: {v}` is not a number")))
    };
    let n = |key: &str| -> Result<u64> {
        let v = raw(key)?;
        v.parse()
            .map_err(|_| BenchError::parse("siege", format!("`{key}: {v}` is not a count")))
    };
    Ok(SiegeSummary {
        transactions: n("transactions")?,
        availability: f("availability")?,
        elapsed_time: f("elapsed time")?,
        data_transferred: f("data transferred")?,
        response_time: f("response time")?,
        transaction_rate: f("transaction rate")?,
        throughput: f("throughput")?,
        concurrency: f("concurrency")?,
        successful_transactions: n("successful transactions")?,
        failed_transactions: n("failed transactions")?,
        longest_transaction: f("longest transaction")?,
        shortest_transaction: f("shortest transaction")?,
        format: SiegeFormat::Text,
    })
}

/// Push one run's figures (see [`fig`]) into `samples`.
pub fn record(samples: &mut Samples, s: &SiegeSummary) {
    use Better::*;
    samples.push(fig::TRANS_PER_S, "trans/s", Higher, s.transaction_rate);
    samples.push(fig::AVAILABILITY, "%", Higher, s.availability);
    samples.push(fig::RESPONSE_TIME_MS, "ms", Lower, s.response_time * 1000.0);
    samples.push(fig::LONGEST_MS, "ms", Lower, s.longest_transaction * 1000.0);
    samples.push(fig::THROUGHPUT_MB_S, "MB/s", Higher, s.throughput);
    samples.push(fig::TRANSACTIONS, "hits", Higher, s.transactions as f64);
    samples.push(
        fig::FAILED,
        "transactions",
        Lower,
        s.failed_transactions as f64,
    );
}

/// A private siege rc file, passed with `siege -R FILE` so the user's
/// `~/.siege/siege.conf` (and Debian's JSON default) play no part.
#[derive(Debug, Clone, PartialEq)]
pub struct SiegeRc {
    /// Max simulated users; siege refuses `-c` above it (default 255).
    pub limit: u32,
    /// Socket failures (timeouts, refused connections) tolerated before siege
    /// aborts the run (default 1024). HTTP 4xx/5xx do not count.
    pub failures: u32,
    /// Per-request socket timeout, seconds.
    pub timeout: u32,
    /// Print the JSON summary instead of the text block.
    pub json_output: bool,
    /// `-b`: no delay between requests.
    pub benchmark: bool,
}

impl Default for SiegeRc {
    fn default() -> Self {
        SiegeRc {
            limit: 1024,
            failures: 100_000,
            timeout: 10,
            json_output: false,
            benchmark: true,
        }
    }
}

impl SiegeRc {
    /// The rc file text (siege's `key = value` format).
    pub fn render(&self) -> String {
        format!(
            "# written by corral-bench\n\
             verbose = false\ncolor = off\nquiet = false\n\
             json_output = {}\nshow-logfile = false\nlogging = false\n\
             protocol = HTTP/1.1\nconnection = close\nparser = false\n\
             limit = {}\nfailures = {}\ntimeout = {}\nbenchmark = {}\n",
            self.json_output, self.limit, self.failures, self.timeout, self.benchmark
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rc_file_has_raised_limits() {
        let rc = SiegeRc {
            limit: 600,
            ..SiegeRc::default()
        }
        .render();
        assert!(rc.contains("\nlimit = 600\n"));
        assert!(rc.contains("\nfailures = 100000\n"));
        assert!(rc.contains("\njson_output = false\n"));
    }

    #[test]
    fn incomplete_block_is_an_error() {
        let e = parse("Transactions: 5 hits\nAvailability: 100.00 %\n").unwrap_err();
        assert!(e.to_string().contains("elapsed time"), "{e}");
    }
}
