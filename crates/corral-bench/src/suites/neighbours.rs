//! `neighbours` (seed 003, "Comparing CloudLinux to Open Source
//! Alternatives"): three virtual hosts, each owned by a tenant, serving a
//! static page (nginx) and `phpinfo()` (the tenant's own PHP-FPM pool,
//! started with `corral run --detach`, so inside the tenant's sandbox and
//! cgroup), loaded by clients on separate "machines" (network namespaces
//! joined by veth pairs).
//!
//! Tests, for static and PHP: (1) one host, 100 users; (2) two hosts, 100
//! each; (3) three hosts, 100 each; (4) noisy neighbour: the victim host
//! with 100 users while a second host gets 2 × 500. Each test runs without
//! limits and with a corral CPU cap per tenant (a `[limits]` override per
//! tenant applied live with `corral limits reload`), the two modes
//! interleaved. Per host the article's siege figures (from h2load), per
//! test the server's CPU and memory (like sar), every tenant's CPU from its
//! cgroup (`corral stats`), Jain's fairness index and the victim's
//! retention.

mod load;
mod net;
mod sample;
mod web;

use std::collections::BTreeMap;
use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::{BenchError, Result};
use crate::report::{fmt_ratio, fmt_value};
use crate::results::{Better, ResultSet, Row, Samples};
use crate::stats;
use crate::suites::env::{BenchEnv, Tenant};
use crate::suites::sys::{self, Output};
use crate::suites::tools::{self, Tool};
use crate::suites::{cpus, Ctx, Level, Options};
use crate::{h2load, siege};

pub use load::{host_figures, ClientRun, HostFigures};
pub use net::{free_block, plan as client_plan, ClientNet};
pub use sample::{cpu_percent, parse_meminfo, parse_stat, parse_stats, CpuPercent};

pub const SUITE: &str = "neighbours";

/// `ip` (iproute2) for the client network namespaces.
pub use crate::suites::tools::IP;

/// PHP-FPM, found as `php-fpm` or `/usr/sbin/php-fpmX.Y` (see [`web::find_php_fpm`]).
pub const PHP_FPM: Tool = Tool::new("php-fpm", "php-fpm");

/// Tools checked before the run (PHP-FPM's versioned name is looked up at
/// the start of the suite).
pub const TOOLS: &[Tool] = &[
    tools::NGINX,
    tools::H2LOAD,
    IP,
    tools::TASKSET,
    tools::TIMEOUT,
];

/// Figure names (the article's siege figures reuse [`siege::fig`]).
pub mod fig {
    pub const USERS: &str = "users";
    pub const TENANT_CPU: &str = "tenant_cpu_pct";
    pub const TENANT_SHARE: &str = "tenant_cpu_share";
    pub const THROTTLED: &str = "throttled_periods";
    pub const RETENTION: &str = "retention";
    pub const JAIN: &str = "jain";
    pub const TOTAL_RATE: &str = "total_trans_per_s";
    pub const CPU_USER: &str = "cpu_user";
    pub const CPU_SYSTEM: &str = "cpu_system";
    pub const CPU_STEAL: &str = "cpu_steal";
    pub const CPU_IDLE: &str = "cpu_idle";
    pub const SERVER_BUSY: &str = "server_cpu_busy";
    pub const CLIENT_BUSY: &str = "client_cpu_busy";
    pub const CLIENT_CPU: &str = "client_cpu_pct";
    pub const NGINX_CPU: &str = "nginx_cpu_pct";
    pub const TENANTS_CPU: &str = "tenants_cpu_pct";
    pub const MEM_USED: &str = "mem_used_mib";
}

/// Durations and users per level: the article's 5 minutes and 100 / 2 × 500
/// users; quick 8 s; smoke 2 s with 10 / 2 × 50 users.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    pub duration_s: u64,
    pub users: u64,
    pub noisy_users: u64,
}

pub fn sizes(level: Level) -> Sizes {
    let s = |duration_s, users, noisy_users| Sizes {
        duration_s,
        users,
        noisy_users,
    };
    level.pick(s(300, 100, 500), s(8, 100, 500), s(2, 10, 50))
}

/// Static page or PHP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Content {
    Static,
    Php,
}

impl Content {
    pub const ALL: [Content; 2] = [Content::Static, Content::Php];
    pub fn name(self) -> &'static str {
        match self {
            Content::Static => "static",
            Content::Php => "php",
        }
    }
    fn path(self) -> &'static str {
        match self {
            Content::Static => web::STATIC_PATH,
            Content::Php => web::PHP_PATH,
        }
    }
}

