//! `corral up`, `down`, `restart`, `ls`.

use crate::ctx::Ctx;
use crate::out::outln;
use corral_sandbox::state::{now_unix, process_start};
use corral_sandbox::{Layout, UpOptions, UpOutcome};
use serde::Serialize;
use std::path::Path;

/// Validate the tenant's profile and limits, then bring the sandbox up.
pub fn up_one(ctx: &Ctx, tenant: &str) -> anyhow::Result<UpOutcome> {
    bring_up(&ctx.layout, &ctx.config_dir, &ctx.up_options()?, tenant)
}

/// [`up_one`] from its parts: what every "bring it up on first use" runs
/// (`corral run`, `corral cgi`, the gateway), through
/// `corral_sandbox::join::load_or_up`.
pub fn bring_up(
    layout: &Layout,
    config_dir: &Path,
    opts: &UpOptions,
    tenant: &str,
) -> anyhow::Result<UpOutcome> {
    corral_profile::suspend::check(config_dir, tenant)?;
    let plan = corral_profile::load(config_dir, tenant)?;
    let limits = corral_limits::Limits::from_source(&plan.limits)?;
    Ok(corral_sandbox::up(layout, &plan, &limits, opts)?)
}

#[derive(Serialize)]
struct UpReport<'a> {
    tenant: &'a str,
    created: bool,
    pid: i32,
    stale: bool,
}

pub fn up(ctx: &Ctx, tenants: &[String]) -> anyhow::Result<i32> {
    for t in tenants {
        let out = up_one(ctx, t)?;
        let r = match out {
            UpOutcome::Created { pid } => UpReport {
                tenant: t,
                created: true,
                pid,
                stale: false,
            },
            UpOutcome::AlreadyUp { pid, stale } => UpReport {
                tenant: t,
                created: false,
                pid,
                stale,
            },
        };
        if ctx.json {
            outln!("{}", serde_json::to_string(&r)?);
        } else if r.created {
            outln!("{t}: up (init pid {})", r.pid);
        } else if r.stale {
            outln!("{t}: already up (init pid {}), built from an older profile: `corral restart {t}` rebuilds it", r.pid);
        } else {
            outln!("{t}: already up (init pid {})", r.pid);
        }
    }
    Ok(0)
}

/// How many tenants `down` asks to stop at once before taking each down.
const STOP_AHEAD: usize = 64;

