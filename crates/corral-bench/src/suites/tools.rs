//! External programs the suites drive, with the Debian package that ships
//! each, so a missing one is reported as "install X" rather than ENOENT.

use std::path::PathBuf;

use crate::error::{BenchError, Result};
use crate::machine::find_tool;

/// A program and the Debian package providing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tool {
    pub name: &'static str,
    pub package: &'static str,
}

pub const NGINX: Tool = Tool::new("nginx", "nginx-light");
pub const FCGIWRAP: Tool = Tool::new("fcgiwrap", "fcgiwrap");
pub const H2LOAD: Tool = Tool::new("h2load", "nghttp2-client");
pub const BWRAP: Tool = Tool::new("bwrap", "bubblewrap");
pub const PHP_CGI: Tool = Tool::new("php-cgi", "php-cgi");
pub const CC: Tool = Tool::new("cc", "gcc");
pub const MUSL_GCC: Tool = Tool::new("musl-gcc", "musl-tools");
pub const NSENTER: Tool = Tool::new("nsenter", "util-linux");
pub const SETPRIV: Tool = Tool::new("setpriv", "util-linux");
pub const TASKSET: Tool = Tool::new("taskset", "util-linux");
pub const TIMEOUT: Tool = Tool::new("timeout", "coreutils");
pub const IP: Tool = Tool::new("ip", "iproute2");
pub const FIREJAIL: Tool = Tool::new("firejail", "firejail");
pub const NSJAIL: Tool = Tool::new("nsjail", "nsjail");
pub const MINIJAIL: Tool = Tool::new("minijail0", "minijail");

/// Optional contenders of the join suite: measured when installed.
pub const OPTIONAL: &[Tool] = &[FIREJAIL, NSJAIL, MINIJAIL];

impl Tool {
    /// `name`, shipped by the Debian package `package`.
    pub const fn new(name: &'static str, package: &'static str) -> Tool {
        Tool { name, package }
    }

    /// Where the program is (PATH plus the sbin directories), if installed.
    pub fn find(&self) -> Option<PathBuf> {
        find_tool(self.name)
    }
}

/// The paths of `tools`, or one error naming every missing tool and package.
pub fn require(tools: &[Tool]) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for t in tools {
        match t.find() {
            Some(p) => found.push(p),
            None if !missing.contains(t) => missing.push(*t),
            None => {}
        }
    }
    if missing.is_empty() {
        Ok(found)
    } else {
        Err(BenchError::MissingTools(missing))
    }
}

/// `missing tools: h2load (Debian package nghttp2-client), …; install them
/// with: apt-get install nghttp2-client …`.
pub fn missing_message(missing: &[Tool]) -> String {
    let list: Vec<String> = missing
        .iter()
        .map(|t| format!("{} (Debian package {})", t.name, t.package))
        .collect();
    let mut pkgs: Vec<&str> = missing.iter().map(|t| t.package).collect();
    pkgs.dedup();
    format!(
        "missing tools: {}; install them with: apt-get install {} (scripts/install-deps.sh installs everything corral's benchmarks use)",
        list.join(", "),
        pkgs.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_packages() {
        let m = missing_message(&[H2LOAD, BWRAP]);
        assert!(m.contains("h2load (Debian package nghttp2-client)"), "{m}");
        assert!(
            m.contains("apt-get install nghttp2-client bubblewrap"),
            "{m}"
        );
    }

    #[test]
    fn require_reports_every_missing_tool() {
        let ghost = Tool {
            name: "corral-no-such-tool-1",
            package: "ghost-one",
        };
        let ghost2 = Tool {
            name: "corral-no-such-tool-2",
            package: "ghost-two",
        };
        match require(&[ghost, TIMEOUT, ghost2]) {
            Err(BenchError::MissingTools(v)) => assert_eq!(v, vec![ghost, ghost2]),
            other => panic!("{other:?}"),
        }
    }
}
