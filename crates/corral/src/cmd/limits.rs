//! `corral limits`, `corral stats`, `corral top`: per-tenant limits, live
//! changes, usage and fault counters (like CloudLinux's lvectl / lvetop).

use crate::cli::{LimitsCmd, PlanCmd, StatsArgs, TopArgs};
use crate::ctx::Ctx;
use crate::out::{out, outln};
use corral_limits::{Backend, EntrySlots, Faults, Limits, TenantCgroup, Usage};
use corral_profile::edit::{self, Change};
use corral_sandbox::state::{write_atomic, TenantState};
use serde::Serialize;
use std::time::{Duration, Instant};

/// A running tenant's state and its effective limits.
fn running(ctx: &Ctx, tenant: &str) -> anyhow::Result<(TenantState, Limits)> {
    crate::ctx::check_tenant_name(tenant)?;
    let dir = ctx.layout.tenant(tenant);
    let st = dir
        .read_state()?
        .filter(|s| s.init_alive())
        .ok_or_else(|| anyhow::anyhow!("tenant {tenant} is not up"))?;
    let limits: Limits = serde_json::from_slice(&std::fs::read(dir.limits())?)?;
    Ok((st, limits))
}

fn cgroup(st: &TenantState) -> anyhow::Result<TenantCgroup> {
    let backend = Backend::detect(&st.cgroup_parent)?;
    let name = st
        .cgroup
        .as_deref()
        .ok_or_else(|| anyhow::anyhow!("tenant {} has no cgroup", st.tenant))?;
    Ok(TenantCgroup::open(&backend, name)?)
}

/// Apply to the cgroup first, then record: a failed apply changes nothing on disk.
fn apply_and_record(ctx: &Ctx, st: &TenantState, limits: &Limits) -> anyhow::Result<()> {
    cgroup(st)?.apply(limits)?;
    let p = ctx.layout.tenant(&st.tenant).limits();
    write_atomic(&p, &serde_json::to_vec(limits)?, 0o600)?;
    Ok(())
}

pub fn limits(ctx: &Ctx, cmd: LimitsCmd) -> anyhow::Result<i32> {
    match cmd {
        LimitsCmd::Show { tenant } => {
            let (limits, source) = match running(ctx, &tenant) {
                Ok((_, l)) => (l, "running sandbox"),
                Err(_) => {
                    let plan = corral_profile::load(&ctx.config_dir, &tenant)?;
                    (Limits::from_source(&plan.limits)?, "profile (not up)")
                }
            };
            if ctx.json {
                outln!("{}", serde_json::to_string_pretty(&limits)?);
            } else {
                outln!("limits of {tenant} ({source}):");
                for (k, v) in limits.describe() {
                    outln!("  {k:<18} {v}");
                }
            }
        }
        LimitsCmd::Set {
            tenant,
            assignments,
            runtime: true,
        } => {
            let (st, mut limits) = running(ctx, &tenant)?;
            // Validate every assignment before applying any.
            for a in &assignments {
                limits.set_assignment(a)?;
            }
            limits.validate_change()?;
            apply_and_record(ctx, &st, &limits)?;
            outln!(
                "{tenant}: applied {} (runtime only: gone after a restart)",
                assignments.join(" ")
            );
        }
        LimitsCmd::Set {
            tenant,
            assignments,
            runtime: false,
        } => {
            crate::ctx::check_tenant_name(&tenant)?;
            // Each assignment on its own first, for an error that names it.
            let mut changes = Vec::new();
            for a in &assignments {
                Limits::default().set_assignment(a)?;
                let (k, v) = a.split_once('=').expect("checked by set_assignment");
                changes.push(Change::Limit {
                    key: k.trim().to_string(),
                    value: v.trim().to_string(),
                });
            }
            persist(ctx, &tenant, &changes, &assignments.join(" "))?;
        }
        LimitsCmd::Reload { tenants } => {
            let names = if tenants.is_empty() {
                ctx.layout.list()?
            } else {
                tenants
            };
            for t in names {
                let Ok((st, _)) = running(ctx, &t) else {
                    continue;
                };
                let plan = corral_profile::load(&ctx.config_dir, &t)?;
                let limits = Limits::from_source(&plan.limits)?;
                apply_and_record(ctx, &st, &limits)?;
                outln!("{t}: limits re-read from the profile and plan");
            }
        }
    }
    Ok(0)
}

