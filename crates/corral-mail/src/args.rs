//! The sendmail command lines that programs send (PHP's `sendmail -t -i`,
//! `sendmail -oi -f addr rcpt...`), read into what the broker passes on.

use crate::proto::exit;

/// What a sendmail command line asks for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Submission {
    /// `-t`: recipients from the To/Cc/Bcc headers.
    pub from_headers: bool,
    /// `-i` / `-oi`: a line with a single dot does not end the message.
    pub ignore_dots: bool,
    /// `-f`/`-r`: the sender the caller asked for. Never passed on: the
    /// MTA sets the tenant's own (see the crate docs).
    pub asked_sender: Option<String>,
    pub recipients: Vec<String>,
}

/// A refused command line: the exit status and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError(pub String);

impl ArgError {
    pub fn status(&self) -> i32 {
        exit::USAGE
    }
}

impl std::fmt::Display for ArgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Most recipients one message may name on the command line.
pub const MAX_RECIPIENTS: usize = 100;

/// Options taken and ignored: delivery mode, error mode, the full name.
const IGNORED: &[&str] = &[
    "-odi", "-odb", "-odq", "-oem", "-oep", "-oeq", "-oew", "-oee", "-om", "-v",
];

pub fn parse(args: &[String]) -> Result<Submission, ArgError> {
    let mut s = Submission::default();
    let mut it = args.iter();
    let mut only_recipients = false;
    while let Some(a) = it.next() {
        if only_recipients || !a.starts_with('-') {
            s.recipients.push(recipient(a)?);
            continue;
        }
        match a.as_str() {
            "--" => only_recipients = true,
            "-t" => s.from_headers = true,
            "-i" | "-oi" => s.ignore_dots = true,
            "-f" | "-r" => s.asked_sender = Some(value(&mut it, a)?),
            "-F" => {
                value(&mut it, a)?;
            }
            _ if IGNORED.contains(&a.as_str()) => {}
            _ if a.len() > 2 && (a.starts_with("-f") || a.starts_with("-r")) => {
                s.asked_sender = Some(a[2..].to_string())
            }
            _ if a.starts_with("-F") => {}
            _ => {
                return Err(ArgError(format!(
                    "unsupported option {a:?} (this sendmail accepts -t -i -oi -f -r -F, \
                     delivery/error modes, and recipients)"
                )))
            }
        }
    }
    if s.recipients.len() > MAX_RECIPIENTS {
        return Err(ArgError(format!(
            "{} recipients: at most {MAX_RECIPIENTS} per message",
            s.recipients.len()
        )));
    }
    if !s.from_headers && s.recipients.is_empty() {
        return Err(ArgError("no recipients (give addresses, or -t)".into()));
    }
    Ok(s)
}

fn value<'a>(it: &mut impl Iterator<Item = &'a String>, opt: &str) -> Result<String, ArgError> {
    it.next()
        .cloned()
        .ok_or_else(|| ArgError(format!("{opt}: option requires an argument")))
}

/// A recipient address as the MTA will get it: one argument after `--`, so
/// it can never be read as an option; no control characters, no spaces.
fn recipient(a: &str) -> Result<String, ArgError> {
    let ok = !a.is_empty()
        && a.len() <= 320
        && !a.starts_with('-')
        && a.chars().all(|c| !c.is_control() && c != ' ');
    if ok {
        Ok(a.to_string())
    } else {
        Err(ArgError(format!("invalid recipient {a:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(v: &[&str]) -> Result<Submission, ArgError> {
        parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn php_and_common_command_lines() {
        let s = p(&["-t", "-i"]).unwrap();
        assert!(s.from_headers && s.ignore_dots && s.recipients.is_empty());
        let s = p(&["-oi", "-f", "boss@bank.example", "bob@example.org"]).unwrap();
        assert_eq!(s.asked_sender.as_deref(), Some("boss@bank.example"));
        assert_eq!(s.recipients, ["bob@example.org"]);
        let s = p(&["-fme@x", "-odi", "-F", "Me", "--", "a@b", "c@d"]).unwrap();
        assert_eq!(s.asked_sender.as_deref(), Some("me@x"));
        assert_eq!(s.recipients, ["a@b", "c@d"]);
    }

    #[test]
    fn what_is_refused() {
        assert!(p(&[]).unwrap_err().0.contains("no recipients"));
        assert!(p(&["-bs"]).unwrap_err().0.contains("unsupported option"));
        assert!(p(&["-C/etc/evil.conf", "a@b"]).is_err());
        assert!(p(&["-f"]).unwrap_err().0.contains("requires an argument"));
        assert!(p(&["--", "-oQ/tmp"])
            .unwrap_err()
            .0
            .contains("invalid recipient"));
        assert!(p(&["a@b\nRCPT"]).is_err());
        let many: Vec<String> = (0..101).map(|i| format!("u{i}@x")).collect();
        assert!(parse(&many).unwrap_err().0.contains("at most"));
    }
}
