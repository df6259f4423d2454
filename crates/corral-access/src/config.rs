//! Who is caged, and where corral keeps its state: `/etc/corral/access.toml`
//! (or the file a PAM module argument or corral-shell's install names).
//!
//! ```toml
//! min_uid = 1000            # users below are never caged (default: UID_MIN of /etc/login.defs)
//! exempt = ["admin"]        # never caged; root never is
//! group = "tenants"         # optional: only members of this group are caged
//! state_dir = "/run/corral" # as corral --state-dir
//! config_dir = "/etc/corral"
//! cgroup_parent = "corral"
//! corral = "/usr/bin/corral" # brings a sandbox up on a first login
//! ```

use serde::Deserialize;
use std::path::{Path, PathBuf};

pub const DEFAULT_PATH: &str = "/etc/corral/access.toml";

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessConfig {
    #[serde(default = "uid_min")]
    pub min_uid: u32,
    #[serde(default)]
    pub exempt: Vec<String>,
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default = "state_dir")]
    pub state_dir: PathBuf,
    #[serde(default = "config_dir")]
    pub config_dir: PathBuf,
    #[serde(default = "cgroup_parent")]
    pub cgroup_parent: String,
    #[serde(default = "corral_bin")]
    pub corral: PathBuf,
}

fn state_dir() -> PathBuf {
    PathBuf::from("/run/corral")
}
fn config_dir() -> PathBuf {
    PathBuf::from("/etc/corral")
}
fn cgroup_parent() -> String {
    "corral".into()
}
fn corral_bin() -> PathBuf {
    PathBuf::from("/usr/bin/corral")
}
fn uid_min() -> u32 {
    std::fs::read_to_string("/etc/login.defs")
        .ok()
        .and_then(|s| login_defs_uid_min(&s))
        .unwrap_or(1000)
}

/// `UID_MIN` from the text of /etc/login.defs.
pub fn login_defs_uid_min(text: &str) -> Option<u32> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("UID_MIN")).then(|| w.next()?.parse().ok())?
        })
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        source: toml::de::Error,
    },
    #[error("{path}: {what}")]
    Invalid { path: PathBuf, what: String },
    #[error("user database: {0}")]
    Users(#[source] std::io::Error),
}

impl Default for AccessConfig {
    fn default() -> Self {
        toml::from_str("").expect("an empty access config is valid")
    }
}

impl AccessConfig {
    /// Read and check a config file; a missing file at the default path
    /// means the defaults, a missing file named explicitly is an error.
    pub fn load(path: &Path, explicit: bool) -> Result<AccessConfig, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => {
                return Ok(AccessConfig::default())
            }
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.into(),
                    source,
                })
            }
        };
        Self::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<AccessConfig, ConfigError> {
        let c: AccessConfig = toml::from_str(text).map_err(|source| ConfigError::Parse {
            path: path.into(),
            source,
        })?;
        let invalid = |what: String| ConfigError::Invalid {
            path: path.into(),
            what,
        };
        for (key, p) in [
            ("state_dir", &c.state_dir),
            ("config_dir", &c.config_dir),
            ("corral", &c.corral),
        ] {
            if !p.is_absolute() {
                return Err(invalid(format!(
                    "{key} = {:?}: expected an absolute path",
                    p.display()
                )));
            }
        }
        if c.cgroup_parent.is_empty()
            || c.cgroup_parent.starts_with('/')
            || c.cgroup_parent
                .split('/')
                .any(|s| s.is_empty() || s == "..")
        {
            return Err(invalid(format!(
                "cgroup_parent = {:?}: expected a relative cgroup path without '..'",
                c.cgroup_parent
            )));
        }
        Ok(c)
    }

    /// Is this user caged? Root never is, nor a user below `min_uid` or in
    /// `exempt`; with `group`, only the group's members (primary or
    /// supplementary) are.
    pub fn caged(
        &self,
        db: &corral_users::Db,
        user: &corral_users::User,
    ) -> Result<bool, ConfigError> {
        if user.uid == 0 || user.uid < self.min_uid || self.exempt.contains(&user.name) {
            return Ok(false);
        }
        let Some(group) = &self.group else {
            return Ok(true);
        };
        let Some(g) = db.group_by_name(group).map_err(ConfigError::Users)? else {
            // A group that does not exist has no members: nobody is caged by
            // it, which `corral check`-style validation would flag; a login
            // must not be refused over it.
            return Ok(false);
        };
        Ok(user.gid == g.gid || g.members.contains(&user.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uid_min_is_read_from_login_defs() {
        let text = "# UID_MIN 5\nMAIL_DIR /var/mail\nUID_MIN\t\t\t 2000\nUID_MAX 60000\n";
        assert_eq!(login_defs_uid_min(text), Some(2000));
        assert_eq!(login_defs_uid_min("UID_MAX 6\n"), None);
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let p = Path::new("/etc/corral/access.toml");
        let e = AccessConfig::parse(p, "min_uid = 1000\nexemt = [\"x\"]\n").unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("/etc/corral/access.toml: "), "{msg}");
        assert!(msg.contains("line 2"), "{msg}");
        assert!(msg.contains("exemt"), "{msg}");
        let e = AccessConfig::parse(p, "state_dir = \"run\"\n").unwrap_err();
        assert!(e.to_string().contains("expected an absolute path"), "{e}");
        let e = AccessConfig::parse(p, "cgroup_parent = \"a/../b\"\n").unwrap_err();
        assert!(e.to_string().contains("without '..'"), "{e}");
    }

    #[test]
    fn a_missing_file_is_the_default_only_when_not_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("access.toml");
        assert_eq!(
            AccessConfig::load(&p, false).unwrap(),
            AccessConfig::default()
        );
        assert!(matches!(
            AccessConfig::load(&p, true),
            Err(ConfigError::Read { .. })
        ));
    }

    fn user(name: &str, uid: u32, gid: u32) -> corral_users::User {
        corral_users::User {
            name: name.into(),
            uid,
            gid,
            home: "/home/x".into(),
            shell: "/bin/sh".into(),
        }
    }

    #[test]
    fn who_is_caged() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("passwd"), "").unwrap();
        std::fs::write(
            dir.path().join("group"),
            "tenants:x:3000:bob\nalicegrp:x:3001:\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("nsswitch.conf"),
            "group: files\npasswd: files\n",
        )
        .unwrap();
        let db = corral_users::Db {
            passwd: dir.path().join("passwd"),
            group: dir.path().join("group"),
            nsswitch: dir.path().join("nsswitch.conf"),
            getent: "/nonexistent/getent".into(),
        };
        let mut c = AccessConfig {
            min_uid: 1000,
            exempt: vec!["admin".into()],
            ..AccessConfig::default()
        };
        assert!(!c.caged(&db, &user("root", 0, 0)).unwrap());
        assert!(!c.caged(&db, &user("daemon", 1, 1)).unwrap());
        assert!(!c.caged(&db, &user("admin", 1001, 1001)).unwrap());
        assert!(c.caged(&db, &user("alice", 1002, 3001)).unwrap());
        c.group = Some("tenants".into());
        assert!(!c.caged(&db, &user("alice", 1002, 3001)).unwrap());
        assert!(
            c.caged(&db, &user("bob", 1003, 1003)).unwrap(),
            "supplementary member"
        );
        assert!(
            c.caged(&db, &user("carol", 1004, 3000)).unwrap(),
            "primary group"
        );
        c.group = Some("nosuchgroup".into());
        assert!(!c.caged(&db, &user("bob", 1003, 1003)).unwrap());
    }
}
