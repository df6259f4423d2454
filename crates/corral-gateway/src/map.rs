//! The gateway's map file (TOML, reloaded on SIGHUP): which tenant serves a
//! host or a document root, and the policy knobs of the safety checks.
//!
//! ```toml
//! min_uid = 1000                       # tenants below this uid are refused
//! allow_dirs = ["/srv/www/$USER"]      # script locations besides $HOME
//! unmapped = "owner"                   # "owner": the script's owner; "deny": 403
//! pass_env = ["APP_ENV"]               # extra params passed to scripts
//! system_cgi = ["/usr/lib/cgi-bin"]    # root's CGI programs tenants may run
//!
//! [interpreters]                       # extension -> interpreter (no shebang needed)
//! ".php" = "/usr/bin/php-cgi"
//!
//! [hosts]                              # Host header (port ignored) -> tenant
//! "example.com" = "alice"
//! "*.example.org" = "bob"              # any subdomain of example.org
//!
//! [docroots]                           # directory -> tenant (longest match)
//! "/srv/www/alice" = "alice"
//! ```
//!
//! Without a map file every request is served by the owner of its script,
//! as Apache's suEXEC does for `~user` requests.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// Default lowest tenant uid (suEXEC's `AP_UID_MIN` is often 1000 too).
pub const DEFAULT_MIN_UID: u32 = 1000;

#[derive(Debug, thiserror::Error)]
pub enum MapError {
    #[error("read map file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("map file {}: {source}", path.display())]
    Parse {
        path: PathBuf,
        source: toml::de::Error,
    },
    #[error("map file {}: {what} (expected {expected})", path.display())]
    Invalid {
        path: PathBuf,
        what: String,
        expected: &'static str,
    },
}

/// What to do with a request that no `[hosts]`/`[docroots]` entry matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Unmapped {
    /// Run it as the owner of the script (suEXEC's rule).
    #[default]
    Owner,
    /// Refuse it (403).
    Deny,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MapFile {
    #[serde(default)]
    min_uid: Option<u32>,
    #[serde(default)]
    allow_dirs: Vec<String>,
    #[serde(default)]
    unmapped: Unmapped,
    #[serde(default)]
    pass_env: Vec<String>,
    #[serde(default)]
    system_cgi: Vec<String>,
    #[serde(default)]
    interpreters: BTreeMap<String, String>,
    #[serde(default)]
    hosts: BTreeMap<String, String>,
    #[serde(default)]
    docroots: BTreeMap<String, String>,
}

/// The parsed map and policy.
#[derive(Debug, Clone)]
pub struct TenantMap {
    pub min_uid: u32,
    /// Templates with `$USER` and `$HOME`, expanded per tenant.
    pub allow_dirs: Vec<String>,
    pub unmapped: Unmapped,
    /// Names of FastCGI params passed to scripts besides the CGI ones.
    pub pass_env: Vec<String>,
    /// Trusted directories of root's CGI programs (normalised): a script in
    /// one runs as the tenant the request is for (see [`crate::safety`]).
    pub system_cgi: Vec<PathBuf>,
    /// File name extensions (with the dot) -> the interpreter that runs
    /// such scripts (argv: interpreter, script), as Apache's `Action`.
    pub interpreters: Vec<(String, PathBuf)>,
    /// Exact host names (lowercase) -> tenant.
    hosts: BTreeMap<String, String>,
    /// Suffixes from `*.domain` entries (".domain") -> tenant.
    wildcards: Vec<(String, String)>,
    /// Document roots (absolute, normalised), longest first.
    docroots: Vec<(PathBuf, String)>,
}

impl Default for TenantMap {
    fn default() -> Self {
        TenantMap {
            min_uid: DEFAULT_MIN_UID,
            allow_dirs: Vec::new(),
            unmapped: Unmapped::Owner,
            pass_env: Vec::new(),
            system_cgi: Vec::new(),
            interpreters: Vec::new(),
            hosts: BTreeMap::new(),
            wildcards: Vec::new(),
            docroots: Vec::new(),
        }
    }
}

