//! `cgi` (seed articles 000/001, OpenLiteSpeed "Performance Testing
//! Namespaces"): a trivial CGI program behind a web server, run per request
//! in each sandbox mode, loaded with h2load.
//!
//! Two setups on a machine with two CPUs or more. **Pinned** (tests
//! `small`, `large`, `php`): nginx (1 worker), the fcgiwrap pools, the
//! gateway, the tenant inits and so every CGI process are pinned to one CPU
//! with `taskset`; h2load to another, so the load generator does not steal
//! the server's CPU. **Unpinned** (the same tests named `small unpinned`,
//! ...): nothing pinned, as on a real server, where the scheduler places the
//! web server, the wrappers and the scripts. h2load's own CPU time is
//! recorded (`h2load_cpu_s`). Requests go round-robin to every tenant's copy
//! of the script (h2load takes several URIs).
//!
//! Modes: `bare` (fcgiwrap runs the script as the tenant), `bubblewrap`
//! (fcgiwrap as the tenant runs bwrap with a comparable rootfs, per
//! request), `nsenter-join` (fcgiwrap as root runs nsenter into the persisted
//! namespaces + setpriv), `corral-run` (fcgiwrap as root runs `corral run`),
//! `corral-gateway` (nginx talks FastCGI to `corral gateway`, which spawns
//! the script through the tenant init). fcgiwrap cannot run a wrapper
//! command itself, so the wrapped modes exec a static trampoline first
//! (bench/c/cgi-exec.c); bare fcgiwrap execs the script directly.

mod servers;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::error::{BenchError, Result};
use crate::h2load;
use crate::results::{Better, Samples};
use crate::suites::cbuild;
use crate::suites::contenders::{self, mode};
use crate::suites::env::Tenant;
use crate::suites::sys::{self, Output, Servers};
use crate::suites::{arg, cpus, tools, Ctx, Level, Options};
use servers::{Layout, Location};

pub const SUITE: &str = "cgi";

/// Figure: CPU time h2load itself used (user + system), seconds.
pub const H2LOAD_CPU_S: &str = "h2load_cpu_s";

/// One load test.
#[derive(Debug, Clone)]
pub struct Test {
    pub name: String,
    pub script: &'static str,
    pub requests: u64,
    pub clients: u64,
    pub streams: Option<u64>,
}

impl Test {
    fn args(&self) -> Vec<String> {
        let mut v = vec![
            "--h1".to_string(),
            "-n".into(),
            self.requests.to_string(),
            "-c".into(),
            self.clients.to_string(),
        ];
        if let Some(m) = self.streams {
            v.push("-m".into());
            v.push(m.to_string());
        }
        v
    }
}

const HELLO: &str = "helloworld";
const PHP: &str = "hello.php";

/// The article's sizes (small, large) and a PHP variant; quick is a tenth
/// (a 25th for large, whose bubblewrap runs dominate), smoke about a
/// hundred requests.
pub fn tests(level: Level) -> Vec<Test> {
    let t = |name: &str, script, requests, clients, streams| Test {
        name: name.to_string(),
        script,
        requests,
        clients,
        streams,
    };
    match level {
        Level::Full => vec![
            t("small", HELLO, 10_000, 10, None),
            t("large", HELLO, 100_000, 100, Some(10)),
            t("php", PHP, 2_000, 10, None),
        ],
        Level::Quick => vec![
            t("small", HELLO, 1_000, 10, None),
            t("large", HELLO, 4_000, 100, Some(10)),
            t("php", PHP, 200, 10, None),
        ],
        Level::Smoke => vec![
            t("small", HELLO, 100, 10, None),
            t("large", HELLO, 200, 20, Some(2)),
            t("php", PHP, 20, 4, None),
        ],
    }
}

