//! `pidns` (seed article 002, the pid namespaces patch set): CPU time per
//! getpid, fork+wait and pthread create+join in the initial pid namespace
//! (`host`), nested 1..3 levels below it (`nested-N`, bench/c/pidns.c
//! unshares CLONE_NEWPID and forks, as root), and inside a corral sandbox
//! (`corral`: the tenant's process under `corral run`, one pid namespace
//! below the host, with the sandbox's seccomp filter and cgroup). Every run
//! is pinned to one CPU; modes are interleaved, rotating each repetition.

use std::process::Command;
use std::time::Duration;

use crate::error::Result;
use crate::results::{Better, Samples};
use crate::suites::contenders::{self, mode};
use crate::suites::sys::{self, Output};
use crate::suites::{arg, cbuild, cpus, tools, Ctx, Level, Options};

pub const SUITE: &str = "pidns";

/// Figure names (nanoseconds per operation).
pub mod fig {
    pub const CPU_NS: &str = "cpu_ns";
    pub const WALL_NS: &str = "wall_ns";
}

/// (op, count) per level. The article ran getpid 10^9 times; full runs use
/// 10^7 (the per-call cost is what is compared).
fn ops(level: Level) -> Vec<(&'static str, u64)> {
    vec![
        ("getpid", level.pick(10_000_000, 2_000_000, 100_000)),
        ("fork", level.pick(20_000, 3_000, 200)),
        ("thread", level.pick(100_000, 20_000, 1_000)),
    ]
}

fn reps(level: Level) -> usize {
    level.pick(3, 2, 1)
}

const LEVELS: u32 = 3;

pub fn steps(opts: &Options) -> u64 {
    (reps(opts.level) * ops(opts.level).len()) as u64
}

/// `pidns LEVELS OP COUNT WALL_NS CPU_NS PID`.
pub fn parse_line(out: &str) -> Option<(f64, f64, i64)> {
    out.lines().rev().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() == 7 && f[0] == "pidns" {
            Some((f[4].parse().ok()?, f[5].parse().ok()?, f[6].parse().ok()?))
        } else {
            None
        }
    })
}

pub fn run(ctx: &mut Ctx) -> Result<()> {
    let level = ctx.level();
    let t = ctx.env.tenants[0].clone();
    let build = ctx.work_dir("pidns")?;
    let prog_src = cbuild::compile(&ctx.cc, &cbuild::PIDNS, &build)?;
    let prog = ctx.env.home_dir(&t, "bin")?.join("pidns");
    ctx.env.install(&t, &prog_src, &prog, 0o755)?;
    let cpu = cpus() - 1;
    let taskset = tools::TASKSET.find().unwrap_or_else(|| "taskset".into());
    let run_prefix = contenders::corral_run(&ctx.env, &t, None);

    let mut modes: Vec<(String, u32)> = vec![("host".into(), 0)];
    for l in 1..=LEVELS {
        modes.push((format!("nested-{l}"), l));
    }
    modes.push((mode::CORRAL.into(), 0));

    // Nesting further inside the sandbox is refused by its seccomp filter;
    // show what happens rather than assume it.
    let mut probe = Command::new(&run_prefix[0]);
    probe
        .args(&run_prefix[1..])
        .arg(arg(&prog))
        .args(["1", "getpid", "1"]);
    let f = sys::run_bounded(&mut probe, Duration::from_secs(30), Output::Capture)?;
    ctx.results.add_note(if f.success() {
        "pidns: a nested pid namespace inside the corral sandbox was allowed".to_string()
    } else {
        format!(
            "pidns: a nested pid namespace inside the corral sandbox is refused ({}), so `corral` is measured at the sandbox's own level only (one below the host, like nested-1, plus seccomp and cgroup)",
            f.tail()
        )
    });

    let limit = Duration::from_secs(level.pick(1800, 300, 60));
    let mut samples: Vec<Vec<Samples>> = vec![vec![Samples::new(); modes.len()]; ops(level).len()];
    let mut notes: Vec<Vec<Vec<String>>> = vec![vec![Vec::new(); modes.len()]; ops(level).len()];
    for rep in 0..reps(level) {
        for (oi, (op, count)) in ops(level).into_iter().enumerate() {
            let mut line = Vec::new();
            for k in 0..modes.len() {
                sys::check_interrupt()?;
                let mi = (rep + oi + k) % modes.len();
                let (name, lv) = &modes[mi];
                let mut c = Command::new(&taskset);
                c.arg("-c").arg(cpu.to_string());
                if name == mode::CORRAL {
                    c.args(&run_prefix);
                }
                c.arg(arg(&prog))
                    .args([lv.to_string(), op.to_string(), count.to_string()]);
                let f = sys::run_bounded(&mut c, limit, Output::Capture)?;
                sys::check_interrupt()?;
                match parse_line(&f.stdout) {
                    Some((wall, cpu_ns, pid)) if f.success() => {
                        let s = &mut samples[oi][mi];
                        s.push(fig::CPU_NS, "ns", Better::Lower, cpu_ns);
                        s.push(fig::WALL_NS, "ns", Better::Lower, wall);
                        line.push(format!("{name} {cpu_ns:.0}"));
                        if *lv > 0 && pid != 1 {
                            notes[oi][mi]
                                .push(format!("expected pid 1 in the nested namespace, saw {pid}"));
                        }
                    }
                    _ => {
                        let why = f.describe(limit);
                        if name == mode::CORRAL {
                            ctx.corral_failure(format!("pidns {op} in corral: {why}"));
                        }
                        notes[oi][mi].push(format!("run {}: failed: {why}", rep + 1));
                    }
                }
            }
            ctx.progress
                .step_done(&format!("pidns {op}: CPU ns/op {}", line.join(", ")));
        }
    }
    for (oi, (op, count)) in ops(level).into_iter().enumerate() {
        for (mi, (name, _)) in modes.iter().enumerate() {
            let mut row = std::mem::take(&mut samples[oi][mi]).into_row(SUITE, op, name);
            for n in notes[oi][mi].drain(..) {
                row = row.with_note(n);
            }
            if mi == 0 {
                row = row.with_note(format!("{count} operations per run"));
            }
            ctx.results.push(row);
        }
    }
    ctx.results.add_note(format!(
        "pidns: bench/c/pidns.c pinned to CPU {cpu}; CPU time = user + system of the process and its reaped children per operation; host and nested-N as root, corral as tenant {}",
        t.name
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_result_line() {
        assert_eq!(
            parse_line("pidns 2 fork 5000 88151.425 83185.400 1\n"),
            Some((88151.425, 83185.4, 1))
        );
        assert_eq!(
            parse_line("pidns: unshare(CLONE_NEWPID) at level 1: Operation not permitted\n"),
            None
        );
    }
}
