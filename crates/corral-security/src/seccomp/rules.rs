//! The default policy, an allow list for the native architecture, and how a
//! [`SeccompPlan`] changes it.
//!
//! Every name in the architecture's table (`syscalls/`) is decided here,
//! once: either in [`ALLOWED`] (every call, or only calls whose arguments
//! pass a check) or in [`DENIED`] with the reason. A unit test checks that
//! the two lists cover the table exactly, so adding a new kernel's system
//! calls to the table forces a decision; numbers the table does not know
//! (a newer kernel's) are answered ENOSYS by the filter (`compile.rs`).
//!
//! Everything here is data plus set arithmetic; turning the result into BPF
//! is `compile.rs`'s job.

use std::collections::BTreeMap;

use corral_profile::plan::SeccompPlan;

use crate::error::SecurityError;
use crate::syscalls;

/// Which calls of an allowed system call the filter lets through; the others
/// get the plan's action. Argument compares use the low 32 bits only (the
/// kernel reads clone's flags, ioctl's request, socket's family and
/// personality's persona as 32-bit values, so only the low half may decide).
///
/// Only [`Rule::Always`] leaves a system call to the kernel's seccomp action
/// cache (5.11+), which then skips the BPF program for it entirely: a rule
/// that reads an argument runs the program on every call of that system
/// call, and only of that one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    /// Every call.
    Always,
    /// Calls whose argument `arg` has none of the bits of `mask`.
    NoFlags { arg: u8, mask: u64 },
    /// Calls whose argument `arg` equals one of `values`.
    OneOf { arg: u8, values: &'static [u64] },
    /// Calls whose argument `arg` equals none of `values`.
    NoneOf { arg: u8, values: &'static [u64] },
    /// No call: every call is answered ENOSYS, whatever the plan's action.
    /// For clone3, whose flags sit in memory the filter cannot read; ENOSYS
    /// makes glibc fall back to clone, whose flags the filter does see.
    Enosys,
}

/// Which plan switch, if any, allows a denied entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Group {
    Base,
    /// Allowed by `allow_ptrace`.
    Ptrace,
    /// Allowed by `allow_io_uring`.
    IoUring,
}

/// One allowed system call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Allowed {
    pub(crate) name: &'static str,
    pub(crate) rule: Rule,
}

/// One denied system call: every call gets the plan's action.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Denied {
    pub(crate) name: &'static str,
    pub(crate) group: Group,
    /// One line for docs/security.md (a test checks every name is there).
    pub(crate) why: &'static str,
}

/// Every CLONE_NEW* flag `clone(2)` accepts, as one mask (Docker's
/// 0x7E020000). CLONE_NEWTIME (0x80) is absent on purpose: in clone's flags
/// word that bit belongs to the exit signal (CSIGNAL) and the kernel only
/// takes CLONE_NEWTIME from unshare/clone3.
pub(crate) const CLONE_NEW_MASK: u64 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u64;

/// ioctl requests refused: those that push input into, or drive, a terminal
/// that may be shared with someone else (TIOCSTI, TIOCLINUX), and
/// FS_IOC_FSSETXATTR, which would let a tenant move its own files out of the
/// project whose quota caps its disk /tmp (an owner may change a file's
/// project id outside a user namespace; corral-sandbox's quota module).
#[allow(clippy::unnecessary_cast)] // `Ioctl` is u64 on x86_64 but not everywhere
const IOCTL_DENIED: &[u64] = &[
    libc::TIOCSTI as u64,
    libc::TIOCLINUX as u64,
    FS_IOC_FSSETXATTR,
];

/// _IOW('X', 32, struct fsxattr) (linux/fs.h).
pub(crate) const FS_IOC_FSSETXATTR: u64 = 0x401c_5820;

/// Address families a web tenant opens: local sockets, IPv4, IPv6, and
/// netlink (glibc's getaddrinfo asks NETLINK_ROUTE for the host's addresses
/// with AI_ADDRCONFIG; `ip`/`ss` read through it). Every other family
/// (AF_VSOCK, AF_PACKET, AF_ALG, AF_KEY, AF_BLUETOOTH, AF_TIPC, AF_RDS, ...)
/// is refused before the kernel looks it up, so no protocol module is
/// autoloaded for a tenant either.
pub(crate) const SOCKET_FAMILIES: &[u64] = &[
    libc::AF_UNIX as u64,
    libc::AF_INET as u64,
    libc::AF_INET6 as u64,
    libc::AF_NETLINK as u64,
];

