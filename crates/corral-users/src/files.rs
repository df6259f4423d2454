//! The "files" source: /etc/passwd and /etc/group, read like glibc's
//! nss_files reads them (first matching entry wins; comments, blank and
//! malformed lines and NIS `+`/`-` lines are skipped).

use crate::{Group, User};
use std::io;
use std::path::Path;

/// One line of a passwd file: `name:password:uid:gid:gecos:home:shell`.
/// As glibc reads it: the shell is the rest of the line and may be missing.
pub fn parse_passwd_line(line: &str) -> Option<User> {
    let f = entry_fields(line, 7)?;
    let [name, _, uid, gid, _, home, rest @ ..] = f.as_slice() else {
        return None;
    };
    let shell = rest.first().copied().unwrap_or("");
    Some(User {
        name: name.to_string(),
        uid: uid.trim().parse().ok()?,
        gid: gid.trim().parse().ok()?,
        home: home.into(),
        shell: shell.into(),
    })
}

/// One line of a group file: `name:password:gid:member,member`. As glibc
/// reads it: the member list is the rest of the line and may be missing.
pub fn parse_group_line(line: &str) -> Option<Group> {
    let f = entry_fields(line, 4)?;
    let [name, _, gid, rest @ ..] = f.as_slice() else {
        return None;
    };
    let members = rest.first().map_or_else(Vec::new, |m| {
        m.split(',')
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(String::from)
            .collect()
    });
    Some(Group {
        name: name.to_string(),
        gid: gid.trim().parse().ok()?,
        members,
    })
}

fn entry_fields(line: &str, at_most: usize) -> Option<Vec<&str>> {
    let line = line.trim_end_matches(['\n', '\r']);
    if line.trim().is_empty() || line.starts_with(['#', '+', '-']) {
        return None;
    }
    let f: Vec<&str> = line.splitn(at_most, ':').collect();
    (!f[0].is_empty()).then_some(f)
}

fn read(path: &Path) -> io::Result<String> {
    std::fs::read_to_string(path)
        .map_err(|e| io::Error::new(e.kind(), format!("read {}: {e}", path.display())))
}

/// The first entry of the file that `matches`.
pub(crate) fn find<T>(
    path: &Path,
    parse: fn(&str) -> Option<T>,
    matches: impl Fn(&T) -> bool,
) -> io::Result<Option<T>> {
    Ok(read(path)?.lines().filter_map(parse).find(|e| matches(e)))
}

/// Every entry of the file.
pub(crate) fn all<T>(path: &Path, parse: fn(&str) -> Option<T>) -> io::Result<Vec<T>> {
    Ok(read(path)?.lines().filter_map(parse).collect())
}
