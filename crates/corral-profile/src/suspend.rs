//! Suspended tenants: an operator's decision kept in the configuration
//! directory (`<config>/suspended/<tenant>.json`), so that it survives
//! restarts, reboots and a wiped state directory. `corral suspend` writes
//! it and stops the tenant's processes; every way in (`corral run`/`up`,
//! the gateway, logins, services) reads it and refuses.

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Why and since when a tenant is suspended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suspension {
    pub reason: String,
    /// Unix time, seconds.
    pub since: u64,
}

fn path(config_dir: &Path, tenant: &str) -> PathBuf {
    config_dir.join("suspended").join(format!("{tenant}.json"))
}

/// The tenant's suspension, if it is suspended. A record that cannot be
/// read counts as a suspension (fail closed), with the error as its reason.
pub fn suspension(config_dir: &Path, tenant: &str) -> Option<Suspension> {
    let p = path(config_dir, tenant);
    match std::fs::read(&p) {
        Ok(bytes) => Some(
            serde_json::from_slice(&bytes).unwrap_or_else(|e| Suspension {
                reason: format!("unreadable record {}: {e}", p.display()),
                since: 0,
            }),
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(Suspension {
            reason: format!("unreadable record {}: {e}", p.display()),
            since: 0,
        }),
    }
}

/// Record a suspension (replacing an earlier one), atomically.
pub fn record(config_dir: &Path, tenant: &str, s: &Suspension) -> std::io::Result<PathBuf> {
    let p = path(config_dir, tenant);
    let dir = p.parent().expect("suspended/");
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{tenant}.json.{}.tmp", std::process::id()));
    let r = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&serde_json::to_vec_pretty(s).expect("serializes"))?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        std::fs::rename(&tmp, &p)
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r.map(|_| p)
}

/// Remove the record; false when there was none.
pub fn clear(config_dir: &Path, tenant: &str) -> std::io::Result<bool> {
    match std::fs::remove_file(path(config_dir, tenant)) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// The error every refused way in reports (`corral` exits with
/// [`EXIT_SUSPENDED`] on it).
#[derive(Debug, thiserror::Error)]
#[error("{tenant} is suspended{}: {}", since_text(.since), .reason)]
pub struct Suspended {
    pub tenant: String,
    pub reason: String,
    pub since: u64,
}

/// sysexits' EX_NOPERM: what `corral` exits with when it refuses a
/// suspended tenant.
pub const EXIT_SUSPENDED: i32 = 77;

fn since_text(since: &u64) -> String {
    if *since == 0 {
        return String::new();
    }
    let days = since / 86_400;
    let s = since % 86_400;
    let (y, m, d) = civil(days as i64);
    format!(
        " since {y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        s / 3600,
        s % 3600 / 60
    )
}

/// Days since 1970-01-01 → (year, month, day), Howard Hinnant's algorithm.
fn civil(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Err([`Suspended`]) when the tenant is suspended.
pub fn check(config_dir: &Path, tenant: &str) -> Result<(), Suspended> {
    match suspension(config_dir, tenant) {
        Some(s) => Err(Suspended {
            tenant: tenant.to_string(),
            reason: s.reason,
            since: s.since,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_a_broken_one_still_suspends() {
        let d = tempfile::tempdir().unwrap();
        assert!(check(d.path(), "alice").is_ok());
        let s = Suspension {
            reason: "unpaid".into(),
            since: 1_764_028_800,
        };
        record(d.path(), "alice", &s).unwrap();
        let e = check(d.path(), "alice").unwrap_err();
        assert_eq!(
            e.to_string(),
            "alice is suspended since 2025-11-25 00:00 UTC: unpaid"
        );
        std::fs::write(d.path().join("suspended/bob.json"), "{").unwrap();
        assert!(check(d.path(), "bob").is_err(), "fail closed");
        assert!(clear(d.path(), "alice").unwrap());
        assert!(!clear(d.path(), "alice").unwrap());
        assert!(check(d.path(), "alice").is_ok());
    }
}