/// personality(2) personas Docker allows: PER_LINUX (0), PER_LINUX32 (8),
/// UNAME26 (0x20000), UNAME26 | PER_LINUX32, and 0xffffffff (query only).
/// ADDR_NO_RANDOMIZE (turning ASLR off), READ_IMPLIES_EXEC and the foreign
/// personas are refused.
pub(crate) const PERSONAS: &[u64] = &[0x0, 0x8, 0x2_0000, 0x2_0008, 0xffff_ffff];

const fn always(name: &'static str) -> Allowed {
    Allowed {
        name,
        rule: Rule::Always,
    }
}

const fn deny(name: &'static str, why: &'static str) -> Denied {
    Denied {
        name,
        group: Group::Base,
        why,
    }
}

const fn grouped(name: &'static str, group: Group, why: &'static str) -> Denied {
    Denied { name, group, why }
}

/// The default allow list (x86_64): Docker's default profile for a process
/// without capabilities, less what corral denies on purpose (see
/// [`DENIED`]), plus the system calls newer than Docker's list that a libc
/// or runtime may use (`fchmodat2`, `map_shadow_stack`, `futex_wake`, `mseal`,
/// the `*xattrat` calls, ...) and `chroot` (harmless without capabilities;
/// some programs probe it).
#[rustfmt::skip]
pub(crate) const ALLOWED: &[Allowed] = &[
    // Files and directories.
    always("read"), always("write"), always("open"), always("close"), always("stat"),
    always("fstat"), always("lstat"), always("lseek"), always("pread64"), always("pwrite64"),
    always("readv"), always("writev"), always("preadv"), always("pwritev"), always("preadv2"),
    always("pwritev2"), always("access"), always("faccessat"), always("faccessat2"),
    always("openat"), always("openat2"), always("creat"), always("newfstatat"), always("statx"),
    always("statfs"), always("fstatfs"), always("truncate"), always("ftruncate"),
    always("fallocate"), always("fsync"), always("fdatasync"), always("sync"), always("syncfs"),
    always("sync_file_range"), always("readahead"), always("fadvise64"), always("flock"),
    always("fcntl"), always("dup"), always("dup2"), always("dup3"), always("pipe"),
    always("pipe2"), always("getdents"), always("getdents64"), always("getcwd"),
    always("chdir"), always("fchdir"), always("chroot"), always("rename"), always("renameat"),
    always("renameat2"), always("mkdir"), always("mkdirat"), always("rmdir"), always("link"),
    always("linkat"), always("unlink"), always("unlinkat"), always("symlink"),
    always("symlinkat"), always("readlink"), always("readlinkat"), always("mknod"),
    always("mknodat"), always("chmod"), always("fchmod"), always("fchmodat"),
    always("fchmodat2"), always("chown"), always("fchown"), always("lchown"),
    always("fchownat"), always("umask"), always("utime"), always("utimes"), always("futimesat"),
    always("utimensat"), always("sendfile"), always("splice"), always("tee"), always("vmsplice"),
    always("copy_file_range"), always("close_range"), always("file_getattr"),
    always("file_setattr"),
    always("setxattr"), always("lsetxattr"), always("fsetxattr"), always("getxattr"),
    always("lgetxattr"), always("fgetxattr"), always("listxattr"), always("llistxattr"),
    always("flistxattr"), always("removexattr"), always("lremovexattr"),
    always("fremovexattr"), always("setxattrat"), always("getxattrat"), always("listxattrat"),
    always("removexattrat"),
    // Waiting for events.
    always("poll"), always("ppoll"), always("select"), always("pselect6"),
    always("epoll_create"), always("epoll_create1"), always("epoll_ctl"), always("epoll_wait"),
    always("epoll_pwait"), always("epoll_pwait2"), always("eventfd"), always("eventfd2"),
    always("signalfd"), always("signalfd4"), always("timerfd_create"),
    always("timerfd_settime"), always("timerfd_gettime"), always("inotify_init"),
    always("inotify_init1"), always("inotify_add_watch"), always("inotify_rm_watch"),
    // Asynchronous I/O (io_uring has its own switch, see DENIED).
    always("io_setup"), always("io_destroy"), always("io_getevents"), always("io_pgetevents"),
    always("io_submit"), always("io_cancel"),
    // Memory.
    always("mmap"), always("mprotect"), always("munmap"), always("brk"), always("mremap"),
    always("msync"), always("mincore"), always("madvise"), always("remap_file_pages"),
    always("mlock"), always("mlock2"), always("munlock"), always("mlockall"),
    always("munlockall"), always("memfd_create"), always("memfd_secret"), always("membarrier"),
    always("pkey_mprotect"), always("pkey_alloc"), always("pkey_free"), always("mseal"),
    always("map_shadow_stack"),
    // Processes, threads, signals.
    Allowed { name: "clone", rule: Rule::NoFlags { arg: 0, mask: CLONE_NEW_MASK } },
    Allowed { name: "clone3", rule: Rule::Enosys },
    always("fork"), always("vfork"), always("execve"), always("execveat"), always("exit"),
    always("exit_group"), always("wait4"), always("waitid"), always("kill"), always("tkill"),
    always("tgkill"), always("pidfd_open"), always("pidfd_send_signal"),
    always("process_mrelease"), always("rt_sigaction"), always("rt_sigprocmask"),
    always("rt_sigreturn"), always("rt_sigpending"), always("rt_sigtimedwait"),
    always("rt_sigqueueinfo"), always("rt_tgsigqueueinfo"), always("rt_sigsuspend"),
    always("sigaltstack"), always("pause"), always("restart_syscall"), always("futex"),
    always("futex_waitv"), always("futex_wake"), always("futex_wait"),
    always("futex_requeue"), always("set_robust_list"), always("get_robust_list"),
    always("set_tid_address"), always("rseq"), always("arch_prctl"),
    always("set_thread_area"), always("get_thread_area"), always("prctl"), always("seccomp"),
    always("landlock_create_ruleset"), always("landlock_add_rule"),
    always("landlock_restrict_self"),
    Allowed { name: "personality", rule: Rule::OneOf { arg: 0, values: PERSONAS } },
    // Identity, limits, scheduling (changing ids or raising limits needs
    // capabilities a tenant never has; the calls then fail by themselves).
    always("getpid"), always("getppid"), always("gettid"), always("getuid"), always("geteuid"),
    always("getgid"), always("getegid"), always("getresuid"), always("getresgid"),
    always("getgroups"), always("setuid"), always("setgid"), always("setreuid"),
    always("setregid"), always("setresuid"), always("setresgid"), always("setfsuid"),
    always("setfsgid"), always("setgroups"), always("getpgid"), always("setpgid"),
    always("getpgrp"), always("getsid"), always("setsid"), always("capget"), always("capset"),
    always("getrlimit"), always("setrlimit"), always("prlimit64"), always("getrusage"),
    always("times"), always("sysinfo"), always("uname"), always("getpriority"),
    always("setpriority"), always("ioprio_get"), always("ioprio_set"), always("sched_yield"),
    always("sched_setparam"), always("sched_getparam"), always("sched_setscheduler"),
    always("sched_getscheduler"), always("sched_get_priority_max"),
    always("sched_get_priority_min"), always("sched_rr_get_interval"),
    always("sched_setaffinity"), always("sched_getaffinity"), always("sched_setattr"),
    always("sched_getattr"), always("getcpu"), always("getrandom"),
    // Time (reading it, sleeping, timers; setting the clock is denied).
    always("time"), always("gettimeofday"), always("clock_gettime"), always("clock_getres"),
    always("clock_nanosleep"), always("nanosleep"), always("alarm"), always("getitimer"),
    always("setitimer"), always("timer_create"), always("timer_settime"),
    always("timer_gettime"), always("timer_getoverrun"), always("timer_delete"),
    // System V and POSIX IPC (the sandbox has its own IPC namespace).
    always("shmget"), always("shmat"), always("shmctl"), always("shmdt"), always("semget"),
    always("semop"), always("semtimedop"), always("semctl"), always("msgget"), always("msgsnd"),
    always("msgrcv"), always("msgctl"), always("mq_open"), always("mq_unlink"),
    always("mq_timedsend"), always("mq_timedreceive"), always("mq_notify"),
    always("mq_getsetattr"),
    // Sockets.
    Allowed { name: "socket", rule: Rule::OneOf { arg: 0, values: SOCKET_FAMILIES } },
    Allowed { name: "socketpair", rule: Rule::OneOf { arg: 0, values: SOCKET_FAMILIES } },
    always("connect"), always("accept"), always("accept4"), always("bind"), always("listen"),
    always("shutdown"), always("sendto"), always("recvfrom"), always("sendmsg"),
    always("recvmsg"), always("sendmmsg"), always("recvmmsg"), always("getsockname"),
    always("getpeername"), always("setsockopt"), always("getsockopt"),
    // Devices.
    Allowed { name: "ioctl", rule: Rule::NoneOf { arg: 1, values: IOCTL_DENIED } },
];

