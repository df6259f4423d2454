//! `load` against the real passwd database and files in a config directory.

use crate::plan::{MountOp, NetMode};
use crate::{check_str, load, ProfileError, BUILTIN_PLAN, BUILTIN_PROFILE, DEFAULT_PROFILE};
use std::fs;
use std::path::{Path, PathBuf};

pub(crate) fn config() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("tenants")).unwrap();
    fs::create_dir(dir.path().join("plans")).unwrap();
    dir
}

#[test]
fn default_profile_loads_for_nobody() {
    let dir = config();
    let plan = load(dir.path(), "nobody").unwrap();
    // As the system's getent (all NSS sources, dynamically linked) sees it.
    let out = std::process::Command::new("getent")
        .args(["passwd", "nobody"])
        .output()
        .unwrap();
    let nobody =
        corral_users::parse_passwd_line(std::str::from_utf8(&out.stdout).unwrap().trim()).unwrap();
    assert_eq!(plan.tenant.name, "nobody");
    assert_eq!(plan.tenant.uid, nobody.uid);
    assert_eq!(plan.tenant.gid, nobody.gid);
    assert_eq!(plan.tenant.home, nobody.home);
    assert_eq!(plan.tenant.groups[0].1, nobody.gid, "primary group first");
    assert_eq!(plan.hostname, "nobody");
    assert_eq!(
        plan.sources,
        [PathBuf::from(BUILTIN_PROFILE), PathBuf::from(BUILTIN_PLAN)]
    );
    assert_eq!(plan.namespaces.net, NetMode::Private);
    let home = nobody.home.clone();
    assert!(plan.mounts.contains(&MountOp::Bind {
        src: home.clone(),
        dst: home,
        ro: false,
        dev: false,
        optional: false,
        create: false
    }));
    assert_eq!(
        plan.mounts[0],
        MountOp::Bind {
            src: "/usr".into(),
            dst: "/usr".into(),
            ro: true,
            dev: false,
            optional: false,
            create: false
        }
    );
    assert!(plan.mounts.contains(&MountOp::Proc {
        dst: "/proc".into()
    }));
    // Nothing of the host that the default promises to keep out.
    // Its own PHP session directory is the one place under /var/lib.
    let own: Vec<&MountOp> = plan
        .mounts
        .iter()
        .filter(|m| matches!(m, MountOp::Bind { create: true, .. }))
        .collect();
    assert_eq!(
        own,
        [&MountOp::Bind {
            src: "/var/lib/corral/php-sessions/nobody".into(),
            dst: "/var/lib/php/sessions".into(),
            ro: false,
            dev: false,
            optional: false,
            create: true,
        }]
    );
    for op in &plan.mounts {
        if let MountOp::Bind { create: true, .. } = op {
            continue;
        }
        if let MountOp::Bind { src, .. } | MountOp::Copy { src, .. } = op {
            for private in [
                "/root",
                "/sys",
                "/run",
                "/var/lib",
                "/home",
                "/etc/passwd",
                "/etc/shadow",
                "/tmp",
            ] {
                assert!(
                    !src.starts_with(private) || src == &nobody.home,
                    "{src:?} exposed"
                );
            }
            assert!(src != Path::new("/etc") && src != Path::new("/var") && src != Path::new("/"));
        }
    }
    let limits = &plan.limits.values;
    assert_eq!(limits["cpu"].0, toml::Value::String("100%".into()));
    assert_eq!(limits["memory.max"].0, toml::Value::String("1G".into()));
    assert_eq!(limits["processes"].0, toml::Value::Integer(100));
    assert_eq!(limits["io.read_bps"].0, toml::Value::String("1M".into()));
    assert_eq!(limits["io.write_bps"].0, toml::Value::String("1M".into()));
    assert_eq!(limits["io.read_iops"].0, toml::Value::Integer(1024));
    assert_eq!(limits["io.write_iops"].0, toml::Value::Integer(1024));
    assert_eq!(limits["entry_processes"].0, toml::Value::Integer(20));
    assert_eq!(limits["rlimits.nofile"].0, toml::Value::Integer(1024));
    assert_eq!(limits.len(), 9);
    assert_eq!(limits["memory.max"].1.file, PathBuf::from(BUILTIN_PLAN));
    check_str(DEFAULT_PROFILE, Path::new(BUILTIN_PROFILE)).unwrap();
}

