//! Describing the machine a benchmark ran on.
//!
//! [`Machine::detect`] never fails: anything it cannot read is recorded as
//! `"unknown"` (or 0), and a tool that is not installed is recorded as missing
//! (`path: null`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How long a version probe may run before it is killed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Which cgroup hierarchy the host mounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupMode {
    /// Only legacy (v1) controller hierarchies.
    V1,
    /// The unified hierarchy at /sys/fs/cgroup.
    V2,
    /// v1 controllers plus a cgroup2 mount elsewhere (e.g. /sys/fs/cgroup/unified).
    Hybrid,
    #[default]
    Unknown,
}

impl CgroupMode {
    pub fn as_str(self) -> &'static str {
        match self {
            CgroupMode::V1 => "v1",
            CgroupMode::V2 => "v2",
            CgroupMode::Hybrid => "hybrid",
            CgroupMode::Unknown => "unknown",
        }
    }
}

/// A tool's location and version line; `path: None` means not installed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ToolInfo {
    #[serde(default)]
    pub path: Option<String>,
    /// The tool's own version line (e.g. `h2load nghttp2/1.52.0`), or the
    /// Debian package version for tools without a version flag.
    #[serde(default)]
    pub version: Option<String>,
}

impl ToolInfo {
    pub fn is_missing(&self) -> bool {
        self.path.is_none()
    }

    /// `missing`, `unknown version` or the version line.
    pub fn describe(&self) -> &str {
        match (&self.path, &self.version) {
            (None, _) => "missing",
            (Some(_), None) => "unknown version",
            (Some(_), Some(v)) => v,
        }
    }
}

/// The machine a result set was measured on.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Machine {
    /// `uname -srm`, e.g. `Linux 6.1.0-18-amd64 x86_64`.
    pub kernel: String,
    /// PRETTY_NAME from os-release.
    pub distro: String,
    pub cpu_model: String,
    /// Online logical CPUs.
    pub cpus: u32,
    /// MemTotal in bytes.
    pub memory_bytes: u64,
    pub cgroup: CgroupMode,
    /// Tool name → where and which version.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolInfo>,
}

impl Machine {
    /// Inspect this machine and the given tools (e.g. `["nginx", "h2load"]`).
    pub fn detect(tools: &[&str]) -> Machine {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let os_release = std::fs::read_to_string("/etc/os-release")
            .or_else(|_| std::fs::read_to_string("/usr/lib/os-release"))
            .unwrap_or_default();
        let cpuinfo = read("/proc/cpuinfo");
        // SAFETY: sysconf has no memory-safety preconditions.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        let cpus = if online > 0 {
            online as u32
        } else {
            cpuinfo
                .lines()
                .filter(|l| l.starts_with("processor"))
                .count() as u32
        };
        let home = tempfile::tempdir().ok();
        Machine {
            kernel: uname().unwrap_or_else(|| "unknown".into()),
            distro: parse_os_release(&os_release).unwrap_or_else(|| "unknown".into()),
            cpu_model: parse_cpu_model(&cpuinfo).unwrap_or_else(|| "unknown".into()),
            cpus,
            memory_bytes: parse_mem_total(&read("/proc/meminfo")).unwrap_or(0),
            cgroup: parse_cgroup_mode(&read("/proc/self/mounts")),
            tools: tools
                .iter()
                .map(|t| {
                    (
                        t.to_string(),
                        probe_tool(t, home.as_ref().map(|h| h.path())),
                    )
                })
                .collect(),
        }
    }
}

fn uname() -> Option<String> {
    // SAFETY: utsname is plain old data; uname fills it with NUL-terminated strings.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname that outlives the call; uname
    // writes only within it.
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Some(format!(
        "{} {} {}",
        field(&u.sysname),
        field(&u.release),
        field(&u.machine)
    ))
}

/// PRETTY_NAME (quotes removed) from os-release text.
pub fn parse_os_release(text: &str) -> Option<String> {
    let v = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("PRETTY_NAME="))?;
    let v = v.trim().trim_matches(|c| c == '"' || c == '\'');
    (!v.is_empty()).then(|| v.to_string())
}

