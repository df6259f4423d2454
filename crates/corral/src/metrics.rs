//! Prometheus metrics of the tenants: usage, limits and fault counters read
//! from the state directory and the tenants' cgroups at scrape time, encoded
//! with the Prometheus project's client (`prometheus-client`).
//!
//! Nothing here keeps history or runs in the background: an [`Exporter`]
//! reads everything when asked ([`Exporter::render`], [`Exporter::collect`]),
//! so it serves `corral metrics serve` and `corral metrics dump` as well as
//! the history collector (`corral daemon`, cmd/history.rs). What it keeps between scrapes: the cgroup backend of each
//! cgroup parent (detecting it parses /proc/self/mountinfo, which grows with
//! every tenant's namespace mounts), each running tenant's files, open
//! ([`KeptTenant`]: state, limits, a pidfd of its init, cgroup counters,
//! entry slots, within an [`FdBudget`] of the process's descriptor limit),
//! and the `corral_scrape_errors_total` counter.
//!
//! Two encodings of the same metrics ([`Format`]): OpenMetrics, what the
//! client writes and what Prometheus asks for first, and the classic text
//! format 0.0.4 derived from it, for everything else (`curl`, `promtool check
//! metrics`, node_exporter's textfile collector), which reads counters only
//! under their `_total` names. docs/metrics.md lists every metric.

use corral_limits::{
    Backend, CgroupReader, EntryWatch, Faults, FdBudget, HeldLocks, KeptFile, Limits, Stamp,
    TenantCgroup, Usage,
};
use corral_sandbox::state::TenantState;
use corral_sandbox::InitWatch;
use corral_sandbox::Layout;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Every metric name starts with this.
pub const PREFIX: &str = "corral";

/// How an exposition is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The Prometheus text format 0.0.4 (`text/plain; version=0.0.4`).
    Text,
    /// OpenMetrics 1.0 text (`application/openmetrics-text; version=1.0.0`).
    OpenMetrics,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// The format an HTTP `Accept` header asks for: OpenMetrics when it is
    /// named (Prometheus names it first), the text format otherwise.
    pub fn from_accept(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Text,
        }
    }
}

/// What was read of one tenant (one directory under `<state>/tenants`).
#[derive(Debug, Clone, Default)]
pub struct TenantSample {
    pub tenant: String,
    /// Its init runs.
    pub up: bool,
    /// When the sandbox was built (Unix seconds).
    pub created_unix: Option<u64>,
    /// Effective limits (limits.json).
    pub limits: Option<Limits>,
    pub usage: Option<Usage>,
    pub faults: Option<Faults>,
    /// Entry processes in use and entries refused, with a limit set.
    pub entry: Option<(u32, u64)>,
}

/// One reading of every tenant.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub tenants: Vec<TenantSample>,
    /// What could not be read, one line each ("TENANT: what").
    pub errors: Vec<String>,
    /// How long the reading took.
    pub took: Duration,
}

/// Reads the tenants of one state directory and encodes their metrics.
#[derive(Debug)]
pub struct Exporter {
    layout: Layout,
    /// Backend per cgroup parent, detected once.
    backends: Mutex<HashMap<String, Backend>>,
    scrape_errors: Counter,
    /// Threads reading tenants in parallel (1: in the caller's thread).
    threads: usize,
    /// What is kept open of each running tenant, by tenant.
    kept: Mutex<HashMap<String, KeptTenant>>,
    /// Shared by everything kept.
    budget: FdBudget,
    /// Readings so far: what the last reading did not use is dropped.
    readings: AtomicU64,
}

/// What the exporter keeps of a running tenant between readings: its
/// state.json, a pidfd of its init, its limits.json, its cgroup counter
/// files and its entry slots, open. A reading then costs one `fstat` per
/// JSON file (read and parsed again only when it changed), one `poll`, one
/// `pread` per cgroup file and a lock probe per slot: no path lookup, `open`
/// or `close`. It is for one run of the sandbox: a sandbox taken down or
/// rebuilt writes a new state.json (or removes it), and everything kept of
/// the old run goes, so a re-created cgroup is never read through the old
/// run's descriptors.
#[derive(Debug)]
struct KeptTenant {
    state: KeptJson<TenantState>,
    init: Option<InitWatch>,
    limits: Option<KeptJson<Limits>>,
    cgroup: Option<CgroupReader>,
    entry: Option<EntryWatch>,
    /// The last reading that used it.
    reading: u64,
}

