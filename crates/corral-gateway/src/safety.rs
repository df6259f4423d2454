//! Which tenant runs a script, and whether it may: Apache suEXEC's checks,
//! adapted to sandboxes. Everything is checked before anything runs; a
//! violation names its rule (for the log) and maps to an HTTP status.
//!
//! 1. `SCRIPT_FILENAME` is an absolute path without `..` components;
//! 2. the tenant comes from the map (host or docroot), else it is the
//!    owner of the space the path lies in (the first component root does
//!    not own), and then must own the script the path resolves to;
//! 3. the tenant is a real user with uid >= `min_uid` (never root or a
//!    system account);
//! 4. the path as requested lies inside one of the tenant's areas (home, or
//!    `allow_dirs`), and so does the path it resolves to (`realpath`):
//!    neither `..` nor a symlink can lead out of the tenant's own files;
//! 5. the resolved file is a regular file owned by the tenant, not writable
//!    by group or others, not setuid/setgid, executable by its owner;
//! 6. its directory is owned by the tenant (or root) and not writable by
//!    group or others.
//!
//! **System CGI programs** (the map's `system_cgi` directories: cgit,
//! gitweb, mailman...) are root's, not the tenant's: a script whose path
//! lies in such a directory runs as the tenant the request is for — the
//! map's `[hosts]` entry, else the `[docroots]` entry or (with `unmapped =
//! "owner"`) the owner of the space holding `DOCUMENT_ROOT` — and must
//! resolve inside a listed directory, be a regular file owned by root, not
//! writable by group or others, not setuid/setgid, executable, in
//! directories that are root's and not writable by group or others from the
//! listed one down. A root-owned program anywhere else is refused (rule 3:
//! root's space is no tenant's).
//!
//! Every look at the filesystem from rule 4 on is made with the tenant's
//! filesystem identity ([`crate::fsid`]), never root's, and rule 2's walk
//! (without a map) follows only root's own components: a symlink a tenant
//! plants resolves only as far as the tenant could follow it, so the answer
//! cannot tell whether a path only root may see exists.
//!
//! Between these checks and the exec the tenant could replace the file; but
//! the exec happens inside the tenant's sandbox, as the tenant, where only
//! the tenant's own files are visible, so a swap gains nothing that the
//! tenant could not run anyway. What the checks protect is the choice of
//! identity, which is made here, once.

use crate::map::{normalize, MappedBy, TenantMap, Unmapped};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A refused request: the rule that failed and the HTTP status to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub rule: &'static str,
    pub detail: String,
    /// The tenant the request was for, once known (for the log).
    pub tenant: Option<String>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "refused by rule {:?}: {}", self.rule, self.detail)
    }
}

impl Refusal {
    /// The same refusal, naming the tenant it was for (unless one is named).
    fn for_tenant(mut self, name: &str) -> Refusal {
        self.tenant.get_or_insert_with(|| name.to_string());
        self
    }
}

fn refuse(status: u16, rule: &'static str, detail: impl Into<String>) -> Refusal {
    Refusal {
        status,
        rule,
        detail: detail.into(),
        tenant: None,
    }
}

/// A tenant as the passwd database knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
}

impl TenantUser {
    pub fn by_name(name: &str) -> Result<TenantUser, Refusal> {
        match corral_users::Db::system().user_by_name(name) {
            Ok(Some(u)) => Ok(TenantUser::from(u)),
            Ok(None) => Err(refuse(
                403,
                "unknown-user",
                format!("no user named {name:?}"),
            )),
            Err(e) => Err(refuse(
                500,
                "unknown-user",
                format!("look up user {name:?}: {e}"),
            )),
        }
    }

    pub fn by_uid(uid: u32) -> Result<TenantUser, Refusal> {
        match corral_users::Db::system().user_by_uid(uid) {
            Ok(Some(u)) => Ok(TenantUser::from(u)),
            Ok(None) => Err(refuse(
                403,
                "unknown-user",
                format!("the owner uid {uid} is no user"),
            )),
            Err(e) => Err(refuse(
                500,
                "unknown-user",
                format!("look up uid {uid}: {e}"),
            )),
        }
    }
}

impl From<corral_users::User> for TenantUser {
    fn from(u: corral_users::User) -> Self {
        TenantUser {
            name: u.name,
            uid: u.uid,
            gid: u.gid,
            home: u.home,
        }
    }
}

