//! Asking `getent(1)`: every source nsswitch.conf names, through the
//! system's dynamically linked libc, in a process of its own.

use std::io;
use std::path::Path;
use std::process::{Command, Stdio};

/// Where Debian, Ubuntu and RHEL-like systems install it.
pub const PROGRAM: &str = "/usr/bin/getent";

/// getent's exit status for "no such key".
const NOT_FOUND: i32 = 2;

fn ask(program: &Path, db: &str, key: &str) -> io::Result<Option<String>> {
    let what = format!("{} {db} {key}", program.display());
    let out = Command::new(program)
        .args([db, "--", key])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("{what}: {e} (nsswitch.conf names sources other than files, which only getent can ask)")))?;
    match out.status.code() {
        Some(0) => String::from_utf8(out.stdout).map(Some).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{what}: output is not UTF-8"),
            )
        }),
        Some(NOT_FOUND) => Ok(None),
        _ => Err(io::Error::other(format!("{what}: failed ({})", out.status))),
    }
}

/// The entry `getent DB KEY` prints, if any.
pub(crate) fn one<T>(
    program: &Path,
    db: &str,
    key: &str,
    parse: fn(&str) -> Option<T>,
) -> io::Result<Option<T>> {
    let Some(text) = ask(program, db, key)? else {
        return Ok(None);
    };
    let line = text.lines().next().unwrap_or("");
    match parse(line) {
        Some(e) => Ok(Some(e)),
        None => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("getent {db} {key}: cannot read {line:?}"),
        )),
    }
}

/// The supplementary group ids `getent initgroups USER` prints
/// (`USER gid gid ...`).
pub(crate) fn initgroups(program: &Path, user: &str) -> io::Result<Vec<u32>> {
    let Some(text) = ask(program, "initgroups", user)? else {
        return Ok(Vec::new());
    };
    let line = text.lines().next().unwrap_or("");
    line.split_whitespace()
        .skip(1)
        .map(|g| {
            g.parse().map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("getent initgroups {user}: cannot read {line:?}"),
                )
            })
        })
        .collect()
}
