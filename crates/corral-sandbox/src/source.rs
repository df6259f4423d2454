//! Opening the host paths a rootfs is built from (bind and copy sources,
//! the tenant's disk /tmp) without letting anyone but root redirect them.
//!
//! The init builds the rootfs as root, and a profile may name sources under
//! a directory the tenant can write (`$HOME/.php-sessions`): resolving such a
//! path the usual way follows a symlink the tenant planted there, and binds a
//! host directory read-write, copies a host file in, or chowns one to the
//! tenant (runc CVE-2021-30465 is this class). So the path is walked one
//! component at a time from "/" with `O_PATH | O_NOFOLLOW`, and a symlink is
//! followed only when the directory holding it is *trusted*: owned by root
//! and writable by nobody else, so only root can have put the link there
//! (the directories of the host's own layout: /bin -> usr/bin,
//! /etc/resolv.conf -> ../run/...). A symlink in any other directory is
//! refused, or reported to the caller when it is the last component. The
//! caller then binds or reads the object through the fd it got, never
//! through the path again. (bubblewrap and runc open with O_PATH and mount
//! through /proc/self/fd for the same reason.)

use nix::errno::Errno;
use nix::fcntl::{openat, readlinkat, OFlag};
use nix::sys::stat::{fstat, mkdirat, FileStat, Mode, SFlag};
use std::ffi::OsStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Component, Path, PathBuf};

/// The most symlinks one resolution follows (the kernel's MAXSYMLINKS).
const MAX_LINKS: u32 = 40;

/// What a source path names.
#[derive(Debug)]
pub enum Source {
    /// The object itself (O_PATH), and its status.
    Object(OwnedFd, FileStat),
    /// The last component is a symlink that was not followed: its target,
    /// and whether root alone could have made it (a trusted directory).
    Symlink { target: PathBuf, trusted: bool },
}

/// Why a source could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{0}")]
    Sys(#[from] Errno),
    #[error(
        "{} is a symlink in a directory that uid {owner} (or its group or others) can change; \
         corral follows symlinks only in root-owned directories that no one else can write",
        at.display()
    )]
    Untrusted { at: PathBuf, owner: u32 },
    #[error("more than {MAX_LINKS} symlinks")]
    Loop,
}

impl SourceError {
    /// The path does not exist (a `*-try` mount skips it).
    pub fn is_missing(&self) -> bool {
        matches!(self, SourceError::Sys(Errno::ENOENT))
    }
}

