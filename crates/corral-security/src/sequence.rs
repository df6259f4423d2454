//! Everything a tenant process needs between fork and exec, prepared before
//! fork and applied after it in a fixed order.

use corral_profile::plan::SeccompPlan;
use nix::errno::Errno;

use crate::error::SecurityError;
use crate::seccomp::{self, Filter};
use crate::step::Step;
use crate::{caps, fds, identity};

/// What to do with inherited descriptors `>= from` (0–2 are always kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FdAction {
    /// Leave them: the caller has already arranged them.
    Keep,
    /// Close them now (an error pipe, if any, must be below `from`).
    Close { from: i32 },
    /// Mark them close-on-exec: still usable until exec (an error pipe can
    /// report a failure of a later step), gone after it.
    CloseOnExec { from: i32 },
}

/// Everything [`Prepared::apply_in_child`] needs, computed before fork.
#[derive(Debug, Clone)]
pub struct Prepared {
    last_cap: u32,
    uid: libc::uid_t,
    gid: libc::gid_t,
    groups: Vec<libc::gid_t>,
    fds: FdAction,
    filter: Option<Filter>,
    /// The bounding set was emptied in the process that forks the children
    /// (see [`Prepared::drop_bounding_set_for_children`]).
    bounding_set_dropped: bool,
}

/// Prepare the sequence for a tenant process: compile the seccomp filter,
/// read the kernel's last capability, check the ids. Call before fork; it
/// allocates. Descriptors default to [`FdAction::CloseOnExec`] from 3.
pub fn prepare(
    plan: &SeccompPlan,
    uid: libc::uid_t,
    gid: libc::gid_t,
    groups: &[libc::gid_t],
) -> Result<Prepared, SecurityError> {
    if uid == 0 || gid == 0 || groups.contains(&0) {
        return Err(SecurityError::RootIdentity {
            uid,
            gid,
            groups: groups.to_vec(),
        });
    }
    // NGROUPS_MAX: setgroups refuses more.
    if groups.len() > 65536 {
        return Err(SecurityError::TooManyGroups(groups.len()));
    }
    Ok(Prepared {
        last_cap: caps::last_cap()?,
        uid,
        gid,
        groups: groups.to_vec(),
        fds: FdAction::CloseOnExec { from: 3 },
        filter: seccomp::build(plan)?,
        bounding_set_dropped: false,
    })
}

impl Prepared {
    /// Choose what happens to descriptors `>= 3`.
    pub fn with_fds(mut self, fds: FdAction) -> Prepared {
        self.fds = fds;
        self
    }

    /// Empty the capability bounding set of the calling process now, once,
    /// so that the children it forks inherit an empty set and skip step 1 of
    /// [`Prepared::apply_in_child`] (about 80 prctl calls per spawn). For a
    /// long-lived spawner such as the tenant init: its own permitted and
    /// effective sets are untouched (the bounding set only limits what an
    /// exec can gain), so it can still change the children's ids.
    pub fn drop_bounding_set_for_children(mut self) -> Result<Prepared, Errno> {
        caps::drop_bounding_set(self.last_cap)?;
        self.bounding_set_dropped = true;
        Ok(self)
    }

    /// The compiled filter, if the plan enables seccomp.
    pub fn filter(&self) -> Option<&Filter> {
        self.filter.as_ref()
    }

