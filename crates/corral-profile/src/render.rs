//! `render`: the effective profile of a tenant as TOML (`corral profile show`).
//! The output is itself a valid template: checking it, or loading it for the
//! same tenant, gives the same sandbox (values are already expanded, so a
//! literal `$` is written `$$`).

use crate::doc::quote_key;
use crate::mounts::{Kind, KINDS};
use crate::plan::{MountOp, NetMode, Plan, TmpPlan};
use std::fmt::Write;
use std::path::Path;

/// The effective, expanded profile of `plan`, with the tenant's identity,
/// sources and digest as comments and each limit's origin beside it.
pub fn render(plan: &Plan) -> String {
    let mut out = String::new();
    let t = &plan.tenant;
    let groups: Vec<String> = t
        .groups
        .iter()
        .map(|(n, g)| format!("{} ({g})", comment(n)))
        .collect();
    let sources: Vec<String> = plan
        .sources
        .iter()
        .map(|p| comment(&p.display().to_string()))
        .collect();
    let _ = writeln!(out, "# Effective profile of tenant {}", comment(&t.name));
    let _ = writeln!(
        out,
        "# uid {}, gid {}, home {}, shell {}",
        t.uid,
        t.gid,
        path_comment(&t.home),
        path_comment(&t.shell)
    );
    let _ = writeln!(out, "# groups: {}", groups.join(", "));
    let _ = writeln!(out, "# read from: {}", sources.join(", "));
    let _ = writeln!(out, "# plan digest: {}", plan.digest());
    out.push_str("# Values are expanded for this tenant (a literal \"$\" is written \"$$\").\n\n");

    let _ = writeln!(out, "hostname = {}", expanded(&plan.hostname));
    let _ = writeln!(out, "workdir = {}", expanded_path(&plan.workdir));
    let _ = writeln!(out, "plan = {}", quote(&plan.limits.limits_plan));

    out.push_str("\n# The filesystem, in order; the generated /etc/passwd, /etc/group and /tmp\n");
    out.push_str("# come after these.\nmount = [\n");
    for op in &plan.mounts {
        let _ = writeln!(out, "  {{ {} }},", mount(op).join(", "));
    }
    out.push_str("]\n");

    let ns = &plan.namespaces;
    out.push_str("\n[namespaces]\n");
    let _ = writeln!(
        out,
        "mount = {}\npid = {}\nipc = {}\nuts = {}\ncgroup = {}",
        ns.mount, ns.pid, ns.ipc, ns.uts, ns.cgroup
    );
    let net = match ns.net {
        NetMode::Host => "host",
        NetMode::None => "none",
        NetMode::Private => "private",
    };
    let _ = writeln!(out, "net = \"{net}\"\nuser = {}", ns.user);

    out.push_str("\n[env]\n");
    let _ = writeln!(out, "keep = {}", list(&plan.env.keep));
    out.push_str("\n[env.set]\n");
    for (name, value) in &plan.env.set {
        let _ = writeln!(out, "{} = {}", quote_key(name), expanded(value));
    }

    out.push_str("\n[tmp]\n");
    match &plan.tmp {
        TmpPlan::Disk { host_dir, size } => {
            let _ = writeln!(out, "kind = \"disk\"\ndir = {}", expanded_path(host_dir));
            if let Some(size) = size {
                let _ = writeln!(out, "size = {size}");
            }
        }
        TmpPlan::Tmpfs { size } => {
            out.push_str("kind = \"tmpfs\"\n");
            if let Some(size) = size {
                let _ = writeln!(out, "size = {size}");
            }
        }
    }

    let sc = &plan.seccomp;
    let action = sc.action.name();
    out.push_str("\n[seccomp]\n");
    let _ = writeln!(out, "enabled = {}\naction = \"{action}\"", sc.enabled);
    let _ = writeln!(
        out,
        "allow_ptrace = {}\nallow_io_uring = {}",
        sc.allow_ptrace, sc.allow_io_uring
    );
    let _ = writeln!(
        out,
        "deny = {}\nallow = {}",
        list(&sc.deny),
        list(&sc.allow)
    );

    let _ = writeln!(
        out,
        "\n# Plan {:?} with the profile's overrides; each value's origin follows it.",
        plan.limits.limits_plan
    );
    out.push_str("[limits]\n");
    for (key, (value, origin)) in &plan.limits.values {
        let key: Vec<String> = key.split('.').map(quote_key).collect();
        let at = comment(&format!("{}:{}", origin.file.display(), origin.line));
        let _ = writeln!(out, "{} = {}  # {at}", key.join("."), toml_value(value));
    }

    out
}