/// One of the article's four tests: which host each client loads, with how
/// many users.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Test {
    pub name: &'static str,
    /// (site index, users) per client; client k uses network namespace k.
    pub clients: Vec<(usize, u64)>,
}

pub const ONE_HOST: &str = "1 host";
pub const NOISY: &str = "noisy neighbour";
pub const SUMMARY: &str = "summary";

pub fn tests(s: Sizes) -> Vec<Test> {
    let (u, n) = (s.users, s.noisy_users);
    let t = |name, clients| Test { name, clients };
    vec![
        t(ONE_HOST, vec![(0, u)]),
        t("2 hosts", vec![(0, u), (1, u)]),
        t("3 hosts", vec![(0, u), (1, u), (2, u)]),
        t(NOISY, vec![(0, u), (1, n), (1, n)]),
    ]
}

/// Without limits (the bench profile: never binding) or with a CPU cap per
/// tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Limits {
    None,
    Cpu(u32),
}

impl Limits {
    pub fn label(self) -> String {
        match self {
            Limits::None => "no limits".into(),
            Limits::Cpu(p) => format!("cpu {p}%"),
        }
    }
}

/// Tenant shares of CPU are shown when the tenants together used at least
/// this much (percent of one CPU).
const MIN_SHARE_BASE: f64 = 1.0;

/// Client CPU busy (percent) from which a test is noted as client-bound.
const CLIENT_SATURATED: f64 = 90.0;

/// Default CPU cap per tenant with limits, percent of one CPU.
pub const DEFAULT_CPU_LIMIT: u32 = 25;

/// Row test name: `static: 3 hosts`.
pub fn test_name(c: Content, test: &str) -> String {
    format!("{}: {test}", c.name())
}

/// Row mode of a host: `site1 · cpu 25%`; of a summary row: `3 hosts · no limits`.
pub fn mode_name(what: &str, l: Limits) -> String {
    format!("{what} · {}", l.label())
}

pub fn steps(opts: &Options) -> u64 {
    (Content::ALL.len() * tests(sizes(opts.level)).len() * 2) as u64
}

/// The three tenants: the configured ones, topped up with corral-t1..t3
/// (scripts/test-users.sh creates them).
fn three_tenants(configured: &[Tenant]) -> Result<Vec<Tenant>> {
    let mut v: Vec<Tenant> = configured.iter().take(3).cloned().collect();
    for extra in ["corral-t1", "corral-t2", "corral-t3"] {
        if v.len() >= 3 {
            break;
        }
        if v.iter().any(|t| t.name == extra) {
            continue;
        }
        v.push(Tenant::lookup(extra).map_err(|_| {
            BenchError::suite(
                "neighbours",
                format!("three tenants are needed: pass --tenants A,B,C or create {extra} with scripts/test-users.sh"),
            )
        })?);
    }
    Ok(v)
}

/// Everything one test run produced.
struct Measured {
    /// Per site index: its clients' runs.
    hosts: BTreeMap<usize, Vec<ClientRun>>,
    /// Per site index: CPU seconds its clients (h2load) used.
    client_cpu: BTreeMap<usize, f64>,
    server: sample::ServerSample,
    nginx_cpu_pct: f64,
    /// Per tenant: CPU % of one CPU, throttled periods.
    tenant_cpu: BTreeMap<String, (f64, u64)>,
    notes: Vec<String>,
}

/// The live parts: sites, clients, nginx, the limit overrides.
struct Stage {
    sites: Vec<web::Site>,
    nets: net::ClientNets,
    port: u16,
    nginx: sys::Server,
    logs: tempfile::TempDir,
    overrides: Overrides,
    server_cpu: Option<usize>,
    client_cpu: Option<usize>,
}

pub fn run(ctx: &mut Ctx) -> Result<()> {
    let tenants = three_tenants(&ctx.env.tenants)?;
    let r = run_with(ctx, &tenants);
    // Stop the pools (and everything else in the sandboxes) whatever happened.
    for t in &tenants {
        let _ = ctx.env.down(&t.name);
    }
    r
}

