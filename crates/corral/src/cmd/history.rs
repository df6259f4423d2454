//! Usage history: `corral daemon` (the collector: samples every running
//! tenant every few seconds into the history database, rolls up, applies
//! retention, snapshots processes at fault incidents, sends alerts) and
//! `corral history` (answers from the database, like lveinfo). Storage,
//! rollups and queries live in corral-history; the tenants are read by the
//! metrics exporter ([`crate::metrics::Exporter`]), the same reading as
//! `corral metrics` and `corral stats`.

use crate::ctx::Ctx;
use crate::metrics::Exporter;
use crate::out::out;
use clap::Args;
use corral_history::{
    chart, query, Alert, Collector, HistoryConfig, LimitsRow, Reading, Row, Store, Webhook,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const DAEMON_AFTER_HELP: &str = "Samples every running tenant's usage and fault counters (CPU, memory, \
processes, IO, IOPS, entry processes) every --interval into the history database (SQLite, WAL), rolls \
the samples up into 1-minute, 5-minute and hourly rows, deletes what the retention no longer keeps, \
stores the top processes of a tenant at each fault incident, and runs the alert rules. One daemon per \
database (a second one refuses to start). Settings and alert rules: <config-dir>/history.toml.

Examples:
  corral daemon                                   as config/corral-daemon.service runs it
  corral daemon --interval 1s --db /tmp/h.db      a quick look somewhere else
Query it with `corral history` (docs/operating.md, \"Usage history\").";

pub const HISTORY_AFTER_HELP: &str = "Examples:
  corral history                            every tenant, last 24 h: usage, limits, faults
  corral history --by-fault --since 1d      tenants that hit a limit (any kind) since yesterday
  corral history --by-fault processes       ... their process limit
  corral history --by-usage 90% --since 7d  tenants that used 90% of a limit (1-minute averages)
  corral history alice --since 6h --step 15m   alice's usage in 15-minute steps
  corral history alice --html alice.html    charts of her usage against her limits (offline)
  corral history alice --snapshots          her top processes at each fault incident
  corral history --alerts                   alerts sent
Add --json or --csv for machines. Averages are over each step; peaks are the highest sample.
Recent moments come from the samples, older ones from the 1-minute, 5-minute and hourly
rollups (docs/operating.md, \"Usage history\").";

#[derive(Args, Debug)]
pub struct DaemonArgs {
    /// Sampling interval (e.g. 5s, 200ms); default: history.toml's `interval`, else 5s.
    #[arg(long, value_parser = duration)]
    pub interval: Option<Duration>,
    /// The history database; default: history.toml's `database`, else /var/lib/corral/history.db.
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct HistoryArgs {
    /// Only this tenant (its usage step by step; with --html, --snapshots).
    pub tenant: Option<String>,
    /// The window starts this long ago (e.g. 30m, 24h, 7d).
    #[arg(long, default_value = "24h", value_parser = duration)]
    pub since: Duration,
    /// The window ends this long ago (default: now).
    #[arg(long, value_parser = duration)]
    pub until: Option<Duration>,
    /// Tenants that hit a limit, most faults first; KIND: any, cpu, memory, oom, processes, entry.
    #[arg(long, value_name = "KIND", num_args = 0..=1, default_missing_value = "any",
          value_parser = ["any", "cpu", "memory", "oom", "processes", "entry"],
          conflicts_with_all = ["by_usage", "snapshots", "html", "alerts"])]
    pub by_fault: Option<String>,
    /// Tenants whose average over a step (1 minute at least) reached this share of a limit.
    #[arg(long, value_name = "PERCENT", value_parser = percent,
          conflicts_with_all = ["snapshots", "html", "alerts"])]
    pub by_usage: Option<f64>,
    /// Step for a tenant's usage and --by-usage (e.g. 1m, 15m, 1h); default: about 48 steps.
    #[arg(long, value_parser = duration)]
    pub step: Option<Duration>,
    /// Write the tenant's usage against its limits as an HTML page of charts (offline).
    #[arg(long, value_name = "FILE", requires = "tenant", conflicts_with_all = ["snapshots", "alerts"])]
    pub html: Option<PathBuf>,
    /// The tenant's top processes at its fault incidents.
    #[arg(long, requires = "tenant", conflicts_with = "alerts")]
    pub snapshots: bool,
    /// The alerts sent (of the tenant).
    #[arg(long)]
    pub alerts: bool,
    /// CSV instead of a table (--json for JSON).
    #[arg(long, conflicts_with = "html")]
    pub csv: bool,
    /// The history database; default: history.toml's `database`, else /var/lib/corral/history.db.
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
}

