//! The seccomp filter: built from a [`SeccompPlan`] before fork, installed
//! after fork without allocating.

mod compile;
mod rules;

pub use rules::{default_allow_list, default_deny_list, default_deny_reasons};

use corral_profile::plan::SeccompPlan;
use libc::sock_filter;
use nix::errno::Errno;

use crate::error::SecurityError;
use crate::sys;

/// A compiled seccomp program, ready to install.
#[derive(Clone, Debug)]
pub struct Filter {
    program: Box<[sock_filter]>,
}

/// Compile the filter for `plan`, or `None` when the plan disables seccomp.
///
/// All validation happens here (unknown names, essential syscalls, size), so
/// the child only has a syscall left to make.
pub fn build(plan: &SeccompPlan) -> Result<Option<Filter>, SecurityError> {
    if !plan.enabled {
        return Ok(None);
    }
    if !cfg!(target_arch = "x86_64") {
        return Err(SecurityError::UnsupportedArch(std::env::consts::ARCH));
    }
    let rules = rules::resolve(plan)?;
    let program = compile::compile(&rules, plan.action)?;
    Ok(Some(Filter {
        program: program.into_boxed_slice(),
    }))
}

impl Filter {
    /// Install the filter on the calling thread (and so on everything it
    /// execs or forks). Allocation-free and async-signal-safe.
    ///
    /// The caller must already have set no_new_privs (or hold
    /// CAP_SYS_ADMIN): see [`crate::caps::set_no_new_privs`]. Filters stack:
    /// applying twice installs two filters.
    ///
    /// This is the raw `seccomp(2)` call: it must never allocate, and it
    /// does not set no_new_privs itself (corral orders that step
    /// explicitly, see [`crate::Prepared`]).
    pub fn apply(&self) -> Result<(), Errno> {
        let prog = libc::sock_fprog {
            // `build` keeps programs within 4096 instructions, so this fits.
            len: self.program.len() as libc::c_ushort,
            // The kernel only reads through this pointer (copy_from_user).
            filter: self.program.as_ptr() as *mut libc::sock_filter,
        };
        // SAFETY: `prog` points at `self.program`, a live array of `len`
        // `libc::sock_filter` (the kernel's struct) instructions that
        // outlives the call; the kernel copies it and keeps no reference.
        // Flags 0: this thread only, which in a freshly forked child is the
        // whole process.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER as libc::c_ulong,
                0 as libc::c_ulong,
                &prog as *const libc::sock_fprog,
            )
        };
        sys::check(ret).map(drop)
    }

    /// The program as the kernel's `struct sock_filter` array (code, jt, jf,
    /// k in native byte order), e.g. for a benchmark to install elsewhere.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.program.len() * 8);
        for insn in self.program.iter() {
            out.extend_from_slice(&insn.code.to_ne_bytes());
            out.push(insn.jt);
            out.push(insn.jf);
            out.extend_from_slice(&insn.k.to_ne_bytes());
        }
        out
    }

    /// Number of BPF instructions (for tests and the cost measurement).
    pub fn len(&self) -> usize {
        self.program.len()
    }

    /// Never true: every filter at least checks the architecture.
    pub fn is_empty(&self) -> bool {
        self.program.is_empty()
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use corral_profile::plan::SeccompAction;

    #[test]
    fn disabled_plan_builds_nothing_and_enabled_builds_a_program() {
        let mut plan = SeccompPlan {
            enabled: false,
            action: SeccompAction::Errno,
            allow_ptrace: false,
            allow_io_uring: false,
            deny: vec!["definitely_not_a_syscall".into()],
            allow: vec![],
        };
        // Disabled: the lists are not even looked at.
        assert!(build(&plan).unwrap().is_none());
        plan.enabled = true;
        assert!(matches!(
            build(&plan),
            Err(SecurityError::UnknownSyscall(_))
        ));
        plan.deny.clear();
        let filter = build(&plan).unwrap().unwrap();
        // A search tree, not one chain per allowed call.
        assert!(filter.len() < default_allow_list().len());
    }
}