fn run_with(ctx: &mut Ctx, tenants: &[Tenant]) -> Result<()> {
    let php_fpm = web::find_php_fpm().ok_or_else(|| BenchError::MissingTools(vec![PHP_FPM]))?;
    let ip = IP
        .find()
        .ok_or_else(|| BenchError::MissingTools(vec![IP]))?;
    let (server_cpu, client_cpu) = if cpus() >= 2 {
        (Some(0), Some(cpus() - 1))
    } else {
        (None, None)
    };
    let sizes = sizes(ctx.level());
    let cap = Limits::Cpu(ctx.opts.cpu_limit.unwrap_or(DEFAULT_CPU_LIMIT));
    let sites = web::install(&mut ctx.env, tenants)?;
    for t in tenants {
        sys::check_interrupt()?;
        ctx.env.down(&t.name)?;
        ctx.env.up(&t.name, server_cpu)?;
    }
    for s in &sites {
        web::start_fpm(&ctx.env, s, &php_fpm)?;
    }
    let nets = net::ClientNets::create(ip, 3)?;
    let listen: Vec<_> = nets.nets.iter().map(|n| n.host_ip).collect();
    let (nginx, port) = web::start_nginx(
        &ctx.work_dir("neighbours/nginx")?,
        &listen,
        &sites,
        server_cpu,
    )?;
    let logs = tempfile::Builder::new()
        .prefix("corral-bench-neighbours-")
        .tempdir_in("/var/tmp")
        .map_err(|e| BenchError::io("/var/tmp", e))?;
    let mut stage = Stage {
        overrides: Overrides::new(&ctx.env),
        sites,
        nets,
        port,
        nginx,
        logs,
        server_cpu,
        client_cpu,
    };
    check(ctx, &stage)?;
    let mut got: BTreeMap<(Content, &'static str, Limits), Measured> = BTreeMap::new();
    let modes = [Limits::None, cap];
    let mut k = 0;
    // A failure or Ctrl-C stops the loop; what was measured is still reported.
    let mut stopped = None;
    'all: for c in Content::ALL {
        for test in tests(sizes) {
            for i in 0..2 {
                // Alternate which mode goes first, so drifts hit both alike.
                let l = modes[(k + i) % 2];
                let r = sys::check_interrupt()
                    .and_then(|()| stage.overrides.apply(&ctx.env, &stage.sites, l))
                    .and_then(|()| run_test(ctx, &stage, c, &test, sizes.duration_s, l));
                match r {
                    Ok(m) => {
                        got.insert((c, test.name, l), m);
                    }
                    Err(e) => {
                        stopped = Some(e);
                        break 'all;
                    }
                }
            }
            k += 1;
        }
    }
    if stopped.is_none() {
        stopped = stage
            .overrides
            .apply(&ctx.env, &stage.sites, Limits::None)
            .err();
    }
    let Stage {
        sites, nginx, nets, ..
    } = stage;
    drop(nginx);
    drop(nets);
    push_rows(&mut ctx.results, &sites, sizes, &modes, got);
    ctx.results.add_note(format!(
        "neighbours: nginx (1 worker{}) on the host; PHP-FPM per tenant (pm = static, {} workers) started with `corral run --detach` inside its sandbox and cgroup; clients: h2load --h1 -D {} in one network namespace each (veth pair, own /30 in 198.18.0.0/15){}",
        server_cpu.map(|c| format!(", CPU {c}, like the tenant inits and their PHP-FPM")).unwrap_or_default(),
        web::FPM_CHILDREN,
        sizes.duration_s,
        client_cpu.map(|c| format!(", pinned to CPU {c}")).unwrap_or_default()
    ));
    ctx.results.add_note(format!(
        "neighbours: `{}` = a `[limits] cpu = \"{}%\"` override per tenant applied live with `corral limits reload`; `no limits` = the bench profile (CPU quota never binding; each tenant's cgroup still has the default CPU weight)",
        cap.label(),
        match cap { Limits::Cpu(p) => p, Limits::None => 0 }
    ));
    ctx.results.add_note(
        "neighbours: static pages are served by the shared nginx on the host, outside every tenant's cgroup: tenant CPU limits cannot shape them; PHP runs in the tenants' cgroups",
    );
    stopped.map_or(Ok(()), Err)
}

