//! `micro` (seed article 004, UnixBench in lx zones vs native): the
//! UnixBench system tests, rewritten in `bench/c/ubench.c`, run natively,
//! natively under the seccomp floor (a one-instruction allow-all filter,
//! `bench/c/floor-exec.c`: what any seccomp filter costs, the part of
//! corral's difference to native that is the kernel's), inside a corral
//! sandbox (`corral run`) and inside bubblewrap, each with 1 copy and with
//! N copies at once (N = CPUs; scores add up, as UnixBench's do). The table
//! is the article's: native score, sandbox score, diff %.
//!
//! Every mode runs as the first tenant in a directory of its home (the file
//! copy tests write there), pinned with `taskset`: one copy on the last CPU,
//! copy i of N on CPU i. Tests, copies and modes are interleaved: each
//! repetition runs every test for every copy count in every mode, the mode
//! order rotating.

use std::process::Command;
use std::time::Duration;

use crate::error::{BenchError, Result};
use crate::results::{Better, Samples};
use crate::suites::contenders::{self, mode};
use crate::suites::sys::{self, Output};
use crate::suites::{arg, cbuild, cpus, tools, Ctx, Level, Options};

pub const SUITE: &str = "micro";

/// Figure names: the score with 1 copy and with one copy per CPU.
pub mod fig {
    pub const SINGLE: &str = "single";
    pub const PARALLEL: &str = "parallel";
}

/// UnixBench's test durations: (short, long, shell) in milliseconds.
fn durations(level: Level) -> (u64, u64, u64) {
    level.pick((10_000, 30_000, 60_000), (500, 750, 1_500), (100, 100, 300))
}

/// Full runs are long enough for one; short quick runs need a median.
/// [`REPS_ENV`] asks for more (1..=50).
fn reps(level: Level) -> usize {
    std::env::var(REPS_ENV)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| (1..=50).contains(n))
        .unwrap_or_else(|| level.pick(1, 2, 1))
}

/// Environment variable: repetitions of every test (1..=50), e.g. many
/// short samples of one test chosen with [`TESTS_ENV`].
pub const REPS_ENV: &str = "CORRAL_BENCH_MICRO_REPS";

/// Environment variable choosing some tests: comma-separated prefixes of
/// their UnixBench names, any case (`shell scripts (1,pipe`).
pub const TESTS_ENV: &str = "CORRAL_BENCH_MICRO_TESTS";

/// [`tests`], or those [`TESTS_ENV`] names.
fn chosen_tests(level: Level) -> Vec<(&'static str, Vec<String>, u64)> {
    pick_tests(tests(level), std::env::var(TESTS_ENV).ok().as_deref())
}

/// The tests whose name starts with one of `spec`'s comma-separated
/// prefixes (any case); all of them when `spec` names none.
fn pick_tests<T>(
    mut v: Vec<(&'static str, T, u64)>,
    spec: Option<&str>,
) -> Vec<(&'static str, T, u64)> {
    let prefixes: Vec<String> = spec
        .unwrap_or("")
        .split(',')
        .map(|n| n.trim().to_lowercase())
        .filter(|n| !n.is_empty())
        .collect();
    if !prefixes.is_empty() {
        v.retain(|(name, ..)| {
            let name = name.to_lowercase();
            prefixes.iter().any(|p| name.starts_with(p.as_str()))
        });
    }
    v
}

/// (UnixBench name, ubench arguments after the duration, duration class).
fn tests(level: Level) -> Vec<(&'static str, Vec<String>, u64)> {
    let (short, long, shell) = durations(level);
    let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        ("Execl Throughput", a(&["execl"]), long),
        (
            "File Copy 1024 bufsize 2000 maxblocks",
            a(&["fcopy", "@", "1024", "2000"]),
            long,
        ),
        (
            "File Copy 256 bufsize 500 maxblocks",
            a(&["fcopy", "@", "256", "500"]),
            long,
        ),
        (
            "File Copy 4096 bufsize 8000 maxblocks",
            a(&["fcopy", "@", "4096", "8000"]),
            long,
        ),
        ("Pipe Throughput", a(&["pipe"]), short),
        ("Pipe-based Context Switching", a(&["context"]), short),
        ("Process Creation", a(&["spawn"]), long),
        (
            "Shell Scripts (1 concurrent)",
            a(&["shell", "@", "1"]),
            shell,
        ),
        (
            "Shell Scripts (8 concurrent)",
            a(&["shell", "@", "8"]),
            shell,
        ),
        ("System Call Overhead", a(&["syscall"]), short),
    ]
}