pub fn down(ctx: &Ctx, tenants: &[String]) -> anyhow::Result<i32> {
    // A batch at a time: every name of the batch checked first (nothing is
    // touched for a batch holding a mistake), then every init of it asked
    // to stop, so that they exit together and the kernel tears their
    // network namespaces down in one go (down --all: 34 → ≈ 3 ms per tenant
    // with 5,000; docs/benchmarks.md "down without RTM_DELLINK"), then each
    // taken down as before.
    // Each name once, in the order given (`down A A` takes A down once).
    let mut seen = std::collections::HashSet::new();
    let tenants: Vec<&String> = tenants.iter().filter(|t| seen.insert(*t)).collect();
    for batch in tenants.chunks(STOP_AHEAD) {
        for t in batch {
            crate::ctx::check_tenant_name(t)?;
            // A name that is neither a user nor has a sandbox's state is a
            // mistake: say so, and create nothing (not even a lock file).
            // The state dir first: the passwd file is read line by line to
            // the user's entry, which with thousands of users costs more
            // than the rest of a `down` (`down --all` names only tenants
            // with state).
            let known = || {
                corral_users::Db::system()
                    .user_by_name(t)
                    .ok()
                    .flatten()
                    .is_some()
            };
            if !ctx.layout.tenant(t).dir.exists() && !known() {
                anyhow::bail!("{t}: no such tenant (no user of that name, and no sandbox state)");
            }
        }
        let mut asked = vec![false; batch.len()];
        let mut failed: Option<anyhow::Error> = None;
        if batch.len() > 1 {
            for (t, asked) in batch.iter().zip(&mut asked) {
                match corral_sandbox::stop_ahead(&ctx.layout, t) {
                    Ok(a) => *asked = a,
                    Err(e) => {
                        failed = Some(e.into());
                        break;
                    }
                }
            }
        }
        // Every tenant of the batch is taken down, also after a failure (its
        // init may have been asked to stop already); the first error ends
        // the command after the batch.
        for (t, asked) in batch.iter().zip(asked) {
            match corral_sandbox::down(&ctx.layout, t) {
                Ok(was) => {
                    let was = was || asked;
                    if ctx.json {
                        outln!("{}", serde_json::json!({"tenant": t, "was_up": was}));
                    } else {
                        outln!("{t}: {}", if was { "down" } else { "was not up" });
                    }
                }
                Err(e) => {
                    failed.get_or_insert(e.into());
                }
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
    }
    Ok(0)
}

/// After `down --all`: corral's cgroup parent in every hierarchy, when empty
/// (rmdir refuses a cgroup that still has children, so other instances'
/// tenants under the same parent are safe).
pub fn prune_cgroup_parent(ctx: &Ctx) {
    if let Ok(backend) = corral_limits::Backend::detect(&ctx.cgroup_parent) {
        for d in backend.parent_dirs() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

pub fn restart(ctx: &Ctx, tenants: &[String]) -> anyhow::Result<i32> {
    for t in tenants {
        corral_profile::suspend::check(&ctx.config_dir, t)?;
        // Validate the new profile before taking the old sandbox down.
        let plan = corral_profile::load(&ctx.config_dir, t)?;
        corral_limits::Limits::from_source(&plan.limits)?;
        corral_sandbox::down(&ctx.layout, t)?;
    }
    up(ctx, tenants)
}

#[derive(Serialize)]
struct Row {
    tenant: String,
    state: &'static str,
    pid: Option<i32>,
    uptime_s: Option<u64>,
    namespaces: Vec<String>,
    /// Namespace inode numbers (what `readlink /proc/PID/ns/X` shows).
    ns_inodes: std::collections::BTreeMap<String, u64>,
    /// Processes in the tenant's cgroup.
    processes: Option<usize>,
    /// The profile changed since the sandbox was built.
    stale: Option<bool>,
    /// `*-try` binds the sandbox lacks: the source is missing, or appeared
    /// after the sandbox was built.
    skipped_binds: Vec<crate::cmd::profile::SkippedBind>,
}

pub fn ls(ctx: &Ctx) -> anyhow::Result<i32> {
    let mut rows = Vec::new();
    for t in ctx.layout.list()? {
        let st = ctx.layout.tenant(&t).read_state().ok().flatten();
        let row = match st {
            Some(s) if s.init_alive() => {
                let current = corral_profile::load(&ctx.config_dir, &t).ok();
                let stale = current.as_ref().map(|p| p.digest() != s.digest);
                // The plan the sandbox was built from: the current one when
                // nothing changed (it knows where each mount was written),
                // else the one the sandbox saved.
                let built = match current {
                    Some(p) if stale == Some(false) => Some(p),
                    _ => std::fs::read(ctx.layout.tenant(&t).plan())
                        .ok()
                        .and_then(|b| serde_json::from_slice(&b).ok()),
                };
                let root = std::path::PathBuf::from(format!("/proc/{}/root", s.init_pid));
                let skipped_binds = built
                    .map(|p| crate::cmd::profile::skipped_binds(&p, Some(&root)))
                    .unwrap_or_default();
                let ns_dir = std::path::PathBuf::from(format!("/proc/{}/ns", s.init_pid));
                let ns_inodes = s
                    .namespaces
                    .iter()
                    .filter_map(|n| {
                        std::fs::metadata(ns_dir.join(n))
                            .ok()
                            .map(|m| (n.clone(), std::os::unix::fs::MetadataExt::ino(&m)))
                    })
                    .collect();
                let processes = s
                    .cgroup_dirs
                    .first()
                    .and_then(|d| std::fs::read_to_string(d.join("cgroup.procs")).ok())
                    .map(|p| p.lines().count());
                Row {
                    tenant: t,
                    state: "up",
                    pid: Some(s.init_pid),
                    uptime_s: Some(now_unix().saturating_sub(s.created_unix)),
                    namespaces: s.namespaces,
                    ns_inodes,
                    processes,
                    stale,
                    skipped_binds,
                }
            }
            Some(s) => Row {
                tenant: t,
                state: if process_start(s.init_pid).is_none() {
                    "dead"
                } else {
                    "unknown"
                },
                pid: None,
                uptime_s: None,
                namespaces: s.namespaces,
                ns_inodes: Default::default(),
                processes: None,
                stale: None,
                skipped_binds: vec![],
            },
            None => Row {
                tenant: t,
                state: "incomplete",
                pid: None,
                uptime_s: None,
                namespaces: vec![],
                ns_inodes: Default::default(),
                processes: None,
                stale: None,
                skipped_binds: vec![],
            },
        };
        rows.push(row);
    }
    if ctx.json {
        outln!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(0);
    }
    outln!(
        "{:<20} {:<10} {:>8} {:>10} {:>6}  {:<6} NAMESPACES (inode)",
        "TENANT",
        "STATE",
        "PID",
        "UPTIME",
        "PROCS",
        "STALE"
    );
    let mut warnings = Vec::new();
    for r in rows {
        for w in &r.skipped_binds {
            warnings.push(format!("warning: {}: {}", r.tenant, w.message));
        }
        let up = r
            .uptime_s
            .map(|s| format!("{}s", s))
            .unwrap_or_else(|| "-".into());
        let pid = r.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into());
        let stale = match r.stale {
            Some(true) => "yes",
            Some(false) => "no",
            None => "-",
        };
        let procs = r
            .processes
            .map(|p| p.to_string())
            .unwrap_or_else(|| "-".into());
        let ns: Vec<String> = r
            .namespaces
            .iter()
            .map(|n| match r.ns_inodes.get(n) {
                Some(i) => format!("{n}:{i}"),
                None => n.clone(),
            })
            .collect();
        outln!(
            "{:<20} {:<10} {:>8} {:>10} {:>6}  {:<6} {}",
            r.tenant,
            r.state,
            pid,
            up,
            procs,
            stale,
            ns.join(" ")
        );
    }
    for w in warnings {
        eprintln!("{w}");
    }
    Ok(0)
}
