//! Reading and writing cgroup files with errors that name the path and value.

use crate::error::{CgroupError, Result};
use std::io::{self, Write};
use std::path::Path;

/// Writes `value` and a newline in one write(2) to an existing file.
///
/// The file is opened for appending and never created or truncated: on
/// cgroupfs the offset is ignored and each write is one command, and on a
/// plain file (the test backends) the file keeps a log of every write.
pub(crate) fn write_value(path: &Path, value: &str) -> Result<()> {
    let err = |source| CgroupError::Write {
        path: path.to_path_buf(),
        value: value.to_string(),
        source,
    };
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(err)?;
    let line = format!("{value}\n");
    let n = f.write(line.as_bytes()).map_err(err)?;
    if n != line.len() {
        return Err(err(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("short write: {n} of {} bytes", line.len()),
        )));
    }
    Ok(())
}

pub(crate) fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| CgroupError::io("reading", path, e))
}

/// mkdir that succeeds when the directory exists.
pub(crate) fn mkdir(path: &Path) -> io::Result<()> {
    match std::fs::create_dir(path) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
        r => r,
    }
}

/// Process ids listed in a `cgroup.procs` file.
pub(crate) fn read_pids(path: &Path) -> Result<Vec<i32>> {
    let text = read_text(path)?;
    text.split_whitespace()
        .map(|w| {
            w.parse().map_err(|_| CgroupError::Parse {
                path: path.to_path_buf(),
                what: "process ids",
                content: text.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_appends_lines_and_never_creates() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("pids.max");
        let e = write_value(&p, "20").unwrap_err();
        assert!(
            e.to_string().contains("writing \"20\" to") && e.to_string().contains("pids.max"),
            "{e}"
        );
        std::fs::write(&p, "").unwrap();
        write_value(&p, "20").unwrap();
        write_value(&p, "max").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "20\nmax\n");
    }

    #[test]
    fn reads_pids_and_makes_dirs() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        std::fs::write(&p, "12\n345\n").unwrap();
        assert_eq!(read_pids(&p).unwrap(), vec![12, 345]);
        mkdir(&t.path().join("d")).unwrap();
        mkdir(&t.path().join("d")).unwrap();
        assert!(mkdir(&p).is_err(), "a file is not a directory");
    }
}
