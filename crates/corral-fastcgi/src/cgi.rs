//! The CGI/1.1 response side (RFC 3875 §6).
//!
//! A script's stdout starts with a header block — lines ending in `\n` or
//! `\r\n`, closed by an empty line — followed by the body. Header fields are
//! `field-name ":" [ field-value ]`; field names are case-insensitive
//! tokens, a field with an empty value counts as not sent, and CGI/1.1 has
//! no continuation lines (§6.3). The CGI fields `Status`, `Location` and
//! `Content-Type` may each appear at most once (§6.3).
//!
//! [`CgiHeaderParser`] reads that block incrementally and produces a
//! [`CgiHead`]; [`cgi_head_to_fastcgi_stdout`] re-serialises it, normalised,
//! for the web server; [`error_response`] builds the gateway's own error
//! pages in the same form.

mod reason;
#[cfg(test)]
mod tests;

use std::fmt::Write as _;

pub use reason::reason_phrase;

/// Largest header block accepted, terminating empty line included (64 KiB).
pub const MAX_HEADER_BLOCK: usize = 64 * 1024;

/// Longest field name quoted in an error message.
const MAX_QUOTED_NAME: usize = 64;

/// How a `Location` field redirects (RFC 3875 §6.2.2 – §6.2.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redirect {
    /// A local redirect response (§6.2.2): `Location` is an absolute path
    /// (`/path[?query]`, not `//…`) and there is no `Status` field. The
    /// server is asked to reprocess the request with that path.
    Local(String),
    /// A client redirect (§6.2.3, §6.2.4): any other `Location` value,
    /// normally an absolute URI, or any `Location` together with `Status`.
    Client(String),
}

/// The parsed header block of a CGI response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgiHead {
    /// HTTP status: from `Status`; else 302 when a `Location` is present
    /// (§6.2.3; also for [`Redirect::Local`], which is what passing the
    /// response through to nginx would produce); else 200 (§6.3.3).
    pub status: u16,
    /// Reason phrase from `Status`, or the standard phrase for `status`.
    pub reason: String,
    /// Every field except `Status`, in order, names as sent, values trimmed
    /// of surrounding blanks. Fields with empty values are left out.
    pub headers: Vec<(String, String)>,
    /// Set when a `Location` field is present.
    pub redirect: Option<Redirect>,
    /// Offset of the first body byte within the chunk passed to the
    /// [`CgiHeaderParser::feed`] call that completed the head (for a single
    /// buffer fed at once: the length of the header block).
    pub body_start: usize,
}

impl CgiHead {
    /// Value of the first field named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why a script's output is not a valid CGI response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CgiError {
    /// The output ended before the empty line that closes the header block.
    #[error("script output ended after {received} bytes without completing the CGI header block (expected header lines followed by an empty line)")]
    NoHeader {
        /// Bytes of output received.
        received: usize,
    },
    /// The output starts with an empty line: no header field at all.
    #[error("CGI header block is empty (expected at least one header field, e.g. Content-Type)")]
    EmptyHeader,
    /// The header block exceeds the size limit.
    #[error("CGI header block exceeds {limit} bytes (expected the empty line that ends it within that limit)")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// A header line has no `:`.
    #[error("CGI header line {line} has no ':' (expected `name: value`)")]
    MissingColon {
        /// 1-based line number.
        line: usize,
    },
    /// A header line starts with blanks (a continuation line).
    #[error("CGI header line {line} starts with whitespace (expected a field name; CGI/1.1 has no continuation lines)")]
    ContinuationLine {
        /// 1-based line number.
        line: usize,
    },
    /// A field name is empty or has a byte that is not a token character.
    #[error("CGI header line {line}: invalid field name {name:?} (expected an HTTP token)")]
    InvalidName {
        /// 1-based line number.
        line: usize,
        /// The name, lossily decoded and shortened.
        name: String,
    },
    /// A field value contains a control character other than a tab.
    #[error("CGI header line {line}: value of {name} contains a control character (expected printable text)")]
    InvalidValue {
        /// 1-based line number.
        line: usize,
        /// Field name.
        name: String,
    },
    /// A field value is not UTF-8.
    #[error("CGI header line {line}: value of {name} is not UTF-8")]
    NonUtf8Value {
        /// 1-based line number.
        line: usize,
        /// Field name.
        name: String,
    },
    /// A `Status` value is not a 3-digit final status code.
    #[error("CGI header line {line}: invalid Status {value:?} (expected a 3-digit code from 200 to 599, optionally followed by a space and a reason phrase)")]
    InvalidStatus {
        /// 1-based line number.
        line: usize,
        /// The value received.
        value: String,
    },
    /// A CGI field (`Status`, `Location`, `Content-Type`) appears twice.
    #[error("CGI header line {line}: second {name} field (expected each CGI field at most once)")]
    DuplicateField {
        /// 1-based line number of the second occurrence.
        line: usize,
        /// Field name.
        name: String,
    },
    /// `feed` was called again after the head was complete.
    #[error(
        "CGI header block already complete (expected body bytes to go to the web server directly)"
    )]
    AlreadyComplete,
}

