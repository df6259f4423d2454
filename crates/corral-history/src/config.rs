//! `history.toml` in corral's configuration directory: where the history is
//! kept, how often tenants are sampled, how long rows are kept, and the
//! alert rules. Every error names the file and the line.

use crate::row::FAULT_KINDS;
use crate::store::Retention;
use serde::Deserialize;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

/// The database unless history.toml or `--db` says otherwise.
pub const DEFAULT_DATABASE: &str = "/var/lib/corral/history.db";
/// The sampling interval unless history.toml or `--interval` says otherwise.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);
/// Shortest interval accepted (tests sample every 200 ms).
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// TOML syntax or an unknown key (toml's message names line and column).
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}:{line}: {what}")]
    Invalid {
        path: PathBuf,
        line: usize,
        what: String,
    },
}

/// What history.toml says, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryConfig {
    pub database: PathBuf,
    pub interval: Duration,
    pub retention: Retention,
    pub rules: Vec<Rule>,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            database: DEFAULT_DATABASE.into(),
            interval: DEFAULT_INTERVAL,
            retention: Retention::default(),
            rules: vec![],
        }
    }
}

/// A resource whose usage a rule compares with the tenant's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Cpu,
    Memory,
    Processes,
    Entry,
    IoRead,
    IoWrite,
    IopsRead,
    IopsWrite,
}

impl Resource {
    pub const NAMES: &'static [&'static str] = &[
        "cpu",
        "memory",
        "processes",
        "entry",
        "io_read",
        "io_write",
        "iops_read",
        "iops_write",
    ];
    pub const ALL: [Resource; 8] = [
        Resource::Cpu,
        Resource::Memory,
        Resource::Processes,
        Resource::Entry,
        Resource::IoRead,
        Resource::IoWrite,
        Resource::IopsRead,
        Resource::IopsWrite,
    ];

    pub fn name(self) -> &'static str {
        Resource::NAMES[Resource::ALL.iter().position(|r| *r == self).unwrap_or(0)]
    }

    pub fn parse(s: &str) -> Option<Resource> {
        Resource::NAMES
            .iter()
            .position(|n| *n == s)
            .map(|i| Resource::ALL[i])
    }
}

/// When a rule fires.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// At least `count` faults of these kinds (empty: any) within the period.
    Faults { kinds: Vec<String>, count: i64 },
    /// The resource's average over the period at or above `pct` % of its limit.
    Usage { resource: Resource, pct: f64 },
}

/// Where an alert goes: a plain-HTTP URL with a numeric address (corral
/// resolves no host names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    pub url: String,
    pub addr: SocketAddr,
    /// Path and query, "/" at least.
    pub target: String,
}

/// An alert rule (`[[alert]]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub name: String,
    pub condition: Condition,
    pub period: Duration,
    /// At most one alert per tenant this often.
    pub every: Duration,
    pub command: Option<Vec<String>>,
    pub webhook: Option<Webhook>,
    /// Where it is written (for messages).
    pub line: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    database: Option<Spanned<PathBuf>>,
    interval: Option<Spanned<String>>,
    retention: Option<RetentionFile>,
    #[serde(default)]
    alert: Vec<Spanned<AlertFile>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RetentionFile {
    samples: Option<Spanned<String>>,
    minute: Option<Spanned<String>>,
    five_minutes: Option<Spanned<String>>,
    hour: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AlertFile {
    name: Spanned<String>,
    faults: Option<Spanned<Vec<String>>>,
    count: Option<Spanned<i64>>,
    usage: Option<Spanned<String>>,
    above: Option<Spanned<String>>,
    period: Option<Spanned<String>>,
    every: Option<Spanned<String>>,
    command: Option<Spanned<Vec<String>>>,
    webhook: Option<Spanned<String>>,
}

/// Parses "5s", "200ms", "24h", "60d" (humantime's forms).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim())
        .map_err(|e| format!("{s:?}: {e} (expected a duration such as 200ms, 5s, 15m, 24h, 60d)"))
}

/// Parses a webhook URL: `http://ADDR[:PORT][/PATH]`, ADDR numeric.
pub fn parse_webhook(url: &str) -> Result<Webhook, String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        format!("{url:?}: expected http://ADDRESS:PORT/PATH (plain HTTP; for HTTPS, a local relay)")
    })?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr = authority
        .parse::<SocketAddr>()
        .or_else(|_| {
            authority
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .map(|ip| SocketAddr::new(ip, 80))
        })
        .map_err(|_| {
            format!(
                "{url:?}: the host must be a numeric address (127.0.0.1, [::1]): corral \
                 resolves no host names"
            )
        })?;
    if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("{url:?}: spaces or control characters in the path"));
    }
    Ok(Webhook {
        url: url.to_string(),
        addr,
        target: path.to_string(),
    })
}

