//! `scale`: does corral stay cheap with many tenants? For 10, 100, 1,000
//! (full also 5,000) idle tenants: the time of `corral up` (in bulk, and of
//! single tenants with the others up), the latency of `corral run TENANT --
//! /bin/true` over random tenants (joining is O(1): it must stay flat),
//! interleaved with joins of a one-tenant reference environment so that
//! the machine's noise cancels out of the ratio,
//! memory per idle tenant (the init's PSS/RSS plus the kernel's share:
//! slab, stacks, page tables, per-CPU, tmpfs), and the time of `corral down
//! --all`.
//!
//! Tenants are the suite's own Unix users ([`users`]), created at the start
//! and removed at the end. They run in a private environment of their own
//! (state dir, configuration with a fixed host name, cgroup parent below
//! the run's), so `down --all` only touches them. Each size starts from no
//! tenant and ends with none, checked.

pub mod floor;
pub mod memory;
pub mod users;

use std::time::{Duration, Instant};

use crate::error::{BenchError, Result};
use crate::report::{fmt_ratio, fmt_value};
use crate::results::{Better, ResultSet, Samples};
use crate::stats;
use crate::suites::env::{BenchEnv, Tenant};
use crate::suites::sys;
use crate::suites::tools::Tool;
use crate::suites::{Ctx, Level, Options};

pub const SUITE: &str = "scale";
pub const TOOLS: &[Tool] = &[
    users::USERADD,
    users::USERDEL,
    users::GROUPADD,
    users::GROUPDEL,
];

/// Row tests.
pub const TIME: &str = "time";
pub const MEMORY: &str = "memory";

/// Figure names.
pub mod fig {
    pub const UP_MS_PER_TENANT: &str = "up_ms_per_tenant";
    pub const UP_TOTAL_S: &str = "up_total_s";
    pub const UP_ONE_MS: &str = "up_one_ms";
    pub const JOIN_MS: &str = "join_ms";
    pub const JOIN_P90_MS: &str = "join_p90_ms";
    pub const JOIN_VS_FIRST: &str = "join_vs_first";
    pub const JOIN_REF_MS: &str = "join_ref_ms";
    pub const JOIN_VS_REF: &str = "join_vs_ref";
    pub const DOWN_TOTAL_S: &str = "down_total_s";
    pub const DOWN_MS_PER_TENANT: &str = "down_ms_per_tenant";
    pub const INIT_PSS_KIB: &str = "init_pss_kib";
    pub const INIT_RSS_KIB: &str = "init_rss_kib";
    pub const KERNEL_KIB: &str = "kernel_kib";
    pub const TMPFS_KIB: &str = "tmpfs_kib";
    pub const TOTAL_KIB: &str = "total_kib";
    pub const USED_KIB: &str = "used_kib";
    pub const HOST_MOUNTS: &str = "host_mounts";
    /// The kernel's floor at the same N (see [`super::floor`]): total,
    /// kernel share, the holder's PSS, and corral's total minus the floor.
    pub const FLOOR_KIB: &str = "floor_kib";
    pub const FLOOR_KERNEL_KIB: &str = "floor_kernel_kib";
    pub const FLOOR_HOLDER_PSS_KIB: &str = "floor_holder_pss_kib";
    pub const ABOVE_FLOOR_KIB: &str = "above_floor_kib";
}

/// Tenant counts per level.
pub fn sizes(level: Level) -> Vec<usize> {
    level.pick(vec![10, 100, 1000, 5000], vec![10, 100, 300], vec![20])
}

/// Environment variable choosing other sizes: `10,100,1000`.
pub const SIZES_ENV: &str = "CORRAL_BENCH_SCALE_SIZES";

/// `CORRAL_BENCH_SCALE_SIZES` parsed: ascending, 1..=20,000 each.
pub fn parse_sizes(v: &str) -> Option<Vec<usize>> {
    let mut out: Vec<usize> = v
        .split(',')
        .map(|x| x.trim().parse().ok().filter(|n| (1..=20_000).contains(n)))
        .collect::<Option<_>>()?;
    out.sort_unstable();
    out.dedup();
    (!out.is_empty()).then_some(out)
}