/// Where the server side and h2load run.
struct Setup {
    /// Appended to the test names ("" for the pinned setup, whose names
    /// stay those of earlier results).
    suffix: &'static str,
    /// The work directory of its servers (sockets, logs, trampolines).
    dir: &'static str,
    server_cpu: Option<usize>,
    client_cpu: Option<usize>,
}

/// Pinned and unpinned with two CPUs or more; one unpinned setup under the
/// plain names on a single CPU (nothing to pin apart).
fn setups() -> Vec<Setup> {
    if cpus() < 2 {
        return vec![Setup {
            suffix: "",
            dir: "cgi",
            server_cpu: None,
            client_cpu: None,
        }];
    }
    vec![
        Setup {
            suffix: "",
            dir: "cgi",
            server_cpu: Some(0),
            client_cpu: Some(1),
        },
        Setup {
            suffix: " unpinned",
            dir: "cgi-u",
            server_cpu: None,
            client_cpu: None,
        },
    ]
}

/// The tests of one setup ([`TESTS_ENV`] may leave some out).
fn setup_tests(level: Level, setup: &Setup) -> Vec<Test> {
    let mut v = chosen_tests(level);
    for t in &mut v {
        t.name.push_str(setup.suffix);
    }
    v
}

/// Environment variable choosing some of the tests by their pinned names
/// (`large,php`), in both setups: more samples of one test in less time.
pub const TESTS_ENV: &str = "CORRAL_BENCH_CGI_TESTS";

fn chosen_tests(level: Level) -> Vec<Test> {
    let mut v = tests(level);
    if let Ok(names) = std::env::var(TESTS_ENV) {
        if !names.trim().is_empty() {
            v.retain(|t| names.split(',').any(|n| n.trim() == t.name));
        }
    }
    v
}

fn reps(level: Level) -> usize {
    level.pick(3, 2, 1)
}

/// Hard limit of one h2load run (it is started under `timeout` too).
fn limit(level: Level) -> Duration {
    Duration::from_secs(level.pick(3600, 600, 60))
}

/// Environment variable choosing some of the modes: `bare,corral-gateway`
/// (a quicker old-vs-new comparison of one contender against its peer).
pub const MODES_ENV: &str = "CORRAL_BENCH_CGI_MODES";

/// Whether `mode` runs: every mode, unless [`MODES_ENV`] names some.
fn selected(mode: &str) -> bool {
    match std::env::var(MODES_ENV) {
        Ok(v) if !v.trim().is_empty() => v.split(',').any(|m| m.trim() == mode),
        _ => true,
    }
}

pub fn steps(opts: &Options) -> u64 {
    let wrapped = WRAP_MODES.iter().filter(|(m, ..)| selected(m)).count();
    let modes =
        wrapped + usize::from(selected(mode::GATEWAY) && servers::gateway_available(&opts.corral));
    (chosen_tests(opts.level).len() * setups().len() * reps(opts.level) * modes) as u64
}

/// Environment variable setting the fcgiwrap workers per tenant and mode
/// (1–64). Default: 4 in all, at least 2 per tenant. Each worker runs one
/// script at a time, so this is the fcgiwrap peers' concurrency; the
/// gateway runs as many scripts as nginx sends (h2load's clients).
pub const WORKERS_ENV: &str = "CORRAL_BENCH_CGI_WORKERS";

fn fcgiwrap_workers(tenants: usize) -> Result<usize> {
    workers_from(std::env::var(WORKERS_ENV).ok().as_deref(), tenants).map_err(|message| {
        BenchError::Suite {
            suite: SUITE,
            message,
        }
    })
}

/// [`WORKERS_ENV`]'s value (unset or empty: the default) for `tenants`.
fn workers_from(value: Option<&str>, tenants: usize) -> std::result::Result<usize, String> {
    match value.map(str::trim) {
        None | Some("") => Ok((4 / tenants.max(1)).max(2)),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if (1..=64).contains(&n) => Ok(n),
            _ => Err(format!(
                "{WORKERS_ENV}={v:?}: expected a number of fcgiwrap workers per tenant from 1 to 64"
            )),
        },
    }
}