#[test]
fn config_files_are_used() {
    let dir = config();
    fs::write(dir.path().join("profile.toml"), "hostname = \"box\"\n").unwrap();
    fs::write(dir.path().join("plans/default.toml"), "cpu = \"50%\"\n").unwrap();
    let plan = load(dir.path(), "nobody").unwrap();
    crate::check_file(&dir.path().join("profile.toml")).unwrap();
    assert_eq!(plan.hostname, "box");
    assert!(plan.mounts.is_empty());
    assert_eq!(
        plan.sources,
        [
            dir.path().join("profile.toml"),
            dir.path().join("plans/default.toml")
        ]
    );
    assert_eq!(
        plan.limits.values.len(),
        1,
        "a plans/default.toml replaces the built-in plan"
    );
}

fn tenant_err(name: &str) -> ProfileError {
    load(config().path(), name).unwrap_err()
}

#[test]
fn root_is_refused() {
    assert_eq!(
        tenant_err("root").to_string(),
        "tenant \"root\": expected a user other than root (uid 0 cannot be a tenant); found uid 0"
    );
}

#[test]
fn unknown_user_is_refused() {
    assert_eq!(
        tenant_err("no_such_user_x1").to_string(),
        "tenant \"no_such_user_x1\": expected a user in the passwd database; found no such user"
    );
}

#[test]
fn bad_tenant_names_are_refused() {
    for name in [
        "",
        "Admin",
        "1abc",
        "../etc",
        "a b",
        "a/b",
        &"a".repeat(33),
        "é",
    ] {
        let err = tenant_err(name);
        assert!(
            matches!(err, ProfileError::Tenant { .. }),
            "{name:?}: {err}"
        );
        assert_eq!(
            err.to_string(),
            format!("tenant {name:?}: expected a user name matching [a-z_][a-z0-9_.-]{{0,31}}; found {name:?}")
        );
    }
    assert!(crate::tenant::check_name(&"a".repeat(32)).is_ok());
    assert!(crate::tenant::check_name("_w.e-b9").is_ok());
}

#[test]
fn unknown_plan_points_at_the_plan_key() {
    let dir = config();
    fs::write(
        dir.path().join("profile.toml"),
        "# plans\n\nplan = \"gold\"\n",
    )
    .unwrap();
    let err = load(dir.path(), "nobody").unwrap_err().to_string();
    let plans = dir.path().join("plans");
    assert_eq!(
        err,
        format!(
            "{}:3:8: plan: expected the name of a plan in {} (or \"default\"); found \"gold\": {} does not exist",
            dir.path().join("profile.toml").display(),
            plans.display(),
            plans.join("gold.toml").display()
        )
    );
}

#[test]
fn errors_in_plan_files_name_the_plan_file() {
    let dir = config();
    fs::write(dir.path().join("plans/default.toml"), "cpu = \n").unwrap();
    let err = load(dir.path(), "nobody").unwrap_err();
    let at = err.location().unwrap();
    assert_eq!(
        (at.file.clone(), at.line, at.column),
        (dir.path().join("plans/default.toml"), 1, 7)
    );
}

#[test]
fn unreadable_files_are_io_errors() {
    let dir = config();
    fs::create_dir(dir.path().join("profile.toml")).unwrap();
    let err = load(dir.path(), "nobody").unwrap_err();
    assert!(
        matches!(err, ProfileError::Io { ref path, .. } if path == &dir.path().join("profile.toml")),
        "{err}"
    );
    let err = crate::check_file(&dir.path().join("missing.toml")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("{}: ", dir.path().join("missing.toml").display())),
        "{err}"
    );
}