/// The sizes of this run: [`SIZES_ENV`] when set and valid, else the level's.
pub fn chosen_sizes(level: Level) -> Vec<usize> {
    std::env::var(SIZES_ENV)
        .ok()
        .and_then(|v| parse_sizes(&v))
        .unwrap_or_else(|| sizes(level))
}

/// `corral run` samples per size.
fn joins(level: Level) -> usize {
    level.pick(500, 200, 40)
}

/// Single `corral up` samples per size.
fn singles(level: Level) -> usize {
    level.pick(20, 10, 5)
}

/// Targets the report checks (1,000 tenants, or the largest size below).
pub const TARGET_JOIN_RATIO: f64 = 1.10;
pub const TARGET_KIB: f64 = 300.0;

pub fn steps(opts: &Options) -> u64 {
    chosen_sizes(opts.level).len() as u64 + 1
}

pub fn mode(n: usize) -> String {
    format!("{n} tenants")
}

/// xorshift64*: reproducible picks of random tenants, no dependency.
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        Rng((t ^ u64::from(std::process::id()).rotate_left(32)) | 1)
    }
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n as u64) as usize
    }
}

/// The private environment of the scale tenants: the bench profile with a
/// fixed host name (the users' names are valid host names, but a provider
/// with thousands of tenants would not derive one per tenant).
fn scale_env(ctx: &Ctx, name: &str) -> Result<BenchEnv> {
    let env = BenchEnv::new(
        &ctx.env.corral,
        &ctx.opts.state_base,
        &format!("{}/{name}", ctx.env.cgroup_parent),
        &[],
        &ctx.opts.default_profile,
    )?;
    let p = env.config_dir.join("profile.toml");
    let text = std::fs::read_to_string(&p).map_err(|e| BenchError::io(&p, e))?;
    let line = "hostname = \"$USER\"";
    if !text.contains(line) {
        return Err(BenchError::suite(
            "scale",
            format!("the built-in default profile changed: {line:?} not found"),
        ));
    }
    std::fs::write(&p, text.replace(line, "hostname = \"tenant\""))
        .map_err(|e| BenchError::io(&p, e))?;
    Ok(env)
}