/// Before any load: every site answers its static page and its PHP page
/// from inside its tenant's sandbox (phpinfo's host name is the sandbox's),
/// the pools run in the tenants' cgroups, and each client namespace reaches
/// nginx.
fn check(ctx: &mut Ctx, stage: &Stage) -> Result<()> {
    let fail = |m: String| BenchError::suite("neighbours", m);
    let addr = SocketAddrV4::new(stage.nets.nets[0].host_ip, stage.port);
    for s in &stage.sites {
        let page = web::get(addr, &s.host, web::STATIC_PATH).map_err(fail)?;
        if !page.contains(&format!("Welcome to {}", s.name)) {
            return Err(fail(format!(
                "{}: the static page is not {}'s",
                s.host, s.name
            )));
        }
        let php = web::get(addr, &s.host, web::PHP_PATH)
            .map_err(|e| fail(format!("{e} ({})", sys::log_tail(&s.fpm_log(), 2))))?;
        let host = web::phpinfo_hostname(&php);
        if host.as_deref() != Some(s.tenant.name.as_str()) {
            return Err(fail(format!(
                "{}: phpinfo() reports host name {host:?}, not the sandbox's {:?}: PHP-FPM is not in the tenant's sandbox",
                s.host, s.tenant.name
            )));
        }
    }
    let names: Vec<String> = stage.sites.iter().map(|s| s.tenant.name.clone()).collect();
    let counters = sample::tenant_counters(&ctx.env, &names)?;
    for n in &names {
        let p = counters.get(n).map(|c| c.processes).unwrap_or(0);
        // The init, PHP-FPM's master and its workers.
        if p < u64::from(web::FPM_CHILDREN) + 2 {
            return Err(fail(format!(
                "{n}: {p} processes in the tenant's cgroup; PHP-FPM's pool is not there"
            )));
        }
    }
    ctx.results.add_note(format!(
        "neighbours: checked before the load: each site's phpinfo() names its sandbox's host name, and each tenant's cgroup holds its init, PHP-FPM master and {} workers",
        web::FPM_CHILDREN
    ));
    for (k, n) in stage.nets.nets.iter().enumerate() {
        let mut argv = stage.nets.exec_prefix(k);
        argv.extend([
            crate::suites::arg(&tools::H2LOAD.find().unwrap_or_else(|| "h2load".into())),
            "--h1".into(),
            "-n".into(),
            "2".into(),
            "-c".into(),
            "1".into(),
            "-H".into(),
            format!(":authority: {}", stage.sites[0].host),
            format!("http://{}:{}{}", n.host_ip, stage.port, web::STATIC_PATH),
        ]);
        let mut c = std::process::Command::new(&argv[0]);
        c.args(&argv[1..]);
        let limit = Duration::from_secs(20);
        let f = sys::run_bounded(&mut c, limit, Output::Capture)?;
        sys::check_interrupt()?;
        match h2load::parse_summary(&f.stdout) {
            Ok(s) if s.failure().is_none() && s.requests.succeeded == 2 => {}
            Ok(s) => {
                return Err(fail(format!(
                    "client {}: {}",
                    n.ns,
                    s.failure().unwrap_or_default()
                )))
            }
            Err(_) => return Err(fail(format!("client {}: {}", n.ns, f.describe(limit)))),
        }
    }
    Ok(())
}

