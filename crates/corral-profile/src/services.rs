//! `[services.NAME]`: long-running programs of a tenant (a PHP-FPM pool, an
//! app server) that the tenant's init supervises inside the sandbox.
//! Read and checked here, expanded for a tenant into [`ServicePlan`]s.

use crate::doc::{Table, L};
use crate::error::{invalid, ProfileError};
use crate::expand::expand;
use crate::layer::choice;
use crate::plan::{Restart, ServicePlan, StartMode, Tenant};
use crate::values::{self, abs_path, abs_path_not_root, ENV_NAME};
use std::collections::BTreeMap;
use std::path::PathBuf;

pub(crate) const SERVICE_NAME: &str =
    "a service name: 1 to 32 lowercase letters, digits, '-' or '_', starting with a letter";

pub(crate) fn is_service_name(s: &str) -> bool {
    let mut b = s.bytes();
    s.len() <= 32
        && b.next().is_some_and(|c| c.is_ascii_lowercase())
        && b.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'_')
}

/// Signals a service may name as its stop signal.
const SIGNALS: &[(&str, i32)] = &[
    ("SIGTERM", libc_sig::TERM),
    ("SIGQUIT", libc_sig::QUIT),
    ("SIGINT", libc_sig::INT),
    ("SIGHUP", libc_sig::HUP),
    ("SIGUSR1", libc_sig::USR1),
    ("SIGUSR2", libc_sig::USR2),
    ("SIGWINCH", libc_sig::WINCH),
    ("SIGKILL", libc_sig::KILL),
];

/// Linux signal numbers (the profile crate does not link libc).
mod libc_sig {
    pub const HUP: i32 = 1;
    pub const INT: i32 = 2;
    pub const QUIT: i32 = 3;
    pub const KILL: i32 = 9;
    pub const USR1: i32 = 10;
    pub const USR2: i32 = 12;
    pub const TERM: i32 = 15;
    pub const WINCH: i32 = 28;
}

/// The name of a stop signal, for display.
pub fn signal_name(sig: i32) -> &'static str {
    SIGNALS
        .iter()
        .find(|(_, n)| *n == sig)
        .map_or("SIG?", |(name, _)| name)
}

/// One `[services.NAME]` table as written.
#[derive(Debug)]
pub(crate) struct RawService {
    pub name: L<String>,
    /// `enabled = false` in a tenant override removes the template's service.
    pub enabled: bool,
    pub command: Vec<L<String>>,
    pub env: BTreeMap<String, L<String>>,
    pub workdir: Option<L<String>>,
    pub start: Option<L<StartMode>>,
    pub restart: Option<L<Restart>>,
    pub idle_timeout: Option<L<u64>>,
    pub stop_signal: Option<L<i32>>,
    pub stop_timeout: Option<L<u64>>,
    pub listen: Vec<L<String>>,
    pub listen_group: Option<L<String>>,
    pub listen_mode: Option<L<u32>>,
    pub log: Option<L<String>>,
    pub log_max_size: Option<L<u64>>,
    pub log_keep: Option<L<u64>>,
}

const KEYS: &[&str] = &[
    "enabled",
    "command",
    "env",
    "workdir",
    "start",
    "restart",
    "idle_timeout",
    "stop_signal",
    "stop_timeout",
    "listen",
    "listen_group",
    "listen_mode",
    "log",
    "log_max_size",
    "log_keep",
];