/// Incremental parser for the header block of a script's stdout.
///
/// Feed output chunks as they arrive; once a call returns the [`CgiHead`],
/// the rest of that chunk from `head.body_start` on, and everything after
/// it, is body. Only the header block is buffered (at most the limit).
/// After an error the parser stays failed.
#[derive(Debug, Clone)]
pub struct CgiHeaderParser {
    limit: usize,
    /// Header bytes received so far.
    buf: Vec<u8>,
    /// Start of the current, unterminated line in `buf`.
    line_start: usize,
    complete: bool,
    failed: Option<CgiError>,
}

impl Default for CgiHeaderParser {
    fn default() -> Self {
        Self::new()
    }
}

impl CgiHeaderParser {
    /// A parser with the [`MAX_HEADER_BLOCK`] limit.
    pub fn new() -> Self {
        Self::with_limit(MAX_HEADER_BLOCK)
    }

    /// A parser accepting header blocks of at most `limit` bytes.
    pub fn with_limit(limit: usize) -> Self {
        Self {
            limit,
            buf: Vec::new(),
            line_start: 0,
            complete: false,
            failed: None,
        }
    }

    /// Whether the head has been returned.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Feeds the next chunk of script output; returns the head once the
    /// empty line ending the header block has arrived.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Option<CgiHead>, CgiError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        if self.complete {
            return Err(CgiError::AlreadyComplete);
        }
        match self.scan(chunk) {
            Ok(head) => {
                self.complete = head.is_some();
                Ok(head)
            }
            Err(error) => {
                self.failed = Some(error.clone());
                self.buf = Vec::new();
                Err(error)
            }
        }
    }

    /// Call when the script's stdout has ended: an error unless the head
    /// was complete.
    pub fn finish(&self) -> Result<(), CgiError> {
        match &self.failed {
            Some(error) => Err(error.clone()),
            None if self.complete => Ok(()),
            None => Err(CgiError::NoHeader {
                received: self.buf.len(),
            }),
        }
    }

    fn append(&mut self, bytes: &[u8]) -> Result<(), CgiError> {
        if self.buf.len().saturating_add(bytes.len()) > self.limit {
            return Err(CgiError::TooLarge { limit: self.limit });
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    fn scan(&mut self, chunk: &[u8]) -> Result<Option<CgiHead>, CgiError> {
        let mut pos = 0;
        while let Some(offset) = chunk[pos..].iter().position(|&b| b == b'\n') {
            let newline = pos + offset;
            self.append(&chunk[pos..=newline])?;
            pos = newline + 1;
            let line = strip_cr(&self.buf[self.line_start..self.buf.len() - 1]);
            if line.is_empty() {
                if self.line_start == 0 {
                    return Err(CgiError::EmptyHeader);
                }
                let mut head = parse_block(&self.buf[..self.line_start])?;
                head.body_start = pos;
                self.buf = Vec::new();
                return Ok(Some(head));
            }
            self.line_start = self.buf.len();
        }
        self.append(&chunk[pos..])?;
        Ok(None)
    }
}

/// `line` without one trailing `\r`.
fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// `tchar` of RFC 9110 §5.6.2: the characters of a field-name token.
fn is_tchar(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

/// Whether `name` is a non-empty token.
fn is_token(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&b| is_tchar(b))
}

/// A control character not allowed in a field value (anything below 0x20
/// but tab, and DEL).
fn is_forbidden_in_value(byte: u8) -> bool {
    (byte < 0x20 && byte != b'\t') || byte == 0x7f
}

fn trim_blanks(bytes: &[u8]) -> &[u8] {
    let is_blank = |b: &u8| *b == b' ' || *b == b'\t';
    let start = bytes
        .iter()
        .position(|b| !is_blank(b))
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !is_blank(b))
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

fn quote_name(name: &[u8]) -> String {
    let shown = &name[..name.len().min(MAX_QUOTED_NAME)];
    let mut quoted = String::from_utf8_lossy(shown).into_owned();
    if name.len() > MAX_QUOTED_NAME {
        quoted.push('…');
    }
    quoted
}

/// Parses a `Status` value: 3 digits (200-599), then nothing or blanks and
/// a reason phrase.
fn parse_status(value: &str, line: usize) -> Result<(u16, String), CgiError> {
    let invalid = || CgiError::InvalidStatus {
        line,
        value: quote_name(value.as_bytes()),
    };
    let bytes = value.as_bytes();
    let (code, rest) = match bytes {
        [a, b, c, rest @ ..] if a.is_ascii_digit() && b.is_ascii_digit() && c.is_ascii_digit() => {
            let code = u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0');
            (code, rest)
        }
        _ => return Err(invalid()),
    };
    if !(200..=599).contains(&code) {
        return Err(invalid());
    }
    let reason = match rest {
        [] => reason_phrase(code).to_owned(),
        [b' ' | b'\t', ..] => {
            let reason = trim_blanks(rest);
            if reason.is_empty() {
                reason_phrase(code).to_owned()
            } else {
                // `value` is UTF-8 and `reason` is a suffix of it that starts
                // after ASCII blanks, so it is valid UTF-8 too.
                String::from_utf8_lossy(reason).into_owned()
            }
        }
        _ => return Err(invalid()),
    };
    Ok((code, reason))
}

/// `scheme ":"` at the start of `value` (RFC 3986 §3.1): an absolute URI.
fn has_scheme(value: &str) -> bool {
    let Some(colon) = value.find(':') else {
        return false;
    };
    let scheme = &value.as_bytes()[..colon];
    match scheme {
        [first, rest @ ..] => {
            first.is_ascii_alphabetic()
                && rest
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(b))
        }
        [] => false,
    }
}