/// A mode and whether it is corral's own (its failures fail the run).
struct ModeState {
    name: String,
    corral: bool,
    failed: Option<String>,
}

/// Everything serving requests during the suite.
struct Stack {
    layout: Layout,
    /// Stopped together when dropped (before the tenants go down).
    #[allow(dead_code)] // held for its Drop
    servers: Servers,
    port: u16,
    modes: Vec<ModeState>,
    workers: usize,
}

/// fcgiwrap modes: (mode, fcgiwrap runs as the tenant, corral's own).
const WRAP_MODES: [(&str, bool, bool); 4] = [
    (mode::BARE, true, false),
    (mode::BUBBLEWRAP, true, false),
    (mode::NSENTER, false, false),
    (mode::CORRAL_RUN, false, true),
];

/// Per-test, per-mode samples and notes.
#[derive(Default)]
struct Collected {
    samples: BTreeMap<(String, String), Samples>,
    notes: BTreeMap<(String, String), Vec<String>>,
}

pub fn run(ctx: &mut Ctx) -> Result<()> {
    let level = ctx.level();
    if chosen_tests(level).is_empty() {
        let names: Vec<String> = tests(level).into_iter().map(|t| t.name).collect();
        return Err(BenchError::Suite {
            suite: SUITE,
            message: format!(
                "{TESTS_ENV}={:?} names none of the tests ({})",
                std::env::var(TESTS_ENV).unwrap_or_default(),
                names.join(", ")
            ),
        });
    }
    let tenants = ctx.env.tenants.clone();
    // A bad worker count fails here, before any sandbox is brought up.
    fcgiwrap_workers(tenants.len())?;
    let scripts = install_scripts(ctx, &tenants)?;
    for setup in setups() {
        // Fresh sandboxes whose init (and everything it spawns) is pinned
        // like the web server, or not at all.
        for t in &tenants {
            sys::check_interrupt()?;
            ctx.env.down(&t.name)?;
            ctx.env.up(&t.name, setup.server_cpu)?;
        }
        let mut stack = start_stack(ctx, &tenants, &scripts, &setup)?;
        check_modes(ctx, &mut stack, &tenants)?;
        let mut got = Collected::default();
        let tests = setup_tests(level, &setup);
        if let Some(first) = tests.first() {
            warm_up(ctx, &stack, first, &tenants, setup.client_cpu)?;
        }
        for test in &tests {
            for rep in 0..reps(level) {
                let n = stack.modes.len();
                for k in 0..n {
                    sys::check_interrupt()?;
                    load(
                        ctx,
                        &stack,
                        &stack.modes[(rep + k) % n],
                        test,
                        rep,
                        &tenants,
                        setup.client_cpu,
                        &mut got,
                    )?;
                }
            }
        }
        let (modes, workers) = (std::mem::take(&mut stack.modes), stack.workers);
        drop(stack); // stop nginx, fcgiwrap and the gateway before the tenants go down
        push_rows(ctx, &tests, &modes, &tenants, got);
        ctx.results.add_note(match (setup.server_cpu, setup.client_cpu) {
            (Some(s), Some(c)) => format!(
                "cgi: nginx (1 worker), fcgiwrap ({workers} workers per tenant and mode), the gateway, the tenant inits and every CGI process pinned to CPU {s} with taskset; h2load pinned to CPU {c}"
            ),
            _ if cpus() < 2 => "cgi: one CPU: server and h2load share it (no pinning)".to_string(),
            _ => format!(
                "cgi{}: nothing pinned: nginx (1 worker), fcgiwrap ({workers} workers per tenant and mode), the gateway, the tenant inits, the CGI processes and h2load on every CPU",
                setup.suffix
            ),
        });
    }
    ctx.results.add_note(
        "cgi: bare fcgiwrap execs the script itself; the other fcgiwrap modes exec a static trampoline (bench/c/cgi-exec.c) that execs their wrapper (fcgiwrap cannot take a wrapper command); corral-gateway spawns the script through the tenant init directly",
    );
    Ok(())
}

