//! What the server did during a test, like the article's `sar 5 60` and
//! `sar -r`: CPU user/system/iowait/steal/idle from `/proc/stat` (deltas
//! over the run, all CPUs and the server's own CPU), memory in use
//! (`MemTotal − MemAvailable`, averaged over samples of `/proc/meminfo`),
//! nginx's CPU time from `/proc/PID/stat`, and every tenant's CPU time from
//! `corral stats --json` (its cgroup's usage counter).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{BenchError, Result};
use crate::suites::env::BenchEnv;
use crate::suites::sys;

/// One `cpu` line of `/proc/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTimes {
    fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }
}

/// `/proc/stat`: the `cpu` (all) line and each `cpuN` line.
pub fn parse_stat(text: &str) -> (CpuTimes, Vec<CpuTimes>) {
    let mut all = CpuTimes::default();
    let mut per = Vec::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let Some(name) = f.next() else { continue };
        if !name.starts_with("cpu") {
            continue;
        }
        let v: Vec<u64> = f.map(|x| x.parse().unwrap_or(0)).collect();
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        let t = CpuTimes {
            user: at(0),
            nice: at(1),
            system: at(2),
            idle: at(3),
            iowait: at(4),
            irq: at(5),
            softirq: at(6),
            steal: at(7),
        };
        if name == "cpu" {
            all = t;
        } else {
            per.push(t);
        }
    }
    (all, per)
}

/// Shares of the time between two readings, percent (sar's columns:
/// user = user + nice, system = system + irq + softirq).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuPercent {
    pub user: f64,
    pub system: f64,
    pub iowait: f64,
    pub steal: f64,
    pub idle: f64,
}

pub fn cpu_percent(a: &CpuTimes, b: &CpuTimes) -> CpuPercent {
    let d = |x: u64, y: u64| y.saturating_sub(x) as f64;
    let total = d(a.total(), b.total());
    if total <= 0.0 {
        return CpuPercent::default();
    }
    let p = |x: f64| x / total * 100.0;
    CpuPercent {
        user: p(d(a.user, b.user) + d(a.nice, b.nice)),
        system: p(d(a.system, b.system) + d(a.irq, b.irq) + d(a.softirq, b.softirq)),
        iowait: p(d(a.iowait, b.iowait)),
        steal: p(d(a.steal, b.steal)),
        idle: p(d(a.idle, b.idle)),
    }
}

/// `/proc/meminfo` as name → bytes (the `kB` values × 1024; counts as is).
pub fn parse_meminfo(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            let mut f = v.split_whitespace();
            let n: u64 = f.next()?.parse().ok()?;
            let scale = if f.next() == Some("kB") { 1024 } else { 1 };
            Some((k.trim().to_string(), n * scale))
        })
        .collect()
}

/// `MemTotal − MemAvailable`, bytes.
pub fn mem_used(m: &BTreeMap<String, u64>) -> Option<u64> {
    Some(m.get("MemTotal")?.saturating_sub(*m.get("MemAvailable")?))
}

fn read_stat() -> (CpuTimes, Vec<CpuTimes>) {
    parse_stat(&std::fs::read_to_string("/proc/stat").unwrap_or_default())
}

fn read_mem_used() -> Option<u64> {
    mem_used(&parse_meminfo(
        &std::fs::read_to_string("/proc/meminfo").ok()?,
    ))
}

/// CPU time (user + system) of a process and its direct children, seconds.
pub fn tree_cpu_s(pid: i32) -> f64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let one = |p: &str| -> f64 {
        let s = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        // Fields after the `(comm)`, which may contain spaces.
        let rest = s.rsplit_once(')').map(|x| x.1).unwrap_or("");
        let f: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15; `rest` starts at field 3.
        let t = |i: usize| {
            f.get(i - 3)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        (t(14) + t(15)) / hz
    };
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    one(&pid.to_string()) + children.split_whitespace().map(one).sum::<f64>()
}

/// A running sampler: CPU deltas from start to stop, memory every 500 ms.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    mem: Arc<Mutex<Vec<u64>>>,
    thread: Option<std::thread::JoinHandle<()>>,
    start: (CpuTimes, Vec<CpuTimes>),
    started: Instant,
}

/// What the sampler saw.
#[derive(Debug, Clone, Default)]
pub struct ServerSample {
    pub all: CpuPercent,
    /// The server CPU (nginx, PHP), when pinned.
    pub server: Option<CpuPercent>,
    /// The clients' CPU, when pinned: near 100 % busy means the load was
    /// limited by the clients, not the server.
    pub client: Option<CpuPercent>,
    pub mem_used_mib: Option<f64>,
    pub wall_s: f64,
}

impl Sampler {
    pub fn start() -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let mem = Arc::new(Mutex::new(Vec::new()));
        let (s, m) = (Arc::clone(&stop), Arc::clone(&mem));
        let thread = std::thread::Builder::new()
            .name("bench-sar".into())
            .spawn(move || {
                while !s.load(Ordering::SeqCst) {
                    if let Some(u) = read_mem_used() {
                        m.lock().unwrap_or_else(|e| e.into_inner()).push(u);
                    }
                    let until = Instant::now() + Duration::from_millis(500);
                    while Instant::now() < until && !s.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            })
            .ok();
        Sampler {
            stop,
            mem,
            thread,
            start: read_stat(),
            started: Instant::now(),
        }
    }

