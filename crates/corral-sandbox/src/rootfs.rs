//! Assemble a tenant's root filesystem from the plan's mount operations.
//! Runs in the tenant init (pid 1 of the new pid namespace, in the new mount
//! namespace, still root, before pivot_root). Every destination is resolved
//! beneath the new root without following symlinks (see fsutil).

use crate::fsutil::{self, ensure, fd_path, openat_beneath, Kind};
use crate::source::{self, Source, SourceError};
use corral_profile::plan::{MountOp, Plan, TmpPlan};
use nix::errno::Errno;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A step of building the rootfs failed: what was done, on which path, and
/// why.
#[derive(Debug, thiserror::Error)]
#[error("{what} {path}: {cause}")]
pub struct RootfsError {
    pub what: &'static str,
    pub path: String,
    #[source]
    pub cause: Cause,
}

/// Why a rootfs step failed.
#[derive(Debug, thiserror::Error)]
pub enum Cause {
    #[error(transparent)]
    Sys(#[from] Errno),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Nul(#[from] std::ffi::NulError),
    #[error("a path component is a symlink")]
    Symlink,
    #[error("a path component is a symlink or not a directory")]
    NotADirectory,
    #[error("{errno} (source {})", from.display())]
    Bind { errno: Errno, from: PathBuf },
    #[error("raced")]
    Raced,
    #[error("exists and is not a directory (refusing symlinks)")]
    NotOwnDir,
    #[error("is owned by uid {owner}, not the tenant ({uid})")]
    Owner { owner: u32, uid: u32 },
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error("is not a regular file")]
    NotRegular,
    #[error("symlinks lead from one bind source to the next more than 8 times")]
    TooDeep,
}

fn err(what: &'static str, path: &Path, cause: impl Into<Cause>) -> RootfsError {
    RootfsError {
        what,
        path: path.display().to_string(),
        cause: cause.into(),
    }
}

const NONE: Option<&str> = None;

/// Masked in every sandbox's /proc (Docker's list): an empty read-only
/// directory or an empty file over each.
const PROC_MASKED: &[&str] = &[
    "acpi",
    "asound",
    "interrupts",
    "kcore",
    "keys",
    "latency_stats",
    "sched_debug",
    "scsi",
    "timer_list",
    "timer_stats",
];

/// Read-only in every sandbox's /proc (Docker's list).
const PROC_READ_ONLY: &[&str] = &["bus", "fs", "irq", "sys", "sysrq-trigger"];

/// Size of the sandbox's /dev/shm (POSIX shared memory, semaphores): the
/// size of the sandbox's own tmpfs, of which /dev/shm is the only part a
/// tenant can write.
pub const SHM_SIZE: u64 = 64 << 20;

