//! The host side of services: sockets and log directories, made by
//! `corral up` as root before the init starts, removed by `corral down`.

use corral_profile::plan::{Plan, ServicePlan};
use nix::sys::socket::{
    bind, listen, socket, AddressFamily, Backlog, SockFlag, SockType, UnixAddr,
};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("service {service}: {what} {}: {source}", path.display())]
    Io {
        service: String,
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "service {service}: {} must be a directory owned by root and writable by no one else \
         (a tenant-writable directory would let its owner redirect what root creates there): {why}",
        path.display()
    )]
    UnsafeDir {
        service: String,
        path: PathBuf,
        why: String,
    },
    #[error("service {service}: {} exists and is not a socket; remove it or choose another listen path", path.display())]
    NotSocket { service: String, path: PathBuf },
    #[error("the services of this tenant need {0} sockets and log directories; at most {max} are supported", max = super::MAX_FDS)]
    TooMany(usize),
}

/// What `corral up` hands the init: per service (in plan order) its
/// listening sockets, then its log directory.
pub fn prepare(plan: &Plan) -> Result<Vec<OwnedFd>, HostError> {
    let n: usize = plan.services.iter().map(|s| s.listen.len() + 1).sum();
    if n > super::MAX_FDS {
        return Err(HostError::TooMany(n));
    }
    let mut fds = Vec::with_capacity(n);
    for s in &plan.services {
        for path in &s.listen {
            fds.push(listener(s, path)?);
        }
        fds.push(log_dir(s)?);
    }
    Ok(fds)
}

/// Remove the socket files of `plan`'s services (at `down`, or when `up` fails).
pub fn remove(plan: &Plan) {
    for path in plan.services.iter().flat_map(|s| &s.listen) {
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn io(
    s: &ServicePlan,
    what: &'static str,
    path: &Path,
) -> impl FnOnce(std::io::Error) -> HostError {
    let (service, path) = (s.name.clone(), path.to_path_buf());
    move |source| HostError::Io {
        service,
        what,
        path,
        source,
    }
}

/// Create `dir` (and its parents, mode 0755) and check that neither it nor
/// any parent is a symlink or writable by anyone but root.
fn safe_dir(s: &ServicePlan, dir: &Path, mode: u32) -> Result<(), HostError> {
    if !dir.exists() {
        std::fs::create_dir_all(dir).map_err(io(s, "create directory", dir))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
            .map_err(io(s, "chmod", dir))?;
    }
    for d in dir.ancestors() {
        let m = std::fs::symlink_metadata(d).map_err(io(s, "inspect", d))?;
        let unsafe_dir = |why: String| HostError::UnsafeDir {
            service: s.name.clone(),
            path: d.to_path_buf(),
            why,
        };
        if !m.is_dir() {
            return Err(unsafe_dir("not a directory (a symlink?)".into()));
        }
        if m.uid() != 0 {
            return Err(unsafe_dir(format!("owned by uid {}", m.uid())));
        }
        // The sticky /tmp-style directories are writable by all: refused too.
        if m.mode() & 0o022 != 0 {
            return Err(unsafe_dir(format!("mode {:04o}", m.mode() & 0o7777)));
        }
    }
    Ok(())
}

fn listener(s: &ServicePlan, path: &Path) -> Result<OwnedFd, HostError> {
    let parent = path.parent().unwrap_or(Path::new("/"));
    safe_dir(s, parent, 0o755)?;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            std::fs::remove_file(path).map_err(io(s, "remove the old socket", path))?
        }
        Ok(_) => {
            return Err(HostError::NotSocket {
                service: s.name.clone(),
                path: path.to_path_buf(),
            })
        }
        Err(_) => {}
    }
    let sys = |what| {
        let f = io(s, what, path);
        move |e: nix::errno::Errno| f(std::io::Error::from(e))
    };
    let fd = socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(sys("create the socket"))?;
    // Before bind: the mode the file is created with (Linux takes it from
    // the socket's inode), so it is never connectable by more than `mode`.
    // SAFETY: fchmod on our own fd.
    unsafe { libc::fchmod(fd.as_raw_fd(), 0o600) };
    let addr = UnixAddr::new(path).map_err(sys("socket address"))?;
    bind(fd.as_raw_fd(), &addr).map_err(sys("bind"))?;
    std::os::unix::fs::lchown(path, Some(0), Some(s.listen_gid)).map_err(io(s, "chown", path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(s.listen_mode))
        .map_err(io(s, "chmod", path))?;
    // The kernel caps it at net.core.somaxconn.
    listen(&fd, Backlog::new(4096).unwrap_or(Backlog::MAXCONN)).map_err(sys("listen"))?;
    Ok(fd)
}

fn log_dir(s: &ServicePlan) -> Result<OwnedFd, HostError> {
    let dir = s.log.parent().unwrap_or(Path::new("/"));
    safe_dir(s, dir, 0o750)?;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)
        .map_err(io(s, "open log directory", dir))?;
    Ok(OwnedFd::from(f))
}
