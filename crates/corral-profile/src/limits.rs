//! Limits: a plan file, then the template's and the tenant's `[limits]`
//! overriding single keys. Values stay raw TOML (corral-limits types them);
//! each keeps the file and line it came from.

use crate::doc::{to_toml, Node, Table, L};
use crate::error::{invalid, line_starts, ProfileError, Source};
use crate::plan::{LimitsSource, Origin};
use crate::values::{is_plan_name, PLAN_NAME};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// Shown as the file of values from `DEFAULT_PLAN`.
pub const BUILTIN_PLAN: &str = "<built-in default plan>";

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LimitEntry {
    /// Dotted key, e.g. `memory.max`.
    pub key: String,
    pub value: toml::Value,
    pub origin: Origin,
}

/// Flatten a table into dotted keys; nested tables (`[limits.memory]`,
/// `memory.max = ...`, `memory = { max = ... }`) all give `memory.max`.
pub(crate) fn flatten(
    t: &Table<'_>,
    prefix: &str,
    out: &mut Vec<LimitEntry>,
) -> Result<(), ProfileError> {
    for (name, _) in t.inner.iter() {
        let Some(entry) = t.get(name) else { continue };
        if name.is_empty() || name.contains('.') {
            let expected = "a limit name without '.' (nest tables instead)";
            return Err(invalid(
                &entry.key_at,
                &entry.key,
                expected,
                format!("{name:?}"),
            ));
        }
        let key = if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}.{name}")
        };
        match entry.node {
            Node::Table(_) | Node::Value(toml_edit::Value::InlineTable(_)) => {
                flatten(&entry.table()?, &key, out)?;
            }
            node => out.push(LimitEntry {
                key,
                value: to_toml(node),
                origin: Origin {
                    file: entry.key_at.file.clone(),
                    line: entry.key_at.line,
                },
            }),
        }
    }
    Ok(())
}

/// Set one key, replacing the key itself and anything nested in or above it
/// (a later `memory = "1G"` replaces an earlier `memory.max`, and back).
pub(crate) fn apply(values: &mut BTreeMap<String, (toml::Value, Origin)>, e: LimitEntry) {
    let nested = format!("{}.", e.key);
    values.retain(|k, _| !(k.starts_with(&nested) || e.key.starts_with(&format!("{k}."))));
    values.insert(e.key, (e.value, e.origin));
}

/// Where the plan's values come from.
pub(crate) enum LimitsPlanFile {
    /// `<config>/plans/<name>.toml`, or the built-in default plan.
    Resolve(PathBuf),
    /// No configuration directory (checking a template alone): only the
    /// built-in default plan is known; other names are only checked for form.
    TemplateOnly,
}

/// The plan named by `plan` (its location for errors), overlaid with the
/// `[limits]` entries of the layers, in order. Adds the plan file read to
/// `sources`.
pub(crate) fn resolve(
    plan: &L<String>,
    where_: LimitsPlanFile,
    overrides: Vec<LimitEntry>,
    sources: &mut Vec<PathBuf>,
) -> Result<LimitsSource, ProfileError> {
    if !is_plan_name(&plan.v) {
        return Err(plan.invalid(PLAN_NAME, format!("{:?}", plan.v)));
    }
    let mut values = BTreeMap::new();
    let file = match where_ {
        LimitsPlanFile::Resolve(config_dir) => {
            let plans = config_dir.join("plans");
            let path = plans.join(format!("{}.toml", plan.v));
            match std::fs::read_to_string(&path) {
                Ok(text) => Some((text, path)),
                Err(e) if e.kind() == io::ErrorKind::NotFound && plan.v == "default" => None,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    let expected =
                        format!("the name of a plan in {} (or \"default\")", plans.display());
                    return Err(plan.invalid(
                        expected,
                        format!("{:?}: {} does not exist", plan.v, path.display()),
                    ));
                }
                Err(source) => return Err(ProfileError::Io { path, source }),
            }
        }
        LimitsPlanFile::TemplateOnly if plan.v == "default" => None,
        LimitsPlanFile::TemplateOnly => return Ok(overlay(plan, values, overrides)),
    };
    let (text, path) =
        file.unwrap_or_else(|| (crate::DEFAULT_PLAN.to_string(), PathBuf::from(BUILTIN_PLAN)));
    let mut entries = Vec::new();
    read_plan(&text, &path, &mut entries)?;
    for e in entries {
        apply(&mut values, e);
    }
    sources.push(path);
    Ok(overlay(plan, values, overrides))
}

fn overlay(
    plan: &L<String>,
    mut values: BTreeMap<String, (toml::Value, Origin)>,
    overrides: Vec<LimitEntry>,
) -> LimitsSource {
    for e in overrides {
        apply(&mut values, e);
    }
    LimitsSource {
        limits_plan: plan.v.clone(),
        values,
    }
}

/// A plan file: limits at the top level.
pub(crate) fn read_plan(
    text: &str,
    path: &Path,
    out: &mut Vec<LimitEntry>,
) -> Result<(), ProfileError> {
    let lines = line_starts(text);
    let src = Source {
        path,
        text,
        lines: &lines,
    };
    let doc = toml_edit::ImDocument::parse(text).map_err(|e| src.syntax_error(&e))?;
    flatten(&Table::root(src, doc.as_table()), "", out)
}