/// Why a request was mapped to a tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MappedBy {
    Host(String),
    Docroot(PathBuf),
}

impl TenantMap {
    pub fn load(path: &Path) -> Result<TenantMap, MapError> {
        let text = std::fs::read_to_string(path).map_err(|source| MapError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        TenantMap::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<TenantMap, MapError> {
        let f: MapFile = toml::from_str(text).map_err(|source| MapError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
        let invalid = |what: String, expected| MapError::Invalid {
            path: path.to_path_buf(),
            what,
            expected,
        };
        let mut m = TenantMap {
            min_uid: f.min_uid.unwrap_or(DEFAULT_MIN_UID),
            unmapped: f.unmapped,
            ..TenantMap::default()
        };
        for (host, tenant) in f.hosts {
            check_tenant(&tenant).map_err(|e| {
                invalid(
                    format!("[hosts] {host:?} = {tenant:?}: {e}"),
                    "a Unix user name",
                )
            })?;
            let h = host.trim_end_matches('.').to_ascii_lowercase();
            if let Some(domain) = h.strip_prefix("*.") {
                m.wildcards.push((format!(".{domain}"), tenant));
            } else if !h.is_empty() && !h.contains(['*', '/', ' ', ':']) {
                m.hosts.insert(h, tenant);
            } else {
                return Err(invalid(
                    format!("[hosts] key {host:?}"),
                    "a host name or *.domain",
                ));
            }
        }
        m.wildcards.sort_by_key(|(d, _)| std::cmp::Reverse(d.len()));
        for (dir, tenant) in f.docroots {
            check_tenant(&tenant).map_err(|e| {
                invalid(
                    format!("[docroots] {dir:?} = {tenant:?}: {e}"),
                    "a Unix user name",
                )
            })?;
            let p = normalize(Path::new(&dir)).ok_or_else(|| {
                invalid(
                    format!("[docroots] key {dir:?}"),
                    "an absolute path without '..'",
                )
            })?;
            m.docroots.push((p, tenant));
        }
        m.docroots
            .sort_by_key(|(p, _)| std::cmp::Reverse(p.components().count()));
        for d in &f.allow_dirs {
            // Checked as expanded for a typical tenant.
            let e = expand(d, "user", Path::new("/home/user"));
            if !e.starts_with('/') || e.split('/').any(|c| c == "..") || e.contains('$') {
                return Err(invalid(
                    format!("allow_dirs entry {d:?}"),
                    "an absolute path without '..', using only $USER and $HOME",
                ));
            }
        }
        for name in &f.pass_env {
            if !corral_fastcgi::env::is_valid_env_name(name.as_bytes()) {
                return Err(invalid(
                    format!("pass_env entry {name:?}"),
                    "a variable name of [A-Za-z0-9_]",
                ));
            }
            if crate::cgienv::is_unsafe(name) {
                return Err(invalid(
                    format!("pass_env entry {name:?} changes how every program runs"),
                    "a variable that is not PATH, IFS, ENV, BASH_ENV, GCONV_PATH or LD_*",
                ));
            }
        }
        for d in &f.system_cgi {
            let p = normalize(Path::new(d))
                .filter(|p| p != Path::new("/"))
                .ok_or_else(|| {
                    invalid(
                        format!("system_cgi entry {d:?}"),
                        "an absolute directory other than / without '..'",
                    )
                })?;
            m.system_cgi.push(p);
        }
        for (ext, interp) in f.interpreters {
            let ok_ext = ext.len() > 1
                && ext.starts_with('.')
                && ext[1..]
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !ok_ext {
                return Err(invalid(
                    format!("[interpreters] key {ext:?}"),
                    "a file name extension such as \".php\"",
                ));
            }
            let p = normalize(Path::new(&interp)).ok_or_else(|| {
                invalid(
                    format!("[interpreters] {ext:?} = {interp:?}"),
                    "the absolute path of a program without '..'",
                )
            })?;
            m.interpreters.push((ext, p));
        }
        m.allow_dirs = f.allow_dirs;
        m.pass_env = f.pass_env;
        Ok(m)
    }

    /// The tenant mapped for a request: by its host (`HTTP_HOST`, else
    /// `SERVER_NAME`), else by the document root containing the script.
    pub fn lookup(&self, host: Option<&str>, script: &Path) -> Option<(String, MappedBy)> {
        if let Some(h) = host.map(normalize_host) {
            if let Some(t) = self.hosts.get(&h) {
                return Some((t.clone(), MappedBy::Host(h)));
            }
            if let Some((_, t)) = self
                .wildcards
                .iter()
                .find(|(suffix, _)| h.ends_with(suffix.as_str()))
            {
                return Some((t.clone(), MappedBy::Host(h)));
            }
        }
        let script = normalize(script)?;
        self.docroots
            .iter()
            .find(|(root, _)| script.starts_with(root))
            .map(|(root, t)| (t.clone(), MappedBy::Docroot(root.clone())))
    }

    /// The trusted system CGI directory `script` (normalised) lies in.
    pub fn system_dir(&self, script: &Path) -> Option<&Path> {
        self.system_cgi
            .iter()
            .find(|d| script.starts_with(d))
            .map(|d| d.as_path())
    }

    /// The interpreter configured for `script`'s extension.
    pub fn interpreter(&self, script: &Path) -> Option<&Path> {
        let name = script.file_name()?.to_str()?;
        self.interpreters
            .iter()
            .find(|(ext, _)| name.len() > ext.len() && name.ends_with(ext.as_str()))
            .map(|(_, p)| p.as_path())
    }

    /// The directories a tenant's scripts may live in: the home, then the
    /// expanded `allow_dirs`.
    pub fn areas(&self, user: &str, home: &Path) -> Vec<PathBuf> {
        let mut v = vec![home.to_path_buf()];
        v.extend(
            self.allow_dirs
                .iter()
                .map(|d| PathBuf::from(expand(d, user, home))),
        );
        v
    }
}

/// `$USER`/`${USER}` and `$HOME`/`${HOME}` in an `allow_dirs` entry.
fn expand(template: &str, user: &str, home: &Path) -> String {
    let home = home.to_string_lossy();
    template
        .replace("${USER}", user)
        .replace("$USER", user)
        .replace("${HOME}", &home)
        .replace("$HOME", &home)
}

/// `Host` without port, lowercase, no trailing dot.
fn normalize_host(h: &str) -> String {
    let h = h.trim();
    let no_port = if h.starts_with('[') {
        h.split_once(']')
            .map(|(a, _)| format!("{a}]"))
            .unwrap_or_else(|| h.to_string())
    } else {
        h.rsplit_once(':')
            .filter(|(_, p)| p.bytes().all(|b| b.is_ascii_digit()))
            .map(|(a, _)| a.to_string())
            .unwrap_or_else(|| h.to_string())
    };
    no_port.trim_end_matches('.').to_ascii_lowercase()
}

/// An absolute path with `.` and repeated slashes removed; `None` if it is
/// relative or has a `..` component (nothing here resolves `..` lexically).
pub fn normalize(p: &Path) -> Option<PathBuf> {
    if !p.is_absolute() {
        return None;
    }
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(s) => out.push(s),
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// A Unix user name as corral takes one (corral-users' check).
fn check_tenant(name: &str) -> Result<(), &'static str> {
    corral_users::check_user_name(name).map_err(|_| "not a tenant name")
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = r#"
min_uid = 2000
allow_dirs = ["/srv/www/$USER", "${HOME}/../x"]
"#;

    #[test]
    fn rejects_parent_dirs_in_allow_dirs() {
        let e = TenantMap::parse(MAP, Path::new("m.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("allow_dirs entry") && e.contains("m.toml"),
            "{e}"
        );
    }

    #[test]
    fn maps_hosts_wildcards_and_docroots() {
        let text = r#"
unmapped = "deny"
pass_env = ["APP_ENV"]
[hosts]
"Example.COM." = "alice"
"*.example.org" = "bob"
[docroots]
"/srv/www" = "carol"
"/srv/www/dave/" = "dave"
"#;
        let m = TenantMap::parse(text, Path::new("m.toml")).unwrap();
        assert_eq!(m.unmapped, Unmapped::Deny);
        assert_eq!(m.min_uid, DEFAULT_MIN_UID);
        let s = Path::new("/x/y.cgi");
        assert_eq!(m.lookup(Some("example.com:8080"), s).unwrap().0, "alice");
        assert_eq!(m.lookup(Some("a.b.example.org"), s).unwrap().0, "bob");
        assert!(
            m.lookup(Some("example.org"), s).is_none(),
            "the bare domain is not a subdomain"
        );
        assert_eq!(
            m.lookup(None, Path::new("/srv/www/dave/cgi/a.cgi"))
                .unwrap()
                .0,
            "dave",
            "longest docroot wins"
        );
        assert_eq!(
            m.lookup(None, Path::new("/srv/www//x/./a.cgi")).unwrap().0,
            "carol"
        );
        assert!(
            m.lookup(None, Path::new("/srv/wwwx/a.cgi")).is_none(),
            "component-wise prefix"
        );
        assert!(
            m.lookup(None, Path::new("/srv/www/../etc/a")).is_none(),
            "'..' never matches"
        );
        assert_eq!(
            m.areas("bob", Path::new("/home/bob")),
            [PathBuf::from("/home/bob")]
        );
    }

    #[test]
    fn rejects_bad_entries_with_the_file_name() {
        for bad in [
            "[hosts]\n\"a b\" = \"x\"",
            "[hosts]\n\"a\" = \"Root\"",
            "[docroots]\n\"rel\" = \"x\"",
            "pass_env = [\"A-B\"]",
            "pass_env = [\"LD_PRELOAD\"]",
            "pass_env = [\"PATH\"]",
            "system_cgi = [\"relative\"]",
            "system_cgi = [\"/\"]",
            "system_cgi = [\"/usr/../etc\"]",
            "[interpreters]\n\"php\" = \"/usr/bin/php-cgi\"",
            "[interpreters]\n\".php\" = \"php-cgi\"",
            "unknown = 1",
            "unmapped = \"maybe\"",
        ] {
            let e = TenantMap::parse(bad, Path::new("/etc/corral/gateway.toml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("/etc/corral/gateway.toml"), "{bad}: {e}");
        }
    }

    #[test]
    fn expands_allow_dirs_per_tenant() {
        let m = TenantMap::parse(
            "allow_dirs = [\"/srv/www/$USER\", \"${HOME}/cgi\"]",
            Path::new("m"),
        )
        .unwrap();
        assert_eq!(
            m.areas("al", Path::new("/home/al")),
            [
                PathBuf::from("/home/al"),
                PathBuf::from("/srv/www/al"),
                PathBuf::from("/home/al/cgi")
            ]
        );
    }

    #[test]
    fn system_cgi_dirs_and_interpreters() {
        let m = TenantMap::parse(
            "system_cgi = [\"/usr/lib/cgi-bin/\", \"/usr/share/gitweb\"]\n[interpreters]\n\".php\" = \"/usr/bin/php-cgi\"\n",
            Path::new("m"),
        )
        .unwrap();
        assert_eq!(
            m.system_dir(Path::new("/usr/lib/cgi-bin/cgit.cgi")),
            Some(Path::new("/usr/lib/cgi-bin"))
        );
        assert_eq!(m.system_dir(Path::new("/usr/lib/cgi-binx/a")), None);
        assert_eq!(m.system_dir(Path::new("/usr/bin/id")), None);
        assert_eq!(
            m.interpreter(Path::new("/home/a/index.php")),
            Some(Path::new("/usr/bin/php-cgi"))
        );
        assert_eq!(m.interpreter(Path::new("/home/a/.php")), None);
        assert_eq!(m.interpreter(Path::new("/home/a/x.cgi")), None);
    }

    #[test]
    fn host_normalisation() {
        assert_eq!(normalize_host(" WWW.Example.com:443 "), "www.example.com");
        assert_eq!(normalize_host("[::1]:80"), "[::1]");
        assert_eq!(normalize_host("example.com."), "example.com");
    }
}