/// The first CPU model line of /proc/cpuinfo (x86 `model name`, some ARM
/// kernels `Hardware`/`Processor`, POWER `cpu`).
pub fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    for key in ["model name", "Hardware", "Processor", "cpu model", "cpu"] {
        for line in cpuinfo.lines() {
            if let Some((k, v)) = line.split_once(':') {
                if k.trim() == key && !v.trim().is_empty() {
                    return Some(v.trim().to_string());
                }
            }
        }
    }
    None
}

/// MemTotal from /proc/meminfo, in bytes.
pub fn parse_mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut it = line["MemTotal:".len()..].split_whitespace();
    let n: u64 = it.next()?.parse().ok()?;
    Some(match it.next() {
        Some("kB") | None => n * 1024,
        Some(_) => return None,
    })
}

/// cgroup mode from /proc/self/mounts text.
pub fn parse_cgroup_mode(mounts: &str) -> CgroupMode {
    let (mut v1, mut v2, mut v2_root) = (false, false, false);
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 3 {
            continue;
        }
        match f[2] {
            "cgroup" => v1 = true,
            "cgroup2" => {
                v2 = true;
                v2_root |= f[1] == "/sys/fs/cgroup";
            }
            _ => {}
        }
    }
    match (v1, v2) {
        _ if v2_root && !v1 => CgroupMode::V2,
        (true, true) => CgroupMode::Hybrid,
        (true, false) => CgroupMode::V1,
        (false, true) => CgroupMode::V2,
        (false, false) => CgroupMode::Unknown,
    }
}

/// How to ask a tool its version.
enum Probe {
    /// Run the tool with these arguments; the version is in stdout or stderr.
    Args(&'static [&'static str]),
    /// The tool has no version flag: ask dpkg for this package's version.
    Dpkg(&'static str),
}

/// Known tools. Anything else is tried with `--version`, then via dpkg.
const PROBES: &[(&str, Probe)] = &[
    ("nginx", Probe::Args(&["-v"])),
    ("h2load", Probe::Args(&["--version"])),
    ("bwrap", Probe::Args(&["--version"])),
    ("siege", Probe::Args(&["--version"])),
    ("php-cgi", Probe::Args(&["-v"])),
    ("php-fpm", Probe::Args(&["-v"])),
    ("fcgiwrap", Probe::Dpkg("fcgiwrap")),
    ("firejail", Probe::Args(&["--version"])),
    ("nsjail", Probe::Args(&["--help"])),
    ("unshare", Probe::Args(&["--version"])),
    ("perf", Probe::Args(&["--version"])),
];

