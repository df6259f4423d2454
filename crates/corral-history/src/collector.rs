//! The collector: turns successive readings of every tenant's counters into
//! samples, stores them (one transaction per round), rolls them up and
//! applies retention once a minute, takes process snapshots at fault
//! incidents and decides which alerts fire. It reads nothing itself: the
//! caller (`corral daemon`) reads the tenants and supplies their processes,
//! and runs the alerts' actions; here everything takes the time as an
//! argument, so a day can be simulated in a test.

use crate::config::{Condition, HistoryConfig, Resource, Rule};
use crate::row::{fault_count, Row, FAULT_KINDS};
use crate::store::{LimitsRow, Proc, Result, Retention, SentAlert, Snapshot, Store};
use corral_limits::{Faults, Limits, Usage};
use serde::Serialize;
use std::collections::HashMap;

/// What was read of one running tenant at one moment.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    pub tenant: String,
    pub usage: Usage,
    pub faults: Faults,
    /// Entry processes in use and entries refused so far (with a limit).
    pub entry: Option<(u32, u64)>,
    pub limits: Option<Limits>,
}

/// How a caller lists a tenant's processes for a snapshot: how many there
/// are and the top ones (`None`: the tenant is gone).
pub type ProcessLister<'a> = dyn FnMut(&str) -> Option<(u64, Vec<Proc>)> + 'a;

/// Snapshots per incident, at most.
pub const SNAPSHOTS_PER_INCIDENT: u32 = 3;
/// At most one snapshot per tenant this often, in seconds.
pub const SNAPSHOT_SPACING: i64 = 60;
/// An incident ends after this many seconds without a fault.
pub const INCIDENT_GAP: i64 = 60;
/// Processes kept in a snapshot.
pub const SNAPSHOT_PROCS: usize = 10;

/// An alert to send: the payload posted to webhooks and given to commands.
#[derive(Debug, Clone, Serialize)]
pub struct Alert {
    pub rule: String,
    pub tenant: String,
    /// Unix seconds.
    pub time: i64,
    /// "faults" or "usage".
    pub kind: &'static str,
    /// What was seen, in words.
    pub message: String,
    /// Faults within the period (kind → count).
    pub faults: HashMap<&'static str, i64>,
    /// The usage rule's resource, its average over the period and the limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageAlert>,
    pub period_seconds: u64,
    #[serde(skip)]
    pub rule_index: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct UsageAlert {
    pub resource: &'static str,
    pub average: f64,
    pub limit: f64,
    pub percent: f64,
    pub threshold_percent: f64,
}

/// What one round did.
#[derive(Debug, Default)]
pub struct Round {
    pub samples: usize,
    /// Tenants with a fault in this round's samples.
    pub faulted: Vec<String>,
    pub snapshots: usize,
    pub alerts: Vec<Alert>,
    /// Rows rolled up and deleted by this round's maintenance, if it ran.
    pub deleted: Option<usize>,
}

struct Prev {
    at_ms: i64,
    usage: Usage,
    faults: Faults,
    rejections: u64,
}

#[derive(Default)]
struct Incident {
    /// Last fault seen (Unix seconds).
    last_fault: i64,
    /// Snapshots taken in this incident.
    taken: u32,
    last_snapshot: i64,
}

pub struct Collector {
    store: Store,
    retention: Retention,
    rules: Vec<Rule>,
    prev: HashMap<String, Prev>,
    limits: HashMap<String, LimitsRow>,
    incidents: HashMap<String, Incident>,
    /// (rule index, tenant) → when it last fired.
    fired: HashMap<(usize, String), i64>,
    last_maintenance: i64,
}

impl std::fmt::Debug for Collector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collector")
            .field("store", &self.store)
            .finish()
    }
}

/// Counter growth; a counter that went down was reset (the sandbox was
/// rebuilt, its cgroup new): it counts from 0 again.
fn delta(now: u64, before: u64) -> i64 {
    let d = if now >= before { now - before } else { now };
    d.min(i64::MAX as u64) as i64
}

fn clamp(v: u64) -> i64 {
    v.min(i64::MAX as u64) as i64
}