/// Build the rootfs on a fresh tmpfs mounted at `newroot` (an existing empty
/// host directory), then pivot into it.
///
/// That tmpfs is the sandbox's only one unless the profile asks for more. It
/// holds three directories: `root` (bound on itself, the sandbox's `/`),
/// `staging` (the files the profile writes, bound from there) and `empty`
/// (bound read-only on every directory a mask hides); after `pivot_root`
/// only `root` is reachable, so the other two stay as they are. The
/// sandbox's /dev, /dev/shm and /run are directories of `root`, each bound
/// on itself with the flags its own tmpfs had (see [`Rootfs::tmpfs_dir`]).
///
/// Why: every superblock registers a shrinker, and since Linux 6.7 every
/// memory cgroup keeps a bit and a counter for each shrinker id up to the
/// most ever registered at once (`shrinker_info`, about 1 KiB per 64), so
/// superblocks per sandbox × tenants × memory cgroups grows as N². What
/// stays a superblock of its own: /proc (one per pid namespace), /dev/pts
/// (the sandbox's own ptys), and a profile's `tmpfs` with a `size` or that
/// the tenant can write (its own cap, or none). The tmpfs is capped at
/// [`SHM_SIZE`]: the tenant writes only in /dev/shm (the root and the masks
/// are read-only, /dev and /run are root's 0755, `staging` and `empty` are
/// out of reach), so /dev/shm keeps its 64 MiB cap.
pub fn build(
    plan: &Plan,
    newroot: &Path,
    dns_relay: Option<std::net::Ipv4Addr>,
) -> Result<(), RootfsError> {
    // Nothing we mount may propagate back to the host; host unmounts still
    // reach us (slave), so the sandbox never pins a host filesystem.
    mount(NONE, "/", NONE, MsFlags::MS_REC | MsFlags::MS_SLAVE, NONE)
        .map_err(|e| err("make / rslave", Path::new("/"), e))?;
    mount(
        Some("tmpfs"),
        newroot,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(format!("mode=0755,size={SHM_SIZE}").as_str()),
    )
    .map_err(|e| err("mount tmpfs root on", newroot, e))?;
    let top = nix::fcntl::open(
        newroot,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| err("open new root", newroot, e))?;
    // SAFETY: `open` just returned this fd and nothing else owns it.
    let top: OwnedFd = unsafe { std::os::fd::FromRawFd::from_raw_fd(top) };
    let dir = |name: &str, mode| {
        ensure(top.as_raw_fd(), Path::new(name), Kind::Dir(mode))
            .map_err(|e| err("create", &newroot.join(name), e))
    };
    let (staging, empty) = (dir("staging", 0o700)?, dir("empty", 0o755)?);
    let root = dir("root", 0o755)?;
    // A mount of its own, to pivot into.
    mount(
        Some(fd_path(&root).as_str()),
        fd_path(&root).as_str(),
        NONE,
        MsFlags::MS_BIND,
        NONE,
    )
    .map_err(|e| err("bind on itself", &newroot.join("root"), e))?;
    let root = openat_beneath(top.as_raw_fd(), "root", libc::O_PATH | libc::O_DIRECTORY, 0)
        .map_err(|e| err("open", &newroot.join("root"), e))?;
    let root_dev = nix::sys::stat::fstat(root.as_raw_fd())
        .map_err(|e| err("stat new root", newroot, e))?
        .st_dev;
    let fs = Rootfs {
        root,
        root_dev,
        staging,
        empty,
        dns_relay,
        owner: (plan.tenant.uid, plan.tenant.gid),
    };
    for op in &plan.mounts {
        fs.apply(op)?;
    }
    fs.identity_files(plan)?;
    fs.tmp(plan)?;
    pivot(&newroot.join("root"))?;
    // The root itself is read-only: tenants write only where the profile says.
    mount(
        NONE,
        "/",
        NONE,
        MsFlags::MS_REMOUNT
            | MsFlags::MS_BIND
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV,
        NONE,
    )
    .map_err(|e| err("remount read-only", Path::new("/"), e))?;
    Ok(())
}

fn pivot(newroot: &Path) -> Result<(), RootfsError> {
    // pivot_root(".", ".") stacks the old root on top of the new one; a lazy
    // unmount of "." then removes it without needing a directory for it.
    nix::unistd::chdir(newroot).map_err(|e| err("chdir", newroot, e))?;
    nix::unistd::pivot_root(".", ".").map_err(|e| err("pivot_root to", newroot, e))?;
    umount2(".", MntFlags::MNT_DETACH).map_err(|e| err("detach old root", Path::new("/"), e))?;
    nix::unistd::chdir("/").map_err(|e| err("chdir", Path::new("/"), e))?;
    Ok(())
}

struct Rootfs {
    root: OwnedFd,
    /// The device of the sandbox's own tmpfs (the new root).
    root_dev: libc::dev_t,
    /// Where `file` writes what it binds: a directory of that tmpfs outside
    /// the new root.
    staging: OwnedFd,
    /// An empty directory of that tmpfs outside the new root, which masks
    /// bind read-only: nothing reaches it but those masks, so it stays empty.
    empty: OwnedFd,
    /// The DNS relay's address, which a copied /etc/resolv.conf names
    /// instead of the host's loopback resolvers (crate::net).
    dns_relay: Option<std::net::Ipv4Addr>,
    /// The tenant's uid and gid: owner of the directories `create` makes.
    owner: (u32, u32),
}

impl Rootfs {
    fn ensure(&self, dst: &Path, kind: Kind) -> Result<OwnedFd, RootfsError> {
        ensure(self.root.as_raw_fd(), dst, kind).map_err(|e| match e {
            Errno::ELOOP | Errno::EXDEV => {
                err("refusing to follow a symlink at", dst, Cause::Symlink)
            }
            // O_DIRECTORY|O_NOFOLLOW on a symlink reports ENOTDIR.
            Errno::ENOTDIR => err("refusing mount point", dst, Cause::NotADirectory),
            e => err("create mount point", dst, e),
        })
    }

