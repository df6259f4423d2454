//! `corral tenant remove` and `corral gc` (as root, real sandboxes): they
//! delete exactly what corral keeps of one tenant (state, cgroup, disk
//! /tmp, override, suspension record) and nothing of another.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn cgroup_dirs(env: &Env, tenant: &str) -> Vec<PathBuf> {
    std::fs::read_dir("/sys/fs/cgroup")
        .unwrap()
        .flatten()
        .map(|e| e.path().join(&env.parent).join(tenant))
        .filter(|p| p.is_dir())
        .collect()
}

#[test]
fn tenant_remove_deletes_exactly_that_tenants_corral_state() {
    let env = Env::new();
    env.default_profile_with("");
    env.write_config(&format!("tenants/{T1}.toml"), "# T1's own\n");
    env.write_config(&format!("tenants/{T2}.toml"), "[limits]\nprocesses = 50\n");
    env.ok(&["up", T1]);
    env.ok(&["up", T2]);
    env.ok(&["suspend", T2, "--reason", "closing"]);
    let tmp = |t: &str| env.state_dir().join("tmp").join(t);
    let over = |t: &str| env.config.path().join(format!("tenants/{t}.toml"));
    let record = env.config.path().join(format!("suspended/{T2}.json"));
    assert!(tmp(T2).is_dir() && record.exists() && !cgroup_dirs(&env, T2).is_empty());

    let dry = env.ok(&["tenant", "remove", T2, "--dry-run"]);
    assert!(dry.contains("would remove"), "{dry}");
    assert!(
        tmp(T2).is_dir() && over(T2).exists(),
        "a dry run removes nothing"
    );
    assert!(env.ok(&["ls"]).contains(T2));

    let out = env.ok(&["tenant", "remove", T2]);
    println!("{out}");
    assert!(!tmp(T2).exists(), "its /tmp: {out}");
    assert!(!over(T2).exists() && !record.exists(), "its files: {out}");
    assert!(
        !env.state_dir().join("tenants").join(T2).exists(),
        "its state"
    );
    assert!(cgroup_dirs(&env, T2).is_empty(), "its cgroup");
    assert!(!env.ok(&["ls"]).contains(T2));
    // The other tenant: untouched.
    assert!(env.ok(&["ls"]).contains(T1));
    assert!(tmp(T1).is_dir() && over(T1).exists() && !cgroup_dirs(&env, T1).is_empty());
    env.ok(&["run", T1, "--", "/bin/true"]);
    // Again: nothing left.
    let again = env.ok(&["tenant", "remove", T2]);
    assert!(again.contains("keeps nothing"), "{again}");
}

/// A Unix account made for the test and deleted by it.
struct TempUser {
    name: String,
    home: PathBuf,
}

impl TempUser {
    fn new() -> TempUser {
        let name = format!("corral-gc{}", std::process::id() % 100000);
        let st = Command::new("useradd")
            .args(["--create-home", "--shell", "/bin/sh", "--user-group", &name])
            .status()
            .unwrap();
        assert!(st.success(), "useradd {name}");
        let home = home_of(&name);
        std::fs::set_permissions(&home, std::os::unix::fs::PermissionsExt::from_mode(0o711))
            .unwrap();
        TempUser { name, home }
    }
    fn delete(&self) {
        let _ = Command::new("userdel").arg(&self.name).status();
    }
}

impl Drop for TempUser {
    fn drop(&mut self) {
        self.delete();
        if self.home.starts_with("/home") && self.home != Path::new("/home") {
            let _ = std::fs::remove_dir_all(&self.home);
        }
    }
}