pub fn run(ctx: &mut Ctx) -> Result<()> {
    let level = ctx.level();
    let sizes = chosen_sizes(level);
    if std::env::var_os(SIZES_ENV).is_some() {
        ctx.results.add_note(format!(
            "scale: sizes {sizes:?} from {SIZES_ENV} (not the {} run's)",
            level.as_str()
        ));
    }
    let max = *sizes.iter().max().unwrap_or(&0);
    ctx.note(&format!("scale: {max} users (useradd, about 60 ms each)"));
    let progress = &ctx.progress;
    // Declared before the environment: dropped after it (userdel refuses
    // users whose sandboxes still run).
    let mut pool = users::Pool::ensure(max, &|k| {
        progress.note(&match k {
            0 => "scale: waiting for another scale run to finish (users are machine-wide)"
                .to_string(),
            k => format!("scale: {k}/{max} users"),
        })
    })?;
    ctx.progress.step_done(&format!(
        "scale: {max} users ready ({} created in {:.1} s)",
        pool.created.0,
        pool.created.1.as_secs_f64()
    ));
    let env = scale_env(ctx, "scale")?;
    // The peer of the memory figure: the kernel's floor at the same N
    // (floor.rs), holding the namespaces the bench profile gives a tenant.
    let holder = crate::suites::cbuild::compile(
        &ctx.cc,
        &crate::suites::cbuild::NS_HOLDER,
        &ctx.work_dir("scale-bin")?,
    )?;
    let net = corral_profile::load(&env.config_dir, &pool.users[0].name)
        .map(|p| p.namespaces.net)
        .map_err(|e| BenchError::suite("scale", format!("the bench profile: {e}")))?;
    let floor_peer = FloorPeer {
        holder,
        net,
        parent: format!("{}/scale-floor", ctx.env.cgroup_parent),
        work: ctx.work_dir("scale-floor")?,
    };
    // The reference: one tenant alone in an environment of its own, joined
    // alternately with the N tenants (same moments, same machine noise).
    let reference = scale_env(ctx, "scale-ref")?;
    let ref_tenant = pool.users[0].name.clone();
    corral(&reference, &["up", &ref_tenant], Duration::from_secs(60))?;
    let mut rng = Rng::new();
    let mut first_join: Option<f64> = None;
    let mut results = Vec::new();
    // A failure or Ctrl-C stops the sizes; what was measured is still reported.
    let mut stopped = None;
    for &n in &sizes {
        let r = sys::check_interrupt().and_then(|()| {
            measure(
                ctx,
                &env,
                &pool.users[..n],
                (&reference, &ref_tenant),
                &floor_peer,
                &mut rng,
            )
        });
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                stopped = Some(e);
                break;
            }
        };
        ctx.progress.step_done(&format!(
            "scale {n} tenants: join {:.2} ms (1-tenant reference {:.2} ms), {:.0} KiB/tenant{}, up {:.1} ms/tenant, down {:.1} ms/tenant",
            r.join_median,
            r.ref_median,
            r.total_kib,
            match &r.floor {
                Some(Ok(f)) => format!(" (kernel floor {:.0})", f.total_kib),
                _ => String::new(),
            },
            r.up_ms_per_tenant,
            r.down_ms_per_tenant
        ));
        first_join.get_or_insert(r.join_vs_ref());
        results.push((n, r));
    }
    drop(env);
    drop(reference);
    let t = Instant::now();
    let removed = pool.users.len();
    let problems = pool.remove();
    for p in &problems {
        ctx.corral_failure(format!("scale: cleanup: {p}"));
    }
    ctx.results.add_note(format!(
        "scale: tenants are the suite's own users corral-s00001… (useradd -M -N -g {}, home {}/NAME, /usr/sbin/nologin); {} created in {:.1} s, {removed} removed with userdel in {:.1} s",
        users::GROUP,
        users::HOMES,
        pool.created.0,
        pool.created.1.as_secs_f64(),
        t.elapsed().as_secs_f64()
    ));
    push_rows(&mut ctx.results, level, results, first_join);
    stopped.map_or(Ok(()), Err)
}

/// What one size measured.
#[derive(Debug, Clone, Default)]
struct SizeResult {
    up_total_s: f64,
    up_ms_per_tenant: f64,
    up_one_ms: Vec<f64>,
    join_ms: Vec<f64>,
    join_median: f64,
    /// Joins of the one-tenant reference, interleaved with `join_ms`.
    ref_ms: Vec<f64>,
    ref_median: f64,
    down_total_s: f64,
    down_ms_per_tenant: f64,
    init_pss_kib: Vec<f64>,
    init_rss_kib: Vec<f64>,
    mem: Option<memory::PerTenant>,
    total_kib: f64,
    /// The kernel's floor at this N, or why it was not measured.
    floor: Option<std::result::Result<floor::FloorResult, String>>,
}

/// How the floor is measured (the same for every size).
struct FloorPeer {
    holder: std::path::PathBuf,
    net: corral_profile::plan::NetMode,
    /// The holders' cgroup parent, next to the tenants'.
    parent: String,
    work: std::path::PathBuf,
}

impl SizeResult {
    /// Median join with N tenants over the median join of the reference:
    /// 1.0 = joining does not depend on N.
    fn join_vs_ref(&self) -> f64 {
        self.join_median / self.ref_median
    }
}

fn corral(env: &BenchEnv, args: &[&str], limit: Duration) -> Result<Duration> {
    let mut c = env.corral_cmd();
    c.args(args);
    let shown: Vec<&str> = args.iter().copied().take(4).collect();
    let what = format!(
        "corral {}{}",
        shown.join(" "),
        if args.len() > 4 { " …" } else { "" }
    );
    Ok(sys::run_ok(&mut c, limit, "scale", what)?.wall)
}

