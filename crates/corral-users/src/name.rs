//! The tenant-name rule, with nothing but `core`: the lean `corral` front
//! program (crates/corral-front, no_std) includes this file as it is.

/// `[a-z_][a-z0-9_.-]*`, at most 32 bytes, so never a path.
pub fn is_user_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_');
    let rest_ok =
        chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '.' | '-'));
    first_ok && rest_ok && name.len() <= 32
}