/// One mount as `key = value` pairs; a bind's `dst` is left out when it is
/// its `src`.
fn mount(op: &MountOp) -> Vec<String> {
    let (kind, dst) = match op {
        // No type is both ro and dev; dev-bind is the nearest.
        MountOp::Bind {
            ro,
            dev,
            optional,
            dst,
            ..
        } => (
            Kind::Bind {
                ro: *ro && !*dev,
                dev: *dev,
                optional: *optional,
            },
            dst,
        ),
        MountOp::Tmpfs { dst, .. } => (Kind::Tmpfs, dst),
        MountOp::Dir { dst, .. } => (Kind::Dir, dst),
        MountOp::Symlink { dst, .. } => (Kind::Symlink, dst),
        MountOp::File { dst, .. } => (Kind::File, dst),
        MountOp::Copy { dst, .. } => (Kind::Copy, dst),
        MountOp::Proc { dst } => (Kind::Proc, dst),
        MountOp::Dev { dst } => (Kind::Dev, dst),
        MountOp::RemountRo { dst } => (Kind::RemountRo, dst),
        MountOp::Hide { dst } => (Kind::Hide, dst),
    };
    let name = KINDS
        .iter()
        .find(|(_, k)| *k == kind)
        .map_or("bind", |(n, _)| n);
    let mut fields = vec![format!("type = {}", quote(name))];
    match op {
        MountOp::Bind { src, .. } | MountOp::Copy { src, .. } => {
            fields.push(format!("src = {}", expanded_path(src)))
        }
        MountOp::Symlink { target, .. } => {
            fields.push(format!("target = {}", expanded_path(target)))
        }
        _ => {}
    }
    if !matches!(op, MountOp::Bind { src, .. } if src == dst) {
        fields.push(format!("dst = {}", expanded_path(dst)));
    }
    match op {
        MountOp::Bind { create: true, .. } => fields.push("create = true".to_string()),
        MountOp::Tmpfs {
            size: Some(size), ..
        } => fields.push(format!("size = {size}")),
        MountOp::File { content, .. } => fields.push(format!("content = {}", expanded(content))),
        _ => {}
    }
    match op {
        MountOp::Tmpfs { mode, .. }
        | MountOp::Dir { mode, .. }
        | MountOp::File { mode, .. }
        | MountOp::Copy {
            mode: Some(mode), ..
        } => fields.push(format!("mode = \"{mode:04o}\"")),
        _ => {}
    }
    fields
}

/// A TOML basic string on one line.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An already-expanded value, written so that expanding it again is a no-op.
fn expanded(s: &str) -> String {
    quote(&s.replace('$', "$$"))
}

fn expanded_path(p: &Path) -> String {
    expanded(&p.to_string_lossy())
}

fn list(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|s| quote(s)).collect();
    format!("[{}]", items.join(", "))
}

/// Text safe inside a `#` comment (one line).
fn comment(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

fn path_comment(p: &Path) -> String {
    comment(&p.display().to_string())
}

/// A limit value on one line.
fn toml_value(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => quote(s),
        toml::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(toml_value).collect();
            format!("[{}]", items.join(", "))
        }
        toml::Value::Table(t) => {
            let items: Vec<String> = t
                .iter()
                .map(|(k, v)| format!("{} = {}", quote_key(k), toml_value(v)))
                .collect();
            format!("{{ {} }}", items.join(", "))
        }
        toml::Value::Float(f) if f.is_nan() => "nan".into(),
        toml::Value::Float(f) if f.is_infinite() => (if *f > 0.0 { "inf" } else { "-inf" }).into(),
        toml::Value::Float(f) => format!("{f:?}"),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Datetime(d) => d.to_string(),
    }
}
