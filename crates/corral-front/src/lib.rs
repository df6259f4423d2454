//! `corral`: the command users, scripts and web servers run. It answers a
//! plain `corral run` on a running sandbox itself (src/fast.rs: the hot
//! path, started once per CGI request or shebang) and execs the full
//! command line, `corral-cli`, for everything else, with the same arguments,
//! `argv[0]` and environment, so help, errors and exit statuses are the
//! full CLI's own.
//!
//! Small on purpose, and without the C library (src/rt.rs): what a
//! `corral run` costs beyond the command is mostly this program's start.
//! The command line's parser (crates/corral/src/runline.rs) and the
//! tenant-name rule (crates/corral-users/src/name.rs) are the full CLI's,
//! included as source.
//! (This library is the program's logic, tested with the standard test
//! harness; src/main.rs is the program: its start-up, heap and panic
//! handler, src/rt.rs.)
#![cfg_attr(not(test), no_std)]

extern crate alloc;

pub mod fast;
#[allow(dead_code)]
#[path = "../../corral-users/src/name.rs"]
mod name;
pub mod out;
#[allow(dead_code)]
#[path = "../../corral/src/runline.rs"]
mod runline;
pub mod sys;
pub mod wire;

use alloc::vec::Vec;
use core::ffi::CStr;

/// The full command line's program, next to this one or in ../lib/corral
/// (crates/corral/src/programs.rs).
const CLI: &str = "corral-cli";

/// Called by the start-up (src/rt.rs) with the kernel's argc, argv, envp.
///
/// # Safety
/// `argv` holds `argc` pointers to NUL-terminated strings and a NULL;
/// `envp` NULL-terminated pointers to NUL-terminated strings.
pub unsafe fn main(argc: usize, argv: *const *const u8, envp: *const *const u8) -> i32 {
    // SAFETY: the caller's.
    let (args, env) = unsafe { (c_strings(argv, Some(argc)), c_strings(envp, None)) };
    let utf8: Option<Vec<&str>> = args.iter().map(|a| core::str::from_utf8(a).ok()).collect();
    if let Some(utf8) = utf8 {
        if let Ok(code) = fast::answer(utf8.get(1..).unwrap_or(&[]), &fast::Env(env)) {
            return code;
        }
    }
    // SAFETY: the caller's argv and envp, unchanged.
    unsafe { exec_cli(argv, envp) }
}

/// The strings of a NULL-terminated array (at most `n`).
///
/// # Safety
/// As [`main`]'s.
unsafe fn c_strings<'a>(mut p: *const *const u8, n: Option<usize>) -> Vec<&'a [u8]> {
    let mut out = Vec::with_capacity(n.unwrap_or(64));
    // SAFETY: the caller's: valid pointers up to the NULL.
    unsafe {
        while !(*p).is_null() && n.is_none_or(|n| out.len() < n) {
            out.push(CStr::from_ptr((*p).cast()).to_bytes());
            p = p.add(1);
        }
    }
    out
}

/// Replace this program with the full CLI; on failure say why, status 125.
///
/// # Safety
/// As [`main`]'s.
unsafe fn exec_cli(argv: *const *const u8, envp: *const *const u8) -> i32 {
    let Ok(exe) = rustix::fs::readlink("/proc/self/exe", Vec::new()) else {
        out::say(format_args!("cannot find its own program: /proc/self/exe"));
        return 125;
    };
    let exe = exe.to_string_lossy();
    let dir = exe.rsplit_once('/').map_or(".", |(d, _)| d);
    for candidate in [
        alloc::format!("{dir}/{CLI}\0"),
        alloc::format!("{dir}/../lib/corral/{CLI}\0"),
    ] {
        let Ok(path) = CStr::from_bytes_with_nul(candidate.as_bytes()) else {
            continue;
        };
        let is_file = rustix::fs::stat(path)
            .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_file());
        if !is_file {
            continue;
        }
        // SAFETY: the caller's argv and envp; `path` is NUL-terminated.
        let e = unsafe { crate::sys::execve(path, argv, envp) };
        out::say(format_args!(
            "exec {}: errno {}",
            &candidate[..candidate.len() - 1],
            e.raw_os_error()
        ));
        return 125;
    }
    out::say(format_args!(
        "{CLI} not found next to {exe} or in its ../lib/corral (the full command line; reinstall corral)"
    ));
    125
}
