//! `corral`: the command users, scripts and web servers run. It answers
//! `corral run` on a running sandbox itself ([`corral::fastrun`]: the hot
//! path, started once per CGI request or shebang) and execs the full
//! command line, `corral-cli` (src/main.rs), for everything else, with the
//! same arguments and `argv[0]`, so help, errors and exit statuses are the
//! full CLI's own.
//!
//! This program is small on purpose: a static-pie binary applies all of
//! its relocations and faults in its read-only data at every start, which
//! for the full CLI (clap, tokio, hyper, SQLite...) was most of what `corral
//! run` cost beyond the C floor (docs/benchmarks.md, "corral run at the C
//! floor"). It also skips Rust's runtime set-up (`no_main`: no stack-guard
//! probe of /proc/self/maps, no signal stack, no poll of fds 0-2), which
//! nothing here needs; SIGPIPE is ignored as that set-up would.
//! (Its logic and tests are in the library: `fastrun`, `runline`,
//! `programs`; a test build keeps the harness's own `main`.)
#![cfg_attr(not(test), no_main)]

#[cfg(not(test))]
#[no_mangle]
extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    // SAFETY: setting a signal's disposition to SIG_IGN touches no memory;
    // this program has no other threads.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(code) = corral::fastrun::answer(&argv) {
        std::process::exit(code);
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => fail(format_args!("cannot find its own program: {e}")),
    };
    let Some(cli) = corral::programs::cli(&exe) else {
        fail(format_args!(
            "{} not found next to {} or in its ../lib/corral (the full command line; reinstall corral)",
            corral::programs::CLI,
            exe.display()
        ))
    };
    let mut cmd = std::process::Command::new(&cli);
    if let Some(arg0) = argv.first() {
        std::os::unix::process::CommandExt::arg0(&mut cmd, arg0);
    }
    let e = std::os::unix::process::CommandExt::exec(cmd.args(argv.iter().skip(1)));
    fail(format_args!("exec {}: {e}", cli.display()))
}

#[cfg_attr(test, allow(dead_code))]
fn fail(what: std::fmt::Arguments) -> ! {
    eprintln!("corral: {what}");
    std::process::exit(corral::EXIT_FAILURE)
}
