//! digest, render, and robustness of check_str.

use super::{example_plan, PROFILE};
use crate::{check_str, render, DEFAULT_PROFILE};
use std::path::Path;

const FANCY: &str = r#"
hostname = "web"
[tmp]
kind = "tmpfs"
size = "128M"
[seccomp]
allow = ["personality"]
[limits]
cpu = 1.5
weird = [1, "two", { three = 3 }]
"quoted key" = true
[[mount]]
type = "file"
dst = "/etc/motd"
content = "Say \"$$HOME\"\tis $HOME\nbye\u0001"
mode = "0600"
[[mount]]
type = "dev-bind-try"
src = "/dev/fuse"
[[mount]]
type = "copy"
src = "/etc/hosts"
dst = "/etc/hosts"
mode = 0o640
[[mount]]
type = "hide"
dst = "/usr/bin/gcc"
[[mount]]
type = "remount-ro"
dst = "/usr"
"#;

#[test]
fn digest_is_stable_and_follows_the_plan() {
    let a = example_plan(FANCY, None).unwrap();
    let b = example_plan(FANCY, None).unwrap();
    assert_eq!(a.digest(), b.digest());
    assert_eq!(a.digest().len(), 64);
    assert!(a
        .digest()
        .bytes()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    let c = example_plan(
        &FANCY.replace("hostname = \"web\"", "hostname = \"web2\""),
        None,
    )
    .unwrap();
    assert_ne!(a.digest(), c.digest());
    let mut d = a.clone();
    d.mounts.pop();
    assert_ne!(a.digest(), d.digest());
}

#[test]
fn canonical_json_sorts_keys_at_every_level() {
    let value: serde_json::Value =
        serde_json::from_str(r#"{"b": 1, "a": [{"d": "x\"", "c": null}, 2.5]}"#).unwrap();
    let mut out = String::new();
    crate::digest::canonical(&value, &mut out);
    assert_eq!(out, r#"{"a":[{"c":null,"d":"x\""},2.5],"b":1}"#);
}

#[test]
fn render_is_toml_and_gives_back_the_same_plan() {
    for template in [FANCY, DEFAULT_PROFILE] {
        let plan = example_plan(template, None).unwrap();
        let text = render(&plan);
        let table: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(table["hostname"].as_str(), Some(plan.hostname.as_str()));
        assert!(text.contains(
            "# Effective profile of tenant example\n# uid 1000, gid 1000, home /home/example"
        ));
        check_str(&text, Path::new("rendered.toml")).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let again = example_plan(&text, None).unwrap();
        assert_eq!(again.hostname, plan.hostname);
        assert_eq!(again.workdir, plan.workdir);
        assert_eq!(again.namespaces, plan.namespaces);
        assert_eq!(again.mounts, plan.mounts);
        assert_eq!(again.tmp, plan.tmp);
        assert_eq!(again.env, plan.env);
        assert_eq!(again.seccomp, plan.seccomp);
        assert_eq!(again.limits.limits_plan, plan.limits.limits_plan);
        let values = |p: &crate::Plan| {
            p.limits
                .values
                .iter()
                .map(|(k, v)| (k.clone(), v.0.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(values(&again), values(&plan));
    }
}

#[test]
fn render_shows_limit_origins() {
    let plan = example_plan("[limits]\n\nmemory.max = \"2G\"\n", None).unwrap();
    let text = render(&plan);
    assert!(
        text.contains(&format!("memory.max = \"2G\"  # {PROFILE}:3\n")),
        "{text}"
    );
    assert!(
        text.contains("processes = 100  # <built-in default plan>:"),
        "{text}"
    );
}

/// A small deterministic generator, so failures reproduce.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
}

#[test]
fn check_str_never_panics() {
    const PIECES: &[&str] = &[
        "$",
        "${",
        "$$",
        "..",
        "/",
        "\"",
        "'",
        "[",
        "]]",
        "{",
        "=",
        "\n",
        "é",
        "\0",
        "0o7777",
        "-1",
        "99999999999999999999",
        "1e400",
        "[[mount]]\n",
        "size = ",
        "mode = ",
    ];
    let mut rng = Lcg(42);
    for template in [DEFAULT_PROFILE, FANCY] {
        let bytes = template.as_bytes();
        for _ in 0..300 {
            let mut text = template.to_string();
            for _ in 0..=rng.next(4) {
                let at = rng.next(text.len());
                let at = (0..=at)
                    .rev()
                    .find(|&i| text.is_char_boundary(i))
                    .unwrap_or(0);
                match rng.next(3) {
                    0 => text.insert_str(at, PIECES[rng.next(PIECES.len())]),
                    1 => text.truncate(at),
                    _ => {
                        let end = (at + rng.next(40)).min(text.len());
                        let end = (end..=text.len())
                            .find(|&i| text.is_char_boundary(i))
                            .unwrap_or(text.len());
                        text.replace_range(at..end, "");
                    }
                }
            }
            let _ = check_str(&text, Path::new("fuzz.toml"));
        }
        // Raw bytes cut anywhere, made valid UTF-8 lossily.
        for cut in (0..bytes.len()).step_by(211) {
            let _ = check_str(
                &String::from_utf8_lossy(&bytes[..cut]),
                Path::new("cut.toml"),
            );
        }
    }
}

#[test]
fn mount_origins_say_where_each_mount_was_written() {
    let text = format!(
        "{DEFAULT_PROFILE}\n[[mount]]\ntype = \"bind-try\"\nsrc = \"/run/mysqld\"\n\
         [[mount]]\ntype = \"ro-bind-try\"\nsrc = \"$HOME/.app\"\ndst = \"/srv/app\"\n\
         [[mount]]\ntype = \"ro-bind-try\"\nsrc = \"/lib32\"\ndst = \"/srv/lib32\"\n"
    );
    let plan = example_plan(&text, None).unwrap();
    assert_eq!(plan.mount_origins.len(), plan.mounts.len());
    let n = plan.mounts.len();
    // The template's own entries, written as in the built-in default.
    assert!(plan.mount_origins[..n - 3].iter().all(|o| o.builtin));
    let [db, app, lib] = &plan.mount_origins[n - 3..] else {
        unreachable!()
    };
    // Its `type` line: after the template, a blank line and `[[mount]]`.
    let lines = DEFAULT_PROFILE.lines().count();
    assert_eq!(
        (db.at.line, db.key.as_str(), db.per_tenant, db.builtin),
        (
            lines + 3,
            format!("mount[{}]", n - 3).as_str(),
            false,
            false
        )
    );
    assert_eq!(db.at.file, Path::new(PROFILE));
    assert!(app.per_tenant && !app.builtin);
    // The same source at another destination is not the template's entry.
    assert!(!lib.per_tenant && !lib.builtin);
    // Not part of the plan proper: the digest ignores them.
    let mut moved = plan.clone();
    moved.mount_origins.clear();
    assert_eq!(moved.digest(), plan.digest());
}
