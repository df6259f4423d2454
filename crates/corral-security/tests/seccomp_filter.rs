//! The filter, installed for real, in children that stay root: anything the
//! filter lets through really runs with every capability, so "EPERM" can only
//! come from the filter. Each case has an unfiltered control showing the same
//! call does *not* fail with EPERM without it.

mod common;

use common::*;
use corral_profile::plan::SeccompAction;
use corral_security::{default_deny_list, syscalls};

const NONEXISTENT: &std::ffi::CStr = c"/nonexistent/corral-security-probe";

fn mount_probe() -> i32 {
    // SAFETY: valid C strings; the target does not exist (ENOENT if the call
    // gets through), so nothing is ever mounted.
    errno_of(
        unsafe {
            libc::mount(
                c"none".as_ptr(),
                NONEXISTENT.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                std::ptr::null(),
            )
        }
        .into(),
    )
}

/// `probe` is refused with EPERM by the default filter and not otherwise.
fn assert_filtered(name: &str, probe: impl Fn() -> i32 + Copy) {
    let f = filter(&plan(SeccompAction::Errno));
    let control = probe_as_root(None, probe);
    assert!(
        matches!(control, Outcome::Exited(code) if code != libc::EPERM && code < SETUP_FAILED),
        "{name}: control without the filter should not be EPERM: {control:?}"
    );
    assert_eq!(
        probe_as_root(Some(&f), probe),
        eperm(),
        "{name} with the filter"
    );
}

#[test]
fn mount_is_refused() {
    assert_filtered("mount", mount_probe);
}

#[test]
fn unshare_newns_is_refused() {
    // As root the control really unshares (only the child's namespace).
    assert_filtered("unshare(CLONE_NEWNS)", || {
        raw(libc::SYS_unshare, [libc::CLONE_NEWNS as u64, 0, 0, 0, 0, 0])
    });
}

#[test]
fn setns_is_refused() {
    assert_filtered("setns", || raw(libc::SYS_setns, [u64::MAX, 0, 0, 0, 0, 0]));
}

#[test]
fn clone_with_each_namespace_flag_is_refused_plain_clone_is_not() {
    let f = filter(&plan(SeccompAction::Errno));
    for flag in [
        libc::CLONE_NEWNS,
        libc::CLONE_NEWCGROUP,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWNET,
    ] {
        let flag = flag as u64;
        assert_eq!(
            probe_as_root(None, || raw_clone(flag)),
            Outcome::Exited(0),
            "control {flag:#x}"
        );
        assert_eq!(
            probe_as_root(Some(&f), || raw_clone(flag)),
            eperm(),
            "{flag:#x}"
        );
        // The kernel ignores clone's upper 32 flag bits; so must the filter.
        assert_eq!(
            probe_as_root(Some(&f), || raw_clone(flag | 1 << 40)),
            eperm(),
            "{flag:#x} | 1<<40"
        );
    }
    assert_eq!(
        probe_as_root(Some(&f), || raw_clone(0)),
        Outcome::Exited(0),
        "plain clone = fork"
    );
}

#[test]
fn clone3_is_enosys_even_with_the_kill_action() {
    // Unfiltered, clone3 with size 0 is EINVAL.
    let probe = || raw(libc::SYS_clone3, [0; 6]);
    assert_eq!(probe_as_root(None, probe), Outcome::Exited(libc::EINVAL));
    for action in [SeccompAction::Errno, SeccompAction::Kill] {
        assert_eq!(
            probe_as_root(Some(&filter(&plan(action))), probe),
            Outcome::Exited(libc::ENOSYS),
            "{action:?}"
        );
    }
}