/// Whether `location` is a local-pathquery (§6.3.2): an absolute path, and
/// not a network-path reference (`//host/...`) that clients would treat as
/// another host.
fn is_local_path(location: &str) -> bool {
    location.starts_with('/') && !location.starts_with("//") && !has_scheme(location)
}

/// Parses a complete header block (without its terminating empty line).
fn parse_block(block: &[u8]) -> Result<CgiHead, CgiError> {
    let mut status: Option<(u16, String)> = None;
    let mut location: Option<String> = None;
    let mut content_type_seen = false;
    let mut headers = Vec::new();
    for (index, raw) in block.split_inclusive(|&b| b == b'\n').enumerate() {
        let line_no = index + 1;
        let line = strip_cr(raw.strip_suffix(b"\n").unwrap_or(raw));
        if matches!(line.first(), Some(b' ' | b'\t')) {
            return Err(CgiError::ContinuationLine { line: line_no });
        }
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or(CgiError::MissingColon { line: line_no })?;
        let (name, value) = (&line[..colon], trim_blanks(&line[colon + 1..]));
        if !is_token(name) {
            return Err(CgiError::InvalidName {
                line: line_no,
                name: quote_name(name),
            });
        }
        // Tokens are ASCII.
        let name = String::from_utf8_lossy(name).into_owned();
        if value.iter().any(|&b| is_forbidden_in_value(b)) {
            return Err(CgiError::InvalidValue {
                line: line_no,
                name,
            });
        }
        let Ok(value) = String::from_utf8(value.to_vec()) else {
            return Err(CgiError::NonUtf8Value {
                line: line_no,
                name,
            });
        };
        if value.is_empty() {
            // §6.3: "A NULL field value is equivalent to a field not being sent."
            continue;
        }
        let duplicate = |name: String| CgiError::DuplicateField {
            line: line_no,
            name,
        };
        if name.eq_ignore_ascii_case("Status") {
            if status.is_some() {
                return Err(duplicate(name));
            }
            status = Some(parse_status(&value, line_no)?);
            continue;
        }
        if name.eq_ignore_ascii_case("Location") {
            if location.is_some() {
                return Err(duplicate(name));
            }
            location = Some(value.clone());
        } else if name.eq_ignore_ascii_case("Content-Type") {
            if content_type_seen {
                return Err(duplicate(name));
            }
            content_type_seen = true;
        }
        headers.push((name, value));
    }
    let redirect = location.map(|location| {
        if status.is_none() && is_local_path(&location) {
            Redirect::Local(location)
        } else {
            Redirect::Client(location)
        }
    });
    let (status, reason) = match status {
        Some(status) => status,
        None if redirect.is_some() => (302, reason_phrase(302).to_owned()),
        None => (200, reason_phrase(200).to_owned()),
    };
    Ok(CgiHead {
        status,
        reason,
        headers,
        redirect,
        body_start: 0,
    })
}

