//! `corral tenant remove` and `corral gc`: the account lifecycle hosting
//! panels drive (their account-delete hooks call `corral tenant remove`;
//! config/hooks/ has examples). corral keeps, per tenant: its sandbox state
//! and cgroup (removed by `down`), its disk /tmp, the directories a
//! `bind` with `create = true` made for it (PHP sessions), its override file, its
//! suspension record and its services' log directory. Remove deletes
//! exactly those of one tenant and nothing else; gc finds those of accounts
//! that no longer exist.

use crate::ctx::Ctx;
use crate::out::outln;
use corral_profile::plan::{Plan, TmpPlan};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The services' default log root (`/var/log/corral/$USER/NAME.log`).
const LOG_ROOT: &str = "/var/log/corral";

/// What corral keeps of `tenant` outside its sandbox state.
fn leftovers(ctx: &Ctx, tenant: &str) -> Vec<(&'static str, PathBuf)> {
    let dir = ctx.layout.tenant(tenant);
    // Where its /tmp is: the running plan, else the profile (the account
    // exists), else the files alone (a deleted account).
    let running: Option<Plan> = std::fs::read(dir.plan())
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let plan = running.or_else(|| corral_profile::load(&ctx.config_dir, tenant).ok());
    // The directories `create = true` made for it (its PHP sessions): only
    // those still owned by it, so a profile that names a shared directory
    // never has it removed.
    let owner = |p: &Path| {
        Some(std::os::unix::fs::MetadataExt::uid(
            &p.symlink_metadata().ok()?,
        ))
    };
    let own_dirs: Vec<PathBuf> = match &plan {
        Some(p) => p
            .mounts
            .iter()
            .filter_map(|m| match m {
                corral_profile::plan::MountOp::Bind {
                    src, create: true, ..
                } => (owner(src)? == p.tenant.uid).then(|| src.clone()),
                _ => None,
            })
            .collect(),
        // A deleted account: its uid is gone with it, so a directory is
        // its own when no account (and not root) owns it now; one whose uid
        // was given to a new account stays.
        None => {
            let db = corral_users::Db::system();
            corral_profile::created_dirs_of(&ctx.config_dir, tenant)
                .into_iter()
                .filter(|d| {
                    owner(d).is_some_and(|uid| uid != 0 && matches!(db.user_by_uid(uid), Ok(None)))
                })
                .collect()
        }
    };
    let tmp = match plan.map(|p| p.tmp) {
        Some(TmpPlan::Disk { host_dir, .. }) => Some(host_dir),
        Some(TmpPlan::Tmpfs { .. }) => None,
        None => corral_profile::tmp_dir_of(&ctx.config_dir, tenant),
    };
    let mut v = Vec::new();
    if let Some(t) = tmp {
        v.push(("/tmp directory", t));
    }
    v.extend(own_dirs.into_iter().map(|d| ("own directory", d)));
    v.push((
        "override",
        ctx.config_dir
            .join("tenants")
            .join(format!("{tenant}.toml")),
    ));
    v.push((
        "suspension record",
        ctx.config_dir
            .join("suspended")
            .join(format!("{tenant}.json")),
    ));
    v.push(("service logs", Path::new(LOG_ROOT).join(tenant)));
    v.retain(|(_, p)| p.symlink_metadata().is_ok());
    v
}