#[test]
fn system_accounts_are_not_tenants_unless_allowed() {
    // daemon (uid 1) is in every Debian passwd.
    let e = tenant_err("daemon").to_string();
    assert!(e.contains("found uid 1 (a system account)"), "{e}");
    assert!(e.contains("UID_MIN of /etc/login.defs"), "{e}");
    let dir = config();
    fs::write(
        dir.path().join("profile.toml"),
        DEFAULT_PROFILE.replacen(
            "plan = \"default\"",
            "plan = \"default\"\ntenant_allow = [\"daemon\"]",
            1,
        ),
    )
    .unwrap();
    let plan = load(dir.path(), "daemon").unwrap();
    assert_eq!(plan.tenant.uid, 1);
    // A raised minimum refuses nobody too; only the template may set it.
    fs::write(
        dir.path().join("profile.toml"),
        DEFAULT_PROFILE.replacen(
            "plan = \"default\"",
            "plan = \"default\"\ntenant_min_uid = 70000",
            1,
        ),
    )
    .unwrap();
    let e = load(dir.path(), "nobody").unwrap_err().to_string();
    assert!(
        e.contains("from 70000 (tenant_min_uid of the profile)"),
        "{e}"
    );
    fs::write(
        dir.path().join("tenants/nobody.toml"),
        "tenant_min_uid = 1\n",
    )
    .unwrap();
    let e = load(dir.path(), "nobody").unwrap_err().to_string();
    assert!(e.contains("only in the template"), "{e}");
}

#[test]
fn tmp_dir_of_reads_the_files_without_the_account() {
    use crate::tmp_dir_of;
    let dir = config();
    assert_eq!(
        tmp_dir_of(dir.path(), "gone-user"),
        Some(PathBuf::from("/var/lib/corral/tmp/gone-user"))
    );
    fs::write(
        dir.path().join("tenants/gone-user.toml"),
        "[tmp]\ndir = \"/srv/tmp/$USER\"\n",
    )
    .unwrap();
    assert_eq!(
        tmp_dir_of(dir.path(), "gone-user"),
        Some(PathBuf::from("/srv/tmp/gone-user"))
    );
    fs::write(
        dir.path().join("tenants/gone-user.toml"),
        "[tmp]\nkind = \"tmpfs\"\n",
    )
    .unwrap();
    assert_eq!(tmp_dir_of(dir.path(), "gone-user"), None);
    fs::write(
        dir.path().join("tenants/gone-user.toml"),
        "[tmp]\ndir = \"$HOME/tmp\"\n",
    )
    .unwrap();
    assert_eq!(
        tmp_dir_of(dir.path(), "gone-user"),
        None,
        "needs more than the name"
    );
}

#[test]
fn created_dirs_of_reads_the_files_without_the_account() {
    use crate::created_dirs_of;
    let dir = config();
    // The template's own (PHP sessions, when the template has it) come
    // first; an override adds its `create = true` binds, expanded by name
    // only: one that needs `$HOME` is left out.
    let base = created_dirs_of(dir.path(), "gone-user");
    assert_eq!(
        base,
        [PathBuf::from("/var/lib/corral/php-sessions/gone-user")],
        "the built-in profile's PHP sessions"
    );
    fs::write(
        dir.path().join("tenants/gone-user.toml"),
        "[[mount]]\ntype = \"bind\"\nsrc = \"/srv/own/$USER\"\ndst = \"/own\"\ncreate = true\n\
         [[mount]]\ntype = \"bind\"\nsrc = \"$HOME/x\"\ndst = \"/x\"\ncreate = true\n\
         [[mount]]\ntype = \"bind\"\nsrc = \"/srv/shared\"\ndst = \"/shared\"\n",
    )
    .unwrap();
    let mut want = base.clone();
    want.push(PathBuf::from("/srv/own/gone-user"));
    assert_eq!(created_dirs_of(dir.path(), "gone-user"), want);
    assert!(!want.iter().any(|p| p.starts_with("/srv/shared")));
}