fn duration(s: &str) -> Result<Duration, String> {
    corral_history::parse_duration(s)
}

fn percent(s: &str) -> Result<f64, String> {
    corral_history::parse_percent(s)
}

/// Actions of alerts running at once, at most; more are dropped (and logged).
const MAX_ACTIONS: usize = 8;
/// How long an alert's command or webhook may take.
const ACTION_TIMEOUT: Duration = Duration::from_secs(10);

fn log(args: std::fmt::Arguments) {
    eprintln!("corral: daemon: {args}");
}

/// Takes the database's writer lock (`FILE.lock`): one collector per database.
fn lock(db: &Path) -> anyhow::Result<nix::fcntl::Flock<std::fs::File>> {
    let mut name = db.as_os_str().to_owned();
    name.push(".lock");
    let path = PathBuf::from(name);
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|(_, e)| {
        if e == nix::errno::Errno::EWOULDBLOCK {
            anyhow::anyhow!(
                "{}: another corral daemon writes this history (one writer per database)",
                db.display()
            )
        } else {
            anyhow::anyhow!("locking {}: {e}", path.display())
        }
    })
}

/// Creates the database file (and its directory) readable by root only:
/// it names every tenant and its usage.
fn prepare(db: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = db.parent() {
        std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(db)
        .map_err(|e| anyhow::anyhow!("{}: {e}", db.display()))?;
    Ok(())
}

/// SIGTERM, SIGINT and SIGHUP, blocked in every thread and waited for
/// between rounds.
fn stop_signals() -> nix::sys::signal::SigSet {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        set.add(s);
    }
    set
}

/// Sleeps `d` or until a stop signal arrives (true).
fn wait_for_stop(set: &nix::sys::signal::SigSet, d: Duration) -> bool {
    let ts = libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `set` is a valid sigset_t, `ts` a valid timespec, and a null
    // siginfo pointer is allowed; the call only reads them.
    let r = unsafe { libc::sigtimedwait(set.as_ref(), std::ptr::null_mut(), &ts) };
    r > 0
}

pub fn daemon(ctx: &Ctx, a: DaemonArgs) -> anyhow::Result<i32> {
    let mut cfg = HistoryConfig::load(&ctx.config_dir)?;
    if let Some(i) = a.interval {
        anyhow::ensure!(
            i >= corral_history::MIN_INTERVAL && i <= Duration::from_secs(60),
            "--interval {}: expected 100ms to 60s",
            humantime_fmt(i)
        );
        cfg.interval = i;
    }
    if let Some(db) = a.db {
        cfg.database = db;
    }
    let signals = stop_signals();
    // Blocked before any thread starts, so every thread inherits it.
    signals.thread_block()?;
    prepare(&cfg.database)?;
    let _lock = lock(&cfg.database)?;
    let store = Store::create(&cfg.database)?;
    let mut collector = Collector::new(store, &cfg)?;
    let exporter = Exporter::new(ctx.layout.clone());
    // A state directory that cannot be read fails here, not later.
    exporter.collect()?;
    log(format_args!(
        "sampling every {} into {} ({} alert rules)",
        humantime_fmt(cfg.interval),
        cfg.database.display(),
        cfg.rules.len()
    ));
    let running = Arc::new(AtomicUsize::new(0));
    let mut next = Instant::now();
    let mut last_error: Option<String> = None;
    let mut account = Account::default();
    loop {
        match round(&exporter, &mut collector, &mut account) {
            Ok(alerts) => {
                last_error = None;
                for alert in alerts {
                    send(&cfg, alert, &running);
                }
            }
            Err(e) => {
                // Logged once while it lasts (a full disk, a locked file).
                let msg = format!("{e:#}");
                if last_error.as_ref() != Some(&msg) {
                    log(format_args!("{msg}"));
                }
                last_error = Some(msg);
            }
        }
        next += cfg.interval;
        let now = Instant::now();
        if next < now {
            // Too slow for the interval (or suspended): skip, don't rush.
            next = now + cfg.interval;
        }
        if wait_for_stop(&signals, next - now) {
            break;
        }
    }
    let per = |d: Duration| d.as_secs_f64() * 1000.0 / f64::from(account.rounds.max(1));
    log(format_args!(
        "stopped after {} rounds; CPU per round: {:.1} ms reading tenants, {:.1} ms storing",
        account.rounds,
        per(account.reading),
        per(account.storing)
    ));
    Ok(0)
}