#[test]
fn ptrace_is_refused_unless_allowed() {
    let traceme = || {
        raw(
            libc::SYS_ptrace,
            [libc::PTRACE_TRACEME as u64, 0, 0, 0, 0, 0],
        )
    };
    assert_filtered("ptrace(PTRACE_TRACEME)", traceme);
    let mut p = plan(SeccompAction::Errno);
    p.allow_ptrace = true;
    assert_eq!(
        probe_as_root(Some(&filter(&p)), traceme),
        Outcome::Exited(0)
    );
    // process_vm_readv goes with it: zero iovecs on ourselves succeed.
    let vm_read = || {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() } as u64;
        raw(libc::SYS_process_vm_readv, [pid, 0, 0, 0, 0, 0])
    };
    assert_eq!(
        probe_as_root(Some(&filter(&plan(SeccompAction::Errno))), vm_read),
        eperm()
    );
    assert_eq!(
        probe_as_root(Some(&filter(&p)), vm_read),
        Outcome::Exited(0)
    );
}

#[test]
fn io_uring_is_refused_unless_allowed() {
    // Bad params pointer: EFAULT whenever the call reaches io_uring.
    let setup = || raw(libc::SYS_io_uring_setup, [1, 1, 0, 0, 0, 0]);
    assert_filtered("io_uring_setup", setup);
    let mut p = plan(SeccompAction::Errno);
    p.allow_io_uring = true;
    assert_eq!(
        probe_as_root(Some(&filter(&p)), setup),
        probe_as_root(None, setup)
    );
}

#[test]
fn kernel_surface_calls_are_refused() {
    assert_filtered("bpf", || raw(libc::SYS_bpf, POISON));
    assert_filtered("keyctl", || raw(libc::SYS_keyctl, POISON));
    assert_filtered("perf_event_open", || raw(libc::SYS_perf_event_open, POISON));
    assert_filtered("open_by_handle_at", || {
        raw(libc::SYS_open_by_handle_at, POISON)
    });
    assert_filtered("userfaultfd", || raw(libc::SYS_userfaultfd, POISON));
}

#[test]
fn terminal_injection_ioctls_are_refused_other_ioctls_are_not() {
    let f = filter(&plan(SeccompAction::Errno));
    let ioctl = |request: u64| move || raw(libc::SYS_ioctl, [u64::MAX, request, 0, 0, 0, 0]);
    for request in [libc::TIOCSTI, libc::TIOCLINUX, libc::TIOCSTI | 1 << 32] {
        assert_eq!(
            probe_as_root(None, ioctl(request)),
            Outcome::Exited(libc::EBADF),
            "control {request:#x}"
        );
        assert_eq!(
            probe_as_root(Some(&f), ioctl(request)),
            eperm(),
            "{request:#x}"
        );
    }
    assert_eq!(
        probe_as_root(Some(&f), ioctl(libc::FIONREAD)),
        Outcome::Exited(libc::EBADF)
    );
}

#[test]
fn kill_action_kills_with_sigsys() {
    let f = filter(&plan(SeccompAction::Kill));
    assert_eq!(probe_as_root(Some(&f), mount_probe), sigsys());
    // ...and allowed calls still work under it.
    assert_eq!(
        probe_as_root(Some(&f), || raw(libc::SYS_getppid, [0; 6])),
        Outcome::Exited(0)
    );
}

#[test]
fn allow_lets_a_default_entry_through() {
    // Through the filter, mount reaches path lookup: ENOENT, not EPERM.
    let mut p = plan(SeccompAction::Errno);
    p.allow = vec!["mount".into()];
    assert_eq!(
        probe_as_root(Some(&filter(&p)), mount_probe),
        Outcome::Exited(libc::ENOENT)
    );
    assert_eq!(
        probe_as_root(Some(&filter(&plan(SeccompAction::Errno))), mount_probe),
        eperm()
    );
}

#[test]
fn deny_adds_a_syscall() {
    let uname = || {
        // SAFETY: a zeroed utsname is a valid buffer for uname to fill.
        let mut buf: libc::utsname = unsafe { std::mem::zeroed() };
        // SAFETY: `buf` is live and writable.
        errno_of(unsafe { libc::uname(&mut buf) }.into())
    };
    let mut p = plan(SeccompAction::Errno);
    p.deny = vec!["uname".into()];
    assert_eq!(
        probe_as_root(Some(&filter(&plan(SeccompAction::Errno))), uname),
        Outcome::Exited(0)
    );
    assert_eq!(probe_as_root(Some(&filter(&p)), uname), eperm());
}

