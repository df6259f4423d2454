//! Users and groups: the passwd and group databases, read without loading
//! glibc's NSS modules into corral.
//!
//! Why not `getpwnam(3)` and friends: corral is linked statically (its own
//! start-up is most of what `corral run` adds to a command; see
//! docs/architecture.md), and a static glibc still `dlopen`s the NSS modules
//! named in /etc/nsswitch.conf (libnss_systemd...), which are built against
//! the shared libc; on Debian 12 that crashed corral in `getgrouplist`.
//!
//! So, like glibc's "files" source, the files are read directly (hosting
//! panels keep their users there) when nsswitch.conf names `files` first
//! for the database, and whatever they do not answer, or everything when
//! another source comes first, is asked of `getent(1)`: a dynamically
//! linked program that goes through every source nsswitch.conf names
//! (systemd, LDAP, sssd, ...) in its order. With Debian's default
//! (`files systemd`) a tenant from the files costs no `getent`.

mod files;
mod getent;
mod name;
mod nsswitch;

pub use files::{parse_group_line, parse_passwd_line};

use std::io;
use std::path::PathBuf;

/// An entry of the passwd database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
    pub shell: PathBuf,
}

/// An entry of the group database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub name: String,
    pub gid: u32,
    pub members: Vec<String>,
}

/// Where the databases are read from: the system's ([`Db::system`]), or
/// other files and another `getent` (tests).
#[derive(Debug, Clone)]
pub struct Db {
    pub passwd: PathBuf,
    pub group: PathBuf,
    pub nsswitch: PathBuf,
    pub getent: PathBuf,
}

impl Db {
    pub fn system() -> Db {
        Db {
            passwd: "/etc/passwd".into(),
            group: "/etc/group".into(),
            nsswitch: "/etc/nsswitch.conf".into(),
            getent: getent::PROGRAM.into(),
        }
    }

    fn order(&self, db: &str) -> io::Result<nsswitch::Order> {
        nsswitch::read_order(&self.nsswitch, db)
    }

    /// The entry `matches` picks: from the files when nsswitch.conf puts
    /// them first, else (or when they have none and other sources are
    /// named) from `getent DB KEY`, checked to be the entry asked for.
    fn lookup<T>(
        &self,
        db: &str,
        path: &std::path::Path,
        key: &str,
        parse: fn(&str) -> Option<T>,
        matches: impl Fn(&T) -> bool,
    ) -> io::Result<Option<T>> {
        let order = self.order(db)?;
        if order.files_first {
            if let Some(e) = files::find(path, key, parse, &matches)? {
                return Ok(Some(e));
            }
        }
        if !order.files_first || order.others {
            // `getent passwd 33` looks a number up as an id: an answer for
            // another key is no answer.
            return Ok(getent::one(&self.getent, db, key, parse)?.filter(|e| matches(e)));
        }
        Ok(None)
    }

    pub fn user_by_name(&self, name: &str) -> io::Result<Option<User>> {
        self.lookup(
            "passwd",
            &self.passwd,
            name,
            parse_passwd_line,
            |u: &User| u.name == name,
        )
    }

    pub fn user_by_uid(&self, uid: u32) -> io::Result<Option<User>> {
        self.lookup(
            "passwd",
            &self.passwd,
            &uid.to_string(),
            parse_passwd_line,
            |u: &User| u.uid == uid,
        )
    }

    pub fn group_by_name(&self, name: &str) -> io::Result<Option<Group>> {
        self.lookup("group", &self.group, name, parse_group_line, |g: &Group| {
            g.name == name
        })
    }

    pub fn group_by_gid(&self, gid: u32) -> io::Result<Option<Group>> {
        self.lookup(
            "group",
            &self.group,
            &gid.to_string(),
            parse_group_line,
            |g: &Group| g.gid == gid,
        )
    }

    /// Every group of `user`, `primary` first, then each group that lists
    /// the user as a member, without repeats (what `getgrouplist(3)`
    /// answers). From the group file when nsswitch.conf puts it first, and
    /// from `getent initgroups` when other sources may add memberships: any
    /// source but `systemd`, or any at all for a user the passwd file does
    /// not hold (nss-systemd's own users).
    pub fn group_list(&self, user: &str, primary: u32) -> io::Result<Vec<u32>> {
        let mut gids = vec![primary];
        let mut add = |gid: u32| {
            if !gids.contains(&gid) {
                gids.push(gid);
            }
        };
        let order = self.order("group")?;
        if order.files_first {
            for g in files::all(&self.group, parse_group_line)? {
                if g.members.iter().any(|m| m == user) {
                    add(g.gid);
                }
            }
        }
        let user_in_files = || {
            files::find(&self.passwd, user, parse_passwd_line, |u: &User| {
                u.name == user
            })
            .map(|u| u.is_some())
        };
        if !order.files_first || order.others_beyond_systemd || (order.others && !user_in_files()?)
        {
            for gid in getent::initgroups(&self.getent, user)? {
                add(gid);
            }
        }
        Ok(gids)
    }
}

/// `name` is not a user name as corral takes one (see [`check_user_name`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadUserName(pub String);

impl std::fmt::Display for BadUserName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?}: not a tenant name (expected a Unix user name like [a-z_][a-z0-9_.-]*, at most 32 characters)",
            self.0
        )
    }
}

impl std::error::Error for BadUserName {}

/// A user name as corral accepts one without a passwd lookup (the user may
/// be gone already, e.g. for `corral down`): `[a-z_][a-z0-9_.-]*`, at most
/// 32 bytes, so never a path.
pub fn check_user_name(name: &str) -> Result<(), BadUserName> {
    if name::is_user_name(name) {
        Ok(())
    } else {
        Err(BadUserName(name.to_string()))
    }
}

#[cfg(test)]
mod tests;