fn humantime_fmt(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// CPU time of the whole process (every thread), for the daemon's account
/// of where its rounds go.
fn process_cpu() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
        .map(|t| Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32))
        .unwrap_or_default()
}

/// CPU spent by the rounds: reading the tenants, and storing (samples,
/// rollups, retention, alerts). Logged when the daemon stops.
#[derive(Default)]
struct Account {
    /// The tenants that could not be read in the last round.
    errors: Vec<String>,
    rounds: u32,
    reading: Duration,
    storing: Duration,
}

/// One round: read every tenant, hand the readings to the collector.
fn round(
    exporter: &Exporter,
    collector: &mut Collector,
    account: &mut Account,
) -> anyhow::Result<Vec<Alert>> {
    let c0 = process_cpu();
    let snap = exporter.collect()?;
    let c1 = process_cpu();
    // Logged when what fails changes, not every round.
    if snap.errors != account.errors {
        if let Some(first) = snap.errors.first() {
            log(format_args!(
                "{first} ({} tenants unreadable)",
                snap.errors.len()
            ));
        }
        account.errors = snap.errors.clone();
    }
    let readings: Vec<Reading> = snap
        .tenants
        .into_iter()
        .filter(|t| t.up)
        .filter_map(|t| {
            Some(Reading {
                usage: t.usage?,
                faults: t.faults?,
                tenant: t.tenant,
                entry: t.entry,
                limits: t.limits,
            })
        })
        .collect();
    let r = collector.round(corral_history::now_ms(), &readings, &mut |tenant| {
        exporter
            .processes(tenant)
            .map(|pids| corral_history::top_processes(&pids))
    })?;
    account.rounds += 1;
    account.reading += c1 - c0;
    account.storing += process_cpu() - c1;
    Ok(r.alerts)
}

/// Runs an alert's command and posts its webhook, in a thread of its own.
fn send(cfg: &HistoryConfig, alert: Alert, running: &Arc<AtomicUsize>) {
    let rule = &cfg.rules[alert.rule_index];
    log(format_args!("alert {}: {}", rule.name, alert.message));
    if running.load(Ordering::SeqCst) >= MAX_ACTIONS {
        log(format_args!(
            "alert {} for {}: not sent, {MAX_ACTIONS} alerts are being sent already",
            rule.name, alert.tenant
        ));
        return;
    }
    running.fetch_add(1, Ordering::SeqCst);
    let (command, webhook, busy) = (rule.command.clone(), rule.webhook.clone(), running.clone());
    let spawned = std::thread::Builder::new()
        .name("alert".into())
        .spawn(move || {
            let body = serde_json::to_string(&alert).unwrap_or_default();
            if let Some(argv) = command {
                if let Err(e) = run_command(&argv, &alert, &body) {
                    log(format_args!("alert {}: {}: {e:#}", alert.rule, argv[0]));
                }
            }
            if let Some(w) = webhook {
                match post(&w, body) {
                    Ok(status) if (200..300).contains(&status) => {}
                    Ok(status) => log(format_args!(
                        "alert {}: {}: HTTP {status}",
                        alert.rule, w.url
                    )),
                    Err(e) => log(format_args!("alert {}: {}: {e:#}", alert.rule, w.url)),
                }
            }
            busy.fetch_sub(1, Ordering::SeqCst);
        });
    if let Err(e) = spawned {
        running.fetch_sub(1, Ordering::SeqCst);
        log(format_args!("alert {}: {e}", rule.name));
    }
}