/// One test in one limits mode: every client at once, the sampler around
/// them, tenant counters before and after.
fn run_test(
    ctx: &mut Ctx,
    stage: &Stage,
    c: Content,
    test: &Test,
    duration_s: u64,
    l: Limits,
) -> Result<Measured> {
    let names: Vec<String> = stage.sites.iter().map(|s| s.tenant.name.clone()).collect();
    let mut specs = Vec::new();
    for (k, (site, users)) in test.clients.iter().enumerate() {
        let n = &stage.nets.nets[k];
        let s = &stage.sites[*site];
        let log = stage.logs.path().join(format!("client{k}.log"));
        let _ = std::fs::remove_file(&log); // h2load appends
        specs.push((
            *site,
            load::ClientSpec {
                netns: stage.nets.exec_prefix(k),
                url: format!("http://{}:{}{}", n.host_ip, stage.port, c.path()),
                host: s.host.clone(),
                users: *users,
                log,
            },
        ));
    }
    let before = sample::tenant_counters(&ctx.env, &names)?;
    let t0 = std::time::Instant::now();
    let nginx0 = sample::tree_cpu_s(stage.nginx.pid);
    let sampler = sample::Sampler::start();
    let limit = load::limit(duration_s) + Duration::from_secs(30);
    let mut running = Vec::new();
    for (_, spec) in &specs {
        let argv = load::argv(spec, duration_s, stage.client_cpu);
        let mut cmd = std::process::Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        running.push(sys::spawn_bounded(&mut cmd, limit, Output::Capture)?);
    }
    let mut finished = Vec::new();
    for r in running {
        finished.push(r.wait()?);
    }
    let server = sampler.stop(stage.server_cpu, stage.client_cpu);
    let nginx_cpu_pct =
        (sample::tree_cpu_s(stage.nginx.pid) - nginx0) / server.wall_s.max(1e-9) * 100.0;
    let after = sample::tenant_counters(&ctx.env, &names)?;
    let wall = t0.elapsed().as_secs_f64();
    sys::check_interrupt()?;
    let mut m = Measured {
        hosts: BTreeMap::new(),
        client_cpu: BTreeMap::new(),
        server,
        nginx_cpu_pct,
        tenant_cpu: BTreeMap::new(),
        notes: Vec::new(),
    };
    for n in &names {
        let (a, b) = (
            before.get(n).copied().unwrap_or_default(),
            after.get(n).copied().unwrap_or_default(),
        );
        let pct = b.cpu_usage_ns.saturating_sub(a.cpu_usage_ns) as f64 / 1e9 / wall * 100.0;
        m.tenant_cpu.insert(
            n.clone(),
            (pct, b.throttled_periods.saturating_sub(a.throttled_periods)),
        );
    }
    for ((site, spec), f) in specs.iter().zip(&finished) {
        *m.client_cpu.entry(*site).or_default() += f.cpu.as_secs_f64();
        match load::parse_client(spec.users, &f.stdout, &spec.log) {
            Ok(run) => m.hosts.entry(*site).or_default().push(run),
            Err(e) => m.notes.push(format!(
                "{} client ({} users): {}",
                stage.sites[*site].host,
                spec.users,
                if f.success() {
                    e.to_string()
                } else {
                    f.describe(load::limit(duration_s))
                }
            )),
        }
        let _ = std::fs::remove_file(&spec.log);
    }
    let victim = m
        .hosts
        .get(&0)
        .map(|r| host_figures(&r.iter().collect::<Vec<_>>()));
    let step = format!("neighbours {} {} ({})", c.name(), test.name, l.label());
    ctx.progress.step_done(&match victim {
        Some(v) => format!(
            "{step}: site1 {:.0} trans/s, {:.2} % available",
            v.trans_per_s, v.availability
        ),
        None => format!("{step}: site1 failed"),
    });
    Ok(m)
}

/// The per-tenant `[limits]` overrides written for the capped mode
/// (`<config>/tenants/NAME.toml`); removed on drop.
struct Overrides {
    dir: PathBuf,
    written: Vec<PathBuf>,
    current: Limits,
}

impl Overrides {
    fn new(env: &BenchEnv) -> Overrides {
        Overrides {
            dir: env.config_dir.join("tenants"),
            written: Vec::new(),
            current: Limits::None,
        }
    }

    /// Write (or remove) every tenant's override, then `corral limits
    /// reload` them: the running cgroups change at once.
    fn apply(&mut self, env: &BenchEnv, sites: &[web::Site], l: Limits) -> Result<()> {
        if l == self.current {
            return Ok(());
        }
        std::fs::create_dir_all(&self.dir).map_err(|e| BenchError::io(&self.dir, e))?;
        for s in sites {
            let p = self.dir.join(format!("{}.toml", s.tenant.name));
            match l {
                Limits::Cpu(pct) => {
                    std::fs::write(
                        &p,
                        format!("# corral-bench neighbours\n[limits]\ncpu = \"{pct}%\"\n"),
                    )
                    .map_err(|e| BenchError::io(&p, e))?;
                    self.written.push(p);
                }
                Limits::None => {
                    let _ = std::fs::remove_file(&p);
                }
            }
        }
        let mut c = env.corral_cmd();
        c.args(["limits", "reload"])
            .args(sites.iter().map(|s| &s.tenant.name));
        sys::run_ok(
            &mut c,
            Duration::from_secs(30),
            "neighbours",
            "corral limits reload",
        )?;
        self.current = l;
        Ok(())
    }
}