impl HistoryConfig {
    /// history.toml in `config_dir`; the defaults when there is none.
    pub fn load(config_dir: &Path) -> Result<HistoryConfig, ConfigError> {
        let path = config_dir.join("history.toml");
        match std::fs::read_to_string(&path) {
            Ok(text) => HistoryConfig::parse(&path, &text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(HistoryConfig::default()),
            Err(source) => Err(ConfigError::Read { path, source }),
        }
    }

    pub fn parse(path: &Path, text: &str) -> Result<HistoryConfig, ConfigError> {
        let f: File = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.into(),
            message: e.to_string().trim_end().replace('\n', "\n  "),
        })?;
        let line = |span: std::ops::Range<usize>| {
            text[..span.start.min(text.len())].lines().count().max(1)
        };
        let line_of = |span: std::ops::Range<usize>| {
            let l = line(span.clone());
            // A span starting right after a newline belongs to the next line.
            if text[..span.start.min(text.len())].ends_with('\n') {
                l + 1
            } else {
                l
            }
        };
        let invalid = |span: std::ops::Range<usize>, what: String| ConfigError::Invalid {
            path: path.into(),
            line: line_of(span),
            what,
        };
        let dur = |v: &Spanned<String>, key: &str| {
            parse_duration(v.get_ref()).map_err(|e| invalid(v.span(), format!("{key} = {e}")))
        };
        let mut c = HistoryConfig::default();
        if let Some(db) = &f.database {
            if !db.get_ref().is_absolute() {
                return Err(invalid(
                    db.span(),
                    format!("database = {:?}: expected an absolute path", db.get_ref()),
                ));
            }
            c.database = db.get_ref().clone();
        }
        if let Some(i) = &f.interval {
            c.interval = dur(i, "interval")?;
            if c.interval < MIN_INTERVAL || c.interval > Duration::from_secs(60) {
                return Err(invalid(
                    i.span(),
                    format!("interval = {:?}: expected 100ms to 60s", i.get_ref()),
                ));
            }
        }
        if let Some(r) = &f.retention {
            let secs = |d: Duration| d.as_secs().min(i64::MAX as u64) as i64;
            let checks: [(&Option<Spanned<String>>, &str, i64, &mut i64); 4] = [
                (&r.samples, "samples", 120, &mut c.retention.raw),
                (&r.minute, "minute", 600, &mut c.retention.minute),
                (
                    &r.five_minutes,
                    "five_minutes",
                    3600,
                    &mut c.retention.five_minutes,
                ),
                (&r.hour, "hour", 86_400, &mut c.retention.hour),
            ];
            for (v, key, min, slot) in checks {
                if let Some(v) = v {
                    let d = secs(dur(v, key)?);
                    if d < min {
                        return Err(invalid(
                            v.span(),
                            format!(
                                "{key} = {:?}: at least {} (rows are rolled up before they go)",
                                v.get_ref(),
                                humantime::format_duration(Duration::from_secs(min as u64))
                            ),
                        ));
                    }
                    *slot = d;
                }
            }
            let k = c.retention;
            if !(k.raw <= k.minute && k.minute <= k.five_minutes && k.five_minutes <= k.hour) {
                let span = r
                    .hour
                    .as_ref()
                    .or(r.five_minutes.as_ref())
                    .or(r.minute.as_ref())
                    .or(r.samples.as_ref())
                    .map(|s| s.span())
                    .unwrap_or(0..0);
                return Err(invalid(
                    span,
                    "[retention]: expected samples <= minute <= five_minutes <= hour".into(),
                ));
            }
        }
        let mut names = std::collections::HashSet::new();
        for a in &f.alert {
            let at = a.span();
            let a = a.get_ref();
            let name = a.name.get_ref();
            if name.is_empty()
                || !name
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch))
            {
                return Err(invalid(
                    a.name.span(),
                    format!("name = {name:?}: expected letters, digits, '-', '_' or '.'"),
                ));
            }
            if !names.insert(name.clone()) {
                return Err(invalid(
                    a.name.span(),
                    format!("name = {name:?}: another [[alert]] has this name"),
                ));
            }
            let condition = match (&a.faults, &a.usage) {
                (Some(kinds), None) => {
                    if a.above.is_some() {
                        return Err(invalid(
                            at,
                            format!("[[alert]] {name}: `above` goes with `usage`, not `faults`"),
                        ));
                    }
                    for k in kinds.get_ref() {
                        if k != "any" && !FAULT_KINDS.contains(&k.as_str()) {
                            return Err(invalid(
                                kinds.span(),
                                format!(
                                    "faults: unknown kind {k:?} (expected any, {})",
                                    FAULT_KINDS.join(", ")
                                ),
                            ));
                        }
                    }
                    let count = a.count.as_ref().map(|c| (*c.get_ref(), c.span()));
                    let count = match count {
                        Some((n, _)) if n >= 1 => n,
                        Some((n, span)) => {
                            return Err(invalid(span, format!("count = {n}: expected 1 or more")))
                        }
                        None => 1,
                    };
                    let mut kinds = kinds.get_ref().clone();
                    if kinds.iter().any(|k| k == "any") {
                        kinds.clear();
                    }
                    Condition::Faults { kinds, count }
                }
                (None, Some(res)) => {
                    if a.count.is_some() {
                        return Err(invalid(
                            at,
                            format!("[[alert]] {name}: `count` goes with `faults`, not `usage`"),
                        ));
                    }
                    let resource = Resource::parse(res.get_ref()).ok_or_else(|| {
                        invalid(
                            res.span(),
                            format!(
                                "usage = {:?}: expected one of {}",
                                res.get_ref(),
                                Resource::NAMES.join(", ")
                            ),
                        )
                    })?;
                    let above = a.above.as_ref().ok_or_else(|| {
                        invalid(
                            at.clone(),
                            format!(
                                "[[alert]] {name}: `usage` needs `above` (e.g. above = \"90%\")"
                            ),
                        )
                    })?;
                    let pct = parse_percent(above.get_ref())
                        .map_err(|e| invalid(above.span(), format!("above = {e}")))?;
                    Condition::Usage { resource, pct }
                }
                _ => {
                    return Err(invalid(
                        at,
                        format!(
                            "[[alert]] {name}: expected either `faults = [...]` (with `count`) or \
                             `usage = \"RESOURCE\"` (with `above`)"
                        ),
                    ))
                }
            };
            let period = match &a.period {
                Some(p) => {
                    let d = dur(p, "period")?;
                    if d < c.interval || d.as_secs() as i64 > c.retention.raw {
                        return Err(invalid(
                            p.span(),
                            format!(
                                "period = {:?}: expected from the interval ({}) up to the samples' \
                                 retention ({})",
                                p.get_ref(),
                                humantime::format_duration(c.interval),
                                humantime::format_duration(Duration::from_secs(c.retention.raw as u64))
                            ),
                        ));
                    }
                    d
                }
                None => Duration::from_secs(60),
            };
            let every = match &a.every {
                Some(e) => dur(e, "every")?,
                None => Duration::from_secs(3600),
            };
            let command = match &a.command {
                Some(cmd) => {
                    let argv = cmd.get_ref();
                    if argv.is_empty() || !Path::new(&argv[0]).is_absolute() {
                        return Err(invalid(
                            cmd.span(),
                            "command: expected [\"/absolute/program\", \"argument\", ...]".into(),
                        ));
                    }
                    Some(argv.clone())
                }
                None => None,
            };
            let webhook = match &a.webhook {
                Some(w) => Some(
                    parse_webhook(w.get_ref())
                        .map_err(|e| invalid(w.span(), format!("webhook = {e}")))?,
                ),
                None => None,
            };
            if command.is_none() && webhook.is_none() {
                return Err(invalid(
                    at,
                    format!("[[alert]] {name}: expected `command` or `webhook` (or both)"),
                ));
            }
            c.rules.push(Rule {
                name: name.clone(),
                condition,
                period,
                every,
                command,
                webhook,
                line: line_of(a.name.span()),
            });
        }
        Ok(c)
    }
}

