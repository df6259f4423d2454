//! `seccomp` (issue 15's target): what corral's seccomp filter costs per
//! system call, against the kernel's own seccomp entry cost. bench/c/seccomp.c
//! times a raw system call in a loop:
//!
//! | mode | the measuring process |
//! |---|---|
//! | `native` | on the host, no filter |
//! | `floor` | on the host, under a one-instruction allow-all filter: the kernel's seccomp entry, the floor any filter pays |
//! | `arg-floor` | on the host, under the smallest filter that checks the op's argument as corral's rule does (number, then argument, then allow): the floor of any filter that inspects arguments, which the kernel must run on every such call |
//! | `filter` | on the host, under corral's default filter as compiled into this corral-bench (no namespaces, no cgroup) |
//! | `corral` | the tenant's process under `corral run` with the profile's filter (plus the sandbox: pid namespace, cgroup) |
//! | `corral-old` | the same through another corral binary (`--corral-old`); the sandbox's init (started by `--corral`) compiles and installs the filter, so this is an older client under the current filter, not an older filter (compare programs with `seccomp --bpf FILE`) |
//!
//! Ops: `getppid`, `getpid` and 1-byte `read` of /dev/zero, which corral's
//! filter allows without looking at arguments (the kernel's action cache can
//! skip the program), and the calls whose argument the filter reads (the
//! program runs every time): `ioctl(-1, FIONREAD)`, `socket(AF_INET, 999,
//! 0)`, `personality(0xffffffff)` and `clone(CLONE_SIGHAND)` (allowed by the
//! filter, refused or answered at once by the kernel). Each op runs pinned
//! to the last CPU (`taskset`) and unpinned; modes are interleaved, rotating
//! each round.

use std::process::Command;
use std::time::Duration;

use crate::error::{BenchError, Result};
use crate::results::{Better, Samples};
use crate::suites::contenders::{self, mode};
use crate::suites::sys::{self, Output};
use crate::suites::{arg, cbuild, cpus, tools, Ctx, Level, Options};

pub const SUITE: &str = "seccomp";

/// Figure names (nanoseconds per call).
pub mod fig {
    pub const WALL_NS: &str = "wall_ns";
    pub const CPU_NS: &str = "cpu_ns";
}

/// Mode names of this suite (besides `native` and `corral`).
pub mod modes {
    pub const FLOOR: &str = "floor";
    pub const ARG_FLOOR: &str = "arg-floor";
    pub const FILTER: &str = "filter";
    pub const CORRAL_OLD: &str = "corral-old";
}

pub const OPS: [&str; 7] = [
    "getppid",
    "getpid",
    "read",
    "ioctl",
    "socket",
    "personality",
    "clone",
];

fn count(level: Level) -> u64 {
    level.pick(5_000_000, 1_000_000, 10_000)
}

fn rounds(level: Level) -> usize {
    level.pick(7, 5, 1)
}

pub fn steps(opts: &Options) -> u64 {
    (rounds(opts.level) * OPS.len() * 2) as u64
}

/// `seccomp OP COUNT WALL_NS CPU_NS MODE`: (wall, cpu, seccomp mode).
pub fn parse_line(out: &str) -> Option<(f64, f64, i32)> {
    out.lines().rev().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() == 6 && f[0] == "seccomp" {
            Some((f[3].parse().ok()?, f[4].parse().ok()?, f[5].parse().ok()?))
        } else {
            None
        }
    })
}

/// corral's default filter as the kernel's `struct sock_filter` array.
fn default_filter_bytes() -> Result<Vec<u8>> {
    let plan = corral_profile::plan::SeccompPlan::default_policy();
    let filter = corral_security::seccomp::build(&plan)
        .map_err(|e| BenchError::suite(SUITE, format!("compile the default filter: {e}")))?
        .ok_or_else(|| BenchError::suite(SUITE, "the default policy has no filter"))?;
    Ok(filter.to_bytes())
}

struct Mode {
    name: &'static str,
    /// Command prefix (empty: run the program directly).
    prefix: Vec<String>,
    /// Arguments before OP.
    flags: Vec<String>,
}

