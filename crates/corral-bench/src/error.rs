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
}

impl BenchError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BenchError::Io {
            path: path.into(),
            source,
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