/// The rule's command with the alert as JSON on stdin and in the
/// environment's CORRAL_ALERT_* variables; killed after [`ACTION_TIMEOUT`].
fn run_command(argv: &[String], alert: &Alert, body: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .env("CORRAL_ALERT_RULE", &alert.rule)
        .env("CORRAL_ALERT_TENANT", &alert.tenant)
        .env("CORRAL_ALERT_KIND", alert.kind)
        .env("CORRAL_ALERT_MESSAGE", &alert.message)
        .env("CORRAL_ALERT_TIME", alert.time.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        // A command that does not read its input is fine.
        let _ = stdin.write_all(body.as_bytes());
    }
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait()? {
            anyhow::ensure!(st.success(), "exited with {st}");
            return Ok(());
        }
        if start.elapsed() > ACTION_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("killed after {} s", ACTION_TIMEOUT.as_secs());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// POSTs `body` (JSON) to the webhook with hyper's HTTP/1.1 client (the
/// HTTP stack `corral metrics serve` already carries); returns the status.
fn post(w: &Webhook, body: String) -> anyhow::Result<u16> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    rt.block_on(async {
        let go = async {
            let stream = tokio::net::TcpStream::connect(w.addr).await?;
            let (mut sender, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
            tokio::spawn(conn);
            let req = hyper::Request::builder()
                .method(hyper::Method::POST)
                .uri(&w.target)
                .header(hyper::header::HOST, w.addr.to_string())
                .header(hyper::header::CONTENT_TYPE, "application/json")
                .header(
                    hyper::header::USER_AGENT,
                    concat!("corral/", env!("CARGO_PKG_VERSION")),
                )
                .body(body)?;
            let resp = sender.send_request(req).await?;
            anyhow::Ok(resp.status().as_u16())
        };
        tokio::time::timeout(ACTION_TIMEOUT, go)
            .await
            .map_err(|_| anyhow::anyhow!("no answer within {} s", ACTION_TIMEOUT.as_secs()))?
    })
}

/// A cell of an answer: shown for people in a table, raw in CSV and JSON.
enum Cell {
    Text(String),
    Int(i64),
    /// A number shown with one decimal.
    Num(f64),
    /// Bytes, shown as KiB/MiB/GiB.
    Bytes(f64),
    /// Unix seconds, shown as UTC.
    Time(i64),
    None,
}

impl Cell {
    fn opt(v: Option<f64>, bytes: bool) -> Cell {
        match (v, bytes) {
            (Some(v), true) => Cell::Bytes(v),
            (Some(v), false) => Cell::Num(v),
            (None, _) => Cell::None,
        }
    }

    fn human(&self) -> String {
        match self {
            Cell::Text(s) => s.clone(),
            Cell::Int(i) => i.to_string(),
            Cell::Num(v) if v.fract() == 0.0 => format!("{v:.0}"),
            Cell::Num(v) => format!("{v:.1}"),
            Cell::Bytes(v) => chart::human(*v, "B").replace(' ', ""),
            Cell::Time(t) => chart::utc(*t),
            Cell::None => "-".into(),
        }
    }

    fn raw(&self) -> String {
        match self {
            Cell::Text(s) => s.clone(),
            Cell::Int(i) => i.to_string(),
            Cell::Num(v) | Cell::Bytes(v) => format!("{}", (v * 1000.0).round() / 1000.0),
            Cell::Time(t) => t.to_string(),
            Cell::None => String::new(),
        }
    }

    fn json(&self) -> serde_json::Value {
        match self {
            Cell::Text(s) => s.clone().into(),
            Cell::Int(i) => (*i).into(),
            Cell::Num(v) | Cell::Bytes(v) => ((v * 1000.0).round() / 1000.0).into(),
            Cell::Time(t) => (*t).into(),
            Cell::None => serde_json::Value::Null,
        }
    }
}

/// An answer: columns (JSON/CSV name, table heading) and rows.
struct Table {
    cols: Vec<(&'static str, &'static str)>,
    rows: Vec<Vec<Cell>>,
}

enum Format {
    Table,
    Csv,
    Json,
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl Table {
    fn print(&self, f: &Format) {
        match f {
            Format::Json => {
                let v: Vec<serde_json::Value> = self
                    .rows
                    .iter()
                    .map(|r| {
                        serde_json::Value::Object(
                            self.cols
                                .iter()
                                .zip(r)
                                .map(|((k, _), c)| (k.to_string(), c.json()))
                                .collect(),
                        )
                    })
                    .collect();
                out!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default());
            }
            Format::Csv => {
                let head: Vec<&str> = self.cols.iter().map(|c| c.0).collect();
                out!("{}\n", head.join(","));
                for r in &self.rows {
                    let line: Vec<String> = r.iter().map(|c| csv_field(&c.raw())).collect();
                    out!("{}\n", line.join(","));
                }
            }
            Format::Table => {
                let cells: Vec<Vec<String>> = self
                    .rows
                    .iter()
                    .map(|r| r.iter().map(Cell::human).collect())
                    .collect();
                let widths: Vec<usize> = self
                    .cols
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        cells
                            .iter()
                            .map(|r| r[i].chars().count())
                            .chain([c.1.len()])
                            .max()
                            .unwrap_or(0)
                    })
                    .collect();
                let line = |v: Vec<&str>| {
                    let parts: Vec<String> = v
                        .iter()
                        .zip(&widths)
                        .enumerate()
                        .map(|(i, (s, w))| {
                            if i == 0 {
                                format!("{s:<w$}")
                            } else {
                                format!("{s:>w$}")
                            }
                        })
                        .collect();
                    parts.join("  ").trim_end().to_string()
                };
                out!("{}\n", line(self.cols.iter().map(|c| c.1).collect()));
                for r in &cells {
                    out!("{}\n", line(r.iter().map(String::as_str).collect()));
                }
            }
        }
    }
}

