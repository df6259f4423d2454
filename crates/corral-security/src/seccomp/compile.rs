//! Resolved rules → a seccomp BPF program, compiled before fork.
//!
//! ```text
//!   ld  arch ; jeq AUDIT_ARCH_X86_64 ? next : KILL_PROCESS     i386 (int 0x80) ABI
//!   ld  nr
//!   jeq ioctl ? <ld arg 1; the request's checks; ret> : next   the calls with an
//!   jeq clone ? <...> : next ...                               argument rule, first
//!   <a binary search over number ranges, each ending in a ret>
//! ```
//!
//! The search tree covers every 32-bit number: the table's ranges of
//! allowed calls (`ALLOW`), denied ones (the plan's action), numbers the
//! table does not know and everything above its highest number (`ENOSYS`,
//! whatever the plan's action, like runc's stub for syscalls newer than
//! Docker's profile: a libc that tries a newer kernel's call falls back as
//! on an older kernel), and x32 numbers (bit 30, same audit arch: killed,
//! like the i386 ABI — nothing a tenant runs legitimately switches ABI).
//!
//! Why corral compiles this itself instead of using seccompiler (which it
//! used before): seccompiler emits one linear chain per call, 1,566
//! instructions for the default allow list. Installing a filter makes the
//! kernel emulate it once per syscall number and architecture to fill its
//! action cache (`seccomp_cache_prepare`), so a linear chain costs
//! O(calls × length): measured 1.6 ms per `seccomp(SET_MODE_FILTER)` on
//! this VM, paid by every process corral starts (each CGI request, each
//! `corral run`). The tree is a few hundred instructions and any number
//! reaches its `ret` in about ten.
//!
//! Only the prefix's argument blocks read arguments. Every instruction on
//! the path of any other call looks at the architecture and the number
//! alone, so the kernel's action cache (5.11+) marks allowed calls
//! always-allowed and never runs the program for them; the calls with an
//! argument rule are checked first, so the program they do run is short.

use std::collections::BTreeMap;

use corral_profile::plan::SeccompAction;
use libc::sock_filter;

use super::rules::Rule;
use crate::error::SecurityError;
use crate::syscalls;

// <linux/filter.h>: instruction classes and modes.
const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JA: u16 = 0x05; // BPF_JMP | BPF_JA
const BPF_JEQ_K: u16 = 0x05 | 0x10; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_JGE_K: u16 = 0x05 | 0x30; // BPF_JMP | BPF_JGE | BPF_K
const BPF_JSET_K: u16 = 0x05 | 0x40; // BPF_JMP | BPF_JSET | BPF_K
const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K
                             // <linux/seccomp.h>: offsets in struct seccomp_data, return values.
const DATA_NR: u32 = 0;
const DATA_ARCH: u32 = 4;
const DATA_ARGS: u32 = 16;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_ENOSYS: u32 = RET_ERRNO | libc::ENOSYS as u32;
const RET_ALLOW: u32 = 0x7fff_0000;
// <linux/audit.h>: EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE.
const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
/// x32 system calls are x86_64 calls with this bit set in the number.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
/// The kernel's BPF_MAXINSNS.
const MAX_INSNS: usize = 4096;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

fn number(nr: i64) -> Result<u32, SecurityError> {
    u32::try_from(nr).map_err(|_| SecurityError::SyscallNumber(nr))
}

/// An argument value or mask: the kernel reads these arguments as 32-bit
/// values, so only the low half may decide. Comparing 64 bits would refuse
/// `read`-like calls with junk in the upper half, or let `TIOCSTI | 1 <<
/// 32` through; so the program loads the low word only, and a rule value
/// that needs more bits is a mistake in the rules.
fn low_word(nr: i64, value: u64) -> Result<u32, SecurityError> {
    u32::try_from(value).map_err(|_| SecurityError::ArgumentValue { nr, value })
}

