//! Resolved rules → a seccomp BPF program, compiled before fork.
//!
//! The body comes from seccompiler (architecture check, one chain per allowed
//! system call, the plan's action for everything else). seccompiler gives one
//! filter a single match action and compares exact syscall numbers only, so
//! what it cannot express goes in a small hand-written prefix that runs first:
//!
//! ```text
//!   ld  arch ; jeq AUDIT_ARCH_X86_64 ? next : KILL_PROCESS     i386 (int 0x80) ABI
//!   ld  nr   ; jge __X32_SYSCALL_BIT ? KILL_PROCESS : next     x32 ABI, same audit arch
//!   jgt MAX_KNOWN ? ERRNO(ENOSYS) : next                       a newer kernel's calls
//!   jge 337 ; jgt 423 ; ERRNO(ENOSYS)                          numbers x86_64 never used
//!   jeq ioctl ? [ld request; jeq TIOCSTI.. ? action : allow] : next   argument-checked calls
//!   jeq socket ? [ld family; jeq AF_UNIX.. ? allow : action] : next   (clone, socketpair,
//!   ...                                                                personality), by number
//!   jgt MAX_KNOWN ? ERRNO(ENOSYS) : next                       a newer kernel's calls
//!   jge 337 ; jgt 423 ; ERRNO(ENOSYS)                          numbers x86_64 never used
//!   jeq clone3 ? ERRNO(ENOSYS) : next                          whatever the plan's action
//!   <seccompiler's program: jeq NR ? allow : next ...; action>
//! ```
//!
//! The system calls whose rule reads an argument come first, each as a short
//! block of its own, because the kernel runs the program for every one of
//! them (its action cache only answers calls decided by the number alone).
//! In seccompiler's program they sat in its linear chain of numbers: ioctl
//! after 51 instructions, socket 106, clone 134, personality 285, each
//! instruction a few tenths of a nanosecond of every call; first, they run
//! 10 to 16 (docs/benchmarks.md, "seccomp"). Their answers are the same as
//! seccompiler's (a test compares both programs on every number and on the
//! rules' values, their neighbours and junk in the upper halves).
//!
//! The prefix checks the architecture itself before it reads the syscall
//! number (numbers mean different things per ABI), so seccompiler's own check
//! repeats it: three extra instructions, kept so its program stays untouched.
//! Foreign ABIs are always killed, never answered EPERM: nothing a tenant
//! runs legitimately switches ABI, and seccompiler's architecture check kills.
//!
//! Numbers the syscall table does not know are answered ENOSYS whatever the
//! plan's action, like runc's stub for syscalls newer than Docker's profile:
//! a libc that tries a system call of a newer kernel falls back as it would
//! on an older kernel instead of failing on EPERM (or being killed).
//!
//! Every instruction on the path of an `Always` system call only looks at
//! the architecture and the number, so the kernel's action cache (5.11+)
//! marks such calls always-allowed and skips the program for them.

use std::collections::BTreeMap;

use corral_profile::plan::SeccompAction;
use seccompiler::{
    sock_filter, BpfProgram, SeccompAction as Action, SeccompCmpArgLen, SeccompCmpOp,
    SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};

use super::rules::Rule;
use crate::error::SecurityError;
use crate::syscalls;

// <linux/filter.h>: instruction classes and modes.
const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JEQ_K: u16 = 0x05 | 0x10; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_JGT_K: u16 = 0x05 | 0x20; // BPF_JMP | BPF_JGT | BPF_K
const BPF_JGE_K: u16 = 0x05 | 0x30; // BPF_JMP | BPF_JGE | BPF_K
const BPF_JSET_K: u16 = 0x05 | 0x40; // BPF_JMP | BPF_JSET | BPF_K
const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K
                             // <linux/seccomp.h>: offsets in struct seccomp_data, return values.
const DATA_NR: u32 = 0;
const DATA_ARCH: u32 = 4;
/// `args[0]` in struct seccomp_data; each argument is 8 bytes, its low
/// half first (x86_64 is little-endian).
const DATA_ARGS: u32 = 16;
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_ENOSYS: u32 = RET_ERRNO | libc::ENOSYS as u32;
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

