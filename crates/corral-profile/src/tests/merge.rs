//! Tenant overrides on top of the template; limits over the plan.

use super::example_plan;
use super::load::config;
use crate::load;
use crate::plan::{MountOp, NetMode, Origin, SeccompAction, TmpPlan};
use std::fs;
use std::path::PathBuf;

const TEMPLATE: &str = r#"hostname = "web"
[namespaces]
pid = false
net = "none"
[env]
keep = ["LANG", "TERM"]
[env.set]
PATH = "/usr/bin:/bin"
A = "1"
[seccomp]
action = "kill"
deny = ["personality"]
[[mount]]
type = "ro-bind"
src = "/usr"
[[mount]]
type = "proc"
dst = "/proc"
"#;

const OVERRIDE: &str = r#"hostname = "shop"
[namespaces]
net = "host"
[env]
keep = ["TERM", "TZ"]
[env.set]
A = "2"
B = "$USER"
[seccomp]
deny = ["keyctl"]
[[mount]]
type = "tmpfs"
dst = "/cache"
"#;

#[test]
fn override_sets_merges_and_appends() {
    let plan = example_plan(TEMPLATE, Some(OVERRIDE)).unwrap();
    assert_eq!(plan.hostname, "shop");
    assert_eq!(plan.namespaces.net, NetMode::Host, "set by the override");
    assert!(
        !plan.namespaces.pid,
        "kept from the template: tables merge key by key"
    );
    assert_eq!(
        plan.env.keep,
        ["LANG", "TERM", "TZ"],
        "keep lists are a union"
    );
    let set: Vec<(&str, &str)> = plan
        .env
        .set
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        set,
        [("A", "2"), ("B", "example"), ("PATH", "/usr/bin:/bin")],
        "set maps overlay"
    );
    assert_eq!(plan.seccomp.action, SeccompAction::Kill);
    assert_eq!(
        plan.seccomp.deny,
        ["keyctl"],
        "lists other than env.keep are replaced"
    );
    assert_eq!(
        plan.mounts,
        [
            MountOp::Bind {
                src: "/usr".into(),
                dst: "/usr".into(),
                ro: true,
                dev: false,
                optional: false,
                create: false
            },
            MountOp::Proc {
                dst: "/proc".into()
            },
            MountOp::Tmpfs {
                dst: "/cache".into(),
                size: None,
                mode: 0o755
            },
        ]
    );
    assert_eq!(
        plan.sources,
        [
            PathBuf::from(super::PROFILE),
            PathBuf::from("/etc/corral/tenants/example.toml"),
            PathBuf::from(crate::BUILTIN_PLAN)
        ]
    );
}

#[test]
fn errors_in_the_override_name_the_override() {
    let err = example_plan(
        TEMPLATE,
        Some("[[mount]]\ntype = \"dir\"\ndst = \"/a/../b\"\n"),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "/etc/corral/tenants/example.toml:3:7: mount[0].dst: expected an absolute path without \"..\" \
         components; found \"/a/../b\""
    );
}

#[test]
fn tmp_kind_change_drops_the_old_kinds_settings() {
    let template = "[tmp]\nkind = \"disk\"\ndir = \"/srv/tmp/$USER\"\n";
    let plan = example_plan(template, Some("[tmp]\nkind = \"tmpfs\"\nsize = \"32M\"\n")).unwrap();
    assert_eq!(
        plan.tmp,
        TmpPlan::Tmpfs {
            size: Some(32 << 20)
        }
    );
    let plan = example_plan(template, Some("[tmp]\ndir = \"/big/$USER\"\n")).unwrap();
    assert_eq!(
        plan.tmp,
        TmpPlan::Disk {
            host_dir: "/big/example".into(),
            size: None
        }
    );
    // A size on a disk /tmp: its project quota.
    let plan = example_plan(template, Some("[tmp]\nsize = \"32M\"\n")).unwrap();
    assert_eq!(
        plan.tmp,
        TmpPlan::Disk {
            host_dir: "/srv/tmp/example".into(),
            size: Some(32 << 20)
        }
    );
}

