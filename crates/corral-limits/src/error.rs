//! Errors: [`LimitError`] for a bad limit value (with the file and line it
//! came from when known), [`CgroupError`] for everything touching cgroupfs.

use corral_profile::plan::Origin;
use std::fmt;
use std::io;
use std::path::PathBuf;

/// A limit key or value that cannot be used. Displayed as
/// `/etc/corral/plans/basic.toml:4: limits.cpu: expected a percentage like "50%", found "-5%"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitError {
    /// Where the value was written, when it came from a file.
    pub origin: Option<Origin>,
    /// The dotted key as written (`cpu`, `memory`, `io.devices`...).
    pub key: String,
    pub problem: Problem,
}

/// What is wrong with a limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("unknown limit key; known keys: {known}")]
    UnknownKey { known: String },
    /// The value has the wrong form: `expected` describes the right one.
    #[error("expected {expected}, found {found}")]
    Invalid {
        expected: &'static str,
        found: String,
    },
    /// The value has the right form but is outside what the key allows.
    #[error("{found} is out of range: {reason}")]
    OutOfRange { found: String, reason: String },
    /// Two keys that set the same limit (`memory` and `memory.max`).
    #[error("also set as `limits.{other}`: give only one of them")]
    Duplicate { other: String },
    /// Limits that contradict each other.
    #[error("{0}")]
    Conflict(String),
    /// A device in `io.devices` that is not a usable block device.
    #[error("device {device}: {reason}")]
    Device { device: String, reason: String },
    /// `corral limits set` input that is not `key=value`.
    #[error("expected key=value, found {0:?}")]
    Syntax(String),
}

impl LimitError {
    pub(crate) fn new(key: &str, problem: Problem) -> LimitError {
        LimitError {
            origin: None,
            key: key.to_string(),
            problem,
        }
    }

    pub(crate) fn at(mut self, origin: Option<&Origin>) -> LimitError {
        if self.origin.is_none() {
            self.origin = origin.cloned();
        }
        self
    }
}

impl fmt::Display for LimitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(o) = &self.origin {
            write!(f, "{}:{}: ", o.file.display(), o.line)?;
        }
        if self.key.is_empty() {
            write!(f, "limits: {}", self.problem)
        } else {
            write!(f, "limits.{}: {}", self.key, self.problem)
        }
    }
}

impl std::error::Error for LimitError {}

/// An error from the cgroup backends. Every variant names the file or
/// directory involved and, for writes, the value.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("{op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("writing {value:?} to {}: {source}", path.display())]
    Write {
        path: PathBuf,
        value: String,
        source: io::Error,
    },
    #[error("{}: cannot parse {what} from {content:?}", path.display())]
    Parse {
        path: PathBuf,
        what: &'static str,
        content: String,
    },
    /// No cgroup v2 mount with cpu, memory and pids, and no v1 hierarchies
    /// for cpu, cpuacct, memory and pids.
    #[error("no usable cgroup setup: {0}")]
    NoCgroups(String),
    #[error("invalid cgroup {what} {name:?}: {reason}")]
    BadName {
        what: &'static str,
        name: String,
        reason: &'static str,
    },
    #[error("cgroup {} does not exist", path.display())]
    NotFound { path: PathBuf },
    /// A limit this host cannot enforce (controller or file missing).
    #[error("limits.{key} cannot be enforced here: {reason}")]
    Unsupported { key: &'static str, reason: String },
    #[error(transparent)]
    Limit(#[from] LimitError),
    #[error("cgroup {} still has processes {pids:?} after {secs} s of killing", path.display())]
    KillTimeout {
        path: PathBuf,
        pids: Vec<i32>,
        secs: u64,
    },
    #[error("cgroup {} still busy after {secs} s: {source}", path.display())]
    RemoveTimeout {
        path: PathBuf,
        secs: u64,
        source: io::Error,
    },
}

pub type Result<T, E = CgroupError> = std::result::Result<T, E>;

impl CgroupError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> CgroupError {
        CgroupError::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// The errno of an I/O error, if this is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            CgroupError::Io { source, .. } | CgroupError::Write { source, .. } => {
                source.raw_os_error()
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_with_and_without_origin() {
        let e = LimitError::new(
            "cpu",
            Problem::Invalid {
                expected: "a percentage like \"50%\"",
                found: "\"-5%\"".into(),
            },
        );
        assert_eq!(
            e.to_string(),
            "limits.cpu: expected a percentage like \"50%\", found \"-5%\""
        );
        let o = Origin {
            file: "/etc/corral/plans/basic.toml".into(),
            line: 4,
        };
        assert_eq!(
            e.at(Some(&o)).to_string(),
            "/etc/corral/plans/basic.toml:4: limits.cpu: expected a percentage like \"50%\", found \"-5%\""
        );
    }

    #[test]
    fn write_error_names_path_value_and_cause() {
        let e = CgroupError::Write {
            path: "/sys/fs/cgroup/pids/corral/t/pids.max".into(),
            value: "20".into(),
            source: io::Error::from_raw_os_error(libc::EINVAL),
        };
        let s = e.to_string();
        assert!(
            s.contains("\"20\"") && s.contains("pids.max") && s.contains("Invalid argument"),
            "{s}"
        );
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    }
}
