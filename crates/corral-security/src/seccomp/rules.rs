//! The default deny list and how a [`SeccompPlan`] changes it.
//!
//! Everything here is data plus set arithmetic; turning the result into BPF
//! is `compile.rs`'s job.

use std::collections::BTreeMap;

use corral_profile::plan::SeccompPlan;

use crate::error::SecurityError;
use crate::syscalls;

/// Which calls of a system call the filter refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Match {
    /// Every call, answered with the plan's action.
    Always,
    /// Calls whose argument `arg` has any of `flags` set (32-bit compare).
    AnyFlag { arg: u8, flags: &'static [u64] },
    /// Calls whose argument `arg` equals one of `values` (32-bit compare).
    OneOf { arg: u8, values: &'static [u64] },
    /// Every call, answered ENOSYS whatever the plan's action: for clone3,
    /// whose flags sit in memory the filter cannot read. ENOSYS makes glibc
    /// fall back to clone, whose flags the filter does see.
    Enosys,
}

/// Which plan switch, if any, removes an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Group {
    Base,
    /// Removed by `allow_ptrace`.
    Ptrace,
    /// Removed by `allow_io_uring`.
    IoUring,
}

/// One entry of the default deny list.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    pub(crate) name: &'static str,
    pub(crate) how: Match,
    pub(crate) group: Group,
    /// One line for docs/security.md (a test checks every name is there).
    pub(crate) why: &'static str,
}

/// Every CLONE_NEW* flag `clone(2)` accepts. CLONE_NEWTIME (0x80) is absent on
/// purpose: in clone's flags word that bit belongs to the exit signal (CSIGNAL)
/// and the kernel only takes CLONE_NEWTIME from unshare/clone3.
const CLONE_NEW_FLAGS: &[u64] = &[
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
];

/// ioctl requests that push input into, or drive, a terminal that may be
/// shared with someone else.
#[allow(clippy::unnecessary_cast)] // `Ioctl` is u64 on x86_64 but not everywhere
const TTY_INJECTION: &[u64] = &[libc::TIOCSTI as u64, libc::TIOCLINUX as u64];

const fn always(name: &'static str, why: &'static str) -> Entry {
    Entry {
        name,
        how: Match::Always,
        group: Group::Base,
        why,
    }
}

const fn grouped(name: &'static str, group: Group, why: &'static str) -> Entry {
    Entry {
        name,
        how: Match::Always,
        group,
        why,
    }
}