/// Bring `tenants` up, measure, take them all down, check nothing is left.
fn measure(
    ctx: &mut Ctx,
    env: &BenchEnv,
    tenants: &[Tenant],
    (reference, ref_tenant): (&BenchEnv, &str),
    floor_peer: &FloorPeer,
    rng: &mut Rng,
) -> Result<SizeResult> {
    let n = tenants.len();
    let mut r = SizeResult::default();
    sys::sleep(Duration::from_secs(1));
    let before = memory::snapshot();
    // Bulk: `corral up A B C …`, 250 names per invocation.
    let mut up = Duration::ZERO;
    for chunk in tenants.chunks(250) {
        sys::check_interrupt()?;
        let mut args = vec!["up"];
        args.extend(chunk.iter().map(|t| t.name.as_str()));
        up += corral(env, &args, Duration::from_secs(60 + chunk.len() as u64))?;
    }
    r.up_total_s = up.as_secs_f64();
    r.up_ms_per_tenant = r.up_total_s * 1000.0 / n as f64;
    // Idle: let the inits settle (heap trimmed after setup), then look.
    sys::sleep(Duration::from_secs(2));
    let after = memory::snapshot();
    // Where the floor's holders go: the hierarchies the tenants are in.
    let roots = floor::cgroup_roots(&env.cgroup_parent);
    for t in tenants {
        let pid = init_pid(env, &t.name)?;
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
        if let Some((rss, pss)) = memory::parse_smaps_rollup(&text) {
            r.init_rss_kib.push(rss as f64);
            r.init_pss_kib.push(pss as f64);
        }
    }
    let mem = memory::per_tenant(&before, &after, n);
    r.total_kib = stats::mean(&r.init_pss_kib).unwrap_or(0.0) + mem.kernel_kib + mem.tmpfs_kib;
    r.mem = Some(mem);
    // One tenant brought up while the others are up.
    for _ in 0..singles(ctx.level()).min(n) {
        let t = &tenants[rng.below(n)].name;
        corral(env, &["down", t], Duration::from_secs(60))?;
        r.up_one_ms
            .push(corral(env, &["up", t], Duration::from_secs(60))?.as_secs_f64() * 1000.0);
    }
    // Joins over random tenants, alternating with the reference (three
    // unmeasured rounds first).
    let join = |e: &BenchEnv, t: &str| -> Result<f64> {
        Ok(
            corral(e, &["run", t, "--", "/bin/true"], Duration::from_secs(30))?.as_secs_f64()
                * 1000.0,
        )
    };
    for i in 0..joins(ctx.level()) + 3 {
        sys::check_interrupt()?;
        let t = &tenants[rng.below(n)].name;
        let (a, b) = if i % 2 == 0 {
            (join(env, t)?, join(reference, ref_tenant)?)
        } else {
            let b = join(reference, ref_tenant)?;
            (join(env, t)?, b)
        };
        if i >= 3 {
            r.join_ms.push(a);
            r.ref_ms.push(b);
        }
    }
    r.join_median = stats::median(&r.join_ms).unwrap_or(f64::NAN);
    r.ref_median = stats::median(&r.ref_ms).unwrap_or(f64::NAN);
    let down = corral(env, &["down", "--all"], Duration::from_secs(60 + n as u64))?;
    r.down_total_s = down.as_secs_f64();
    r.down_ms_per_tenant = r.down_total_s * 1000.0 / n as f64;
    let left = leftovers(env);
    if !left.is_empty() {
        ctx.corral_failure(format!(
            "scale {n} tenants: after `corral down --all`: {}",
            left.join("; ")
        ));
    }
    // The floor, once corral's tenants are gone, in the hierarchies they
    // were in. A failure of this peer is reported, not corral's.
    r.floor = Some(
        match floor::measure(
            &floor_peer.holder,
            &roots,
            &floor_peer.parent,
            floor_peer.net,
            n,
            &floor_peer.work,
        ) {
            Ok(f) => Ok(f),
            Err(e @ BenchError::Interrupted) => return Err(e),
            Err(e) => Err(e.to_string()),
        },
    );
    Ok(r)
}

