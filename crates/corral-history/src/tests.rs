//! The collector and the store together, on a simulated clock: rollups agree
//! with the samples they summarise, retention deletes old rows without
//! leaving gaps, snapshots and alerts are bounded, and a day of samples
//! stays small.

use crate::*;
use corral_limits::{Faults, Limits, Usage};
use std::time::Duration;

/// A deterministic tenant: counters that grow by pseudo-random amounts,
/// with process-limit faults in some rounds.
struct Fake {
    name: String,
    seed: u64,
    usage: Usage,
    faults: Faults,
}

impl Fake {
    fn new(name: &str, seed: u64) -> Fake {
        Fake {
            name: name.into(),
            seed,
            usage: Usage::default(),
            faults: Faults::default(),
        }
    }

    fn next(&mut self) -> u64 {
        self.seed = self
            .seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.seed >> 33
    }

    /// The next reading, `secs` after the last; faults when `fault`.
    fn read(&mut self, secs: u64, fault: bool) -> Reading {
        let busy = self.next() % 1000;
        self.usage.cpu_usage_ns += busy * secs * 1_000_000;
        self.usage.memory_bytes = (20 + self.next() % 200) << 20;
        self.usage.processes = 1 + self.next() % 30;
        self.usage.io_read_bytes += self.next() % 100_000;
        self.usage.io_write_ops += self.next() % 50;
        if fault {
            self.faults.pids_max_hits += 1 + self.next() % 3;
            self.faults.cpu_throttled_periods += self.next() % 5;
        }
        Reading {
            tenant: self.name.clone(),
            usage: self.usage.clone(),
            faults: self.faults.clone(),
            entry: Some(((self.next() % 5) as u32, 0)),
            limits: Some(Limits {
                cpu_pct: Some(100),
                memory_max: Some(1 << 30),
                processes: Some(100),
                entry_processes: Some(20),
                ..Default::default()
            }),
        }
    }
}

fn config(retention: Retention, rules: Vec<Rule>) -> HistoryConfig {
    HistoryConfig {
        retention,
        rules,
        ..Default::default()
    }
}

/// Runs `rounds` rounds `step` seconds apart from `start`; tenant i faults
/// when `fault(round, i)`.
fn simulate(
    c: &mut Collector,
    fakes: &mut [Fake],
    start: i64,
    step: i64,
    rounds: i64,
    fault: impl Fn(i64, usize) -> bool,
) -> i64 {
    let mut now = start;
    for k in 0..rounds {
        let readings: Vec<Reading> = fakes
            .iter_mut()
            .enumerate()
            .map(|(i, f)| f.read(step as u64, fault(k, i)))
            .collect();
        c.round(now * 1000, &readings, &mut |_| {
            Some((
                1,
                vec![Proc {
                    pid: 1,
                    state: "R".into(),
                    cpu_ms: 1,
                    rss: 1,
                    cmdline: "x".into(),
                }],
            ))
        })
        .unwrap();
        now += step;
    }
    now
}

const T0: i64 = 1_767_225_600; // 2026-01-01 00:00 UTC

fn keep_all() -> Retention {
    Retention {
        raw: 1 << 40,
        minute: 1 << 40,
        five_minutes: 1 << 40,
        hour: 1 << 40,
    }
}

#[test]
fn rollups_agree_with_the_samples_they_summarise() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(&dir.path().join("h.db")).unwrap();
    let mut c = Collector::new(store, &config(keep_all(), vec![])).unwrap();
    let mut fakes = vec![Fake::new("a", 1), Fake::new("b", 2), Fake::new("c", 3)];
    // 2 h 10 min of 5-s samples, starting mid-minute.
    let end = simulate(&mut c, &mut fakes, T0 + 7, 5, 1560, |k, i| {
        k % (7 + i as i64) == 0
    });
    let s = c.store();
    let raw = s.tier_rows(Tier::Raw).unwrap();
    assert_eq!(
        raw.len(),
        3 * 1559,
        "one sample per tenant per round but the first"
    );
    for (tier, len) in [
        (Tier::Minute, 60),
        (Tier::FiveMinutes, 300),
        (Tier::Hour, 3600),
    ] {
        let stored = s.tier_rows(tier).unwrap();
        assert!(!stored.is_empty(), "{tier:?}");
        let done = (end - 5).div_euclid(len) * len; // buckets ended by the last round
        for tenant in ["a", "b", "c"] {
            let samples: Vec<Row> = raw
                .iter()
                .filter(|(t, r)| t == tenant && r.ts < done)
                .map(|(_, r)| *r)
                .collect();
            let want = query::regroup(&samples, len);
            let got: Vec<Row> = stored
                .iter()
                .filter(|(t, _)| t == tenant)
                .map(|(_, r)| *r)
                .collect();
            assert_eq!(got, want, "{tier:?} rows of {tenant}");
        }
    }
    // A query over the whole time agrees with the samples, from any tier.
    let totals = query::totals(&s.rows(None, 0, end).unwrap());
    let raw_totals = query::totals(&raw);
    assert_eq!(totals, raw_totals);
}

