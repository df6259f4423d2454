//! The program's own start-up, in place of the C library's: `corral` makes
//! a dozen system calls of its own, and a static glibc spent 0.28 ms before
//! `main` on this project's test VM, most of it in `init_cpu_features` and
//! the cache-size probes (`cpuid`, a trap to the hypervisor each), as much
//! as the whole rest of a `corral run` client (docs/benchmarks.md, "corral
//! run at the C floor, round 3"). Here start-up is: apply the static-pie's
//! relative relocations, make RELRO read-only, call `main` with argc, argv
//! and envp. System calls go through rustix's raw Linux backend; memory
//! comes from a bump arena; the few string functions the compiler calls
//! are here too.
//!
//! x86-64 only (the start and the string functions are assembly); the
//! package build and the tests run on it.

use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicUsize, Ordering};

#[cfg(not(target_arch = "x86_64"))]
compile_error!("corral-front's start-up (src/rt.rs) is written for x86-64");

// The entry point. The kernel starts a static-pie at a random base with
// the stack holding argc, argv[], NULL, envp[], NULL, auxv. Before any
// Rust code runs, every R_X86_64_RELATIVE relocation (the only kind a
// static-pie without the C library has: pointers in vtables, string
// tables...) gets the load base added (R_X86_64_NONE entries, which a
// linker may leave after garbage collection, are skipped); any other type,
// or a packed DT_RELR table, stops the program at once (ud2) rather than
// run with a pointer unrelocated. Then `start` (below) with the initial stack
// pointer and the load base.
core::arch::global_asm!(
    ".globl _start",
    ".type _start,@function",
    "_start:",
    "xor ebp, ebp",
    "mov r12, rsp",                       // initial stack pointer, kept
    "lea r13, [rip + __ehdr_start]",      // load base (linked at 0)
    "lea rdx, [rip + _DYNAMIC]",
    "xor ecx, ecx",                       // DT_RELA (link-time address)
    "xor r8d, r8d",                       // DT_RELASZ
    "2:",
    "mov rax, [rdx]",
    "test rax, rax",                      // DT_NULL: end of the table
    "jz 5f",
    "cmp rax, 7",                         // DT_RELA
    "jne 3f",
    "mov rcx, [rdx + 8]",
    "3:",
    "cmp rax, 8",                         // DT_RELASZ
    "jne 4f",
    "mov r8, [rdx + 8]",
    "4:",
    "cmp rax, 36",                        // DT_RELR: not handled
    "je 9f",
    "add rdx, 16",
    "jmp 2b",
    "5:",
    "test rcx, rcx",
    "jz 7f",
    "add rcx, r13",                       // the table's run-time address
    "add r8, rcx",                        // its end
    "6:",
    "cmp rcx, r8",
    "jae 7f",
    "mov eax, dword ptr [rcx + 8]",       // r_info's type:
    "test eax, eax",                      // R_X86_64_NONE: nothing to do
    "jz 8f",
    "cmp eax, 8",                         // R_X86_64_RELATIVE, else stop
    "jne 9f",
    "mov rax, [rcx]",                     // r_offset
    "mov rdx, [rcx + 16]",                // r_addend
    "add rdx, r13",
    "mov [r13 + rax], rdx",
    "8:",
    "add rcx, 24",
    "jmp 6b",
    "7:",
    "mov rdi, r12",
    "mov rsi, r13",
    "and rsp, -16",
    "call {start}",
    "9:",
    "ud2",
    start = sym start,
);

/// Called once by `_start`, relocated: RELRO read-only, then `main`'s exit
/// status is the program's.
unsafe extern "C" fn start(sp: *const usize, base: *const u8) -> ! {
    // SAFETY: the ELF header and program headers are mapped at the load
    // base (the first PT_LOAD starts at offset 0 in a static-pie).
    unsafe { protect_relro(base) };
    // SAFETY: the kernel's initial stack: argc, then argc pointers to
    // NUL-terminated strings and a NULL, then the environment, NULL-ended.
    let (argc, argv, envp) = unsafe {
        let argc = *sp;
        let argv = sp.add(1).cast::<*const u8>();
        (argc, argv, argv.add(argc + 1))
    };
    // SAFETY: as above.
    let code = unsafe { corral_front::main(argc, argv, envp) };
    corral_front::sys::exit(code)
}