/// The usage columns of a row (with the limits in force): averages, peaks,
/// limits, IO rates and faults.
fn usage_cols() -> Vec<(&'static str, &'static str)> {
    vec![
        ("cpu_avg_pct", "aCPU%"),
        ("cpu_max_pct", "mCPU%"),
        ("cpu_limit_pct", "lCPU%"),
        ("mem_avg_bytes", "aMEM"),
        ("mem_max_bytes", "mMEM"),
        ("mem_limit_bytes", "lMEM"),
        ("procs_avg", "aPROC"),
        ("procs_max", "mPROC"),
        ("procs_limit", "lPROC"),
        ("ep_avg", "aEP"),
        ("ep_max", "mEP"),
        ("ep_limit", "lEP"),
        ("io_read_bytes_per_s", "READ/s"),
        ("io_write_bytes_per_s", "WRITE/s"),
        ("iops", "IOPS"),
        ("faults_cpu", "CPUf"),
        ("faults_memory", "MEMf"),
        ("faults_oom", "OOM"),
        ("faults_processes", "PROCf"),
        ("faults_entry", "EPf"),
    ]
}

fn usage_cells(r: &Row, l: Option<&LimitsRow>) -> Vec<Cell> {
    let lim = |f: fn(&LimitsRow) -> Option<i64>, bytes: bool| {
        Cell::opt(l.and_then(f).map(|v| v as f64), bytes)
    };
    vec![
        Cell::Num(r.cpu_pct()),
        Cell::Num(r.cpu_max as f64 / 10.0),
        lim(|l| l.cpu_pct, false),
        Cell::Bytes(r.avg(r.mem_sum) * 1024.0),
        Cell::Bytes(r.mem_max as f64 * 1024.0),
        lim(|l| l.memory, true),
        Cell::Num(r.avg(r.procs_sum)),
        Cell::Int(r.procs_max),
        lim(|l| l.processes, false),
        Cell::Num(r.avg(r.ep_sum)),
        Cell::Int(r.ep_max),
        lim(|l| l.entry, false),
        Cell::Bytes(r.per_second(r.io_rb)),
        Cell::Bytes(r.per_second(r.io_wb)),
        Cell::Num(r.per_second(r.io_rops + r.io_wops)),
        Cell::Int(r.f_cpu),
        Cell::Int(r.f_mem),
        Cell::Int(r.f_oom),
        Cell::Int(r.f_procs),
        Cell::Int(r.f_ep),
    ]
}