/// A JSON file kept open with what it held when parsed.
#[derive(Debug)]
struct KeptJson<T> {
    /// `None`: the budget is spent; read again every time.
    file: Option<KeptFile>,
    stamp: Stamp,
    value: T,
}

impl<T: serde::de::DeserializeOwned> KeptJson<T> {
    /// Reads and parses `path`, keeping it open if the budget allows. JSON
    /// that does not parse is `InvalidData`.
    fn load(path: &std::path::Path, budget: &FdBudget) -> std::io::Result<KeptJson<T>> {
        use std::io::Read;
        let mut f = std::fs::File::open(path)?;
        // Taken before reading: a change while reading changes it.
        let stamp = Stamp::of(&f)?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf)?;
        let value = serde_json::from_slice(&buf)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        Ok(KeptJson {
            file: budget.keep(f).ok(),
            stamp,
            value,
        })
    }

    fn unchanged(&self) -> bool {
        self.file
            .as_ref()
            .is_some_and(|f| self.stamp.unchanged(&**f))
    }
}

/// Below this many tenants one thread reads them all.
const PARALLEL_FROM: usize = 64;

impl Exporter {
    /// Also raises the process's soft descriptor limit
    /// ([`FdBudget::from_nofile_limit`]): the exporter keeps every running
    /// tenant's files open (18 on cgroup v1 with 4 entry slot files).
    pub fn new(layout: Layout) -> Exporter {
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .min(8);
        Exporter {
            layout,
            backends: Mutex::new(HashMap::new()),
            scrape_errors: Counter::default(),
            threads,
            kept: Mutex::new(HashMap::new()),
            budget: FdBudget::from_nofile_limit(),
            readings: AtomicU64::new(0),
        }
    }

    /// Reads every tenant. A tenant that cannot be read is reported in
    /// [`Snapshot::errors`] (and counted) with whatever of it could be read;
    /// only an unreadable state directory fails the whole reading.
    pub fn collect(&self) -> std::io::Result<Snapshot> {
        let start = Instant::now();
        let names = self.layout.list()?;
        let reading = self.readings.fetch_add(1, Ordering::Relaxed) + 1;
        // One read of /proc/locks for every tenant's entry slots.
        let locks = HeldLocks::read();
        let locks = locks.as_ref();
        let mut snap = Snapshot::default();
        let parts = if names.len() < PARALLEL_FROM || self.threads < 2 {
            vec![self.read_tenants(&names, reading, locks)]
        } else {
            let chunk = names.len().div_ceil(self.threads);
            std::thread::scope(|s| {
                let handles: Vec<_> = names
                    .chunks(chunk)
                    .map(|part| s.spawn(move || self.read_tenants(part, reading, locks)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("a metrics reader thread panicked"))
                    .collect()
            })
        };
        for (tenants, errors) in parts {
            snap.tenants.extend(tenants);
            snap.errors.extend(errors);
        }
        // The files of tenants that are gone (or down) are closed.
        self.lock_kept().retain(|_, k| k.reading == reading);
        self.scrape_errors.inc_by(snap.errors.len() as u64);
        snap.took = start.elapsed();
        Ok(snap)
    }

    fn read_tenants(
        &self,
        names: &[String],
        reading: u64,
        locks: Option<&HeldLocks>,
    ) -> (Vec<TenantSample>, Vec<String>) {
        let mut errors = Vec::new();
        let samples = names
            .iter()
            .map(|t| {
                self.read_tenant(t, reading, locks, &mut |what: String| {
                    errors.push(format!("{t}: {what}"))
                })
            })
            .collect();
        (samples, errors)
    }

    fn lock_kept(&self) -> std::sync::MutexGuard<'_, HashMap<String, KeptTenant>> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn backend(&self, parent: &str) -> corral_limits::Result<Backend> {
        let mut map = self.backends.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = map.get(parent) {
            return Ok(b.clone());
        }
        let b = Backend::detect(parent)?;
        map.insert(parent.to_string(), b.clone());
        Ok(b)
    }

