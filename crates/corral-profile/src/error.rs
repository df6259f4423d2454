//! Errors, and where in which file they are.

use std::fmt;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// A position in a profile, tenant override or plan file (1-based line and
/// column; the column counts characters, not bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.column)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// A key or value that does not fit the schema. `key` is the dotted path
    /// of the offending key, e.g. `mount[3].type` or `namespaces.net`.
    #[error("{at}: {key}: expected {expected}; found {found}")]
    Invalid {
        at: Location,
        key: String,
        expected: String,
        found: String,
    },
    /// The file is not valid TOML.
    #[error("{at}: invalid TOML: {message}")]
    Syntax { at: Location, message: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The tenant itself is unusable (bad name, unknown user, uid 0). It comes
    /// from the command line, not from a file, so it has no location.
    #[error("tenant {name:?}: expected {expected}; found {found}")]
    Tenant {
        name: String,
        expected: String,
        found: String,
    },
}

impl ProfileError {
    /// Where the error is, when it comes from a file.
    pub fn location(&self) -> Option<&Location> {
        match self {
            ProfileError::Invalid { at, .. } | ProfileError::Syntax { at, .. } => Some(at),
            ProfileError::Io { .. } | ProfileError::Tenant { .. } => None,
        }
    }
}

/// The text of one file being read, to turn byte spans into locations.
#[derive(Clone, Copy)]
pub(crate) struct Source<'a> {
    pub path: &'a Path,
    pub text: &'a str,
    /// Where each line starts ([`line_starts`]): every value read keeps its
    /// location, and counting newlines from the top for each one made
    /// reading the default profile quadratic (a third of `corral up`'s
    /// profile load).
    pub lines: &'a [usize],
}

impl Source<'_> {
    /// The location of a byte span's start (1:1 when the span is unknown).
    pub fn at(&self, span: Option<Range<usize>>) -> Location {
        let (line, column) = match span {
            Some(span) => line_col(self.text, self.lines, span.start),
            None => (1, 1),
        };
        Location {
            file: self.path.to_path_buf(),
            line,
            column,
        }
    }

    pub fn syntax_error(&self, err: &toml_edit::TomlError) -> ProfileError {
        let message = err
            .message()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        ProfileError::Syntax {
            at: self.at(err.span()),
            message,
        }
    }
}

/// 1-based line and character column of a byte offset. Never panics: the
/// offset is clamped to the text and moved back to a character boundary.
/// Byte offsets at which the lines of `text` start.
pub(crate) fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

/// 1-based line and column (in characters) of a byte offset; `lines` is
/// [`line_starts`] of `text`.
pub(crate) fn line_col(text: &str, lines: &[usize], offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let line = lines.partition_point(|&start| start <= offset).max(1);
    let start = lines[line - 1];
    (line, text[start..offset].chars().count() + 1)
}

pub(crate) fn invalid(
    at: &Location,
    key: &str,
    expected: impl Into<String>,
    found: impl Into<String>,
) -> ProfileError {
    ProfileError::Invalid {
        at: at.clone(),
        key: key.to_string(),
        expected: expected.into(),
        found: found.into(),
    }
}
