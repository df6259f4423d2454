//! The "files" source: /etc/passwd and /etc/group, read like glibc's
//! nss_files reads them (first matching entry wins; comments, blank and
//! malformed lines and NIS `+`/`-` lines are skipped).

use crate::{Group, User};
use std::io;
use std::path::Path;

/// One line of a passwd file: `name:password:uid:gid:gecos:home:shell`.
pub fn parse_passwd_line(line: &str) -> Option<User> {
    let f: Vec<&str> = entry_fields(line)?;
    let [name, _, uid, gid, _, home, shell] = f.as_slice() else { return None };
    Some(User { name: name.to_string(), uid: uid.parse().ok()?, gid: gid.parse().ok()?, home: home.into(), shell: shell.into() })
}

/// One line of a group file: `name:password:gid:member,member`.
pub fn parse_group_line(line: &str) -> Option<Group> {
    let f: Vec<&str> = entry_fields(line)?;
    let [name, _, gid, members] = f.as_slice() else { return None };
    let members = members.split(',').map(str::trim).filter(|m| !m.is_empty()).map(String::from).collect();
    Some(Group { name: name.to_string(), gid: gid.parse().ok()?, members })
}

fn entry_fields(line: &str) -> Option<Vec<&str>> {
    let line = line.trim_end_matches(['\n', '\r']);
    if line.trim().is_empty() || line.starts_with(['#', '+', '-']) {
        return None;
    }
    let f: Vec<&str> = line.split(':').collect();
    (!f[0].is_empty()).then_some(f)
}

fn read(path: &Path) -> io::Result<String> {
    std::fs::read_to_string(path).map_err(|e| io::Error::new(e.kind(), format!("read {}: {e}", path.display())))
}

/// The first entry of the file that `matches`.
pub(crate) fn find<T>(path: &Path, parse: fn(&str) -> Option<T>, matches: impl Fn(&T) -> bool) -> io::Result<Option<T>> {
    Ok(read(path)?.lines().filter_map(parse).find(|e| matches(e)))
}

/// Every entry of the file.
pub(crate) fn all<T>(path: &Path, parse: fn(&str) -> Option<T>) -> io::Result<Vec<T>> {
    Ok(read(path)?.lines().filter_map(parse).collect())
}