pub fn run(ctx: &mut Ctx) -> Result<()> {
    let level = ctx.level();
    let t = ctx.env.tenants[0].clone();
    let build = ctx.work_dir(SUITE)?;
    let prog_src = cbuild::compile(&ctx.cc, &cbuild::SECCOMP, &build)?;
    let prog = ctx.env.home_dir(&t, "bin")?.join("seccomp");
    ctx.env.install(&t, &prog_src, &prog, 0o755)?;
    let bpf = build.join("default.bpf");
    std::fs::write(&bpf, default_filter_bytes()?).map_err(|e| BenchError::io(&bpf, e))?;
    let cpu = cpus() - 1;
    let taskset = tools::TASKSET.find().unwrap_or_else(|| "taskset".into());

    let mut all: Vec<Mode> = vec![
        Mode {
            name: mode::NATIVE,
            prefix: vec![],
            flags: vec![],
        },
        Mode {
            name: modes::FLOOR,
            prefix: vec![],
            flags: vec!["--floor".into()],
        },
        Mode {
            name: modes::ARG_FLOOR,
            prefix: vec![],
            flags: vec!["--arg-floor".into()],
        },
        Mode {
            name: modes::FILTER,
            prefix: vec![],
            flags: vec!["--bpf".into(), arg(&bpf)],
        },
        Mode {
            name: mode::CORRAL,
            prefix: contenders::corral_run(&ctx.env, &t, None),
            flags: vec![],
        },
    ];
    if let Some(old) = &ctx.opts.corral_old {
        all.push(Mode {
            name: modes::CORRAL_OLD,
            prefix: contenders::corral_run_with(old, &ctx.env.global_args(), &t, None),
            flags: vec![],
        });
    }

    let n = count(level);
    let limit = Duration::from_secs(level.pick(600, 120, 60));
    let tests: Vec<(String, &str, bool)> = OPS
        .iter()
        .flat_map(|op| {
            [true, false].map(|pinned| {
                let name = format!("{op} {}", if pinned { "pinned" } else { "unpinned" });
                (name, *op, pinned)
            })
        })
        .collect();
    let mut samples: Vec<Vec<Samples>> = vec![vec![Samples::new(); all.len()]; tests.len()];
    let mut notes: Vec<Vec<Vec<String>>> = vec![vec![Vec::new(); all.len()]; tests.len()];
    for round in 0..rounds(level) {
        for (ti, (test, op, pinned)) in tests.iter().enumerate() {
            let mut line = Vec::new();
            for k in 0..all.len() {
                sys::check_interrupt()?;
                let mi = (round + ti + k) % all.len();
                let m = &all[mi];
                let mut argv: Vec<String> = Vec::new();
                if *pinned {
                    argv.extend([arg(&taskset), "-c".into(), cpu.to_string()]);
                }
                argv.extend(m.prefix.iter().cloned());
                argv.push(arg(&prog));
                argv.extend(m.flags.iter().cloned());
                argv.extend([op.to_string(), n.to_string()]);
                let mut c = Command::new(&argv[0]);
                c.args(&argv[1..]);
                let f = sys::run_bounded(&mut c, limit, Output::Capture)?;
                sys::check_interrupt()?;
                match parse_line(&f.stdout) {
                    Some((wall, cpu_ns, sc)) if f.success() => {
                        let s = &mut samples[ti][mi];
                        s.push(fig::WALL_NS, "ns", Better::Lower, wall);
                        s.push(fig::CPU_NS, "ns", Better::Lower, cpu_ns);
                        line.push(format!("{} {wall:.1}", m.name));
                        let want = if m.name == mode::NATIVE { 0 } else { 2 };
                        if sc != want {
                            notes[ti][mi].push(format!(
                                "run {}: Seccomp {sc} in /proc/self/status, expected {want}",
                                round + 1
                            ));
                        }
                    }
                    _ => {
                        let why = f.describe(limit);
                        if m.name == mode::CORRAL {
                            ctx.corral_failure(format!("seccomp {test} in corral: {why}"));
                        }
                        notes[ti][mi].push(format!("run {}: failed: {why}", round + 1));
                    }
                }
            }
            ctx.progress
                .step_done(&format!("seccomp {test}: ns/call {}", line.join(", ")));
        }
    }
    for (ti, (test, _, _)) in tests.iter().enumerate() {
        for (mi, m) in all.iter().enumerate() {
            let mut row = std::mem::take(&mut samples[ti][mi]).into_row(SUITE, test, m.name);
            for note in notes[ti][mi].drain(..) {
                row = row.with_note(note);
            }
            if mi == 0 {
                row = row.with_note(format!("{n} calls per run"));
            }
            ctx.results.push(row);
        }
    }
    ctx.results.add_note(format!(
        "seccomp: bench/c/seccomp.c, {n} raw system calls per run, {} rounds; pinned = taskset -c {cpu}; wall ns per call (cpu_ns: user + system); native/floor/arg-floor/filter as root on the host, corral as tenant {}; filter = corral's default policy as compiled into this corral-bench ({} bytes of BPF)",
        rounds(level),
        t.name,
        std::fs::metadata(&bpf).map(|m| m.len()).unwrap_or(0)
    ));
    let table = table(
        &ctx.results,
        &all.iter().map(|m| m.name).collect::<Vec<_>>(),
    );
    for l in table.lines() {
        ctx.note(l);
    }
    Ok(())
}

/// Medians per test and mode, and each mode's ratio to `floor` and `native`.
pub fn table(rs: &crate::ResultSet, modes: &[&str]) -> String {
    let med = |test: &str, m: &str| rs.row(SUITE, test, m).and_then(|r| r.median(fig::WALL_NS));
    let mut s = format!("{:<18}", "seccomp ns/call");
    for m in modes {
        s.push_str(&format!(" {m:>11}"));
    }
    s.push_str("   vs floor / arg-floor / native\n");
    let tests: Vec<String> = OPS
        .iter()
        .flat_map(|op| [format!("{op} pinned"), format!("{op} unpinned")])
        .collect();
    for t in &tests {
        s.push_str(&format!("{t:<18}"));
        for m in modes {
            match med(t, m) {
                Some(v) => s.push_str(&format!(" {v:>11.1}")),
                None => s.push_str(&format!(" {:>11}", "-")),
            }
        }
        let (floor, arg_floor, native) = (
            med(t, modes::FLOOR),
            med(t, modes::ARG_FLOOR),
            med(t, mode::NATIVE),
        );
        let ratio = |v: f64, of: Option<f64>| of.map_or("-".into(), |o| format!("{:.2}", v / o));
        let ratios: Vec<String> = modes
            .iter()
            .filter(|m| ![mode::NATIVE, modes::FLOOR, modes::ARG_FLOOR].contains(*m))
            .map(|m| match med(t, m) {
                Some(v) => format!(
                    "{m} {}/{}/{}",
                    ratio(v, floor),
                    ratio(v, arg_floor),
                    ratio(v, native)
                ),
                None => format!("{m} -"),
            })
            .collect();
        s.push_str(&format!("   {}\n", ratios.join(", ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_result_line() {
        assert_eq!(
            parse_line("seccomp getppid 1000 101.50 99.00 2\n"),
            Some((101.5, 99.0, 2))
        );
        assert_eq!(parse_line("seccomp: /dev/zero: No such file\n"), None);
    }
}
