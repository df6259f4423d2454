//! The suEXEC checks look at the filesystem with the tenant's rights, not
//! root's: this thread's filesystem identity (fsuid, fsgid, supplementary
//! groups) is switched to the tenant's for the duration of a guard.
//!
//! Apache's suEXEC does the same by running as the target user before any
//! check (it is a setuid program that calls `setuid` first); the gateway is
//! one multi-threaded root process, so it changes only the calling thread:
//! on Linux `setfsuid`/`setfsgid` are per-thread (glibc's wrappers are the
//! plain system calls), and so is the raw `setgroups` system call (glibc's
//! and musl's `setgroups()` broadcast to every thread, so the raw call is
//! used). Moving the fsuid away from 0 also clears the filesystem
//! capabilities (`CAP_DAC_OVERRIDE`, `CAP_DAC_READ_SEARCH`, `CAP_FOWNER`...)
//! from the thread's effective set; moving it back to 0 restores them from
//! the permitted set (capabilities(7), "Effect of user ID changes").
//!
//! The guard must not live across an `.await` (the thread serves other
//! tasks then): the checks are synchronous.

use nix::unistd::{Gid, Uid};

/// This thread's filesystem identity is a tenant's until dropped.
pub struct FsIdentity {
    /// What to restore (None: nothing was changed).
    saved: Option<(Uid, Gid, Vec<libc::gid_t>)>,
}

fn set_groups_this_thread(groups: &[libc::gid_t]) -> nix::Result<()> {
    // SAFETY: the pointer and length describe a live slice of gid_t, which
    // the kernel only reads; the raw system call changes the calling
    // thread's credentials only.
    let r = unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) };
    nix::errno::Errno::result(r).map(drop)
}

/// The fsuid the calling thread has now (`setfsuid` returns the previous
/// value; an invalid id (-1) changes nothing).
fn current_fsuid() -> Uid {
    nix::unistd::setfsuid(Uid::from_raw(u32::MAX))
}

fn current_fsgid() -> Gid {
    nix::unistd::setfsgid(Gid::from_raw(u32::MAX))
}

thread_local! {
    /// This thread's supplementary groups when no guard is active, read at
    /// its first switch: the gateway changes a thread's groups only through
    /// [`FsIdentity`], which puts them back, so a `getgroups` per request
    /// would read the same list every time.
    static OWN_GROUPS: std::cell::OnceCell<Vec<libc::gid_t>> = const { std::cell::OnceCell::new() };
}

fn own_groups() -> std::io::Result<Vec<libc::gid_t>> {
    OWN_GROUPS.with(|g| {
        if let Some(v) = g.get() {
            return Ok(v.clone());
        }
        let v: Vec<libc::gid_t> = nix::unistd::getgroups()?
            .into_iter()
            .map(Gid::as_raw)
            .collect();
        Ok(g.get_or_init(|| v).clone())
    })
}

impl FsIdentity {
    /// Switch this thread's filesystem identity to `uid`/`gid` (groups:
    /// just `gid`). Without root there are no rights to shed and nothing
    /// changes; nor for uid 0 (a tenant is never root: min_uid refuses it
    /// first, unless a test's map allows uid 0).
    ///
    /// Five system calls: `setgroups`, `setfsgid` and `setfsuid` (which
    /// return the previous ids: what the guard restores), then one
    /// `setfsuid(-1)` and one `setfsgid(-1)` to confirm the switch took.
    pub fn become_user(uid: u32, gid: u32) -> std::io::Result<FsIdentity> {
        if uid == 0 || !nix::unistd::geteuid().is_root() {
            return Ok(FsIdentity { saved: None });
        }
        let groups = own_groups()?;
        // Groups and gid first: the uid change could take CAP_SETGID along
        // (it does not, but the order is the safe one).
        set_groups_this_thread(&[gid])?;
        let old_gid = nix::unistd::setfsgid(Gid::from_raw(gid));
        let old_uid = nix::unistd::setfsuid(Uid::from_raw(uid));
        // From here on, dropping the guard restores what was changed.
        let guard = FsIdentity {
            saved: Some((old_uid, old_gid, groups)),
        };
        if current_fsuid().as_raw() != uid || current_fsgid().as_raw() != gid {
            return Err(std::io::Error::other(format!(
                "setfsuid({uid})/setfsgid({gid}) did not take"
            )));
        }
        Ok(guard)
    }
}

impl Drop for FsIdentity {
    fn drop(&mut self) {
        let Some((uid, gid, groups)) = self.saved.take() else {
            return;
        };
        nix::unistd::setfsuid(uid);
        nix::unistd::setfsgid(gid);
        let groups_ok = set_groups_this_thread(&groups).is_ok();
        if !groups_ok || current_fsuid() != uid || current_fsgid() != gid {
            // A worker thread left with a tenant's identity would check (and
            // do) everything after it with the wrong rights: stop instead.
            crate::log::line(format_args!(
                "fatal: could not restore this thread's filesystem identity (fsuid {uid}, fsgid {gid})"
            ));
            std::process::abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_root_only_directory_is_closed_to_the_tenant_identity_and_open_again_after() {
        let d = tempfile::tempdir().unwrap();
        let hidden = d.path().join("hidden");
        std::fs::create_dir(&hidden).unwrap();
        std::fs::write(hidden.join("f"), "x").unwrap();
        std::fs::set_permissions(&hidden, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let root = nix::unistd::geteuid().is_root();
        let groups_before = nix::unistd::getgroups().unwrap();
        // A thread that exists before the switch (new threads inherit their
        // creator's credentials).
        let (ask, asked) = std::sync::mpsc::channel::<()>();
        let (tell, told) = std::sync::mpsc::channel();
        let other = std::thread::spawn(move || {
            while asked.recv().is_ok() {
                tell.send(current_fsuid()).unwrap();
            }
        });
        {
            let _id = FsIdentity::become_user(65534, 65534).unwrap();
            let r = std::fs::symlink_metadata(hidden.join("f"));
            if root {
                assert_eq!(
                    r.unwrap_err().kind(),
                    std::io::ErrorKind::PermissionDenied,
                    "as uid 65534 the 0700 directory is closed"
                );
                assert_eq!(current_fsuid().as_raw(), 65534);
                assert_eq!(nix::unistd::getgroups().unwrap(), [Gid::from_raw(65534)]);
                // Only this thread changed.
                ask.send(()).unwrap();
                assert_eq!(told.recv().unwrap().as_raw(), 0);
            } else {
                // Without root nothing changes (nothing to shed).
                assert!(r.is_ok());
                assert_eq!(current_fsuid(), nix::unistd::geteuid());
            }
        }
        drop(ask);
        other.join().unwrap();
        assert!(std::fs::symlink_metadata(hidden.join("f")).is_ok());
        assert_eq!(current_fsuid(), nix::unistd::geteuid());
        assert_eq!(nix::unistd::getgroups().unwrap(), groups_before);
    }
}
