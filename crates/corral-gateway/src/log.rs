//! The gateway's logs.
//!
//! * The error log, on stderr: one line per event, a UTC timestamp and
//!   `corral-gateway: ` first, so that it can be grepped ([`line`]).
//! * The access log (`--access-log FILE`, or `-` for stderr): one JSON
//!   object per request and line ([`AccessLog`]), written whole with one
//!   `write` to a file opened `O_APPEND` (reopened on SIGHUP, for logrotate).

use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Write one log line: the time, `corral-gateway: `, then `args`. Lines are
/// written whole (stderr is locked for the write), so concurrent requests
/// never interleave inside a line.
pub fn line(args: std::fmt::Arguments<'_>) {
    let mut s = corral_sandbox::services::log::timestamp(std::time::SystemTime::now());
    s.push_str("corral-gateway: ");
    std::fmt::Write::write_fmt(&mut s, args).ok();
    // Control characters from scripts' output would forge log lines.
    let mut s: String = s
        .chars()
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect();
    s.push('\n');
    let _ = std::io::stderr().lock().write_all(s.as_bytes());
}

/// One request, as the access log records it.
#[derive(Debug, Serialize)]
pub struct Access<'a> {
    /// When the request ended, UTC, milliseconds (`2026-11-24T23:59:59.123Z`).
    pub time: &'a str,
    /// The tenant it ran for; "-" when refused before one was known.
    pub tenant: &'a str,
    /// `REMOTE_ADDR`.
    pub remote: &'a str,
    /// `HTTP_HOST` (else `SERVER_NAME`).
    pub host: &'a str,
    pub method: &'a str,
    /// `REQUEST_URI` (else `SCRIPT_NAME` and `QUERY_STRING`).
    pub uri: &'a str,
    /// The HTTP status of the response (the script's, or the gateway's error).
    pub status: u16,
    /// Bytes of the response (head and body) sent to the web server.
    pub bytes: u64,
    /// From the request's params to its end, in milliseconds.
    pub duration_ms: f64,
    /// `SCRIPT_FILENAME` as requested.
    pub script: &'a str,
}

/// Where access lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessTarget {
    Stderr,
    File(PathBuf),
}

impl std::str::FromStr for AccessTarget {
    type Err = String;
    fn from_str(s: &str) -> Result<AccessTarget, String> {
        match s {
            "-" => Ok(AccessTarget::Stderr),
            p if p.starts_with('/') => Ok(AccessTarget::File(PathBuf::from(p))),
            _ => Err(format!(
                "{s:?}: expected an absolute file path, or - for stderr"
            )),
        }
    }
}

/// The access log: one JSON line per request.
pub struct AccessLog {
    target: AccessTarget,
    file: Mutex<Option<std::fs::File>>,
}

fn open_append(p: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o640)
        .custom_flags(libc::O_CLOEXEC)
        .open(p)
}

impl AccessLog {
    pub fn open(target: AccessTarget) -> std::io::Result<AccessLog> {
        let file = match &target {
            AccessTarget::Stderr => None,
            AccessTarget::File(p) => Some(open_append(p)?),
        };
        Ok(AccessLog {
            target,
            file: Mutex::new(file),
        })
    }

    /// Open the file again (after logrotate moved it away); the old one
    /// stays in use if that fails.
    pub fn reopen(&self) -> std::io::Result<()> {
        if let AccessTarget::File(p) = &self.target {
            let f = open_append(p)?;
            *self.file.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
        }
        Ok(())
    }

    pub fn target(&self) -> &AccessTarget {
        &self.target
    }

    /// Append one request's line (one `write`: lines never interleave).
    pub fn record(&self, a: &Access<'_>) {
        let mut buf = Vec::with_capacity(256);
        if serde_json::to_writer(&mut buf, a).is_err() {
            return;
        }
        buf.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let r = match file.as_mut() {
            Some(f) => f.write_all(&buf),
            None => std::io::stderr().lock().write_all(&buf),
        };
        drop(file);
        if let Err(e) = r {
            line(format_args!("access log: {e}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_lines_are_json_objects_one_per_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("access.log");
        let log = AccessLog::open(AccessTarget::File(p.clone())).unwrap();
        let a = Access {
            time: "2026-11-24T23:59:59.123Z",
            tenant: "alice",
            remote: "127.0.0.1",
            host: "example.com",
            method: "GET",
            uri: "/a\"b\n",
            status: 200,
            bytes: 12,
            duration_ms: 1.5,
            script: "/home/alice/x.cgi",
        };
        log.record(&a);
        std::fs::rename(&p, d.path().join("access.log.1")).unwrap();
        log.reopen().unwrap();
        log.record(&a);
        for f in [p.clone(), d.path().join("access.log.1")] {
            let text = std::fs::read_to_string(&f).unwrap();
            assert_eq!(text.lines().count(), 1, "{text}");
            let v: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
            assert_eq!(v["uri"], "/a\"b\n");
            assert_eq!(v["status"], 200);
            assert_eq!(v["tenant"], "alice");
        }
        assert!("relative".parse::<AccessTarget>().is_err());
        assert_eq!("-".parse::<AccessTarget>().unwrap(), AccessTarget::Stderr);
    }
}
