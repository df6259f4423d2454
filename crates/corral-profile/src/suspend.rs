//! Suspended tenants: an operator's decision kept in the configuration
//! directory (`<config>/suspended/<tenant>.json`), so that it survives
//! restarts, reboots and a wiped state directory. `corral suspend` writes
//! it and stops the tenant's processes; every way in (`corral run`/`up`,
//! the gateway, logins, services) reads it and refuses.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Why and since when a tenant is suspended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suspension {
    pub reason: String,
    /// When, as text (`2026-11-25 03:10 UTC`); empty when unknown.
    pub since: String,
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
                since: String::new(),
            }),
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(Suspension {
            reason: format!("unreadable record {}: {e}", p.display()),
            since: String::new(),
        }),
    }
}

/// Record a suspension (replacing an earlier one), atomically.
pub fn record(config_dir: &Path, tenant: &str, s: &Suspension) -> std::io::Result<PathBuf> {
    let p = path(config_dir, tenant);
    let mut data = serde_json::to_vec_pretty(s).expect("serializes");
    data.push(b'\n');
    crate::edit::replace_file(&p, &data)?;
    Ok(p)
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
    pub since: String,
}

/// sysexits' EX_NOPERM: what `corral` exits with when it refuses a
/// suspended tenant.
pub const EXIT_SUSPENDED: i32 = 77;

fn since_text(since: &str) -> String {
    if since.is_empty() {
        String::new()
    } else {
        format!(" since {since}")
    }
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
            since: "2025-11-25 00:00 UTC".into(),
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