impl Drop for Overrides {
    fn drop(&mut self) {
        for p in self.written.drain(..) {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Host rows per (content, test, limits), then one summary table per
/// content: total rate, Jain, retention, server CPU and memory.
fn push_rows(
    rs: &mut ResultSet,
    sites: &[web::Site],
    sizes: Sizes,
    modes: &[Limits],
    mut got: BTreeMap<(Content, &'static str, Limits), Measured>,
) {
    use Better::*;
    // The victim's rate alone, per content and limits (retention's base).
    let alone: BTreeMap<(Content, Limits), f64> = got
        .iter()
        .filter(|((_, t, _), _)| *t == ONE_HOST)
        .filter_map(|((c, _, l), m)| {
            Some((
                (*c, *l),
                host_figures(&m.hosts.get(&0)?.iter().collect::<Vec<_>>()).trans_per_s,
            ))
        })
        .collect();
    for c in Content::ALL {
        let mut summary: Vec<Row> = Vec::new();
        for test in tests(sizes) {
            for &l in modes {
                let base = alone.get(&(c, l)).copied();
                let Some(m) = got.remove(&(c, test.name, l)) else {
                    continue;
                };
                let total_cpu: f64 = m.tenant_cpu.values().map(|v| v.0).sum();
                let mut rates = Vec::new();
                let mut victim_retention = None;
                let mut hosts: Vec<usize> = test.clients.iter().map(|x| x.0).collect();
                hosts.dedup();
                for site in hosts {
                    let s = &sites[site];
                    let mut smp = Samples::new();
                    let runs = m
                        .hosts
                        .get(&site)
                        .map(|v| v.iter().collect::<Vec<_>>())
                        .unwrap_or_default();
                    let users: u64 = test
                        .clients
                        .iter()
                        .filter(|x| x.0 == site)
                        .map(|x| x.1)
                        .sum();
                    smp.push(fig::USERS, "count", Higher, users as f64);
                    if !runs.is_empty() {
                        let f = host_figures(&runs);
                        push_host(&mut smp, &f);
                        rates.push(f.trans_per_s);
                        if test.name == NOISY && site == 0 {
                            victim_retention =
                                base.and_then(|b| stats::retention(f.trans_per_s, b));
                            if let Some(r) = victim_retention {
                                smp.push(fig::RETENTION, "ratio", Higher, r);
                            }
                        }
                    } else {
                        rates.push(0.0);
                    }
                    if let Some(cs) = m.client_cpu.get(&site) {
                        let pct = cs / sizes.duration_s.max(1) as f64 * 100.0;
                        smp.push(fig::CLIENT_CPU, "%", Lower, pct);
                    }
                    if let Some(&(pct, thr)) = m.tenant_cpu.get(&s.tenant.name) {
                        smp.push(fig::TENANT_CPU, "%", Higher, pct);
                        // A share of next to nothing (static pages: nginx
                        // does the work) would only show noise.
                        if total_cpu >= MIN_SHARE_BASE {
                            smp.push(fig::TENANT_SHARE, "%", Higher, pct / total_cpu * 100.0);
                        }
                        smp.push(fig::THROTTLED, "count", Lower, thr as f64);
                    }
                    let mut row =
                        smp.into_row(SUITE, &test_name(c, test.name), &mode_name(&s.name, l));
                    if runs.is_empty() {
                        row = row.with_note("no client result");
                    }
                    if site == 0 && test.name == NOISY {
                        row = row.with_note("victim");
                    }
                    rs.push(row);
                }
                let mut smp = Samples::new();
                smp.push(fig::TOTAL_RATE, "trans/s", Higher, rates.iter().sum());
                // Every tenant has the same plan: equal fair shares.
                if rates.len() >= 2 {
                    if let Some(j) = stats::jain_fairness_equal(&rates) {
                        smp.push(fig::JAIN, "index", Higher, j);
                    }
                }
                if let Some(r) = victim_retention {
                    smp.push(fig::RETENTION, "ratio", Higher, r);
                }
                let sv = &m.server;
                smp.push(fig::CPU_USER, "%", Lower, sv.all.user);
                smp.push(fig::CPU_SYSTEM, "%", Lower, sv.all.system);
                smp.push(fig::CPU_STEAL, "%", Lower, sv.all.steal);
                smp.push(fig::CPU_IDLE, "%", Higher, sv.all.idle);
                if let Some(s) = sv.server {
                    smp.push(fig::SERVER_BUSY, "%", Lower, 100.0 - s.idle - s.iowait);
                }
                let client_busy = sv.client.map(|s| 100.0 - s.idle - s.iowait);
                if let Some(b) = client_busy {
                    smp.push(fig::CLIENT_BUSY, "%", Lower, b);
                }
                smp.push(fig::NGINX_CPU, "%", Lower, m.nginx_cpu_pct);
                smp.push(fig::TENANTS_CPU, "%", Lower, total_cpu);
                if let Some(mem) = sv.mem_used_mib {
                    smp.push(fig::MEM_USED, "MiB", Lower, mem);
                }
                let mut row = smp.into_row(SUITE, &test_name(c, SUMMARY), &mode_name(test.name, l));
                for n in m.notes {
                    row = row.with_note(n);
                }
                if let Some(b) = client_busy.filter(|b| *b >= CLIENT_SATURATED) {
                    row = row.with_note(format!(
                        "the clients' CPU was {b:.0} % busy: the load was limited by the clients as much as by the server"
                    ));
                }
                summary.push(row);
            }
        }
        for r in summary {
            rs.push(r);
        }
    }
}

fn push_host(smp: &mut Samples, f: &HostFigures) {
    use Better::*;
    smp.push(
        siege::fig::TRANSACTIONS,
        "hits",
        Higher,
        f.transactions as f64,
    );
    smp.push(siege::fig::AVAILABILITY, "%", Higher, f.availability);
    if let Some(v) = f.mean_ms {
        smp.push(siege::fig::RESPONSE_TIME_MS, "ms", Lower, v);
    }
    if let Some(v) = f.p99_ms {
        smp.push(h2load::fig::P99_MS, "ms", Lower, v);
    }
    smp.push(siege::fig::TRANS_PER_S, "trans/s", Higher, f.trans_per_s);
    smp.push(
        siege::fig::THROUGHPUT_MB_S,
        "MB/s",
        Higher,
        f.throughput_mb_s,
    );
    if let Some(v) = f.longest_ms {
        smp.push(siege::fig::LONGEST_MS, "ms", Lower, v);
    }
    smp.push(siege::fig::FAILED, "transactions", Lower, f.failed as f64);
}

/// Headline lines: per content and limits, the victim's retention and
/// availability under the noisy neighbour, and Jain's index of 3 hosts and
/// of the noisy test.
pub fn headline(rs: &ResultSet) -> Vec<[String; 5]> {
    let mut out = Vec::new();
    let modes: Vec<String> = {
        let mut v: Vec<String> = Vec::new();
        for r in rs.suite_rows(SUITE) {
            if let Some((_, l)) = r.mode.split_once(" · ") {
                if !v.iter().any(|x| x == l) {
                    v.push(l.to_string());
                }
            }
        }
        v
    };
    for c in Content::ALL {
        for l in &modes {
            let sum = |t: &str| rs.row(SUITE, &test_name(c, SUMMARY), &format!("{t} · {l}"));
            let victim = rs.row(SUITE, &test_name(c, NOISY), &format!("site1 · {l}"));
            let ret = sum(NOISY).and_then(|r| r.median(fig::RETENTION));
            let avail = victim.and_then(|r| r.median(siege::fig::AVAILABILITY));
            let j3 = sum("3 hosts").and_then(|r| r.median(fig::JAIN));
            let jn = sum(NOISY).and_then(|r| r.median(fig::JAIN));
            if ret.is_none() && avail.is_none() && j3.is_none() && jn.is_none() {
                continue; // not measured (interrupted)
            }
            let val = match ret {
                Some(r) => format!("victim keeps {} of its rate", fmt_ratio(r)),
                None => "victim: no result".into(),
            };
            let fmt =
                |v: Option<f64>, u: &str| v.map(|x| fmt_value(x, u)).unwrap_or_else(|| "–".into());
            out.push([
                SUITE.to_string(),
                test_name(c, NOISY),
                l.clone(),
                val,
                format!(
                    "victim availability {} %, Jain 3 hosts {}, noisy {}",
                    fmt(avail, "%"),
                    fmt(j3, ""),
                    fmt(jn, "")
                ),
            ]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_articles_four_tests() {
        let t = tests(sizes(Level::Full));
        assert_eq!(t.len(), 4);
        assert_eq!(t[0].clients, vec![(0, 100)]);
        assert_eq!(t[2].clients, vec![(0, 100), (1, 100), (2, 100)]);
        // The victim with 100 users, the second host with 2 × 500.
        assert_eq!(t[3].clients, vec![(0, 100), (1, 500), (1, 500)]);
        assert_eq!(sizes(Level::Full).duration_s, 300);
        assert!(sizes(Level::Quick).duration_s <= 10);
        assert!(sizes(Level::Smoke).duration_s <= 2);
    }

    #[test]
    fn names() {
        assert_eq!(test_name(Content::Php, NOISY), "php: noisy neighbour");
        assert_eq!(mode_name("site1", Limits::Cpu(25)), "site1 · cpu 25%");
        assert_eq!(mode_name("3 hosts", Limits::None), "3 hosts · no limits");
    }

    /// The article's own numbers through the formulas the suite uses.
    #[test]
    fn retention_and_jain_on_the_articles_numbers() {
        // Test 4 static: victim 283.73 trans/s under noise, 2326.62 alone.
        let r = stats::retention(283.73, 2326.62).unwrap();
        assert!((r - 0.1219).abs() < 1e-4, "{r}");
        // Test 3 PHP: 152.23, 158.61, 104.14 trans/s on three equal plans.
        let j = stats::jain_fairness_equal(&[152.23, 158.61, 104.14]).unwrap();
        assert!((j - 0.9700).abs() < 1e-4, "{j}");
        // Test 4 PHP: the victim (79.84) against the noisy host's two
        // clients added up (186.46 + 127.35): far from fair.
        let j = stats::jain_fairness_equal(&[79.84, 186.46 + 127.35]).unwrap();
        assert!((j - 0.7390).abs() < 1e-4, "{j}");
    }

    #[test]
    fn rows_carry_retention_and_jain() {
        let site = |i: usize, name: &str| web::Site {
            name: format!("site{}", i + 1),
            host: format!("site{}.test", i + 1),
            tenant: Tenant {
                name: name.into(),
                uid: 1,
                gid: 1,
                home: "/h".into(),
            },
            root: "/h/www".into(),
            fpm: "/h/fpm".into(),
        };
        let sites = vec![site(0, "a"), site(1, "b"), site(2, "c")];
        let s = sizes(Level::Smoke);
        let run = |rps: f64| ClientRun {
            users: 10,
            summary: h2load::H2loadSummary {
                finished_s: 2.0,
                req_per_s: rps,
                requests: h2load::Requests {
                    total: (rps * 2.0) as u64,
                    succeeded: (rps * 2.0) as u64,
                    ..Default::default()
                },
                ..Default::default()
            },
            log: vec![],
        };
        let measured = |hosts: Vec<(usize, Vec<f64>)>| Measured {
            hosts: hosts
                .into_iter()
                .map(|(i, r)| (i, r.into_iter().map(run).collect()))
                .collect(),
            client_cpu: BTreeMap::new(),
            server: sample::ServerSample::default(),
            nginx_cpu_pct: 10.0,
            tenant_cpu: [("a".to_string(), (30.0, 0)), ("b".to_string(), (10.0, 5))]
                .into_iter()
                .collect(),
            notes: vec![],
        };
        let mut got = BTreeMap::new();
        got.insert(
            (Content::Php, ONE_HOST, Limits::None),
            measured(vec![(0, vec![200.0])]),
        );
        got.insert(
            (Content::Php, NOISY, Limits::None),
            measured(vec![(0, vec![50.0]), (1, vec![100.0, 50.0])]),
        );
        let mut rs = ResultSet::new(crate::Machine::detect(&[]), true);
        push_rows(&mut rs, &sites, s, &[Limits::None], got);
        let v = rs
            .row(SUITE, "php: noisy neighbour", "site1 · no limits")
            .unwrap();
        assert_eq!(v.median(fig::RETENTION), Some(0.25));
        assert_eq!(v.median(fig::TENANT_SHARE), Some(75.0));
        let n = rs
            .row(SUITE, "php: noisy neighbour", "site2 · no limits")
            .unwrap();
        assert_eq!(n.median(siege::fig::TRANS_PER_S), Some(150.0));
        assert_eq!(n.median(fig::USERS), Some(2.0 * s.noisy_users as f64));
        let sum = rs
            .row(SUITE, "php: summary", "noisy neighbour · no limits")
            .unwrap();
        // (50 + 150)² / (2 · (50² + 150²)) = 0.8
        assert!((sum.median(fig::JAIN).unwrap() - 0.8).abs() < 1e-12);
        assert_eq!(sum.median(fig::RETENTION), Some(0.25));
        assert_eq!(sum.median(fig::TOTAL_RATE), Some(200.0));
        let h = headline(&rs);
        assert!(
            h.iter()
                .any(|l| l[1] == "php: noisy neighbour" && l[3].contains("×0.25")),
            "{h:?}"
        );
    }
}
