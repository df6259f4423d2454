//! `join`: what one exec costs in each contender. `/bin/true` is started N
//! times per mode, modes interleaved round-robin (rotating the order every
//! round), each exec timed from spawn to reap:
//!
//! * `bare` — exec as the tenant, no sandbox;
//! * `corral-run` — `corral run TENANT -- /bin/true` (setns per persisted
//!   namespace file, cgroup, seccomp, rlimits, drop privileges, exec);
//! * `c-wrapper` — bench/c/joinwrap.c, static glibc: setns into the init's
//!   namespace files, drop to the tenant, fork, exec (the floor for any
//!   wrapper);
//! * `c-wrapper-musl` — the same program linked with musl (`musl-gcc`, when
//!   installed): without glibc's start-up, which `corral` does not have
//!   either;
//! * `nsenter-join` — `nsenter` into the same persisted namespace files, then
//!   `setpriv` to the tenant (the OpenLiteSpeed-style join, no limits);
//! * `bubblewrap` — `bwrap` building a comparable rootfs at every exec;
//! * firejail / nsjail / minijail when installed.
//!
//! Also the one-time cost of `corral up` (tenant taken down between samples).

use std::process::Command;
use std::time::Duration;

use crate::error::{BenchError, Result};
use crate::results::{Better, Figure, Row};
use crate::stats;
use crate::suites::contenders::{self, mode};
use crate::suites::sys::{self, Output};
use crate::suites::{tools, Ctx, Level, Options};

pub const SUITE: &str = "join";
pub const TEST_EXEC: &str = "exec /bin/true";
pub const TEST_UP: &str = "corral up";

/// Figure names.
pub mod fig {
    pub const MS: &str = "ms";
    pub const P90_MS: &str = "p90_ms";
    pub const CPU_MS: &str = "cpu_ms";
    pub const FAILED: &str = "failed";
}

const CHUNKS: usize = 10;
const EXEC_LIMIT: Duration = Duration::from_secs(30);

fn execs(level: Level) -> usize {
    level.pick(500, 200, 20)
}

fn up_reps(level: Level) -> usize {
    level.pick(10, 5, 2)
}

pub fn steps(opts: &Options) -> u64 {
    CHUNKS.min(execs(opts.level)) as u64 + 1
}

struct Contender {
    mode: String,
    argv: Vec<String>,
    as_tenant: bool,
    /// Peer contender: its failures are recorded, not fatal.
    peer: bool,
    ms: Vec<f64>,
    cpu_ms: Vec<f64>,
    failures: usize,
    failed: Option<String>,
}

impl Contender {
    fn new(mode: &str, argv: Vec<String>, as_tenant: bool, peer: bool) -> Contender {
        Contender {
            mode: mode.into(),
            argv,
            as_tenant,
            peer,
            ms: Vec::new(),
            cpu_ms: Vec::new(),
            failures: 0,
            failed: None,
        }
    }

    fn command(&self, t: &crate::suites::env::Tenant) -> Command {
        let mut c = Command::new(&self.argv[0]);
        c.args(&self.argv[1..])
            .current_dir(&t.home)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin");
        if self.as_tenant {
            sys::as_user(&mut c, t.uid, t.gid);
        }
        c
    }

    /// The command line for the report, with long option lists elided.
    fn shown(&self) -> String {
        let mut v: Vec<&str> = Vec::new();
        let mut elided = false;
        for a in &self.argv {
            if a.starts_with("--ro-bind-try") || a.starts_with("/etc/") {
                if !elided {
                    v.push("…");
                    elided = true;
                }
                continue;
            }
            v.push(a);
        }
        let s = v.join(" ");
        if s.len() > 300 {
            format!("{}…", &s[..300])
        } else {
            s
        }
    }
}

