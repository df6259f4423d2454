//! A cache of the passwd lookups the safety checks make (suEXEC looks the
//! script's owner up for every request; that is an open, a read and a parse
//! of /etc/passwd, and for users from another NSS source a `getent`
//! process, see corral-users).
//!
//! An entry is used while /etc/passwd is unchanged (device, inode, size,
//! mtime, ctime: one `stat` per request) and for at most [`TTL`] (users
//! from other NSS sources change without touching /etc/passwd). Unknown
//! users are cached too, so requests for files of a uid that is no user do
//! not cost a lookup each; lookup errors are not cached.

use crate::safety::{Refusal, TenantUser, UserKey};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long an entry may be used at most.
pub const TTL: Duration = Duration::from_secs(60);
/// Entries kept at most (a flood of unknown uids must not grow it forever).
const MAX_ENTRIES: usize = 4096;

type Stamp = (u64, u64, u64, i64, i64, i64, i64);

pub struct Users {
    passwd: PathBuf,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    stamp: Option<Stamp>,
    entries: HashMap<UserKey, (Result<TenantUser, Refusal>, Instant)>,
}

fn stamp(p: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(p).ok()?;
    Some((
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    ))
}

impl Default for Users {
    fn default() -> Self {
        Users::new("/etc/passwd")
    }
}

impl Users {
    /// A cache validated by the file `passwd` (tests use their own).
    pub fn new(passwd: impl Into<PathBuf>) -> Users {
        Users {
            passwd: passwd.into(),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The cached answer for `key`, if there is a valid one. Never blocks
    /// on NSS.
    pub fn cached(&self, key: &UserKey) -> Option<Result<TenantUser, Refusal>> {
        let now = stamp(&self.passwd);
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if g.stamp != now {
            g.entries.clear();
            g.stamp = now;
            return None;
        }
        match g.entries.get(key) {
            Some((r, at)) if at.elapsed() < TTL => Some(r.clone()),
            _ => None,
        }
    }

    /// Look `key` up (blocking: NSS) and remember the answer.
    pub fn lookup(&self, key: &UserKey) -> Result<TenantUser, Refusal> {
        let before = stamp(&self.passwd);
        let r = key.lookup();
        // Errors of the lookup itself (500) may be passing: not cached.
        if r.as_ref().err().is_some_and(|e| e.status == 500) {
            return r;
        }
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        // The answer was read from the file as of `before` (or later): kept
        // under that stamp, so any later change of the file drops it.
        if g.stamp != before {
            g.entries.clear();
            g.stamp = before;
        }
        if g.entries.len() >= MAX_ENTRIES {
            g.entries.retain(|_, (_, at)| at.elapsed() < TTL);
            if g.entries.len() >= MAX_ENTRIES {
                g.entries.clear();
            }
        }
        g.entries.insert(key.clone(), (r.clone(), Instant::now()));
        r
    }

    /// Forget everything (SIGHUP).
    pub fn clear(&self) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.entries.clear();
        g.stamp = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> UserKey {
        UserKey::Uid(nix::unistd::geteuid().as_raw())
    }

    #[test]
    fn answers_are_kept_until_the_file_changes() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("passwd");
        std::fs::write(&f, "a\n").unwrap();
        let u = Users::new(&f);
        assert!(u.cached(&me()).is_none());
        let first = u.lookup(&me()).unwrap();
        assert_eq!(u.cached(&me()).unwrap().unwrap(), first);
        // Unknown uids are remembered as such.
        let nobody = UserKey::Uid(3_999_999_999);
        assert_eq!(u.lookup(&nobody).unwrap_err().status, 403);
        assert_eq!(u.cached(&nobody).unwrap().unwrap_err().rule, "unknown-user");
        // Any change of the file (here its size) drops every entry.
        std::fs::write(&f, "a changed passwd file\n").unwrap();
        assert!(u.cached(&me()).is_none());
        assert!(u.cached(&nobody).is_none());
        u.lookup(&me()).unwrap();
        assert!(u.cached(&me()).is_some());
        u.clear();
        assert!(u.cached(&me()).is_none());
    }
}
