//! corral profiles: a TOML template, optionally overridden per tenant,
//! expanded for one tenant into a validated [`Plan`] that the sandbox
//! executor runs without looking anything up again.
//!
//! Files under a configuration directory (usually `/etc/corral`):
//! - `profile.toml`: the template (the built-in [`DEFAULT_PROFILE`] if absent);
//! - `tenants/<tenant>.toml`: optional per-tenant override, same schema;
//! - `plans/<name>.toml`: limit plans (`default` falls back to [`DEFAULT_PLAN`]).
//!
//! The schema is documented in `docs/profile.md`.

pub mod edit;
pub mod plan;
pub mod suspend;

mod build;
mod digest;
mod doc;
mod error;
mod expand;
mod layer;
mod limits;
mod mounts;
mod render;
mod services;
mod tenant;
mod values;

#[cfg(test)]
mod tests;

pub use build::real_shell;
pub use error::{Location, ProfileError};
pub use limits::BUILTIN_PLAN;
pub use plan::Plan;
pub use render::render;
pub use services::signal_name;

use build::Input;
use limits::LimitsPlanFile;
use std::io;
use std::path::Path;

/// The built-in template, used when `<config>/profile.toml` does not exist
/// (and printed by `corral profile default`).
pub const DEFAULT_PROFILE: &str = include_str!("default.toml");

/// The built-in `default` plan, used when `<config>/plans/default.toml` does
/// not exist.
pub const DEFAULT_PLAN: &str = include_str!("default_plan.toml");

/// Shown as the file of values from [`DEFAULT_PROFILE`].
pub const BUILTIN_PROFILE: &str = "<built-in default profile>";

/// The plan of `tenant` (a Unix user other than root) from the files under
/// `config_dir`.
pub fn load(config_dir: &Path, tenant: &str) -> Result<Plan, ProfileError> {
    load_with(config_dir, tenant, None)
}

/// Like [`load`], with `override_text` standing in for the tenant's override
/// file (a change not yet written; see [`edit`]).
pub(crate) fn load_with(
    config_dir: &Path,
    tenant: &str,
    override_text: Option<&str>,
) -> Result<Plan, ProfileError> {
    let tenant = tenant::lookup(tenant)?;
    let template_path = config_dir.join("profile.toml");
    let template_text = read_optional(&template_path)?;
    let template = match &template_text {
        Some(text) => Input {
            text,
            path: &template_path,
        },
        None => Input {
            text: DEFAULT_PROFILE,
            path: Path::new(BUILTIN_PROFILE),
        },
    };
    let over_path = config_dir
        .join("tenants")
        .join(format!("{}.toml", tenant.name));
    let over_text = match override_text {
        Some(t) => Some(t.to_string()),
        None => read_optional(&over_path)?,
    };
    let over = over_text.as_deref().map(|text| Input {
        text,
        path: &over_path,
    });
    build::assemble(
        template,
        over,
        tenant,
        LimitsPlanFile::Resolve(config_dir.to_path_buf()),
    )
}

/// The template overlaid with `tenant`'s override, parsed but not expanded
/// and without looking the tenant up (it may be a deleted account). None
/// when a file does not parse.
fn raw_layer_of(config_dir: &Path, tenant: &str) -> Option<layer::Layer> {
    // The same parser and overlay as `load`.
    let parse = |path: &Path, text: &str| {
        let lines = error::line_starts(text);
        layer::parse(error::Source {
            path,
            text,
            lines: &lines,
        })
        .ok()
    };
    let template_path = config_dir.join("profile.toml");
    let template_text = std::fs::read_to_string(&template_path).ok();
    let mut layer = match &template_text {
        Some(t) => parse(&template_path, t)?,
        None => parse(Path::new(BUILTIN_PROFILE), DEFAULT_PROFILE)?,
    };
    let over_path = config_dir.join("tenants").join(format!("{tenant}.toml"));
    if let Ok(t) = std::fs::read_to_string(&over_path) {
        layer = layer.overlay(parse(&over_path, &t)?);
    }
    Some(layer)
}

/// `pattern` with `$USER` expanded to `tenant`: None when it needs more
/// than the name (`$HOME`, `$UID`...) or is not an absolute path below `/`.
fn path_of_name(pattern: &str, tenant: &str) -> Option<std::path::PathBuf> {
    let p = pattern.replace("${USER}", tenant).replace("$USER", tenant);
    (!p.contains('$') && p.starts_with('/') && p != "/").then(|| std::path::PathBuf::from(p))
}

/// Where a tenant's disk /tmp lives according to the files under
/// `config_dir`, without looking the tenant up (it may be a deleted
/// account): the override's `[tmp]`, else the template's, else the default;
/// only `$USER` is expanded. None for a tmpfs /tmp, or when the path needs
/// more than the name (`$HOME`, `$UID`...).
pub fn tmp_dir_of(config_dir: &Path, tenant: &str) -> Option<std::path::PathBuf> {
    // An override that sets `kind` replaces the template's [tmp].
    let layer = raw_layer_of(config_dir, tenant)?;
    if layer.tmp.kind.map(|k| k.v) == Some(layer::TmpKind::Tmpfs) {
        return None;
    }
    let pattern = layer
        .tmp
        .dir
        .map(|d| d.v)
        .unwrap_or_else(|| build::DEFAULT_TMP_DIR.to_string());
    path_of_name(&pattern, tenant)
}

/// The sources of the `bind` mounts with `create = true` (the directories
/// `up` makes for the tenant, e.g. its PHP sessions) according to the files
/// under `config_dir`, without looking the tenant up; only `$USER` is
/// expanded, sources that need more are left out.
pub fn created_dirs_of(config_dir: &Path, tenant: &str) -> Vec<std::path::PathBuf> {
    let Some(layer) = raw_layer_of(config_dir, tenant) else {
        return Vec::new();
    };
    layer
        .mounts
        .iter()
        .filter(|m| m.create.as_ref().is_some_and(|c| c.v))
        .filter_map(|m| path_of_name(&m.src.as_ref()?.v, tenant))
        .collect()
}

/// Check a template (or tenant override) file on its own: it is expanded for
/// a stand-in tenant `example` (uid and gid 1000, home `/home/example`).
/// Plan names other than `default` are checked for form only.
pub fn check_file(path: &Path) -> Result<Plan, ProfileError> {
    let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    check_str(&text, path)
}

/// Like [`check_file`], for text read elsewhere; `origin` names it in errors.
/// Never panics, whatever the text. Returns the stand-in tenant's plan.
pub fn check_str(text: &str, origin: &Path) -> Result<Plan, ProfileError> {
    let template = Input { text, path: origin };
    build::assemble(
        template,
        None,
        tenant::example(),
        LimitsPlanFile::TemplateOnly,
    )
}

fn read_optional(path: &Path) -> Result<Option<String>, ProfileError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ProfileError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}