    /// Apply every step in the forked child, as root, after it has joined
    /// the sandbox's namespaces and before exec. Allocation-free and
    /// async-signal-safe: safe in the child of a multi-threaded parent.
    /// On failure the child must not exec; [`Step::encode`] the error for the
    /// parent and `_exit`.
    pub fn apply_in_child(&self) -> Result<(), (Step, Errno)> {
        // 1. The bounding set first: dropping from it needs CAP_SETPCAP,
        //    which the uid change below takes away. After this nothing the
        //    process execs (setuid root, file capabilities) can regain a cap.
        if !self.bounding_set_dropped {
            caps::drop_bounding_set(self.last_cap).map_err(|e| (Step::DropBoundingSet, e))?;
        }
        // 2. Groups, then gid, then uid: each needs CAP_SETGID/CAP_SETUID.
        //    Verified afterwards. The permitted set is kept across the uid
        //    change (PR_SET_KEEPCAPS; exec clears the flag), and the process
        //    made non-dumpable before step 4 drops it. The kernel makes a
        //    process whose uid changed dumpable again if fs.suid_dumpable =
        //    1; from then until exec the tenant's uid could open
        //    /proc/CHILD/mem, and a child of a vfork-style clone runs in its
        //    parent's memory (the root init's). With capabilities still
        //    permitted, the ptrace access check refuses a tracer that lacks
        //    them; once non-dumpable, it refuses any tracer without
        //    CAP_SYS_PTRACE; dropping capabilities then does not make the
        //    process dumpable again (commit_creds resets it only when
        //    privileges grow or ids change).
        keep_caps(true).map_err(|e| (Step::Identity, e))?;
        identity::become_user(self.uid, self.gid, &self.groups).map_err(|e| (Step::Identity, e))?;
        crate::sys::prctl(libc::PR_SET_DUMPABLE, 0, 0).map_err(|e| (Step::Identity, e))?;
        keep_caps(false).map_err(|e| (Step::Identity, e))?;
        // 3–4. What the uid change leaves: the inheritable set always, and
        //    everything if securebits (SECBIT_KEEP_CAPS, NO_SETUID_FIXUP)
        //    were set. After the ids, or the ids could not change.
        caps::clear_ambient().map_err(|e| (Step::ClearAmbient, e))?;
        caps::clear_all().map_err(|e| (Step::ClearCapabilities, e))?;
        // 5. Before seccomp: without capabilities the kernel only accepts a
        //    filter from a no_new_privs process.
        caps::set_no_new_privs().map_err(|e| (Step::NoNewPrivs, e))?;
        // 6. Descriptors.
        match self.fds {
            FdAction::Keep => Ok(()),
            FdAction::Close { from } => fds::close_fds_from(from),
            FdAction::CloseOnExec { from } => fds::cloexec_fds_from(from),
        }
        .map_err(|e| (Step::Fds, e))?;
        // 7. Seccomp last, so the filter never refuses a setup step (a plan
        //    may deny capset or close_range) and a kill action cannot kill
        //    the child halfway. Only exec (never denied) comes after.
        if let Some(filter) = &self.filter {
            filter.apply().map_err(|e| (Step::Seccomp, e))?;
        }
        Ok(())
    }
}

/// PR_SET_KEEPCAPS: whether a uid change away from 0 keeps the permitted
/// capability set. Async-signal-safe.
fn keep_caps(on: bool) -> Result<(), Errno> {
    crate::sys::prctl(libc::PR_SET_KEEPCAPS, libc::c_ulong::from(on), 0).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_ids_are_refused() {
        for (uid, gid, groups) in [
            (0, 1000, vec![]),
            (1000, 0, vec![]),
            (1000, 1000, vec![1000, 0]),
        ] {
            assert!(matches!(
                prepare(&SeccompPlan::default_policy(), uid, gid, &groups),
                Err(SecurityError::RootIdentity { .. })
            ));
        }
        let too_many = vec![1000; 65537];
        assert!(matches!(
            prepare(&SeccompPlan::default_policy(), 1000, 1000, &too_many),
            Err(SecurityError::TooManyGroups(65537))
        ));
    }

    #[test]
    fn prepare_compiles_the_filter_unless_disabled() {
        let p = prepare(&SeccompPlan::default_policy(), 65534, 65534, &[65534]).unwrap();
        assert!(p.filter().is_some());
        assert_eq!(p.fds, FdAction::CloseOnExec { from: 3 });
        let mut off = SeccompPlan::default_policy();
        off.enabled = false;
        let p = prepare(&off, 65534, 65534, &[])
            .unwrap()
            .with_fds(FdAction::Keep);
        assert!(p.filter().is_none());
        assert_eq!(p.fds, FdAction::Keep);
        let mut bad = SeccompPlan::default_policy();
        bad.allow = vec!["mout".into()];
        assert!(matches!(
            prepare(&bad, 65534, 65534, &[]),
            Err(SecurityError::UnknownSyscall(_))
        ));
    }
}
