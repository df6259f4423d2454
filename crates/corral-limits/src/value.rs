//! Parsing and formatting of limit values: sizes ("512M"), counts,
//! percentages ("50%"), and "max"/"unlimited" meaning no limit (`None`).

use crate::error::Problem;

/// A value as written: a TOML value, or a string from `corral limits set`
/// (where numbers arrive as strings too).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Raw<'a> {
    Str(&'a str),
    Int(i64),
    /// Any other TOML value, described for error messages.
    Other(String),
}

impl Raw<'_> {
    pub(crate) fn from_toml(v: &toml::Value) -> Raw<'_> {
        match v {
            toml::Value::String(s) => Raw::Str(s),
            toml::Value::Integer(i) => Raw::Int(*i),
            other => Raw::Other(format!("{} {}", other.type_str(), other)),
        }
    }

    /// The value as shown in error messages: strings quoted, numbers bare.
    pub(crate) fn shown(&self) -> String {
        match self {
            Raw::Str(s) => format!("{s:?}"),
            Raw::Int(i) => i.to_string(),
            Raw::Other(d) => d.clone(),
        }
    }
}

pub(crate) const SIZE: &str =
    "a size like \"512M\", \"1G\", \"64K\" or a number of bytes, or \"max\"";
pub(crate) const COUNT: &str = "a whole number, or \"max\"";
pub(crate) const PERCENT: &str = "a percentage like \"50%\" (100% = one core), or \"max\"";

fn is_unlimited(s: &str) -> bool {
    s.eq_ignore_ascii_case("max") || s.eq_ignore_ascii_case("unlimited")
}

fn invalid(expected: &'static str, raw: &Raw<'_>) -> Problem {
    Problem::Invalid {
        expected,
        found: raw.shown(),
    }
}

/// Digits only (no sign, no spaces), as u64.
fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A byte size: an integer, or digits with a binary suffix K/M/G/T
/// (optionally followed by `B` or `iB`, any case). `None` = unlimited.
pub(crate) fn parse_size(raw: &Raw<'_>) -> Result<Option<u64>, Problem> {
    match raw {
        Raw::Int(i) => u64::try_from(*i).map(Some).map_err(|_| invalid(SIZE, raw)),
        Raw::Str(s) if is_unlimited(s.trim()) => Ok(None),
        Raw::Str(s) => {
            let t = s.trim();
            let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
            let (num, suffix) = t.split_at(split);
            let n = digits(num).ok_or_else(|| invalid(SIZE, raw))?;
            let shift = match suffix.to_ascii_lowercase().as_str() {
                "" | "b" => 0,
                "k" | "kb" | "kib" => 10,
                "m" | "mb" | "mib" => 20,
                "g" | "gb" | "gib" => 30,
                "t" | "tb" | "tib" => 40,
                _ => return Err(invalid(SIZE, raw)),
            };
            n.checked_mul(1u64 << shift)
                .map(Some)
                .ok_or_else(|| Problem::OutOfRange {
                    found: raw.shown(),
                    reason: "larger than 2^64 bytes".into(),
                })
        }
        Raw::Other(_) => Err(invalid(SIZE, raw)),
    }
}

/// A count: an integer or a string of digits. `None` = unlimited.
pub(crate) fn parse_count(raw: &Raw<'_>) -> Result<Option<u64>, Problem> {
    match raw {
        Raw::Int(i) => u64::try_from(*i).map(Some).map_err(|_| invalid(COUNT, raw)),
        Raw::Str(s) if is_unlimited(s.trim()) => Ok(None),
        Raw::Str(s) => digits(s.trim())
            .map(Some)
            .ok_or_else(|| invalid(COUNT, raw)),
        Raw::Other(_) => Err(invalid(COUNT, raw)),
    }
}

/// A whole percentage written as a string ending in `%`. `None` = unlimited.
pub(crate) fn parse_percent(raw: &Raw<'_>) -> Result<Option<u64>, Problem> {
    match raw {
        Raw::Str(s) if is_unlimited(s.trim()) => Ok(None),
        Raw::Str(s) => {
            let t = s.trim();
            let n = t.strip_suffix('%').map(str::trim_end).and_then(digits);
            n.map(Some).ok_or_else(|| invalid(PERCENT, raw))
        }
        _ => Err(invalid(PERCENT, raw)),
    }
}