fn own(fd: RawFd) -> OwnedFd {
    // SAFETY: every caller passes an fd that openat just returned to it and
    // that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

fn open_path(dir: RawFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    let fl = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    openat(Some(dir), name, fl, Mode::empty()).map(own)
}

fn root() -> Result<OwnedFd, Errno> {
    open_path(libc::AT_FDCWD, OsStr::new("/"))
}

/// Only root can add, remove or rename entries of this directory.
pub fn trusted(st: &FileStat) -> bool {
    st.st_uid == 0 && st.st_mode & 0o022 == 0
}

fn is_link(st: &FileStat) -> bool {
    SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFLNK
}

/// Open `path` (absolute) as described in the module documentation.
/// `follow_last`: a last component that is a symlink in a trusted directory
/// is followed too (for sources read as files, such as a copy's).
pub fn open(path: &Path, follow_last: bool) -> Result<Source, SourceError> {
    let mut links = 0;
    // Components still to walk, in reverse (the next one last).
    let mut todo: Vec<PathBuf> = Vec::new();
    push_components(&mut todo, path);
    let mut dir = root()?;
    let mut dir_st = fstat(dir.as_raw_fd())?;
    // The path walked so far, for messages.
    let mut walked = PathBuf::from("/");
    while let Some(name) = todo.pop() {
        let last = todo.is_empty();
        if name.as_os_str() == "/" {
            dir = root()?;
            dir_st = fstat(dir.as_raw_fd())?;
            walked = PathBuf::from("/");
            continue;
        }
        let fd = open_path(dir.as_raw_fd(), name.as_os_str())?;
        let st = fstat(fd.as_raw_fd())?;
        if is_link(&st) {
            let target = PathBuf::from(readlinkat(Some(fd.as_raw_fd()), OsStr::new(""))?);
            let here = walked.join(&name);
            if !trusted(&dir_st) {
                if last && !follow_last {
                    return Ok(Source::Symlink {
                        target,
                        trusted: false,
                    });
                }
                return Err(SourceError::Untrusted {
                    at: here,
                    owner: dir_st.st_uid,
                });
            }
            if last && !follow_last {
                return Ok(Source::Symlink {
                    target,
                    trusted: true,
                });
            }
            links += 1;
            if links > MAX_LINKS {
                return Err(SourceError::Loop);
            }
            push_components(&mut todo, &target);
            continue;
        }
        if last {
            return Ok(Source::Object(fd, st));
        }
        if name.as_os_str() == ".." {
            walked.pop();
        } else {
            walked.push(&name);
        }
        dir = fd;
        dir_st = st;
    }
    // Only "/" itself (or a path of nothing but "/" and "."): the root.
    Ok(Source::Object(dir, dir_st))
}

/// Push the components of `p` (reversed) onto `todo`; an absolute path
/// starts with "/", which sends the walk back to the root.
fn push_components(todo: &mut Vec<PathBuf>, p: &Path) {
    let mut parts: Vec<PathBuf> = Vec::new();
    for c in p.components() {
        match c {
            Component::RootDir => {
                parts.clear();
                parts.push(PathBuf::from("/"));
            }
            Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => parts.push(PathBuf::from("..")),
            Component::Normal(n) => parts.push(PathBuf::from(n)),
        }
    }
    todo.extend(parts.into_iter().rev());
}

/// Open a directory (O_PATH), creating missing components as root with
/// `mode` (mkdirat relative to the parent fd, never through a path), with
/// the symlink rules of [`open`] (a trusted symlink is followed, any other
/// refused).
pub fn ensure_dir(path: &Path, mode: u32) -> Result<OwnedFd, SourceError> {
    match open(path, true) {
        Ok(Source::Object(fd, st)) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => Ok(fd),
        // (A symlink is not returned when the last component is followed.)
        Ok(_) => Err(Errno::ENOTDIR.into()),
        Err(e) if e.is_missing() => {
            let parent = path.parent().ok_or(Errno::ENOENT)?;
            let name = path.file_name().ok_or(Errno::EINVAL)?;
            let pfd = ensure_dir(parent, mode)?;
            // O_PATH fds serve as dirfds for mkdirat and openat.
            match mkdirat(Some(pfd.as_raw_fd()), name, Mode::from_bits_truncate(mode)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(e.into()),
            }
            let fl = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
            let fd = own(openat(Some(pfd.as_raw_fd()), name, fl, Mode::empty())?);
            // mkdirat's mode went through the umask.
            nix::sys::stat::fchmodat(
                Some(pfd.as_raw_fd()),
                name,
                Mode::from_bits_truncate(mode),
                nix::sys::stat::FchmodatFlags::NoFollowSymlink,
            )
            .or_else(|e| {
                if e == Errno::EOPNOTSUPP {
                    Ok(())
                } else {
                    Err(e)
                }
            })?;
            Ok(fd)
        }
        Err(e) => Err(e),
    }
}

/// `/proc/self/fd/N` of an O_PATH fd: what mount(2), chown and a reopen go
/// through to reach exactly the object the fd holds.
pub fn reopen(fd: &OwnedFd, flags: OFlag) -> Result<OwnedFd, Errno> {
    let p = format!("/proc/self/fd/{}", fd.as_raw_fd());
    nix::fcntl::open(
        p.as_str(),
        flags | OFlag::O_CLOEXEC | OFlag::O_NOCTTY,
        Mode::empty(),
    )
    .map(own)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn system_symlinks_in_root_owned_directories_are_followed() {
        // /proc/self is a symlink in /proc (root-owned, 0555).
        match open(Path::new("/proc/self/status"), false).unwrap() {
            Source::Object(_, st) => assert_eq!(st.st_mode & libc::S_IFMT, libc::S_IFREG),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_symlink_in_a_directory_others_can_write_is_not_followed() {
        let d = tempfile::tempdir().unwrap();
        // A tempdir is owned by whoever runs the test; as non-root it is
        // untrusted anyway, as root make it group-writable.
        std::fs::set_permissions(
            d.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o775),
        )
        .unwrap();
        symlink("/etc", d.path().join("link")).unwrap();
        let e = open(&d.path().join("link/passwd"), false).unwrap_err();
        assert!(matches!(e, SourceError::Untrusted { .. }), "{e}");
        let e = open(&d.path().join("link"), true).unwrap_err();
        assert!(matches!(e, SourceError::Untrusted { .. }), "{e}");
        match open(&d.path().join("link"), false).unwrap() {
            Source::Symlink { target, trusted } => {
                assert_eq!(target, Path::new("/etc"));
                assert!(!trusted);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn missing_paths_say_so() {
        assert!(open(Path::new("/nonexistent-corral/x"), false)
            .unwrap_err()
            .is_missing());
    }
}
