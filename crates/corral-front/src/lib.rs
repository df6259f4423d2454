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
    // What the standard library's start-up does and this program's does
    // not: fds 0-2 that the caller left closed become /dev/null (else the
    // first file this program opens, say its entry slot or its socket to
    // the init, would be passed on as the command's stdin or stdout), and
    // SIGPIPE is ignored (an error said on a stderr nobody reads is an exit
    // status, not a death by signal).
    if sys::open_closed_stdio().is_err() {
        // SAFETY: the caller's argv and envp, unchanged.
        return unsafe { exec_cli(argv, envp) };
    }
    sys::ignore_sigpipe();
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
    // Bytes, not text: an install path need not be UTF-8.
    let exe = exe.as_bytes();
    let dir = exe
        .iter()
        .rposition(|&b| b == b'/')
        .map_or(&b"."[..], |i| &exe[..i]);
    let shown = |p: &[u8]| alloc::string::String::from_utf8_lossy(p).into_owned();
    // As std's Command::exec did for the previous front program: the full
    // CLI starts with no signal blocked.
    sys::set_mask(0);
    for tail in [&b"/"[..], b"/../lib/corral/"] {
        let mut candidate = Vec::with_capacity(dir.len() + 32);
        candidate.extend_from_slice(dir);
        candidate.extend_from_slice(tail);
        candidate.extend_from_slice(CLI.as_bytes());
        candidate.push(0);
        let Ok(path) = CStr::from_bytes_with_nul(&candidate) else {
            continue;
        };
        let is_file = rustix::fs::stat(path)
            .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_file());
        if !is_file {
            continue;
        }
        // SAFETY: the caller's argv and envp; `path` is NUL-terminated.
        let e = unsafe { sys::execve(path, argv, envp) };
        out::say(format_args!(
            "exec {}: errno {}",
            shown(path.to_bytes()),
            e.raw_os_error()
        ));
        return 125;
    }
    out::say(format_args!(
        "{CLI} not found next to {} or in its ../lib/corral (the full command line; reinstall corral)",
        shown(exe)
    ));
    125
}