impl Collector {
    pub fn new(store: Store, cfg: &HistoryConfig) -> Result<Collector> {
        let limits = store.latest_limits()?;
        // Alerts sent before a restart still count for the rate limit.
        let mut fired = HashMap::new();
        for (rule, tenant, ts) in store.last_alerts()? {
            if let Some(i) = cfg.rules.iter().position(|r| r.name == rule) {
                fired.insert((i, tenant), ts);
            }
        }
        Ok(Collector {
            store,
            retention: cfg.retention,
            rules: cfg.rules.clone(),
            prev: HashMap::new(),
            limits,
            incidents: HashMap::new(),
            fired,
            last_maintenance: 0,
        })
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// One round at `now_ms`: a sample of each tenant that was also read in
    /// the previous round (the first reading only sets the counters' base),
    /// limits that changed, snapshots for tenants with a new fault incident
    /// (`procs` lists a tenant's processes), the alerts due, and once a
    /// minute the rollups and retention. All in one transaction: a killed
    /// collector loses this round at most.
    pub fn round(
        &mut self,
        now_ms: i64,
        readings: &[Reading],
        procs: &mut ProcessLister,
    ) -> Result<Round> {
        let now = now_ms.div_euclid(1000);
        let mut round = Round::default();
        let mut samples: Vec<(&str, Row)> = Vec::with_capacity(readings.len());
        for r in readings {
            let rejections = r.entry.map(|(_, rej)| rej).unwrap_or(0);
            let next = Prev {
                at_ms: now_ms,
                usage: r.usage.clone(),
                faults: r.faults.clone(),
                rejections,
            };
            let Some(p) = self.prev.insert(r.tenant.clone(), next) else {
                continue;
            };
            let dur_ms = now_ms - p.at_ms;
            if dur_ms <= 0 {
                continue;
            }
            let cpu_ms = delta(r.usage.cpu_usage_ns, p.usage.cpu_usage_ns) / 1_000_000;
            let (u, f, pu, pf) = (&r.usage, &r.faults, &p.usage, &p.faults);
            let row = Row {
                ts: now,
                dur_ms,
                n: 1,
                cpu_ms,
                cpu_max: cpu_ms * 1000 / dur_ms,
                mem_sum: clamp(u.memory_bytes / 1024),
                mem_max: clamp(u.memory_bytes / 1024),
                procs_sum: clamp(u.processes),
                procs_max: clamp(u.processes),
                ep_sum: r.entry.map(|(n, _)| i64::from(n)).unwrap_or(0),
                ep_max: r.entry.map(|(n, _)| i64::from(n)).unwrap_or(0),
                io_rb: delta(u.io_read_bytes, pu.io_read_bytes),
                io_wb: delta(u.io_write_bytes, pu.io_write_bytes),
                io_rops: delta(u.io_read_ops, pu.io_read_ops),
                io_wops: delta(u.io_write_ops, pu.io_write_ops),
                f_cpu: delta(f.cpu_throttled_periods, pf.cpu_throttled_periods),
                f_mem: delta(f.memory_max_hits, pf.memory_max_hits),
                f_oom: delta(f.oom_kills, pf.oom_kills),
                f_procs: delta(f.pids_max_hits, pf.pids_max_hits),
                f_ep: delta(rejections, p.rejections),
            };
            samples.push((&r.tenant, row));
        }
        // Tenants that went down: their next reading starts afresh.
        if self.prev.len() > readings.len() {
            let up: std::collections::HashSet<&str> =
                readings.iter().map(|r| r.tenant.as_str()).collect();
            self.prev.retain(|t, _| up.contains(t.as_str()));
        }

        let maintain = now.div_euclid(60) != self.last_maintenance.div_euclid(60);
        let retention = self.retention;
        let rules = self.rules.clone();
        let mut limits = std::mem::take(&mut self.limits);
        let mut incidents = std::mem::take(&mut self.incidents);
        let mut fired = std::mem::take(&mut self.fired);
        let result = self.store.transaction(|store| {
            for r in readings {
                let Some(l) = &r.limits else { continue };
                let row = LimitsRow::from_limits(now, l);
                if limits.get(&r.tenant).is_some_and(|have| have.same(&row)) {
                    continue;
                }
                store.insert_limits(&r.tenant, &row)?;
                limits.insert(r.tenant.clone(), row);
            }
            for (tenant, row) in &samples {
                store.insert_sample(tenant, now_ms, row)?;
                round.samples += 1;
                if row.faults() == 0 {
                    continue;
                }
                round.faulted.push(tenant.to_string());
                let inc = incidents.entry(tenant.to_string()).or_default();
                if now - inc.last_fault > INCIDENT_GAP {
                    inc.taken = 0;
                }
                inc.last_fault = now;
                if inc.taken < SNAPSHOTS_PER_INCIDENT
                    && (inc.taken == 0 || now - inc.last_snapshot >= SNAPSHOT_SPACING)
                {
                    if let Some((total, top)) = procs(tenant) {
                        store.insert_snapshot(&Snapshot {
                            tenant: tenant.to_string(),
                            ts: now,
                            faults: describe_faults(row),
                            total,
                            procs: top,
                        })?;
                        round.snapshots += 1;
                    }
                    inc.taken += 1;
                    inc.last_snapshot = now;
                }
            }
            for (i, rule) in rules.iter().enumerate() {
                for (tenant, row) in &samples {
                    let key = (i, tenant.to_string());
                    if fired
                        .get(&key)
                        .is_some_and(|t| now - t < rule.every.as_secs() as i64)
                    {
                        continue;
                    }
                    let alert = check(store, rule, i, tenant, row, limits.get(*tenant), now_ms)?;
                    if let Some(alert) = alert {
                        store.insert_alert(&SentAlert {
                            tenant: tenant.to_string(),
                            ts: now,
                            rule: rule.name.clone(),
                            message: alert.message.clone(),
                        })?;
                        fired.insert(key, now);
                        round.alerts.push(alert);
                    }
                }
            }
            if maintain {
                round.deleted = Some(store.maintain(now, &retention)?);
            }
            Ok(())
        });
        self.limits = limits;
        self.incidents = incidents;
        self.fired = fired;
        result?;
        if maintain {
            self.last_maintenance = now;
            // Incidents long over are forgotten.
            self.incidents
                .retain(|_, inc| now - inc.last_fault <= INCIDENT_GAP);
        }
        Ok(round)
    }
}

/// "processes=3 cpu=12": the faults of a row.
pub fn describe_faults(row: &Row) -> String {
    FAULT_KINDS
        .iter()
        .filter_map(|k| {
            let n = fault_count(row, k)?;
            (n > 0).then(|| format!("{k}={n}"))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The average of a resource over a row, and the tenant's limit of it.
pub fn usage_and_limit(row: &Row, res: Resource, l: &LimitsRow) -> Option<(f64, f64)> {
    let (avg, limit) = match res {
        Resource::Cpu => (row.cpu_pct(), l.cpu_pct?),
        Resource::Memory => (row.avg(row.mem_sum) * 1024.0, l.memory?),
        Resource::Processes => (row.avg(row.procs_sum), l.processes?),
        Resource::Entry => (row.avg(row.ep_sum), l.entry?),
        Resource::IoRead => (row.per_second(row.io_rb), l.io_read_bps?),
        Resource::IoWrite => (row.per_second(row.io_wb), l.io_write_bps?),
        Resource::IopsRead => (row.per_second(row.io_rops), l.io_read_iops?),
        Resource::IopsWrite => (row.per_second(row.io_wops), l.io_write_iops?),
    };
    (limit > 0).then_some((avg, limit as f64))
}

/// Does `rule` fire for this tenant, given its latest sample? Only a
/// sample that could make it fire (a fault of the kinds, usage above the
/// threshold) leads to reading the rule's period from the database, so the
/// cost is nil while tenants behave.
fn check(
    store: &Store,
    rule: &Rule,
    index: usize,
    tenant: &str,
    latest: &Row,
    limits: Option<&LimitsRow>,
    now_ms: i64,
) -> Result<Option<Alert>> {
    let since = now_ms - rule.period.as_millis() as i64;
    let kinds_of = |row: &Row| -> HashMap<&'static str, i64> {
        FAULT_KINDS
            .iter()
            .filter_map(|k| Some((*k, fault_count(row, k)?)).filter(|(_, n)| *n > 0))
            .collect()
    };
    let base = |message: String, window: &Row, kind: &'static str| Alert {
        rule: rule.name.clone(),
        tenant: tenant.to_string(),
        time: now_ms / 1000,
        kind,
        message,
        faults: kinds_of(window),
        usage: None,
        period_seconds: rule.period.as_secs(),
        rule_index: index,
    };
    match &rule.condition {
        Condition::Faults { kinds, count } => {
            let of = |row: &Row| -> i64 {
                if kinds.is_empty() {
                    row.faults()
                } else {
                    kinds.iter().filter_map(|k| fault_count(row, k)).sum()
                }
            };
            if of(latest) == 0 {
                return Ok(None);
            }
            let window = store.recent(tenant, since)?;
            let n = of(&window);
            if n < *count {
                return Ok(None);
            }
            let what = if kinds.is_empty() {
                "faults".to_string()
            } else {
                format!("{} faults", kinds.join("/"))
            };
            let message = format!(
                "{tenant}: {n} {what} in the last {} ({})",
                humantime::format_duration(rule.period),
                describe_faults(&window)
            );
            Ok(Some(base(message, &window, "faults")))
        }
        Condition::Usage { resource, pct } => {
            let Some(l) = limits else { return Ok(None) };
            match usage_and_limit(latest, *resource, l) {
                Some((v, limit)) if v * 100.0 >= pct * limit => {}
                _ => return Ok(None),
            }
            let window = store.recent(tenant, since)?;
            let Some((avg, limit)) = usage_and_limit(&window, *resource, l) else {
                return Ok(None);
            };
            let percent = avg * 100.0 / limit;
            if percent < *pct {
                return Ok(None);
            }
            let message = format!(
                "{tenant}: {} at {percent:.0}% of its limit on average over the last {} (threshold {pct}%)",
                resource.name(),
                humantime::format_duration(rule.period),
            );
            let mut a = base(message, &window, "usage");
            a.usage = Some(UsageAlert {
                resource: resource.name(),
                average: avg,
                limit,
                percent,
                threshold_percent: *pct,
            });
            Ok(Some(a))
        }
    }
}