/// The default deny list. Only system calls that a web application has no
/// use for and that either reach kernel attack surface meant for the host's
/// administrator or could break out of the sandbox.
pub(crate) const DEFAULT: &[Entry] = &[
    // The sandbox's filesystem view.
    always("mount", "would change the sandbox's mount table (needs caps, but user namespaces hand those out)"),
    always("umount2", "would uncover what the sandbox's mounts hide"),
    always("pivot_root", "changes the root of the mount namespace"),
    always("move_mount", "new mount API: moves mounts around"),
    always("open_tree", "new mount API: clones a mount tree, detached mounts included"),
    always("fsopen", "new mount API: creates a filesystem context"),
    always("fsconfig", "new mount API: configures a filesystem context"),
    always("fsmount", "new mount API: turns a context into a mount"),
    always("fspick", "new mount API: reconfigures an existing mount"),
    always("mount_setattr", "changes mount flags, e.g. clears read-only"),
    // Namespaces.
    always("unshare", "new namespaces (a user namespace hands out capabilities)"),
    always("setns", "joins another namespace through an fd"),
    Entry {
        name: "clone",
        how: Match::AnyFlag { arg: 0, flags: CLONE_NEW_FLAGS },
        group: Group::Base,
        why: "only with a CLONE_NEW* flag (argument filter on the flags word, arg0 on x86_64): plain fork and threads still work",
    },
    Entry {
        name: "clone3",
        how: Match::Enosys,
        group: Group::Base,
        why: "its flags are in memory the filter cannot read: ENOSYS (whatever the action) so glibc falls back to clone",
    },
    // Debugging other processes.
    grouped("ptrace", Group::Ptrace, "reads and writes other processes of the tenant, a classic seccomp bypass before 4.8 (allow_ptrace lifts it)"),
    grouped("process_vm_readv", Group::Ptrace, "reads another process's memory (goes with ptrace)"),
    grouped("process_vm_writev", Group::Ptrace, "writes another process's memory (goes with ptrace)"),
    // Kernel attack surface a web app never needs.
    always("kexec_load", "replaces the running kernel"),
    always("kexec_file_load", "replaces the running kernel"),
    always("bpf", "eBPF verifier and maps: a large, frequently exploited surface"),
    always("perf_event_open", "performance counters: side channels and a long history of kernel bugs"),
    always("keyctl", "the kernel keyring is not namespaced: keys could leak between sandboxes"),
    always("add_key", "kernel keyrings are not namespaced"),
    always("request_key", "kernel keyrings are not namespaced; may call out to a host helper"),
    always("init_module", "loads kernel code"),
    always("finit_module", "loads kernel code"),
    always("delete_module", "unloads kernel code"),
    always("open_by_handle_at", "opens files by handle, bypassing the mount view (the 'shocker' container escape)"),
    always("name_to_handle_at", "makes the handles open_by_handle_at takes"),
    always("userfaultfd", "lets a process stall kernel page faults: a standard exploit helper"),
    always("reboot", "reboots the host or arms Ctrl-Alt-Del"),
    always("swapon", "host swap configuration"),
    always("swapoff", "host swap configuration"),
    always("acct", "host process accounting"),
    always("settimeofday", "the clock is the host's, not the tenant's"),
    always("clock_settime", "the clock is the host's"),
    always("clock_adjtime", "the clock is the host's"),
    always("adjtimex", "the clock is the host's (x86_64 has no stime)"),
    grouped("io_uring_setup", Group::IoUring, "io_uring: a large surface, and its operations bypass this filter (allow_io_uring lifts it)"),
    grouped("io_uring_enter", Group::IoUring, "io_uring (goes with io_uring_setup)"),
    grouped("io_uring_register", Group::IoUring, "io_uring (goes with io_uring_setup)"),
    always("quotactl", "host disk quota configuration"),
    always("lookup_dcookie", "old profiling interface that hands out kernel pointers (gone from recent kernels)"),
    always("vhangup", "hangs up the controlling terminal"),
    always("nfsservctl", "obsolete NFS server control (gone since 3.1)"),
    always("iopl", "raw I/O port access"),
    always("ioperm", "raw I/O port access"),
    always("syslog", "reads or clears the kernel log"),
    Entry {
        name: "ioctl",
        how: Match::OneOf { arg: 1, values: TTY_INJECTION },
        group: Group::Base,
        why: "only TIOCSTI and TIOCLINUX (arg1, 32-bit compare): they type into a terminal another user may read from",
    },
];

/// System calls the plan may not deny: without them no process starts or exits.
const ESSENTIAL: &[&str] = &["execve", "exit", "exit_group", "rt_sigreturn"];

/// The default deny list's names, in order.
pub fn default_deny_list() -> Vec<&'static str> {
    DEFAULT.iter().map(|e| e.name).collect()
}

/// The default deny list with one line each on why (what docs/security.md says).
pub fn default_deny_reasons() -> Vec<(&'static str, &'static str)> {
    DEFAULT.iter().map(|e| (e.name, e.why)).collect()
}

