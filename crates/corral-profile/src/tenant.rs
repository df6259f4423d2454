//! Tenants: Unix users from the passwd database, with all their groups.

use crate::error::ProfileError;
use crate::plan::Tenant;
use crate::values::{is_tenant_name, TENANT_NAME};
use corral_users::Db;
use std::path::PathBuf;

fn refuse(name: &str, expected: &str, found: impl Into<String>) -> ProfileError {
    ProfileError::Tenant {
        name: name.to_string(),
        expected: expected.to_string(),
        found: found.into(),
    }
}

/// Check the name's form only (no lookup).
pub(crate) fn check_name(name: &str) -> Result<(), ProfileError> {
    if is_tenant_name(name) {
        Ok(())
    } else {
        Err(refuse(name, TENANT_NAME, format!("{name:?}")))
    }
}

/// Look a tenant up: it must be a known, non-root user.
pub(crate) fn lookup(name: &str) -> Result<Tenant, ProfileError> {
    check_name(name)?;
    let db = Db::system();
    let user = match db.user_by_name(name) {
        Ok(Some(user)) => user,
        Ok(None) => {
            return Err(refuse(
                name,
                "a user in the passwd database",
                "no such user",
            ))
        }
        Err(e) => {
            return Err(refuse(
                name,
                "a user in the passwd database",
                format!("lookup failed: {e}"),
            ))
        }
    };
    if user.uid == 0 {
        return Err(refuse(
            name,
            "a user other than root (uid 0 cannot be a tenant)",
            "uid 0",
        ));
    }
    if user.home.to_str().is_none() {
        return Err(refuse(
            name,
            "a home directory that is valid UTF-8",
            format!("{:?}", user.home),
        ));
    }
    let groups =
        groups(&db, &user.name, user.gid).map_err(|e| refuse(name, "a readable group list", e))?;
    Ok(Tenant {
        name: user.name,
        uid: user.uid,
        gid: user.gid,
        home: user.home,
        shell: user.shell,
        groups,
    })
}

/// Every group of the user, primary first; groups without a name in the
/// group database are named by their number.
fn groups(db: &Db, user: &str, primary: u32) -> Result<Vec<(String, u32)>, String> {
    let gids = db
        .group_list(user, primary)
        .map_err(|e| format!("group list: {e}"))?;
    gids.into_iter()
        .map(|gid| {
            let name = match db.group_by_gid(gid) {
                Ok(Some(group)) => group.name,
                Ok(None) => gid.to_string(),
                Err(e) => return Err(format!("group {gid} lookup failed: {e}")),
            };
            Ok((name, gid))
        })
        .collect()
}

/// The tenant templates are checked against when no real tenant is given.
pub(crate) fn example() -> Tenant {
    Tenant {
        name: "example".into(),
        uid: 1000,
        gid: 1000,
        home: PathBuf::from("/home/example"),
        shell: PathBuf::from("/bin/sh"),
        groups: vec![("example".into(), 1000)],
    }
}