fn remove_path(p: &Path) -> std::io::Result<()> {
    match p.symlink_metadata() {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
        Ok(_) => std::fs::remove_file(p),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Take the tenant down and delete what corral keeps of it; the lines
/// printed name every path. Returns the number of things removed.
fn remove_one(ctx: &Ctx, tenant: &str, dry_run: bool) -> anyhow::Result<usize> {
    crate::ctx::check_tenant_name(tenant)?;
    let items = leftovers(ctx, tenant);
    let state = ctx.layout.tenant(tenant).dir;
    let up = state.exists();
    let verb = if dry_run { "would remove" } else { "removed" };
    let mut n = 0;
    if up {
        if !dry_run {
            corral_sandbox::down(&ctx.layout, tenant)?;
            // What down leaves (an empty directory, a lock).
            remove_path(&state)?;
            let _ = std::fs::remove_file(ctx.layout.locks().join(format!("{tenant}.lock")));
        }
        outln!("{tenant}: {verb} its sandbox, state and cgroup");
        n += 1;
    }
    for (what, p) in items {
        if !dry_run {
            remove_path(&p)
                .map_err(|e| anyhow::anyhow!("{tenant}: remove {}: {e}", p.display()))?;
        }
        outln!("{tenant}: {verb} its {what} {}", p.display());
        n += 1;
    }
    Ok(n)
}

pub fn remove(ctx: &Ctx, tenant: &str, dry_run: bool) -> anyhow::Result<i32> {
    if remove_one(ctx, tenant, dry_run)? == 0 {
        outln!("{tenant}: corral keeps nothing of it");
    }
    Ok(0)
}

/// Every name corral keeps something of: sandbox states, overrides,
/// suspension records, disk /tmp directories and the directories of
/// `create = true` binds (when the profile puts them at `<dir>/$USER`),
/// service log directories.
fn known_names(ctx: &Ctx) -> anyhow::Result<BTreeSet<String>> {
    let mut names: BTreeSet<String> = ctx.layout.list()?.into_iter().collect();
    let stems = |dir: PathBuf, ext: &str| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| {
                        let n = e.file_name().to_string_lossy().into_owned();
                        n.strip_suffix(ext).map(String::from)
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    names.extend(stems(ctx.config_dir.join("tenants"), ".toml"));
    names.extend(stems(ctx.config_dir.join("suspended"), ".json"));
    let dirs_in = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    const PROBE: &str = "corral-gc-probe";
    if let Some(p) = corral_profile::tmp_dir_of(&ctx.config_dir, PROBE) {
        if p.file_name().is_some_and(|n| n == PROBE) {
            names.extend(dirs_in(p.parent().expect("absolute, not /")));
        }
    }
    // The directories `create = true` binds make (`<dir>/$USER`).
    for p in corral_profile::created_dirs_of(&ctx.config_dir, PROBE) {
        if p.file_name().is_some_and(|n| n == PROBE) {
            names.extend(dirs_in(p.parent().expect("absolute, not /")));
        }
    }
    names.extend(dirs_in(Path::new(LOG_ROOT)));
    names.retain(|n| crate::ctx::check_tenant_name(n).is_ok() && !n.starts_with('.'));
    Ok(names)
}

pub fn gc(ctx: &Ctx, dry_run: bool) -> anyhow::Result<i32> {
    let db = corral_users::Db::system();
    let mut gone = 0;
    for name in known_names(ctx)? {
        // Only accounts that certainly no longer exist (a lookup error is
        // not "no such user").
        if !matches!(db.user_by_name(&name), Ok(None)) {
            continue;
        }
        gone += 1;
        remove_one(ctx, &name, dry_run)?;
    }
    if gone == 0 {
        outln!("nothing to collect: every tenant corral keeps something of is an account");
    }
    Ok(0)
}

/// `corral tmp-clean`: in each tenant's disk /tmp, delete what has not been
/// modified for `days` days (like CageFS's tmpwatch). The deletion runs as
/// the tenant (`find -delete`, physical walk, one filesystem): it can only
/// remove what the tenant could remove itself, and a symlink it planted is
/// removed, never followed.
pub fn tmp_clean(ctx: &Ctx, tenants: &[String], days: u32, dry_run: bool) -> anyhow::Result<i32> {
    let names: Vec<String> = if tenants.is_empty() {
        known_names(ctx)?.into_iter().collect()
    } else {
        tenants.to_vec()
    };
    let db = corral_users::Db::system();
    let mut failed = 0;
    for name in names {
        crate::ctx::check_tenant_name(&name)?;
        let Ok(Some(user)) = db.user_by_name(&name) else {
            continue; // no account (gc's business)
        };
        let Some(dir) = leftovers(ctx, &name)
            .into_iter()
            .find(|(what, _)| *what == "/tmp directory")
            .map(|(_, p)| p)
        else {
            continue;
        };
        // Only a real directory of the tenant's own.
        let Ok(meta) = dir.symlink_metadata() else {
            continue;
        };
        use std::os::unix::fs::MetadataExt;
        if !meta.is_dir() || meta.uid() != user.uid {
            eprintln!(
                "corral: {name}: {} is not a directory of the tenant's: skipped",
                dir.display()
            );
            failed += 1;
            continue;
        }
        // Opened here as root, entered by the tenant's find through the fd:
        // the path's parents need not be searchable by the tenant.
        let dirfd = std::fs::File::open(&dir)
            .map_err(|e| anyhow::anyhow!("{name}: open {}: {e}", dir.display()))?;
        let age = format!("+{}", days.saturating_sub(1));
        let mut find = std::process::Command::new("find");
        find.args([
            "-P",
            ".",
            "-xdev",
            "-mindepth",
            "1",
            "-depth",
            "-mtime",
            &age,
        ]);
        if dry_run {
            find.arg("-print");
        } else {
            // Empty directories go too (one emptied by this walk counts by
            // its time before it); a non-empty one stays.
            find.args([
                "(", "-type", "d", "-empty", "-o", "!", "-type", "d", ")", "-print", "-delete",
            ]);
        }
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let raw = dirfd.as_raw_fd();
        find.uid(user.uid).gid(user.gid).env_clear();
        // SAFETY: fchdir is async-signal-safe and takes an fd we hold open
        // until the child has exec'd (it runs after the uid change).
        unsafe {
            find.pre_exec(move || nix::unistd::fchdir(raw).map_err(std::io::Error::from));
        }
        let out = find
            .output()
            .map_err(|e| anyhow::anyhow!("{name}: run find: {e}"))?;
        let n = out
            .stdout
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .count();
        if !out.status.success() {
            failed += 1;
            eprintln!(
                "corral: {name}: find in {}: {}",
                dir.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        outln!(
            "{name}: {} {n} entries older than {days} days in {}",
            if dry_run { "would delete" } else { "deleted" },
            dir.display()
        );
    }
    Ok(if failed > 0 {
        crate::ctx::EXIT_FAILURE
    } else {
        0
    })
}