/// Tenant name → (helloworld, hello.php) in the tenant's home, owned by it.
type Scripts = BTreeMap<String, (PathBuf, PathBuf)>;

/// Compile the CGI program and install it and the PHP script in every
/// tenant's home.
fn install_scripts(ctx: &mut Ctx, tenants: &[Tenant]) -> Result<Scripts> {
    let bin = ctx.work_dir("cgi/bin")?;
    let hello_bin = cbuild::compile(&ctx.cc, &cbuild::HELLOWORLD, &bin)?;
    let php_cgi = tools::PHP_CGI
        .find()
        .unwrap_or_else(|| "/usr/bin/php-cgi".into());
    let mut scripts = Scripts::new();
    for t in tenants {
        let d = ctx.env.home_dir(t, "cgi-bin")?;
        let hello = d.join(HELLO);
        ctx.env.install(t, &hello_bin, &hello, 0o755)?;
        let php = d.join(PHP);
        let text = format!(
            "#!{}\n<?php\necho \"<html><body><h1>Hello, world!</h1></body></html>\\n\";\n",
            php_cgi.display()
        );
        ctx.env.write_file(t, &php, &text, 0o755)?;
        scripts.insert(t.name.clone(), (hello, php));
    }
    Ok(scripts)
}

/// The wrapper argv of an fcgiwrap mode for one script.
fn wrapper(ctx: &Ctx, m: &str, t: &Tenant, wd: &Path, bwrap_dir: &Path) -> Result<Vec<String>> {
    let find = |tool: tools::Tool| tool.find().unwrap_or_else(|| tool.name.into());
    Ok(match m {
        mode::BARE => vec![],
        mode::BUBBLEWRAP => {
            let files = contenders::bwrap_prepare(bwrap_dir, t)?;
            contenders::bwrap(&find(tools::BWRAP), t, &files, wd)
        }
        mode::NSENTER => contenders::nsenter_join(
            &ctx.env,
            &find(tools::NSENTER),
            &find(tools::SETPRIV),
            t,
            Some(wd),
        )?,
        _ => contenders::corral_run(&ctx.env, t, Some(wd)),
    })
}