pub fn history(ctx: &Ctx, a: HistoryArgs) -> anyhow::Result<i32> {
    if let Some(t) = &a.tenant {
        crate::ctx::check_tenant_name(t)?;
    }
    let db = match a.db {
        Some(db) => db,
        None => HistoryConfig::load(&ctx.config_dir)?.database,
    };
    let store = Store::open(&db)?;
    let now = corral_history::now_secs();
    let to = now - a.until.map(|d| d.as_secs() as i64).unwrap_or(0);
    let from = now - a.since.as_secs() as i64;
    anyhow::ensure!(from < to, "--since must reach further back than --until");
    let format = if ctx.json {
        Format::Json
    } else if a.csv {
        Format::Csv
    } else {
        Format::Table
    };
    let tenant = a.tenant.as_deref();
    let step = a
        .step
        .map(|s| (s.as_secs() as i64).max(1))
        .unwrap_or_else(|| query::step_for(to - from, 48));

    if a.alerts {
        let t = Table {
            cols: vec![
                ("time", "TIME (UTC)"),
                ("tenant", "TENANT"),
                ("rule", "RULE"),
                ("message", "MESSAGE"),
            ],
            rows: store
                .alerts(tenant, from, to)?
                .into_iter()
                .map(|s| {
                    vec![
                        Cell::Time(s.ts),
                        Cell::Text(s.tenant),
                        Cell::Text(s.rule),
                        Cell::Text(s.message),
                    ]
                })
                .collect(),
        };
        t.print(&format);
        return Ok(0);
    }
    if a.snapshots {
        let tenant = tenant.expect("clap requires the tenant");
        let snaps = store.snapshots(tenant, from, to)?;
        match format {
            Format::Json => out!("{}\n", serde_json::to_string_pretty(&snaps)?),
            _ => {
                let t = Table {
                    cols: vec![
                        ("time", "TIME (UTC)"),
                        ("faults", "FAULTS"),
                        ("pid", "PID"),
                        ("state", "S"),
                        ("cpu_seconds", "CPU s"),
                        ("rss_bytes", "RSS"),
                        ("cmdline", "COMMAND"),
                    ],
                    rows: snaps
                        .iter()
                        .flat_map(|s| {
                            s.procs.iter().map(move |p| {
                                vec![
                                    Cell::Time(s.ts),
                                    Cell::Text(format!("{} ({} procs)", s.faults, s.total)),
                                    Cell::Int(i64::from(p.pid)),
                                    Cell::Text(p.state.clone()),
                                    Cell::Num(p.cpu_ms as f64 / 1000.0),
                                    Cell::Bytes(p.rss as f64),
                                    Cell::Text(p.cmdline.clone()),
                                ]
                            })
                        })
                        .collect(),
                };
                t.print(&format);
            }
        }
        return Ok(0);
    }

    let rows = store.rows(tenant, from, to)?;
    let mut limits: BTreeMap<String, Vec<LimitsRow>> = BTreeMap::new();
    for (t, l) in store.limits_of(tenant)? {
        limits.entry(t).or_default().push(l);
    }
    let limits_of = |t: &str, ts: i64| limits.get(t).and_then(|h| query::limits_at(h, ts));

    if let Some(file) = &a.html {
        let tenant = tenant.expect("clap requires the tenant");
        let mine: Vec<Row> = rows.iter().map(|(_, r)| *r).collect();
        let hist = limits.get(tenant).cloned().unwrap_or_default();
        let snaps = store.snapshots(tenant, from, to)?;
        let step = a
            .step
            .map(|s| (s.as_secs() as i64).max(1))
            .unwrap_or_else(|| query::step_for(to - from, 300));
        let page = chart::page(tenant, &mine, &hist, &snaps, from, to, step);
        std::fs::write(file, page).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        eprintln!(
            "corral: wrote {} ({} steps of {})",
            file.display(),
            query::regroup(&mine, step).len(),
            humantime_fmt(Duration::from_secs(step as u64))
        );
        return Ok(0);
    }

    if let Some(kind) = &a.by_fault {
        let mut cols = vec![("tenant", "TENANT"), ("faults", "FAULTS")];
        cols.extend([
            ("faults_cpu", "CPUf"),
            ("faults_memory", "MEMf"),
            ("faults_oom", "OOM"),
            ("faults_processes", "PROCf"),
            ("faults_entry", "EPf"),
        ]);
        let t = Table {
            cols,
            rows: query::by_fault(&rows, kind)
                .into_iter()
                .map(|(t, r)| {
                    vec![
                        Cell::Text(t),
                        Cell::Int(corral_history::fault_count(&r, kind).unwrap_or(0)),
                        Cell::Int(r.f_cpu),
                        Cell::Int(r.f_mem),
                        Cell::Int(r.f_oom),
                        Cell::Int(r.f_procs),
                        Cell::Int(r.f_ep),
                    ]
                })
                .collect(),
        };
        t.print(&format);
        return Ok(0);
    }

    if let Some(pct) = a.by_usage {
        let hits = query::by_usage(
            &rows,
            &limits,
            pct,
            a.step.map(|s| s.as_secs() as i64).unwrap_or(60).max(60),
        );
        let t = Table {
            cols: vec![
                ("tenant", "TENANT"),
                ("resource", "RESOURCE"),
                ("peak_pct", "PEAK%"),
                ("peak_at", "AT (UTC)"),
                ("steps", "STEPS"),
                ("seconds", "SECONDS"),
                ("limit", "LIMIT"),
            ],
            rows: hits
                .into_iter()
                .map(|h| {
                    let bytes = matches!(h.resource, "memory" | "io_read" | "io_write");
                    vec![
                        Cell::Text(h.tenant),
                        Cell::Text(h.resource.to_string()),
                        Cell::Num(h.peak_percent),
                        Cell::Time(h.peak_at),
                        Cell::Int(h.steps as i64),
                        Cell::Int(h.seconds),
                        Cell::opt(Some(h.limit), bytes),
                    ]
                })
                .collect(),
        };
        t.print(&format);
        return Ok(0);
    }

    match tenant {
        Some(tenant) => {
            let mine: Vec<Row> = rows.iter().map(|(_, r)| *r).collect();
            let mut cols = vec![("time", "TIME (UTC)")];
            cols.extend(usage_cols());
            let t = Table {
                cols,
                rows: query::regroup(&mine, step)
                    .iter()
                    .map(|r| {
                        let mut v = vec![Cell::Time(r.ts)];
                        v.extend(usage_cells(r, limits_of(tenant, r.ts)));
                        v
                    })
                    .collect(),
            };
            t.print(&format);
        }
        None => {
            let mut cols = vec![("tenant", "TENANT")];
            cols.extend(usage_cols());
            let t = Table {
                cols,
                rows: query::totals(&rows)
                    .iter()
                    .map(|(t, r)| {
                        let mut v = vec![Cell::Text(t.clone())];
                        v.extend(usage_cells(r, limits_of(t, to)));
                        v
                    })
                    .collect(),
            };
            t.print(&format);
        }
    }
    Ok(0)
}