/// A script that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedScript {
    pub tenant: TenantUser,
    /// How the tenant was chosen (None: owner of the script).
    pub mapped_by: Option<MappedBy>,
    /// The path as requested (normalised).
    pub requested: PathBuf,
    /// The resolved path: what is executed, inside the sandbox.
    pub real: PathBuf,
    /// Its directory: the script's working directory.
    pub dir: PathBuf,
    /// Runs through this interpreter (the map's `[interpreters]`).
    pub interpreter: Option<PathBuf>,
    /// A system CGI program (root's, in a `system_cgi` directory).
    pub system: bool,
}

impl CheckedScript {
    /// The command line that runs it: `[script]`, or `[interpreter, script]`.
    pub fn argv(&self) -> Vec<String> {
        let script = self.real.to_string_lossy().into_owned();
        match &self.interpreter {
            Some(i) => vec![i.to_string_lossy().into_owned(), script],
            None => vec![script],
        }
    }
}

/// Who the tenant is, before its passwd entry is looked up (which may
/// block: NSS can be a network service).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum UserKey {
    /// Named by the map (`[hosts]`, `[docroots]`).
    Name(String),
    /// The owner of the script.
    Uid(u32),
}

impl UserKey {
    /// The passwd lookup (blocking).
    pub fn lookup(&self) -> Result<TenantUser, Refusal> {
        match self {
            UserKey::Name(n) => TenantUser::by_name(n),
            UserKey::Uid(u) => TenantUser::by_uid(*u),
        }
    }
}

/// A script's path checked and its space's owner found (rules 1–2, no
/// passwd lookup); the remaining rules need the tenant's passwd entry.
#[derive(Debug)]
pub struct Located {
    /// Whose space the path lies in: the map's tenant, or (without a map
    /// entry) the owner of the first path component root does not own.
    pub key: UserKey,
    mapped_by: Option<MappedBy>,
    requested: PathBuf,
    /// The `system_cgi` directory the path lies in.
    system: Option<PathBuf>,
}

/// The passwd lookups the checks make: None when the answer is not at hand
/// without blocking (the caller then runs the checks again where it may).
pub type LookupUser<'a> = dyn FnMut(&UserKey) -> Option<Result<TenantUser, Refusal>> + 'a;

/// Choose the tenant for `script_filename` and run every check.
pub fn check(
    script_filename: &str,
    host: Option<&str>,
    map: &TenantMap,
) -> Result<CheckedScript, Refusal> {
    check_in(script_filename, host, None, map)
}

/// [`check`], with the request's `DOCUMENT_ROOT` (which chooses the tenant
/// of a system CGI program when no `[hosts]` entry does).
pub fn check_in(
    script_filename: &str,
    host: Option<&str>,
    document_root: Option<&str>,
    map: &TenantMap,
) -> Result<CheckedScript, Refusal> {
    let r = check_with(script_filename, host, document_root, map, &mut |k| {
        Some(k.lookup())
    })?;
    Ok(r.expect("blocking lookups always answer"))
}

/// Every check, with the passwd entries from `users`; Ok(None) when `users`
/// had no answer at hand.
///
/// The filesystem is examined with the rights of the user whose space the
/// path lies in, never with root's ([`crate::fsid`]): a symlink a tenant
/// plants in its web space resolves exactly as far as the tenant itself
/// could resolve it, so the answer (status, page, log) for a link to a
/// host path only root may see is the same whether that path exists or
/// not. Apache's suEXEC does its checks after `setuid` to the target user
/// for the same reason.
pub fn check_with(
    script_filename: &str,
    host: Option<&str>,
    document_root: Option<&str>,
    map: &TenantMap,
    users: &mut LookupUser<'_>,
) -> Result<Option<CheckedScript>, Refusal> {
    let found = locate(script_filename, host, document_root, map)?;
    let space = match users(&found.key) {
        Some(r) => r.map_err(|r| match &found.key {
            UserKey::Name(n) => r.for_tenant(n),
            UserKey::Uid(u) => r.for_tenant(&format!("uid {u}")),
        })?,
        None => return Ok(None),
    };
    // Never look at anything on behalf of root or a system account.
    min_uid(&space, map).map_err(|r| r.for_tenant(&space.name))?;
    if found.system.is_some() {
        let name = space.name.clone();
        let id = space.clone();
        return as_user(&id, || verify_system(found, space, map))
            .and_then(|r| r)
            .map(Some)
            .map_err(|r| r.for_tenant(&name));
    }
    check_tenant_script(found, space, map, users)
}

