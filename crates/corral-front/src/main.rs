//! `corral`, the program (its logic is the library, src/lib.rs): the
//! start-up, heap and panic handler of a program without the C library.
//! (Not built as a test: `test = false`; `cfg(test)` only keeps `clippy
//! --all-targets` from checking it against the standard library's.)
#![cfg_attr(not(test), no_std)]
#![cfg_attr(not(test), no_main)]

#[cfg(not(test))]
mod rt;
