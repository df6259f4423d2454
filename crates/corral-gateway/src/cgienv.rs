//! The environment a CGI script gets (RFC 3875 §4.1): the sandbox's base
//! environment (PATH, HOME, USER... from the tenant's plan), then the
//! request's meta-variables.
//!
//! Like suEXEC, only known-safe names pass: the RFC 3875 meta-variables,
//! the usual extensions of nginx/Apache (`REQUEST_URI`, `SCRIPT_FILENAME`,
//! `DOCUMENT_ROOT`, `HTTPS`, `REDIRECT_*`...), `HTTP_*` (request headers,
//! minus `HTTP_PROXY`: "httpoxy") and `SSL_*`, plus names listed in the map
//! file's `pass_env`. Nothing from the request can set `PATH`,
//! `LD_PRELOAD` or the like. Values that are not UTF-8 are dropped (the
//! control protocol carries strings) and reported.

use corral_fastcgi::env::is_valid_env_name;
use corral_fastcgi::params::Pair;

/// RFC 3875 §4.1 meta-variables and common server extensions (suEXEC's
/// `safe_env_lst`, plus nginx's names).
const SAFE: &[&str] = &[
    "AUTH_TYPE",
    "CONTENT_LENGTH",
    "CONTENT_TYPE",
    "CONTEXT_DOCUMENT_ROOT",
    "CONTEXT_PREFIX",
    "DATE_GMT",
    "DATE_LOCAL",
    "DOCUMENT_ARGS",
    "DOCUMENT_NAME",
    "DOCUMENT_PATH_INFO",
    "DOCUMENT_ROOT",
    "DOCUMENT_URI",
    "GATEWAY_INTERFACE",
    "HTTPS",
    "LAST_MODIFIED",
    "PATH_INFO",
    "PATH_TRANSLATED",
    "QUERY_STRING",
    "QUERY_STRING_UNESCAPED",
    "REMOTE_ADDR",
    "REMOTE_HOST",
    "REMOTE_IDENT",
    "REMOTE_PORT",
    "REMOTE_USER",
    "REQUEST_METHOD",
    "REQUEST_SCHEME",
    "REQUEST_URI",
    "SCRIPT_FILENAME",
    "SCRIPT_NAME",
    "SCRIPT_URI",
    "SCRIPT_URL",
    "SERVER_ADDR",
    "SERVER_ADMIN",
    "SERVER_NAME",
    "SERVER_PORT",
    "SERVER_PROTOCOL",
    "SERVER_SIGNATURE",
    "SERVER_SOFTWARE",
    "TZ",
    "UNIQUE_ID",
    "USER_NAME",
];

const SAFE_PREFIXES: &[&str] = &["HTTP_", "SSL_", "REDIRECT_"];

/// Variables that change how every program (the loader, the shell) runs:
/// never taken from a request, not even through `pass_env`.
pub fn is_unsafe(name: &str) -> bool {
    matches!(name, "PATH" | "IFS" | "ENV" | "BASH_ENV" | "GCONV_PATH") || name.starts_with("LD_")
}

/// Whether a request variable may reach the script.
pub fn is_passed(name: &str, extra: &[String]) -> bool {
    if name.eq_ignore_ascii_case("HTTP_PROXY") || is_unsafe(name) {
        return false;
    }
    SAFE.contains(&name)
        || SAFE_PREFIXES
            .iter()
            .any(|p| name.starts_with(p) && name.len() > p.len())
        || extra.iter().any(|e| e == name)
}

/// Why a request variable was left out of the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drop {
    /// `HTTP_PROXY` (httpoxy): a `Proxy:` request header.
    Httpoxy,
    /// Not a `[A-Za-z0-9_]+` name.
    InvalidName,
    /// A NUL byte in the value.
    NulInValue,
    /// PATH, IFS, LD_*... ([`is_unsafe`]).
    Unsafe,
    /// Not a CGI variable, and not in the map's `pass_env`.
    NotCgi,
    /// The value is not UTF-8.
    NotUtf8,
}

