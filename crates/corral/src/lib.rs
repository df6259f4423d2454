//! What the full command line (`corral-cli`, src/main.rs) and corral's
//! other programs share. `corral` itself (crates/corral-front) is a small
//! program without the C library that answers `corral run` on a running
//! sandbox and hands every other command line to `corral-cli` by exec:
//! starting the full CLI (a large static-pie binary: thousands of start-up
//! relocations and over a hundred page faults), then the C library's own
//! start-up, was most of what `corral run` cost beyond the C floor
//! (docs/benchmarks.md). [`runline`] is shared with it as source.

extern crate alloc;

pub mod fastrun;
pub mod programs;
pub mod runline;

/// corral itself failed (like env(1) and container runtimes).
pub const EXIT_FAILURE: i32 = 125;
/// The tenant's entry-process limit is reached (EX_TEMPFAIL).
pub const EXIT_ENTRY_LIMIT: i32 = 75;

/// An error and its causes on one line, each said once: the library errors
/// name their cause in their own message (so a plain `{e}` is complete)
/// and also expose it as `source()`, which anyhow's `{:#}` would print a
/// second time. A cause whose text its wrapper already holds is skipped.
pub fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}
