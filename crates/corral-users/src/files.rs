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

/// The first entry of the file that `matches`. Every entry `matches`
/// accepts holds `key` in its line (the name asked for, or the id as
/// digits: any text an id parses from contains them), so only the lines
/// holding `key` are parsed: with thousands of users a lookup is one
/// substring search through the file, not an allocation per line.
pub(crate) fn find<T>(
    path: &Path,
    key: &str,
    parse: fn(&str) -> Option<T>,
    matches: impl Fn(&T) -> bool,
) -> io::Result<Option<T>> {
    Ok(find_in(&read(path)?, key, parse, matches))
}

/// [`find`] in a file's text.
pub(crate) fn find_in<T>(
    text: &str,
    key: &str,
    parse: fn(&str) -> Option<T>,
    matches: impl Fn(&T) -> bool,
) -> Option<T> {
    if key.is_empty() {
        return text.lines().filter_map(parse).find(|e| matches(e));
    }
    // The lines holding `key`, in file order, each once.
    let mut next_line = 0;
    for (at, _) in text.match_indices(key) {
        if at < next_line {
            continue;
        }
        let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
        next_line = end + 1;
        if let Some(e) = parse(&text[start..end]).filter(|e| matches(e)) {
            return Some(e);
        }
    }
    None
}

/// Every entry of the file.
pub(crate) fn all<T>(path: &Path, parse: fn(&str) -> Option<T>) -> io::Result<Vec<T>> {
    Ok(read(path)?.lines().filter_map(parse).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "# alice was here: alice:x:1:1::/:/bin/sh\n\
        bob:x:1000:1000:alice's friend,alice:/home/bob:/bin/sh\n\
        malformed alice line\n\
        alice:x:+01001:1000::/home/alice:/bin/sh\n\
        alice:x:1002:1000::/home/second-alice:/bin/sh\n\
        carol:x:1003:1000::/home/carol:/bin/sh";

    #[test]
    fn only_lines_holding_the_key_are_parsed_and_the_first_match_wins() {
        let by_name =
            |n: &str| find_in(PASSWD, n, parse_passwd_line, |u: &User| u.name == n).map(|u| u.home);
        // The comment, bob's gecos and the malformed line hold "alice" too.
        assert_eq!(by_name("alice"), Some("/home/alice".into()));
        // The last line, without a newline.
        assert_eq!(by_name("carol"), Some("/home/carol".into()));
        assert_eq!(by_name("dave"), None);
        let by_uid = |uid: u32| {
            find_in(PASSWD, &uid.to_string(), parse_passwd_line, |u: &User| {
                u.uid == uid
            })
            .map(|u| u.name)
        };
        // "+01001" parses as 1001 and holds "1001".
        assert_eq!(by_uid(1001), Some("alice".into()));
        // 1000 is bob's uid and everyone's gid: bob's line comes first.
        assert_eq!(by_uid(1000), Some("bob".into()));
        assert_eq!(by_uid(1), None);
        // What the whole-file parse finds, for every name and id here.
        for key in ["alice", "bob", "carol", "1000", "1001", "1002", "1003", "x"] {
            let name = |u: &User| u.name == key || u.uid.to_string() == key;
            assert_eq!(
                find_in(PASSWD, key, parse_passwd_line, name),
                PASSWD
                    .lines()
                    .filter_map(parse_passwd_line)
                    .find(|u| name(u)),
                "{key}"
            );
        }
    }
}