/// `[services]`: a table of service tables, in file order.
pub(crate) fn parse(t: &Table<'_>) -> Result<Vec<RawService>, ProfileError> {
    let mut out = Vec::new();
    for (name, _) in t.inner.iter() {
        let Some(entry) = t.get(name) else { continue };
        if !is_service_name(name) {
            return Err(invalid(
                &entry.key_at,
                &t.path,
                SERVICE_NAME,
                format!("{name:?}"),
            ));
        }
        let s = entry.table()?;
        s.check_keys(KEYS)?;
        let string = |key| s.get(key).map(|e| e.string()).transpose();
        let command = match s.get("command") {
            Some(e) => {
                let c = e.strings()?;
                if c.is_empty() || c[0].v.is_empty() {
                    return Err(
                        e.wrong_type("a non-empty array of strings (program, arguments...)")
                    );
                }
                c
            }
            // `enabled = false` alone removes the template's service.
            None if s
                .get("enabled")
                .and_then(|e| e.value().and_then(|v| v.as_bool()))
                == Some(false) =>
            {
                Vec::new()
            }
            None => {
                return Err(invalid(
                    &s.at,
                    &s.child_path("command"),
                    "a command: an array of strings (program, arguments...)",
                    "nothing",
                ))
            }
        };
        let mut env = BTreeMap::new();
        if let Some(e) = s.get("env") {
            let et = e.table()?;
            for (k, _) in et.inner.iter() {
                let Some(v) = et.get(k) else { continue };
                if !values::is_env_name(k) {
                    return Err(invalid(&v.key_at, &et.path, ENV_NAME, format!("{k:?}")));
                }
                env.insert(k.to_string(), v.string()?);
            }
        }
        let listen = match s.get("listen") {
            None => Vec::new(),
            Some(e) if e.value().is_some_and(|v| v.is_str()) => vec![e.string()?],
            Some(e) => {
                let l = e.strings()?;
                if l.len() > MAX_SOCKETS {
                    return Err(e.wrong_type(&format!(
                        "a socket path or an array of at most {MAX_SOCKETS}"
                    )));
                }
                l
            }
        };
        let start = s.get("start").map(|e| {
            let modes = [StartMode::OnDemand, StartMode::AtUp].map(|m| (m.name(), m));
            choice(&e, &modes)
        });
        let restart = s.get("restart").map(|e| {
            choice(
                &e,
                &[
                    ("always", Restart::Always),
                    ("on-failure", Restart::OnFailure),
                    ("never", Restart::Never),
                ],
            )
        });
        let log_keep = match s.get("log_keep") {
            None => None,
            Some(e) => match e.value().and_then(|v| v.as_integer()) {
                Some(n) if (0..=20).contains(&n) => Some(L {
                    v: n as u64,
                    at: e.at(),
                    key: e.key.clone(),
                }),
                _ => return Err(e.wrong_type("an integer from 0 to 20 (rotated files kept)")),
            },
        };
        out.push(RawService {
            name: L {
                v: name.to_string(),
                at: entry.key_at.clone(),
                key: entry.key.clone(),
            },
            enabled: s
                .get("enabled")
                .map(|e| e.boolean())
                .transpose()?
                .is_none_or(|b| b.v),
            command,
            env,
            workdir: string("workdir")?,
            start: start.transpose()?,
            restart: restart.transpose()?,
            idle_timeout: s
                .get("idle_timeout")
                .map(|e| values::duration_ms(&e))
                .transpose()?,
            stop_signal: s
                .get("stop_signal")
                .map(|e| choice(&e, SIGNALS))
                .transpose()?,
            stop_timeout: s
                .get("stop_timeout")
                .map(|e| values::duration_ms(&e))
                .transpose()?,
            listen,
            listen_group: string("listen_group")?,
            listen_mode: s.get("listen_mode").map(|e| values::mode(&e)).transpose()?,
            log: string("log")?,
            log_max_size: s
                .get("log_max_size")
                .map(|e| values::size(&e))
                .transpose()?,
            log_keep,
        });
    }
    Ok(out)
}

/// A tenant override's services on top of the template's: a service of the
/// same name is replaced whole (or removed with `enabled = false`).
pub(crate) fn overlay(base: Vec<RawService>, over: Vec<RawService>) -> Vec<RawService> {
    let mut out: Vec<RawService> = base
        .into_iter()
        .filter(|b| !over.iter().any(|o| o.name.v == b.name.v))
        .collect();
    out.extend(over);
    out
}

/// Most sockets one service takes (they become its fds 3..18).
const MAX_SOCKETS: usize = 16;