#[test]
fn gc_collects_deleted_accounts_and_nothing_else() {
    let env = Env::new();
    env.default_profile_with("");
    let user = TempUser::new();
    let u = user.name.clone();
    env.write_config(&format!("tenants/{u}.toml"), "[limits]\nprocesses = 40\n");
    env.write_config(&format!("tenants/{T1}.toml"), "# T1's own\n");
    env.ok(&["up", &u]);
    env.ok(&["up", T1]);
    let tmp = |t: &str| env.state_dir().join("tmp").join(t);
    let sessions = |t: &str| env.sessions_dir().join(t);
    assert!(tmp(&u).is_dir() && sessions(&u).is_dir());
    // Taken down first: corral then knows its directories from the
    // profile alone once the account is gone.
    env.ok(&["down", &u]);
    // Nothing to collect while every account exists.
    let o = env.ok(&["gc"]);
    assert!(o.contains("nothing to collect"), "{o}");
    // The panel deletes the account without telling corral.
    user.delete();
    // A directory at the same place that an existing account owns is not
    // the deleted account's.
    let other = format!("{u}x");
    std::fs::create_dir(sessions(&other)).unwrap();
    std::os::unix::fs::lchown(sessions(&other), Some(uid_of(T2)), None).unwrap();
    let dry = env.ok(&["gc", "--dry-run"]);
    assert!(dry.contains(&u) && dry.contains("would remove"), "{dry}");
    assert!(tmp(&u).is_dir(), "a dry run removes nothing");
    let out = env.ok(&["gc"]);
    println!("{out}");
    assert!(!tmp(&u).exists(), "its /tmp: {out}");
    assert!(!sessions(&u).exists(), "its PHP sessions: {out}");
    assert!(
        sessions(&other).is_dir(),
        "another account's directory: {out}"
    );
    std::fs::remove_dir(sessions(&other)).unwrap();
    assert!(!env.config.path().join(format!("tenants/{u}.toml")).exists());
    assert!(!env.state_dir().join("tenants").join(&u).exists());
    assert!(cgroup_dirs(&env, &u).is_empty());
    assert!(!out.contains(T1), "{out}");
    assert!(env.ok(&["ls"]).contains(T1));
    assert!(
        tmp(T1).is_dir()
            && env
                .config
                .path()
                .join(format!("tenants/{T1}.toml"))
                .exists()
    );
}

#[test]
fn tmp_clean_deletes_old_entries_as_the_tenant_and_follows_no_link() {
    let env = Env::new();
    env.default_profile_with("");
    env.ok(&["up", T1]);
    let tmp = env.state_dir().join("tmp").join(T1);
    let uid = uid_of(T1);
    let target = tempfile::Builder::new()
        .prefix("corral-tmpclean-target")
        .tempfile_in("/var/tmp")
        .unwrap();
    let mk = |rel: &str, dir: bool| {
        let p = tmp.join(rel);
        if dir {
            std::fs::create_dir(&p).unwrap();
        } else {
            std::fs::write(&p, "x").unwrap();
        }
        std::os::unix::fs::lchown(&p, Some(uid), Some(uid)).unwrap();
        p
    };
    let old = mk("old.txt", false);
    let new = mk("new.txt", false);
    let old_dir = mk("olddir", true);
    let inner = mk("olddir/inner", false);
    let link = tmp.join("link");
    std::os::unix::fs::symlink(target.path(), &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(uid), Some(uid)).unwrap();
    for p in [&old, &inner, &old_dir, &link] {
        let st = Command::new("touch")
            .args(["-h", "-d", "10 days ago"])
            .arg(p)
            .status()
            .unwrap();
        assert!(st.success());
    }
    let dry = env.ok(&["tmp-clean", T1, "--older-than", "7", "--dry-run"]);
    assert!(dry.contains("would delete"), "{dry}");
    assert!(
        old.exists() && link.symlink_metadata().is_ok(),
        "a dry run deletes nothing"
    );
    let out = env.ok(&["tmp-clean", T1, "--older-than", "7"]);
    println!("{out}");
    assert!(!old.exists() && !inner.exists(), "old files deleted: {out}");
    assert!(link.symlink_metadata().is_err(), "the old link deleted");
    assert!(target.path().exists(), "its target outside untouched");
    assert!(new.exists(), "a new file kept");
    // An old directory whose old content went is empty: it goes too.
    assert!(!old_dir.exists(), "the emptied old directory deleted");
}
