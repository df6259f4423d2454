//! What the default filter costs per system call.
//!
//! `cargo run --release --example seccomp_cost` (root not needed: the
//! measuring process sets no_new_privs on itself). Times 10^6 calls of
//!
//! - getppid, which the filter allows without looking at arguments, so the
//!   kernel's per-syscall "always allowed" cache may skip the BPF program;
//! - ioctl(-1, FIONREAD), which the ioctl rule must inspect (TIOCSTI?), so
//!   the program runs on every call.
//!
//! A filter cannot be removed once installed, so each measurement runs in a
//! fresh copy of this program (`--measure plain|filtered`), alternating, and
//! the best of the rounds is reported, in ns/call.

use std::hint::black_box;
use std::process::Command;
use std::time::Instant;

use corral_profile::plan::SeccompPlan;
use corral_security::{caps, seccomp, Filter};

const CALLS: u32 = 1_000_000;
const ROUNDS: usize = 7;

fn getppid() {
    // SAFETY: no arguments, no memory.
    black_box(unsafe { libc::syscall(libc::SYS_getppid) });
}

fn ioctl_fionread() {
    let mut n: libc::c_int = 0;
    // SAFETY: fd -1 fails with EBADF before `n` is touched; `n` is live anyway.
    black_box(unsafe {
        libc::syscall(
            libc::SYS_ioctl,
            -1 as libc::c_long,
            libc::FIONREAD,
            &mut n as *mut libc::c_int,
        )
    });
}

fn ns_per_call(call: fn()) -> f64 {
    let start = Instant::now();
    for _ in 0..CALLS {
        call();
    }
    start.elapsed().as_nanos() as f64 / f64::from(CALLS)
}

fn default_filter() -> Filter {
    seccomp::build(&SeccompPlan::default_policy())
        .expect("default plan compiles")
        .expect("enabled")
}

/// One measurement in this process: prints "getppid_ns ioctl_ns".
fn measure(filtered: bool) {
    if filtered {
        caps::set_no_new_privs().expect("no_new_privs");
        default_filter().apply().expect("install the filter");
    }
    println!("{} {}", ns_per_call(getppid), ns_per_call(ioctl_fionread));
}

fn run_copy(mode: &str) -> (f64, f64) {
    let exe = std::env::current_exe().expect("own path");
    let out = Command::new(exe)
        .args(["--measure", mode])
        .output()
        .expect("run a copy");
    assert!(
        out.status.success(),
        "{mode} copy failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let mut nums = text
        .split_whitespace()
        .map(|n| n.parse::<f64>().expect("a number"));
    (nums.next().expect("getppid"), nums.next().expect("ioctl"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, mode] = args.as_slice() {
        if flag == "--measure" {
            return measure(mode == "filtered");
        }
    }
    let (mut plain, mut filtered) = (
        (f64::INFINITY, f64::INFINITY),
        (f64::INFINITY, f64::INFINITY),
    );
    for _ in 0..ROUNDS {
        let p = run_copy("plain");
        let f = run_copy("filtered");
        plain = (plain.0.min(p.0), plain.1.min(p.1));
        filtered = (filtered.0.min(f.0), filtered.1.min(f.1));
    }
    println!(
        "default filter: {} BPF instructions; {CALLS} calls per run, best of {ROUNDS} alternating runs",
        default_filter().len()
    );
    println!(
        "{:<18} {:>12} {:>12} {:>10}",
        "syscall", "no filter", "filter", "delta"
    );
    for (name, without, with) in [
        ("getppid", plain.0, filtered.0),
        ("ioctl(FIONREAD)", plain.1, filtered.1),
    ] {
        println!(
            "{name:<18} {without:>9.1} ns {with:>9.1} ns {:>+7.1} ns",
            with - without
        );
    }
}