    pub fn stop(mut self, server_cpu: Option<usize>, client_cpu: Option<usize>) -> ServerSample {
        let end = read_stat();
        let wall_s = self.started.elapsed().as_secs_f64();
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let mem = self.mem.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let one = |cpu: Option<usize>| {
            cpu.and_then(|c| Some(cpu_percent(self.start.1.get(c)?, end.1.get(c)?)))
        };
        ServerSample {
            all: cpu_percent(&self.start.0, &end.0),
            server: one(server_cpu),
            client: one(client_cpu),
            mem_used_mib: (!mem.is_empty())
                .then(|| mem.iter().sum::<u64>() as f64 / mem.len() as f64 / (1024.0 * 1024.0)),
            wall_s,
        }
    }
}

/// One tenant's cgroup counters from `corral stats --json`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TenantCounters {
    pub cpu_usage_ns: u64,
    pub throttled_periods: u64,
    pub processes: u64,
}

/// Parse `corral stats --json` (an array of tenants).
pub fn parse_stats(json: &str) -> Result<BTreeMap<String, TenantCounters>> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| BenchError::parse("corral stats", e.to_string()))?;
    let arr = v
        .as_array()
        .ok_or_else(|| BenchError::parse("corral stats", "expected a JSON array"))?;
    let mut out = BTreeMap::new();
    for t in arr {
        let name = t["tenant"].as_str().unwrap_or_default().to_string();
        out.insert(
            name,
            TenantCounters {
                cpu_usage_ns: t["usage"]["cpu_usage_ns"].as_u64().unwrap_or(0),
                throttled_periods: t["faults"]["cpu_throttled_periods"].as_u64().unwrap_or(0),
                processes: t["usage"]["processes"].as_u64().unwrap_or(0),
            },
        );
    }
    Ok(out)
}

/// `corral stats --json` for `tenants` now (a 1 ms window: only the
/// cumulative counters are used).
pub fn tenant_counters(
    env: &BenchEnv,
    tenants: &[String],
) -> Result<BTreeMap<String, TenantCounters>> {
    let mut out = BTreeMap::new();
    for t in tenants {
        let mut c = env.corral_cmd();
        c.args(["--json", "stats", "--interval-ms", "1", t]);
        let f = sys::run_ok(
            &mut c,
            Duration::from_secs(20),
            "neighbours",
            format!("corral stats {t}"),
        )?;
        out.extend(parse_stats(&f.stdout)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT_A: &str = "cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 60 0 30 400 5 0 5 0 0 0\ncpu1 40 0 20 400 5 0 0 35 0 0\nintr 1 2 3\n";
    const STAT_B: &str = "cpu  200 0 100 900 10 0 15 75 0 0\ncpu0 150 0 60 400 5 0 15 0 0 0\ncpu1 50 0 40 500 5 0 0 75 0 0\nintr 1 2 3\n";

    #[test]
    fn sar_like_cpu_shares() {
        let (a, pa) = parse_stat(STAT_A);
        let (b, pb) = parse_stat(STAT_B);
        assert_eq!(pa.len(), 2);
        // all: 100 user + 60 system (50 + 10 softirq) + 100 idle + 40 steal = 300 ticks.
        let p = cpu_percent(&a, &b);
        assert!((p.user - 100.0 / 3.0).abs() < 1e-9, "{p:?}");
        assert!((p.system - 20.0).abs() < 1e-9, "{p:?}");
        assert!((p.steal - 40.0 / 3.0).abs() < 1e-9, "{p:?}");
        assert!((p.idle - 100.0 / 3.0).abs() < 1e-9, "{p:?}");
        // cpu0 was never idle.
        assert_eq!(cpu_percent(&pa[0], &pb[0]).idle, 0.0);
    }

    #[test]
    fn meminfo_in_bytes() {
        let m = parse_meminfo("MemTotal:       24684092 kB\nMemFree:        21741752 kB\nMemAvailable:   24040504 kB\nHugePages_Total:       0\n");
        assert_eq!(m["MemTotal"], 24684092 * 1024);
        assert_eq!(m["HugePages_Total"], 0);
        assert_eq!(mem_used(&m), Some((24684092 - 24040504) * 1024));
    }

    fn fixture(name: &str) -> String {
        let p = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    #[test]
    fn captured_proc_files() {
        let (all, per) = parse_stat(&fixture("neighbours-proc-stat.txt"));
        assert_eq!(per.len(), 2, "the project VM has 2 CPUs");
        assert!(all.user >= per[0].user && all.idle > 0);
        let m = parse_meminfo(&fixture("scale-meminfo.txt"));
        assert!(
            m["MemTotal"] > m["MemAvailable"] && m.contains_key("Percpu"),
            "{m:?}"
        );
        assert!(mem_used(&m).unwrap() > 0);
    }

    /// `corral --json stats --interval-ms 1 corral-t4` of a real tenant.
    #[test]
    fn captured_corral_stats() {
        let s = parse_stats(&fixture("neighbours-corral-stats.json")).unwrap();
        let t = s["corral-t4"];
        assert_eq!(t.cpu_usage_ns, 48256887);
        assert_eq!((t.processes, t.throttled_periods), (1, 0));
    }

    #[test]
    fn stats_json() {
        let j = r#"[{"tenant":"a","cpu_percent":0.0,"usage":{"cpu_usage_ns":38090527,"memory_bytes":1,"processes":7},"faults":{"cpu_throttled_periods":4}}]"#;
        let s = parse_stats(j).unwrap();
        assert_eq!(
            s["a"],
            TenantCounters {
                cpu_usage_ns: 38090527,
                throttled_periods: 4,
                processes: 7
            }
        );
        assert!(parse_stats("{}").is_err());
    }
}