pub fn run(ctx: &mut Ctx) -> Result<()> {
    let level = ctx.level();
    let t = ctx.env.tenants[0].clone();

    // One-time cost: corral up (down in between, not timed).
    let mut up_ms = Vec::new();
    for rep in 0..up_reps(level) {
        for tenant in ctx.env.tenants.clone() {
            sys::check_interrupt()?;
            if rep > 0 {
                ctx.env.down(&tenant.name)?;
            }
            up_ms.push(ctx.env.up(&tenant.name, None)?.as_secs_f64() * 1e3);
        }
    }
    let up_row = Row::new(SUITE, TEST_UP, mode::CORRAL)
        .with(fig::MS, Figure::from_samples("ms", Better::Lower, up_ms.clone()))
        .with_note(format!(
            "{} samples: `corral up` of {} tenant(s), each taken down (untimed) before the next sample",
            up_ms.len(),
            ctx.env.tenants.len()
        ));
    let up_ms_row = up_row.clone();
    ctx.results.push(up_row);
    ctx.progress.step_done(&format!(
        "join corral up: {:.1} ms median",
        up_ms_row.median(fig::MS).unwrap_or(f64::NAN)
    ));

    let mut cs = contenders(ctx, &t)?;
    // Warm up once each: page cache, dentries; a contender that cannot run
    // here is recorded as failed and left out.
    for c in cs.iter_mut() {
        let f = sys::run_bounded(&mut c.command(&t), EXEC_LIMIT, Output::Capture)?;
        if !f.success() {
            let why = f.describe(EXEC_LIMIT);
            if !c.peer {
                return Err(BenchError::suite(SUITE, format!("{}: {why}", c.shown())));
            }
            ctx.note(&format!("join: {} failed, left out: {why}", c.mode));
            c.failed = Some(why);
        }
    }

    let n = execs(level);
    let chunk = n.div_ceil(CHUNKS.min(n));
    for round in 0..n {
        sys::check_interrupt()?;
        let len = cs.len();
        for k in 0..len {
            let c = &mut cs[(round + k) % len];
            if c.failed.is_some() {
                continue;
            }
            let f = sys::run_bounded(&mut c.command(&t), EXEC_LIMIT, Output::Discard)?;
            if f.success() {
                c.ms.push(f.wall.as_secs_f64() * 1e3);
                c.cpu_ms.push(f.cpu.as_secs_f64() * 1e3);
            } else {
                sys::check_interrupt()?;
                let again = sys::run_bounded(&mut c.command(&t), EXEC_LIMIT, Output::Capture)?;
                let why = if again.success() {
                    f.describe(EXEC_LIMIT)
                } else {
                    again.describe(EXEC_LIMIT)
                };
                if !c.peer {
                    return Err(BenchError::suite(SUITE, format!("{}: {why}", c.shown())));
                }
                c.failures += 1;
                if c.failures >= 3 {
                    c.failed = Some(format!("failed {} times, last: {why}", c.failures));
                }
            }
        }
        if (round + 1) % chunk == 0 || round + 1 == n {
            let line: Vec<String> = cs
                .iter()
                .filter_map(|c| stats::median(&c.ms).map(|m| format!("{} {m:.2}", c.mode)))
                .collect();
            ctx.progress.step_done(&format!(
                "join {}/{n} rounds, ms/exec: {}",
                round + 1,
                line.join(", ")
            ));
        }
    }

    for c in cs {
        let mut row = Row::new(SUITE, TEST_EXEC, &c.mode).with_note(format!("`{}`", c.shown()));
        if !c.ms.is_empty() {
            let p90 = stats::percentile(&c.ms, 90.0).unwrap_or(f64::NAN);
            row = row
                .with(fig::MS, Figure::from_samples("ms", Better::Lower, c.ms))
                .with(fig::P90_MS, Figure::single("ms", Better::Lower, p90))
                .with(
                    fig::CPU_MS,
                    Figure::from_samples("ms", Better::Lower, c.cpu_ms),
                );
        }
        if c.failures > 0 {
            row = row.with(
                fig::FAILED,
                Figure::single("count", Better::Lower, c.failures as f64),
            );
        }
        if let Some(why) = c.failed {
            row = row.with_note(format!("failed: {why}"));
        }
        ctx.results.push(row);
    }
    ctx.results.add_note(format!(
        "join: {n} execs of /bin/true per mode as tenant {}, modes interleaved round-robin; wall time from spawn to reap, CPU time of the exec'd tree (wait4)",
        t.name
    ));
    Ok(())
}

fn contenders(ctx: &mut Ctx, t: &crate::suites::env::Tenant) -> Result<Vec<Contender>> {
    let nsenter = tools::NSENTER.find().unwrap_or_else(|| "nsenter".into());
    let setpriv = tools::SETPRIV.find().unwrap_or_else(|| "setpriv".into());
    let bwrap = tools::BWRAP.find().unwrap_or_else(|| "bwrap".into());
    let prog = "/bin/true".to_string();
    let mut cs = vec![Contender::new(mode::BARE, vec![prog.clone()], true, false)];
    let mut run = contenders::corral_run(&ctx.env, t, None);
    run.push(prog.clone());
    cs.push(Contender::new(mode::CORRAL_RUN, run, false, false));
    // The floor for any wrapper: a static C program that only setns()es into
    // the init's namespace files, drops to the tenant, forks and execs.
    let wrap = crate::suites::cbuild::compile(
        &ctx.cc,
        &crate::suites::cbuild::JOINWRAP,
        &ctx.work_dir("join-bin")?,
    )?;
    let mut cw = vec![
        wrap.display().to_string(),
        t.uid.to_string(),
        t.gid.to_string(),
    ];
    let ns_dir = ctx.env.ns_dir(&t.name)?;
    for name in ctx.env.namespaces(&t.name)? {
        cw.push(ns_dir.join(name).display().to_string());
    }
    cw.push("--".into());
    cw.push(prog.clone());
    match tools::MUSL_GCC.find() {
        Some(musl) => {
            let dir = ctx.work_dir("join-bin-musl")?;
            let musl_wrap =
                crate::suites::cbuild::compile(&musl, &crate::suites::cbuild::JOINWRAP, &dir)?;
            let mut argv = cw.clone();
            argv[0] = musl_wrap.display().to_string();
            cs.push(Contender::new(mode::C_WRAPPER_MUSL, argv, false, true));
        }
        None => ctx.results.add_note(format!(
            "join: {} not installed (Debian package {}): {} skipped",
            tools::MUSL_GCC.name,
            tools::MUSL_GCC.package,
            mode::C_WRAPPER_MUSL
        )),
    }
    cs.push(Contender::new(mode::C_WRAPPER, cw, false, false));
    let mut ns = contenders::nsenter_join(&ctx.env, &nsenter, &setpriv, t, Some(&t.home))?;
    ns.push(prog.clone());
    cs.push(Contender::new(mode::NSENTER, ns, false, true));
    let files = contenders::bwrap_prepare(&ctx.work_dir("bwrap")?, t)?;
    let mut bw = contenders::bwrap(&bwrap, t, &files, &t.home);
    bw.push(prog.clone());
    cs.push(Contender::new(mode::BUBBLEWRAP, bw, true, true));
    for tool in tools::OPTIONAL {
        match tool.find() {
            Some(p) => {
                let (m, mut argv, as_tenant) = contenders::optional(tool.name, &p, t);
                argv.push(prog.clone());
                cs.push(Contender::new(&m, argv, as_tenant, true));
            }
            None => {
                let msg = format!(
                    "join: {} not installed (Debian package {}): skipped",
                    tool.name, tool.package
                );
                ctx.results.add_note(msg);
            }
        }
    }
    Ok(cs)
}
