//! Which sources /etc/nsswitch.conf names for a database.

use std::io;
use std::path::Path;

/// Sources whose entries never need `getent`: `files` is read directly, and
/// `systemd` (nss-systemd) only adds systemd's dynamic service users and
/// its fallback root/nobody entries, none of which can be a tenant.
const IN_PROCESS: [&str; 2] = ["files", "systemd"];

/// The sources named for `db` (`passwd`, `group`...); glibc's default,
/// `files`, when the file or the line is missing.
pub(crate) fn sources(text: &str, db: &str) -> Vec<String> {
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        let Some((name, rest)) = line.split_once(':') else { continue };
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

pub(crate) fn has_other_sources(path: &Path, db: &str) -> io::Result<bool> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io::Error::new(e.kind(), format!("read {}: {e}", path.display()))),
    };
    Ok(sources(&text, db).iter().any(|s| !IN_PROCESS.contains(&s.as_str())))
}