/// Trampolines and fcgiwrap pools per (mode, tenant), the gateway, nginx.
fn start_stack(
    ctx: &mut Ctx,
    tenants: &[Tenant],
    scripts: &Scripts,
    setup: &Setup,
) -> Result<Stack> {
    let layout = Layout::create(ctx.work_dir(setup.dir)?, setup.server_cpu, tenants)?;
    let cgi_exec = cbuild::compile(&ctx.cc, &cbuild::CGI_EXEC, &ctx.work_dir("cgi/bin")?)?;
    let fcgiwrap = tools::FCGIWRAP.find().unwrap_or_else(|| "fcgiwrap".into());
    let bwrap_dir = ctx.work_dir("cgi/bwrap")?;
    let workers = fcgiwrap_workers(tenants.len())?;
    let mut servers = Servers::default();
    let mut locations = Vec::new();
    let location =
        |path: String, socket: PathBuf, script_filename: PathBuf, script: &Path| Location {
            path,
            socket,
            script_filename,
            document_root: script.parent().unwrap_or(Path::new("/")).to_path_buf(),
            extra: vec![],
        };
    let wrap_modes: Vec<_> = WRAP_MODES.iter().filter(|(m, ..)| selected(m)).collect();
    for &&(m, as_tenant, _) in &wrap_modes {
        for t in tenants {
            let (hello, php) = &scripts[&t.name];
            for script in [hello, php] {
                let wd = script.parent().unwrap_or(Path::new("/"));
                let prefix = wrapper(ctx, m, t, wd, &bwrap_dir)?;
                let name = script.file_name().and_then(|n| n.to_str()).unwrap_or("");
                // No wrapper (bare): fcgiwrap execs the script itself, as on
                // a server without any sandbox; wrappers need the trampoline.
                let exec_path = if prefix.is_empty() {
                    script.to_path_buf()
                } else {
                    servers::install_trampoline(&layout, &cgi_exec, m, t, script, &prefix)?;
                    layout.wrap(m, t, name)
                };
                locations.push(location(
                    Layout::url_path(m, t, name),
                    layout.socket(m, t),
                    exec_path,
                    script,
                ));
            }
            servers.push(servers::start_fcgiwrap(
                &layout, &fcgiwrap, m, t, as_tenant, workers,
            )?);
        }
    }
    let mut modes: Vec<ModeState> = wrap_modes
        .iter()
        .map(|(m, _, corral)| ModeState {
            name: m.to_string(),
            corral: *corral,
            failed: None,
        })
        .collect();
    if let Ok(v) = std::env::var(MODES_ENV) {
        ctx.results
            .add_note(format!("cgi: only the modes {MODES_ENV} names: {v}"));
    }
    if let Ok(v) = std::env::var(TESTS_ENV) {
        ctx.results
            .add_note(format!("cgi: only the tests {TESTS_ENV} names: {v}"));
    }
    if std::env::var(WORKERS_ENV).is_ok() {
        ctx.results.add_note(format!(
            "cgi: fcgiwrap workers per tenant and mode set by {WORKERS_ENV}: {workers}"
        ));
    }
    if !selected(mode::GATEWAY) {
        // Not asked for (CORRAL_BENCH_CGI_MODES).
    } else if servers::gateway_available(&ctx.env.corral) {
        let mut failed = None;
        match servers::start_gateway(&layout, &ctx.env.corral, &ctx.env.global_args()) {
            Ok(s) => servers.push(s),
            Err(BenchError::Interrupted) => return Err(BenchError::Interrupted),
            Err(e) => {
                let why = format!("{e}: {}", sys::log_tail(&layout.log("gateway"), 3));
                ctx.corral_failure(format!("cgi: corral-gateway did not start: {why}"));
                failed = Some(why);
            }
        }
        modes.push(ModeState {
            name: mode::GATEWAY.into(),
            corral: true,
            failed,
        });
        for t in tenants {
            let (hello, php) = &scripts[&t.name];
            for script in [hello, php] {
                let name = script.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let path = Layout::url_path(mode::GATEWAY, t, name);
                locations.push(location(
                    path,
                    layout.gateway_socket(),
                    script.clone(),
                    script,
                ));
            }
        }
    } else {
        ctx.results.add_note(
            "cgi: corral-gateway skipped: this corral has no `gateway` command (`corral gateway --help` failed)",
        );
        ctx.note("cgi: corral-gateway skipped (no `corral gateway` command in this build)");
    }
    let nginx = tools::NGINX.find().unwrap_or_else(|| "nginx".into());
    let (nginx_server, port) = servers::start_nginx(&layout, &nginx, &locations)?;
    servers.push(nginx_server);
    Ok(Stack {
        layout,
        servers,
        port,
        modes,
        workers,
    })
}

/// Every mode answers every script for every tenant before the load; a
/// contender that does not is left out (corral's own modes: a failure).
fn check_modes(ctx: &mut Ctx, stack: &mut Stack, tenants: &[Tenant]) -> Result<()> {
    for i in 0..stack.modes.len() {
        'mode: for t in tenants {
            for script in [HELLO, PHP] {
                sys::check_interrupt()?;
                let m = &stack.modes[i];
                if m.failed.is_some() {
                    break 'mode;
                }
                let path = Layout::url_path(&m.name, t, script);
                if let Err(e) = servers::check(stack.port, &path, "Hello, world!") {
                    let why = format!("{e} ({})", log_hint(&stack.layout, &m.name, t));
                    if m.corral {
                        ctx.corral_failure(format!("cgi: {}: {why}", m.name));
                    } else {
                        ctx.note(&format!("cgi: {} failed, left out: {why}", m.name));
                    }
                    stack.modes[i].failed = Some(why);
                    break 'mode;
                }
            }
        }
    }
    Ok(())
}