/// The prefix's ENOSYS instructions for numbers the table does not know:
/// everything above its highest number, and every gap inside it.
fn unknown_numbers() -> Result<Vec<sock_filter>, SecurityError> {
    let mut out = Vec::new();
    let mut last: Option<i64> = None;
    for (_, nr) in syscalls::all() {
        if let Some(prev) = last {
            if nr > prev + 1 {
                // prev+1 ..= nr-1 are unknown.
                out.push(jump(BPF_JGE_K, number(prev + 1)?, 0, 2));
                out.push(jump(BPF_JGT_K, number(nr - 1)?, 1, 0));
                out.push(stmt(BPF_RET_K, RET_ENOSYS));
            }
        }
        last = Some(nr);
    }
    let max = last.ok_or(SecurityError::UnsupportedArch(std::env::consts::ARCH))?;
    let mut above = vec![
        jump(BPF_JGT_K, number(max)?, 0, 1),
        stmt(BPF_RET_K, RET_ENOSYS),
    ];
    above.extend(out);
    Ok(above)
}

/// A 32-bit operand of an argument rule (the filter compares the low half
/// of the argument, as the kernel reads it).
fn low32(nr: i64, value: u64) -> Result<u32, SecurityError> {
    u32::try_from(value).map_err(|_| SecurityError::ArgumentValue { nr, value })
}

/// The block of one argument-checked call: with the number in the
/// accumulator, `jeq NR` (else skip the block), load the argument's low
/// half, decide, return. None for a rule that reads no argument.
fn argument_block(
    nr: i64,
    rule: &Rule,
    deny: u32,
) -> Result<Option<Vec<sock_filter>>, SecurityError> {
    // Jump offsets are u8: at most 250 values per rule.
    let offset = |n: usize| u8::try_from(n).map_err(|_| SecurityError::FilterTooLarge(n));
    let load = |arg: u8| stmt(BPF_LD_W_ABS, DATA_ARGS + 8 * u32::from(arg));
    let mut body = match *rule {
        Rule::Always | Rule::Enosys => return Ok(None),
        // Any of the masked bits set: the action.
        Rule::NoFlags { arg, mask } => vec![
            load(arg),
            jump(BPF_JSET_K, low32(nr, mask)?, 1, 0),
            stmt(BPF_RET_K, RET_ALLOW),
            stmt(BPF_RET_K, deny),
        ],
        // jeq v_i ? (the last return) : next; ...; first return; last return.
        Rule::OneOf { arg, values } | Rule::NoneOf { arg, values } => {
            let (hit, miss) = match rule {
                Rule::OneOf { .. } => (RET_ALLOW, deny),
                _ => (deny, RET_ALLOW),
            };
            let mut b = vec![load(arg)];
            for (i, &v) in values.iter().enumerate() {
                b.push(jump(BPF_JEQ_K, low32(nr, v)?, offset(values.len() - i)?, 0));
            }
            b.push(stmt(BPF_RET_K, miss));
            b.push(stmt(BPF_RET_K, hit));
            b
        }
    };
    let mut block = vec![jump(BPF_JEQ_K, number(nr)?, 0, offset(body.len())?)];
    block.append(&mut body);
    Ok(Some(block))
}

/// Compile `rules` (syscall number → which calls pass) for x86_64.
pub(crate) fn compile(
    rules: &BTreeMap<i64, Rule>,
    action: SeccompAction,
) -> Result<Vec<sock_filter>, SecurityError> {
    compile_with(rules, action, true)
}

