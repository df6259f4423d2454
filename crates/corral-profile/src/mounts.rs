//! `[[mount]]` entries: read and checked per type, then expanded for a
//! tenant into `MountOp`s.

use crate::doc::{Table, L};
use crate::error::{invalid, Location, ProfileError};
use crate::expand::expand;
use crate::layer::choice;
use crate::plan::{MountOp, MountOrigin, Tenant};
use crate::values::{self, abs_path, abs_path_not_root};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Bind { ro: bool, dev: bool, optional: bool },
    Tmpfs,
    Dir,
    Symlink,
    File,
    Copy,
    Proc,
    Dev,
    RemountRo,
    Hide,
}

pub(crate) const KINDS: &[(&str, Kind)] = &[
    (
        "bind",
        Kind::Bind {
            ro: false,
            dev: false,
            optional: false,
        },
    ),
    (
        "ro-bind",
        Kind::Bind {
            ro: true,
            dev: false,
            optional: false,
        },
    ),
    (
        "dev-bind",
        Kind::Bind {
            ro: false,
            dev: true,
            optional: false,
        },
    ),
    (
        "bind-try",
        Kind::Bind {
            ro: false,
            dev: false,
            optional: true,
        },
    ),
    (
        "ro-bind-try",
        Kind::Bind {
            ro: true,
            dev: false,
            optional: true,
        },
    ),
    (
        "dev-bind-try",
        Kind::Bind {
            ro: false,
            dev: true,
            optional: true,
        },
    ),
    ("tmpfs", Kind::Tmpfs),
    ("dir", Kind::Dir),
    ("symlink", Kind::Symlink),
    ("file", Kind::File),
    ("copy", Kind::Copy),
    ("proc", Kind::Proc),
    ("dev", Kind::Dev),
    ("remount-ro", Kind::RemountRo),
    ("hide", Kind::Hide),
];

impl Kind {
    pub fn name(self) -> &'static str {
        KINDS
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("?", |(n, _)| n)
    }

    /// Keys this type accepts, and those it requires (besides `type`).
    fn keys(self) -> (&'static [&'static str], &'static [&'static str]) {
        match self {
            // `create` only where it means something: a read-write bind
            // that is not optional (it is made when missing).
            Kind::Bind {
                ro: false,
                dev: false,
                optional: false,
            } => (&["type", "src", "dst", "create"], &["src"]),
            Kind::Bind { .. } => (&["type", "src", "dst"], &["src"]),
            Kind::Tmpfs => (&["type", "dst", "size", "mode"], &["dst"]),
            Kind::Dir => (&["type", "dst", "mode"], &["dst"]),
            Kind::Symlink => (&["type", "target", "dst"], &["target", "dst"]),
            Kind::File => (&["type", "dst", "content", "mode"], &["dst"]),
            Kind::Copy => (&["type", "src", "dst", "mode"], &["src", "dst"]),
            Kind::Proc | Kind::Dev | Kind::RemountRo | Kind::Hide => (&["type", "dst"], &["dst"]),
        }
    }
}

/// One `[[mount]]` table as written.
#[derive(Debug, Clone)]
pub(crate) struct RawMount {
    pub kind: L<Kind>,
    pub src: Option<L<String>>,
    pub dst: Option<L<String>>,
    pub size: Option<L<u64>>,
    pub mode: Option<L<u32>>,
    pub target: Option<L<String>>,
    pub content: Option<L<String>>,
    /// `bind` only: the source is the tenant's own directory, made at `up`.
    pub create: Option<L<bool>>,
}

const ALL_KEYS: &[&str] = &[
    "type", "src", "dst", "size", "mode", "target", "content", "create",
];

pub(crate) fn parse(t: &Table<'_>) -> Result<RawMount, ProfileError> {
    t.check_keys(ALL_KEYS)?;
    let Some(kind) = t.get("type") else {
        let names: Vec<&str> = KINDS.iter().map(|(n, _)| *n).collect();
        let expected = format!("a mount type: one of {}", names.join(", "));
        return Err(invalid(&t.at, &t.child_path("type"), expected, "nothing"));
    };
    let kind = choice(&kind, KINDS)?;
    let (allowed, required) = kind.v.keys();
    for (key, _) in t.inner.iter() {
        if !allowed.contains(&key) {
            let at = t.get(key).map_or_else(|| t.at.clone(), |e| e.key_at);
            let expected = format!(
                "only the keys {} for a {} mount",
                allowed.join(", "),
                kind.v.name()
            );
            return Err(invalid(
                &at,
                &t.child_path(key),
                expected,
                format!("key {key:?}"),
            ));
        }
    }
    for key in required {
        if t.get(key).is_none() {
            let what = if *key == "target" {
                "a symlink target"
            } else {
                "an absolute path"
            };
            let expected = format!("{what} ({key} is required for a {} mount)", kind.v.name());
            return Err(invalid(&t.at, &t.child_path(key), expected, "nothing"));
        }
    }
    let string = |key| t.get(key).map(|e| e.string()).transpose();
    Ok(RawMount {
        src: string("src")?,
        dst: string("dst")?,
        target: string("target")?,
        content: string("content")?,
        size: t.get("size").map(|e| values::size(&e)).transpose()?,
        mode: t.get("mode").map(|e| values::mode(&e)).transpose()?,
        create: t.get("create").map(|e| e.boolean()).transpose()?,
        kind,
    })
}