/// Checks `lo <= n <= hi` for a parsed number, with a message naming the range.
pub(crate) fn check_range(
    raw: &Raw<'_>,
    n: u64,
    lo: u64,
    hi: u64,
    what: &str,
) -> Result<u64, Problem> {
    if n < lo || n > hi {
        let reason = if n == 0 && lo > 0 {
            format!("0 is not a usable {what}; use \"max\" for no limit (allowed: {lo}..={hi})")
        } else {
            format!("{what} must be between {lo} and {hi}")
        };
        return Err(Problem::OutOfRange {
            found: raw.shown(),
            reason,
        });
    }
    Ok(n)
}

/// Formats bytes with the largest binary suffix that divides them exactly
/// ("64M", "1G", "1536K", "1000"), so the text parses back to the same value.
pub fn format_size(n: u64) -> String {
    for (shift, suffix) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        let unit = 1u64 << shift;
        if n >= unit && (n / unit) * unit == n {
            return format!("{}{}", n / unit, suffix);
        }
    }
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        let ok = |s: &str| parse_size(&Raw::Str(s)).unwrap();
        assert_eq!(ok("512M"), Some(512 << 20));
        assert_eq!(ok("1G"), Some(1 << 30));
        assert_eq!(ok("64K"), Some(64 << 10));
        assert_eq!(ok("64kib"), Some(64 << 10));
        assert_eq!(ok("2MB"), Some(2 << 20));
        assert_eq!(ok("4096"), Some(4096));
        assert_eq!(ok("max"), None);
        assert_eq!(ok("unlimited"), None);
        assert_eq!(parse_size(&Raw::Int(1 << 20)).unwrap(), Some(1 << 20));
        for bad in ["lots", "-5M", "1.5G", "", "M", "12Q", "5 M x"] {
            let e = parse_size(&Raw::Str(bad)).unwrap_err();
            assert!(matches!(e, Problem::Invalid { .. }), "{bad}: {e}");
        }
        assert!(parse_size(&Raw::Int(-1)).is_err());
        assert!(matches!(
            parse_size(&Raw::Str("99999999999T")),
            Err(Problem::OutOfRange { .. })
        ));
        assert!(parse_size(&Raw::Other("boolean true".into())).is_err());
    }

    #[test]
    fn counts_and_percentages() {
        assert_eq!(parse_count(&Raw::Str("20")).unwrap(), Some(20));
        assert_eq!(parse_count(&Raw::Int(20)).unwrap(), Some(20));
        assert_eq!(parse_count(&Raw::Str("MAX")).unwrap(), None);
        assert!(parse_count(&Raw::Str("20k")).is_err());
        assert!(parse_count(&Raw::Int(-3)).is_err());
        assert_eq!(parse_percent(&Raw::Str("50%")).unwrap(), Some(50));
        assert_eq!(parse_percent(&Raw::Str("150 %")).unwrap(), Some(150));
        assert_eq!(parse_percent(&Raw::Str("max")).unwrap(), None);
        let e = parse_percent(&Raw::Str("-5%")).unwrap_err();
        assert_eq!(e.to_string(), format!("expected {PERCENT}, found \"-5%\""));
        assert!(
            parse_percent(&Raw::Int(50)).is_err(),
            "a bare number is ambiguous"
        );
        assert!(parse_percent(&Raw::Str("50")).is_err());
        assert!(parse_percent(&Raw::Str("12.5%")).is_err());
    }

    #[test]
    fn range_messages() {
        let e = check_range(&Raw::Int(0), 0, 1, 10000, "weight").unwrap_err();
        assert!(e.to_string().contains("0 is not a usable weight"), "{e}");
        let e = check_range(&Raw::Int(20000), 20000, 1, 10000, "weight").unwrap_err();
        assert_eq!(
            e.to_string(),
            "20000 is out of range: weight must be between 1 and 10000"
        );
        assert_eq!(check_range(&Raw::Int(5), 5, 1, 10, "x").unwrap(), 5);
    }

    #[test]
    fn format_roundtrips() {
        for n in [
            0,
            1,
            1000,
            4096,
            1536 << 10,
            64 << 20,
            1 << 30,
            3 << 40,
            (1 << 30) + 1,
        ] {
            let s = format_size(n);
            assert_eq!(parse_size(&Raw::Str(&s)).unwrap(), Some(n), "{s}");
        }
        assert_eq!(format_size(64 << 20), "64M");
        assert_eq!(format_size(1536 << 10), "1536K");
    }
}
