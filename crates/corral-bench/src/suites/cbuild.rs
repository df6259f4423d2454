//! The C workloads in `bench/c/`, embedded at build time and compiled on the
//! machine that runs the benchmark (so `corral-bench` works from an installed
//! binary and the workloads match the local libc and kernel headers).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::error::{BenchError, Result};
use crate::suites::sys::{self, Output};

/// A C program of `bench/c/`.
#[derive(Debug, Clone, Copy)]
pub struct Source {
    pub name: &'static str,
    pub text: &'static str,
    /// Linked statically (no dynamic loader work at each exec).
    pub static_link: bool,
    pub extra: &'static [&'static str],
}

/// The CGI program of the cgi suite.
pub const HELLOWORLD: Source = Source {
    name: "helloworld",
    text: include_str!("../../../../bench/c/helloworld.c"),
    static_link: true,
    extra: &[],
};

/// The per-request trampoline installed at SCRIPT_FILENAME (cgi suite).
pub const CGI_EXEC: Source = Source {
    name: "cgi-exec",
    text: include_str!("../../../../bench/c/cgi-exec.c"),
    static_link: true,
    extra: &[],
};

/// The minimal static join wrapper: setns, fork, exec (join suite's floor).
pub const JOINWRAP: Source = Source {
    name: "joinwrap",
    text: include_str!("../../../../bench/c/joinwrap.c"),
    static_link: true,
    extra: &[],
};

/// UnixBench-like workloads (micro suite). Dynamically linked, like the
/// UnixBench binaries, so Execl Throughput includes the dynamic loader.
pub const UBENCH: Source = Source {
    name: "ubench",
    text: include_str!("../../../../bench/c/ubench.c"),
    static_link: false,
    extra: &[],
};

/// Nested pid namespaces and per-op cost (pidns suite).
pub const PIDNS: Source = Source {
    name: "pidns",
    text: include_str!("../../../../bench/c/pidns.c"),
    static_link: false,
    extra: &["-pthread"],
};

/// Per-syscall cost natively, under a one-instruction filter, under a given
/// BPF program (seccomp suite). Static: it also runs inside sandboxes.
pub const SECCOMP: Source = Source {
    name: "seccomp",
    text: include_str!("../../../../bench/c/seccomp.c"),
    static_link: true,
    extra: &[],
};

/// Exec a program under the one-instruction allow-all seccomp filter (the
/// micro suite's seccomp-floor mode). Static, like the other wrappers.
pub const FLOOR_EXEC: Source = Source {
    name: "floor-exec",
    text: include_str!("../../../../bench/c/floor-exec.c"),
    static_link: true,
    extra: &[],
};

/// The smallest holder of an idle tenant's namespaces and cgroups (the
/// scale suite's floor). Static: its own pages stay a few KiB.
pub const NS_HOLDER: Source = Source {
    name: "ns-holder",
    text: include_str!("../../../../bench/c/ns-holder.c"),
    static_link: true,
    extra: &[],
};

/// Compile `src` into `dir/<name>` with the system C compiler.
pub fn compile(cc: &Path, src: &Source, dir: &Path) -> Result<PathBuf> {
    let c = dir.join(format!("{}.c", src.name));
    std::fs::write(&c, src.text).map_err(|e| BenchError::io(&c, e))?;
    let out = dir.join(src.name);
    let mut cmd = Command::new(cc);
    cmd.args(["-O2", "-Wall", "-o"]).arg(&out).arg(&c);
    if src.static_link {
        cmd.arg("-static");
    }
    cmd.args(src.extra);
    let limit = Duration::from_secs(120);
    let f = sys::run_bounded(&mut cmd, limit, Output::Capture)?;
    if !f.success() {
        let hint = if src.static_link {
            " (static linking needs libc6-dev, part of build-essential)"
        } else {
            ""
        };
        return Err(BenchError::suite(
            "setup",
            format!(
                "compiling bench/c/{}.c failed{hint}: {}",
                src.name,
                f.describe(limit)
            ),
        ));
    }
    Ok(out)
}