/// Re-serialises a head as the start of the `FCGI_STDOUT` stream for the
/// web server: `Status: NNN reason\r\n`, the other fields as
/// `name: value\r\n`, then `\r\n`.
///
/// The fields of a [`CgiHead`] are public, so this re-checks them: a status
/// outside 200-599 is written as `502 Bad Gateway`; ASCII control
/// characters other than tab are dropped from the reason; fields whose name
/// is not a token, whose value holds such a control character, or whose
/// value is blank are left out. Nothing can inject extra header lines.
pub fn cgi_head_to_fastcgi_stdout(head: &CgiHead) -> Vec<u8> {
    let mut out = String::with_capacity(64 + head.headers.len() * 32);
    let (status, reason): (u16, String) = if (200..=599).contains(&head.status) {
        (
            head.status,
            head.reason
                .chars()
                .filter(|c| !c.is_ascii_control() || *c == '\t')
                .collect(),
        )
    } else {
        (502, reason_phrase(502).to_owned())
    };
    let reason = match reason.trim_matches([' ', '\t']) {
        "" => reason_phrase(status),
        trimmed => trimmed,
    };
    let _ = write!(out, "Status: {status} {reason}\r\n");
    for (name, value) in &head.headers {
        let value = value.trim_matches([' ', '\t']);
        let safe_value = !value.is_empty() && !value.bytes().any(is_forbidden_in_value);
        if is_token(name.as_bytes()) && !name.eq_ignore_ascii_case("Status") && safe_value {
            let _ = write!(out, "{name}: {value}\r\n");
        }
    }
    out.push_str("\r\n");
    out.into_bytes()
}

/// A complete gateway-generated response (header block and body) for the
/// `FCGI_STDOUT` stream, e.g. 403 (script not allowed), 502 (script
/// failed), 504 (timeout), 508 (loop detected). The body is plain text: the
/// status line, then `message` with control characters other than newline
/// and tab replaced by U+FFFD. A status outside 200-599 becomes 500.
pub fn error_response(status: u16, message: &str) -> Vec<u8> {
    let status = if (200..=599).contains(&status) {
        status
    } else {
        500
    };
    let reason = reason_phrase(status);
    let mut body = format!("{status} {reason}\n");
    let message: String = message
        .chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                '\u{fffd}'
            } else {
                c
            }
        })
        .collect();
    if !message.is_empty() {
        body.push_str(&message);
        if !message.ends_with('\n') {
            body.push('\n');
        }
    }
    let mut out = format!(
        "Status: {status} {reason}\r\n\
         Content-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\n\
         Cache-Control: no-store\r\n\
         X-Content-Type-Options: nosniff\r\n\r\n",
        body.len()
    );
    out.push_str(&body);
    out.into_bytes()
}