    fn read_tenant(
        &self,
        tenant: &str,
        reading: u64,
        locks: Option<&HeldLocks>,
        error: &mut dyn FnMut(String),
    ) -> TenantSample {
        let mut s = TenantSample {
            tenant: tenant.to_string(),
            ..Default::default()
        };
        let dir = self.layout.tenant(tenant);
        let kept = self.lock_kept().remove(tenant);
        let mut kept = match kept {
            Some(k) if k.state.unchanged() => k,
            _ => match KeptJson::<TenantState>::load(&dir.state(), &self.budget) {
                Ok(state) => KeptTenant {
                    init: InitWatch::open(&state.value, &self.budget),
                    state,
                    limits: None,
                    cgroup: None,
                    entry: None,
                    reading,
                },
                // Not written yet, left damaged by a crash (read as dead,
                // like `up` and `run` do), or removed by `corral down`
                // since the listing: down, not an error.
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::InvalidData | std::io::ErrorKind::NotFound
                    ) =>
                {
                    return s
                }
                Err(e) => {
                    error(format!("reading {}: {e}", dir.state().display()));
                    return s;
                }
            },
        };
        // A pidfd that turned readable is an init that exited; /proc
        // answers where there is no pidfd (or poll failed).
        let alive = |k: &KeptTenant| {
            k.init.as_ref().is_some_and(InitWatch::alive) || k.state.value.init_alive()
        };
        if !alive(&kept) {
            return s;
        }
        s.up = true;
        s.created_unix = Some(kept.state.value.created_unix);
        let mut failures = Vec::new();
        if !kept.limits.as_ref().is_some_and(KeptJson::unchanged) {
            kept.limits = None;
            let path = dir.limits();
            match KeptJson::<Limits>::load(&path, &self.budget) {
                Ok(l) => kept.limits = Some(l),
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    failures.push(format!("{}: {e}", path.display()))
                }
                Err(e) => failures.push(format!("reading {}: {e}", path.display())),
            }
        }
        s.limits = kept.limits.as_ref().map(|l| l.value.clone());
        if let Some(name) = kept.state.value.cgroup.clone() {
            if kept.cgroup.is_none() {
                match self
                    .backend(&kept.state.value.cgroup_parent)
                    .and_then(|b| TenantCgroup::named(&b, &name))
                {
                    Ok(cg) => kept.cgroup = Some(CgroupReader::new(cg, self.budget.clone())),
                    Err(e) => failures.push(e.to_string()),
                }
            }
            if let Some(reader) = kept.cgroup.as_mut() {
                match reader.usage_and_faults() {
                    Ok((u, f)) => (s.usage, s.faults) = (Some(u), Some(f)),
                    Err(e) => {
                        failures.push(e.to_string());
                        kept.cgroup = None;
                    }
                }
            }
        }
        if s.limits.as_ref().and_then(|l| l.entry_processes).is_some() {
            let watch = kept
                .entry
                .get_or_insert_with(|| EntryWatch::new(&dir.entry(), self.budget.clone()));
            match watch.read(locks) {
                Ok(e) => s.entry = Some(e),
                Err(e) => failures.push(e.to_string()),
            }
        } else {
            kept.entry = None;
        }
        // A tenant that goes down while it is read is down, not an error.
        if !failures.is_empty() && alive(&kept) {
            failures.into_iter().for_each(&mut *error);
        }
        kept.reading = reading;
        self.lock_kept().insert(tenant.to_string(), kept);
        s
    }

    /// The processes in a running tenant's cgroup (host pids), for the
    /// history's fault snapshots; `None` when it is down or has no cgroup.
    pub fn processes(&self, tenant: &str) -> Option<Vec<i32>> {
        let st = self.layout.tenant(tenant).read_state().ok()??;
        if !st.init_alive() {
            return None;
        }
        let b = self.backend(&st.cgroup_parent).ok()?;
        TenantCgroup::named(&b, st.cgroup.as_deref()?)
            .and_then(|cg| cg.procs())
            .ok()
    }

    /// Reads every tenant and encodes the exposition; also returns the
    /// errors of this reading (already counted in the exposition).
    pub fn render(&self, format: Format) -> std::io::Result<(String, Vec<String>)> {
        let mut snap = self.collect()?;
        let errors = std::mem::take(&mut snap.errors);
        Ok((self.encode(snap, format), errors))
    }

    /// The exposition of a reading.
    pub fn encode(&self, snap: Snapshot, format: Format) -> String {
        let mut registry = Registry::with_prefix(PREFIX);
        registry.register(
            "scrape_errors",
            "Tenants' files that could not be read (state, limits, cgroup or entry-process \
             files), counted since this exporter started; each one is also logged. The tenant's \
             other series are still exported",
            self.scrape_errors.clone(),
        );
        registry.register_collector(Box::new(TenantCollector(snap)));
        let mut out = String::with_capacity(4096);
        prometheus_client::encoding::text::encode(&mut out, &registry)
            .expect("writing to a String cannot fail");
        match format {
            Format::OpenMetrics => out,
            Format::Text => openmetrics_to_text(&out),
        }
    }
}