/// Every other system call of the table, with the reason. The `Ptrace` and
/// `IoUring` groups are allowed (every call) by the plan's switches.
pub(crate) const DENIED: &[Denied] = &[
    // The sandbox's filesystem view.
    deny("mount", "would change the sandbox's mount table (needs caps, but user namespaces hand those out)"),
    deny("umount2", "would uncover what the sandbox's mounts hide"),
    deny("pivot_root", "changes the root of the mount namespace"),
    deny("move_mount", "new mount API: moves mounts around"),
    deny("open_tree", "new mount API: clones a mount tree, detached mounts included"),
    deny("open_tree_attr", "open_tree that also changes the clone's mount attributes (6.15)"),
    deny("fsopen", "new mount API: creates a filesystem context"),
    deny("fsconfig", "new mount API: configures a filesystem context"),
    deny("fsmount", "new mount API: turns a context into a mount"),
    deny("fspick", "new mount API: reconfigures an existing mount"),
    deny("mount_setattr", "changes mount flags, e.g. clears read-only"),
    deny("statmount", "mount details by mount id, also of mounts outside what /proc/self/mountinfo shows (6.8); nothing a web app asks"),
    deny("listmount", "lists mount ids of a mount namespace (6.8); goes with statmount"),
    deny("listns", "lists namespaces by id (6.18): host topology a tenant has no use for"),
    // Namespaces and host identity.
    deny("unshare", "new namespaces (a user namespace hands out capabilities)"),
    deny("setns", "joins another namespace through an fd"),
    deny("sethostname", "needs CAP_SYS_ADMIN, which a tenant never has (Docker: CAP_SYS_ADMIN only)"),
    deny("setdomainname", "needs CAP_SYS_ADMIN, which a tenant never has (Docker: CAP_SYS_ADMIN only)"),
    // Other processes of the tenant (allow_ptrace allows the group).
    grouped("ptrace", Group::Ptrace, "reads and writes other processes of the tenant, a classic seccomp bypass before 4.8 (allow_ptrace lifts it)"),
    grouped("process_vm_readv", Group::Ptrace, "reads another process's memory (goes with ptrace)"),
    grouped("process_vm_writev", Group::Ptrace, "writes another process's memory (goes with ptrace)"),
    grouped("kcmp", Group::Ptrace, "compares kernel objects of two processes, a kernel-pointer ordering oracle (goes with ptrace; Docker: CAP_SYS_PTRACE only)"),
    grouped("pidfd_getfd", Group::Ptrace, "copies a file descriptor out of another process (goes with ptrace; Docker: CAP_SYS_PTRACE only)"),
    grouped("process_madvise", Group::Ptrace, "advises on, and reclaims, another process's memory (goes with ptrace; Docker: CAP_SYS_PTRACE only)"),
    // Kernel attack surface a web app never needs.
    deny("kexec_load", "replaces the running kernel"),
    deny("kexec_file_load", "replaces the running kernel"),
    deny("bpf", "eBPF verifier and maps: a large, frequently exploited surface"),
    deny("perf_event_open", "performance counters: side channels and a long history of kernel bugs"),
    deny("keyctl", "the kernel keyring is not namespaced: keys could leak between sandboxes"),
    deny("add_key", "kernel keyrings are not namespaced"),
    deny("request_key", "kernel keyrings are not namespaced; may call out to a host helper"),
    deny("init_module", "loads kernel code"),
    deny("finit_module", "loads kernel code"),
    deny("delete_module", "unloads kernel code"),
    deny("create_module", "loads kernel code (obsolete since 2.6: the kernel answers ENOSYS)"),
    deny("get_kernel_syms", "kernel module symbols (obsolete since 2.6)"),
    deny("query_module", "kernel module information (obsolete since 2.6)"),
    deny("open_by_handle_at", "opens files by handle, bypassing the mount view (the 'shocker' container escape)"),
    deny("name_to_handle_at", "makes the handles open_by_handle_at takes"),
    deny("userfaultfd", "lets a process stall kernel page faults: a standard exploit helper"),
    deny("fanotify_init", "filesystem-wide event monitoring; unprivileged since 5.13 in a limited form (Docker: CAP_SYS_ADMIN only)"),
    deny("fanotify_mark", "useless without fanotify_init's descriptor"),
    deny("reboot", "reboots the host or arms Ctrl-Alt-Del"),
    deny("swapon", "host swap configuration"),
    deny("swapoff", "host swap configuration"),
    deny("acct", "host process accounting"),
    deny("settimeofday", "the clock is the host's, not the tenant's"),
    deny("clock_settime", "the clock is the host's"),
    deny("clock_adjtime", "the clock is the host's"),
    deny("adjtimex", "the clock is the host's (x86_64 has no stime)"),
    grouped("io_uring_setup", Group::IoUring, "io_uring: a large surface, and its operations bypass this filter (allow_io_uring lifts it)"),
    grouped("io_uring_enter", Group::IoUring, "io_uring (goes with io_uring_setup)"),
    grouped("io_uring_register", Group::IoUring, "io_uring (goes with io_uring_setup)"),
    deny("quotactl", "host disk quota configuration"),
    deny("quotactl_fd", "host disk quota configuration, by fd (Docker: CAP_SYS_ADMIN only)"),
    deny("lookup_dcookie", "old profiling interface that hands out kernel pointers (gone from recent kernels)"),
    deny("vhangup", "hangs up the controlling terminal"),
    deny("nfsservctl", "obsolete NFS server control (gone since 3.1)"),
    deny("iopl", "raw I/O port access"),
    deny("ioperm", "raw I/O port access"),
    deny("modify_ldt", "16-bit segments for Wine and DOSEMU; a history of kernel bugs, unused by 64-bit code (Docker allows it)"),
    deny("syslog", "reads or clears the kernel log"),
    // NUMA placement: a shared host's memory policy is the host's.
    deny("mbind", "NUMA memory policy of a range; glibc, PHP, jemalloc never call it (Docker: CAP_SYS_NICE only)"),
    deny("set_mempolicy", "NUMA memory policy of the process (Docker: CAP_SYS_NICE only)"),
    deny("get_mempolicy", "NUMA policy query; libnuma treats the failure as 'no NUMA' (Docker: CAP_SYS_NICE only)"),
    deny("set_mempolicy_home_node", "NUMA home node of a range (Docker: CAP_SYS_NICE only)"),
    deny("migrate_pages", "moves another process's pages between NUMA nodes (not in Docker's list)"),
    deny("move_pages", "moves or locates another process's pages; leaked memory layout before 4.13 (not in Docker's list)"),
    // Obsolete or unused interfaces.
    deny("uselib", "loads an a.out shared library: an old, rarely built and buggy loader path"),
    deny("ustat", "obsolete file system statistics by device number (glibc no longer wraps it)"),
    deny("sysfs", "obsolete file system type listing (glibc never wrapped it)"),
    deny("_sysctl", "removed in 5.5 (/proc/sys replaces it)"),
    deny("cachestat", "page-cache residency of files: a cross-tenant side channel on shared libraries (not in Docker's list)"),
    deny("lsm_get_self_attr", "LSM attributes of the process (6.8); nothing a web app asks (not in Docker's list)"),
    deny("lsm_set_self_attr", "changes LSM attributes of the process (6.8) (not in Docker's list)"),
    deny("lsm_list_modules", "lists the host's LSMs (6.8) (not in Docker's list)"),
    deny("uprobe", "entered only from the kernel's uprobe trampoline, which seccomp lets through itself"),
    deny("uretprobe", "entered only from the kernel's uretprobe trampoline, which seccomp lets through itself"),
    deny("getpmsg", "not implemented on x86_64"),
    deny("putpmsg", "not implemented on x86_64"),
    deny("afs_syscall", "not implemented on x86_64"),
    deny("tuxcall", "not implemented on x86_64"),
    deny("security", "not implemented on x86_64"),
    deny("vserver", "not implemented on x86_64"),
    deny("epoll_ctl_old", "not implemented on x86_64"),
    deny("epoll_wait_old", "not implemented on x86_64"),
];

