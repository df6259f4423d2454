//! The host side of services: sockets and log directories, made by
//! `corral up` as root before the init starts, removed by `corral down`.

use corral_profile::plan::{Plan, ServicePlan};
use nix::sys::socket::{
    bind, listen, socket, AddressFamily, Backlog, SockFlag, SockType, UnixAddr,
};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
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
    #[error("service {service}: {} is in use: a running sandbox listens on it (two tenants with one listen path?)", path.display())]
    InUse { service: String, path: PathBuf },
    #[error("the services of this tenant need {0} sockets and log directories; at most {max} are supported", max = super::MAX_FDS)]
    TooMany(usize),
}

/// What `corral up` hands the init: per service (in plan order) its
/// listening sockets, then its log directory. On failure the sockets made
/// so far are removed again.
pub fn prepare(plan: &Plan) -> Result<Vec<OwnedFd>, HostError> {
    let n: usize = plan.services.iter().map(|s| s.listen.len() + 1).sum();
    if n > super::MAX_FDS {
        return Err(HostError::TooMany(n));
    }
    let tenant = tenant_gids(plan);
    let mut fds = Vec::with_capacity(n);
    let mut made: Vec<&Path> = Vec::new();
    let result = (|| {
        for s in &plan.services {
            for path in &s.listen {
                fds.push(listener(s, path, &tenant)?);
                made.push(path);
            }
            fds.push(log_dir(s, &tenant)?);
        }
        Ok(())
    })();
    if let Err(e) = result {
        for p in made {
            let _ = std::fs::remove_file(p);
        }
        return Err(e);
    }
    Ok(fds)
}

/// Remove the socket files of `plan`'s services (at `down`): only sockets,
/// and only in directories that are still safe (see [`safe_dir`]).
pub fn remove(plan: &Plan) {
    let tenant = tenant_gids(plan);
    for s in &plan.services {
        for path in &s.listen {
            let parent = path.parent().unwrap_or(Path::new("/"));
            if check_dirs(s, parent, &tenant).is_err() {
                continue;
            }
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// The tenant's groups: a directory writable by one of them is the
/// tenant's to change.
fn tenant_gids(plan: &Plan) -> Vec<u32> {
    let mut g: Vec<u32> = plan.tenant.groups.iter().map(|(_, gid)| *gid).collect();
    g.push(plan.tenant.gid);
    g
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

/// Check `dir` and every parent: a real directory (not a symlink), owned by
/// root, writable by no one else (group-writable only by a group the
/// tenant is not in: Ubuntu's /var/log is root:syslog 0775).
fn check_dirs(s: &ServicePlan, dir: &Path, tenant_gids: &[u32]) -> Result<(), HostError> {
    for d in dir.ancestors() {
        check_one(s, d, tenant_gids)?;
    }
    Ok(())
}

fn check_one(s: &ServicePlan, d: &Path, tenant_gids: &[u32]) -> Result<(), HostError> {
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
    // World-writable (sticky /tmp-style ones too) is refused.
    if m.mode() & 0o002 != 0 || (m.mode() & 0o020 != 0 && tenant_gids.contains(&m.gid())) {
        return Err(unsafe_dir(format!(
            "mode {:04o}, group {}",
            m.mode() & 0o7777,
            m.gid()
        )));
    }
    Ok(())
}

/// Make `dir` safely: from `/` down, each existing component is checked
/// before anything is created below it, and each missing one is created
/// (mode `mode`, root's) in a parent already checked, then checked itself.
fn safe_dir(s: &ServicePlan, dir: &Path, mode: u32, tenant_gids: &[u32]) -> Result<(), HostError> {
    let mut at = PathBuf::from("/");
    check_one(s, &at, tenant_gids)?;
    for part in dir.components().skip(1) {
        at.push(part);
        if std::fs::symlink_metadata(&at).is_err() {
            std::fs::DirBuilder::new()
                .mode(mode)
                .create(&at)
                .map_err(io(s, "create directory", &at))?;
        }
        check_one(s, &at, tenant_gids)?;
    }
    Ok(())
}

fn listener(s: &ServicePlan, path: &Path, tenant_gids: &[u32]) -> Result<OwnedFd, HostError> {
    let parent = path.parent().unwrap_or(Path::new("/"));
    safe_dir(s, parent, 0o755, tenant_gids)?;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            // A socket something still listens on belongs to a sandbox
            // that is up (two tenants configured with one path): never
            // take it over.
            if listening_on(path) {
                return Err(HostError::InUse {
                    service: s.name.clone(),
                    path: path.to_path_buf(),
                });
            }
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
    let done = (|| {
        std::os::unix::fs::lchown(path, Some(0), Some(s.listen_gid))
            .map_err(io(s, "chown", path))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(s.listen_mode))
            .map_err(io(s, "chmod", path))?;
        // The kernel caps it at net.core.somaxconn.
        listen(&fd, Backlog::new(4096).unwrap_or(Backlog::MAXCONN)).map_err(sys("listen"))
    })();
    if let Err(e) = done {
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    Ok(fd)
}

/// Whether a listening unix socket bound to `path` exists (in this network
/// namespace, where `corral up` makes every service socket). Read from
/// /proc/net/unix rather than tried with connect(2), which would start an
/// on-demand service of the sandbox that holds it.
fn listening_on(path: &Path) -> bool {
    const SO_ACCEPTCON: u32 = 1 << 16;
    let Ok(text) = std::fs::read_to_string("/proc/net/unix") else {
        // Cannot tell: assume it is, never take over a live socket.
        return true;
    };
    let want = path.to_string_lossy();
    text.lines().skip(1).any(|line| {
        // Num RefCount Protocol Flags Type St Inode Path
        let cols: Vec<&str> = line.split_whitespace().collect();
        let listening = cols
            .get(3)
            .and_then(|x| u32::from_str_radix(x, 16).ok())
            .is_some_and(|fl| fl & SO_ACCEPTCON != 0);
        listening && cols.len() > 7 && cols[7..].join(" ") == want
    })
}

fn log_dir(s: &ServicePlan, tenant_gids: &[u32]) -> Result<OwnedFd, HostError> {
    let dir = s.log.parent().unwrap_or(Path::new("/"));
    safe_dir(s, dir, 0o750, tenant_gids)?;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)
        .map_err(io(s, "open log directory", dir))?;
    Ok(OwnedFd::from(f))
}
