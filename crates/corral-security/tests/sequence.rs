//! The whole prepared sequence, applied in children that start as root and
//! end as nobody (65534).

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use corral_profile::plan::SeccompAction;
use corral_security::{caps, fds, identity, prepare, Errno, FdAction, Prepared, Step};

fn nobody(plan: &corral_profile::plan::SeccompPlan) -> Prepared {
    prepare(plan, NOBODY, NOGROUP, &[NOGROUP]).unwrap()
}

fn pipe() -> (i32, i32) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a live array of two ints.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    (fds[0], fds[1])
}

fn close(fd: i32) {
    // SAFETY: closing a descriptor this test owns.
    unsafe { libc::close(fd) };
}

/// The `Key:` line of a /proc/PID/status text, whitespace-normalised.
fn status_fields(pid: libc::pid_t) -> HashMap<String, String> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| {
            (
                k.to_owned(),
                v.split_whitespace().collect::<Vec<_>>().join(" "),
            )
        })
        .collect()
}

/// Fork a child that runs `before` (as root), applies `prepared` and then
/// waits while the parent reads its /proc/PID/status. The child's exit code
/// is 0 if it also saw itself unprivileged (as escape tests will).
fn inspect_after_sequence(
    prepared: &Prepared,
    before: fn() -> bool,
) -> (Outcome, HashMap<String, String>) {
    let (ready_r, ready_w) = pipe();
    let (release_r, release_w) = pipe();
    let mut seen = HashMap::new();
    let outcome = in_child_with(
        || {
            close(ready_r);
            close(release_w);
            setsid();
            if !before() {
                return 90;
            }
            if let Err((step, _)) = prepared.apply_in_child() {
                return SETUP_FAILED + i32::from(step.code());
            }
            let own = caps::current_caps();
            let code = match (
                own,
                caps::no_new_privs(),
                identity::resuid(),
                identity::resgid(),
            ) {
                (Ok(c), Ok(true), Ok((65534, 65534, 65534)), Ok((65534, 65534, 65534)))
                    if c.all_zero() =>
                {
                    0
                }
                _ => 1,
            };
            // The descriptors are close-on-exec by default, still usable:
            // tell the parent to look, wait until it has.
            let mut byte = [0u8];
            // SAFETY: one-byte writes/reads on live pipe ends and buffer.
            unsafe {
                libc::write(ready_w, byte.as_ptr().cast(), 1);
                libc::read(release_r, byte.as_mut_ptr().cast(), 1);
            }
            code
        },
        |pid| {
            close(ready_w);
            close(release_r);
            let mut byte = [0u8];
            // SAFETY: reading one byte into a live buffer.
            let n = unsafe { libc::read(ready_r, byte.as_mut_ptr().cast(), 1) };
            if n == 1 {
                seen = status_fields(pid);
            }
            close(ready_r);
            close(release_w); // EOF releases the child
        },
    );
    (outcome, seen)
}

fn assert_unprivileged(outcome: Outcome, seen: &HashMap<String, String>) {
    assert_eq!(outcome, Outcome::Exited(0), "the child's own view");
    assert!(!seen.is_empty(), "child never reported ready");
    for key in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(seen[key], "0000000000000000", "{key}");
    }
    assert_eq!(seen["NoNewPrivs"], "1");
    assert_eq!(seen["Seccomp"], "2");
    assert_eq!(seen["Uid"], "65534 65534 65534 65534");
    assert_eq!(seen["Gid"], "65534 65534 65534 65534");
    assert_eq!(seen["Groups"], "65534");
}

#[test]
fn after_the_sequence_nobody_has_no_capabilities_and_no_new_privs() {
    let prepared = nobody(&plan(SeccompAction::Errno));
    let (outcome, seen) = inspect_after_sequence(&prepared, || true);
    assert_unprivileged(outcome, &seen);
}

// <linux/capability.h>, <linux/securebits.h>
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}
const SECBIT_NO_SETUID_FIXUP: libc::c_ulong = 1 << 2;
const SECBIT_KEEP_CAPS: libc::c_ulong = 1 << 4;
const CAP_NET_BIND_SERVICE: libc::c_ulong = 10;

/// As root: make the uid change keep every capability (securebits), put all
/// permitted capabilities in the inheritable set and one in the ambient set.
/// Then only the sequence's explicit steps can empty them.
fn hoard_capabilities() -> bool {
    let mut header = CapHeader {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: a v3 header and the two data words it describes, live on our stack.
    if unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut CapHeader,
            data.as_mut_ptr(),
        )
    } != 0
    {
        return false;
    }
    for d in &mut data {
        d.inheritable = d.permitted;
    }
    // SAFETY: as above; capset only reads `data`.
    if unsafe {
        libc::syscall(
            libc::SYS_capset,
            &mut header as *mut CapHeader,
            data.as_ptr(),
        )
    } != 0
    {
        return false;
    }
    let bits = SECBIT_NO_SETUID_FIXUP | SECBIT_KEEP_CAPS;
    // SAFETY: integer-only prctl options.
    unsafe {
        libc::prctl(
            libc::PR_SET_SECUREBITS,
            bits,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        ) == 0
            && libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_RAISE as libc::c_ulong,
                CAP_NET_BIND_SERVICE,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            ) == 0
    }
}