/// System calls the plan may not deny: without them no process starts or exits.
const ESSENTIAL: &[&str] = &["execve", "exit", "exit_group", "rt_sigreturn"];

/// The default allow list's names (argument-checked ones and clone3's ENOSYS
/// included), in order.
pub fn default_allow_list() -> Vec<&'static str> {
    ALLOWED.iter().map(|a| a.name).collect()
}

/// The names the default policy denies, in order: every system call of the
/// table that is not on the allow list.
pub fn default_deny_list() -> Vec<&'static str> {
    DENIED.iter().map(|d| d.name).collect()
}

/// The default deny list with one line each on why (what docs/security.md says).
pub fn default_deny_reasons() -> Vec<(&'static str, &'static str)> {
    DENIED.iter().map(|d| (d.name, d.why)).collect()
}

/// The effective allow list for `plan`: syscall number → which calls pass.
/// A number absent from the map gets the plan's action.
///
/// Start from [`ALLOWED`]; `allow_ptrace` / `allow_io_uring` add their
/// groups of [`DENIED`]; `allow` adds names, allowing every call (also for
/// `clone`, `ioctl`, `socket`, `personality`, whose default rules check an
/// argument, and for `clone3`, whose default is ENOSYS); `deny` removes
/// names. `deny` wins over `allow`. Denying `clone3` keeps its ENOSYS.
pub(crate) fn resolve(plan: &SeccompPlan) -> Result<BTreeMap<i64, Rule>, SecurityError> {
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
    for entry in ALLOWED {
        rules.insert(lookup(entry.name)?, entry.rule);
    }
    for entry in DENIED {
        let lifted = match entry.group {
            Group::Base => false,
            Group::Ptrace => plan.allow_ptrace,
            Group::IoUring => plan.allow_io_uring,
        };
        if lifted {
            rules.insert(lookup(entry.name)?, Rule::Always);
        }
    }
    for name in &plan.allow {
        rules.insert(lookup(name)?, Rule::Always);
    }
    for name in &plan.deny {
        let nr = lookup(name)?;
        if name == "clone3" {
            rules.insert(nr, Rule::Enosys);
        } else {
            rules.remove(&nr);
        }
    }
    Ok(rules)
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn nr(name: &str) -> i64 {
        syscalls::number(name).unwrap()
    }

    #[test]
    fn every_syscall_of_the_table_is_decided_exactly_once() {
        let allowed = default_allow_list();
        let denied = default_deny_list();
        let mut seen = BTreeSet::new();
        for name in allowed.iter().chain(&denied) {
            assert!(
                syscalls::number(name).is_some(),
                "{name} is not in the table"
            );
            assert!(seen.insert(*name), "{name} is decided twice");
        }
        let undecided: Vec<_> = syscalls::all()
            .map(|(n, _)| n)
            .filter(|n| !seen.contains(n))
            .collect();
        assert!(undecided.is_empty(), "no decision for {undecided:?}");
    }

    #[test]
    fn the_issue_list_is_denied() {
        // issue 15 item 7: what Docker's default profile refuses and corral
        // used to allow.
        let denied = default_deny_list();
        for name in [
            "pidfd_getfd",
            "kcmp",
            "process_madvise",
            "fanotify_init",
            "mbind",
            "set_mempolicy",
            "get_mempolicy",
            "migrate_pages",
            "move_pages",
            "set_mempolicy_home_node",
            "uselib",
            "ustat",
            "sysfs",
            "open_tree_attr",
            "listmount",
            "statmount",
        ] {
            assert!(denied.contains(&name), "{name}");
        }
        let rules = resolve(&SeccompPlan::default_policy()).unwrap();
        assert_eq!(
            rules[&nr("personality")],
            Rule::OneOf {
                arg: 0,
                values: PERSONAS
            }
        );
        assert_eq!(
            rules[&nr("socket")],
            Rule::OneOf {
                arg: 0,
                values: SOCKET_FAMILIES
            }
        );
    }

    #[test]
    fn essential_and_everyday_syscalls_are_allowed_without_argument_checks() {
        let rules = resolve(&SeccompPlan::default_policy()).unwrap();
        for name in ESSENTIAL.iter().chain(&[
            "read",
            "write",
            "openat",
            "close",
            "mmap",
            "futex",
            "getppid",
            "epoll_wait",
            "accept4",
            "sendto",
            "recvfrom",
            "newfstatat",
            "rseq",
            "fchmodat2",
            "chroot",
        ]) {
            assert_eq!(rules.get(&nr(name)), Some(&Rule::Always), "{name}");
        }
    }

    #[test]
    fn default_plan_is_the_allow_list() {
        let rules = resolve(&SeccompPlan::default_policy()).unwrap();
        assert_eq!(rules.len(), ALLOWED.len());
        assert!(!rules.contains_key(&nr("mount")));
        assert_eq!(rules[&nr("clone3")], Rule::Enosys);
        assert!(matches!(rules[&nr("clone")], Rule::NoFlags { arg: 0, .. }));
        assert!(matches!(rules[&nr("ioctl")], Rule::NoneOf { arg: 1, .. }));
        assert_eq!(CLONE_NEW_MASK, 0x7E02_0000, "Docker's mask");
    }

    #[test]
    fn switches_allow_their_groups() {
        let mut p = SeccompPlan::default_policy();
        p.allow_ptrace = true;
        let rules = resolve(&p).unwrap();
        for name in [
            "ptrace",
            "process_vm_readv",
            "process_vm_writev",
            "kcmp",
            "pidfd_getfd",
            "process_madvise",
        ] {
            assert_eq!(rules.get(&nr(name)), Some(&Rule::Always), "{name}");
        }
        assert!(!rules.contains_key(&nr("io_uring_setup")));

        let mut p = SeccompPlan::default_policy();
        p.allow_io_uring = true;
        let rules = resolve(&p).unwrap();
        for name in ["io_uring_setup", "io_uring_enter", "io_uring_register"] {
            assert_eq!(rules.get(&nr(name)), Some(&Rule::Always), "{name}");
        }
        assert!(!rules.contains_key(&nr("ptrace")));
    }

    #[test]
    fn allow_adds_and_deny_removes_and_wins() {
        let mut p = SeccompPlan::default_policy();
        p.allow = vec!["mount".into(), "bpf".into(), "read".into(), "socket".into()];
        p.deny = vec!["uname".into(), "bpf".into(), "ioctl".into()];
        let rules = resolve(&p).unwrap();
        assert_eq!(rules[&nr("mount")], Rule::Always);
        assert_eq!(rules[&nr("read")], Rule::Always);
        assert_eq!(
            rules[&nr("socket")],
            Rule::Always,
            "allow lifts an argument rule"
        );
        assert!(!rules.contains_key(&nr("uname")));
        assert!(!rules.contains_key(&nr("bpf")), "deny wins over allow");
        assert!(!rules.contains_key(&nr("ioctl")), "deny refuses every call");
    }

    #[test]
    fn clone3_keeps_enosys_when_denied_and_is_allowed_by_name() {
        let mut p = SeccompPlan::default_policy();
        p.allow = vec!["clone3".into()];
        assert_eq!(resolve(&p).unwrap()[&nr("clone3")], Rule::Always);
        p.deny = vec!["clone3".into()];
        assert_eq!(resolve(&p).unwrap()[&nr("clone3")], Rule::Enosys);
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