impl Drop {
    /// The rule's name, for the log.
    pub fn rule(self) -> &'static str {
        match self {
            Drop::Httpoxy => "httpoxy",
            Drop::InvalidName => "invalid-name",
            Drop::NulInValue => "nul-in-value",
            Drop::Unsafe => "unsafe",
            Drop::NotCgi => "not-cgi",
            Drop::NotUtf8 => "not-utf8",
        }
    }

    /// What the rule says, and how to get such a variable through (if one can).
    pub fn explain(self, name: &str) -> String {
        match self {
            Drop::Httpoxy => "a Proxy: request header (httpoxy); never passed".into(),
            Drop::InvalidName => "not a variable name of [A-Za-z0-9_]; never passed".into(),
            Drop::NulInValue => "its value has a NUL byte; never passed".into(),
            Drop::Unsafe => {
                "it changes how every program runs (PATH, IFS, ENV, BASH_ENV, GCONV_PATH, LD_*); never passed".into()
            }
            Drop::NotCgi => format!(
                "not a CGI/1.1 variable; to pass it, add pass_env = [\"{name}\"] to the gateway's map file (--map)"
            ),
            Drop::NotUtf8 => "its value is not UTF-8; never passed".into(),
        }
    }
}

/// A request variable left out of the environment: name and rule.
pub type Dropped = (String, Drop);

/// The value of the request param `name` (the last one wins, as in
/// [`from_params`]).
pub fn param<'a>(params: &'a [Pair], name: &str) -> Option<&'a [u8]> {
    params
        .iter()
        .rev()
        .find(|(n, _)| n == name.as_bytes())
        .map(|(_, v)| v.as_slice())
}

/// Whether the request has a body: RFC 3875 §4.1.2, CONTENT_LENGTH unset,
/// empty or 0 means none (an unparsable length is taken as a body).
pub fn has_body(params: &[Pair]) -> bool {
    param(params, "CONTENT_LENGTH").is_some_and(|v| {
        std::str::from_utf8(v)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map_or(!v.is_empty(), |n| n > 0)
    })
}