/// h2load for `test` against mode `m` (every tenant's copy of the script,
/// round-robin), pinned to the client CPU and under `timeout`.
fn h2load_cmd(
    stack: &Stack,
    m: &ModeState,
    test: &Test,
    tenants: &[Tenant],
    client_cpu: Option<usize>,
    lim: Duration,
    log: Option<&Path>,
) -> Command {
    let find = |tool: tools::Tool| arg(&tool.find().unwrap_or_else(|| tool.name.into()));
    let mut argv = vec![
        find(tools::TIMEOUT),
        "-k".into(),
        "5".into(),
        lim.as_secs().to_string(),
    ];
    if let Some(cpu) = client_cpu {
        argv.extend([find(tools::TASKSET), "-c".into(), cpu.to_string()]);
    }
    argv.push(find(tools::H2LOAD));
    argv.extend(test.args());
    if let Some(log) = log {
        argv.push(format!("--log-file={}", log.display()));
    }
    argv.extend(tenants.iter().map(|t| {
        format!(
            "http://127.0.0.1:{}{}",
            stack.port,
            Layout::url_path(&m.name, t, test.script)
        )
    }));
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..]);
    c
}

/// Requests of the unrecorded warm-up per mode and setup.
fn warm_up_requests(level: Level) -> u64 {
    level.pick(1_000, 500, 20)
}

/// One unrecorded h2load run of the first test's shape per mode (before the
/// measured runs of a setup), so that no mode's first measured sample pays
/// what a fresh server pays once: its first spawns, empty connection pools,
/// the files of the entry-process slots, cold caches. The quick small test
/// is only 1,000 requests (about half a second), so once-only costs were a
/// large share of whichever sample came first. A mode that fails here fails
/// in its measured runs, with the report.
fn warm_up(
    ctx: &Ctx,
    stack: &Stack,
    test: &Test,
    tenants: &[Tenant],
    client_cpu: Option<usize>,
) -> Result<()> {
    let warm = Test {
        requests: warm_up_requests(ctx.level()),
        ..test.clone()
    };
    let lim = limit(ctx.level());
    for m in stack.modes.iter().filter(|m| m.failed.is_none()) {
        sys::check_interrupt()?;
        let mut c = h2load_cmd(stack, m, &warm, tenants, client_cpu, lim, None);
        sys::run_bounded(&mut c, lim + Duration::from_secs(30), Output::Discard)?;
    }
    Ok(())
}