/// Rules 4–6 for a script of the tenant's own, under one switch of the
/// filesystem identity to the space owner's (resolve and verify; the guard
/// is dropped only for a passwd lookup, when the script's owner is another
/// user than the space's).
fn check_tenant_script(
    found: Located,
    space: TenantUser,
    map: &TenantMap,
    users: &mut LookupUser<'_>,
) -> Result<Option<CheckedScript>, Refusal> {
    let mut id = take_identity(&space)?;
    let (real, meta) = resolve(&found.requested).map_err(|r| r.for_tenant(&space.name))?;
    // Without a map the tenant is the owner of the script; a file of another
    // user's in this space (or reached from it through a link) is checked as
    // that user's, which its areas then refuse.
    let tenant = match found.key {
        UserKey::Uid(u) if u != meta.uid() => {
            // The lookup runs with the gateway's own identity.
            drop(id);
            let owner = match users(&UserKey::Uid(meta.uid())) {
                Some(r) => r.map_err(|r| r.for_tenant(&space.name))?,
                None => return Ok(None),
            };
            id = take_identity(&space)?;
            owner
        }
        _ => space.clone(),
    };
    let name = tenant.name.clone();
    let checked = verify(found, real, meta, tenant, map).map_err(|r| r.for_tenant(&name));
    drop(id);
    checked.map(Some)
}

/// This thread's filesystem identity switched to `u`'s until dropped.
fn take_identity(u: &TenantUser) -> Result<crate::fsid::FsIdentity, Refusal> {
    crate::fsid::FsIdentity::become_user(u.uid, u.gid).map_err(|e| {
        refuse(
            500,
            "identity",
            format!("take {}'s filesystem identity: {e}", u.name),
        )
    })
}

/// Run `f` with this thread's filesystem identity switched to `u`'s.
fn as_user<R>(u: &TenantUser, f: impl FnOnce() -> R) -> Result<R, Refusal> {
    let _id = take_identity(u)?;
    Ok(f())
}

fn min_uid(tenant: &TenantUser, map: &TenantMap) -> Result<(), Refusal> {
    if tenant.uid < map.min_uid {
        return Err(refuse(
            403,
            "min-uid",
            format!(
                "tenant {} has uid {} (below min_uid {})",
                tenant.name, tenant.uid, map.min_uid
            ),
        ));
    }
    Ok(())
}

/// Rules 1–2: the path as written, and whose space it lies in. No passwd
/// lookup (it never blocks on NSS); the only filesystem access is
/// [`space_owner`]'s walk over root's own directories.
pub fn locate(
    script_filename: &str,
    host: Option<&str>,
    document_root: Option<&str>,
    map: &TenantMap,
) -> Result<Located, Refusal> {
    if script_filename.is_empty() {
        return Err(refuse(
            403,
            "script-filename",
            "SCRIPT_FILENAME is missing or empty",
        ));
    }
    let raw = Path::new(script_filename);
    if !raw.is_absolute() {
        return Err(refuse(
            403,
            "absolute-path",
            format!("{script_filename:?} is not an absolute path"),
        ));
    }
    if raw
        .components()
        .any(|c| c == std::path::Component::ParentDir)
    {
        return Err(refuse(
            403,
            "dotdot",
            format!("{script_filename:?} has a '..' component"),
        ));
    }
    let requested = normalize(raw).ok_or_else(|| {
        refuse(
            403,
            "dotdot",
            format!("{script_filename:?} is not a plain absolute path"),
        )
    })?;
    if let Some(dir) = map.system_dir(&requested) {
        return locate_system(&requested, dir, host, document_root, map);
    }
    let (key, mapped_by) = match map.lookup(host, &requested) {
        Some((name, by)) => (UserKey::Name(name), Some(by)),
        None if map.unmapped == Unmapped::Deny => {
            return Err(refuse(
                403,
                "unmapped",
                format!(
                    "no [hosts] or [docroots] entry matches host {:?} or {}",
                    host.unwrap_or(""),
                    requested.display()
                ),
            ))
        }
        None => (
            UserKey::Uid(space_owner(&requested).map_err(|e| not_found(&requested, e))?),
            None,
        ),
    };
    Ok(Located {
        key,
        mapped_by,
        requested,
        system: None,
    })
}

