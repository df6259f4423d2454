//! Persisted administration: changes an operator makes with `corral limits
//! set` or `corral plan set` are written into the tenant's override file
//! (`<config>/tenants/<tenant>.toml`), so that they survive a restart, a
//! rebuild and a reboot. Only the keys changed are touched: comments,
//! ordering and formatting of the rest stay as the operator wrote them
//! (toml_edit). The new text is validated as a whole (it must load into a
//! plan) before anything is written, and written atomically (a temporary
//! file renamed over the old one): a failed change leaves the file as it
//! was.

use crate::{load_with, Plan, ProfileError};
use std::io::Write;
use std::path::{Path, PathBuf};
use toml_edit::{DocumentMut, Item, Table, Value};

/// One change to a tenant's override file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// `[limits]` KEY = VALUE; a dotted key (`memory.max`) becomes a dotted
    /// key in `[limits]` unless the file already nests that table.
    Limit { key: String, value: String },
    /// `plan = NAME` (a limits plan: `<config>/plans/NAME.toml`).
    Plan(String),
}

#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error("{}: {source}", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: toml_edit::TomlError,
    },
    #[error("{}: [limits] {key}: the file has a value where a table is needed", path.display())]
    Shape { path: PathBuf, key: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The changed files do not load (the message names file and line).
    #[error(transparent)]
    Profile(#[from] ProfileError),
}

/// The path of `tenant`'s override file.
pub fn override_path(config_dir: &Path, tenant: &str) -> PathBuf {
    config_dir.join("tenants").join(format!("{tenant}.toml"))
}

/// The override's text with `changes` applied, and the plan the files give
/// with it. Nothing is written.
pub fn preview(
    config_dir: &Path,
    tenant: &str,
    changes: &[Change],
) -> Result<(String, Plan), EditError> {
    let path = override_path(config_dir, tenant);
    let old = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => return Err(EditError::Io { path, source }),
    };
    let text = apply(&old, changes, &path)?;
    let plan = load_with(config_dir, tenant, Some(&text))?;
    Ok((text, plan))
}

/// `old` (a TOML document) with `changes` applied.
pub fn apply(old: &str, changes: &[Change], path: &Path) -> Result<String, EditError> {
    let mut doc: DocumentMut = old.parse().map_err(|source| EditError::Parse {
        path: path.to_path_buf(),
        source,
    })?;
    for c in changes {
        match c {
            Change::Plan(name) => {
                // Before the first table, where top-level keys must be.
                doc.insert("plan", Item::Value(Value::from(name.as_str())));
            }
            Change::Limit { key, value } => set_limit(&mut doc, key, value, path)?,
        }
    }
    let mut text = doc.to_string();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

/// A value as TOML: whole numbers as integers, anything else as a string
/// ("50%", "1G", "max").
fn typed(value: &str) -> Value {
    match value.parse::<i64>() {
        Ok(n) => Value::from(n),
        Err(_) => Value::from(value),
    }
}

fn set_limit(doc: &mut DocumentMut, key: &str, value: &str, path: &Path) -> Result<(), EditError> {
    let shape = || EditError::Shape {
        path: path.to_path_buf(),
        key: key.to_string(),
    };
    let limits = doc
        .entry("limits")
        .or_insert_with(|| Item::Table(Table::new()));
    let parts: Vec<&str> = key.split('.').collect();
    let (last, parents) = parts.split_last().expect("split gives one part at least");
    let mut at: &mut Item = limits;
    for p in parents {
        let t = at.as_table_like_mut().ok_or_else(shape)?;
        // A value where the key needs a table (`memory = "1G"` when setting
        // `memory.max`) is replaced: the two mean the same limit, and the
        // profile lets the later one win anyway.
        if !t.get(p).is_some_and(Item::is_table_like) {
            let mut nested = Table::new();
            nested.set_dotted(true);
            t.insert(p, Item::Table(nested));
        }
        at = t.get_mut(p).expect("just inserted");
    }
    let t = at.as_table_like_mut().ok_or_else(shape)?;
    match t.get_mut(last) {
        // Keep the key's own decoration (a comment after the value).
        Some(Item::Value(v)) => {
            let decor = v.decor().clone();
            *v = typed(value);
            *v.decor_mut() = decor;
        }
        _ => {
            t.insert(last, Item::Value(typed(value)));
        }
    }
    Ok(())
}

/// Write `text` as `tenant`'s override file: a temporary file in the same
/// directory, synced, then renamed over the old one (mode 0644).
pub fn write(config_dir: &Path, tenant: &str, text: &str) -> Result<PathBuf, EditError> {
    let path = override_path(config_dir, tenant);
    let io = |source| EditError::Io {
        path: path.clone(),
        source,
    };
    replace_file(&path, text.as_bytes()).map_err(io)?;
    Ok(path)
}

/// Replace a configuration file (its directory made if missing) with
/// `data`: a temporary file beside it, synced, mode 0644, renamed over it;
/// on failure the old file stays and the temporary one goes.
pub(crate) fn replace_file(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().expect("an absolute file path");
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().expect("a file name").to_string_lossy();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ch(k: &str, v: &str) -> Change {
        Change::Limit {
            key: k.into(),
            value: v.into(),
        }
    }

    #[test]
    fn comments_and_other_keys_are_kept() {
        let old = "# alice pays for more\nhostname = \"alice\"\n\n[limits]\ncpu = \"100%\"   # was 50%\nprocesses = 100\n\n[[mount]]\ntype = \"tmpfs\"\ndst = \"/x\"\n";
        let new = apply(
            old,
            &[
                ch("cpu", "150%"),
                ch("memory.max", "2G"),
                ch("processes", "300"),
            ],
            Path::new("t.toml"),
        )
        .unwrap();
        assert!(
            new.starts_with("# alice pays for more\nhostname = \"alice\"\n"),
            "{new}"
        );
        assert!(new.contains("cpu = \"150%\"   # was 50%"), "{new}");
        assert!(new.contains("processes = 300"), "{new}");
        assert!(new.contains("memory.max = \"2G\""), "{new}");
        assert!(new.contains("[[mount]]\ntype = \"tmpfs\""), "{new}");
    }

    #[test]
    fn an_empty_file_gets_a_limits_table_and_a_plan() {
        let new = apply(
            "",
            &[
                Change::Plan("business".into()),
                ch("rlimits.nofile", "4096"),
            ],
            Path::new("t.toml"),
        )
        .unwrap();
        assert_eq!(
            new,
            "plan = \"business\"\n\n[limits]\nrlimits.nofile = 4096\n"
        );
    }

    #[test]
    fn a_nested_table_is_reused() {
        let old = "[limits.memory]\nmax = \"1G\" # the base\n";
        let new = apply(
            old,
            &[ch("memory.max", "3G"), ch("memory.high", "2G")],
            Path::new("t.toml"),
        )
        .unwrap();
        assert!(new.contains("max = \"3G\" # the base"), "{new}");
        assert!(new.contains("high = \"2G\""), "{new}");
    }

    #[test]
    fn a_shorthand_value_and_its_table_replace_each_other() {
        let new = apply(
            "[limits]\nmemory = \"1G\"\n",
            &[ch("memory.max", "2G")],
            Path::new("t.toml"),
        )
        .unwrap();
        assert_eq!(new, "[limits]\nmemory.max = \"2G\"\n");
        let new = apply(&new, &[ch("memory", "3G")], Path::new("t.toml")).unwrap();
        assert_eq!(new, "[limits]\nmemory = \"3G\"\n");
    }
}