/// Emits the metrics of a [`Snapshot`] at encoding time (the
/// `prometheus-client` way for values read from elsewhere on each scrape).
#[derive(Debug)]
struct TenantCollector(Snapshot);

/// One per-tenant metric: name without prefix and unit, help, unit, type,
/// and its value for a tenant (`None`: no series for that tenant).
struct Def {
    name: &'static str,
    help: &'static str,
    unit: Option<Unit>,
    counter: bool,
    value: fn(&TenantSample) -> Option<f64>,
}

fn def(
    name: &'static str,
    unit: Option<Unit>,
    counter: bool,
    help: &'static str,
    value: fn(&TenantSample) -> Option<f64>,
) -> Def {
    Def {
        name,
        help,
        unit,
        counter,
        value,
    }
}

fn usage(t: &TenantSample) -> Option<&Usage> {
    t.usage.as_ref()
}
fn faults(t: &TenantSample) -> Option<&Faults> {
    t.faults.as_ref()
}
fn limits(t: &TenantSample) -> Option<&Limits> {
    t.limits.as_ref()
}

/// Every per-tenant metric, in exposition order. A limit that is not set
/// has no series (divide by it and the result is empty, not 0 or +Inf).
fn tenant_defs() -> Vec<Def> {
    use Unit::{Bytes, Seconds};
    vec![
        def("tenant_up", None, false,
            "1 if the tenant's sandbox runs (its init is alive), 0 if its state directory is left without a running init.",
            |t| Some(if t.up { 1.0 } else { 0.0 })),
        def("tenant_start_time", Some(Seconds), false,
            "When the tenant's sandbox was built, in seconds since the Unix epoch.",
            |t| t.created_unix.map(|s| s as f64)),
        def("tenant_cpu", Some(Seconds), true,
            "CPU time used by the tenant's processes (user and system) since the sandbox was built.",
            |t| usage(t).map(|u| u.cpu_usage_ns as f64 / 1e9)),
        def("tenant_cpu_limit_cores", None, false,
            "CPU bandwidth limit in cores (limit cpu = 150% is 1.5): CPU seconds per second the tenant may use.",
            |t| limits(t)?.cpu_pct.map(|p| p as f64 / 100.0)),
        def("tenant_cpu_weight", None, false,
            "Relative CPU weight under contention (limit cpu.weight, 1 to 10000; the kernel's default is 100).",
            |t| limits(t)?.cpu_weight.map(f64::from)),
        def("tenant_cpu_throttled_periods", None, true,
            "CPU scheduler periods (100 ms each) in which the tenant was throttled at its CPU limit.",
            |t| faults(t).map(|f| f.cpu_throttled_periods as f64)),
        def("tenant_cpu_throttled", Some(Seconds), true,
            "Time the tenant's processes were held back by its CPU limit.",
            |t| faults(t).map(|f| f.cpu_throttled_ns as f64 / 1e9)),
        def("tenant_memory", Some(Bytes), false,
            "Memory charged to the tenant's cgroup now (page cache and kernel memory included).",
            |t| usage(t).map(|u| u.memory_bytes as f64)),
        def("tenant_memory_limit", Some(Bytes), false,
            "Memory limit (limit memory.max): above it the kernel reclaims, then OOM-kills in the tenant.",
            |t| limits(t)?.memory_max.map(|b| b as f64)),
        def("tenant_memory_high", Some(Bytes), false,
            "Memory throttling threshold (limit memory.high): above it the tenant is slowed down and reclaimed from.",
            |t| limits(t)?.memory_high.map(|b| b as f64)),
        def("tenant_memory_limit_hits", None, true,
            "Times the tenant's memory reached its limit (cgroup v2 memory.events max, v1 memory.failcnt).",
            |t| faults(t).map(|f| f.memory_max_hits as f64)),
        def("tenant_oom_kills", None, true,
            "Processes of the tenant killed by the OOM killer at its memory limit.",
            |t| faults(t).map(|f| f.oom_kills as f64)),
        def("tenant_processes", None, false,
            "Processes and threads in the tenant's cgroup now.",
            |t| usage(t).map(|u| u.processes as f64)),
        def("tenant_processes_limit", None, false,
            "Limit on processes and threads (limit processes).",
            |t| limits(t)?.processes.map(f64::from)),
        def("tenant_processes_limit_hits", None, true,
            "Forks and clones refused because the tenant was at its process limit.",
            |t| faults(t).map(|f| f.pids_max_hits as f64)),
        def("tenant_entry_processes", None, false,
            "Concurrent entries into the sandbox now (requests, `corral run`), with an entry_processes limit set.",
            |t| t.entry.map(|(n, _)| f64::from(n))),
        def("tenant_entry_processes_limit", None, false,
            "Limit on concurrent entries into the sandbox (limit entry_processes).",
            |t| limits(t)?.entry_processes.map(f64::from)),
        def("tenant_entry_rejections", None, true,
            "Entries refused because all entry-process slots were in use (exit status 75, HTTP 508 through the gateway).",
            |t| t.entry.map(|(_, r)| r as f64)),
        def("tenant_io_read", Some(Bytes), true,
            "Bytes read from block devices by the tenant (page-cache hits and network file systems are not counted).",
            |t| usage(t).map(|u| u.io_read_bytes as f64)),
        def("tenant_io_write", Some(Bytes), true,
            "Bytes written to block devices by the tenant.",
            |t| usage(t).map(|u| u.io_write_bytes as f64)),
        def("tenant_io_read_ops", None, true,
            "Read operations on block devices by the tenant.",
            |t| usage(t).map(|u| u.io_read_ops as f64)),
        def("tenant_io_write_ops", None, true,
            "Write operations on block devices by the tenant.",
            |t| usage(t).map(|u| u.io_write_ops as f64)),
        def("tenant_io_read_limit_bytes_per_second", None, false,
            "Block-device read bandwidth limit (limit io.read_bps), per device.",
            |t| limits(t)?.io.read_bps.map(|b| b as f64)),
        def("tenant_io_write_limit_bytes_per_second", None, false,
            "Block-device write bandwidth limit (limit io.write_bps), per device.",
            |t| limits(t)?.io.write_bps.map(|b| b as f64)),
        def("tenant_io_read_limit_ops_per_second", None, false,
            "Block-device read operations limit (limit io.read_iops), per device.",
            |t| limits(t)?.io.read_iops.map(|b| b as f64)),
        def("tenant_io_write_limit_ops_per_second", None, false,
            "Block-device write operations limit (limit io.write_iops), per device.",
            |t| limits(t)?.io.write_iops.map(|b| b as f64)),
    ]
}