    /// Re-resolve `dst` after something was mounted on it (the old fd still
    /// points at the covered directory).
    fn reopen(&self, dst: &Path) -> Result<OwnedFd, RootfsError> {
        openat_beneath(
            self.root.as_raw_fd(),
            &fsutil::relative(dst),
            libc::O_PATH,
            0,
        )
        .map_err(|e| err("reopen", dst, e))
    }

    fn apply(&self, op: &MountOp) -> Result<(), RootfsError> {
        match op {
            MountOp::Bind {
                src,
                dst,
                ro,
                dev,
                create: true,
                ..
            } => {
                let (uid, gid) = self.owner;
                let fd = prepare_tenant_dir(src, uid, gid)?;
                let st =
                    nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| err("bind: stat", src, e))?;
                self.bind_object(src, &fd, &st, dst, *ro, *dev)
            }
            MountOp::Bind {
                src,
                dst,
                ro,
                dev,
                optional,
                create: false,
            } => self.bind(src, dst, *ro, *dev, *optional),
            MountOp::Tmpfs { dst, size, mode } => {
                // Neither capped nor writable by the tenant (/run): a
                // directory of the sandbox's tmpfs does, without a
                // superblock of its own.
                let attrs = fsutil::MOUNT_ATTR_NOSUID | fsutil::MOUNT_ATTR_NODEV;
                if size.is_none() && mode & 0o022 == 0 && self.tmpfs_dir(dst, *mode, attrs)? {
                    return Ok(());
                }
                self.tmpfs(dst, *size, *mode)
            }
            MountOp::Dir { dst, mode } => self.ensure(dst, Kind::Dir(*mode)).map(drop),
            MountOp::Symlink { target, dst } => self.symlink(target, dst),
            MountOp::File { dst, content, mode } => self.file(dst, content.as_bytes(), *mode),
            MountOp::Copy { src, dst, mode } => {
                // A trusted symlink is followed (resolv.conf -> ../run/..);
                // one a tenant could have planted is refused (see source).
                let (fd, st) = match source::open(src, true) {
                    Ok(Source::Object(fd, st)) => (fd, st),
                    Ok(Source::Symlink { .. }) => {
                        return Err(err("copy: source", src, Cause::Raced))
                    }
                    Err(e) => return Err(err("copy: source", src, e)),
                };
                if st.st_mode & libc::S_IFMT != libc::S_IFREG {
                    return Err(err("copy: source", src, Cause::NotRegular));
                }
                let file = source::reopen(&fd, nix::fcntl::OFlag::O_RDONLY)
                    .map_err(|e| err("copy: open", src, e))?;
                let mut data = Vec::new();
                std::io::Read::read_to_end(&mut std::fs::File::from(file), &mut data)
                    .map_err(|e| err("copy: read", src, e))?;
                let m = mode.unwrap_or(st.st_mode & 0o7777);
                if let (Some(relay), true) = (self.dns_relay, dst == Path::new("/etc/resolv.conf"))
                {
                    let text = String::from_utf8_lossy(&data);
                    if let Some(new) = crate::net::relay_resolv_conf(&text, relay) {
                        return self.file(dst, new.as_bytes(), m);
                    }
                }
                self.file(dst, &data, m)
            }
            MountOp::Proc { dst } => {
                let fd = self.ensure(dst, Kind::Dir(0o555))?;
                let fl = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
                mount(Some("proc"), fd_path(&fd).as_str(), Some("proc"), fl, NONE)
                    .map_err(|e| err("mount proc on", dst, e))?;
                self.mask_proc(dst)
            }
            MountOp::Dev { dst } => self.dev(dst),
            MountOp::RemountRo { dst } => {
                let fd = self.reopen(dst)?;
                fsutil::set_attrs_recursive(&fd, fsutil::MOUNT_ATTR_RDONLY)
                    .map_err(|e| err("remount read-only", dst, e))
            }
            MountOp::Hide { dst } => self.hide(dst),
        }
    }

    fn bind(
        &self,
        src: &Path,
        dst: &Path,
        ro: bool,
        dev: bool,
        optional: bool,
    ) -> Result<(), RootfsError> {
        self.bind_source(src, dst, ro, dev, optional, 0)
    }

    fn bind_source(
        &self,
        src: &Path,
        dst: &Path,
        ro: bool,
        dev: bool,
        optional: bool,
        depth: u32,
    ) -> Result<(), RootfsError> {
        // Opened without following a symlink that anyone but root could
        // have made (see source): a tenant's link cannot turn a source
        // under its home into a host path.
        let (src_fd, st) = match source::open(src, false) {
            Ok(Source::Object(fd, st)) => (fd, st),
            Ok(Source::Symlink { target, trusted }) => {
                // Merged-/usr layouts: /bin -> usr/bin. Mirror the link
                // instead of binding its target, so the sandbox looks like
                // the host.
                self.symlink(&target, dst)?;
                // A link root made to a place the sandbox does not show (a
                // home at /home/alice -> /srv/alice) would dangle: its target
                // is bound at its own path too. Never for a tenant's link.
                if trusted && src == dst && depth < 8 {
                    let abs = src.parent().unwrap_or(Path::new("/")).join(&target);
                    let abs = lexical(&abs);
                    if !self.exists(&abs) {
                        return self.bind_source(&abs, &abs, ro, dev, optional, depth + 1);
                    }
                } else if depth >= 8 {
                    return Err(err("bind: source", src, Cause::TooDeep));
                }
                return Ok(());
            }
            Err(e) if e.is_missing() && optional => return Ok(()),
            Err(e) => return Err(err("bind: source", src, e)),
        };
        self.bind_object(src, &src_fd, &st, dst, ro, dev)
    }

    /// Whether `p` already resolves inside the new root (no symlinks).
    fn exists(&self, p: &Path) -> bool {
        let rel = fsutil::relative(p);
        rel.is_empty() || openat_beneath(self.root.as_raw_fd(), &rel, libc::O_PATH, 0).is_ok()
    }

    /// Bind the object `src_fd` (opened from `src`) on `dst`.
    fn bind_object(
        &self,
        src: &Path,
        src_fd: &OwnedFd,
        st: &nix::sys::stat::FileStat,
        dst: &Path,
        ro: bool,
        dev: bool,
    ) -> Result<(), RootfsError> {
        let kind = if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
            Kind::Dir(0o755)
        } else {
            Kind::File(0o644)
        };
        let dst_fd = self.ensure(dst, kind)?;
        mount(
            Some(fd_path(src_fd).as_str()),
            fd_path(&dst_fd).as_str(),
            NONE,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            NONE,
        )
        .map_err(|e| {
            err(
                "bind mount onto",
                dst,
                Cause::Bind {
                    errno: e,
                    from: src.to_path_buf(),
                },
            )
        })?;
        let mounted = self.reopen(dst)?;
        // Check we bound what we opened (bubblewrap's fstat-vs-lstat re-check).
        let a = nix::sys::stat::fstat(src_fd.as_raw_fd()).map_err(|e| err("bind: stat", src, e))?;
        let b =
            nix::sys::stat::fstat(mounted.as_raw_fd()).map_err(|e| err("bind: stat", dst, e))?;
        if a.st_dev != b.st_dev || a.st_ino != b.st_ino {
            return Err(err(
                "bind: destination changed while mounting",
                dst,
                Cause::Raced,
            ));
        }
        let mut attrs = fsutil::MOUNT_ATTR_NOSUID;
        if !dev {
            attrs |= fsutil::MOUNT_ATTR_NODEV;
        }
        if ro {
            attrs |= fsutil::MOUNT_ATTR_RDONLY;
        }
        fsutil::set_attrs_recursive(&mounted, attrs)
            .map_err(|e| err("bind: set mount flags on", dst, e))
    }

    fn tmpfs(&self, dst: &Path, size: Option<u64>, mode: u32) -> Result<(), RootfsError> {
        let fd = self.ensure(dst, Kind::Dir(0o755))?;
        let mut data = format!("mode={mode:04o}");
        if let Some(s) = size {
            data.push_str(&format!(",size={s}"));
        }
        mount(
            Some("tmpfs"),
            fd_path(&fd).as_str(),
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(data.as_str()),
        )
        .map_err(|e| err("mount tmpfs on", dst, e))
    }

    fn symlink(&self, target: &Path, dst: &Path) -> Result<(), RootfsError> {
        let rel = fsutil::relative(dst);
        let parent = Path::new("/").join(Path::new(&rel).parent().unwrap_or(Path::new("")));
        let pfd = if parent == Path::new("/") {
            openat_beneath(
                self.root.as_raw_fd(),
                ".",
                libc::O_PATH | libc::O_DIRECTORY,
                0,
            )
            .map_err(|e| err("open", dst, e))?
        } else {
            self.ensure(&parent, Kind::Dir(0o755))?
        };
        let name = Path::new(&rel)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let t = CString::new(target.as_os_str().as_encoded_bytes())
            .map_err(|e| err("symlink", dst, e))?;
        let n = CString::new(name).map_err(|e| err("symlink", dst, e))?;
        // SAFETY: valid C strings and dirfd.
        let r = unsafe { libc::symlinkat(t.as_ptr(), pfd.as_raw_fd(), n.as_ptr()) };
        if r < 0 && Errno::last() != Errno::EEXIST {
            return Err(err("symlink", dst, Errno::last()));
        }
        Ok(())
    }

    /// A file with the given content. It is written on a private tmpfs and
    /// bound over `dst`, so a `dst` inside a host bind never changes the host
    /// file (at most an empty mount point is created where none existed).
    fn file(&self, dst: &Path, content: &[u8], mode: u32) -> Result<(), RootfsError> {
        let staging = self.staging()?;
        let name = format!(
            "f{}",
            STAGED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let fd = openat_beneath(
            staging.as_raw_fd(),
            &name,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
            mode,
        )
        .map_err(|e| err("file: create", dst, e))?;
        let mut f = std::fs::File::from(fd);
        std::io::Write::write_all(&mut f, content).map_err(|e| err("file: write", dst, e))?;
        f.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(|e| err("file: chmod", dst, e))?;
        drop(f);
        let src = openat_beneath(staging.as_raw_fd(), &name, libc::O_PATH, 0)
            .map_err(|e| err("file: open", dst, e))?;
        let target = self.ensure(dst, Kind::File(0o644))?;
        mount(
            Some(fd_path(&src).as_str()),
            fd_path(&target).as_str(),
            NONE,
            MsFlags::MS_BIND,
            NONE,
        )
        .map_err(|e| err("file: bind onto", dst, e))?;
        let n = CString::new(name).expect("no NUL");
        // SAFETY: valid dirfd and name; the bind mount keeps the inode alive.
        unsafe { libc::unlinkat(staging.as_raw_fd(), n.as_ptr(), 0) };
        let mounted = self.reopen(dst)?;
        fsutil::set_attrs_recursive(
            &mounted,
            fsutil::MOUNT_ATTR_NOSUID | fsutil::MOUNT_ATTR_NODEV | fsutil::MOUNT_ATTR_RDONLY,
        )
        .map_err(|e| err("file: set mount flags on", dst, e))
    }

    /// The directory of the sandbox's tmpfs for staged files (outside the
    /// new root).
    fn staging(&self) -> Result<OwnedFd, RootfsError> {
        openat_beneath(
            self.staging.as_raw_fd(),
            ".",
            libc::O_PATH | libc::O_DIRECTORY,
            0,
        )
        .map_err(|e| err("open", Path::new("staging"), e))
    }

    /// Make `dst` a directory of the sandbox's own tmpfs bound on itself,
    /// mode `mode` (root's), with exactly the mount flags `attrs` of
    /// read-only, nosuid, nodev and noexec (a bind starts with those of the
    /// mount it was made from): what a tmpfs of its own at `dst` looked
    /// like, without a superblock of its own. False, with nothing mounted,
    /// when `dst` is not an empty, root-owned directory of that tmpfs (it
    /// lies in a host bind, or the profile put something there first): the
    /// caller mounts a tmpfs.
    fn tmpfs_dir(&self, dst: &Path, mode: u32, attrs: u64) -> Result<bool, RootfsError> {
        use nix::fcntl::OFlag;
        let fd = self.ensure(dst, Kind::Dir(mode))?;
        let mut dir = nix::dir::Dir::openat(
            Some(fd.as_raw_fd()),
            ".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(|e| err("open", dst, e))?;
        let st = nix::sys::stat::fstat(dir.as_raw_fd()).map_err(|e| err("stat", dst, e))?;
        let empty = dir
            .iter()
            .flatten()
            .all(|e| matches!(e.file_name().to_bytes(), b"." | b".."));
        if st.st_dev != self.root_dev || st.st_uid != 0 || !empty {
            return Ok(false);
        }
        nix::sys::stat::fchmod(
            dir.as_raw_fd(),
            nix::sys::stat::Mode::from_bits_truncate(mode),
        )
        .map_err(|e| err("chmod", dst, e))?;
        mount(
            Some(fd_path(&fd).as_str()),
            fd_path(&fd).as_str(),
            NONE,
            MsFlags::MS_BIND,
            NONE,
        )
        .map_err(|e| err("bind on itself", dst, e))?;
        let mounted = self.reopen(dst)?;
        let m = nix::sys::stat::fstat(mounted.as_raw_fd()).map_err(|e| err("stat", dst, e))?;
        if (m.st_dev, m.st_ino) != (st.st_dev, st.st_ino) {
            return Err(err(
                "bind: destination changed while mounting",
                dst,
                Cause::Raced,
            ));
        }
        let all = fsutil::MOUNT_ATTR_RDONLY
            | fsutil::MOUNT_ATTR_NOSUID
            | fsutil::MOUNT_ATTR_NODEV
            | fsutil::MOUNT_ATTR_NOEXEC;
        fsutil::set_attrs(&mounted, attrs, all & !attrs)
            .map_err(|e| err("set mount flags on", dst, e))?;
        Ok(true)
    }

    fn dev(&self, dst: &Path) -> Result<(), RootfsError> {
        // Not nodev: the device nodes are bound from the host's /dev. Root's
        // (0755): a tenant creates nothing in it.
        let attrs = fsutil::MOUNT_ATTR_NOSUID | fsutil::MOUNT_ATTR_NOEXEC;
        if !self.tmpfs_dir(dst, 0o755, attrs)? {
            let fd = self.ensure(dst, Kind::Dir(0o755))?;
            mount(
                Some("tmpfs"),
                fd_path(&fd).as_str(),
                Some("tmpfs"),
                MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
                Some("mode=0755,size=64k"),
            )
            .map_err(|e| err("mount dev tmpfs on", dst, e))?;
        }
        for node in ["null", "zero", "full", "random", "urandom", "tty"] {
            let host = PathBuf::from("/dev").join(node);
            if std::fs::metadata(&host).is_err() {
                continue;
            }
            self.bind(&host, &dst.join(node), false, true, false)?;
        }
        let pts = dst.join("pts");
        let pfd = self.ensure(&pts, Kind::Dir(0o755))?;
        mount(
            Some("devpts"),
            fd_path(&pfd).as_str(),
            Some("devpts"),
            MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
            Some("newinstance,ptmxmode=0666,mode=620"),
        )
        .map_err(|e| err("mount devpts on", &pts, e))?;
        self.symlink(Path::new("pts/ptmx"), &dst.join("ptmx"))?;
        // Capped like Docker's (64 MiB): its pages count against the
        // tenant's memory cgroup but against no process, so an uncapped one
        // fills the cgroup and makes the OOM killer pick a process that
        // holds none of it. The sandbox's tmpfs has that size, and /dev/shm
        // is the only place of it the tenant can write.
        let shm = dst.join("shm");
        let attrs = fsutil::MOUNT_ATTR_NOSUID | fsutil::MOUNT_ATTR_NODEV;
        if !self.tmpfs_dir(&shm, 0o1777, attrs)? {
            self.tmpfs(&shm, Some(SHM_SIZE), 0o1777)?;
        }
        for (name, target) in [
            ("fd", "/proc/self/fd"),
            ("stdin", "/proc/self/fd/0"),
            ("stdout", "/proc/self/fd/1"),
            ("stderr", "/proc/self/fd/2"),
        ] {
            self.symlink(Path::new(target), &dst.join(name))?;
        }
        Ok(())
    }

    /// What Docker's default (and runc's) masks and makes read-only in a
    /// container's /proc: host-wide state a tenant has no use for (kernel
    /// memory, keys of other users' keyrings by id, timers and interrupts of
    /// every process, which leak activity) and kernel knobs that only root
    /// could write, made read-only for the init too.
    fn mask_proc(&self, proc: &Path) -> Result<(), RootfsError> {
        for name in PROC_MASKED {
            self.hide(&proc.join(name))?;
        }
        for name in PROC_READ_ONLY {
            let dst = proc.join(name);
            let fd = match openat_beneath(
                self.root.as_raw_fd(),
                &fsutil::relative(&dst),
                libc::O_PATH,
                0,
            ) {
                Ok(fd) => fd,
                Err(Errno::ENOENT) => continue,
                Err(e) => return Err(err("proc: open", &dst, e)),
            };
            let p = fd_path(&fd);
            mount(
                Some(p.as_str()),
                p.as_str(),
                NONE,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                NONE,
            )
            .map_err(|e| err("proc: bind", &dst, e))?;
            let mounted = self.reopen(&dst)?;
            fsutil::set_attrs_recursive(
                &mounted,
                fsutil::MOUNT_ATTR_RDONLY | fsutil::MOUNT_ATTR_NOSUID | fsutil::MOUNT_ATTR_NODEV,
            )
            .map_err(|e| err("proc: read-only", &dst, e))?;
        }
        Ok(())
    }

    /// Hide `dst`, or every path it matches when a component is `*` (any
    /// name not starting with a dot, in the new root as built so far:
    /// `/etc/php/*/fpm/pool.d`).
    fn hide(&self, dst: &Path) -> Result<(), RootfsError> {
        if dst.components().any(|c| c.as_os_str() == "*") {
            for p in self.expand(dst)? {
                self.hide_one(&p)?;
            }
            return Ok(());
        }
        self.hide_one(dst)
    }

    /// The paths of the new root that `pattern` (whole-component `*`)
    /// matches, sorted.
    fn expand(&self, pattern: &Path) -> Result<Vec<PathBuf>, RootfsError> {
        let mut found = vec![PathBuf::from("/")];
        for c in pattern.components().skip(1) {
            let name = c.as_os_str();
            let mut next = Vec::new();
            for dir in &found {
                if name != "*" {
                    next.push(dir.join(name));
                    continue;
                }
                let fd = match openat_beneath(
                    self.root.as_raw_fd(),
                    &fsutil::relative(dir),
                    libc::O_RDONLY | libc::O_DIRECTORY,
                    0,
                ) {
                    Ok(fd) => fd,
                    Err(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP) => continue,
                    Err(e) => return Err(err("hide: open", dir, e)),
                };
                let mut d = nix::dir::Dir::from_fd(std::os::fd::IntoRawFd::into_raw_fd(fd))
                    .map_err(|e| err("hide: read", dir, e))?;
                let mut names: Vec<_> = d
                    .iter()
                    .flatten()
                    .map(|e| std::ffi::OsStr::from_bytes(e.file_name().to_bytes()).to_owned())
                    .filter(|n| !n.as_bytes().starts_with(b"."))
                    .collect();
                names.sort();
                next.extend(names.into_iter().map(|n| dir.join(n)));
            }
            found = next;
        }
        Ok(found)
    }

    fn hide_one(&self, dst: &Path) -> Result<(), RootfsError> {
        let fd = match openat_beneath(
            self.root.as_raw_fd(),
            &fsutil::relative(dst),
            libc::O_PATH,
            0,
        ) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) => return Ok(()), // nothing there to hide
            Err(e) => return Err(err("hide", dst, e)),
        };
        let st = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| err("hide: stat", dst, e))?;
        if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
            mount(
                Some(fd_path(&self.empty).as_str()),
                fd_path(&fd).as_str(),
                NONE,
                MsFlags::MS_BIND,
                NONE,
            )
            .map_err(|e| err("hide: bind an empty directory on", dst, e))?;
            let mounted = self.reopen(dst)?;
            fsutil::set_attrs_recursive(
                &mounted,
                fsutil::MOUNT_ATTR_RDONLY
                    | fsutil::MOUNT_ATTR_NOSUID
                    | fsutil::MOUNT_ATTR_NODEV
                    | fsutil::MOUNT_ATTR_NOEXEC,
            )
            .map_err(|e| err("hide: read-only", dst, e))
        } else {
            self.file(dst, b"", 0o444)
        }
    }

    /// /etc/passwd and /etc/group holding only root, the tenant and its groups.
    fn identity_files(&self, plan: &Plan) -> Result<(), RootfsError> {
        let t = &plan.tenant;
        let passwd = format!(
            "root:x:0:0:root:/root:/usr/sbin/nologin\n{}:x:{}:{}::{}:{}\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
            t.name, t.uid, t.gid, t.home.display(), t.shell.display()
        );
        let mut group = String::from("root:x:0:\n");
        for (name, gid) in &t.groups {
            if *gid != 0 {
                group.push_str(&format!("{name}:x:{gid}:{}\n", t.name));
            }
        }
        group.push_str("nogroup:x:65534:\n");
        self.file(Path::new("/etc/passwd"), passwd.as_bytes(), 0o644)?;
        self.file(Path::new("/etc/group"), group.as_bytes(), 0o644)
    }

    fn tmp(&self, plan: &Plan) -> Result<(), RootfsError> {
        match &plan.tmp {
            TmpPlan::Tmpfs { size } => self.tmpfs(Path::new("/tmp"), *size, 0o1777),
            TmpPlan::Disk { host_dir, .. } => {
                let fd = prepare_tenant_dir(host_dir, plan.tenant.uid, plan.tenant.gid)?;
                let st = nix::sys::stat::fstat(fd.as_raw_fd())
                    .map_err(|e| err("tmp dir: stat", host_dir, e))?;
                self.bind_object(host_dir, &fd, &st, Path::new("/tmp"), false, false)
            }
        }
    }
}

