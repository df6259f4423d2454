//! The size cap of a disk-backed /tmp (`[tmp] kind = "disk"`, `size = ...`):
//! a project quota, as XFS and ext4 keep them.
//!
//! The tenant's tmp directory gets the tenant's uid as its project id, with
//! the inherit flag so everything created below it is counted in that
//! project, and the project gets a block limit. The filesystem must be
//! mounted with project quotas (`prjquota`; ext4 also needs the `project`
//! and `quota` features: `tune2fs -O project,quota`); otherwise `corral up`
//! fails and says so (a cap the operator asked for is never silently
//! missing). Set by `corral up` on the host (root in the initial user
//! namespace: quotactl and project ids want that), before the init starts.
//! The tenant cannot move its files out of the project: changing a project
//! id (FS_IOC_FSSETXATTR) is refused by the seccomp filter. Files already in
//! the directory when the cap is first set keep their project (0).
//!
//! Hand-written ioctl and quotactl_fd calls: no well-kept crate wraps project
//! quotas (nix has no quotactl_fd, and its quotactl has no project type).

use nix::errno::Errno;
use std::os::fd::{AsRawFd, BorrowedFd};

/// struct fsxattr (linux/fs.h).
#[repr(C)]
#[derive(Default)]
struct FsXattr {
    xflags: u32,
    extsize: u32,
    nextents: u32,
    projid: u32,
    cowextsize: u32,
    pad: [u8; 8],
}

const FS_IOC_FSGETXATTR: libc::c_ulong = 0x801c_581f;
const FS_IOC_FSSETXATTR: libc::c_ulong = 0x401c_5820;
const FS_XFLAG_PROJINHERIT: u32 = 0x0000_0200;

/// struct if_dqblk (linux/quota.h).
#[repr(C)]
#[derive(Default)]
struct IfDqblk {
    bhardlimit: u64,
    bsoftlimit: u64,
    curspace: u64,
    ihardlimit: u64,
    isoftlimit: u64,
    curinodes: u64,
    btime: u64,
    itime: u64,
    valid: u32,
}

const Q_SETQUOTA: u32 = 0x80_0008;
const PRJQUOTA: u32 = 2;
const QIF_BLIMITS: u32 = 1;
/// Quota blocks are 1 KiB (QIF_DQBLKSIZE).
const QUOTA_BLOCK: u64 = 1024;

#[derive(Debug, thiserror::Error)]
pub enum QuotaError {
    #[error("the filesystem has no project ids ({0}); a disk /tmp with a size needs XFS or ext4 with project quotas")]
    NoProjects(Errno),
    #[error(
        "project quotas are not enabled on its filesystem ({0}): mount it with prjquota \
         (ext4 also needs `tune2fs -O project,quota`), or drop tmp.size"
    )]
    NotEnabled(Errno),
    #[error("{0}: {1}")]
    Sys(&'static str, Errno),
}

/// Put directory `dir` into project `projid` (inherited below it) and cap
/// the project at `bytes` (rounded up to whole KiB).
pub fn cap(dir: BorrowedFd<'_>, projid: u32, bytes: u64) -> Result<(), QuotaError> {
    let mut x = FsXattr::default();
    // SAFETY: FS_IOC_FSGETXATTR writes one struct fsxattr, which `x` is.
    if unsafe { libc::ioctl(dir.as_raw_fd(), FS_IOC_FSGETXATTR, &mut x as *mut FsXattr) } < 0 {
        return Err(match Errno::last() {
            e @ (Errno::ENOTTY | Errno::EOPNOTSUPP | Errno::EINVAL) => QuotaError::NoProjects(e),
            e => QuotaError::Sys("read the directory's project id", e),
        });
    }
    if x.projid != projid || x.xflags & FS_XFLAG_PROJINHERIT == 0 {
        x.projid = projid;
        x.xflags |= FS_XFLAG_PROJINHERIT;
        // SAFETY: FS_IOC_FSSETXATTR reads one struct fsxattr.
        if unsafe { libc::ioctl(dir.as_raw_fd(), FS_IOC_FSSETXATTR, &x as *const FsXattr) } < 0 {
            return Err(match Errno::last() {
                e @ (Errno::ENOTTY | Errno::EOPNOTSUPP | Errno::EINVAL) => {
                    QuotaError::NoProjects(e)
                }
                e => QuotaError::Sys("set the directory's project id", e),
            });
        }
    }
    let blocks = bytes.div_ceil(QUOTA_BLOCK);
    let dq = IfDqblk {
        bhardlimit: blocks,
        bsoftlimit: blocks,
        valid: QIF_BLIMITS,
        ..IfDqblk::default()
    };
    let cmd = (Q_SETQUOTA << 8) | PRJQUOTA;
    // SAFETY: quotactl_fd(fd, Q_SETQUOTA, id, addr) reads one struct
    // if_dqblk from `addr`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_quotactl_fd,
            dir.as_raw_fd(),
            cmd as libc::c_uint,
            projid as libc::c_uint,
            &dq as *const IfDqblk,
        )
    };
    if r < 0 {
        return Err(match Errno::last() {
            e @ (Errno::ESRCH | Errno::ENOSYS | Errno::EOPNOTSUPP) => QuotaError::NotEnabled(e),
            e => QuotaError::Sys("set the project quota", e),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_layouts_match_the_kernel() {
        // linux/fs.h: struct fsxattr is 28 bytes; linux/quota.h: if_dqblk 72.
        assert_eq!(std::mem::size_of::<FsXattr>(), 28);
        assert_eq!(std::mem::size_of::<IfDqblk>(), 72);
        // _IOR('X', 31, struct fsxattr) and _IOW('X', 32, struct fsxattr).
        let ioc = |dir: libc::c_ulong, nr: libc::c_ulong| {
            (dir << 30) | (28 << 16) | ((b'X' as libc::c_ulong) << 8) | nr
        };
        assert_eq!(FS_IOC_FSGETXATTR, ioc(2, 31));
        assert_eq!(FS_IOC_FSSETXATTR, ioc(1, 32));
    }

    #[test]
    fn a_filesystem_without_project_quotas_is_named() {
        // /proc has no project ids at all.
        let f = std::fs::File::open("/proc").unwrap();
        use std::os::fd::AsFd;
        let e = cap(f.as_fd(), 4242, 1 << 20).unwrap_err();
        assert!(matches!(e, QuotaError::NoProjects(_)), "{e}");
    }
}
