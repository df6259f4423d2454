//! Error type shared by the whole crate.

use std::path::PathBuf;

/// Everything that can go wrong in corral-bench's library half.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A results file is not valid JSON for the schema.
    #[error("{path}: invalid results JSON: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// A results file has a schema version this build does not read.
    #[error(
        "{path}: results schema {found} is not supported (this build reads schema {expected})"
    )]
    Schema {
        path: PathBuf,
        found: u32,
        expected: u32,
    },
    /// A tool's output could not be parsed.
    #[error("cannot parse {tool} output: {message}")]
    Parse { tool: &'static str, message: String },
    /// Tools a suite needs are not installed.
    #[error("{}", crate::suites::tools::missing_message(.0))]
    MissingTools(Vec<crate::suites::tools::Tool>),
    /// A suite could not set up or run corral itself (not a peer contender).
    #[error("{suite}: {message}")]
    Suite {
        suite: &'static str,
        message: String,
    },
    /// corral itself failed in one or more suites (the report says where).
    #[error("corral failed: {}", .0.join("; "))]
    CorralFailed(Vec<String>),
    /// Ctrl-C / SIGTERM: the run stopped early (everything started was cleaned up).
    #[error("interrupted")]
    Interrupted,
}

impl BenchError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BenchError::Io {
            path: path.into(),
            source,
        }
    }

    /// A suite failure: corral (not a contender) did not work.
    pub fn suite(suite: &'static str, message: impl Into<String>) -> Self {
        BenchError::Suite {
            suite,
            message: message.into(),
        }
    }

    pub(crate) fn parse(tool: &'static str, message: impl Into<String>) -> Self {
        BenchError::Parse {
            tool,
            message: message.into(),
        }
    }
}

pub type Result<T, E = BenchError> = std::result::Result<T, E>;