/// "90%" or "90" → 90.0 (more than 0, at most 1000).
pub fn parse_percent(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: expected a percentage such as 90%"))?;
    if !(v > 0.0 && v <= 1000.0) {
        return Err(format!("{s:?}: expected more than 0% and at most 1000%"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<HistoryConfig, String> {
        HistoryConfig::parse(Path::new("/etc/corral/history.toml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn a_full_file_is_read() {
        let c = parse(
            "database = \"/srv/h.db\"\ninterval = \"2s\"\n[retention]\nsamples = \"30m\"\nhour = \"90d\"\n\
             [[alert]]\nname = \"procs\"\nfaults = [\"processes\", \"entry\"]\ncount = 3\nperiod = \"5m\"\n\
             webhook = \"http://127.0.0.1:9000/hook?x=1\"\n\
             [[alert]]\nname = \"mem\"\nusage = \"memory\"\nabove = \"90%\"\nevery = \"30m\"\n\
             command = [\"/usr/local/bin/notify\", \"-v\"]\n",
        )
        .unwrap();
        assert_eq!(c.database, PathBuf::from("/srv/h.db"));
        assert_eq!(c.interval, Duration::from_secs(2));
        assert_eq!(c.retention.raw, 1800);
        assert_eq!(c.retention.hour, 90 * 86_400);
        assert_eq!(c.retention.minute, 12 * 3600);
        assert_eq!(c.rules.len(), 2);
        let r = &c.rules[0];
        assert_eq!(
            r.condition,
            Condition::Faults {
                kinds: vec!["processes".into(), "entry".into()],
                count: 3
            }
        );
        assert_eq!(r.period, Duration::from_secs(300));
        assert_eq!(r.every, Duration::from_secs(3600));
        assert_eq!(r.line, 7);
        let w = r.webhook.as_ref().unwrap();
        assert_eq!(w.addr, "127.0.0.1:9000".parse().unwrap());
        assert_eq!(w.target, "/hook?x=1");
        let m = &c.rules[1];
        assert_eq!(
            m.condition,
            Condition::Usage {
                resource: Resource::Memory,
                pct: 90.0
            }
        );
        assert_eq!(m.every, Duration::from_secs(1800));
        assert_eq!(m.line, 13);
        assert_eq!(parse("").unwrap(), HistoryConfig::default());
    }

    #[test]
    fn errors_name_the_file_and_line() {
        for (text, want) in [
            ("interval = \"5\"\n", ":1: interval = \"5\""),
            ("\ninterval = \"5ms\"\n", ":2: interval = \"5ms\": expected 100ms to 60s"),
            ("database = \"rel.db\"\n", ":1: database"),
            ("[retention]\nhour = \"2h\"\n", ":2: hour = \"2h\": at least 1day"),
            ("[retention]\nminute = \"30d\"\n", "expected samples <= minute"),
            ("[[alert]]\nname = \"x\"\nfaults = [\"disk\"]\nwebhook = \"http://127.0.0.1/\"\n", ":3: faults: unknown kind \"disk\""),
            ("[[alert]]\nname = \"x\"\nfaults = [\"any\"]\n", ":1: [[alert]] x: expected `command` or `webhook`"),
            ("[[alert]]\nname = \"x\"\nusage = \"cpu\"\nwebhook = \"http://127.0.0.1/\"\n", "`usage` needs `above`"),
            ("[[alert]]\nname = \"x\"\nusage = \"cpu\"\nabove = \"0%\"\nwebhook = \"http://127.0.0.1/\"\n", ":4: above = \"0%\""),
            ("[[alert]]\nname = \"x\"\nfaults = [\"cpu\"]\nwebhook = \"http://hooks.example/x\"\n", ":4: webhook = \"http://hooks.example/x\": the host must be a numeric address"),
            ("[[alert]]\nname = \"x\"\nfaults = [\"cpu\"]\nwebhook = \"https://127.0.0.1/x\"\n", "plain HTTP"),
            ("[[alert]]\nname = \"x\"\nfaults = [\"cpu\"]\ncommand = [\"notify\"]\n", ":4: command: expected [\"/absolute"),
            ("[[alert]]\nname = \"x\"\nfaults = [\"cpu\"]\nperiod = \"1h\"\ncommand = [\"/bin/true\"]\n", ":4: period = \"1h\": expected from the interval"),
            ("[[alert]]\nname = \"x\"\nfaults = [\"cpu\"]\ncommand = [\"/bin/true\"]\n[[alert]]\nname = \"x\"\nfaults = [\"cpu\"]\ncommand = [\"/bin/true\"]\n", ":6: name = \"x\": another"),
            ("[[alert]]\nname = \"x\"\nfaults = [\"cpu\"]\ncomand = [\"/bin/true\"]\n", "line 4"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.starts_with("/etc/corral/history.toml"), "{e}");
            assert!(e.contains(want), "{text:?}: {e}\n(wanted {want:?})");
        }
    }

    #[test]
    fn webhooks_are_plain_http_to_numeric_addresses() {
        let w = parse_webhook("http://[::1]:8080").unwrap();
        assert_eq!(w.addr, "[::1]:8080".parse().unwrap());
        assert_eq!(w.target, "/");
        assert_eq!(parse_webhook("http://10.0.0.1/x").unwrap().addr.port(), 80);
        assert!(parse_webhook("http://localhost:80/").is_err());
        assert!(parse_webhook("http://127.0.0.1/a b").is_err());
    }
}
