//! Answers over stored rows, like lveinfo's: totals per tenant, the tenants
//! that hit limits (`--by-fault`), the tenants whose usage came near their
//! limits (`--by-usage`), and a tenant's usage regrouped into steps.

use crate::collector::usage_and_limit;
use crate::config::Resource;
use crate::row::{fault_count, Row};
use crate::store::LimitsRow;
use serde::Serialize;
use std::collections::BTreeMap;

/// Totals of each tenant's rows (sums and maxima over the window).
pub fn totals(rows: &[(String, Row)]) -> BTreeMap<String, Row> {
    let mut out: BTreeMap<String, Row> = BTreeMap::new();
    for (t, r) in rows {
        match out.get_mut(t) {
            Some(total) => total.add(r),
            None => {
                out.insert(t.clone(), *r);
            }
        }
    }
    out
}

/// Tenants with faults of `kind` ("any", "cpu", "memory", ...), most first.
pub fn by_fault(rows: &[(String, Row)], kind: &str) -> Vec<(String, Row)> {
    let mut v: Vec<(String, Row)> = totals(rows)
        .into_iter()
        .filter(|(_, r)| fault_count(r, kind).unwrap_or(0) > 0)
        .collect();
    v.sort_by_key(|(t, r)| {
        (
            std::cmp::Reverse(fault_count(r, kind).unwrap_or(0)),
            t.clone(),
        )
    });
    v
}

/// The limits in force at `ts`: the last set at or before it (the first
/// known when the history starts later).
pub fn limits_at(history: &[LimitsRow], ts: i64) -> Option<&LimitsRow> {
    history
        .iter()
        .rev()
        .find(|l| l.ts <= ts)
        .or_else(|| history.first())
}

/// A resource of a tenant that reached the threshold.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct UsageHit {
    pub tenant: String,
    pub resource: &'static str,
    /// Steps in which the average reached the threshold.
    pub steps: usize,
    /// Seconds those steps cover.
    pub seconds: i64,
    /// The highest step average, in % of the limit, and when.
    pub peak_percent: f64,
    pub peak_at: i64,
    pub limit: f64,
}

/// Resources whose average over a step (`step` seconds, at least the
/// rows' own length) reached `pct` % of the tenant's limit at the time.
pub fn by_usage(
    rows: &[(String, Row)],
    limits: &BTreeMap<String, Vec<LimitsRow>>,
    pct: f64,
    step: i64,
) -> Vec<UsageHit> {
    let mut per: BTreeMap<&str, Vec<Row>> = BTreeMap::new();
    for (t, r) in rows {
        per.entry(t.as_str()).or_default().push(*r);
    }
    let mut out = Vec::new();
    for (tenant, rs) in per {
        let Some(hist) = limits.get(tenant) else {
            continue;
        };
        for res in Resource::ALL {
            let mut hit: Option<UsageHit> = None;
            for r in regroup(&rs, step) {
                let Some(l) = limits_at(hist, r.ts) else {
                    continue;
                };
                let Some((avg, limit)) = usage_and_limit(&r, res, l) else {
                    continue;
                };
                let p = avg * 100.0 / limit;
                if p < pct {
                    continue;
                }
                let h = hit.get_or_insert(UsageHit {
                    tenant: tenant.to_string(),
                    resource: res.name(),
                    steps: 0,
                    seconds: 0,
                    peak_percent: 0.0,
                    peak_at: r.ts,
                    limit,
                });
                h.steps += 1;
                h.seconds += r.dur_ms / 1000;
                if p > h.peak_percent {
                    (h.peak_percent, h.peak_at, h.limit) = (p, r.ts, limit);
                }
            }
            out.extend(hit);
        }
    }
    out.sort_by(|a, b| {
        b.peak_percent
            .total_cmp(&a.peak_percent)
            .then_with(|| a.tenant.cmp(&b.tenant))
    });
    out
}

/// One tenant's rows summed into `step`-second steps (a row longer than
/// the step stays one row), in time order.
pub fn regroup(rows: &[Row], step: i64) -> Vec<Row> {
    let step = step.max(1);
    let mut out: BTreeMap<i64, Row> = BTreeMap::new();
    for r in rows {
        let key = r.ts.div_euclid(step) * step;
        match out.get_mut(&key) {
            Some(have) => have.add(r),
            None => {
                out.insert(key, Row { ts: key, ..*r });
            }
        }
    }
    out.into_values().collect()
}

/// A step that shows `span` seconds in about `points` rows: 1, 5, 15 or 30
/// minutes, or 1, 3, 6 or 24 hours.
pub fn step_for(span: i64, points: i64) -> i64 {
    const STEPS: [i64; 8] = [60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 86_400];
    let want = span / points.max(1);
    STEPS.into_iter().find(|s| *s >= want).unwrap_or(86_400)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(ts: i64, cpu_ms: i64, mem: i64, f_procs: i64) -> Row {
        Row {
            ts,
            dur_ms: 60_000,
            n: 12,
            cpu_ms,
            mem_sum: mem * 12,
            mem_max: mem,
            f_procs,
            ..Default::default()
        }
    }

    #[test]
    fn by_fault_and_by_usage_pick_the_right_tenants() {
        let rows = vec![
            ("a".to_string(), row(0, 6_000, 100, 0)),
            ("b".to_string(), row(0, 57_000, 960, 3)),
            ("b".to_string(), row(60, 1_000, 100, 2)),
            ("c".to_string(), row(60, 0, 10, 1)),
        ];
        let f = by_fault(&rows, "processes");
        assert_eq!(
            f.iter()
                .map(|(t, r)| (t.as_str(), r.f_procs))
                .collect::<Vec<_>>(),
            [("b", 5), ("c", 1)]
        );
        assert!(by_fault(&rows, "cpu").is_empty());
        let lim = |ts| LimitsRow {
            ts,
            cpu_pct: Some(100),
            memory: Some(1000 * 1024),
            ..Default::default()
        };
        let limits: BTreeMap<String, Vec<LimitsRow>> = ["a", "b", "c"]
            .iter()
            .map(|t| (t.to_string(), vec![lim(0)]))
            .collect();
        let hits = by_usage(&rows, &limits, 90.0, 60);
        assert_eq!(hits.len(), 2, "{hits:?}");
        assert_eq!((hits[0].tenant.as_str(), hits[0].resource), ("b", "memory"));
        assert_eq!(hits[0].peak_percent, 96.0);
        assert_eq!((hits[1].tenant.as_str(), hits[1].resource), ("b", "cpu"));
        assert_eq!(hits[1].peak_percent, 95.0);
        assert_eq!(
            (hits[1].steps, hits[1].seconds, hits[1].peak_at),
            (1, 60, 0)
        );
        // Over 2-minute steps b's average is below 90% of both.
        assert!(by_usage(&rows, &limits, 90.0, 120).is_empty());
    }

    #[test]
    fn regrouping_sums_rows_into_steps() {
        let rows: Vec<Row> = (0..10).map(|i| row(i * 60, 1000, 10 * i, 0)).collect();
        let g = regroup(&rows, 300);
        assert_eq!(g.len(), 2);
        assert_eq!(
            (g[0].ts, g[0].cpu_ms, g[0].n, g[0].mem_max),
            (0, 5000, 60, 40)
        );
        assert_eq!((g[1].ts, g[1].mem_max), (300, 90));
        assert_eq!(step_for(86_400, 48), 1800);
        assert_eq!(step_for(3600, 48), 300);
    }
}
