//! `corral run`'s command line in its plain forms, read without clap: `corral
//! run` is the hot path (a CGI wrapper or shebang interpreter starts it for
//! every request), and the lean `corral` front program (crates/corral-front),
//! which answers it, has no clap and no standard library: it includes this
//! file as it is, so it uses `core` and `alloc` only. The full command line
//! (src/cli.rs) turns a [`RunLine`] into its clap types; its unit test
//! checks that every line this parser accepts is the one clap would parse.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

pub const DEFAULT_CONFIG_DIR: &str = "/etc/corral";
pub const DEFAULT_STATE_DIR: &str = "/run/corral";
pub const DEFAULT_CGROUP_PARENT: &str = "corral";

/// The global options and the `run` ones of a plain `corral run` line (the
/// fields of the CLI's `Global` and `RunArgs`).
#[derive(Debug, PartialEq)]
pub struct RunLine {
    pub config_dir: String,
    pub state_dir: String,
    pub cgroup_parent: String,
    pub json: bool,
    pub tenant: String,
    pub cwd: Option<String>,
    pub env: Vec<String>,
    pub preserve_fds: u16,
    pub detach: bool,
    pub log: Option<String>,
    pub command: Vec<String>,
}

impl RunLine {
    /// `corral run`'s arguments (global ones included, `run` itself left
    /// out) in their plain forms. `None` for anything else (help, an unknown
    /// or repeated option, an empty value or one that looks like an option,
    /// a missing tenant or command...): the caller then parses with clap,
    /// which answers exactly as before. `env` gives an environment
    /// variable's bytes (a value that is not UTF-8 declines too).
    pub fn parse(args: &[&str], env: impl Fn(&str) -> Option<Vec<u8>>) -> Option<RunLine> {
        let (mut config_dir, mut state_dir, mut cgroup_parent): (
            Option<String>,
            Option<String>,
            Option<String>,
        ) = (None, None, None);
        let (mut tenant, mut cwd, mut log, mut preserve): (
            Option<String>,
            Option<String>,
            Option<String>,
            Option<u16>,
        ) = (None, None, None, None);
        let (mut json, mut detach, mut envs, mut command) = (false, false, Vec::new(), None);
        let mut it = args.iter();
        while let Some(&a) = it.next() {
            if a == "--" {
                command = Some(it.map(|c| c.to_string()).collect::<Vec<String>>());
                break;
            }
            let (name, inline) = match a.split_once('=') {
                Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
                _ => (a, None),
            };
            let mut value = || -> Option<String> {
                let v = match &inline {
                    Some(v) => v.clone(),
                    None => it.next()?.to_string(),
                };
                (!v.is_empty() && !v.starts_with('-')).then_some(v)
            };
            fn once<T>(slot: &mut Option<T>, v: T) -> Option<()> {
                slot.is_none().then(|| *slot = Some(v))
            }
            match name {
                "--config-dir" => once(&mut config_dir, value()?)?,
                "--state-dir" => once(&mut state_dir, value()?)?,
                "--cgroup-parent" => once(&mut cgroup_parent, value()?)?,
                "--cwd" => once(&mut cwd, value()?)?,
                "--log" => once(&mut log, value()?)?,
                "--preserve-fds" => once(&mut preserve, value()?.parse().ok()?)?,
                "--env" | "-e" => envs.push(value()?),
                "--json" if inline.is_none() && !json => json = true,
                "--detach" if inline.is_none() && !detach => detach = true,
                _ if !a.starts_with('-') && tenant.is_none() => tenant = Some(a.to_string()),
                _ => return None,
            }
        }
        let command = command.filter(|c| !c.is_empty())?;
        if log.is_some() && !detach {
            return None;
        }
        let from_env = |var: &str, default: &str| -> Option<String> {
            match env(var) {
                None => Some(default.to_string()),
                Some(v) if !v.is_empty() => String::from_utf8(v).ok(),
                Some(_) => None,
            }
        };
        Some(RunLine {
            config_dir: config_dir
                .map_or_else(|| from_env("CORRAL_CONFIG_DIR", DEFAULT_CONFIG_DIR), Some)?,
            state_dir: state_dir
                .map_or_else(|| from_env("CORRAL_STATE_DIR", DEFAULT_STATE_DIR), Some)?,
            cgroup_parent: cgroup_parent.map_or_else(
                || from_env("CORRAL_CGROUP_PARENT", DEFAULT_CGROUP_PARENT),
                Some,
            )?,
            json,
            tenant: tenant?,
            cwd,
            env: envs,
            preserve_fds: preserve.unwrap_or(0),
            detach,
            log,
            command,
        })
    }
}

/// `--env NAME=VALUE` values as (name, value) pairs; `Err` holds the first
/// value without a name and `=`.
pub fn env_pairs(v: &[String]) -> Result<Vec<(String, String)>, &String> {
    v.iter()
        .map(|s| match s.split_once('=') {
            Some((k, val)) if !k.is_empty() => Ok((k.to_string(), val.to_string())),
            _ => Err(s),
        })
        .collect()
}

/// If `args` (without argv[0]) is a `corral run` command line, its
/// arguments for [`RunCli`]: global options before `run` (the way the
/// bench and wrappers write them) are kept, `run` itself is dropped.
pub fn run_command_args<'a>(args: &[&'a str]) -> Option<Vec<&'a str>> {
    const WITH_VALUE: [&str; 3] = ["--state-dir", "--config-dir", "--cgroup-parent"];
    let mut i = 0;
    while let Some(&a) = args.get(i) {
        if a == "run" {
            let mut out = args[..i].to_vec();
            out.extend_from_slice(&args[i + 1..]);
            return Some(out);
        }
        let inline = WITH_VALUE
            .iter()
            .any(|o| a.strip_prefix(o).is_some_and(|r| r.starts_with('=')));
        i += match a {
            _ if WITH_VALUE.contains(&a) => 2,
            "--json" => 1,
            _ if inline => 1,
            _ => return None,
        };
    }
    None
}