/// Whose request a system CGI program serves: the map's `[hosts]` entry,
/// else its `[docroots]` entry for `DOCUMENT_ROOT`, else (`unmapped =
/// "owner"`) the owner of the space `DOCUMENT_ROOT` lies in.
fn locate_system(
    requested: &Path,
    dir: &Path,
    host: Option<&str>,
    document_root: Option<&str>,
    map: &TenantMap,
) -> Result<Located, Refusal> {
    let root = document_root
        .filter(|r| !r.is_empty())
        .map(|r| {
            normalize(Path::new(r)).ok_or_else(|| {
                refuse(
                    403,
                    "document-root",
                    format!("DOCUMENT_ROOT {r:?} is not an absolute path without '..'"),
                )
            })
        })
        .transpose()?;
    let mapped = match &root {
        Some(r) => map.lookup(host, r),
        // Only a host can map it: docroots match no script in a system dir.
        None => map
            .lookup(host, dir)
            .filter(|(_, by)| matches!(by, MappedBy::Host(_))),
    };
    let (key, mapped_by) = match mapped {
        Some((name, by)) => (UserKey::Name(name), Some(by)),
        None if map.unmapped == Unmapped::Deny => {
            return Err(refuse(
                403,
                "unmapped",
                format!(
                    "system CGI {}: no [hosts] or [docroots] entry matches host {:?} or DOCUMENT_ROOT {:?}",
                    requested.display(),
                    host.unwrap_or(""),
                    document_root.unwrap_or("")
                ),
            ))
        }
        None => {
            let Some(root) = root else {
                return Err(refuse(
                    403,
                    "document-root",
                    format!(
                        "system CGI {}: no DOCUMENT_ROOT (nor a [hosts] entry) says which tenant it runs for",
                        requested.display()
                    ),
                ));
            };
            let uid = space_owner(&root).map_err(|e| {
                refuse(
                    403,
                    "document-root",
                    format!("DOCUMENT_ROOT {}: {e}", root.display()),
                )
            })?;
            (UserKey::Uid(uid), None)
        }
    };
    Ok(Located {
        key,
        mapped_by,
        requested: requested.to_path_buf(),
        system: Some(dir.to_path_buf()),
    })
}

/// Rules for a system CGI program in `dir`, run for `tenant`: it resolves
/// inside a listed directory, is root's regular file, not writable by group
/// or others, not setuid/setgid, executable; every directory from the listed
/// one down to it is root's and not writable by group or others.
fn verify_system(
    found: Located,
    tenant: TenantUser,
    map: &TenantMap,
) -> Result<CheckedScript, Refusal> {
    let Located {
        mapped_by,
        requested,
        ..
    } = found;
    let (real, meta) = resolve(&requested)?;
    let top = map
        .system_cgi
        .iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .find(|d| real.starts_with(d))
        .ok_or_else(|| {
            refuse(
                403,
                "symlink-escape",
                format!(
                    "{} resolves to {}, outside the system CGI directories ({})",
                    requested.display(),
                    real.display(),
                    show(&map.system_cgi)
                ),
            )
        })?;
    let interpreter = file_rules(&real, &meta, map, |uid| {
        (uid != 0).then(|| {
            format!(
                "system CGI {} is owned by uid {uid}, not by root",
                real.display()
            )
        })
    })?;
    let mut d = real.parent().unwrap_or(Path::new("/"));
    loop {
        dir_rules(d, |uid| {
            (uid != 0).then(|| {
                format!(
                    "directory {} of system CGI {} is owned by uid {uid}, not by root",
                    d.display(),
                    real.display()
                )
            })
        })?;
        if d == top || !d.starts_with(&top) {
            break;
        }
        d = d.parent().unwrap_or(Path::new("/"));
    }
    Ok(CheckedScript {
        tenant,
        mapped_by,
        dir: real.parent().unwrap_or(Path::new("/")).to_path_buf(),
        requested,
        real,
        interpreter,
        system: true,
    })
}

/// Rule 5 on the file a script resolved to: a regular file whose owner
/// `wrong_owner` accepts (None) or refuses (why), then [`file_mode_rules`].
fn file_rules(
    real: &Path,
    meta: &std::fs::Metadata,
    map: &TenantMap,
    wrong_owner: impl FnOnce(u32) -> Option<String>,
) -> Result<Option<PathBuf>, Refusal> {
    if !meta.file_type().is_file() {
        return Err(refuse(
            403,
            "regular-file",
            format!("{} is not a regular file", real.display()),
        ));
    }
    if let Some(why) = wrong_owner(meta.uid()) {
        return Err(refuse(403, "owner", why));
    }
    file_mode_rules(real, meta, map)
}