/// mprotect PT_GNU_RELRO read-only, as the C library's start-up does after
/// relocating: the relocated vtables and tables cannot be overwritten.
unsafe fn protect_relro(base: *const u8) {
    const PT_GNU_RELRO: u32 = 0x6474_e552;
    // SAFETY: (the caller's) an Elf64_Ehdr at `base`: e_phoff at 32,
    // e_phentsize at 54, e_phnum at 56; each Elf64_Phdr: p_type at 0,
    // p_vaddr at 16, p_memsz at 40.
    unsafe {
        let phoff = base.add(32).cast::<u64>().read_unaligned() as usize;
        let phentsize = base.add(54).cast::<u16>().read_unaligned() as usize;
        let phnum = base.add(56).cast::<u16>().read_unaligned() as usize;
        for i in 0..phnum {
            let ph = base.add(phoff + i * phentsize);
            if ph.cast::<u32>().read_unaligned() != PT_GNU_RELRO {
                continue;
            }
            let vaddr = ph.add(16).cast::<u64>().read_unaligned() as usize;
            let memsz = ph.add(40).cast::<u64>().read_unaligned() as usize;
            let start = (base as usize + vaddr) & !4095;
            let end = (base as usize + vaddr + memsz) & !4095;
            if end > start {
                let _ = rustix::mm::mprotect(
                    start as *mut core::ffi::c_void,
                    end - start,
                    rustix::mm::MprotectFlags::READ,
                );
            }
        }
    }
}

// memcpy, memmove, memset, memcmp, bcmp and strlen: what compiled Rust
// calls (copies, zeroing, slice comparison, CStr). In assembly so that the
// compiler cannot turn a copying loop back into a call to itself. `rep
// movsb`/`rep stosb` are the fast forms on current x86-64 (ERMS); the
// copies here are a few KiB at most.
core::arch::global_asm!(
    ".globl memcpy",
    ".type memcpy,@function",
    "memcpy:",
    "mov rax, rdi",
    "mov rcx, rdx",
    "rep movsb",
    "ret",
    ".globl memmove",
    ".type memmove,@function",
    "memmove:",
    "mov rax, rdi",
    "mov rcx, rdx",
    "mov r8, rdi",
    "sub r8, rsi",
    "cmp r8, rdx", // dst - src >= n (unsigned): forward is safe
    "jae 2f",
    "lea rsi, [rsi + rdx - 1]",
    "lea rdi, [rdi + rdx - 1]",
    "std",
    "rep movsb",
    "cld",
    "ret",
    "2:",
    "rep movsb",
    "ret",
    ".globl memset",
    ".type memset,@function",
    "memset:",
    "mov r8, rdi",
    "mov eax, esi",
    "mov rcx, rdx",
    "rep stosb",
    "mov rax, r8",
    "ret",
    ".globl memcmp",
    ".type memcmp,@function",
    ".globl bcmp",
    ".type bcmp,@function",
    "memcmp:",
    "bcmp:",
    "xor eax, eax",
    "2:",
    "test rdx, rdx",
    "jz 3f",
    "movzx eax, byte ptr [rdi]",
    "movzx ecx, byte ptr [rsi]",
    "sub eax, ecx",
    "jnz 3f",
    "inc rdi",
    "inc rsi",
    "dec rdx",
    "jmp 2b",
    "3:",
    "ret",
    ".globl strlen",
    ".type strlen,@function",
    "strlen:",
    "mov rax, rdi",
    "2:",
    "cmp byte ptr [rax], 0",
    "je 3f",
    "inc rax",
    "jmp 2b",
    "3:",
    "sub rax, rdi",
    "ret",
);

/// The heap: a bump arena (the program lives for one command and frees
/// little; a request is at most 64 KiB). Only the arena's touched pages
/// cost anything. What does not fit is mapped on its own.
struct Arena;