#[test]
fn retention_deletes_old_rows_and_leaves_no_gap() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(&dir.path().join("h.db")).unwrap();
    let keep = Retention {
        raw: 120,
        minute: 600,
        five_minutes: 3600,
        hour: 86_400,
    };
    let mut c = Collector::new(store, &config(keep, vec![])).unwrap();
    let mut fakes = vec![Fake::new("a", 9)];
    // Two days and a bit of 20-s samples.
    let end = simulate(&mut c, &mut fakes, T0, 20, 2 * 4320 + 100, |k, _| {
        k % 500 == 0
    });
    let now = end - 20;
    let s = c.store();
    for (tier, keep, bucket) in [
        (Tier::Raw, 120, 60),
        (Tier::Minute, 600, 300),
        (Tier::FiveMinutes, 3600, 3600),
        (Tier::Hour, 86_400, 3600),
    ] {
        let rows = s.tier_rows(tier).unwrap();
        let oldest = rows.first().map(|(_, r)| r.ts).unwrap();
        // What is older than the retention (to the coarser bucket, plus
        // the minute between maintenance runs) is gone.
        assert!(
            oldest >= now - keep - bucket - 60,
            "{tier:?}: oldest row {} s old, keep {keep}",
            now - oldest
        );
        assert!(
            oldest < now - keep + bucket + 60,
            "{tier:?} kept too little"
        );
    }
    // The last day, from every tier together: each moment once.
    let from = now - 86_400 + 3600;
    let rows = s.rows(Some("a"), from, end).unwrap();
    let covered: i64 = rows.iter().map(|(_, r)| r.dur_ms).sum::<i64>() / 1000;
    let span = end - from;
    assert!(
        (covered - span).abs() <= 3600,
        "the rows cover {covered} s of the {span} s asked"
    );
    let mut ts: Vec<i64> = rows.iter().map(|(_, r)| r.ts).collect();
    ts.dedup();
    assert_eq!(ts.len(), rows.len(), "no moment twice");
}

#[test]
fn snapshots_are_bounded_per_incident_and_per_minute() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(&dir.path().join("h.db")).unwrap();
    let mut c = Collector::new(store, &config(Retention::default(), vec![])).unwrap();
    let mut fakes = vec![Fake::new("a", 5)];
    // Faults in every round for 10 minutes, then none for 2, then 1 more.
    let end = simulate(&mut c, &mut fakes, T0, 5, 120, |_, _| true);
    let end = simulate(&mut c, &mut fakes, end, 5, 24, |_, _| false);
    simulate(&mut c, &mut fakes, end, 5, 2, |_, _| true);
    let snaps = c.store().snapshots("a", 0, i64::MAX).unwrap();
    let times: Vec<i64> = snaps.iter().map(|s| s.ts - T0).collect();
    assert_eq!(
        times.len(),
        4,
        "3 in the first incident, 1 in the second: {times:?}"
    );
    assert!(
        times[1] - times[0] >= 60 && times[2] - times[1] >= 60,
        "{times:?}"
    );
    assert!(times[3] >= 600 + 120, "{times:?}");
    assert!(snaps[0].faults.contains("processes="), "{:?}", snaps[0]);
    assert_eq!(snaps[0].procs[0].cmdline, "x");
}

fn rule(condition: Condition, period: u64, every: u64) -> Rule {
    Rule {
        name: "r".into(),
        condition,
        period: Duration::from_secs(period),
        every: Duration::from_secs(every),
        command: Some(vec!["/bin/true".into()]),
        webhook: None,
        line: 1,
    }
}

