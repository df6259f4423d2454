//! Path resolution that never follows a symlink out of the new root, and the
//! two newer mount syscalls (openat2, mount_setattr) that nix doesn't wrap.
//!
//! Every rootfs destination is resolved component by component from the new
//! root's fd with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, so a symlink planted
//! by a tenant inside a directory it owns (say its home, bound earlier) makes
//! the operation fail instead of redirecting a mount to a host path.

use nix::errno::Errno;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Component, Path};

const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
const RESOLVE_BENEATH: u64 = 0x08;

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// openat2(dirfd, path, flags) confined beneath `dirfd` with no symlinks.
pub fn openat_beneath(dirfd: RawFd, path: &str, flags: i32, mode: u32) -> Result<OwnedFd, Errno> {
    let c = CString::new(path).map_err(|_| Errno::EINVAL)?;
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC | libc::O_NOFOLLOW) as u64,
        mode: mode as u64,
        resolve: RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: `c` is a valid NUL-terminated string and `how` a properly laid
    // out struct open_how that lives across the call; the kernel copies both.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dirfd,
            c.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(Errno::last());
    }
    // SAFETY: the kernel just returned this fd to us; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The relative form of an absolute, normalised sandbox path ("/a/b" → "a/b").
pub fn relative(p: &Path) -> String {
    let mut out = String::new();
    for c in p.components() {
        if let Component::Normal(n) = c {
            if !out.is_empty() {
                out.push('/');
            }
            out.push_str(&n.to_string_lossy());
        }
    }
    out
}

pub enum Kind {
    Dir(u32),
    File(u32),
}

/// Resolve `dst` beneath `root`, creating missing parents (0755) and the
/// final component as `kind`; returns an O_PATH fd on the final component.
/// A symlink anywhere on the way is an error (ELOOP).
pub fn ensure(root: RawFd, dst: &Path, kind: Kind) -> Result<OwnedFd, Errno> {
    let rel = relative(dst);
    let (parent, name) = match rel.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, rel.as_str()),
    };
    let parent_fd = match parent {
        Some(p) => ensure_dir_path(root, p)?,
        None => dup(root)?,
    };
    let cname = CString::new(name).map_err(|_| Errno::EINVAL)?;
    match kind {
        Kind::Dir(mode) => {
            // SAFETY: valid dirfd and NUL-terminated name.
            let r = unsafe { libc::mkdirat(parent_fd.as_raw_fd(), cname.as_ptr(), mode) };
            if r < 0 && Errno::last() != Errno::EEXIST {
                return Err(Errno::last());
            }
            if r == 0 {
                chmod_at(parent_fd.as_raw_fd(), &cname, mode)?;
            }
            openat_beneath(
                parent_fd.as_raw_fd(),
                name,
                libc::O_PATH | libc::O_DIRECTORY,
                0,
            )
        }
        Kind::File(mode) => {
            match openat_beneath(parent_fd.as_raw_fd(), name, libc::O_PATH, 0) {
                // O_PATH|O_NOFOLLOW opens a symlink itself: refuse it like
                // any other symlink on the way.
                Ok(fd) if is_symlink(&fd)? => Err(Errno::ELOOP),
                Ok(fd) => Ok(fd),
                Err(Errno::ENOENT) => {
                    let fd = openat_beneath(
                        parent_fd.as_raw_fd(),
                        name,
                        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
                        mode,
                    )?;
                    drop(fd);
                    openat_beneath(parent_fd.as_raw_fd(), name, libc::O_PATH, 0)
                }
                Err(e) => Err(e),
            }
        }
    }
}

fn is_symlink(fd: &OwnedFd) -> Result<bool, Errno> {
    let st = nix::sys::stat::fstat(fd.as_raw_fd())?;
    Ok(st.st_mode & libc::S_IFMT == libc::S_IFLNK)
}

fn chmod_at(dirfd: RawFd, name: &CString, mode: u32) -> Result<(), Errno> {
    // SAFETY: valid dirfd and NUL-terminated name; AT_SYMLINK_NOFOLLOW is not
    // supported by fchmodat, but the entry was created by us a moment ago.
    let r = unsafe { libc::fchmodat(dirfd, name.as_ptr(), mode, 0) };
    if r < 0 {
        return Err(Errno::last());
    }
    Ok(())
}

fn dup(fd: RawFd) -> Result<OwnedFd, Errno> {
    // SAFETY: F_DUPFD_CLOEXEC on a valid fd returns a new fd we own.
    let r = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if r < 0 {
        return Err(Errno::last());
    }
    // SAFETY: fresh fd from the kernel.
    Ok(unsafe { OwnedFd::from_raw_fd(r) })
}

