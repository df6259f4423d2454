//! corral-bench: the `results.json` schema, machine description, statistics,
//! parsers for h2load and siege output, Markdown and HTML reports, run-to-run
//! comparison and progress display; and the [`suites`] that drive sandboxes
//! (`corral-bench join|cgi|micro|pidns|all`). See `docs/benchmarks.md`.

pub mod compare;
pub mod error;
pub mod h2load;
pub mod machine;
pub mod progress;
pub mod report;
pub mod results;
pub mod siege;
pub mod stats;
pub mod suites;

use std::io::Write;
use std::path::{Path, PathBuf};

pub use compare::{compare, ComparisonRow, Verdict};
pub use error::{BenchError, Result};
pub use machine::{CgroupMode, Machine, ToolInfo};
pub use progress::Progress;
pub use results::{Better, Figure, ResultSet, Row, Samples, SCHEMA_VERSION};

/// File names written by [`write_outputs`].
pub const RESULTS_JSON: &str = "results.json";
pub const REPORT_MD: &str = "report.md";
pub const REPORT_HTML: &str = "report.html";

/// Where [`write_outputs`] put things.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputPaths {
    pub json: PathBuf,
    pub markdown: PathBuf,
    pub html: PathBuf,
}

/// Write `results.json`, `report.md` and `report.html` into `dir` (created if
/// needed). Each file is written to a temporary file in `dir` and renamed into
/// place, so a reader never sees a half-written file.
pub fn write_outputs(dir: impl AsRef<Path>, rs: &ResultSet) -> Result<OutputPaths> {
    let dir = dir.as_ref();
    std::fs::create_dir_all(dir).map_err(|e| BenchError::io(dir, e))?;
    let paths = OutputPaths {
        json: dir.join(RESULTS_JSON),
        markdown: dir.join(REPORT_MD),
        html: dir.join(REPORT_HTML),
    };
    write_atomic(&paths.json, rs.to_json().as_bytes())?;
    write_atomic(&paths.markdown, report::markdown::render(rs).as_bytes())?;
    write_atomic(&paths.html, report::html::render(rs).as_bytes())?;
    Ok(paths)
}

/// Write `bytes` to `path` via a temporary file in the same directory,
/// fsync, then rename over `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("out");
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| BenchError::io(dir, e))?;
    tmp.write_all(bytes)
        .map_err(|e| BenchError::io(tmp.path(), e))?;
    tmp.as_file()
        .sync_all()
        .map_err(|e| BenchError::io(tmp.path(), e))?;
    // tempfile creates 0600; results are meant to be shared.
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o644));
    }
    tmp.persist(path)
        .map_err(|e| BenchError::io(path, e.error))?;
    Ok(())
}
