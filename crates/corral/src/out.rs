//! Printing to stdout the way a command-line tool does: when the reader goes
//! away (`corral ls | head -1`), corral exits at once and quietly with 141,
//! the status a shell reports for a tool killed by SIGPIPE, instead of
//! panicking ("failed printing to stdout") like `println!`.
//!
//! SIGPIPE itself stays ignored (Rust's default): a write to a closed pipe
//! or socket elsewhere (a tenant init's control socket, the gateway's
//! clients, a child's pipe) must remain an error corral handles, not a
//! signal that kills it half-way through `down` or the gateway.

use std::io::Write;

/// 128 + SIGPIPE: stdout's reader went away.
pub const EXIT_BROKEN_PIPE: i32 = 128 + libc::SIGPIPE;

/// Writes `args` to stdout; exits with [`EXIT_BROKEN_PIPE`] if its reader
/// is gone, with corral's failure status on any other write error.
pub fn write(args: std::fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args) {
        fail(e);
    }
}

/// Flushes stdout (a screen refresh of `corral top`), like [`write`].
pub fn flush() {
    if let Err(e) = std::io::stdout().lock().flush() {
        fail(e);
    }
}

fn fail(e: std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(EXIT_BROKEN_PIPE);
    }
    eprintln!("corral: writing to stdout: {e}");
    std::process::exit(crate::ctx::EXIT_FAILURE);
}

/// `print!` that exits quietly when stdout's reader is gone ([`write`]).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::write(format_args!($($arg)*))
    };
}

/// `println!` that exits quietly when stdout's reader is gone ([`write`]).
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::out::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {out, outln};

pub use corral::error_line;

#[cfg(test)]
mod tests {
    use super::error_line;

    #[test]
    fn every_cause_is_said_once() {
        let io = std::io::Error::from_raw_os_error(libc::ENOENT);
        let e = anyhow::Error::new(corral_sandbox::SandboxError::Io("read x".into(), io))
            .context("bring up t1");
        assert_eq!(
            error_line(&e),
            "bring up t1: read x: No such file or directory (os error 2)"
        );
        let bare = anyhow::anyhow!("plain");
        assert_eq!(error_line(&bare.context("outer")), "outer: plain");
    }
}