/// A forward jump offset, which classic BPF keeps in 8 bits.
fn offset(n: usize) -> Result<u8, SecurityError> {
    u8::try_from(n).map_err(|_| SecurityError::FilterTooLarge(n))
}

/// How a range of numbers ends in the search tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Leaf {
    Allow,
    /// The plan's action.
    Deny,
    Enosys,
    /// Killed whatever the plan's action (x32).
    Kill,
}

/// The ranges `[lo, next range's lo)` of the search tree, in order, with
/// equal neighbours merged; the first starts at 0 and the last runs to
/// u32::MAX. Calls with an argument rule never reach the tree: they take
/// their neighbour's leaf, which keeps the tree small.
fn ranges(rules: &BTreeMap<i64, Rule>) -> Result<Vec<(u32, Leaf)>, SecurityError> {
    let known: std::collections::BTreeSet<u32> = syscalls::all()
        .map(|(_, nr)| number(nr))
        .collect::<Result<_, _>>()?;
    let max = *known
        .last()
        .ok_or(SecurityError::UnsupportedArch(std::env::consts::ARCH))?;
    let mut out: Vec<(u32, Leaf)> = Vec::new();
    let mut push = |lo: u32, leaf: Option<Leaf>| {
        let leaf = leaf.unwrap_or_else(|| out.last().map_or(Leaf::Deny, |l| l.1));
        if out.last().map(|l| l.1) != Some(leaf) {
            out.push((lo, leaf));
        }
    };
    for nr in 0..=max {
        let leaf = match rules.get(&i64::from(nr)) {
            Some(Rule::Always) => Some(Leaf::Allow),
            Some(Rule::Enosys) => Some(Leaf::Enosys),
            Some(_) => None, // the prefix answers it
            None if known.contains(&nr) => Some(Leaf::Deny),
            None => Some(Leaf::Enosys),
        };
        push(nr, leaf);
    }
    push(max + 1, Some(Leaf::Enosys));
    push(X32_SYSCALL_BIT, Some(Leaf::Kill));
    Ok(out)
}

/// A binary search over `ranges` (number in the accumulator).
fn tree(
    ranges: &[(u32, Leaf)],
    deny: u32,
    out: &mut Vec<sock_filter>,
) -> Result<(), SecurityError> {
    if let [(_, leaf)] = ranges {
        out.push(stmt(
            BPF_RET_K,
            match leaf {
                Leaf::Allow => RET_ALLOW,
                Leaf::Deny => deny,
                Leaf::Enosys => RET_ENOSYS,
                Leaf::Kill => RET_KILL_PROCESS,
            },
        ));
        return Ok(());
    }
    let (left, right) = ranges.split_at(ranges.len() / 2);
    let mut l = Vec::new();
    tree(left, deny, &mut l)?;
    let split = right[0].0;
    match u8::try_from(l.len()) {
        // jge split ? (skip the left half) : left half
        Ok(len) => out.push(jump(BPF_JGE_K, split, len, 0)),
        // Too far for an 8-bit offset: through an unconditional jump.
        Err(_) => {
            out.push(jump(BPF_JGE_K, split, 0, 1));
            out.push(stmt(
                BPF_JA,
                u32::try_from(l.len()).map_err(|_| SecurityError::FilterTooLarge(l.len()))?,
            ));
        }
    }
    out.extend(l);
    tree(right, deny, out)
}