/// Rule 6 on a script's directory: an owner `wrong_owner` accepts, not
/// writable by group or others.
fn dir_rules(d: &Path, wrong_owner: impl FnOnce(u32) -> Option<String>) -> Result<(), Refusal> {
    let dm = std::fs::metadata(d)
        .map_err(|e| refuse(403, "dir", format!("stat {}: {e}", d.display())))?;
    if let Some(why) = wrong_owner(dm.uid()) {
        return Err(refuse(403, "dir-owner", why));
    }
    if dm.mode() & 0o022 != 0 {
        return Err(refuse(
            403,
            "dir-writable",
            format!(
                "directory {} is writable by group or others (mode {:04o})",
                d.display(),
                dm.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

/// The rules on a script's mode (not writable by group or others, not
/// setuid/setgid, executable unless an interpreter runs it) and on that
/// interpreter (root's, not writable by group or others). Returns the
/// interpreter.
fn file_mode_rules(
    real: &Path,
    meta: &std::fs::Metadata,
    map: &TenantMap,
) -> Result<Option<PathBuf>, Refusal> {
    let mode = meta.mode();
    if mode & 0o022 != 0 {
        return Err(refuse(
            403,
            "writable",
            format!(
                "{} is writable by group or others (mode {:04o})",
                real.display(),
                mode & 0o7777
            ),
        ));
    }
    if mode & (libc::S_ISUID | libc::S_ISGID) != 0 {
        return Err(refuse(
            403,
            "setid",
            format!(
                "{} is setuid or setgid (mode {:04o})",
                real.display(),
                mode & 0o7777
            ),
        ));
    }
    let Some(interp) = map.interpreter(real) else {
        if mode & 0o100 == 0 {
            return Err(refuse(
                403,
                "executable",
                format!(
                    "{} is not executable by its owner (mode {:04o})",
                    real.display(),
                    mode & 0o7777
                ),
            ));
        }
        return Ok(None);
    };
    // The interpreter is a host program: root's and not writable by anyone
    // else, like a system CGI program (a tenant cannot name one: the map does).
    let bad = |why: String| refuse(500, "interpreter", why);
    let im = std::fs::metadata(interp)
        .map_err(|e| bad(format!("interpreter {}: {e}", interp.display())))?;
    if !im.file_type().is_file()
        || im.uid() != 0
        || im.mode() & 0o022 != 0
        || im.mode() & 0o111 == 0
    {
        return Err(bad(format!(
            "interpreter {} must be an executable regular file owned by root, not writable by group or others (uid {}, mode {:04o})",
            interp.display(),
            im.uid(),
            im.mode() & 0o7777
        )));
    }
    Ok(Some(interp.to_path_buf()))
}

fn not_found(p: &Path, e: std::io::Error) -> Refusal {
    if e.kind() == std::io::ErrorKind::NotFound {
        refuse(404, "exists", format!("{}: no such file", p.display()))
    } else {
        refuse(403, "exists", format!("resolve {}: {e}", p.display()))
    }
}

/// The file `requested` resolves to, and its metadata (as the caller's
/// filesystem identity sees them).
fn resolve(requested: &Path) -> Result<(PathBuf, std::fs::Metadata), Refusal> {
    let real = std::fs::canonicalize(requested).map_err(|e| not_found(requested, e))?;
    let meta = std::fs::symlink_metadata(&real)
        .map_err(|e| refuse(403, "exists", format!("stat {}: {e}", real.display())))?;
    Ok((real, meta))
}

/// Whose space `path` lies in: the owner of its first component that root
/// does not own (a home, `/srv/www/alice`, a tenant's symlink in `/tmp`),
/// or 0 when root owns the whole path. The walk goes one component at a
/// time (`O_PATH|O_NOFOLLOW`) and follows only root's own symlinks, so root's
/// rights never resolve anything a tenant placed: it stops at the first
/// thing not root's, without looking behind it.
pub fn space_owner(path: &Path) -> std::io::Result<u32> {
    use nix::fcntl::{openat, OFlag};
    use nix::sys::stat::{fstatat, Mode, SFlag};
    use std::collections::VecDeque;
    use std::ffi::OsString;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;

    const MAX_LINKS: usize = 40;
    let open = |dir: Option<&OwnedFd>, name: &std::ffi::OsStr| -> std::io::Result<OwnedFd> {
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = openat(dir.map(|d| d.as_raw_fd()), name, flags, Mode::empty())?;
        // SAFETY: openat returned a new descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    let parts = |p: &Path| -> Vec<OsString> {
        p.as_os_str()
            .as_bytes()
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
            .map(|c| std::ffi::OsStr::from_bytes(c).to_os_string())
            .collect()
    };
    let mut dir = open(None, std::ffi::OsStr::new("/"))?;
    let mut todo: VecDeque<OsString> = parts(path).into();
    let mut links = 0;
    while let Some(c) = todo.pop_front() {
        if c == ".." {
            dir = open(Some(&dir), &c)?;
            continue;
        }
        let st = fstatat(
            Some(dir.as_raw_fd()),
            c.as_os_str(),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )?;
        if st.st_uid != 0 {
            return Ok(st.st_uid);
        }
        match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
            SFlag::S_IFLNK => {
                links += 1;
                if links > MAX_LINKS {
                    return Err(nix::errno::Errno::ELOOP.into());
                }
                let target = nix::fcntl::readlinkat(Some(dir.as_raw_fd()), c.as_os_str())?;
                let target = Path::new(&target);
                if target.is_absolute() {
                    dir = open(None, std::ffi::OsStr::new("/"))?;
                }
                for p in parts(target).into_iter().rev() {
                    todo.push_front(p);
                }
            }
            SFlag::S_IFDIR => dir = open(Some(&dir), &c)?,
            _ if todo.is_empty() => return Ok(0),
            _ => return Err(nix::errno::Errno::ENOTDIR.into()),
        }
    }
    Ok(0)
}

/// Rules 3–6 for `tenant` (its passwd entry), on the file `requested`
/// resolved to.
fn verify(
    found: Located,
    real: PathBuf,
    meta: std::fs::Metadata,
    tenant: TenantUser,
    map: &TenantMap,
) -> Result<CheckedScript, Refusal> {
    let Located {
        mapped_by,
        requested,
        ..
    } = found;
    min_uid(&tenant, map)?;

    let areas = map.areas(&tenant.name, &tenant.home);
    let lexical: Vec<PathBuf> = areas.iter().filter_map(|a| normalize(a)).collect();
    if !lexical.iter().any(|a| requested.starts_with(a)) {
        return Err(refuse(
            403,
            "inside-home",
            format!(
                "{} is outside {}'s areas ({})",
                requested.display(),
                tenant.name,
                show(&lexical)
            ),
        ));
    }
    // `real` has no symlink in it, so neither has any prefix of it: if an
    // area as written is one, it is the area's real path, and the script
    // lies inside it. Otherwise compare with the areas' real paths (areas
    // that do not exist cannot hold the script).
    let inside = lexical.iter().any(|a| real.starts_with(a))
        || areas
            .iter()
            .filter_map(|a| std::fs::canonicalize(a).ok())
            .any(|a| real.starts_with(a));
    if !inside {
        let resolved: Vec<PathBuf> = areas
            .iter()
            .filter_map(|a| std::fs::canonicalize(a).ok())
            .collect();
        return Err(refuse(
            403,
            "symlink-escape",
            format!(
                "{} resolves to {}, outside {}'s areas ({})",
                requested.display(),
                real.display(),
                tenant.name,
                show(&resolved)
            ),
        ));
    }

    let interpreter = file_rules(&real, &meta, map, |uid| {
        (uid != tenant.uid).then(|| {
            format!(
                "{} is owned by uid {uid}, not by {} (uid {})",
                real.display(),
                tenant.name,
                tenant.uid
            )
        })
    })?;
    let dir = real.parent().unwrap_or(Path::new("/")).to_path_buf();
    dir_rules(&dir, |uid| {
        (uid != tenant.uid && uid != 0).then(|| {
            format!(
                "directory {} is owned by uid {uid}, not by {} or root",
                dir.display(),
                tenant.name
            )
        })
    })?;
    Ok(CheckedScript {
        tenant,
        mapped_by,
        requested,
        real,
        dir,
        interpreter,
        system: false,
    })
}

fn show(v: &[PathBuf]) -> String {
    v.iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A map whose area for the current user is `dir` (tests run as any user).
    fn setup() -> (tempfile::TempDir, TenantMap, TenantUser) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let me = TenantUser::by_uid(nix::unistd::geteuid().as_raw()).unwrap();
        let text = format!(
            "min_uid = 0\nallow_dirs = [{:?}]\n",
            dir.path().canonicalize().unwrap().display().to_string()
        );
        let map = TenantMap::parse(&text, Path::new("t.toml")).unwrap();
        (dir, map, me)
    }

    fn script(dir: &Path, name: &str, mode: u32) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, "#!/bin/sh\necho\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    /// The current user with a home of the test's own (an empty temp dir):
    /// no other temp dir lies inside it, wherever TMPDIR points (also inside
    /// the real home), so the home area never covers a test's paths.
    fn me_with_own_home() -> (tempfile::TempDir, TenantUser) {
        let home = tempfile::tempdir().unwrap();
        let mut me = TenantUser::by_uid(nix::unistd::geteuid().as_raw()).unwrap();
        me.home = home.path().canonicalize().unwrap();
        (home, me)
    }

    /// [`check`] for `tenant` as given (its home included), not as passwd
    /// has it.
    fn check_as(
        path: &str,
        map: &TenantMap,
        tenant: &TenantUser,
    ) -> Result<CheckedScript, Refusal> {
        let mut users = |k: &UserKey| {
            Some(match k {
                UserKey::Uid(u) if *u == tenant.uid => Ok(tenant.clone()),
                UserKey::Name(n) if *n == tenant.name => Ok(tenant.clone()),
                k => k.lookup(),
            })
        };
        Ok(check_with(path, None, None, map, &mut users)?.unwrap())
    }

    fn rule(r: Result<CheckedScript, Refusal>) -> &'static str {
        r.map(|_| "ok").unwrap_or_else(|e| e.rule)
    }

    #[test]
    fn accepts_a_good_script_and_resolves_it() {
        let (d, map, me) = setup();
        let base = d.path().canonicalize().unwrap();
        let p = script(&base, "ok.cgi", 0o755);
        let c = check(p.to_str().unwrap(), None, &map).unwrap();
        assert_eq!(c.tenant, me);
        assert_eq!(c.real, p);
        assert_eq!(c.dir, base);
        // A symlink inside the area to a file inside the area is fine.
        std::os::unix::fs::symlink(&p, base.join("link.cgi")).unwrap();
        assert_eq!(
            check(base.join("link.cgi").to_str().unwrap(), None, &map)
                .unwrap()
                .real,
            p
        );
    }

    #[test]
    fn refuses_each_rule() {
        let (d, map, _) = setup();
        let base = d.path().canonicalize().unwrap();
        let s = |p: &Path| p.to_str().unwrap().to_string();
        assert_eq!(rule(check("", None, &map)), "script-filename");
        assert_eq!(rule(check("x.cgi", None, &map)), "absolute-path");
        assert_eq!(
            rule(check(&format!("{}/../x.cgi", base.display()), None, &map)),
            "dotdot"
        );
        assert_eq!(
            rule(check(&s(&base.join("missing.cgi")), None, &map)),
            "exists"
        );
        assert_eq!(
            check(&s(&base.join("missing.cgi")), None, &map)
                .unwrap_err()
                .status,
            404
        );
        assert_eq!(
            rule(check(&s(&script(&base, "gw.cgi", 0o775)), None, &map)),
            "writable"
        );
        assert_eq!(
            rule(check(&s(&script(&base, "ow.cgi", 0o757)), None, &map)),
            "writable"
        );
        assert_eq!(
            rule(check(&s(&script(&base, "suid.cgi", 0o4755)), None, &map)),
            "setid"
        );
        assert_eq!(
            rule(check(&s(&script(&base, "noexec.cgi", 0o644)), None, &map)),
            "executable"
        );
        std::fs::create_dir(base.join("sub.cgi")).unwrap();
        assert_eq!(
            rule(check(&s(&base.join("sub.cgi")), None, &map)),
            "regular-file"
        );
        // Symlink escape: a link inside the area to a file outside it (the
        // other temp dir; the home is one of the test's own, outside both).
        let outside = tempfile::tempdir().unwrap();
        let target = script(outside.path(), "t.cgi", 0o755);
        std::os::unix::fs::symlink(&target, base.join("escape.cgi")).unwrap();
        let (_home, me) = me_with_own_home();
        assert_eq!(
            rule(check_as(&s(&base.join("escape.cgi")), &map, &me)),
            "symlink-escape"
        );
        // A group-writable directory.
        let w = base.join("w");
        std::fs::create_dir(&w).unwrap();
        std::fs::set_permissions(&w, std::fs::Permissions::from_mode(0o775)).unwrap();
        assert_eq!(
            rule(check(&s(&script(&w, "a.cgi", 0o755)), None, &map)),
            "dir-writable"
        );
    }

    #[test]
    fn the_space_owner_is_the_first_component_root_does_not_own() {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().canonicalize().unwrap();
        let me = nix::unistd::geteuid().as_raw();
        let sub = base.join("sub");
        std::fs::create_dir(&sub).unwrap();
        // Not followed: the walk stops at the link itself (its owner's space).
        std::os::unix::fs::symlink("/nonexistent/x", sub.join("link")).unwrap();
        let want = if me == 0 {
            nix::unistd::chown(&sub, Some(65534.into()), None).unwrap();
            65534
        } else {
            me
        };
        assert_eq!(space_owner(&sub.join("link/y/z")).unwrap(), want);
        assert_eq!(space_owner(&sub.join("missing")).unwrap(), want);
        if me == 0 {
            // Root's own path all the way: root; missing: NotFound.
            assert_eq!(space_owner(Path::new("/usr/bin/env")).unwrap(), 0);
            let e = space_owner(&base.join("nothing/here")).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
            // A root-owned link is followed, into a space of its own.
            std::os::unix::fs::symlink(&sub, base.join("rootlink")).unwrap();
            assert_eq!(space_owner(&base.join("rootlink/file")).unwrap(), 65534);
        }
    }

    #[test]
    fn an_area_given_as_a_symlink_is_its_target() {
        let (d, _, me) = setup();
        let base = d.path().canonicalize().unwrap();
        let real = base.join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o755)).unwrap();
        let link = base.join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let p = script(&real, "a.cgi", 0o755);
        let map = TenantMap::parse(
            &format!(
                "min_uid = 0\nallow_dirs = [{:?}]\n",
                link.display().to_string()
            ),
            Path::new("t"),
        )
        .unwrap();
        // Requested through the link: inside the area as written, and the
        // real path is inside the area's real path.
        let c = check(link.join("a.cgi").to_str().unwrap(), None, &map).unwrap();
        assert_eq!(c.real, p);
        assert_eq!(c.tenant, me);
        // Requested by its real path: not inside the area as written (nor
        // in the home: one of the test's own).
        let (_home, me) = me_with_own_home();
        assert_eq!(
            rule(check_as(p.to_str().unwrap(), &map, &me)),
            "inside-home"
        );
    }

    #[test]
    fn refuses_outside_areas_and_low_uids() {
        let (d, _, me) = setup();
        let base = d.path().canonicalize().unwrap();
        let p = script(&base, "a.cgi", 0o755);
        let none = TenantMap::parse("min_uid = 0", Path::new("t")).unwrap();
        let (_home, own) = me_with_own_home();
        assert_eq!(
            rule(check_as(p.to_str().unwrap(), &none, &own)),
            "inside-home"
        );
        let high = TenantMap::parse(
            &format!(
                "min_uid = {}\nallow_dirs = [{:?}]",
                me.uid + 1,
                base.display().to_string()
            ),
            Path::new("t"),
        )
        .unwrap();
        assert_eq!(rule(check(p.to_str().unwrap(), None, &high)), "min-uid");
        let deny = TenantMap::parse(
            &format!(
                "min_uid = 0\nunmapped = \"deny\"\nallow_dirs = [{:?}]",
                base.display().to_string()
            ),
            Path::new("t"),
        )
        .unwrap();
        assert_eq!(rule(check(p.to_str().unwrap(), None, &deny)), "unmapped");
        let mapped = format!(
            "min_uid = 0\nunmapped = \"deny\"\nallow_dirs = [{:?}]\n[docroots]\n{:?} = {:?}\n",
            base.display().to_string(),
            base.display().to_string(),
            me.name
        );
        let mapped = TenantMap::parse(&mapped, Path::new("t")).unwrap();
        let c = check(p.to_str().unwrap(), None, &mapped).unwrap();
        assert_eq!(c.mapped_by, Some(MappedBy::Docroot(base.clone())));
    }
}