impl RawMount {
    /// Expand variables and check paths for `tenant`.
    pub fn lower(&self, tenant: &Tenant) -> Result<MountOp, ProfileError> {
        let path = |l: &L<String>| -> Result<PathBuf, ProfileError> {
            abs_path_not_root(&L {
                v: expand(l, tenant)?,
                ..l.clone()
            })
        };
        let dst = || match &self.dst {
            Some(dst) => path(dst),
            None => Err(self.missing("dst")),
        };
        let src = || match &self.src {
            Some(src) => abs_path(&L {
                v: expand(src, tenant)?,
                ..src.clone()
            }),
            None => Err(self.missing("src")),
        };
        let mode = |default: u32| self.mode.as_ref().map_or(default, |m| m.v);
        Ok(match self.kind.v {
            Kind::Bind { ro, dev, optional } => {
                let src_path = src()?;
                let dst = match &self.dst {
                    Some(_) => dst()?,
                    // dst defaults to src; it still must not be `/`.
                    None => path(self.src.as_ref().ok_or_else(|| self.missing("src"))?)?,
                };
                MountOp::Bind {
                    src: src_path,
                    dst,
                    ro,
                    dev,
                    optional,
                    create: self.create.as_ref().is_some_and(|c| c.v),
                }
            }
            Kind::Tmpfs => MountOp::Tmpfs {
                dst: dst()?,
                size: self.size.as_ref().map(|s| s.v),
                mode: mode(0o755),
            },
            Kind::Dir => MountOp::Dir {
                dst: dst()?,
                mode: mode(0o755),
            },
            Kind::Symlink => {
                let target = self.target.as_ref().ok_or_else(|| self.missing("target"))?;
                let expanded = expand(target, tenant)?;
                if expanded.is_empty() || expanded.contains('\0') {
                    let expected = "a non-empty symlink target without NUL characters";
                    return Err(target.invalid(expected, format!("{expanded:?}")));
                }
                MountOp::Symlink {
                    target: PathBuf::from(expanded),
                    dst: dst()?,
                }
            }
            Kind::File => {
                let content = match &self.content {
                    Some(c) => expand(c, tenant)?,
                    None => String::new(),
                };
                MountOp::File {
                    dst: dst()?,
                    content,
                    mode: mode(0o644),
                }
            }
            Kind::Copy => MountOp::Copy {
                src: src()?,
                dst: dst()?,
                mode: self.mode.as_ref().map(|m| m.v),
            },
            Kind::Proc => MountOp::Proc { dst: dst()? },
            Kind::Dev => MountOp::Dev { dst: dst()? },
            Kind::RemountRo => MountOp::RemountRo { dst: dst()? },
            Kind::Hide => MountOp::Hide { dst: dst()? },
        })
    }

    /// Where this entry was written, for messages about it.
    pub fn origin(&self) -> MountOrigin {
        let text = |l: &Option<L<String>>| l.as_ref().map(|l| l.v.clone());
        let written = (self.kind.v, text(&self.src), text(&self.dst));
        MountOrigin {
            at: self.kind.at.clone(),
            key: self
                .kind
                .key
                .strip_suffix(".type")
                .unwrap_or(&self.kind.key)
                .to_string(),
            per_tenant: self
                .src
                .as_ref()
                .is_some_and(|s| s.v.replace("$$", "").contains('$')),
            builtin: builtin_mounts().contains(&written),
        }
    }

    /// Only reachable if `parse` let a required key through.
    fn missing(&self, key: &str) -> ProfileError {
        let at: &Location = &self.kind.at;
        let prefix = self
            .kind
            .key
            .strip_suffix(".type")
            .unwrap_or(&self.kind.key);
        invalid(
            at,
            &format!("{prefix}.{key}"),
            format!("a value for {key}"),
            "nothing",
        )
    }
}

/// The `[[mount]]` entries of the built-in default template as written:
/// (type, src, dst).
type Written = (Kind, Option<String>, Option<String>);

fn builtin_mounts() -> &'static [Written] {
    static MOUNTS: std::sync::OnceLock<Vec<Written>> = std::sync::OnceLock::new();
    MOUNTS.get_or_init(|| {
        let text = crate::DEFAULT_PROFILE;
        let lines = crate::error::line_starts(text);
        let layer = crate::layer::parse(crate::error::Source {
            path: std::path::Path::new(crate::BUILTIN_PROFILE),
            text,
            lines: &lines,
        })
        .expect("the built-in default profile parses");
        let text = |l: &Option<L<String>>| l.as_ref().map(|l| l.v.clone());
        layer
            .mounts
            .iter()
            .map(|m| (m.kind.v, text(&m.src), text(&m.dst)))
            .collect()
    })
}