/// The effective rules for `plan`: syscall number → what is refused.
///
/// Start from [`DEFAULT`]; `allow_ptrace` / `allow_io_uring` remove their
/// groups; `allow` removes names; `deny` adds names (denying every call, even
/// for `clone` and `ioctl`, whose default rules only look at arguments).
/// `deny` wins over `allow`. clone3 always answers ENOSYS.
pub(crate) fn resolve(plan: &SeccompPlan) -> Result<BTreeMap<i64, Match>, SecurityError> {
    let lookup = |name: &str| {
        syscalls::number(name).ok_or_else(|| SecurityError::UnknownSyscall(name.to_owned()))
    };
    for name in &plan.allow {
        lookup(name)?;
    }
    for name in &plan.deny {
        lookup(name)?;
        if ESSENTIAL.contains(&name.as_str()) {
            return Err(SecurityError::EssentialSyscall(name.clone()));
        }
    }

    let mut rules = BTreeMap::new();
    for entry in DEFAULT {
        let lifted = match entry.group {
            Group::Base => false,
            Group::Ptrace => plan.allow_ptrace,
            Group::IoUring => plan.allow_io_uring,
        };
        if lifted || plan.allow.iter().any(|a| a == entry.name) {
            continue;
        }
        rules.insert(lookup(entry.name)?, entry.how);
    }
    for name in &plan.deny {
        let how = if name == "clone3" {
            Match::Enosys
        } else {
            Match::Always
        };
        rules.insert(lookup(name)?, how);
    }
    Ok(rules)
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    fn nr(name: &str) -> i64 {
        syscalls::number(name).unwrap()
    }

    #[test]
    fn every_default_name_is_a_syscall_once() {
        let names = default_deny_list();
        for name in &names {
            assert!(syscalls::number(name).is_some(), "{name}");
        }
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
        // chroot is deliberately allowed: harmless without capabilities.
        assert!(!names.contains(&"chroot"));
    }

    #[test]
    fn default_plan_denies_the_whole_list() {
        let rules = resolve(&SeccompPlan::default_policy()).unwrap();
        assert_eq!(rules.len(), DEFAULT.len());
        assert_eq!(rules[&nr("mount")], Match::Always);
        assert_eq!(rules[&nr("clone3")], Match::Enosys);
        assert!(matches!(rules[&nr("clone")], Match::AnyFlag { arg: 0, .. }));
        assert!(matches!(rules[&nr("ioctl")], Match::OneOf { arg: 1, .. }));
    }

    #[test]
    fn switches_lift_their_groups() {
        let mut p = SeccompPlan::default_policy();
        p.allow_ptrace = true;
        let rules = resolve(&p).unwrap();
        for name in ["ptrace", "process_vm_readv", "process_vm_writev"] {
            assert!(!rules.contains_key(&nr(name)), "{name}");
        }
        assert!(rules.contains_key(&nr("io_uring_setup")));

        let mut p = SeccompPlan::default_policy();
        p.allow_io_uring = true;
        let rules = resolve(&p).unwrap();
        for name in ["io_uring_setup", "io_uring_enter", "io_uring_register"] {
            assert!(!rules.contains_key(&nr(name)), "{name}");
        }
        assert!(rules.contains_key(&nr("ptrace")));
    }

    #[test]
    fn allow_removes_and_deny_adds_and_wins() {
        let mut p = SeccompPlan::default_policy();
        p.allow = vec!["mount".into(), "bpf".into(), "read".into()];
        p.deny = vec!["uname".into(), "bpf".into(), "ioctl".into()];
        let rules = resolve(&p).unwrap();
        assert!(!rules.contains_key(&nr("mount")));
        assert!(
            !rules.contains_key(&nr("read")),
            "allowing a non-default name is a no-op"
        );
        assert_eq!(rules[&nr("uname")], Match::Always);
        assert_eq!(rules[&nr("bpf")], Match::Always, "deny wins over allow");
        assert_eq!(
            rules[&nr("ioctl")],
            Match::Always,
            "deny widens an argument rule"
        );
    }

    #[test]
    fn denying_clone3_keeps_enosys() {
        let mut p = SeccompPlan::default_policy();
        p.allow = vec!["clone3".into()];
        p.deny = vec!["clone3".into()];
        assert_eq!(resolve(&p).unwrap()[&nr("clone3")], Match::Enosys);
    }

    #[test]
    fn unknown_names_are_errors() {
        let mut p = SeccompPlan::default_policy();
        p.deny = vec!["mout".into()];
        match resolve(&p) {
            Err(SecurityError::UnknownSyscall(n)) => assert_eq!(n, "mout"),
            other => panic!("{other:?}"),
        }
        let mut p = SeccompPlan::default_policy();
        p.allow = vec!["not_a_syscall".into()];
        assert!(matches!(resolve(&p), Err(SecurityError::UnknownSyscall(_))));
    }

    #[test]
    fn essential_syscalls_cannot_be_denied() {
        let mut p = SeccompPlan::default_policy();
        p.deny = vec!["execve".into()];
        assert!(matches!(resolve(&p), Err(SecurityError::EssentialSyscall(n)) if n == "execve"));
    }
}
