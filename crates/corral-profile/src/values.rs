//! Checks and conversions of single values: sizes, modes, paths, names.

use crate::doc::{describe, Entry, L};
use crate::error::ProfileError;
use std::path::{Path, PathBuf};
use toml_edit::Value;

const SIZE: &str = "a size greater than 0: an integer number of bytes, or a string like \"64M\" \
                    (units K, M, G, T: powers of 1024)";
const MODE: &str = "a mode of at most 0o7777: an octal string like \"0755\", or an integer \
                    written in octal like 0o755";

/// `size`: an integer number of bytes or a string `<digits>[K|M|G|T]`.
pub(crate) fn size(entry: &Entry<'_>) -> Result<L<u64>, ProfileError> {
    let parsed = match entry.value() {
        Some(Value::Integer(i)) => u64::try_from(*i.value()).ok(),
        Some(Value::String(s)) => parse_size(s.value()),
        _ => return Err(entry.wrong_type(SIZE)),
    };
    match parsed {
        Some(n) if n > 0 => Ok(L {
            v: n,
            at: entry.at(),
            key: entry.key.clone(),
        }),
        _ => Err(crate::error::invalid(
            &entry.at(),
            &entry.key,
            SIZE,
            describe(entry.node),
        )),
    }
}

pub(crate) fn parse_size(s: &str) -> Option<u64> {
    let (digits, shift) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 10),
        b'M' => (&s[..s.len() - 1], 20),
        b'G' => (&s[..s.len() - 1], 30),
        b'T' => (&s[..s.len() - 1], 40),
        _ => (s, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(1u64 << shift)
}

/// `mode`: an octal string (`"0755"`, `"755"`, `"0o755"`) or an integer. An
/// integer written in decimal (`mode = 755`) is refused unless below 8: it is
/// almost always an octal mode missing its `0o`.
pub(crate) fn mode(entry: &Entry<'_>) -> Result<L<u32>, ProfileError> {
    let found = describe(entry.node);
    let at = entry.at();
    let bad = |found: String| crate::error::invalid(&at, &entry.key, MODE, found);
    let mode = match entry.value() {
        Some(Value::String(s)) => {
            let digits = s.value().strip_prefix("0o").unwrap_or(s.value());
            let octal = !digits.is_empty() && digits.bytes().all(|b| (b'0'..=b'7').contains(&b));
            octal.then(|| u32::from_str_radix(digits, 8).ok()).flatten()
        }
        Some(Value::Integer(i)) => {
            let raw = entry.raw().unwrap_or("");
            let decimal = raw.bytes().next().is_some_and(|b| b.is_ascii_digit())
                && !raw.starts_with("0o")
                && !raw.starts_with("0x")
                && !raw.starts_with("0b");
            if decimal && *i.value() > 7 {
                return Err(bad(format!(
                    "decimal integer {raw} (write 0o{raw} or \"{raw}\")"
                )));
            }
            u32::try_from(*i.value()).ok()
        }
        _ => return Err(entry.wrong_type(MODE)),
    };
    match mode {
        Some(m) if m <= 0o7777 => Ok(L {
            v: m,
            at: at.clone(),
            key: entry.key.clone(),
        }),
        _ => Err(bad(found)),
    }
}

/// An absolute path, normalised: `//`, `/./` and a trailing `/` are folded;
/// `..` is refused.
pub(crate) fn abs_path(l: &L<String>) -> Result<PathBuf, ProfileError> {
    normalise(&l.v).map_err(|expected| l.invalid(expected, format!("{:?}", l.v)))
}

/// Like `abs_path`, and not `/` itself (mount destinations, tmp.dir).
pub(crate) fn abs_path_not_root(l: &L<String>) -> Result<PathBuf, ProfileError> {
    let path = abs_path(l)?;
    if path == Path::new("/") {
        return Err(l.invalid("an absolute path other than /", format!("{:?}", l.v)));
    }
    Ok(path)
}

pub(crate) fn normalise(s: &str) -> Result<PathBuf, &'static str> {
    if s.contains('\0') {
        return Err("a path without NUL characters");
    }
    if !s.starts_with('/') {
        return Err("an absolute path (starting with /)");
    }
    let mut out = String::new();
    for part in s.split('/').filter(|p| !p.is_empty() && *p != ".") {
        if part == ".." {
            return Err("an absolute path without \"..\" components");
        }
        out.push('/');
        out.push_str(part);
    }
    if out.is_empty() {
        out.push('/');
    }
    Ok(PathBuf::from(out))
}

pub(crate) const HOSTNAME: &str =
    "a hostname label: 1 to 64 letters, digits or '-', not starting or ending with '-'";

pub(crate) fn is_hostname(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

pub(crate) const GROUP_NAME: &str = "a group name (1 to 32 characters, no ':', ',' or blanks)";

pub(crate) fn is_group_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 32
        && s.bytes()
            .all(|b| b.is_ascii_graphic() && b != b':' && b != b',')
}

pub(crate) const ENV_NAME: &str = "an environment variable name matching [A-Za-z_][A-Za-z0-9_]*";

pub(crate) fn is_env_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

pub(crate) const SYSCALL_NAME: &str = "a syscall name matching [a-z0-9_]+";

pub(crate) fn is_syscall_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

pub(crate) const TENANT_NAME: &str = "a user name matching [a-z_][a-z0-9_.-]{0,31}";

pub(crate) fn is_tenant_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    s.len() <= 32
        && bytes
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(&b))
}

/// Plan names are file names under `plans/`.
pub(crate) const PLAN_NAME: &str =
    "a plan name: letters, digits, '_', '-' or '.', not starting with '.'";

pub(crate) fn is_plan_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && !s.starts_with('.')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

const DURATION: &str = "a duration: an integer number of seconds, or a string like \"500ms\", \"30s\", \"10m\", \"1h\" (0 for none)";

/// A duration in milliseconds: an integer (seconds) or `<digits>(ms|s|m|h)`.
pub(crate) fn duration_ms(entry: &Entry<'_>) -> Result<L<u64>, ProfileError> {
    let parsed = match entry.value() {
        Some(Value::Integer(i)) => u64::try_from(*i.value())
            .ok()
            .and_then(|s| s.checked_mul(1000)),
        Some(Value::String(s)) => parse_duration_ms(s.value()),
        _ => return Err(entry.wrong_type(DURATION)),
    };
    match parsed {
        Some(v) => Ok(L {
            v,
            at: entry.at(),
            key: entry.key.clone(),
        }),
        None => Err(crate::error::invalid(
            &entry.at(),
            &entry.key,
            DURATION,
            describe(entry.node),
        )),
    }
}

pub(crate) fn parse_duration_ms(s: &str) -> Option<u64> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    if digits.is_empty() {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    let scale = match unit {
        "ms" => 1,
        "" | "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return None,
    };
    n.checked_mul(scale)
}