fn init_pid(env: &BenchEnv, tenant: &str) -> Result<i32> {
    Ok(env.tenant_state(tenant)?.init_pid)
}

/// Sandboxes, tenant cgroups and mounts still there (all should be gone).
fn leftovers(env: &BenchEnv) -> Vec<String> {
    let mut left = Vec::new();
    let sandboxes = env.layout().list().map(|d| d.len()).unwrap_or(0);
    if sandboxes > 0 {
        left.push(format!("{sandboxes} sandbox state directories"));
    }
    if let Ok(rd) = std::fs::read_dir("/sys/fs/cgroup") {
        for h in rd.flatten() {
            let dir = h.path().join(&env.cgroup_parent);
            let cgroups = std::fs::read_dir(&dir)
                .map(|d| d.flatten().filter(|e| e.path().is_dir()).count())
                .unwrap_or(0);
            if cgroups > 0 {
                left.push(format!("{cgroups} cgroups in {}", dir.display()));
            }
        }
    }
    let root = env.root().to_string_lossy().into_owned();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&root))
        .count();
    if mounts > 0 {
        left.push(format!("{mounts} mounts below {root}"));
    }
    left
}

fn push_rows(
    rs: &mut ResultSet,
    level: Level,
    results: Vec<(usize, SizeResult)>,
    first_join: Option<f64>,
) {
    use Better::*;
    let mut notes = Vec::new();
    let first_n = results.first().map(|x| x.0).unwrap_or(0);
    for (n, r) in &results {
        let mut t = Samples::new();
        t.push(fig::UP_MS_PER_TENANT, "ms", Lower, r.up_ms_per_tenant);
        t.push(fig::UP_TOTAL_S, "s", Lower, r.up_total_s);
        for v in &r.up_one_ms {
            t.push(fig::UP_ONE_MS, "ms", Lower, *v);
        }
        for v in &r.join_ms {
            t.push(fig::JOIN_MS, "ms", Lower, *v);
        }
        if let Some(p) = stats::percentile(&r.join_ms, 90.0) {
            t.push(fig::JOIN_P90_MS, "ms", Lower, p);
        }
        for v in &r.ref_ms {
            t.push(fig::JOIN_REF_MS, "ms", Lower, *v);
        }
        if r.join_vs_ref().is_finite() {
            t.push(fig::JOIN_VS_REF, "ratio", Lower, r.join_vs_ref());
        }
        if let Some(x) = first_join.and_then(|f| stats::retention(r.join_vs_ref(), f)) {
            t.push(fig::JOIN_VS_FIRST, "ratio", Lower, x);
        }
        t.push(fig::DOWN_TOTAL_S, "s", Lower, r.down_total_s);
        t.push(fig::DOWN_MS_PER_TENANT, "ms", Lower, r.down_ms_per_tenant);
        rs.push(t.into_row(SUITE, TIME, &mode(*n)));
        let mut m = Samples::new();
        for v in &r.init_pss_kib {
            m.push(fig::INIT_PSS_KIB, "KiB", Lower, *v);
        }
        for v in &r.init_rss_kib {
            m.push(fig::INIT_RSS_KIB, "KiB", Lower, *v);
        }
        if let Some(mem) = &r.mem {
            m.push(fig::KERNEL_KIB, "KiB", Lower, mem.kernel_kib);
            m.push(fig::TMPFS_KIB, "KiB", Lower, mem.tmpfs_kib);
            m.push(fig::USED_KIB, "KiB", Lower, mem.used_kib);
            m.push(fig::HOST_MOUNTS, "count", Lower, mem.host_mounts);
            let fields: Vec<String> = mem
                .fields
                .iter()
                .map(|(k, v)| format!("{k} {v:.1}"))
                .collect();
            let slabs: Vec<String> = mem
                .top_slabs
                .iter()
                .map(|(k, v)| format!("{k} {v:.1}"))
                .collect();
            notes.push(format!(
                "scale {n} tenants: KiB per tenant: slab objects {:.1}; by /proc/meminfo field: {}; slab caches that grew most (objects in use): {}",
                mem.slab_kib,
                fields.join(", "),
                slabs.join(", ")
            ));
        }
        m.push(fig::TOTAL_KIB, "KiB", Lower, r.total_kib);
        match &r.floor {
            Some(Ok(f)) => {
                m.push(fig::FLOOR_KIB, "KiB", Lower, f.total_kib);
                m.push(fig::FLOOR_KERNEL_KIB, "KiB", Lower, f.mem.kernel_kib);
                for v in &f.holder_pss_kib {
                    m.push(fig::FLOOR_HOLDER_PSS_KIB, "KiB", Lower, *v);
                }
                m.push(
                    fig::ABOVE_FLOOR_KIB,
                    "KiB",
                    Lower,
                    r.total_kib - f.total_kib,
                );
                let slabs: Vec<String> = f
                    .mem
                    .top_slabs
                    .iter()
                    .map(|(k, v)| format!("{k} {v:.1}"))
                    .collect();
                notes.push(format!(
                    "scale {n} tenants: the kernel's floor (no corral: {n} static processes each holding the same namespaces, {}, a procfs, cgroups of their own in the same hierarchies): {:.0} KiB per tenant = kernel {:.0} (slab objects {:.1}) + holder PSS {:.0}; corral {:.0}, i.e. {:+.0} KiB above the floor; the floor's slab caches that grew most: {}",
                    f.network(),
                    f.total_kib,
                    f.mem.kernel_kib,
                    f.mem.slab_kib,
                    crate::stats::mean(&f.holder_pss_kib).unwrap_or(0.0),
                    r.total_kib,
                    r.total_kib - f.total_kib,
                    slabs.join(", ")
                ));
            }
            Some(Err(e)) => notes.push(format!(
                "scale {n} tenants: the kernel's floor was not measured: {e}"
            )),
            None => {}
        }
        rs.push(m.into_row(SUITE, MEMORY, &mode(*n)));
    }
    // The targets, at 1,000 tenants (or the largest size below it).
    let target = results.iter().filter(|x| x.0 <= 1000).max_by_key(|x| x.0);
    if let (Some((n, r)), Some(f)) = (target, first_join) {
        let ratio = r.join_vs_ref() / f;
        notes.push(format!(
            "scale targets at {n} tenants{}: join latency {} of the {first_n}-tenant figure, both relative to the interleaved 1-tenant reference (target ≤ ×{TARGET_JOIN_RATIO:.2}): {}; {:.0} KiB per idle tenant (target ≤ {TARGET_KIB:.0} KiB): {}",
            if *n < 1000 { format!(" (the largest size of a {} run)", level.as_str()) } else { String::new() },
            fmt_ratio(ratio),
            if ratio <= TARGET_JOIN_RATIO { "met" } else { "missed" },
            r.total_kib,
            if r.total_kib <= TARGET_KIB { "met" } else { "missed" },
        ) + &match &r.floor {
            Some(Ok(f)) => format!(
                " (the kernel's floor of the same namespaces and cgroups without corral: {:.0} KiB)",
                f.total_kib
            ),
            _ => String::new(),
        });
    }
    notes.push(
        "scale: memory per tenant = mean init PSS + kernel share (Δ slab objects in use, by /proc/slabinfo active_objs × objsize, cache by cache, + KernelStack + PageTables + Percpu) + tmpfs (Δ Shmem), deltas before/after bringing the tenants up, divided by N; SUnreclaim and SReclaimable (slab pages: they miss objects that fill slots freed earlier) and `used` = Δ (MemTotal − MemAvailable) / N for comparison".into(),
    );
    for n in notes {
        rs.add_note(n);
    }
}

