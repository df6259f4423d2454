//! Variable expansion in every string value.

use super::example_plan;
use crate::doc::L;
use crate::error::Location;
use crate::expand::expand;
use crate::plan::{MountOp, SeccompPlan, TmpPlan};
use crate::tenant;
use std::path::PathBuf;

fn x(s: &str) -> Result<String, String> {
    let l = L {
        v: s.to_string(),
        at: Location {
            file: PathBuf::from("t.toml"),
            line: 1,
            column: 1,
        },
        key: "k".into(),
    };
    expand(&l, &tenant::example()).map_err(|e| e.to_string())
}

#[test]
fn variables() {
    assert_eq!(
        x("$USER:$UID:$GID:$HOME").unwrap(),
        "example:1000:1000:/home/example"
    );
    assert_eq!(x("${USER}x ${HOME}/y").unwrap(), "examplex /home/example/y");
    assert_eq!(
        x("cost: $$5, $$$USER, $$$$").unwrap(),
        "cost: $5, $example, $$"
    );
    assert_eq!(x("no variables").unwrap(), "no variables");
    assert_eq!(x("").unwrap(), "");
    assert_eq!(x("é$USER€").unwrap(), "éexample€");
}

#[test]
fn not_variables() {
    assert!(x("$USERNAME").unwrap_err().ends_with("found $USERNAME"));
    assert!(
        x("$user").unwrap_err().ends_with("found $user"),
        "names are case-sensitive"
    );
    assert!(x("${}")
        .unwrap_err()
        .ends_with("found a lone \"$\" in \"${}\""));
    assert!(x("a $ b")
        .unwrap_err()
        .ends_with("found a lone \"$\" in \"a $ b\""));
    assert!(x("${USER")
        .unwrap_err()
        .ends_with("found unclosed \"${\" in \"${USER\""));
    assert!(x("${US ER}").unwrap_err().ends_with("found $US ER"));
}

#[test]
fn every_string_value_is_expanded() {
    let template = r#"
hostname = "h$UID"
workdir = "$HOME/www"
[env.set]
GREETING = "hi $USER"
[tmp]
dir = "/var/tmp/corral/${USER}"
[[mount]]
type = "bind"
src = "/srv/$USER"
dst = "$HOME/srv"
[[mount]]
type = "symlink"
target = "$HOME/www"
dst = "/www"
[[mount]]
type = "file"
dst = "/etc/motd"
content = "Welcome $USER ($UID:$GID), $$PATH is yours\n"
"#;
    let plan = example_plan(template, None).unwrap();
    assert_eq!(plan.hostname, "h1000");
    assert_eq!(plan.workdir, PathBuf::from("/home/example/www"));
    assert_eq!(plan.env.set["GREETING"], "hi example");
    assert_eq!(
        plan.tmp,
        TmpPlan::Disk {
            host_dir: PathBuf::from("/var/tmp/corral/example"),
            size: None
        }
    );
    assert_eq!(
        plan.mounts,
        vec![
            MountOp::Bind {
                src: "/srv/example".into(),
                dst: "/home/example/srv".into(),
                ro: false,
                dev: false,
                optional: false,
                create: false
            },
            MountOp::Symlink {
                target: "/home/example/www".into(),
                dst: "/www".into()
            },
            MountOp::File {
                dst: "/etc/motd".into(),
                content: "Welcome example (1000:1000), $PATH is yours\n".into(),
                mode: 0o644
            },
        ]
    );
}

#[test]
fn paths_are_normalised() {
    let template =
        "workdir = \"//home/./$USER/\"\n[[mount]]\ntype = \"ro-bind-try\"\nsrc = \"/usr//lib/\"\n\
                    [[mount]]\ntype = \"tmpfs\"\ndst = \"/run/\"\nsize = \"64M\"\nmode = 0o1777\n";
    let plan = example_plan(template, None).unwrap();
    assert_eq!(plan.workdir, PathBuf::from("/home/example"));
    assert_eq!(
        plan.mounts,
        vec![
            MountOp::Bind {
                src: "/usr/lib".into(),
                dst: "/usr/lib".into(),
                ro: true,
                dev: false,
                optional: true,
                create: false
            },
            MountOp::Tmpfs {
                dst: "/run".into(),
                size: Some(64 << 20),
                mode: 0o1777
            },
        ]
    );
}

#[test]
fn the_default_profile_has_the_default_seccomp_policy() {
    let plan = example_plan(crate::DEFAULT_PROFILE, None).unwrap();
    assert_eq!(plan.seccomp, SeccompPlan::default_policy());
}

#[test]
fn defaults_of_an_empty_template() {
    let plan = example_plan("", None).unwrap();
    assert_eq!(plan.hostname, "example");
    assert_eq!(plan.workdir, PathBuf::from("/home/example"));
    assert_eq!(plan.env.keep, ["LANG", "LC_ALL", "TZ", "TERM"]);
    assert_eq!(plan.env.set["HOME"], "/home/example");
    assert_eq!(plan.env.set["LOGNAME"], "example");
    assert_eq!(plan.env.set["PATH"], "/usr/local/bin:/usr/bin:/bin");
    assert_eq!(
        plan.tmp,
        TmpPlan::Disk {
            host_dir: "/var/lib/corral/tmp/example".into(),
            size: None
        }
    );
    assert!(plan.namespaces.mount && plan.namespaces.pid && !plan.namespaces.user);
    assert_eq!(plan.seccomp, SeccompPlan::default_policy());
    assert!(plan.mounts.is_empty());
    assert_eq!(plan.limits.limits_plan, "default");
    assert_eq!(
        plan.limits.values["memory.max"].0,
        toml::Value::String("1G".into())
    );
}
