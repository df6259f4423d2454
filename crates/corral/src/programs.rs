//! Where corral's programs find each other. In a build (cargo's target
//! directory) they all sit in one directory. Installed (scripts/layout.sh):
//!
//!   PREFIX/bin/corral, corral-init, corral-sendmail   the commands
//!   PREFIX/lib/corral/corral-cli                      the full command line,
//!                                                     which `corral` execs
//!
//! Each lookup tries the directory of the running program first, then the
//! one place the installed layout puts the other program; nothing is
//! searched on PATH (a root program must not run whatever PATH offers).

use std::path::{Path, PathBuf};

/// The full CLI's program name.
pub const CLI: &str = "corral-cli";
/// The tenant init's program name.
pub const INIT: &str = "corral-init";

/// The full CLI for the `corral` at `exe`: `corral-cli` next to it, else
/// `../lib/corral/corral-cli`.
pub fn cli(exe: &Path) -> Option<PathBuf> {
    let dir = exe.parent()?;
    [dir.join(CLI), dir.join("../lib/corral").join(CLI)]
        .into_iter()
        .find(|p| p.is_file())
}

/// corral-init for the program at `exe` (either `corral` or `corral-cli`):
/// next to it, else, from `PREFIX/lib/corral`, `PREFIX/bin/corral-init`.
pub fn init(exe: &Path) -> Option<PathBuf> {
    let dir = exe.parent()?;
    let mut candidates = vec![dir.join(INIT)];
    if dir.ends_with("lib/corral") {
        candidates.push(dir.join("../../bin").join(INIT));
    }
    candidates.into_iter().find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_in_a_build_dir_and_in_the_installed_layout() {
        let d = tempfile::tempdir().unwrap();
        let touch = |p: &Path| {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"").unwrap();
        };
        // One directory (cargo's target dir).
        let build = d.path().join("build");
        touch(&build.join("corral-cli"));
        touch(&build.join("corral-init"));
        assert_eq!(cli(&build.join("corral")), Some(build.join("corral-cli")));
        assert_eq!(
            init(&build.join("corral-cli")),
            Some(build.join("corral-init"))
        );
        // Installed: PREFIX/bin and PREFIX/lib/corral.
        let prefix = d.path().join("usr");
        touch(&prefix.join("bin/corral-init"));
        touch(&prefix.join("lib/corral/corral-cli"));
        assert_eq!(
            cli(&prefix.join("bin/corral")),
            Some(prefix.join("bin/../lib/corral/corral-cli"))
        );
        assert_eq!(
            init(&prefix.join("lib/corral/corral-cli")),
            Some(prefix.join("lib/corral/../../bin/corral-init"))
        );
        assert_eq!(
            init(&prefix.join("bin/corral")),
            Some(prefix.join("bin/corral-init"))
        );
        // Nothing there: None (the caller says what is missing).
        let empty = d.path().join("empty/corral");
        assert_eq!(cli(&empty), None);
        assert_eq!(init(&empty), None);
    }
}
