//! Building a CGI environment (RFC 3875 §4.1) from FastCGI params.
//!
//! FastCGI params are arbitrary byte pairs; an `execve` environment is not.
//! [`cgi_env_from_params`] keeps the pairs that make sound environment
//! variables and reports the others:
//!
//! * names must be non-empty and made of `[A-Za-z0-9_]` (nginx turns request
//!   header names into `HTTP_*` names of that form);
//! * `HTTP_PROXY` (in any case) is dropped: it is derived from a client's
//!   `Proxy:` request header and would otherwise be read as the proxy
//!   setting by HTTP libraries in the script ("httpoxy", CVE-2016-5385);
//! * values must not contain NUL, which cannot be passed through `execve`;
//! * when a name repeats, the last value wins (as with php-fpm, and as
//!   nginx configurations that override an included `fastcgi_param`
//!   expect); the variable keeps the position of its first occurrence.

use std::collections::HashMap;
use std::ffi::CString;

use crate::params::Pair;

/// One environment variable, valid by construction: a `[A-Za-z0-9_]+` name
/// and a NUL-free value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvVar {
    name: String,
    value: Vec<u8>,
}

impl EnvVar {
    /// Checks `name` and `value` as [`cgi_env_from_params`] does (httpoxy
    /// aside).
    pub fn new(name: &[u8], value: &[u8]) -> Result<Self, DropReason> {
        if !is_valid_env_name(name) {
            return Err(DropReason::InvalidName);
        }
        if value.contains(&0) {
            return Err(DropReason::NulInValue);
        }
        // Valid names are ASCII.
        let name = String::from_utf8_lossy(name).into_owned();
        Ok(Self {
            name,
            value: value.to_vec(),
        })
    }

    /// The variable's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The variable's value (raw bytes: request data need not be UTF-8).
    pub fn value(&self) -> &[u8] {
        &self.value
    }

    /// `NAME=value` as a C string, ready for an `execve` environment.
    pub fn to_cstring(&self) -> CString {
        let mut entry = Vec::with_capacity(self.name.len() + 1 + self.value.len());
        entry.extend_from_slice(self.name.as_bytes());
        entry.push(b'=');
        entry.extend_from_slice(&self.value);
        // Neither the name nor the value contains NUL (checked in `new`), so
        // this cannot fail; the fallback only avoids a panic path.
        CString::new(entry).unwrap_or_default()
    }
}

/// Why a param was not made an environment variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The name is empty or has a byte outside `[A-Za-z0-9_]`.
    InvalidName,
    /// The name is `HTTP_PROXY` (httpoxy).
    Httpoxy,
    /// The value contains a NUL byte.
    NulInValue,
    /// A later param with the same name replaced this one.
    Overridden,
}

/// A param left out of the environment, for logging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedParam {
    /// The param's name, raw.
    pub name: Vec<u8>,
    /// Why it was left out.
    pub reason: DropReason,
}

/// The result of [`cgi_env_from_params`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgiEnv {
    /// The variables, in order of first occurrence.
    pub vars: Vec<EnvVar>,
    /// The params left out, in order.
    pub dropped: Vec<DroppedParam>,
}

impl CgiEnv {
    /// Value of the variable `name`, if present.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.vars
            .iter()
            .find(|var| var.name == name)
            .map(|var| var.value.as_slice())
    }

    /// The environment as `NAME=value` C strings.
    pub fn to_cstrings(&self) -> Vec<CString> {
        self.vars.iter().map(EnvVar::to_cstring).collect()
    }
}