#[test]
fn x32_syscalls_are_killed() {
    const X32_SYSCALL_BIT: libc::c_long = 0x4000_0000;
    let x32_getpid = || raw(X32_SYSCALL_BIT | libc::SYS_getpid, [0; 6]);
    // Without the filter: ENOSYS, or success on a kernel built with x32.
    let control = probe_as_root(None, x32_getpid);
    assert!(
        matches!(control, Outcome::Exited(0 | libc::ENOSYS)),
        "control: {control:?}"
    );
    assert_eq!(
        probe_as_root(Some(&filter(&plan(SeccompAction::Errno))), x32_getpid),
        sigsys()
    );
}

/// getpid through the i386 entry point (int 0x80, number 20 there).
fn int80_getpid() -> i32 {
    let ret: i32;
    // SAFETY: `int 0x80` with eax = 20 is the i386 getpid, which takes no
    // arguments and touches no memory; the compat entry may clobber r8–r11.
    unsafe {
        std::arch::asm!(
            "int 0x80",
            inlateout("eax") 20i32 => ret,
            out("r8") _, out("r9") _, out("r10") _, out("r11") _,
            options(nostack),
        )
    };
    if ret > 0 {
        0
    } else {
        -ret
    }
}

#[test]
fn i386_syscalls_are_killed() {
    assert_eq!(
        probe_as_root(None, int80_getpid),
        Outcome::Exited(0),
        "kernel without IA32 emulation?"
    );
    assert_eq!(
        probe_as_root(Some(&filter(&plan(SeccompAction::Errno))), int80_getpid),
        sigsys()
    );
}

/// The default deny list minus uprobe and uretprobe: the kernel lets those
/// two through seccomp itself (they are meant for its uprobe trampolines;
/// called from elsewhere, uprobe fails with ENXIO and uretprobe raises
/// SIGILL), so the filter's answer for them is never seen.
fn swept() -> Vec<&'static str> {
    default_deny_list()
        .into_iter()
        .filter(|n| !matches!(*n, "uprobe" | "uretprobe"))
        .collect()
}

/// Every entry of the default deny list, called with poison arguments
/// (harmless if it got through), is killed under the kill action and EPERM
/// under errno.
#[test]
fn every_default_entry_is_enforced() {
    let kill = filter(&plan(SeccompAction::Kill));
    let errno = filter(&plan(SeccompAction::Errno));
    for name in swept() {
        let nr = syscalls::number(name).unwrap();
        let probe = move || raw(nr, POISON);
        let (on_kill, on_errno) = (sigsys(), eperm());
        assert_eq!(probe_as_root(Some(&kill), probe), on_kill, "{name} (kill)");
        assert_eq!(
            probe_as_root(Some(&errno), probe),
            on_errno,
            "{name} (errno)"
        );
    }
}

/// Calls that host policy (not the filter) may refuse root with EPERM.
fn eperm_by_host_policy() -> Vec<&'static str> {
    let sysctl = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}")).unwrap_or_default()
    };
    let mut names = vec![];
    if sysctl("kexec_load_disabled").trim() == "1" {
        names.extend(["kexec_load", "kexec_file_load"]);
    }
    if sysctl("modules_disabled").trim() == "1" {
        names.extend(["init_module", "finit_module", "delete_module"]);
    }
    if sysctl("io_uring_disabled").trim() == "2" {
        names.extend(["io_uring_setup"]);
    }
    let lockdown = std::fs::read_to_string("/sys/kernel/security/lockdown").unwrap_or_default();
    if !lockdown.is_empty() && !lockdown.contains("[none]") {
        names.extend(["kexec_load", "iopl", "ioperm"]);
    }
    names
}