const MODES: [&str; 5] = [
    mode::NATIVE,
    mode::SECCOMP_FLOOR,
    mode::FLOOR_CGROUP,
    mode::CORRAL,
    mode::BUBBLEWRAP,
];

/// The tenant's limit files copied to the floor's cgroup (cgroup v1 and
/// v2 names; the CPU period before the quota).
const LIMIT_FILES: [&str; 6] = [
    "cpu.cfs_period_us",
    "cpu.cfs_quota_us",
    "cpu.max",
    "memory.limit_in_bytes",
    "memory.max",
    "pids.max",
];

/// A cgroup next to the tenant's (`<parent>/floor-cgroup`, the same depth)
/// in every hierarchy the tenant's is in, with the tenant's CPU, memory and
/// process limits: where the `floor-cgroup` mode runs. Its `cgroup.procs`
/// files; the cgroups go with the environment's parent at the end.
fn floor_cgroup(parent: &str, tenant: &str) -> Result<Vec<std::path::PathBuf>> {
    let theirs = format!("{parent}/{tenant}");
    let roots = crate::suites::scale::floor::cgroup_roots(&theirs);
    if roots.is_empty() {
        return Err(crate::error::BenchError::suite(
            SUITE,
            format!("no cgroup hierarchy holds the tenant's cgroup {theirs}"),
        ));
    }
    let mut procs = Vec::new();
    for root in roots {
        let d = root.join(parent).join(mode::FLOOR_CGROUP);
        if !d.is_dir() {
            std::fs::create_dir(&d).map_err(|e| crate::error::BenchError::io(&d, e))?;
        }
        for f in LIMIT_FILES {
            if let Ok(v) = std::fs::read_to_string(root.join(&theirs).join(f)) {
                let to = d.join(f);
                std::fs::write(&to, v.trim()).map_err(|e| crate::error::BenchError::io(&to, e))?;
            }
        }
        procs.push(d.join("cgroup.procs"));
    }
    Ok(procs)
}

pub fn steps(opts: &Options) -> u64 {
    (reps(opts.level) * chosen_tests(opts.level).len() * 2) as u64
}

/// ubench's result line: `ubench TEST SCORE UNIT ITER ELAPSED`.
pub fn parse_line(out: &str) -> Option<(f64, String)> {
    out.lines().rev().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() == 6 && f[0] == "ubench" {
            Some((f[2].parse().ok()?, f[3].to_string()))
        } else {
            None
        }
    })
}

struct Mode {
    name: &'static str,
    /// Why a peer contender was left out.
    failed: Option<String>,
}