/// [`compile`], with the argument-checked calls first (`hoist`, corral's
/// program) or left in seccompiler's chain (the reference the tests compare
/// it with).
fn compile_with(
    rules: &BTreeMap<i64, Rule>,
    action: SeccompAction,
    hoist: bool,
) -> Result<Vec<sock_filter>, SecurityError> {
    let compile_err = SecurityError::Compile;
    let deny = match action {
        SeccompAction::Errno => RET_ERRNO | libc::EPERM as u32,
        SeccompAction::Kill => RET_KILL_PROCESS,
    };

    let mut program = vec![
        stmt(BPF_LD_W_ABS, DATA_ARCH),
        jump(BPF_JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        stmt(BPF_RET_K, RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, DATA_NR),
        jump(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1),
        stmt(BPF_RET_K, RET_KILL_PROCESS),
    ];
    let mut hoisted = std::collections::BTreeSet::new();
    if hoist {
        for (&nr, rule) in rules {
            if let Some(block) = argument_block(nr, rule, deny)? {
                program.extend(block);
                hoisted.insert(nr);
            }
        }
    }
    program.extend(unknown_numbers()?);

    let mut chains: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (&nr, rule) in rules {
        if hoisted.contains(&nr) {
            // Answered by its block above; never reaches seccompiler's.
            continue;
        }
        let chain = match *rule {
            Rule::Enosys => {
                program.push(jump(BPF_JEQ_K, number(nr)?, 0, 1));
                program.push(stmt(BPF_RET_K, RET_ENOSYS));
                continue;
            }
            // An empty chain matches every call.
            Rule::Always => Vec::new(),
            // Dword everywhere: the kernel reads these arguments as 32-bit
            // values, so only the low half may decide. A 64-bit compare
            // would refuse `read`-like calls with junk in the upper half,
            // or let `TIOCSTI | 1 << 32` through.
            Rule::NoFlags { arg, mask } => {
                vec![rule_of(vec![cond(arg, SeccompCmpOp::MaskedEq(mask), 0)?])?]
            }
            // One rule per value: any of them lets the call through.
            Rule::OneOf { arg, values } => values
                .iter()
                .map(|&v| rule_of(vec![cond(arg, SeccompCmpOp::Eq, v)?]))
                .collect::<Result<_, _>>()?,
            // One rule, all conditions: none of the values.
            Rule::NoneOf { arg, values } => vec![rule_of(
                values
                    .iter()
                    .map(|&v| cond(arg, SeccompCmpOp::Ne, v))
                    .collect::<Result<_, _>>()?,
            )?],
        };
        chains.insert(nr, chain);
    }

    let mismatch = match action {
        SeccompAction::Errno => Action::Errno(libc::EPERM as u32),
        SeccompAction::Kill => Action::KillProcess,
    };
    let filter = SeccompFilter::new(chains, mismatch, Action::Allow, TargetArch::x86_64)
        .map_err(compile_err)?;
    let body: BpfProgram = filter.try_into().map_err(compile_err)?;
    program.extend(body);

    if program.len() > MAX_INSNS {
        return Err(SecurityError::FilterTooLarge(program.len()));
    }
    Ok(program)
}

/// A condition on the low 32 bits of argument `arg`.
fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SecurityError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(SecurityError::Compile)
}