/// The controls for the sweep above: without a filter, root gets something
/// other than EPERM from each of those calls, so EPERM above is the filter's
/// (the kill-action sweep does not depend on this).
#[test]
fn default_entries_do_not_fail_with_eperm_unfiltered() {
    let host_policy = eperm_by_host_policy();
    let mut eperm_unfiltered = vec![];
    for name in swept() {
        let nr = syscalls::number(name).unwrap();
        let probe = move || raw(nr, POISON);
        match probe_as_root(None, probe) {
            Outcome::Exited(libc::EPERM) if !host_policy.contains(&name) => {
                eperm_unfiltered.push(name)
            }
            Outcome::Exited(_) => {}
            other => panic!("{name} unfiltered: {other:?}"),
        }
    }
    assert!(
        eperm_unfiltered.is_empty(),
        "EPERM without the filter: {eperm_unfiltered:?}"
    );
}

#[test]
fn socket_families_outside_the_web_ones_are_refused() {
    let socket = |family: i32| {
        move || {
            // SAFETY: no memory; a socket that gets created is closed by exit.
            errno_of(unsafe { libc::socket(family, libc::SOCK_STREAM, 0) }.into())
        }
    };
    // Unfiltered, root gets a socket or EAFNOSUPPORT (module not loaded).
    assert_filtered("socket(AF_VSOCK)", socket(libc::AF_VSOCK));
    assert_filtered("socket(AF_ALG)", socket(libc::AF_ALG));
    let f = filter(&plan(SeccompAction::Errno));
    for family in [libc::AF_UNIX, libc::AF_INET, libc::AF_INET6] {
        assert_eq!(
            probe_as_root(Some(&f), socket(family)),
            Outcome::Exited(0),
            "{family}"
        );
    }
    let netlink = || {
        // SAFETY: as above.
        errno_of(
            unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE) }.into(),
        )
    };
    assert_eq!(probe_as_root(Some(&f), netlink), Outcome::Exited(0));
}

#[test]
fn personality_only_takes_dockers_values() {
    let persona = |v: u64| move || raw(libc::SYS_personality, [v, 0, 0, 0, 0, 0]);
    // ADDR_NO_RANDOMIZE: turning ASLR off for the next exec.
    assert_filtered("personality(ADDR_NO_RANDOMIZE)", persona(0x4_0000));
    let f = filter(&plan(SeccompAction::Errno));
    for v in [0xffff_ffff, 0, 8] {
        assert_eq!(
            probe_as_root(Some(&f), persona(v)),
            Outcome::Exited(0),
            "{v:#x}"
        );
    }
}

#[test]
fn numbers_beyond_the_table_are_enosys_even_with_the_kill_action() {
    let max = syscalls::all().last().unwrap().1;
    for nr in [max + 1, max + 30, 1000] {
        let probe = move || raw(nr, [0; 6]);
        assert_eq!(probe_as_root(None, probe), Outcome::Exited(libc::ENOSYS));
        for action in [SeccompAction::Errno, SeccompAction::Kill] {
            assert_eq!(
                probe_as_root(Some(&filter(&plan(action))), probe),
                Outcome::Exited(libc::ENOSYS),
                "{nr} {action:?}"
            );
        }
    }
}

#[test]
fn kcmp_pidfd_getfd_process_madvise_go_with_allow_ptrace() {
    let kcmp_self = || {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() } as u64;
        // KCMP_FILE (0) of fd 0 with itself: 0 (equal) when it runs.
        raw(libc::SYS_kcmp, [pid, pid, 0, 0, 0, 0])
    };
    assert_filtered("kcmp(self, self, KCMP_FILE, 0, 0)", kcmp_self);
    let mut p = plan(SeccompAction::Errno);
    p.allow_ptrace = true;
    assert_eq!(
        probe_as_root(Some(&filter(&p)), kcmp_self),
        Outcome::Exited(0)
    );
    for name in ["pidfd_getfd", "process_madvise"] {
        let nr = syscalls::number(name).unwrap();
        let probe = move || raw(nr, [u64::MAX, 0, 0, 0, 0, 0]);
        assert_filtered(name, probe);
        assert_eq!(
            probe_as_root(Some(&filter(&p)), probe),
            Outcome::Exited(libc::EBADF),
            "{name} with allow_ptrace"
        );
    }
}