/// `p` with "." and ".." resolved by name ("/home/../srv/a" → "/srv/a").
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

static STAGED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// A directory of the tenant's own on the host: its disk-backed /tmp, or
/// the source of a `bind` with `create = true` (PHP's session directory).
/// A real directory (never a symlink) owned by the tenant, created mode 0700
/// when missing; missing parents are created root-owned 0711. Every step
/// goes through fds (mkdirat in the parent, fchown and fchmod on the
/// directory itself), and the parent is opened with the symlink rules of
/// [`source`]: a tenant that can write the parent (a directory inside its
/// home) cannot swap the directory for a link and have root chown a host
/// file. An existing directory owned by anyone else is refused.
pub(crate) fn prepare_tenant_dir(dir: &Path, uid: u32, gid: u32) -> Result<OwnedFd, RootfsError> {
    use nix::fcntl::OFlag;
    let parent = dir.parent().unwrap_or(Path::new("/"));
    let name = dir
        .file_name()
        .ok_or_else(|| err("tenant's directory", dir, Cause::NotOwnDir))?;
    let pfd = source::ensure_dir(parent, 0o711)
        .map_err(|e| err("tenant's directory: parent", parent, e))?;
    let created = match nix::sys::stat::mkdirat(
        Some(pfd.as_raw_fd()),
        name,
        nix::sys::stat::Mode::from_bits_truncate(0o700),
    ) {
        Ok(()) => true,
        Err(Errno::EEXIST) => false,
        Err(e) => return Err(err("create tenant's directory", dir, e)),
    };
    let fl = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = nix::fcntl::openat(
        Some(pfd.as_raw_fd()),
        name,
        fl,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| match e {
        Errno::ELOOP | Errno::ENOTDIR => err("tenant's directory", dir, Cause::NotOwnDir),
        e => err("open tenant's directory", dir, e),
    })?;
    // SAFETY: openat just returned this fd; nothing else owns it.
    let fd: OwnedFd = unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) };
    if created {
        nix::unistd::fchown(fd.as_raw_fd(), Some(uid.into()), Some(gid.into()))
            .map_err(|e| err("chown", dir, e))?;
        nix::sys::stat::fchmod(
            fd.as_raw_fd(),
            nix::sys::stat::Mode::from_bits_truncate(0o700),
        )
        .map_err(|e| err("chmod", dir, e))?;
    } else {
        let st = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| err("stat", dir, e))?;
        if st.st_uid != uid {
            return Err(err(
                "tenant's directory",
                dir,
                Cause::Owner {
                    owner: st.st_uid,
                    uid,
                },
            ));
        }
    }
    Ok(fd)
}