/// The check of one call with an argument rule: loads the argument and
/// returns; `None` for rules without arguments.
fn argument_block(
    nr: i64,
    rule: Rule,
    deny: u32,
) -> Result<Option<Vec<sock_filter>>, SecurityError> {
    let load = |arg: u8| stmt(BPF_LD_W_ABS, DATA_ARGS + 8 * u32::from(arg));
    // ld arg; jeq v1 ? hit : next; ...; ret miss; ret hit
    let any_of = |arg: u8, values: &[u64], hit: u32, miss: u32| {
        let mut b = vec![load(arg)];
        for (i, &v) in values.iter().enumerate() {
            b.push(jump(
                BPF_JEQ_K,
                low_word(nr, v)?,
                offset(values.len() - i)?,
                0,
            ));
        }
        b.push(stmt(BPF_RET_K, miss));
        b.push(stmt(BPF_RET_K, hit));
        Ok::<_, SecurityError>(b)
    };
    Ok(Some(match rule {
        Rule::Always | Rule::Enosys => return Ok(None),
        // ld arg; jset mask ? deny : allow
        Rule::NoFlags { arg, mask } => vec![
            load(arg),
            jump(BPF_JSET_K, low_word(nr, mask)?, 0, 1),
            stmt(BPF_RET_K, deny),
            stmt(BPF_RET_K, RET_ALLOW),
        ],
        Rule::OneOf { arg, values } => any_of(arg, values, RET_ALLOW, deny)?,
        Rule::NoneOf { arg, values } => any_of(arg, values, deny, RET_ALLOW)?,
    }))
}

/// The calls with an argument rule in the order the prefix checks them:
/// the ones a web request makes most first.
fn argument_order(nr: i64) -> (usize, i64) {
    let hot = [libc::SYS_ioctl, libc::SYS_clone, libc::SYS_socket];
    (hot.iter().position(|&h| h == nr).unwrap_or(hot.len()), nr)
}