#[test]
fn limits_overlay_plan_then_template_then_tenant() {
    let dir = config();
    let cfg = dir.path();
    fs::write(
        cfg.join("plans/gold.toml"),
        "cpu = \"200%\"\nprocesses = 300\n\n[memory]\nmax = \"4G\"\nhigh = \"3G\"\n[io]\nread_bps = \"10M\"\n",
    )
    .unwrap();
    fs::write(
        cfg.join("profile.toml"),
        "plan = \"default\"\n[limits]\nmemory.max = \"512M\"\nprocesses = 50\n",
    )
    .unwrap();
    fs::write(
        cfg.join("tenants/nobody.toml"),
        "plan = \"gold\"\n\n[limits]\ncpu = \"150%\"\nmemory = { high = \"2G\" }\n[limits.io]\nread_bps = 5000\n",
    )
    .unwrap();
    let plan = load(cfg, "nobody").unwrap();
    assert_eq!(plan.limits.limits_plan, "gold", "the tenant chose the plan");
    let gold = cfg.join("plans/gold.toml");
    let profile = cfg.join("profile.toml");
    let tenant = cfg.join("tenants/nobody.toml");
    let got: Vec<(&str, String, Origin)> = plan
        .limits
        .values
        .iter()
        .map(|(k, (v, o))| (k.as_str(), v.to_string(), o.clone()))
        .collect();
    let at = |file: &PathBuf, line| Origin {
        file: file.clone(),
        line,
    };
    assert_eq!(
        got,
        [
            ("cpu", "\"150%\"".into(), at(&tenant, 4)),
            ("io.read_bps", "5000".into(), at(&tenant, 7)),
            ("memory.high", "\"2G\"".into(), at(&tenant, 5)),
            ("memory.max", "\"512M\"".into(), at(&profile, 3)),
            ("processes", "50".into(), at(&profile, 4)),
        ]
    );
    assert_eq!(plan.sources, [profile, tenant, gold]);
}

#[test]
fn a_limit_replaces_what_is_nested_in_or_above_it() {
    let plan = example_plan("[limits]\nmemory = \"1G\"\n", None).unwrap();
    let keys: Vec<&String> = plan.limits.values.keys().collect();
    assert!(
        keys.contains(&&"memory".to_string()) && !keys.iter().any(|k| k.starts_with("memory.")),
        "{keys:?}"
    );
    let plan = example_plan(
        "[limits]\nmemory = \"1G\"\n",
        Some("[limits.memory]\nmax = \"2G\"\n"),
    )
    .unwrap();
    assert!(!plan.limits.values.contains_key("memory"));
    assert_eq!(
        plan.limits.values["memory.max"].0,
        toml::Value::String("2G".into())
    );
}

#[test]
fn check_only_knows_the_default_plan() {
    let plan = example_plan("plan = \"gold\"\n[limits]\ncpu = \"10%\"\n", None).unwrap();
    assert_eq!(plan.limits.limits_plan, "gold");
    assert_eq!(plan.limits.values.len(), 1);
}

#[test]
fn shell_from_profile_override_or_passwd() {
    // Not named: the passwd shell.
    let p = super::example_plan("", None).unwrap();
    assert_eq!(p.tenant.shell, std::path::Path::new("/bin/sh"));
    // The template names one, the override another: the override wins.
    let p = super::example_plan(
        "shell = \"/bin/bash\"\n",
        Some("shell = \"$HOME/bin/zsh\"\n"),
    )
    .unwrap();
    assert_eq!(
        p.tenant.shell,
        std::path::Path::new("/home/example/bin/zsh")
    );
    let e = super::example_plan("shell = \"bash\"\n", None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("/etc/corral/profile.toml:1:9"), "{e}");
}

#[test]
fn corral_shell_in_passwd_means_bash_inside() {
    assert_eq!(
        crate::build::real_shell(std::path::Path::new("/usr/sbin/corral-shell")),
        std::path::Path::new("/bin/bash")
    );
    assert_eq!(
        crate::build::real_shell(std::path::Path::new("/bin/zsh")),
        std::path::Path::new("/bin/zsh")
    );
}

#[test]
fn only_the_primary_group_applies_unless_the_profile_keeps_others() {
    use crate::build::{assemble, Input};
    use std::path::Path;
    let plan = |template: &str, over: Option<&str>| -> Vec<String> {
        let mut t = crate::tenant::example();
        t.groups = vec![
            ("example".into(), 1000),
            ("ssl-cert".into(), 112),
            ("media".into(), 2000),
        ];
        let over = over.map(|text| Input {
            text,
            path: Path::new("/etc/corral/tenants/example.toml"),
        });
        let template = Input {
            text: template,
            path: Path::new(super::PROFILE),
        };
        let p = assemble(
            template,
            over,
            t,
            crate::limits::LimitsPlanFile::TemplateOnly,
        )
        .unwrap();
        p.tenant.groups.into_iter().map(|(n, _)| n).collect()
    };
    assert_eq!(plan("", None), ["example"]);
    assert_eq!(plan("groups = [\"media\"]\n", None), ["example", "media"]);
    // An override replaces the template's list; a group the tenant is not
    // in is not added.
    assert_eq!(
        plan(
            "groups = [\"media\"]\n",
            Some("groups = [\"ssl-cert\", \"wheel\"]\n")
        ),
        ["example", "ssl-cert"]
    );
    let e = super::check_err("groups = [\"a:b\"]\n");
    assert!(e.contains("a group name"), "{e}");
}