/// Walk (and create, 0755) every directory of `rel` beneath `root`.
fn ensure_dir_path(root: RawFd, rel: &str) -> Result<OwnedFd, Errno> {
    let mut cur = dup(root)?;
    for comp in rel.split('/').filter(|c| !c.is_empty()) {
        let c = CString::new(comp).map_err(|_| Errno::EINVAL)?;
        match openat_beneath(cur.as_raw_fd(), comp, libc::O_PATH | libc::O_DIRECTORY, 0) {
            Ok(fd) => cur = fd,
            Err(Errno::ENOENT) => {
                // SAFETY: valid dirfd and NUL-terminated name.
                let r = unsafe { libc::mkdirat(cur.as_raw_fd(), c.as_ptr(), 0o755) };
                if r < 0 && Errno::last() != Errno::EEXIST {
                    return Err(Errno::last());
                }
                cur = openat_beneath(cur.as_raw_fd(), comp, libc::O_PATH | libc::O_DIRECTORY, 0)?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(cur)
}

/// "/proc/self/fd/N": how mount(2) is pointed at an fd we resolved safely.
pub fn fd_path(fd: &OwnedFd) -> String {
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}

pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub const MOUNT_ATTR_NODEV: u64 = 0x4;
pub const MOUNT_ATTR_NOEXEC: u64 = 0x8;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const SYS_MOUNT_SETATTR: libc::c_long = 442; // same number on every architecture
const AT_RECURSIVE: u32 = 0x8000;

/// Set mount attributes on the mount at `fd` and every mount below it.
/// Falls back to a remount of the top mount on kernels before 5.12.
pub fn set_attrs_recursive(fd: &OwnedFd, attrs: u64) -> Result<(), Errno> {
    set_attrs(fd, attrs, 0)
}

/// Set `attrs` and clear `clear` on the mount at `fd` and every mount below
/// it: a bind mount starts with the flags of the mount it was made from, so
/// one that must differ (the sandbox's /dev, which is not `nodev`, bound
/// from its `nodev` tmpfs) clears what it must not keep. Falls back to a
/// remount of the top mount on kernels before 5.12, which sets exactly
/// `attrs` (and so clears the rest).
pub fn set_attrs(fd: &OwnedFd, attrs: u64, clear: u64) -> Result<(), Errno> {
    let attr = MountAttr {
        attr_set: attrs,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let empty = c"";
    // SAFETY: valid fd, empty NUL-terminated path with AT_EMPTY_PATH, and a
    // struct mount_attr of the size we pass; the kernel only reads it.
    let r = unsafe {
        libc::syscall(
            SYS_MOUNT_SETATTR,
            fd.as_raw_fd(),
            empty.as_ptr(),
            (libc::AT_EMPTY_PATH as u32) | AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r == 0 {
        return Ok(());
    }
    if Errno::last() != Errno::ENOSYS {
        return Err(Errno::last());
    }
    let mut flags = nix::mount::MsFlags::MS_REMOUNT | nix::mount::MsFlags::MS_BIND;
    for (attr, flag) in [
        (MOUNT_ATTR_RDONLY, nix::mount::MsFlags::MS_RDONLY),
        (MOUNT_ATTR_NOSUID, nix::mount::MsFlags::MS_NOSUID),
        (MOUNT_ATTR_NODEV, nix::mount::MsFlags::MS_NODEV),
        (MOUNT_ATTR_NOEXEC, nix::mount::MsFlags::MS_NOEXEC),
    ] {
        if attrs & attr != 0 {
            flags |= flag;
        }
    }
    nix::mount::mount(
        None::<&str>,
        fd_path(fd).as_str(),
        None::<&str>,
        flags,
        None::<&str>,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn sandbox_paths_become_relative_without_climbing() {
        assert_eq!(relative(Path::new("/")), "");
        assert_eq!(relative(Path::new("/a/b")), "a/b");
        assert_eq!(relative(Path::new("//a//b/")), "a/b");
        assert_eq!(relative(Path::new("/a/./b")), "a/b");
        assert_eq!(relative(Path::new("/../../etc")), "etc", "no '..' survives");
    }

    /// Runs without root: openat2 beneath a temp dir standing in for the
    /// new root.
    #[test]
    fn ensure_creates_beneath_the_root_and_refuses_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let root = nix::fcntl::open(
            dir.path(),
            nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY,
            nix::sys::stat::Mode::empty(),
        )
        .unwrap();
        // SAFETY: a fresh fd from open, owned here only.
        let root = unsafe { OwnedFd::from_raw_fd(root) };
        let r = root.as_raw_fd();
        ensure(r, Path::new("/srv/www/html"), Kind::Dir(0o750)).unwrap();
        let html = dir.path().join("srv/www/html");
        assert!(html.is_dir());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&html), 0o750, "the final component gets its mode");
        assert_eq!(mode(&dir.path().join("srv/www")), 0o755, "parents 0755");
        ensure(r, Path::new("/etc/hosts"), Kind::File(0o644)).unwrap();
        assert!(dir.path().join("etc/hosts").is_file());
        // Again: existing entries are fine.
        ensure(r, Path::new("/srv/www/html"), Kind::Dir(0o750)).unwrap();
        ensure(r, Path::new("/etc/hosts"), Kind::File(0o644)).unwrap();

        // A symlink anywhere on the way, even one pointing inside, is refused.
        std::os::unix::fs::symlink("/", dir.path().join("out")).unwrap();
        std::os::unix::fs::symlink("srv", dir.path().join("in")).unwrap();
        std::os::unix::fs::symlink("hosts", dir.path().join("etc/link")).unwrap();
        for (p, kind) in [
            ("/out/tmp/x", Kind::Dir(0o755)),
            ("/in/www", Kind::Dir(0o755)),
            ("/out", Kind::File(0o644)),
            ("/etc/link", Kind::File(0o644)),
        ] {
            let e = ensure(r, Path::new(p), kind).unwrap_err();
            assert!(
                matches!(e, Errno::ELOOP | Errno::EXDEV | Errno::ENOTDIR),
                "{p}: {e}"
            );
        }
        assert!(
            openat_beneath(r, "../x", libc::O_PATH, 0).is_err(),
            "never above"
        );
        assert!(fd_path(&root).starts_with("/proc/self/fd/"));
    }
}