/// Whether `name` is a usable variable name: non-empty `[A-Za-z0-9_]`.
pub fn is_valid_env_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Builds the CGI environment from a request's params (see the module
/// documentation for the rules).
pub fn cgi_env_from_params(params: &[Pair]) -> CgiEnv {
    let mut env = CgiEnv::default();
    let mut index_of: HashMap<String, usize> = HashMap::new();
    for (name, value) in params {
        if name.eq_ignore_ascii_case(b"HTTP_PROXY") {
            env.dropped.push(DroppedParam {
                name: name.clone(),
                reason: DropReason::Httpoxy,
            });
            continue;
        }
        let var = match EnvVar::new(name, value) {
            Ok(var) => var,
            Err(reason) => {
                env.dropped.push(DroppedParam {
                    name: name.clone(),
                    reason,
                });
                continue;
            }
        };
        match index_of.get(&var.name) {
            Some(&index) => {
                env.dropped.push(DroppedParam {
                    name: name.clone(),
                    reason: DropReason::Overridden,
                });
                env.vars[index] = var;
            }
            None => {
                index_of.insert(var.name.clone(), env.vars.len());
                env.vars.push(var);
            }
        }
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(name: &str, value: &str) -> Pair {
        (name.as_bytes().to_vec(), value.as_bytes().to_vec())
    }

    #[test]
    fn keeps_valid_params_in_order() {
        let env = cgi_env_from_params(&[
            pair("REQUEST_METHOD", "GET"),
            pair("QUERY_STRING", "a=1&b=2"),
            pair("HTTP_X_FORWARDED_FOR", "10.0.0.1"),
            pair("EMPTY", ""),
        ]);
        assert!(env.dropped.is_empty());
        let names: Vec<&str> = env.vars.iter().map(EnvVar::name).collect();
        assert_eq!(
            names,
            [
                "REQUEST_METHOD",
                "QUERY_STRING",
                "HTTP_X_FORWARDED_FOR",
                "EMPTY"
            ]
        );
        assert_eq!(env.get("QUERY_STRING"), Some(&b"a=1&b=2"[..]));
        assert_eq!(env.get("EMPTY"), Some(&b""[..]));
        assert_eq!(env.get("MISSING"), None);
    }

    #[test]
    fn drops_httpoxy_in_any_case() {
        let env = cgi_env_from_params(&[
            pair("HTTP_PROXY", "http://evil.example:8080"),
            pair("http_proxy", "http://evil.example:8080"),
            pair("HTTP_PROXY_CONNECTION", "keep-alive"),
        ]);
        assert_eq!(env.vars.len(), 1);
        assert_eq!(env.vars[0].name(), "HTTP_PROXY_CONNECTION");
        assert_eq!(
            env.dropped.iter().map(|d| d.reason).collect::<Vec<_>>(),
            [DropReason::Httpoxy, DropReason::Httpoxy]
        );
    }

    #[test]
    fn drops_invalid_names() {
        for name in ["", "HTTP-HOST", "A=B", "X Y", "NAME\0", "ÉTÉ", "PATH/INFO"] {
            let env = cgi_env_from_params(&[pair(name, "v")]);
            assert!(env.vars.is_empty(), "{name:?} accepted");
            assert_eq!(env.dropped[0].reason, DropReason::InvalidName, "{name:?}");
            assert_eq!(env.dropped[0].name, name.as_bytes());
        }
        let env = cgi_env_from_params(&[pair("_1a_Z9", "v")]);
        assert_eq!(env.vars.len(), 1);
    }

    #[test]
    fn drops_values_with_nul_and_keeps_other_bytes() {
        let params = vec![
            (b"BAD".to_vec(), b"a\0b".to_vec()),
            (b"BINARY".to_vec(), vec![0xff, 0xfe, b'\n', b'=']),
        ];
        let env = cgi_env_from_params(&params);
        assert_eq!(
            env.dropped,
            [DroppedParam {
                name: b"BAD".to_vec(),
                reason: DropReason::NulInValue
            }]
        );
        assert_eq!(env.get("BINARY"), Some(&[0xff, 0xfe, b'\n', b'='][..]));
    }

    #[test]
    fn last_duplicate_wins_at_first_position() {
        let env = cgi_env_from_params(&[
            pair("SCRIPT_FILENAME", "/srv/a"),
            pair("QUERY_STRING", "q"),
            pair("SCRIPT_FILENAME", "/srv/b"),
        ]);
        assert_eq!(env.vars[0].name(), "SCRIPT_FILENAME");
        assert_eq!(env.get("SCRIPT_FILENAME"), Some(&b"/srv/b"[..]));
        assert_eq!(env.vars.len(), 2);
        assert_eq!(env.dropped[0].reason, DropReason::Overridden);
    }

    #[test]
    fn cstrings_are_name_equals_value() {
        let params = vec![
            (b"A".to_vec(), b"x=y".to_vec()),
            (b"B".to_vec(), vec![0xc3, 0xa9]),
        ];
        let env = cgi_env_from_params(&params);
        let strings = env.to_cstrings();
        assert_eq!(strings[0].as_bytes(), b"A=x=y");
        assert_eq!(strings[1].as_bytes(), &[b'B', b'=', 0xc3, 0xa9]);
    }

    #[test]
    fn env_var_new_reports_reason() {
        assert_eq!(EnvVar::new(b"", b"v"), Err(DropReason::InvalidName));
        assert_eq!(EnvVar::new(b"N", b"\0"), Err(DropReason::NulInValue));
        assert_eq!(
            EnvVar::new(b"N", b"v").map(|v| v.to_cstring()),
            Ok(CString::new("N=v").unwrap())
        );
    }
}