#[test]
fn alerts_fire_on_their_condition_once_per_period_of_rate_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.db");
    let rules = vec![
        rule(
            Condition::Faults {
                kinds: vec!["processes".into()],
                count: 5,
            },
            60,
            600,
        ),
        Rule {
            name: "mem".into(),
            ..rule(
                Condition::Usage {
                    resource: Resource::Memory,
                    pct: 1.0,
                },
                30,
                3600,
            )
        },
    ];
    let cfg = config(Retention::default(), rules);
    let mut c = Collector::new(Store::create(&path).unwrap(), &cfg).unwrap();
    let mut fakes = [Fake::new("a", 5), Fake::new("b", 6)];
    let mut alerts = vec![];
    let mut now = T0;
    for k in 0..240 {
        // "a" faults in every round for its first 20 minutes; "b" never.
        let readings = vec![fakes[0].read(5, k < 240), fakes[1].read(5, false)];
        let r = c.round(now * 1000, &readings, &mut |_| None).unwrap();
        alerts.extend(
            r.alerts
                .into_iter()
                .map(|a| (a.rule, a.tenant, a.time - T0)),
        );
        now += 5;
    }
    let faults: Vec<_> = alerts.iter().filter(|a| a.0 == "r").collect();
    // Every 10 minutes at most, as soon as 5 faults are within a minute.
    assert_eq!(faults.len(), 2, "{alerts:?}");
    assert_eq!(faults[0].1, "a");
    assert!(faults[1].2 - faults[0].2 >= 600, "{alerts:?}");
    // Memory above 1% of 1 GiB: both tenants, once each within the hour.
    let mem: Vec<_> = alerts.iter().filter(|a| a.0 == "mem").collect();
    assert_eq!(mem.len(), 2, "{alerts:?}");
    // Recorded, and a restarted collector keeps the rate limit.
    let sent = c.store().alerts(None, 0, i64::MAX).unwrap();
    assert_eq!(sent.len(), alerts.len());
    assert!(
        sent.iter()
            .any(|a| a.rule == "r" && a.message.contains("5 processes faults in the last 1m")),
        "{sent:?}"
    );
    drop(c);
    let mut c = Collector::new(Store::create(&path).unwrap(), &cfg).unwrap();
    let readings = vec![fakes[0].read(5, true), fakes[1].read(5, false)];
    c.round(now * 1000, &readings, &mut |_| None).unwrap();
    let r = c
        .round(
            (now + 5) * 1000,
            &[fakes[0].read(5, true), fakes[1].read(5, false)],
            &mut |_| None,
        )
        .unwrap();
    assert!(
        r.alerts.iter().all(|a| a.rule != "mem"),
        "rate limit kept across a restart: {:?}",
        r.alerts
    );
}

/// The size target: a day of 5-s samples with the default rollups and
/// retention, through the collector's own code path, costs at most
/// 100 KiB per tenant (docs/benchmarks.md quotes the printed figure).
#[test]
fn a_day_of_samples_costs_less_than_100_kib_per_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.db");
    let mut c = Collector::new(
        Store::create(&path).unwrap(),
        &config(Retention::default(), vec![]),
    )
    .unwrap();
    let tenants = 20;
    let mut fakes: Vec<Fake> = (0..tenants)
        .map(|i| Fake::new(&format!("tenant{i:04}"), i))
        .collect();
    let size = |c: &Collector| {
        c.store().checkpoint().unwrap();
        std::fs::metadata(&path).unwrap().len()
    };
    let end = simulate(&mut c, &mut fakes, T0, 5, 17_280, |k, i| {
        (k + i as i64) % 720 == 0
    });
    let day1 = size(&c);
    let per_tenant = day1 as f64 / tenants as f64 / 1024.0;
    // A second day: what the file grows by once samples and 1-minute rows
    // have reached their retention.
    simulate(&mut c, &mut fakes, end, 5, 17_280, |k, i| {
        (k + i as i64) % 720 == 0
    });
    let day2 = size(&c);
    eprintln!(
        "history size: {tenants} tenants, 5-s samples, default retention: after 1 day \
         {per_tenant:.1} KiB per tenant; after 2 days {:.1} KiB per tenant (day 2 added {:.1})",
        day2 as f64 / tenants as f64 / 1024.0,
        (day2 as f64 - day1 as f64) / tenants as f64 / 1024.0
    );
    eprintln!("tables: {:?}", c.store().table_sizes().unwrap());
    assert_eq!(c.store().integrity_check().unwrap(), "ok");
    assert!(
        per_tenant <= 100.0,
        "{per_tenant:.1} KiB per tenant per day"
    );
}