impl Collector for TenantCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let snap = &self.0;
        let info = ConstGauge::new(1i64);
        let mut m = enc.encode_descriptor(
            "build_info",
            "corral's version: always 1, with the version as a label.",
            None,
            info.metric_type(),
        )?;
        info.encode(m.encode_family(&[("version", env!("CARGO_PKG_VERSION"))])?)?;

        let up = snap.tenants.iter().filter(|t| t.up).count() as i64;
        let n = ConstGauge::new(up);
        let mut m = enc.encode_descriptor(
            "tenants",
            "Tenants by state: up (the sandbox runs) or down (a state directory without a running init).",
            None,
            n.metric_type(),
        )?;
        n.encode(m.encode_family(&[("state", "up")])?)?;
        ConstGauge::new(snap.tenants.len() as i64 - up)
            .encode(m.encode_family(&[("state", "down")])?)?;

        let took = ConstGauge::new(snap.took.as_secs_f64());
        took.encode(enc.encode_descriptor(
            "scrape_duration",
            "How long reading every tenant's state and cgroup files took for this exposition.",
            Some(&Unit::Seconds),
            took.metric_type(),
        )?)?;

        for d in tenant_defs() {
            if !snap.tenants.iter().any(|t| (d.value)(t).is_some()) {
                continue;
            }
            let ty = if d.counter {
                MetricType::Counter
            } else {
                MetricType::Gauge
            };
            let mut m = enc.encode_descriptor(d.name, d.help, d.unit.as_ref(), ty)?;
            for t in &snap.tenants {
                let Some(v) = (d.value)(t) else { continue };
                let labels = [("tenant", t.tenant.as_str())];
                let fam = m.encode_family(&labels)?;
                // Whole numbers (most values: bytes, counts) as integers.
                let whole = v.fract() == 0.0 && (0.0..9.007e15).contains(&v);
                match (d.counter, whole) {
                    (true, true) => ConstCounter::new(v as u64).encode(fam)?,
                    (true, false) => ConstCounter::new(v).encode(fam)?,
                    (false, true) => ConstGauge::new(v as i64).encode(fam)?,
                    (false, false) => ConstGauge::new(v).encode(fam)?,
                }
            }
        }
        Ok(())
    }
}