#[test]
fn capabilities_kept_across_the_uid_change_are_still_cleared() {
    // Without the sequence, a hoarding process keeps capabilities as nobody:
    // so the check below can fail.
    let hoarded = in_child(|| {
        if !hoard_capabilities() || identity::become_user(NOBODY, NOGROUP, &[NOGROUP]).is_err() {
            return 90;
        }
        match caps::current_caps() {
            Ok(c)
                if c.permitted != 0
                    && c.inheritable != 0
                    && c.ambient == 1 << CAP_NET_BIND_SERVICE =>
            {
                0
            }
            _ => 1,
        }
    });
    assert_eq!(
        hoarded,
        Outcome::Exited(0),
        "securebits should keep caps across setresuid"
    );

    let prepared = nobody(&plan(SeccompAction::Errno));
    let (outcome, seen) = inspect_after_sequence(&prepared, hoard_capabilities);
    assert_unprivileged(outcome, &seen);
}

#[test]
fn fork_and_threads_still_work() {
    let prepared = nobody(&plan(SeccompAction::Kill));
    let outcome = probe_after_sequence(&prepared, || {
        // fork: glibc uses clone without namespace flags.
        // SAFETY: the new process only calls _exit.
        match unsafe { libc::fork() } {
            -1 => return 1,
            // SAFETY: the new process leaves at once.
            0 => unsafe { libc::_exit(7) },
            pid => {
                let mut status = 0;
                // SAFETY: reaping our own child into a live int.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 7 {
                    return 2;
                }
            }
        }
        // Threads: glibc tries clone3, gets ENOSYS, falls back to clone.
        match std::thread::spawn(|| 42).join() {
            Ok(42) => 0,
            _ => 3,
        }
    });
    // Under the kill action, any refused call would have been SIGSYS.
    assert_eq!(outcome, Outcome::Exited(0));
}

#[test]
fn user_namespaces_are_refused_to_an_unprivileged_process() {
    // Unlike mount, unprivileged processes may create user namespaces: here
    // only the filter stands in the way.
    let mut off = plan(SeccompAction::Errno);
    off.enabled = false;
    let unfiltered = nobody(&off);
    let filtered = nobody(&plan(SeccompAction::Errno));
    let newuser = libc::CLONE_NEWUSER as u64;
    let unshare_user = move || raw(libc::SYS_unshare, [newuser, 0, 0, 0, 0, 0]);
    let clone_user = move || raw_clone(newuser);

    assert_eq!(
        probe_after_sequence(&unfiltered, clone_user),
        Outcome::Exited(0),
        "control: clone"
    );
    assert_eq!(
        probe_after_sequence(&unfiltered, unshare_user),
        Outcome::Exited(0),
        "control: unshare"
    );
    assert_eq!(probe_after_sequence(&filtered, clone_user), eperm());
    assert_eq!(probe_after_sequence(&filtered, unshare_user), eperm());
}

#[test]
fn denied_calls_stay_denied_after_the_full_sequence() {
    let prepared = nobody(&plan(SeccompAction::Errno));
    type Probe = fn() -> i32;
    let cases: [(&str, Probe); 6] = [
        ("unshare(CLONE_NEWNS)", || {
            raw(libc::SYS_unshare, [libc::CLONE_NEWNS as u64, 0, 0, 0, 0, 0])
        }),
        ("setns", || raw(libc::SYS_setns, [u64::MAX, 0, 0, 0, 0, 0])),
        ("ptrace(PTRACE_TRACEME)", || {
            raw(
                libc::SYS_ptrace,
                [libc::PTRACE_TRACEME as u64, 0, 0, 0, 0, 0],
            )
        }),
        ("io_uring_setup", || {
            raw(libc::SYS_io_uring_setup, [1, 1, 0, 0, 0, 0])
        }),
        ("keyctl", || raw(libc::SYS_keyctl, POISON)),
        ("ioctl(TIOCSTI)", || {
            raw(libc::SYS_ioctl, [u64::MAX, libc::TIOCSTI, 0, 0, 0, 0])
        }),
    ];
    for (name, probe) in cases {
        assert_eq!(probe_after_sequence(&prepared, probe), eperm(), "{name}");
    }
}

#[test]
fn allow_mount_reaches_the_kernel_which_finds_no_target() {
    // As nobody, mount fails either way; the errno tells who refused it:
    // seccomp says EPERM, the kernel looks the target up first (ENOENT).
    let mount = || {
        // SAFETY: valid C strings; the target does not exist.
        errno_of(
            unsafe {
                libc::mount(
                    c"none".as_ptr(),
                    c"/nonexistent/corral".as_ptr(),
                    c"tmpfs".as_ptr(),
                    0,
                    std::ptr::null(),
                )
            }
            .into(),
        )
    };
    let mut p = plan(SeccompAction::Errno);
    assert_eq!(probe_after_sequence(&nobody(&p), mount), eperm());
    p.allow = vec!["mount".into()];
    assert_eq!(
        probe_after_sequence(&nobody(&p), mount),
        Outcome::Exited(libc::ENOENT)
    );
}