/// Longest unix socket path (sun_path holds 108 bytes with the NUL).
const MAX_SOCKET_PATH: usize = 107;
pub(crate) const DEFAULT_IDLE_MS: u64 = 10 * 60 * 1000;

impl RawService {
    pub fn lower(
        &self,
        tenant: &Tenant,
        workdir: &std::path::Path,
    ) -> Result<ServicePlan, ProfileError> {
        let ex = |l: &L<String>| -> Result<L<String>, ProfileError> {
            Ok(L {
                v: expand(l, tenant)?,
                ..l.clone()
            })
        };
        let command = self
            .command
            .iter()
            .map(|c| ex(c).map(|l| l.v))
            .collect::<Result<Vec<_>, _>>()?;
        let env = self
            .env
            .iter()
            .map(|(k, v)| Ok((k.clone(), expand(v, tenant)?)))
            .collect::<Result<BTreeMap<_, _>, ProfileError>>()?;
        let mut listen = Vec::new();
        for l in &self.listen {
            let p = abs_path_not_root(&ex(l)?)?;
            if p.as_os_str().len() > MAX_SOCKET_PATH {
                return Err(l.invalid(
                    format!("a socket path of at most {MAX_SOCKET_PATH} bytes"),
                    format!("{:?} ({} bytes)", p.display(), p.as_os_str().len()),
                ));
            }
            if listen.contains(&p) {
                return Err(l.invalid("each socket path once", format!("{:?} twice", p.display())));
            }
            listen.push(p);
        }
        let start = match &self.start {
            Some(s) => s.v,
            None if listen.is_empty() => StartMode::AtUp,
            None => StartMode::OnDemand,
        };
        if start == StartMode::OnDemand && listen.is_empty() {
            let s = self
                .start
                .as_ref()
                .expect("on-demand is only the default with listen");
            return Err(s.invalid(
                "start = \"at-up\" for a service without listen (on-demand starts on a connection to one of its sockets)",
                "\"on-demand\"",
            ));
        }
        let listen_gid = match &self.listen_group {
            None => 0,
            Some(g) => group_gid(g)?,
        };
        let workdir = match &self.workdir {
            Some(w) => abs_path(&ex(w)?)?,
            None => workdir.to_path_buf(),
        };
        let log = match &self.log {
            Some(l) => abs_path_not_root(&ex(l)?)?,
            None => PathBuf::from(format!(
                "/var/log/corral/{}/{}.log",
                tenant.name, self.name.v
            )),
        };
        Ok(ServicePlan {
            name: self.name.v.clone(),
            command,
            env,
            workdir,
            start,
            restart: self.restart.as_ref().map_or(Restart::OnFailure, |r| r.v),
            idle_timeout_ms: match (&self.idle_timeout, start) {
                (Some(t), _) => t.v,
                (None, StartMode::OnDemand) => DEFAULT_IDLE_MS,
                (None, StartMode::AtUp) => 0,
            },
            stop_signal: self.stop_signal.as_ref().map_or(libc_sig::TERM, |s| s.v),
            stop_timeout_ms: self.stop_timeout.as_ref().map_or(10_000, |t| t.v),
            listen,
            listen_gid,
            listen_mode: self.listen_mode.as_ref().map_or(0o660, |m| m.v),
            log,
            log_max_size: self.log_max_size.as_ref().map_or(1 << 20, |s| s.v),
            log_keep: self.log_keep.as_ref().map_or(3, |k| k.v as u32),
        })
    }
}

/// A group name (or a number) to its gid.
fn group_gid(g: &L<String>) -> Result<u32, ProfileError> {
    if let Ok(n) = g.v.parse::<u32>() {
        return Ok(n);
    }
    match corral_users::Db::system().group_by_name(&g.v) {
        Ok(Some(grp)) => Ok(grp.gid),
        Ok(None) => Err(g.invalid(
            "the name of an existing group (or a gid)",
            format!("{:?}", g.v),
        )),
        Err(e) => Err(g.invalid(
            "a group the group database can be read for",
            format!("{:?}: {e}", g.v),
        )),
    }
}