/// Compile `rules` (syscall number → which calls pass) for x86_64.
pub(crate) fn compile(
    rules: &BTreeMap<i64, Rule>,
    action: SeccompAction,
) -> Result<Vec<sock_filter>, SecurityError> {
    let deny = match action {
        SeccompAction::Errno => RET_ERRNO | libc::EPERM as u32,
        SeccompAction::Kill => RET_KILL_PROCESS,
    };
    let mut program = vec![
        stmt(BPF_LD_W_ABS, DATA_ARCH),
        jump(BPF_JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        stmt(BPF_RET_K, RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, DATA_NR),
    ];
    let mut checked: Vec<(i64, Rule)> = rules.iter().map(|(&nr, &r)| (nr, r)).collect();
    checked.sort_by_key(|&(nr, _)| argument_order(nr));
    for (nr, rule) in checked {
        if let Some(block) = argument_block(nr, rule, deny)? {
            program.push(jump(BPF_JEQ_K, number(nr)?, 0, offset(block.len())?));
            program.extend(block);
        }
    }
    tree(&ranges(rules)?, deny, &mut program)?;
    if program.len() > MAX_INSNS {
        return Err(SecurityError::FilterTooLarge(program.len()));
    }
    Ok(program)
}

#[cfg(test)]
pub(crate) mod interp {
    //! A classic-BPF interpreter for the instructions [`compile`] emits, so
    //! the compiled logic is tested without the kernel.
    use super::*;

    /// What the program returns for a call (nr, arch, args).
    pub(crate) fn run(program: &[sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        trace(program, arch, nr, Some(args)).0
    }

    /// What the program returns and how many instructions it executed.
    /// With `args` None, an argument load ends the run with None: the
    /// call's answer depends on its arguments, the way the kernel's action
    /// cache emulation (`seccomp_is_const_allow`) gives up.
    pub(crate) fn trace(
        program: &[sock_filter],
        arch: u32,
        nr: u32,
        args: Option<[u64; 6]>,
    ) -> (u32, usize, bool) {
        let mut read_args = false;
        let mut word = |offset: u32| -> Option<u32> {
            Some(match offset {
                0 => nr,
                4 => arch,
                16..=63 => {
                    read_args = true;
                    // Little-endian: the low half of each u64 comes first.
                    let arg = args?[((offset - 16) / 8) as usize];
                    match (offset - 16) % 8 {
                        0 => arg as u32,
                        4 => (arg >> 32) as u32,
                        _ => panic!("unaligned load at {offset}"),
                    }
                }
                _ => panic!("load from offset {offset}"),
            })
        };
        let (mut acc, mut pc, mut steps) = (0u32, 0usize, 0usize);
        loop {
            let insn = &program[pc];
            pc += 1;
            steps += 1;
            match insn.code {
                0x20 => match word(insn.k) {
                    Some(w) => acc = w, // ld w abs
                    None => return (u32::MAX, steps, true),
                },
                0x54 => acc &= insn.k,                     // alu and k
                0x05 => pc += insn.k as usize,             // ja
                0x06 => return (insn.k, steps, read_args), // ret k
                code => {
                    let taken = match code {
                        0x15 => acc == insn.k,     // jeq
                        0x25 => acc > insn.k,      // jgt
                        0x35 => acc >= insn.k,     // jge
                        0x45 => acc & insn.k != 0, // jset
                        _ => panic!("unexpected BPF opcode {code:#x}"),
                    };
                    pc += usize::from(if taken { insn.jt } else { insn.jf });
                }
            }
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::interp::run;
    use super::*;
    use crate::seccomp::rules::{resolve, Rule};
    use corral_profile::plan::SeccompPlan;

    const ALLOW: u32 = 0x7fff_0000;
    const EPERM: u32 = RET_ERRNO | libc::EPERM as u32;
    const ENOSYS: u32 = RET_ERRNO | libc::ENOSYS as u32;
    const AUDIT_ARCH_I386: u32 = 0x4000_0003;

    fn program(action: SeccompAction) -> Vec<sock_filter> {
        let plan = SeccompPlan {
            action,
            ..SeccompPlan::default_policy()
        };
        compile(&resolve(&plan).unwrap(), action).unwrap()
    }

    fn call(p: &[sock_filter], nr: libc::c_long, args: [u64; 6]) -> u32 {
        run(p, AUDIT_ARCH_X86_64, nr as u32, args)
    }

    #[test]
    fn allowed_calls_pass_and_the_rest_get_the_action() {
        let p = program(SeccompAction::Errno);
        for nr in [
            libc::SYS_read,
            libc::SYS_getppid,
            libc::SYS_execve,
            libc::SYS_chroot,
            libc::SYS_rseq,
            libc::SYS_fchmodat2,
        ] {
            assert_eq!(call(&p, nr, [0; 6]), ALLOW, "{nr}");
        }
        for name in [
            "mount",
            "unshare",
            "setns",
            "bpf",
            "ptrace",
            "kcmp",
            "pidfd_getfd",
            "process_madvise",
            "fanotify_init",
            "mbind",
            "get_mempolicy",
            "uselib",
            "ustat",
            "sysfs",
            "statmount",
            "listmount",
            "open_tree_attr",
            "listns",
        ] {
            let nr = crate::syscalls::number(name).unwrap();
            assert_eq!(call(&p, nr, [0; 6]), EPERM, "{name}");
        }
        let k = program(SeccompAction::Kill);
        assert_eq!(call(&k, libc::SYS_mount, [0; 6]), RET_KILL_PROCESS);
        assert_eq!(call(&k, libc::SYS_read, [0; 6]), ALLOW);
    }

    #[test]
    fn every_table_entry_gets_what_the_rules_say() {
        let p = program(SeccompAction::Errno);
        let rules = resolve(&SeccompPlan::default_policy()).unwrap();
        for (name, nr) in crate::syscalls::all() {
            let got = call(&p, nr, [0; 6]);
            let want = match rules.get(&nr) {
                None => EPERM,
                Some(Rule::Enosys) => ENOSYS,
                // All-zero arguments: family 0 (AF_UNSPEC) is refused;
                // persona 0, clone flags 0 and ioctl request 0 pass.
                Some(Rule::OneOf { values, .. }) if !values.contains(&0) => EPERM,
                Some(_) => ALLOW,
            };
            assert_eq!(got, want, "{name} ({nr})");
        }
    }

    #[test]
    fn unknown_numbers_are_enosys_whatever_the_action() {
        for action in [SeccompAction::Errno, SeccompAction::Kill] {
            let p = program(action);
            let denied = match action {
                SeccompAction::Errno => EPERM,
                SeccompAction::Kill => RET_KILL_PROCESS,
            };
            let max = crate::syscalls::all().last().unwrap().1 as u32;
            for nr in [max + 1, max + 2, 500, 1000, 0x3fff_ffff, 337, 400, 423] {
                assert_eq!(run(&p, AUDIT_ARCH_X86_64, nr, [0; 6]), ENOSYS, "{nr}");
            }
            // The edges of x86_64's gap are real system calls.
            assert_eq!(call(&p, libc::SYS_pidfd_send_signal, [0; 6]), ALLOW);
            assert_eq!(run(&p, AUDIT_ARCH_X86_64, 336, [0; 6]), denied, "uprobe");
            assert_eq!(
                run(&p, AUDIT_ARCH_X86_64, max, [0; 6]),
                denied,
                "the highest known"
            );
        }
    }

    #[test]
    fn socket_only_for_web_families() {
        let p = program(SeccompAction::Errno);
        for family in [
            libc::AF_UNIX,
            libc::AF_INET,
            libc::AF_INET6,
            libc::AF_NETLINK,
        ] {
            let f = family as u64;
            assert_eq!(
                call(&p, libc::SYS_socket, [f, 1, 0, 0, 0, 0]),
                ALLOW,
                "{family}"
            );
            assert_eq!(call(&p, libc::SYS_socketpair, [f, 1, 0, 0, 0, 0]), ALLOW);
            // The upper half of the register is not the family.
            assert_eq!(
                call(&p, libc::SYS_socket, [f | 1 << 32, 1, 0, 0, 0, 0]),
                ALLOW
            );
        }
        for family in [
            libc::AF_VSOCK,
            libc::AF_PACKET,
            libc::AF_ALG,
            libc::AF_KEY,
            libc::AF_BLUETOOTH,
            libc::AF_TIPC,
            libc::AF_RDS,
            libc::AF_UNSPEC,
        ] {
            let f = family as u64;
            assert_eq!(
                call(&p, libc::SYS_socket, [f, 1, 0, 0, 0, 0]),
                EPERM,
                "{family}"
            );
            assert_eq!(call(&p, libc::SYS_socketpair, [f, 1, 0, 0, 0, 0]), EPERM);
        }
        // The family is argument 0, not the type.
        let vsock = libc::AF_VSOCK as u64;
        assert_eq!(call(&p, libc::SYS_socket, [1, vsock, 0, 0, 0, 0]), ALLOW);
    }

    #[test]
    fn personality_only_with_dockers_values() {
        let p = program(SeccompAction::Errno);
        let persona = |v: u64| call(&p, libc::SYS_personality, [v, 0, 0, 0, 0, 0]);
        for v in [0u64, 8, 0x2_0000, 0x2_0008, 0xffff_ffff] {
            assert_eq!(persona(v), ALLOW, "{v:#x}");
        }
        // ADDR_NO_RANDOMIZE alone and with PER_LINUX32, READ_IMPLIES_EXEC,
        // a foreign persona (PER_SVR4 = 0x10 | STICKY_TIMEOUTS...).
        for v in [
            0x4_0000u64,
            0x4_0008,
            0x40_0000,
            0x0400_0010,
            1,
            0xffff_fffe,
        ] {
            assert_eq!(persona(v), EPERM, "{v:#x}");
        }
    }

    #[test]
    fn clone_is_denied_only_with_namespace_flags() {
        let p = program(SeccompAction::Errno);
        let sigchld = libc::SIGCHLD as u64;
        let thread = (libc::CLONE_VM
            | libc::CLONE_FS
            | libc::CLONE_FILES
            | libc::CLONE_SIGHAND
            | libc::CLONE_THREAD
            | libc::CLONE_SYSVSEM
            | libc::CLONE_SETTLS
            | libc::CLONE_PARENT_SETTID
            | libc::CLONE_CHILD_CLEARTID) as u64;
        assert_eq!(call(&p, libc::SYS_clone, [sigchld, 0, 0, 0, 0, 0]), ALLOW);
        assert_eq!(call(&p, libc::SYS_clone, [thread, 0, 0, 0, 0, 0]), ALLOW);
        let mask = super::super::rules::CLONE_NEW_MASK;
        for flag in (0..64).map(|b| 1u64 << b).filter(|f| mask & f != 0) {
            assert_eq!(
                call(&p, libc::SYS_clone, [flag | sigchld, 0, 0, 0, 0, 0]),
                EPERM,
                "{flag:#x}"
            );
            assert_eq!(
                call(&p, libc::SYS_clone, [flag | thread, 0, 0, 0, 0, 0]),
                EPERM,
                "{flag:#x}"
            );
        }
        // The flag in another argument is not the flags word.
        assert_eq!(
            call(
                &p,
                libc::SYS_clone,
                [sigchld, libc::CLONE_NEWUSER as u64, 0, 0, 0, 0]
            ),
            ALLOW
        );
    }

    #[test]
    fn clone3_is_enosys_whatever_the_action() {
        for action in [SeccompAction::Errno, SeccompAction::Kill] {
            assert_eq!(call(&program(action), libc::SYS_clone3, [0; 6]), ENOSYS);
        }
    }

    #[test]
    fn ioctl_tty_injection_is_denied_on_the_low_32_bits() {
        let p = program(SeccompAction::Errno);
        let tiocsti = libc::TIOCSTI;
        assert_eq!(call(&p, libc::SYS_ioctl, [0, tiocsti, 0, 0, 0, 0]), EPERM);
        assert_eq!(
            call(&p, libc::SYS_ioctl, [0, tiocsti | 1 << 32, 0, 0, 0, 0]),
            EPERM
        );
        assert_eq!(
            call(&p, libc::SYS_ioctl, [0, libc::TIOCLINUX, 0, 0, 0, 0]),
            EPERM
        );
        assert_eq!(
            call(&p, libc::SYS_ioctl, [0, libc::FIONREAD, 0, 0, 0, 0]),
            ALLOW
        );
        assert_eq!(call(&p, libc::SYS_ioctl, [tiocsti, 0, 0, 0, 0, 0]), ALLOW);
    }

    #[test]
    fn foreign_abis_are_killed() {
        let p = program(SeccompAction::Errno);
        // x32: the x86_64 audit arch with the x32 bit in the number.
        let x32_getpid = X32_SYSCALL_BIT | libc::SYS_getpid as u32;
        assert_eq!(
            run(&p, AUDIT_ARCH_X86_64, x32_getpid, [0; 6]),
            RET_KILL_PROCESS
        );
        assert_eq!(
            run(&p, AUDIT_ARCH_X86_64, X32_SYSCALL_BIT | 165, [0; 6]),
            RET_KILL_PROCESS
        );
        // i386 via int 0x80: 20 is getpid there.
        assert_eq!(run(&p, AUDIT_ARCH_I386, 20, [0; 6]), RET_KILL_PROCESS);
    }

    #[test]
    fn program_fits_the_kernel_limit() {
        let p = program(SeccompAction::Errno);
        assert!(p.len() < 2048, "{} instructions", p.len());
    }

    /// The kernel fills its action cache by emulating the program for
    /// every number: each allowed call without an argument rule must reach
    /// `ALLOW` through number and architecture alone (else the program runs
    /// on every such call), and every number must get its answer in a few
    /// instructions (else installing the filter, which every spawn does,
    /// costs milliseconds: a linear chain measured 1.6 ms).
    #[test]
    fn allowed_calls_are_cacheable_and_every_path_is_short() {
        use super::interp::trace;
        let p = program(SeccompAction::Errno);
        let rules = resolve(&SeccompPlan::default_policy()).unwrap();
        let mut longest = 0;
        for (name, nr) in crate::syscalls::all() {
            let (ret, steps, read_args) = trace(&p, AUDIT_ARCH_X86_64, nr as u32, None);
            match rules.get(&nr) {
                Some(Rule::Always) => {
                    assert_eq!((ret, read_args), (ALLOW, false), "{name} must be cacheable")
                }
                Some(Rule::Enosys) | None => assert!(!read_args, "{name}"),
                Some(_) => assert!(read_args, "{name} has an argument rule"),
            }
            longest = longest.max(steps);
        }
        for nr in [500u32, 0x3fff_ffff, 0x4000_0000, u32::MAX] {
            longest = longest.max(trace(&p, AUDIT_ARCH_X86_64, nr, None).1);
        }
        assert!(longest <= 40, "a path of {longest} instructions");
        assert!(p.len() < 1000, "{} instructions", p.len());
        // ioctl, the argument-checked call a web request makes most, is
        // checked first.
        let (_, ioctl_steps, _) =
            trace(&p, AUDIT_ARCH_X86_64, libc::SYS_ioctl as u32, Some([0; 6]));
        assert!(ioctl_steps <= 12, "ioctl runs {ioctl_steps} instructions");
    }

    #[test]
    fn x32_and_foreign_architectures_are_killed_whatever_the_action() {
        for action in [SeccompAction::Errno, SeccompAction::Kill] {
            let p = program(action);
            for nr in [
                X32_SYSCALL_BIT,
                X32_SYSCALL_BIT | libc::SYS_read as u32,
                u32::MAX,
            ] {
                assert_eq!(
                    run(&p, AUDIT_ARCH_X86_64, nr, [0; 6]),
                    RET_KILL_PROCESS,
                    "{nr:#x}"
                );
            }
            assert_eq!(run(&p, AUDIT_ARCH_I386, 3, [0; 6]), RET_KILL_PROCESS);
        }
    }

    /// The program corral compiled until 2026-11-25 (before the search
    /// tree): a prefix for the architecture, x32 and unknown numbers, then
    /// seccompiler's chain of one rule set per allowed call. The reference
    /// the tree must agree with.
    fn seccompiler_reference(
        rules: &BTreeMap<i64, Rule>,
        action: SeccompAction,
    ) -> Vec<sock_filter> {
        use seccompiler::{
            BpfProgram, SeccompAction as Action, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
            SeccompFilter, SeccompRule, TargetArch,
        };
        let cond = |arg: u8, op, v: u64| {
            SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, v).unwrap()
        };
        let mut program = vec![
            stmt(BPF_LD_W_ABS, DATA_ARCH),
            jump(BPF_JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
            stmt(BPF_RET_K, RET_KILL_PROCESS),
            stmt(BPF_LD_W_ABS, DATA_NR),
            jump(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1),
            stmt(BPF_RET_K, RET_KILL_PROCESS),
        ];
        // Unknown numbers: above the table, and its gaps.
        const BPF_JGT_K: u16 = 0x05 | 0x20;
        let all: Vec<i64> = crate::syscalls::all().map(|(_, nr)| nr).collect();
        program.push(jump(BPF_JGT_K, *all.last().unwrap() as u32, 0, 1));
        program.push(stmt(BPF_RET_K, RET_ENOSYS));
        for w in all.windows(2) {
            if w[1] > w[0] + 1 {
                program.push(jump(BPF_JGE_K, (w[0] + 1) as u32, 0, 2));
                program.push(jump(BPF_JGT_K, (w[1] - 1) as u32, 1, 0));
                program.push(stmt(BPF_RET_K, RET_ENOSYS));
            }
        }
        let mut chains = BTreeMap::new();
        for (&nr, rule) in rules {
            let chain = match *rule {
                Rule::Enosys => {
                    program.push(jump(BPF_JEQ_K, nr as u32, 0, 1));
                    program.push(stmt(BPF_RET_K, RET_ENOSYS));
                    continue;
                }
                Rule::Always => Vec::new(),
                Rule::NoFlags { arg, mask } => {
                    vec![
                        SeccompRule::new(vec![cond(arg, SeccompCmpOp::MaskedEq(mask), 0)]).unwrap(),
                    ]
                }
                Rule::OneOf { arg, values } => values
                    .iter()
                    .map(|&v| SeccompRule::new(vec![cond(arg, SeccompCmpOp::Eq, v)]).unwrap())
                    .collect(),
                Rule::NoneOf { arg, values } => vec![SeccompRule::new(
                    values
                        .iter()
                        .map(|&v| cond(arg, SeccompCmpOp::Ne, v))
                        .collect(),
                )
                .unwrap()],
            };
            chains.insert(nr, chain);
        }
        let mismatch = match action {
            SeccompAction::Errno => Action::Errno(libc::EPERM as u32),
            SeccompAction::Kill => Action::KillProcess,
        };
        let filter =
            SeccompFilter::new(chains, mismatch, Action::Allow, TargetArch::x86_64).unwrap();
        let body: BpfProgram = filter.try_into().unwrap();
        program.extend(body.into_iter().map(|i| sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        }));
        program
    }

    /// The search tree answers every call exactly as seccompiler's chain
    /// did: every number the table knows and some beyond, with arguments
    /// that probe every rule (its values, their neighbours, each mask bit,
    /// junk in the upper halves), under both actions.
    #[test]
    fn the_tree_answers_every_call_as_seccompilers_chain_did() {
        let rules = resolve(&SeccompPlan::default_policy()).unwrap();
        let mut probes: Vec<u64> = vec![0, 1, 0xffff_ffff, u64::MAX, 1 << 32];
        for rule in rules.values() {
            match *rule {
                Rule::OneOf { values, .. } | Rule::NoneOf { values, .. } => {
                    for &v in values {
                        probes.extend([
                            v,
                            v ^ 1,
                            v.wrapping_add(1),
                            v | 1 << 32,
                            v | 0xdead_0000_0000,
                        ]);
                    }
                }
                Rule::NoFlags { mask, .. } => {
                    probes.extend((0..64).map(|b| 1u64 << b).filter(|f| mask & f != 0));
                    probes.extend([mask, !mask, mask << 32]);
                }
                Rule::Always | Rule::Enosys => {}
            }
        }
        let max = crate::syscalls::all().last().unwrap().1 as u32;
        for action in [SeccompAction::Errno, SeccompAction::Kill] {
            let ours = compile(&rules, action).unwrap();
            let reference = seccompiler_reference(&rules, action);
            assert!(
                ours.len() * 5 < reference.len(),
                "{} vs {}",
                ours.len(),
                reference.len()
            );
            for nr in (0..=max + 2).chain([X32_SYSCALL_BIT | 16, 0x3fff_ffff, u32::MAX]) {
                for &a in &probes {
                    for pos in 0..2 {
                        let mut args = [0x1111_0000_0000_0003u64; 6];
                        args[pos] = a;
                        assert_eq!(
                            run(&ours, AUDIT_ARCH_X86_64, nr, args),
                            run(&reference, AUDIT_ARCH_X86_64, nr, args),
                            "nr {nr}, args {args:x?}, {action:?}"
                        );
                    }
                }
            }
            assert_eq!(
                run(&ours, AUDIT_ARCH_I386, 3, [0; 6]),
                run(&reference, AUDIT_ARCH_I386, 3, [0; 6])
            );
        }
    }
}
