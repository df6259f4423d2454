//! Capabilities and no_new_privs.
//!
//! [`last_cap`] is the *prepare* step (it reads a file); everything else that
//! changes state is allocation-free and async-signal-safe: one or a few raw
//! syscalls each. [`current_caps`] and friends read /proc and are for tests.

use std::io;
use std::path::Path;

use nix::errno::Errno;

use crate::error::SecurityError;
use crate::sys::{check, prctl};

const CAP_LAST_CAP: &str = "/proc/sys/kernel/cap_last_cap";

/// The highest capability number the running kernel knows (40 on 6.x).
///
/// Read from /proc/sys/kernel/cap_last_cap; where /proc is not mounted, found
/// by asking the kernel about each bounding-set bit until it says EINVAL.
pub fn last_cap() -> Result<u32, SecurityError> {
    match std::fs::read_to_string(CAP_LAST_CAP) {
        Ok(text) => text.trim().parse().map_err(|_| SecurityError::Io {
            path: CAP_LAST_CAP.into(),
            source: io::Error::new(
                io::ErrorKind::InvalidData,
                format!("not a number: {text:?}"),
            ),
        }),
        Err(source) => last_cap_by_probing().ok_or(SecurityError::Io {
            path: CAP_LAST_CAP.into(),
            source,
        }),
    }
}

/// PR_CAPBSET_READ answers EINVAL for capabilities the kernel does not know.
fn last_cap_by_probing() -> Option<u32> {
    (0..64u32)
        .take_while(|&cap| bounding_has(cap).is_ok())
        .last()
}

/// Whether capability `cap` is in the bounding set.
fn bounding_has(cap: u32) -> Result<bool, Errno> {
    prctl(libc::PR_CAPBSET_READ, cap.into(), 0).map(|present| present == 1)
}

/// Drop capabilities `0..=last_cap` from the bounding set, so nothing this
/// process execs can gain them back (setuid-root binaries, file caps).
///
/// Needs CAP_SETPCAP for each capability still present; ones already absent
/// are skipped, so an already-empty set needs no privilege. Allocation-free.
pub fn drop_bounding_set(last_cap: u32) -> Result<(), Errno> {
    for cap in 0..=last_cap {
        if bounding_has(cap)? {
            prctl(libc::PR_CAPBSET_DROP, cap.into(), 0)?;
        }
    }
    Ok(())
}

/// Empty the ambient set. Allocation-free; needs no privilege.
pub fn clear_ambient() -> Result<(), Errno> {
    prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
        0,
    )
    .map(drop)
}

// <linux/capability.h>
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapUserHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapUserData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Empty the effective, permitted and inheritable sets of this thread with
/// one `capset(2)` (version 3: two 32-bit words per set). Lowering is always
/// allowed. This also empties the ambient set, which must stay a subset of
/// permitted ∩ inheritable. Allocation-free.
pub fn clear_all() -> Result<(), Errno> {
    let mut header = CapUserHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let zero = CapUserData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    };
    let data = [zero; 2];
    // SAFETY: both pointers are to live, correctly laid-out stack values for
    // the duration of the call: a v3 header (which the kernel may write back
    // to) and the two data words v3 expects, which it only reads.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_capset,
            &mut header as *mut CapUserHeader,
            data.as_ptr(),
        )
    };
    check(ret).map(drop)
}

/// Set no_new_privs: execve will never grant privileges again (setuid bits
/// and file capabilities are ignored), and unprivileged seccomp becomes
/// possible. It cannot be unset. Allocation-free.
pub fn set_no_new_privs() -> Result<(), Errno> {
    prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0).map(drop)
}

/// Whether no_new_privs is set on the calling thread. Allocation-free.
pub fn no_new_privs() -> Result<bool, Errno> {
    prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0).map(|v| v == 1)
}

/// The five capability sets of a process, as bit masks (bit n = capability n).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CapSets {
    pub inheritable: u64,
    pub permitted: u64,
    pub effective: u64,
    pub bounding: u64,
    pub ambient: u64,
}

impl CapSets {
    /// Parse the `CapInh`, `CapPrm`, `CapEff`, `CapBnd` and `CapAmb` lines of
    /// a /proc/PID/status text; all five must be there.
    pub fn parse(status: &str) -> io::Result<CapSets> {
        let field = |key: &str| -> io::Result<u64> {
            let value = status
                .lines()
                .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
                .ok_or_else(|| invalid(format!("no {key} line")))?;
            u64::from_str_radix(value.trim(), 16).map_err(|_| invalid(format!("{key}: {value:?}")))
        };
        Ok(CapSets {
            inheritable: field("CapInh")?,
            permitted: field("CapPrm")?,
            effective: field("CapEff")?,
            bounding: field("CapBnd")?,
            ambient: field("CapAmb")?,
        })
    }

    /// True when every set is empty.
    pub fn all_zero(&self) -> bool {
        *self == CapSets::default()
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// This process's capability sets, from /proc/self/status. For tests (escape
/// tests run it inside a sandbox); it allocates, so not for the child setup.
pub fn current_caps() -> io::Result<CapSets> {
    caps_at(Path::new("/proc/self/status"))
}

/// Another process's capability sets, from /proc/PID/status.
pub fn caps_of(pid: libc::pid_t) -> io::Result<CapSets> {
    caps_at(Path::new(&format!("/proc/{pid}/status")))
}

fn caps_at(path: &Path) -> io::Result<CapSets> {
    CapSets::parse(&std::fs::read_to_string(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tcat\nUmask:\t0022\nCapInh:\t0000000000000000\n\
        CapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\nCapBnd:\t000001ffffffffff\n\
        CapAmb:\t0000000000000400\nNoNewPrivs:\t0\n";

    #[test]
    fn parses_the_five_sets() {
        let caps = CapSets::parse(STATUS).unwrap();
        assert_eq!(caps.inheritable, 0);
        assert_eq!(caps.permitted, 0x1ff_ffff_ffff);
        assert_eq!(caps.effective, 0x1ff_ffff_ffff);
        assert_eq!(caps.bounding, 0x1ff_ffff_ffff);
        assert_eq!(caps.ambient, 0x400);
        assert!(!caps.all_zero());
        assert!(CapSets::default().all_zero());
    }

    #[test]
    fn missing_or_garbled_lines_are_errors() {
        assert!(CapSets::parse(&STATUS.replace("CapAmb", "CapXyz")).is_err());
        assert!(CapSets::parse(&STATUS.replace("0000000000000400", "zz")).is_err());
        // `CapBndX:` must not be taken for `CapBnd:`.
        assert!(CapSets::parse(&STATUS.replace("CapBnd:", "CapBndX:")).is_err());
    }

    #[test]
    fn last_cap_from_proc_agrees_with_probing() {
        let from_proc = last_cap().unwrap();
        assert!(from_proc >= 37, "kernel older than 5.9? {from_proc}");
        assert_eq!(last_cap_by_probing(), Some(from_proc));
    }

    #[test]
    fn current_caps_reads_this_process() {
        let caps = current_caps().unwrap();
        let bits = last_cap().unwrap() + 1;
        // Whoever runs the tests, the bounding set has only known caps.
        assert_eq!(caps.bounding >> bits, 0);
        assert_eq!(
            caps_of(std::process::id() as libc::pid_t).unwrap().bounding,
            caps.bounding
        );
    }
}