pub fn run(ctx: &mut Ctx) -> Result<()> {
    let level = ctx.level();
    let chosen = chosen_tests(level);
    if chosen.is_empty() {
        let all: Vec<&str> = tests(level).into_iter().map(|(n, ..)| n).collect();
        return Err(BenchError::suite(
            SUITE,
            format!(
                "{TESTS_ENV} names no test; name prefixes of: {}",
                all.join(", ")
            ),
        ));
    }
    let t = ctx.env.tenants[0].clone();
    let n_copies = cpus();
    let build = ctx.work_dir("micro")?;
    let ubench_src = cbuild::compile(&ctx.cc, &cbuild::UBENCH, &build)?;
    let bin_dir = ctx.env.home_dir(&t, "bin")?;
    let ubench = bin_dir.join("ubench");
    ctx.env.install(&t, &ubench_src, &ubench, 0o755)?;
    let floor_src = cbuild::compile(&ctx.cc, &cbuild::FLOOR_EXEC, &build)?;
    let floor_exec = bin_dir.join("floor-exec");
    ctx.env.install(&t, &floor_src, &floor_exec, 0o755)?;
    let files = contenders::bwrap_prepare(&ctx.work_dir("micro/bwrap")?, &t)?;
    // The floor-cgroup mode: joins its cgroup as root, then drops to the
    // tenant (std's uid switch comes before any pre-exec hook).
    // The tenant up first (its cgroup and limits are what is copied).
    ctx.env.up(&t.name, None)?;
    let floor_procs = floor_cgroup(&ctx.env.cgroup_parent, &t.name)?;
    let setpriv = arg(&tools::SETPRIV.find().unwrap_or_else(|| "setpriv".into()));
    let bwrap = tools::BWRAP.find().unwrap_or_else(|| "bwrap".into());
    // Work directories: one per mode and copy.
    let mut dirs = Vec::new();
    for m in MODES {
        let mut v = Vec::new();
        for i in 0..n_copies.max(1) {
            v.push(ctx.env.home_dir(&t, &format!("micro/{m}/c{i}"))?);
        }
        dirs.push(v);
    }
    let (corral, global) = (ctx.env.corral.clone(), ctx.env.global_args());
    let taskset = arg(&tools::TASKSET.find().unwrap_or_else(|| "taskset".into()));
    // Every copy runs pinned: copy i on CPU i, a single copy on the last
    // CPU (like pidns). Unpinned, fork and pipe tests measure where the
    // scheduler puts parent and child, and whatever else the machine runs.
    let command = |m: &str, dir: &std::path::Path, cpu: usize, args: &[String]| -> Command {
        let mut argv = Vec::new();
        if m == mode::FLOOR_CGROUP {
            argv.extend([
                "/bin/sh".to_string(),
                "-c".into(),
                r#"for f in $CG_PROCS; do echo $$ > "$f" || exit 125; done; unset CG_PROCS; exec "$@""#
                    .into(),
                "sh".into(),
                setpriv.clone(),
                format!("--reuid={}", t.uid),
                format!("--regid={}", t.gid),
                "--clear-groups".into(),
            ]);
        }
        argv.extend([taskset.clone(), "-c".into(), cpu.to_string()]);
        argv.extend(match m {
            mode::CORRAL => contenders::corral_run_with(&corral, &global, &t, Some(dir)),
            mode::BUBBLEWRAP => contenders::bwrap(&bwrap, &t, &files, dir),
            mode::SECCOMP_FLOOR | mode::FLOOR_CGROUP => vec![arg(&floor_exec)],
            _ => vec![],
        });
        argv.push(ubench.display().to_string());
        argv.extend(args.iter().cloned());
        let mut c = Command::new(&argv[0]);
        c.args(&argv[1..])
            .current_dir(dir)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin");
        if m == mode::FLOOR_CGROUP {
            let list: Vec<String> = floor_procs
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            c.env("CG_PROCS", list.join(" "));
        } else if m != mode::CORRAL {
            sys::as_user(&mut c, t.uid, t.gid);
        }
        c
    };
    let mut modes: Vec<Mode> = MODES
        .iter()
        .map(|m| Mode {
            name: m,
            failed: None,
        })
        .collect();
    let mut samples: Vec<Vec<Samples>> = vec![vec![Samples::new(); MODES.len()]; chosen.len()];
    let mut notes: Vec<Vec<Vec<String>>> = vec![vec![Vec::new(); MODES.len()]; chosen.len()];
    for rep in 0..reps(level) {
        for (ti, (test, args, ms)) in chosen.iter().enumerate() {
            let ms = *ms;
            let args: Vec<String> = std::iter::once(args[0].clone())
                .chain(std::iter::once(ms.to_string()))
                .chain(args[1..].iter().filter(|a| *a != "@").cloned())
                .collect();
            let limit = Duration::from_millis(ms) + Duration::from_secs(120);
            for (copies, figure) in [(1usize, fig::SINGLE), (n_copies, fig::PARALLEL)] {
                let mut line = Vec::new();
                for k in 0..MODES.len() {
                    sys::check_interrupt()?;
                    let mi = (rep + ti + k) % MODES.len();
                    if modes[mi].failed.is_some() {
                        continue;
                    }
                    let m = modes[mi].name;
                    let mut running = Vec::new();
                    for (i, dir) in dirs[mi].iter().take(copies).enumerate() {
                        let cpu = if copies == 1 { n_copies - 1 } else { i };
                        running.push(sys::spawn_bounded(
                            &mut command(m, dir, cpu, &args),
                            limit,
                            Output::Capture,
                        )?);
                    }
                    let mut total = 0.0;
                    let mut unit = String::new();
                    let mut problem = None;
                    for r in running {
                        let f = r.wait()?;
                        match parse_line(&f.stdout) {
                            Some((score, u)) if f.success() => {
                                total += score;
                                unit = u;
                            }
                            _ => problem = Some(f.describe(limit)),
                        }
                    }
                    sys::check_interrupt()?;
                    match problem {
                        None => {
                            let better = Better::Higher;
                            samples[ti][mi].push(figure, &unit, better, total);
                            line.push(format!("{m} {total:.0} {unit}"));
                        }
                        Some(why) if m == mode::CORRAL => {
                            ctx.corral_failure(format!(
                                "micro {test} ({copies} copies) in corral: {why}"
                            ));
                            notes[ti][mi].push(format!("{copies} copies: failed: {why}"));
                        }
                        Some(why) => {
                            ctx.note(&format!("micro: {m} failed, left out: {why}"));
                            modes[mi].failed = Some(why);
                        }
                    }
                }
                ctx.progress
                    .step_done(&format!("micro {test} ×{copies}: {}", line.join(", ")));
            }
        }
    }
    for (ti, (test, _, _)) in chosen.iter().enumerate() {
        for (mi, m) in modes.iter().enumerate() {
            let mut row = std::mem::take(&mut samples[ti][mi]).into_row(SUITE, test, m.name);
            if let Some(why) = &m.failed {
                row = row.with_note(format!("failed: {why}"));
            }
            for n in notes[ti][mi].drain(..) {
                row = row.with_note(n);
            }
            ctx.results.push(row);
        }
    }
    let (short, long, shell) = durations(level);
    ctx.results.add_note(format!(
        "micro: bench/c/ubench.c as tenant {}, pinned with taskset (1 copy on the last CPU, copy i of N on CPU i) ({} s per pipe/context/syscall test, {} s per execl/file copy/process creation test, {} s per shell test); `single` = 1 copy, `parallel` = {n_copies} copies at once (scores summed)",
        t.name,
        short as f64 / 1e3,
        long as f64 / 1e3,
        shell as f64 / 1e3
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_result_line() {
        let out = "noise\nubench fcopy 359226.389 KBps 718553 0.500070\n";
        assert_eq!(parse_line(out), Some((359226.389, "KBps".to_string())));
        assert_eq!(
            parse_line("ubench: fcopy: create: Permission denied\n"),
            None
        );
        assert_eq!(parse_line(""), None);
    }

    #[test]
    fn every_unixbench_system_test_is_there() {
        let names: Vec<&str> = tests(Level::Full).iter().map(|t| t.0).collect();
        assert_eq!(names.len(), 10);
        assert!(names.contains(&"File Copy 256 bufsize 500 maxblocks"));
        assert!(names.contains(&"Shell Scripts (8 concurrent)"));
        // UnixBench's durations in full runs.
        let execl = &tests(Level::Full)[0];
        assert_eq!((execl.0, execl.2), ("Execl Throughput", 30_000));
    }

    #[test]
    fn tests_are_picked_by_name_prefixes_in_any_case() {
        let names = |spec| {
            pick_tests(tests(Level::Quick), spec)
                .into_iter()
                .map(|(n, ..)| n)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(Some("shell scripts (1, PIPE")),
            [
                "Pipe Throughput",
                "Pipe-based Context Switching",
                "Shell Scripts (1 concurrent)"
            ]
        );
        assert_eq!(names(None).len(), tests(Level::Quick).len());
        assert_eq!(names(Some(" , ")).len(), tests(Level::Quick).len());
        assert!(names(Some("nothing")).is_empty());
    }
}
