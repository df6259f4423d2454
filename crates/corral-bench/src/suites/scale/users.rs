//! The scale suite's own Unix users, `corral-s00001` …: created with
//! `useradd` (no login shell, home `/var/lib/corral-bench/homes/NAME`,
//! primary group `corral-scale`), idempotently (a user left by an earlier,
//! killed run is reused if its home is the expected one), and removed with
//! `userdel` at the end, also after errors and Ctrl-C ([`Pool`]'s drop).
//!
//! useradd and userdel rewrite /etc/passwd, shadow and group under a lock
//! (about 60 ms each here, serialised), so 5,000 users take minutes each
//! way; the full run accepts that rather than keeping users between runs.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::error::{BenchError, Result};
use crate::suites::env::Tenant;
use crate::suites::sys;
use crate::suites::tools::Tool;

pub const BASE: &str = "/var/lib/corral-bench";
pub const HOMES: &str = "/var/lib/corral-bench/homes";
pub const GROUP: &str = "corral-scale";

pub const USERADD: Tool = Tool::new("useradd", "passwd");
pub const USERDEL: Tool = Tool::new("userdel", "passwd");
pub const GROUPADD: Tool = Tool::new("groupadd", "passwd");
pub const GROUPDEL: Tool = Tool::new("groupdel", "passwd");

/// The i-th user (1-based): `corral-s00001`.
pub fn name(i: usize) -> String {
    format!("corral-s{i:05}")
}

pub fn home(name: &str) -> PathBuf {
    Path::new(HOMES).join(name)
}

/// Whether a user name is one of this suite's.
pub fn is_ours(name: &str) -> bool {
    name.strip_prefix("corral-s")
        .is_some_and(|d| d.len() == 5 && d.bytes().all(|b| b.is_ascii_digit()))
}

const LIMIT: Duration = Duration::from_secs(60);

fn tool(t: Tool) -> Command {
    Command::new(t.find().unwrap_or_else(|| t.name.into()))
}

fn run(mut c: Command, what: &str) -> Result<()> {
    sys::run_ok(&mut c, LIMIT, "scale", what).map(drop)
}

/// The users of one run.
pub struct Pool {
    pub users: Vec<Tenant>,
    /// Wall time of creating the users that did not exist yet, and how many.
    pub created: (usize, Duration),
    group: bool,
    /// Held until the users are gone (dropped after [`Pool::remove`]).
    _lock: std::fs::File,
}

/// Users are machine-wide: one scale run at a time. Lock files are never
/// removed (a removed one would let a second holder in).
const LOCK: &str = "/run/lock/corral-bench-scale.lock";

/// Wait (up to 30 min, interruptible) for the machine-wide scale lock.
fn lock(tick: &dyn Fn(usize)) -> Result<std::fs::File> {
    let path = if Path::new("/run/lock").is_dir() {
        LOCK
    } else {
        "/tmp/corral-bench-scale.lock"
    };
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| BenchError::io(path, e))?;
    let start = Instant::now();
    let mut told = false;
    loop {
        sys::check_interrupt()?;
        // SAFETY: flock on a descriptor we own.
        if unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(&f),
                libc::LOCK_EX | libc::LOCK_NB,
            )
        } == 0
        {
            return Ok(f);
        }
        if start.elapsed() > Duration::from_secs(1800) {
            return Err(BenchError::suite(
                "scale",
                format!("another scale run holds {path} for 30 min"),
            ));
        }
        if !told {
            told = true;
            tick(0);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

impl Pool {
    /// Make sure users 1..=n exist (creating the missing ones) with their
    /// homes; `tick(k)` after every 100 users (`tick(0)`: waiting for
    /// another run's users to go).
    pub fn ensure(n: usize, tick: &dyn Fn(usize)) -> Result<Pool> {
        let mut pool = Pool {
            _lock: lock(tick)?,
            users: Vec::new(),
            created: (0, Duration::ZERO),
            group: true,
        };
        if corral_users::Db::system()
            .group_by_name(GROUP)
            .ok()
            .flatten()
            .is_none()
        {
            let mut c = tool(GROUPADD);
            c.arg(GROUP);
            run(c, &format!("groupadd {GROUP}"))?;
        }
        for d in [BASE, HOMES] {
            std::fs::create_dir_all(d).map_err(|e| BenchError::io(d, e))?;
            let _ = std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755));
        }
        let start = Instant::now();
        for i in 1..=n {
            sys::check_interrupt()?;
            let u = name(i);
            let h = home(&u);
            match corral_users::Db::system().user_by_name(&u).ok().flatten() {
                Some(x) if x.home == h => {}
                Some(x) => {
                    return Err(BenchError::suite(
                        "scale",
                        format!("user {u} exists with home {} (not {}): not this suite's user; remove it first", x.home.display(), h.display()),
                    ))
                }
                None => {
                    let mut c = tool(USERADD);
                    c.args(["-M", "-l", "-N", "-g", GROUP, "-s", "/usr/sbin/nologin", "-d"])
                        .arg(&h)
                        .arg(&u);
                    run(c, &format!("useradd {u}"))?;
                    pool.created.0 += 1;
                }
            }
            let t = Tenant::lookup(&u)?;
            // Registered before the home is made: a failure still removes the user.
            pool.users.push(t.clone());
            std::fs::create_dir_all(&h).map_err(|e| BenchError::io(&h, e))?;
            std::os::unix::fs::chown(&h, Some(t.uid), Some(t.gid))
                .map_err(|e| BenchError::io(&h, e))?;
            std::fs::set_permissions(&h, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| BenchError::io(&h, e))?;
            if i % 100 == 0 {
                tick(i);
            }
        }
        pool.created.1 = start.elapsed();
        Ok(pool)
    }

    /// userdel every user, remove the homes and the group; what could not be
    /// removed. The tenants' sandboxes must be down (userdel refuses a user
    /// with processes).
    pub fn remove(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        for t in self.users.drain(..).rev() {
            let mut c = tool(USERDEL);
            c.arg(&t.name);
            match sys::run_cleanup(&mut c, LIMIT) {
                Ok(f) if f.success() => {}
                Ok(f) => problems.push(format!("userdel {}: {}", t.name, f.describe(LIMIT))),
                Err(e) => problems.push(format!("userdel {}: {e}", t.name)),
            }
            if let Err(e) = std::fs::remove_dir_all(&t.home) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    problems.push(format!("{}: {e}", t.home.display()));
                }
            }
        }
        // Only when empty: nothing of anyone else's is removed.
        let _ = std::fs::remove_dir(HOMES);
        let _ = std::fs::remove_dir(BASE);
        if std::mem::take(&mut self.group)
            && corral_users::Db::system()
                .group_by_name(GROUP)
                .ok()
                .flatten()
                .is_some()
        {
            let mut c = tool(GROUPDEL);
            c.arg(GROUP);
            match sys::run_cleanup(&mut c, LIMIT) {
                Ok(f) if f.success() => {}
                Ok(f) => problems.push(format!("groupdel {GROUP}: {}", f.describe(LIMIT))),
                Err(e) => problems.push(format!("groupdel {GROUP}: {e}")),
            }
        }
        problems
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        sys::report_cleanup(self.remove());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_hostnames_and_recognised() {
        assert_eq!(name(1), "corral-s00001");
        assert_eq!(name(5000), "corral-s05000");
        assert!(is_ours("corral-s00042"));
        assert!(!is_ours("corral-t1"));
        assert!(!is_ours("corral-s1"));
        assert_eq!(
            home("corral-s00001"),
            Path::new("/var/lib/corral-bench/homes/corral-s00001")
        );
    }
}