/// Locate `name` on PATH (plus the sbin directories a non-root PATH lacks).
pub fn find_tool(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let extra = ["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from);
    std::env::split_paths(&path).chain(extra).find_map(|dir| {
        let p = dir.join(name);
        let meta = std::fs::metadata(&p).ok()?;
        (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(p)
    })
}

fn probe_tool(name: &str, home: Option<&Path>) -> ToolInfo {
    let Some(path) = find_tool(name) else {
        return ToolInfo::default();
    };
    let probe = PROBES.iter().find(|(n, _)| *n == name).map(|(_, p)| p);
    let version = match probe {
        Some(Probe::Args(args)) => {
            run_capture(&path, args, home).and_then(|(_, o)| version_line(&o))
        }
        Some(Probe::Dpkg(pkg)) => dpkg_version(pkg),
        // Unknown tool: trust `--version` only if it succeeded and printed
        // something version-like; otherwise ask dpkg who owns the binary.
        None => run_capture(&path, &["--version"], home)
            .filter(|(ok, o)| *ok && has_version_token(o))
            .and_then(|(_, o)| version_line(&o))
            .or_else(|| dpkg_owner(&path).and_then(|p| dpkg_version(&p))),
    };
    ToolInfo {
        path: Some(path.display().to_string()),
        version,
    }
}

fn dpkg_version(pkg: &str) -> Option<String> {
    let (ok, out) = run_capture(Path::new("dpkg-query"), &["-W", "-f=${Version}", pkg], None)?;
    let v = out.trim();
    (ok && !v.is_empty()).then(|| format!("{pkg} {v} (dpkg)"))
}

fn dpkg_owner(path: &Path) -> Option<String> {
    let p = path.to_str()?;
    let (ok, out) = run_capture(Path::new("dpkg-query"), &["-S", p], None)?;
    if !ok {
        return None;
    }
    let pkg = out.lines().next()?.split_once(':')?.0.trim();
    (!pkg.is_empty() && !pkg.contains(' ')).then(|| pkg.to_string())
}

/// Run a probe with stdin closed and a time limit: (exited 0, stdout followed
/// by stderr).
/// `HOME` is pointed at a scratch directory so probes cannot write into the
/// user's home (siege creates `~/.siege/siege.conf` on its first run).
fn run_capture(program: &Path, args: &[&str], home: Option<&Path>) -> Option<(bool, String)> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("LC_ALL", "C");
    if let Some(h) = home {
        cmd.env("HOME", h);
    }
    let child = cmd.spawn().ok()?;
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(PROBE_TIMEOUT) {
        Ok(r) => r.ok()?,
        Err(_) => {
            // Our own child, by pid; the reaper thread then collects it.
            // SAFETY: kill(2) with a pid we spawned and have not yet reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = rx.recv_timeout(Duration::from_secs(1));
            return None;
        }
    };
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push('\n');
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    Some((out.status.success(), s))
}

/// Pick the line carrying the version: the first line with a `digit.digit`
/// token, else the first non-empty line. ANSI colour codes are removed.
pub fn version_line(output: &str) -> Option<String> {
    let clean = strip_ansi(output);
    let lines: Vec<&str> = clean
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines
        .iter()
        .find(|l| has_version_token(l))
        .or_else(|| lines.first())
        .map(|l| l.to_string())
}

fn has_version_token(s: &str) -> bool {
    s.as_bytes()
        .windows(3)
        .any(|w| w[0].is_ascii_digit() && w[1] == b'.' && w[2].is_ascii_digit())
}

/// Remove ANSI CSI escape sequences (`ESC [ ... letter`).
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_release() {
        let t = "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nVERSION_ID=\"12\"\n";
        assert_eq!(
            parse_os_release(t).as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
        assert_eq!(parse_os_release("NAME=x\n"), None);
    }

    #[test]
    fn cpu_and_memory() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Processor\n\nprocessor\t: 1\n";
        assert_eq!(
            parse_cpu_model(cpuinfo).as_deref(),
            Some("Intel(R) Xeon(R) Processor")
        );
        assert_eq!(
            parse_mem_total("MemTotal:       24684092 kB\nMemFree: 1 kB\n"),
            Some(24684092 * 1024)
        );
        assert_eq!(parse_mem_total("MemFree: 1 kB\n"), None);
    }

    #[test]
    fn cgroup_modes() {
        let hybrid = "tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n";
        assert_eq!(parse_cgroup_mode(hybrid), CgroupMode::Hybrid);
        let v2 = "proc /proc proc rw 0 0\ncgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n";
        assert_eq!(parse_cgroup_mode(v2), CgroupMode::V2);
        let v1 = "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n";
        assert_eq!(parse_cgroup_mode(v1), CgroupMode::V1);
        assert_eq!(parse_cgroup_mode(""), CgroupMode::Unknown);
    }

    #[test]
    fn picks_version_lines() {
        // siege's first run prints a template notice before its version.
        let siege = "New configuration template added to /tmp/x/.siege\nRun siege -C to view the current settings in that file\nSIEGE 4.0.7\n\nCopyright (C) 2018 by Jeffrey Fulmer, et al.\n";
        assert_eq!(version_line(siege).as_deref(), Some("SIEGE 4.0.7"));
        assert_eq!(
            version_line("\nnginx version: nginx/1.22.1\n").as_deref(),
            Some("nginx version: nginx/1.22.1")
        );
        assert_eq!(strip_ansi("[\u{1b}[1;33merror\u{1b}[0m] x"), "[error] x");
    }

    #[test]
    fn missing_tool_is_recorded_not_an_error() {
        let m = Machine::detect(&["corral-no-such-tool-xyz", "sh"]);
        assert!(m.tools["corral-no-such-tool-xyz"].is_missing());
        assert_eq!(m.tools["corral-no-such-tool-xyz"].describe(), "missing");
        assert!(!m.tools["sh"].is_missing());
        assert!(m.cpus >= 1);
        assert!(m.memory_bytes > 0);
        assert!(m.kernel.starts_with("Linux "), "{}", m.kernel);
    }
}
