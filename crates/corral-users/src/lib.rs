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
//! panels keep their users there), and whatever they do not answer is asked
//! of `getent(1)`, a dynamically linked program that goes through every
//! source nsswitch.conf names (LDAP, sssd, ...), but only when nsswitch.conf
//! names a source other than `files` (and `systemd`, which serves systemd's
//! own dynamic service users, never a tenant) for that database.

mod files;
mod getent;
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

    /// True when nsswitch.conf names a source for `db` whose entries the
    /// files do not hold.
    fn other_sources(&self, db: &str) -> io::Result<bool> {
        nsswitch::has_other_sources(&self.nsswitch, db)
    }

    pub fn user_by_name(&self, name: &str) -> io::Result<Option<User>> {
        if let Some(u) = files::find(&self.passwd, parse_passwd_line, |u: &User| u.name == name)? {
            return Ok(Some(u));
        }
        if self.other_sources("passwd")? {
            return getent::one(&self.getent, "passwd", name, parse_passwd_line);
        }
        Ok(None)
    }

    pub fn user_by_uid(&self, uid: u32) -> io::Result<Option<User>> {
        if let Some(u) = files::find(&self.passwd, parse_passwd_line, |u: &User| u.uid == uid)? {
            return Ok(Some(u));
        }
        if self.other_sources("passwd")? {
            return getent::one(&self.getent, "passwd", &uid.to_string(), parse_passwd_line);
        }
        Ok(None)
    }

    pub fn group_by_name(&self, name: &str) -> io::Result<Option<Group>> {
        if let Some(g) = files::find(&self.group, parse_group_line, |g: &Group| g.name == name)? {
            return Ok(Some(g));
        }
        if self.other_sources("group")? {
            return getent::one(&self.getent, "group", name, parse_group_line);
        }
        Ok(None)
    }

    pub fn group_by_gid(&self, gid: u32) -> io::Result<Option<Group>> {
        if let Some(g) = files::find(&self.group, parse_group_line, |g: &Group| g.gid == gid)? {
            return Ok(Some(g));
        }
        if self.other_sources("group")? {
            return getent::one(&self.getent, "group", &gid.to_string(), parse_group_line);
        }
        Ok(None)
    }

    /// Every group of `user`, `primary` first, then each group that lists
    /// the user as a member, in file order, without repeats (what
    /// `getgrouplist(3)` answers).
    pub fn group_list(&self, user: &str, primary: u32) -> io::Result<Vec<u32>> {
        let mut gids = vec![primary];
        let mut add = |gid: u32| {
            if !gids.contains(&gid) {
                gids.push(gid);
            }
        };
        for g in files::all(&self.group, parse_group_line)? {
            if g.members.iter().any(|m| m == user) {
                add(g.gid);
            }
        }
        if self.other_sources("group")? {
            for gid in getent::initgroups(&self.getent, user)? {
                add(gid);
            }
        }
        Ok(gids)
    }
}

#[cfg(test)]
mod tests;
