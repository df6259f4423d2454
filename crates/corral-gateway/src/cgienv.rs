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

use corral_fastcgi::env::CgiEnv;

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

/// Whether a request variable may reach the script.
pub fn is_passed(name: &str, extra: &[String]) -> bool {
    if name.eq_ignore_ascii_case("HTTP_PROXY") {
        return false;
    }
    SAFE.contains(&name) || SAFE_PREFIXES.iter().any(|p| name.starts_with(p) && name.len() > p.len()) || extra.iter().any(|e| e == name)
}

/// A request variable left out of the environment: name and reason.
pub type Dropped = (String, &'static str);

/// The script's environment, sorted by name, and the request variables left
/// out, for the log.
pub fn build(base: &[(String, String)], cgi: &CgiEnv, extra: &[String]) -> (Vec<(String, String)>, Vec<Dropped>) {
    let mut env: std::collections::BTreeMap<String, String> = base.iter().cloned().collect();
    let mut dropped = Vec::new();
    for v in &cgi.vars {
        let name = v.name();
        if !is_passed(name, extra) {
            dropped.push((name.to_string(), "not a CGI variable"));
            continue;
        }
        match std::str::from_utf8(v.value()) {
            Ok(s) => {
                env.insert(name.to_string(), s.to_string());
            }
            Err(_) => dropped.push((name.to_string(), "value is not UTF-8")),
        }
    }
    for d in &cgi.dropped {
        let reason = match d.reason {
            corral_fastcgi::DropReason::Httpoxy => "HTTP_PROXY (httpoxy)",
            corral_fastcgi::DropReason::InvalidName => "invalid name",
            corral_fastcgi::DropReason::NulInValue => "NUL in value",
            corral_fastcgi::DropReason::Overridden => continue,
        };
        dropped.push((String::from_utf8_lossy(&d.name).into_owned(), reason));
    }
    // RFC 3875 §4.1.4 and §4.1.7: always present.
    env.entry("GATEWAY_INTERFACE".into()).or_insert_with(|| "CGI/1.1".into());
    env.entry("QUERY_STRING".into()).or_default();
    (env.into_iter().collect(), dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_fastcgi::cgi_env_from_params;

    fn p(n: &str, v: &[u8]) -> (Vec<u8>, Vec<u8>) {
        (n.as_bytes().to_vec(), v.to_vec())
    }

    #[test]
    fn passes_cgi_variables_and_keeps_the_base() {
        let base = vec![("PATH".to_string(), "/usr/bin:/bin".to_string()), ("HOME".to_string(), "/home/a".to_string())];
        let cgi = cgi_env_from_params(&[
            p("REQUEST_METHOD", b"POST"),
            p("HTTP_X_TOKEN", b"t"),
            p("HTTP_PROXY", b"http://evil:1"),
            p("PATH", b"/tmp/evil"),
            p("LD_PRELOAD", b"/tmp/x.so"),
            p("APP_ENV", b"prod"),
            p("HTTP_", b"x"),
            p("HTTP_BIN", &[0xff, 0xfe]),
        ]);
        let (env, dropped) = build(&base, &cgi, &["APP_ENV".to_string()]);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("PATH"), Some("/usr/bin:/bin"), "the request cannot set PATH");
        assert_eq!(get("LD_PRELOAD"), None);
        assert_eq!(get("HTTP_PROXY"), None);
        assert_eq!(get("REQUEST_METHOD"), Some("POST"));
        assert_eq!(get("HTTP_X_TOKEN"), Some("t"));
        assert_eq!(get("APP_ENV"), Some("prod"));
        assert_eq!(get("GATEWAY_INTERFACE"), Some("CGI/1.1"));
        assert_eq!(get("QUERY_STRING"), Some(""));
        let names: Vec<&str> = dropped.iter().map(|(n, _)| n.as_str()).collect();
        for n in ["PATH", "LD_PRELOAD", "HTTP_", "HTTP_BIN", "HTTP_PROXY"] {
            assert!(names.contains(&n), "{n} reported: {dropped:?}");
        }
    }
}
