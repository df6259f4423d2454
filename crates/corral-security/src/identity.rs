//! Switching to the tenant's uid, gid and groups. Allocation-free.
//!
//! Raw system calls, not glibc's `setresuid()` & co: in a multi-threaded
//! process glibc makes every thread change ids together (it signals them all
//! and waits, under a lock). A forked child has a single thread, and the raw
//! call changes exactly that thread, with no lock that another thread of the
//! parent might have held at fork time.

use nix::errno::Errno;

use crate::sys::check;

/// Set supplementary groups, then gid, then uid (real, effective and saved
/// alike), then read the ids back and check every one is what was asked and
/// not 0. uid 0 or gid 0 is refused with EINVAL before anything changes.
///
/// Order: setgroups and setresgid need CAP_SETGID, which setresuid to a
/// non-root uid takes away, so the uid goes last. That same setresuid
/// empties the permitted, effective and ambient capability sets.
pub fn become_user(
    uid: libc::uid_t,
    gid: libc::gid_t,
    groups: &[libc::gid_t],
) -> Result<(), Errno> {
    if uid == 0 || gid == 0 {
        return Err(Errno::EINVAL);
    }
    // SAFETY: `groups` is a live slice of `len` gid_t that the kernel only
    // reads during the call.
    check(unsafe {
        libc::syscall(
            libc::SYS_setgroups,
            groups.len() as libc::c_long,
            groups.as_ptr(),
        )
    })?;
    // SAFETY: integer arguments only.
    check(unsafe { libc::syscall(libc::SYS_setresgid, long(gid), long(gid), long(gid)) })?;
    // SAFETY: integer arguments only.
    check(unsafe { libc::syscall(libc::SYS_setresuid, long(uid), long(uid), long(uid)) })?;

    let (ruid, euid, suid) = resuid()?;
    let (rgid, egid, sgid) = resgid()?;
    let ids_ok = [ruid, euid, suid].iter().all(|&id| id == uid)
        && [rgid, egid, sgid].iter().all(|&id| id == gid);
    if !ids_ok || [ruid, euid, suid, rgid, egid, sgid].contains(&0) {
        return Err(Errno::EPERM);
    }
    Ok(())
}

/// An id widened to the `long` a variadic `syscall()` reads.
fn long(id: u32) -> libc::c_long {
    libc::c_long::from(id)
}

/// (real, effective, saved) uid of the calling thread.
pub fn resuid() -> Result<(libc::uid_t, libc::uid_t, libc::uid_t), Errno> {
    let (mut r, mut e, mut s) = (0, 0, 0);
    // SAFETY: three live, writable uid_t on our stack.
    check(unsafe {
        libc::syscall(
            libc::SYS_getresuid,
            &mut r as *mut libc::uid_t,
            &mut e as *mut libc::uid_t,
            &mut s as *mut libc::uid_t,
        )
    })?;
    Ok((r, e, s))
}

/// (real, effective, saved) gid of the calling thread.
pub fn resgid() -> Result<(libc::gid_t, libc::gid_t, libc::gid_t), Errno> {
    let (mut r, mut e, mut s) = (0, 0, 0);
    // SAFETY: three live, writable gid_t on our stack.
    check(unsafe {
        libc::syscall(
            libc::SYS_getresgid,
            &mut r as *mut libc::gid_t,
            &mut e as *mut libc::gid_t,
            &mut s as *mut libc::gid_t,
        )
    })?;
    Ok((r, e, s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_ids_are_refused_before_anything_changes() {
        let before = (resuid().unwrap(), resgid().unwrap());
        assert_eq!(become_user(0, 65534, &[]), Err(Errno::EINVAL));
        assert_eq!(become_user(65534, 0, &[]), Err(Errno::EINVAL));
        assert_eq!((resuid().unwrap(), resgid().unwrap()), before);
    }
}
