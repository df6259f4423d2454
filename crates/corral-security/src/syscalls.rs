//! System call names → numbers for the architecture corral is built for.
//!
//! Profiles name syscalls, the filter needs numbers: corral carries the
//! table itself (libc's `SYS_*` constants have no names to look up).

#[cfg(target_arch = "x86_64")]
mod x86_64;

#[cfg(target_arch = "x86_64")]
use x86_64::TABLE;

/// No table for other architectures yet: every name is unknown there, and
/// [`crate::seccomp::build`] refuses to build a filter.
#[cfg(not(target_arch = "x86_64"))]
const TABLE: &[(&str, i64)] = &[];

/// The number of the system call `name` on this architecture, if it has one.
pub fn number(name: &str) -> Option<i64> {
    TABLE.iter().find(|(n, _)| *n == name).map(|&(_, nr)| nr)
}

/// The name of system call number `nr` on this architecture, if it has one.
pub fn name(nr: i64) -> Option<&'static str> {
    TABLE
        .binary_search_by_key(&nr, |&(_, n)| n)
        .ok()
        .map(|i| TABLE[i].0)
}

/// Every (name, number) this architecture's table knows, by number.
pub fn all() -> impl Iterator<Item = (&'static str, i64)> {
    TABLE.iter().copied()
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn table_is_sorted_by_number_and_names_are_unique() {
        let mut names = HashSet::new();
        let mut last = -1;
        for (name, nr) in all() {
            assert!(nr > last, "{name} ({nr}) is out of order after {last}");
            assert!(names.insert(name), "{name} appears twice");
            last = nr;
        }
        assert!(names.len() > 370, "table looks truncated: {}", names.len());
    }

    #[test]
    fn numbers_agree_with_libc() {
        // libc's constants come from the kernel headers independently of this
        // table: a typo on either side shows up here.
        let pairs = [
            ("read", libc::SYS_read),
            ("clone", libc::SYS_clone),
            ("ioctl", libc::SYS_ioctl),
            ("mount", libc::SYS_mount),
            ("unshare", libc::SYS_unshare),
            ("setns", libc::SYS_setns),
            ("ptrace", libc::SYS_ptrace),
            ("bpf", libc::SYS_bpf),
            ("io_uring_setup", libc::SYS_io_uring_setup),
            ("clone3", libc::SYS_clone3),
            ("mount_setattr", libc::SYS_mount_setattr),
            ("getppid", libc::SYS_getppid),
            ("mseal", libc::SYS_mseal),
        ];
        for (name, nr) in pairs {
            assert_eq!(number(name), Some(nr), "{name}");
            assert_eq!(super::name(nr), Some(name), "{nr}");
        }
    }

    #[test]
    fn unknown_names_and_numbers() {
        assert_eq!(number("mout"), None);
        assert_eq!(number(""), None);
        assert_eq!(name(400), None); // 387..=423 are never used on x86_64
        assert_eq!(name(-1), None);
    }
}
