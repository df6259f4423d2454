//! Which sources /etc/nsswitch.conf names for a database.

use std::io;
use std::path::Path;

/// How a database is to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Order {
    /// `files` comes first: the files answer before anything else (else
    /// every lookup goes to `getent`, which follows the configured order).
    pub files_first: bool,
    /// Some other source is named: a lookup the files cannot answer goes to
    /// `getent`.
    pub others: bool,
    /// A source other than `files` and `systemd` is named. nss-systemd adds
    /// no group memberships for users of the files, so a group list of a
    /// user from the files needs `getent` only then.
    pub others_beyond_systemd: bool,
}

pub(crate) fn order(sources: &[String]) -> Order {
    Order {
        files_first: sources.first().is_some_and(|s| s == "files"),
        others: sources.iter().any(|s| s != "files"),
        others_beyond_systemd: sources.iter().any(|s| s != "files" && s != "systemd"),
    }
}

/// The sources named for `db` (`passwd`, `group`...); glibc's default,
/// `files`, when the file or the line is missing.
pub(crate) fn sources(text: &str, db: &str) -> Vec<String> {
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        if name.trim() != db {
            continue;
        }
        // `[NOTFOUND=return]` and the like are actions, not sources.
        let mut in_action = false;
        let mut out = Vec::new();
        for w in rest.split_whitespace() {
            if w.starts_with('[') {
                in_action = true;
            }
            if !in_action {
                out.push(w.to_string());
            }
            if w.ends_with(']') {
                in_action = false;
            }
        }
        return out;
    }
    vec!["files".to_string()]
}

/// The order for `db` in the nsswitch.conf at `path`.
pub(crate) fn read_order(path: &Path, db: &str) -> io::Result<Order> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("read {}: {e}", path.display()),
            ))
        }
    };
    Ok(order(&sources(&text, db)))
}