#[test]
fn kill_action_kills_the_tenant_process() {
    let prepared = nobody(&plan(SeccompAction::Kill));
    assert_eq!(
        probe_after_sequence(&prepared, || raw(libc::SYS_bpf, POISON)),
        sigsys()
    );
}

/// Highest descriptor that may be open, for the scans below.
fn fd_scan_limit() -> i32 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a live, writable rlimit.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    lim.rlim_cur.max(lim.rlim_max).min(1 << 20) as i32
}

/// Open some descriptors without close-on-exec, one of them high.
fn open_extra_fds() -> bool {
    // SAFETY: duplicating stdio descriptors onto free numbers.
    unsafe { libc::dup(2) >= 3 && libc::dup2(1, 900) == 900 && libc::dup(0) >= 3 }
}

/// 0 if nothing >= 3 is open and 0–2 are, else the first offending fd.
fn only_stdio_open(limit: i32) -> i32 {
    // SAFETY: F_GETFD on a number only queries it.
    let open = |fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0;
    if let Some(fd) = (0..3).find(|&fd| !open(fd)) {
        return 100 + fd;
    }
    (3..limit)
        .find(|&fd| open(fd))
        .map_or(0, |fd| fd.clamp(3, 99))
}

#[test]
fn close_fds_from_3_leaves_nothing_open() {
    let limit = fd_scan_limit();
    // Directly...
    let outcome = in_child(|| {
        if !open_extra_fds() {
            return 98;
        }
        if fds::close_fds_from(3).is_err() {
            return 97;
        }
        only_stdio_open(limit)
    });
    assert_eq!(outcome, Outcome::Exited(0));
    // ...and as a step of the sequence.
    let prepared = nobody(&plan(SeccompAction::Errno)).with_fds(FdAction::Close { from: 3 });
    let outcome = in_child(|| {
        if !open_extra_fds() {
            return 98;
        }
        if let Err((step, _)) = prepared.apply_in_child() {
            return SETUP_FAILED + i32::from(step.code());
        }
        only_stdio_open(limit)
    });
    assert_eq!(outcome, Outcome::Exited(0));
    // The scan itself does see descriptors (so the check can fail).
    assert!(
        matches!(in_child(|| if open_extra_fds() { only_stdio_open(limit) } else { 98 }), Outcome::Exited(c) if (3..98).contains(&c))
    );
}

#[test]
fn cloexec_fds_from_3_marks_everything_above_stdio() {
    let limit = fd_scan_limit();
    let outcome = in_child(|| {
        if !open_extra_fds() {
            return 98;
        }
        if fds::cloexec_fds_from(3).is_err() {
            return 97;
        }
        // SAFETY: F_GETFD on a number only queries it.
        let flags = |fd| unsafe { libc::fcntl(fd, libc::F_GETFD) };
        if flags(900) != libc::FD_CLOEXEC {
            return 1;
        }
        if (3..limit).any(|fd| flags(fd) == 0) {
            return 2; // open and not close-on-exec
        }
        if flags(1) != 0 {
            return 3; // stdio must be left alone
        }
        0
    });
    assert_eq!(outcome, Outcome::Exited(0));
}

#[test]
fn a_failing_step_is_named() {
    let prepared = nobody(&plan(SeccompAction::Errno));
    // Already nobody: no CAP_SETPCAP to drop the bounding set with.
    let outcome = in_child(|| {
        if identity::become_user(NOBODY, NOGROUP, &[NOGROUP]).is_err() {
            return 1;
        }
        match prepared.apply_in_child() {
            Err((step, Errno::EPERM)) => SETUP_FAILED + i32::from(step.code()),
            _ => 2,
        }
    });
    assert_eq!(
        outcome,
        Outcome::Exited(SETUP_FAILED + i32::from(Step::DropBoundingSet.code()))
    );

    // Bounding set already empty (that step passes), but no CAP_SETGID left.
    let last = caps::last_cap().unwrap();
    let outcome = in_child(|| {
        if caps::drop_bounding_set(last).is_err() || identity::become_user(1, 1, &[1]).is_err() {
            return 1;
        }
        match prepared.apply_in_child() {
            Err((step, Errno::EPERM)) => SETUP_FAILED + i32::from(step.code()),
            _ => 2,
        }
    });
    assert_eq!(
        outcome,
        Outcome::Exited(SETUP_FAILED + i32::from(Step::Identity.code()))
    );
}

#[test]
fn children_are_waited_for_with_a_deadline() {
    // The harness itself: a child that hangs is killed and reported.
    let result = std::panic::catch_unwind(|| {
        in_child_with(
            || {
                // SAFETY: pause just waits for a signal.
                unsafe { libc::pause() };
                0
            },
            |pid| wait(pid, Duration::from_millis(200)),
        )
    });
    assert!(result.is_err(), "a hanging child must fail the test");
}