/// The script's environment, sorted by name, and the request params left
/// out, for the log: `base` (the sandbox's environment), then every param
/// that makes a sound variable (see `corral_fastcgi::env`: a
/// `[A-Za-z0-9_]+` name, no NUL, not `HTTP_PROXY`) and passes
/// [`is_passed`] with a UTF-8 value. A later param replaces an earlier one
/// of the same name and a param replaces a base variable (which the
/// filter allows only for `TZ`).
///
/// One pass with one allocation per kept variable: this runs for every
/// request.
pub fn from_params(
    base: &[(String, String)],
    params: &[Pair],
    extra: &[String],
) -> (Vec<(String, String)>, Vec<Dropped>) {
    let mut env: Vec<(String, String)> = Vec::with_capacity(base.len() + params.len() + 2);
    // RFC 3875 §4.1.4 and §4.1.7: always present, unless set.
    env.push(("GATEWAY_INTERFACE".into(), "CGI/1.1".into()));
    env.push(("QUERY_STRING".into(), String::new()));
    env.extend(base.iter().cloned());
    let mut dropped = Vec::new();
    for (name, value) in params {
        let refused = if name.eq_ignore_ascii_case(b"HTTP_PROXY") {
            Some(Drop::Httpoxy)
        } else if !is_valid_env_name(name) {
            Some(Drop::InvalidName)
        } else if value.contains(&0) {
            Some(Drop::NulInValue)
        } else {
            None
        };
        if let Some(why) = refused {
            dropped.push((String::from_utf8_lossy(name).into_owned(), why));
            continue;
        }
        // A valid name is ASCII.
        let name = String::from_utf8_lossy(name);
        if !is_passed(&name, extra) {
            let why = if is_unsafe(&name) {
                Drop::Unsafe
            } else {
                Drop::NotCgi
            };
            dropped.push((name.into_owned(), why));
            continue;
        }
        match std::str::from_utf8(value) {
            Ok(v) => env.push((name.into_owned(), v.to_string())),
            Err(_) => dropped.push((name.into_owned(), Drop::NotUtf8)),
        }
    }
    // Stable: of equal names the last one pushed is the one kept.
    env.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out: Vec<(String, String)> = Vec::with_capacity(env.len());
    for kv in env {
        match out.last_mut() {
            Some(last) if last.0 == kv.0 => *last = kv,
            _ => out.push(kv),
        }
    }
    (out, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(n: &str, v: &[u8]) -> (Vec<u8>, Vec<u8>) {
        (n.as_bytes().to_vec(), v.to_vec())
    }

    #[test]
    fn passes_cgi_variables_and_keeps_the_base() {
        let base = vec![
            ("PATH".to_string(), "/usr/bin:/bin".to_string()),
            ("HOME".to_string(), "/home/a".to_string()),
        ];
        let params = [
            p("REQUEST_METHOD", b"GET"),
            p("REQUEST_METHOD", b"POST"),
            p("HTTP_X_TOKEN", b"t"),
            p("HTTP_PROXY", b"http://evil:1"),
            p("PATH", b"/tmp/evil"),
            p("LD_PRELOAD", b"/tmp/x.so"),
            p("APP_ENV", b"prod"),
            p("HTTP_", b"x"),
            p("HTTP_BIN", &[0xff, 0xfe]),
            p("BAD-NAME", b"x"),
            p("HTTP_NUL", b"a\0b"),
            p("TZ", b"UTC"),
        ];
        let base = [base, vec![("TZ".to_string(), "Europe/Paris".to_string())]].concat();
        let (env, dropped) = from_params(&base, &params, &["APP_ENV".to_string()]);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(
            get("PATH"),
            Some("/usr/bin:/bin"),
            "the request cannot set PATH"
        );
        assert_eq!(get("LD_PRELOAD"), None);
        assert_eq!(get("HTTP_PROXY"), None);
        assert_eq!(
            get("REQUEST_METHOD"),
            Some("POST"),
            "the last param of a name wins"
        );
        assert_eq!(
            get("TZ"),
            Some("UTC"),
            "a passed param replaces the base value"
        );
        assert_eq!(env.iter().filter(|(n, _)| n == "REQUEST_METHOD").count(), 1);
        let mut sorted = env.clone();
        sorted.sort();
        assert_eq!(env, sorted, "sorted by name");
        assert_eq!(param(&params, "REQUEST_METHOD"), Some(&b"POST"[..]));
        assert_eq!(param(&params, "CONTENT_LENGTH"), None);
        assert!(!has_body(&params));
        for (len, body) in [
            (&b""[..], false),
            (b"0", false),
            (b"12", true),
            (b"x", true),
        ] {
            assert_eq!(has_body(&[p("CONTENT_LENGTH", len)]), body, "{len:?}");
        }
        assert_eq!(get("HTTP_X_TOKEN"), Some("t"));
        assert_eq!(get("APP_ENV"), Some("prod"));
        assert_eq!(get("GATEWAY_INTERFACE"), Some("CGI/1.1"));
        assert_eq!(get("QUERY_STRING"), Some(""));
        let names: Vec<&str> = dropped.iter().map(|(n, _)| n.as_str()).collect();
        for n in [
            "PATH",
            "LD_PRELOAD",
            "HTTP_",
            "HTTP_BIN",
            "HTTP_PROXY",
            "BAD-NAME",
            "HTTP_NUL",
        ] {
            assert!(names.contains(&n), "{n} reported: {dropped:?}");
        }
        let why = |n: &str| dropped.iter().find(|(m, _)| m == n).map(|(_, w)| *w);
        assert_eq!(why("HTTP_PROXY"), Some(Drop::Httpoxy));
        assert_eq!(why("BAD-NAME"), Some(Drop::InvalidName));
        assert_eq!(why("HTTP_NUL"), Some(Drop::NulInValue));
        assert_eq!(why("HTTP_BIN"), Some(Drop::NotUtf8));
        assert_eq!(why("LD_PRELOAD"), Some(Drop::Unsafe));
        assert_eq!(why("PATH"), Some(Drop::Unsafe));
        let (_, d) = from_params(&[], &[p("CGIT_CONFIG", b"/x")], &[]);
        assert_eq!(d, [("CGIT_CONFIG".to_string(), Drop::NotCgi)]);
        assert!(Drop::NotCgi
            .explain("CGIT_CONFIG")
            .contains("pass_env = [\"CGIT_CONFIG\"]"));
        let (env, d) = from_params(&[], &[p("CGIT_CONFIG", b"/x")], &["CGIT_CONFIG".into()]);
        assert!(d.is_empty() && env.iter().any(|(n, _)| n == "CGIT_CONFIG"));
    }
}