/// `corral plan set TENANT PLAN`.
pub fn plan(ctx: &Ctx, cmd: PlanCmd) -> anyhow::Result<i32> {
    match cmd {
        PlanCmd::Set { tenant, plan } => {
            crate::ctx::check_tenant_name(&tenant)?;
            persist(
                ctx,
                &tenant,
                &[Change::Plan(plan.clone())],
                &format!("plan {plan}"),
            )?;
        }
    }
    Ok(0)
}

/// Write `changes` into the tenant's override file once the files with them
/// give valid limits, then apply the tenant's effective limits to its
/// running sandbox, if it is up. Nothing is written when a check fails.
fn persist(ctx: &Ctx, tenant: &str, changes: &[Change], what: &str) -> anyhow::Result<()> {
    let (text, plan) = edit::preview(&ctx.config_dir, tenant, changes)?;
    let limits = Limits::from_source(&plan.limits)?;
    limits.validate_change()?;
    let live = running(ctx, tenant).ok();
    let path = edit::write(&ctx.config_dir, tenant, &text)?;
    match live {
        Some((st, _)) => {
            apply_and_record(ctx, &st, &limits)?;
            outln!("{tenant}: {what}: saved in {} and applied", path.display());
        }
        None => outln!(
            "{tenant}: {what}: saved in {} (applies when {tenant} comes up)",
            path.display()
        ),
    }
    Ok(())
}

#[derive(Serialize, Clone)]
pub struct TenantStats {
    pub tenant: String,
    pub cpu_percent: f64,
    pub usage: Usage,
    pub faults: Faults,
    pub entry_processes: u32,
    pub entry_limit: Option<u32>,
    pub entry_rejections: u64,
    pub io_read_bps: f64,
    pub io_write_bps: f64,
}

struct Sample {
    at: Instant,
    usage: Usage,
}

fn sample(st: &TenantState) -> anyhow::Result<Sample> {
    Ok(Sample {
        at: Instant::now(),
        usage: cgroup(st)?.usage()?,
    })
}

fn stats_between(
    ctx: &Ctx,
    st: &TenantState,
    limits: &Limits,
    a: &Sample,
    b: &Sample,
) -> anyhow::Result<TenantStats> {
    let secs = b.at.duration_since(a.at).as_secs_f64().max(1e-6);
    let faults = cgroup(st)?.faults()?;
    let (in_use, rejections) = match limits.entry_processes {
        Some(limit) => {
            let slots = EntrySlots::open(&ctx.layout.tenant(&st.tenant).entry(), limit)?;
            (slots.in_use()?, slots.rejections()?)
        }
        None => (0, 0),
    };
    Ok(TenantStats {
        tenant: st.tenant.clone(),
        cpu_percent: (b.usage.cpu_usage_ns.saturating_sub(a.usage.cpu_usage_ns)) as f64
            / 1e9
            / secs
            * 100.0,
        io_read_bps: (b.usage.io_read_bytes.saturating_sub(a.usage.io_read_bytes)) as f64 / secs,
        io_write_bps: (b
            .usage
            .io_write_bytes
            .saturating_sub(a.usage.io_write_bytes)) as f64
            / secs,
        usage: b.usage.clone(),
        faults,
        entry_processes: in_use,
        entry_limit: limits.entry_processes,
        entry_rejections: rejections,
    })
}