fn rule_of(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, SecurityError> {
    SeccompRule::new(conditions).map_err(SecurityError::Compile)
}

#[cfg(test)]
pub(crate) mod interp {
    //! A classic-BPF interpreter for the instructions seccompiler and the
    //! prefix emit, so the compiled logic is tested without the kernel.
    use super::*;

    /// What the program returns for a call (nr, arch, args).
    pub(crate) fn run(program: &[sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        trace(program, arch, nr, args).ret
    }

    /// One run of a program.
    pub(crate) struct Trace {
        pub(crate) ret: u32,
        /// Instructions run.
        pub(crate) ran: usize,
        /// Whether it loaded an argument (the kernel's action cache only
        /// answers calls whose path reads nothing but arch and number).
        pub(crate) read_args: bool,
    }

    pub(crate) fn trace(program: &[sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> Trace {
        let read_args = std::cell::Cell::new(false);
        let word = |offset: u32| -> u32 {
            match offset {
                0 => nr,
                4 => arch,
                16..=63 => {
                    read_args.set(true);
                    // Little-endian: the low half of each u64 comes first.
                    let arg = args[((offset - 16) / 8) as usize];
                    match (offset - 16) % 8 {
                        0 => arg as u32,
                        4 => (arg >> 32) as u32,
                        _ => panic!("unaligned load at {offset}"),
                    }
                }
                _ => panic!("load from offset {offset}"),
            }
        };
        let (mut acc, mut pc, mut ran) = (0u32, 0usize, 0usize);
        loop {
            let insn = &program[pc];
            pc += 1;
            ran += 1;
            match insn.code {
                0x20 => acc = word(insn.k),    // ld w abs
                0x54 => acc &= insn.k,         // alu and k
                0x05 => pc += insn.k as usize, // ja
                0x06 => {
                    // ret k
                    return Trace {
                        ret: insn.k,
                        ran,
                        read_args: read_args.get(),
                    };
                }
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

    /// The argument-checked calls, each as a name and a call the default
    /// rules allow.
    const ARGUMENT_CHECKED: [(&str, [u64; 6]); 5] = [
        ("ioctl", [0, libc::FIONREAD, 0, 0, 0, 0]),
        ("socket", [libc::AF_INET6 as u64, 1, 0, 0, 0, 0]),
        ("socketpair", [libc::AF_NETLINK as u64, 1, 0, 0, 0, 0]),
        ("clone", [libc::SIGCHLD as u64, 0, 0, 0, 0, 0]),
        ("personality", [0xffff_ffff, 0, 0, 0, 0, 0]),
    ];

    #[test]
    fn argument_checked_calls_run_a_short_path() {
        // Before, in seccompiler's chain: ioctl 51 instructions, socket 106,
        // clone 134, personality 285 (the last of its allowed values).
        let p = program(SeccompAction::Errno);
        let mut lens = Vec::new();
        for (name, args) in ARGUMENT_CHECKED {
            let nr = crate::syscalls::number(name).unwrap();
            let t = super::interp::trace(&p, AUDIT_ARCH_X86_64, nr as u32, args);
            assert_eq!(t.ret, ALLOW, "{name}");
            assert!(t.read_args, "{name}: its rule reads an argument");
            lens.push(t.ran);
        }
        // The architecture and x32 checks (4), the blocks before its own
        // (one jeq each), its own: jeq, load, compares, return.
        assert_eq!(
            lens,
            [10, 11, 13, 11, 16],
            "ioctl, socket, socketpair, clone, personality"
        );
    }

    #[test]
    fn hoisting_the_argument_checks_changes_no_answer() {
        // corral's program against seccompiler's own for the same rules,
        // on every number the table knows and a few beyond, with arguments
        // that probe every rule: its values, their neighbours, each mask
        // bit, junk in the upper halves.
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
            let reference = compile_with(&rules, action, false).unwrap();
            assert!(
                ours.len() < reference.len(),
                "the blocks replace chain entries"
            );
            for nr in (0..=max + 2).chain([X32_SYSCALL_BIT | 16, 0x3fff_ffff]) {
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
        }
    }

    #[test]
    fn calls_without_an_argument_rule_never_read_arguments() {
        // The kernel's action cache (5.11+) skips the program for a number
        // whose path reads only arch and number and allows: the blocks of
        // the argument-checked calls must not be on any other call's path.
        let p = program(SeccompAction::Errno);
        let rules = resolve(&SeccompPlan::default_policy()).unwrap();
        let mut cached = 0;
        for (name, nr) in crate::syscalls::all() {
            let t = super::interp::trace(&p, AUDIT_ARCH_X86_64, nr as u32, [u64::MAX; 6]);
            match rules.get(&nr) {
                Some(Rule::NoFlags { .. } | Rule::OneOf { .. } | Rule::NoneOf { .. }) => {
                    assert!(t.read_args, "{name}")
                }
                _ => {
                    assert!(!t.read_args, "{name} reads an argument");
                    cached += usize::from(t.ret == ALLOW);
                }
            }
        }
        assert!(cached > 250, "{cached} calls allowed by number alone");
    }

    #[test]
    fn program_fits_the_kernel_limit() {
        let p = program(SeccompAction::Errno);
        assert!(p.len() < 2048, "{} instructions", p.len());
    }
}