/// One h2load run of `test` against mode `m`: pinned to the client CPU,
/// under `timeout` and the watchdog; summary, latency from the log and
/// h2load's own CPU time go to `got`.
#[allow(clippy::too_many_arguments)]
fn load(
    ctx: &mut Ctx,
    stack: &Stack,
    m: &ModeState,
    test: &Test,
    rep: usize,
    tenants: &[Tenant],
    client_cpu: Option<usize>,
    got: &mut Collected,
) -> Result<()> {
    let key = (test.name.clone(), m.name.clone());
    if let Some(why) = &m.failed {
        ctx.progress
            .step_done(&format!("cgi {} {}: skipped ({why})", test.name, m.name));
        return Ok(());
    }
    let lim = limit(ctx.level());
    let log = ctx.work_dir("cgi/h2load")?.join(format!(
        "{}-{}-{rep}.log",
        test.name.replace(' ', "-"),
        m.name
    ));
    let mut c = h2load_cmd(stack, m, test, tenants, client_cpu, lim, Some(&log));
    let f = sys::run_bounded(&mut c, lim + Duration::from_secs(30), Output::Capture)?;
    sys::check_interrupt()?;
    let step = format!("cgi {} {} #{}", test.name, m.name, rep + 1);
    let problem = match h2load::parse_summary(&f.stdout) {
        Ok(summary) => {
            let entries = std::fs::read_to_string(&log)
                .ok()
                .and_then(|t| h2load::parse_log(&t).ok())
                .unwrap_or_default();
            let s = got.samples.entry(key.clone()).or_default();
            h2load::record(s, &summary, Some(&h2load::latency(&entries)));
            s.push(H2LOAD_CPU_S, "s", Better::Lower, f.cpu.as_secs_f64());
            let failed = summary
                .requests
                .total
                .saturating_sub(summary.requests.succeeded);
            ctx.progress.step_done(&format!(
                "{step}: {:.0} req/s, {failed} failed",
                summary.req_per_s
            ));
            match summary.failure() {
                None if summary.requests.succeeded == 0 => Some("no request succeeded".to_string()),
                other => other,
            }
        }
        Err(e) => {
            ctx.progress.step_done(&format!("{step}: failed"));
            Some(if f.success() {
                e.to_string()
            } else {
                f.describe(lim)
            })
        }
    };
    let _ = std::fs::remove_file(&log);
    if let Some(p) = problem {
        let p = format!(
            "run {}: {p} ({})",
            rep + 1,
            log_hint(&stack.layout, &m.name, &tenants[0])
        );
        if m.corral {
            ctx.corral_failure(format!("cgi {} {}: {p}", test.name, m.name));
        }
        got.notes.entry(key).or_default().push(p);
    }
    Ok(())
}

/// One row per (test, mode), in mode order, and the tests' notes.
fn push_rows(
    ctx: &mut Ctx,
    tests: &[Test],
    modes: &[ModeState],
    tenants: &[Tenant],
    mut got: Collected,
) {
    for test in tests {
        for m in modes {
            let key = (test.name.clone(), m.name.clone());
            let mut row = got
                .samples
                .remove(&key)
                .unwrap_or_default()
                .into_row(SUITE, &test.name, &m.name);
            if let Some(why) = &m.failed {
                row = row.with_note(format!("failed: {why}"));
            }
            for n in got.notes.remove(&key).unwrap_or_default() {
                row = row.with_note(n);
            }
            ctx.results.push(row);
        }
        ctx.results.add_note(format!(
            "cgi {}: h2load {} over {} tenant(s) round-robin, script {}",
            test.name,
            test.args().join(" "),
            tenants.len(),
            test.script
        ));
    }
}

/// Where to look when a mode fails.
fn log_hint(l: &Layout, mode: &str, t: &Tenant) -> String {
    let log = if mode == mode::GATEWAY {
        l.log("gateway")
    } else {
        l.log(&format!("fcgiwrap-{mode}-{}", t.name))
    };
    let err = sys::log_tail(&log, 2);
    let nginx = sys::log_tail(&l.dir.join("nginx/error.log"), 1);
    match (err.is_empty(), nginx.is_empty()) {
        (false, _) => err,
        (true, false) => format!("nginx: {nginx}"),
        _ => "no log output".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fcgiwrap_workers_default_to_four_in_all_and_take_a_bounded_count() {
        assert_eq!(workers_from(None, 2), Ok(2));
        assert_eq!(workers_from(None, 1), Ok(4));
        assert_eq!(workers_from(Some(" "), 3), Ok(2));
        assert_eq!(workers_from(Some("5"), 2), Ok(5));
        assert_eq!(workers_from(Some(" 64 "), 2), Ok(64));
        for bad in ["0", "65", "-1", "five", "2.5"] {
            let e = workers_from(Some(bad), 2).unwrap_err();
            assert!(e.contains(WORKERS_ENV) && e.contains(bad), "{e}");
        }
    }
}