/// Headline lines: per size, join latency and its ratio to the smallest
/// size, memory per tenant, up and down per tenant.
pub fn headline(rs: &ResultSet) -> Vec<[String; 5]> {
    let mut out = Vec::new();
    for r in rs.suite_rows(SUITE).filter(|r| r.test == TIME) {
        let Some(j) = r.median(fig::JOIN_MS) else {
            continue;
        };
        let memory = rs.row(SUITE, MEMORY, &r.mode);
        let kib = memory.and_then(|m| m.median(fig::TOTAL_KIB));
        let floor = memory
            .and_then(|m| m.median(fig::FLOOR_KIB))
            .map(|v| format!(" (kernel floor {} KiB)", fmt_value(v, "KiB")))
            .unwrap_or_default();
        let f = |v: Option<f64>, u: &str| v.map(|x| fmt_value(x, u)).unwrap_or_else(|| "–".into());
        out.push([
            SUITE.to_string(),
            r.mode.clone(),
            "corral".to_string(),
            format!(
                "join {} ms, {} KiB/tenant{floor}",
                fmt_value(j, "ms"),
                f(kib, "KiB")
            ),
            format!(
                "{} of a 1-tenant join, {} vs first size; up {} ms, down {} ms per tenant",
                r.median(fig::JOIN_VS_REF)
                    .map(fmt_ratio)
                    .unwrap_or_else(|| "–".into()),
                r.median(fig::JOIN_VS_FIRST)
                    .map(fmt_ratio)
                    .unwrap_or_else(|| "–".into()),
                f(r.median(fig::UP_MS_PER_TENANT), "ms"),
                f(r.median(fig::DOWN_MS_PER_TENANT), "ms")
            ),
        ]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_per_level() {
        assert_eq!(sizes(Level::Full), vec![10, 100, 1000, 5000]);
        assert_eq!(sizes(Level::Quick), vec![10, 100, 300]);
        assert_eq!(sizes(Level::Smoke), vec![20]);
    }

    #[test]
    fn sizes_from_the_environment() {
        assert_eq!(parse_sizes("1000, 10,100,10"), Some(vec![10, 100, 1000]));
        assert_eq!(parse_sizes("10,x"), None);
        assert_eq!(parse_sizes("0"), None);
        assert_eq!(parse_sizes(""), None);
    }

    #[test]
    fn random_picks_cover_the_range() {
        let mut r = Rng(42);
        let mut seen = [false; 7];
        for _ in 0..200 {
            seen[r.below(7)] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }

    #[test]
    fn rows_ratios_and_targets() {
        // `reference`: the interleaved 1-tenant joins (machine noise moves both).
        let mk = |join: f64, reference: f64, kib: f64| SizeResult {
            up_total_s: 1.0,
            up_ms_per_tenant: 10.0,
            up_one_ms: vec![12.0],
            join_ms: vec![join, join],
            join_median: join,
            ref_ms: vec![reference],
            ref_median: reference,
            down_total_s: 0.5,
            down_ms_per_tenant: 5.0,
            init_pss_kib: vec![100.0],
            init_rss_kib: vec![900.0],
            mem: None,
            floor: None,
            total_kib: kib,
        };
        let mut rs = ResultSet::new(crate::Machine::detect(&[]), true);
        push_rows(
            &mut rs,
            Level::Full,
            vec![
                (10, mk(2.0, 2.0, 250.0)),
                // Slower, but so was the reference at the same moments.
                (1000, mk(2.31, 2.2, 280.0)),
                (5000, mk(3.0, 2.0, 290.0)),
            ],
            Some(1.0),
        );
        let r = rs.row(SUITE, TIME, "1000 tenants").unwrap();
        assert!((r.median(fig::JOIN_VS_REF).unwrap() - 1.05).abs() < 1e-12);
        assert!((r.median(fig::JOIN_VS_FIRST).unwrap() - 1.05).abs() < 1e-12);
        assert_eq!(
            rs.row(SUITE, MEMORY, "10 tenants")
                .unwrap()
                .median(fig::TOTAL_KIB),
            Some(250.0)
        );
        let note = rs
            .notes
            .iter()
            .find(|n| n.starts_with("scale targets at 1000 tenants"))
            .unwrap();
        assert!(
            note.contains("×1.05") && note.contains(": met;") && note.ends_with("met"),
            "{note}"
        );
        let h = headline(&rs);
        assert_eq!(h.len(), 3);
        assert!(
            h[2][4].starts_with("×1.50 of a 1-tenant join, ×1.50 vs first"),
            "{h:?}"
        );
    }
}