/// Usage of every running tenant (or the named ones) over `interval`.
pub fn collect(ctx: &Ctx, only: &[String], interval: Duration) -> anyhow::Result<Vec<TenantStats>> {
    let names = if only.is_empty() {
        ctx.layout.list()?
    } else {
        only.to_vec()
    };
    let mut first = Vec::new();
    for t in names {
        match running(ctx, &t) {
            Ok((st, l)) => {
                let s = sample(&st)?;
                first.push((st, l, s));
            }
            Err(e) if !only.is_empty() => return Err(e),
            Err(_) => {}
        }
    }
    std::thread::sleep(interval);
    first
        .iter()
        .map(|(st, l, a)| stats_between(ctx, st, l, a, &sample(st)?))
        .collect()
}

fn mib(b: u64) -> String {
    format!("{:.1}M", b as f64 / (1 << 20) as f64)
}

fn table(rows: &[TenantStats]) -> String {
    let mut out = format!(
        "{:<16} {:>6} {:>9} {:>6} {:>9} {:>9} {:>7} | {:>9} {:>7} {:>5} {:>6} {:>6}\n",
        "TENANT",
        "CPU%",
        "MEM",
        "PROCS",
        "IO-R/s",
        "IO-W/s",
        "EP",
        "CPU-THR",
        "MEMHIT",
        "OOM",
        "PIDHIT",
        "EP-REJ"
    );
    for r in rows {
        let ep = match r.entry_limit {
            Some(l) => format!("{}/{l}", r.entry_processes),
            None => r.entry_processes.to_string(),
        };
        out.push_str(&format!(
            "{:<16} {:>6.1} {:>9} {:>6} {:>9} {:>9} {:>7} | {:>9} {:>7} {:>5} {:>6} {:>6}\n",
            r.tenant,
            r.cpu_percent,
            mib(r.usage.memory_bytes),
            r.usage.processes,
            mib(r.io_read_bps as u64),
            mib(r.io_write_bps as u64),
            ep,
            r.faults.cpu_throttled_periods,
            r.faults.memory_max_hits,
            r.faults.oom_kills,
            r.faults.pids_max_hits,
            r.entry_rejections
        ));
    }
    out
}

pub fn stats(ctx: &Ctx, a: StatsArgs) -> anyhow::Result<i32> {
    let only: Vec<String> = a.tenant.into_iter().collect();
    let rows = collect(ctx, &only, Duration::from_millis(a.interval_ms))?;
    if ctx.json {
        outln!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        out!("{}", table(&rows));
    }
    Ok(0)
}

pub fn top(ctx: &Ctx, a: TopArgs) -> anyhow::Result<i32> {
    let mut n = 0u64;
    loop {
        let mut rows = collect(ctx, &[], Duration::from_millis(a.interval_ms))?;
        let key = |r: &TenantStats| -> f64 {
            match a.sort.as_str() {
                "mem" => r.usage.memory_bytes as f64,
                "procs" => r.usage.processes as f64,
                "io" => r.io_read_bps + r.io_write_bps,
                "faults" => {
                    (r.faults.cpu_throttled_periods
                        + r.faults.memory_max_hits
                        + r.faults.pids_max_hits
                        + r.entry_rejections) as f64
                }
                _ => r.cpu_percent,
            }
        };
        if a.sort == "name" {
            rows.sort_by(|x, y| x.tenant.cmp(&y.tenant));
        } else {
            rows.sort_by(|x, y| key(y).total_cmp(&key(x)));
        }
        if ctx.json {
            outln!("{}", serde_json::to_string(&rows)?);
        } else {
            // Clear the screen and home the cursor, like top(1).
            out!("\x1b[2J\x1b[H corral top — {} tenants, sorted by {}, every {} ms (Ctrl-C quits)\n\n{}", rows.len(), a.sort, a.interval_ms, table(&rows));
        }
        crate::out::flush();
        n += 1;
        if a.iterations.is_some_and(|max| n >= max) {
            return Ok(0);
        }
    }
}