const ARENA: usize = 1 << 20;
#[repr(align(4096))]
struct Bytes(#[allow(dead_code)] [u8; ARENA]);
static mut HEAP: Bytes = Bytes([0; ARENA]);
/// Bytes of HEAP handed out (single-threaded program; atomic for Sync).
static USED: AtomicUsize = AtomicUsize::new(0);
/// The most USED has been: HEAP beyond it was never handed out and is
/// still zero (so `alloc_zeroed` need not write, nor fault in, its pages).
static HIGH: AtomicUsize = AtomicUsize::new(0);

fn set_used(used: usize) {
    USED.store(used, Ordering::Relaxed);
    if used > HIGH.load(Ordering::Relaxed) {
        HIGH.store(used, Ordering::Relaxed);
    }
}

fn heap_base() -> usize {
    core::ptr::addr_of_mut!(HEAP) as usize
}

// SAFETY: every block is within HEAP or a fresh mapping, aligned as asked,
// and never handed out twice (USED only grows, but for the last block).
unsafe impl GlobalAlloc for Arena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let base = heap_base();
        let used = USED.load(Ordering::Relaxed);
        let start = (base + used + layout.align() - 1) & !(layout.align() - 1);
        let end = start + layout.size();
        if end <= base + ARENA {
            set_used(end - base);
            return start as *mut u8;
        }
        if layout.align() > 4096 {
            return core::ptr::null_mut();
        }
        // SAFETY: a fresh private anonymous mapping, page-aligned.
        match unsafe {
            rustix::mm::mmap_anonymous(
                core::ptr::null_mut(),
                layout.size(),
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE,
            )
        } {
            Ok(p) => p.cast(),
            Err(_) => core::ptr::null_mut(),
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let high = heap_base() + HIGH.load(Ordering::Relaxed);
        // SAFETY: GlobalAlloc's contract, passed on.
        let p = unsafe { self.alloc(layout) };
        let (start, end) = (p as usize, p as usize + layout.size());
        let in_heap = start >= heap_base() && start < heap_base() + ARENA;
        // Only what was handed out before can hold old bytes; a fresh
        // mapping is zero too.
        if !p.is_null() && in_heap && start < high {
            // SAFETY: the block just allocated, `layout.size()` bytes.
            unsafe { core::ptr::write_bytes(p, 0, end.min(high) - start) };
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let base = heap_base();
        let p = ptr as usize;
        if p < base || p >= base + ARENA {
            // SAFETY: a mapping of `alloc`'s of this size.
            let _ = unsafe { rustix::mm::munmap(ptr.cast(), layout.size()) };
        } else if p + layout.size() == base + USED.load(Ordering::Relaxed) {
            // The last block: its bytes can be handed out again.
            USED.store(p - base, Ordering::Relaxed);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let base = heap_base();
        let p = ptr as usize;
        let last = p + layout.size() == base + USED.load(Ordering::Relaxed);
        if last && p >= base && p + new_size <= base + ARENA {
            // The last block grows (or shrinks) in place: a growing Vec or
            // String does not copy itself.
            set_used(p + new_size - base);
            return ptr;
        }
        // SAFETY: the layout is valid for the new size (GlobalAlloc's
        // contract for realloc).
        let new =
            unsafe { self.alloc(Layout::from_size_align_unchecked(new_size, layout.align())) };
        if !new.is_null() {
            // SAFETY: both blocks are valid for the smaller size and distinct.
            unsafe {
                core::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }
}

#[global_allocator]
static GLOBAL: Arena = Arena;

/// A panic is a bug: said on stderr, exit status 125 (corral's "failed").
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    let mut line = corral_front::out::Line::new();
    let _ = core::fmt::write(&mut line, format_args!("corral: internal error: {info}\n"));
    line.to_stderr();
    corral_front::sys::exit(125)
}

/// The precompiled core and alloc libraries (built to unwind) refer to
/// these; with panic = "abort" nothing unwinds, so neither is ever called.
#[no_mangle]
extern "C" fn _Unwind_Resume() -> ! {
    corral_front::sys::exit(125)
}

#[no_mangle]
extern "C" fn rust_eh_personality() {}