/// A `bind-try` (`ro-`, `dev-`) of a plan whose source is not in the
/// sandbox: `up` skips a missing source without a word, so `corral check`
/// and `corral ls` say it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedBind {
    /// Index in `plan.mounts`.
    pub index: usize,
    pub src: PathBuf,
    pub dst: PathBuf,
    /// The source exists now, but the running sandbox (built while it was
    /// missing) does not show it: `corral restart` would bind it.
    pub appeared: bool,
}

/// The `*-try` binds of `plan` whose source is missing on the host (opened
/// as `up` opens it), and, given the root of a running sandbox built from
/// `plan` (`/proc/<init pid>/root`), those whose source exists now but is
/// not what the sandbox shows at the destination.
pub fn skipped_binds(plan: &Plan, sandbox_root: Option<&Path>) -> Vec<SkippedBind> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    for (index, op) in plan.mounts.iter().enumerate() {
        let MountOp::Bind {
            src,
            dst,
            optional: true,
            ..
        } = op
        else {
            continue;
        };
        let skipped = |appeared| SkippedBind {
            index,
            src: src.clone(),
            dst: dst.clone(),
            appeared,
        };
        match source::open(src, false) {
            Err(e) if e.is_missing() => out.push(skipped(false)),
            Ok(Source::Object(_, st)) => {
                let Some(root) = sandbox_root else { continue };
                let inside = root.join(fsutil::relative(dst));
                let same = std::fs::symlink_metadata(&inside)
                    .is_ok_and(|m| m.dev() == st.st_dev && m.ino() == st.st_ino);
                if !same {
                    out.push(skipped(true));
                }
            }
            // A mirrored symlink, or a source `up` refuses (it says why).
            _ => {}
        }
    }
    out
}
