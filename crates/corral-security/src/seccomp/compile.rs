//! Resolved rules → a seccomp BPF program, compiled before fork.
//!
//! The body comes from seccompiler (architecture check, one chain per system
//! call, allow by default). seccompiler gives one filter a single match
//! action and compares exact syscall numbers only, so two rules it cannot
//! express go in a small hand-written prefix that runs first:
//!
//! ```text
//!   ld  arch ; jeq AUDIT_ARCH_X86_64 ? next : KILL_PROCESS     i386 (int 0x80) ABI
//!   ld  nr   ; jge __X32_SYSCALL_BIT ? KILL_PROCESS : next     x32 ABI, same audit arch
//!   jeq clone3 ? ERRNO(ENOSYS) : next                          whatever the plan's action
//!   <seccompiler's program>
//! ```
//!
//! The prefix checks the architecture itself before it reads the syscall
//! number (numbers mean different things per ABI), so seccompiler's own check
//! repeats it: three extra instructions, kept so its program stays untouched.
//! Foreign ABIs are always killed, never answered EPERM: nothing a tenant
//! runs legitimately switches ABI, and seccompiler's architecture check kills.

use std::collections::BTreeMap;

use corral_profile::plan::SeccompAction;
use seccompiler::{
    sock_filter, BpfProgram, SeccompAction as Action, SeccompCmpArgLen, SeccompCmpOp,
    SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};

use super::rules::Match;
use crate::error::SecurityError;

// <linux/filter.h>: instruction classes and modes.
const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JEQ_K: u16 = 0x05 | 0x10; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_JGE_K: u16 = 0x05 | 0x30; // BPF_JMP | BPF_JGE | BPF_K
const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K
                             // <linux/seccomp.h>: offsets in struct seccomp_data, return values.
const DATA_NR: u32 = 0;
const DATA_ARCH: u32 = 4;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;
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

/// Compile `rules` (syscall number → what to refuse) for x86_64.
pub(crate) fn compile(
    rules: &BTreeMap<i64, Match>,
    action: SeccompAction,
) -> Result<Vec<sock_filter>, SecurityError> {
    let compile_err = SecurityError::Compile;

    let mut program = vec![
        stmt(BPF_LD_W_ABS, DATA_ARCH),
        jump(BPF_JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        stmt(BPF_RET_K, RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, DATA_NR),
        jump(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1),
        stmt(BPF_RET_K, RET_KILL_PROCESS),
    ];

    let mut chains: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (&nr, how) in rules {
        let chain = match *how {
            Match::Enosys => {
                let nr = u32::try_from(nr).map_err(|_| SecurityError::SyscallNumber(nr))?;
                program.push(jump(BPF_JEQ_K, nr, 0, 1));
                program.push(stmt(BPF_RET_K, RET_ERRNO | libc::ENOSYS as u32));
                continue;
            }
            // An empty chain matches every call.
            Match::Always => Vec::new(),
            // Dword: the kernel reads clone's flags and ioctl's request as
            // 32-bit values, so only the low half may decide. A 64-bit compare
            // would let `TIOCSTI | 1 << 32` through.
            Match::AnyFlag { arg, flags } => flags
                .iter()
                .map(|&flag| condition(arg, SeccompCmpOp::MaskedEq(flag), flag))
                .collect::<Result<_, _>>()
                .map_err(compile_err)?,
            Match::OneOf { arg, values } => values
                .iter()
                .map(|&value| condition(arg, SeccompCmpOp::Eq, value))
                .collect::<Result<_, _>>()
                .map_err(compile_err)?,
        };
        chains.insert(nr, chain);
    }

    let on_match = match action {
        SeccompAction::Errno => Action::Errno(libc::EPERM as u32),
        SeccompAction::Kill => Action::KillProcess,
    };
    let filter = SeccompFilter::new(chains, Action::Allow, on_match, TargetArch::x86_64)
        .map_err(compile_err)?;
    let body: BpfProgram = filter.try_into().map_err(compile_err)?;
    program.extend(body);

    if program.len() > MAX_INSNS {
        return Err(SecurityError::FilterTooLarge(program.len()));
    }
    Ok(program)
}

/// A one-condition rule on the low 32 bits of argument `arg`.
fn condition(
    arg: u8,
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompRule, seccompiler::BackendError> {
    SeccompRule::new(vec![SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Dword,
        op,
        value,
    )?])
}

#[cfg(test)]
pub(crate) mod interp {
    //! A classic-BPF interpreter for the instructions seccompiler and the
    //! prefix emit, so the compiled logic is tested without the kernel.
    use super::*;

    /// What the program returns for a call (nr, arch, args).
    pub(crate) fn run(program: &[sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let word = |offset: u32| -> u32 {
            match offset {
                0 => nr,
                4 => arch,
                16..=63 => {
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
        let (mut acc, mut pc) = (0u32, 0usize);
        loop {
            let insn = &program[pc];
            pc += 1;
            match insn.code {
                0x20 => acc = word(insn.k),    // ld w abs
                0x54 => acc &= insn.k,         // alu and k
                0x05 => pc += insn.k as usize, // ja
                0x06 => return insn.k,         // ret k
                code => {
                    let taken = match code {
                        0x15 => acc == insn.k, // jeq
                        0x25 => acc > insn.k,  // jgt
                        0x35 => acc >= insn.k, // jge
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
    use crate::seccomp::rules::resolve;
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
    fn plain_calls_are_allowed_and_listed_ones_denied() {
        let p = program(SeccompAction::Errno);
        for nr in [
            libc::SYS_read,
            libc::SYS_getppid,
            libc::SYS_execve,
            libc::SYS_chroot,
        ] {
            assert_eq!(call(&p, nr, [0; 6]), ALLOW, "{nr}");
        }
        for nr in [
            libc::SYS_mount,
            libc::SYS_unshare,
            libc::SYS_setns,
            libc::SYS_bpf,
            libc::SYS_ptrace,
        ] {
            assert_eq!(call(&p, nr, [0; 6]), EPERM, "{nr}");
        }
        let k = program(SeccompAction::Kill);
        assert_eq!(call(&k, libc::SYS_mount, [0; 6]), RET_KILL_PROCESS);
        assert_eq!(call(&k, libc::SYS_read, [0; 6]), ALLOW);
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
        for flag in super::super::rules::DEFAULT
            .iter()
            .find_map(|e| match e.how {
                Match::AnyFlag { flags, .. } => Some(flags),
                _ => None,
            })
            .unwrap()
        {
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
        assert!(p.len() < 400, "{} instructions", p.len());
    }
}