/// The Prometheus text format 0.0.4 of an OpenMetrics exposition as
/// `prometheus-client` writes it (counters and gauges, no exemplars): a
/// counter's HELP and TYPE name its samples' `_total` name, and the `# UNIT`
/// and `# EOF` lines go. Samples are the same in both formats.
pub fn openmetrics_to_text(om: &str) -> String {
    let mut out = String::with_capacity(om.len());
    let mut help: Option<(&str, &str)> = None;
    for line in om.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = rest.split_once(' ').or(Some((rest, "")));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, ty) = match ty {
                "counter" => (format!("{name}_total"), "counter"),
                "unknown" => (name.to_string(), "untyped"),
                _ => (name.to_string(), ty),
            };
            if let Some((_, text)) = help.take() {
                let _ = writeln!(out, "# HELP {name} {text}");
            }
            let _ = writeln!(out, "# TYPE {name} {ty}");
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_limits::EntrySlots;
    use corral_sandbox::state::{process_start, write_atomic, TenantState};

    fn state(tenant: &str, pid: i32, start: u64, cgroup: Option<&str>) -> TenantState {
        TenantState {
            tenant: tenant.into(),
            init_pid: pid,
            init_start: start,
            digest: "d".into(),
            created_unix: 1_700_000_000,
            proto: 1,
            namespaces: vec![],
            cgroup: cgroup.map(String::from),
            cgroup_parent: "corral/metrics-unit-test-no-such-parent".into(),
            cgroup_dirs: vec![],
        }
    }

    fn write(layout: &Layout, st: &TenantState, limits: Option<&Limits>) {
        let dir = layout.tenant(&st.tenant);
        std::fs::create_dir_all(&dir.dir).unwrap();
        write_atomic(&dir.state(), &serde_json::to_vec(st).unwrap(), 0o600).unwrap();
        if let Some(l) = limits {
            write_atomic(&dir.limits(), &serde_json::to_vec(l).unwrap(), 0o600).unwrap();
        }
    }

    fn sample<'a>(text: &'a str, series: &str) -> Option<&'a str> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
    }

    /// Tenants that are down, half-made or unreadable: each is exported as
    /// far as it can be read, and only a real failure counts as an error.
    #[test]
    fn one_tenants_failure_is_counted_and_the_others_are_exported() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let me = std::process::id() as i32;
        let start = process_start(me).unwrap();
        let limits = Limits {
            cpu_pct: Some(150),
            memory_max: Some(1 << 30),
            processes: Some(100),
            entry_processes: Some(3),
            ..Default::default()
        };
        // "alive": this process stands in for its init; its cgroup is missing.
        write(
            &layout,
            &state("alive", me, start, Some("alive")),
            Some(&limits),
        );
        // Limits off: no cgroup, nothing to read there.
        write(
            &layout,
            &state("nocg", me, start, None),
            Some(&Limits::default()),
        );
        write(
            &layout,
            &state("dead", i32::MAX, 1, Some("dead")),
            Some(&limits),
        );
        std::fs::create_dir_all(layout.tenant("incomplete").dir).unwrap();
        std::fs::create_dir_all(layout.tenant("damaged").dir).unwrap();
        std::fs::write(layout.tenant("damaged").state(), "{\"tenant\"").unwrap();

        let exporter = Exporter::new(layout.clone());
        let (text, errors) = exporter.render(Format::Text).unwrap();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].starts_with("alive: "), "{errors:?}");
        for (series, want) in [
            ("corral_tenant_up{tenant=\"alive\"}", "1"),
            ("corral_tenant_up{tenant=\"nocg\"}", "1"),
            ("corral_tenant_up{tenant=\"dead\"}", "0"),
            ("corral_tenant_up{tenant=\"incomplete\"}", "0"),
            ("corral_tenant_up{tenant=\"damaged\"}", "0"),
            ("corral_tenants{state=\"up\"}", "2"),
            ("corral_tenants{state=\"down\"}", "3"),
            ("corral_tenant_cpu_limit_cores{tenant=\"alive\"}", "1.5"),
            (
                "corral_tenant_memory_limit_bytes{tenant=\"alive\"}",
                "1073741824",
            ),
            ("corral_tenant_processes_limit{tenant=\"alive\"}", "100"),
            ("corral_tenant_entry_processes_limit{tenant=\"alive\"}", "3"),
            // No entry directory yet: nothing in use, nothing refused.
            ("corral_tenant_entry_processes{tenant=\"alive\"}", "0"),
            (
                "corral_tenant_entry_rejections_total{tenant=\"alive\"}",
                "0",
            ),
            (
                "corral_tenant_start_time_seconds{tenant=\"alive\"}",
                "1700000000",
            ),
            ("corral_scrape_errors_total", "1"),
        ] {
            assert_eq!(sample(&text, series), Some(want), "{series} in\n{text}");
        }
        assert!(
            !layout.tenant("alive").entry().exists(),
            "reading entry slots created their directory"
        );
        // No usage without a readable cgroup, no limit series for a limit
        // that is not set, nothing but `up` for a tenant that is down.
        assert_eq!(
            sample(&text, "corral_tenant_cpu_seconds_total{tenant=\"alive\"}"),
            None
        );
        assert_eq!(
            sample(&text, "corral_tenant_cpu_limit_cores{tenant=\"nocg\"}"),
            None
        );
        assert!(
            !text.contains("tenant=\"dead\"} 1") && !text.contains("_limit_bytes{tenant=\"dead\"")
        );
        // The error counter keeps counting across scrapes.
        let (text, _) = exporter.render(Format::Text).unwrap();
        assert_eq!(sample(&text, "corral_scrape_errors_total"), Some("2"));
    }

    /// What the exporter keeps open follows the files: a limits.json or
    /// state.json replaced (`limits set`, a sandbox rebuilt) is read anew at
    /// the next reading, and a tenant that went down keeps nothing open.
    #[test]
    fn what_is_kept_follows_the_tenants_files() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let me = std::process::id() as i32;
        let start = process_start(me).unwrap();
        let limits = |processes| Limits {
            processes: Some(processes),
            entry_processes: Some(2),
            ..Default::default()
        };
        write(&layout, &state("t", me, start, None), Some(&limits(10)));
        let slots = EntrySlots::open(&layout.tenant("t").entry(), 2).unwrap();
        let _held = slots.try_acquire().unwrap();
        let exporter = Exporter::new(layout.clone());
        let budget = exporter.budget.available();
        let read = |e: &Exporter| e.collect().unwrap().tenants.remove(0);
        let t = read(&exporter);
        assert!(t.up);
        assert_eq!(t.limits.unwrap().processes, Some(10));
        assert_eq!(t.entry, Some((1, 0)));
        let kept = budget - exporter.budget.available();
        // state.json, the pidfd, limits.json, the entry directory and a slot.
        assert!(kept >= 4, "{kept} kept");
        write(&layout, &state("t", me, start, None), Some(&limits(20)));
        assert_eq!(read(&exporter).limits.unwrap().processes, Some(20));
        let mut rebuilt = state("t", me, start, None);
        rebuilt.created_unix += 60;
        write(&layout, &rebuilt, None);
        assert_eq!(read(&exporter).created_unix, Some(1_700_000_060));
        assert_eq!(
            budget - exporter.budget.available(),
            kept,
            "the old run's files closed"
        );
        std::fs::remove_dir_all(layout.tenant("t").dir).unwrap();
        exporter.collect().unwrap();
        assert_eq!(
            exporter.budget.available(),
            budget,
            "a tenant gone keeps nothing"
        );
    }

    #[test]
    fn the_text_format_names_counters_by_their_total_and_drops_openmetrics_lines() {
        let om = "# HELP corral_tenant_cpu_seconds CPU time.\n\
                  # TYPE corral_tenant_cpu_seconds counter\n\
                  # UNIT corral_tenant_cpu_seconds seconds\n\
                  corral_tenant_cpu_seconds_total{tenant=\"a\"} 1.5\n\
                  # HELP corral_tenant_memory_bytes Memory.\n\
                  # TYPE corral_tenant_memory_bytes gauge\n\
                  # UNIT corral_tenant_memory_bytes bytes\n\
                  corral_tenant_memory_bytes{tenant=\"a\"} 10\n\
                  # EOF\n";
        assert_eq!(
            openmetrics_to_text(om),
            "# HELP corral_tenant_cpu_seconds_total CPU time.\n\
             # TYPE corral_tenant_cpu_seconds_total counter\n\
             corral_tenant_cpu_seconds_total{tenant=\"a\"} 1.5\n\
             # HELP corral_tenant_memory_bytes Memory.\n\
             # TYPE corral_tenant_memory_bytes gauge\n\
             corral_tenant_memory_bytes{tenant=\"a\"} 10\n"
        );
    }

    /// Names follow https://prometheus.io/docs/practices/naming/, and help
    /// texts need no escaping in either format (no backslash, quote or newline).
    #[test]
    fn names_and_help_texts_follow_the_rules() {
        let mut snap = Snapshot::default();
        snap.tenants.push(TenantSample {
            tenant: "t".into(),
            up: true,
            created_unix: Some(1),
            limits: Some(Limits {
                cpu_pct: Some(100),
                cpu_weight: Some(100),
                memory_max: Some(1),
                memory_high: Some(1),
                processes: Some(1),
                entry_processes: Some(1),
                io: corral_limits::IoLimits {
                    read_bps: Some(1),
                    write_bps: Some(1),
                    read_iops: Some(1),
                    write_iops: Some(1),
                    devices: vec![],
                },
                ..Default::default()
            }),
            usage: Some(Usage::default()),
            faults: Some(Faults::default()),
            entry: Some((0, 0)),
        });
        let exporter = Exporter::new(Layout::new("/nonexistent"));
        let text = exporter.encode(snap, Format::Text);
        let mut types = HashMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let help = rest.split_once(' ').unwrap().1;
                assert!(!help.contains(['\\', '"']), "{line}");
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, ty) = rest.split_once(' ').unwrap();
                assert!(name.starts_with("corral_"), "{name}");
                assert_eq!(name.ends_with("_total"), ty == "counter", "{line}");
                for bad in ["milli", "micro", "nano", "kib", "mib", "percent"] {
                    assert!(!name.contains(bad), "not a base unit: {name}");
                }
                types.insert(name.to_string(), ty.to_string());
            }
        }
        for d in tenant_defs() {
            let mut name = format!("{PREFIX}_{}", d.name);
            if let Some(u) = &d.unit {
                name = format!("{name}_{}", u.as_str());
            }
            if d.counter {
                name.push_str("_total");
            }
            assert!(types.contains_key(&name), "{name} missing from\n{text}");
        }
    }
}
