//! `corral service ls|status|start|stop|restart|logs|boot`: the services
//! a tenant's init supervises (`[services.NAME]` in the profile; see
//! docs/access.md).

use crate::cli::ServiceCmd;
use crate::ctx::{Ctx, EXIT_FAILURE};
use crate::out::outln;
use corral_sandbox::proto::{Reply, Request, ServiceOp, ServiceStatus};
use serde::Serialize;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub fn service(ctx: &Ctx, cmd: ServiceCmd) -> anyhow::Result<i32> {
    match cmd {
        ServiceCmd::Ls { tenants } => ls(ctx, tenants),
        ServiceCmd::Status { tenant, name } => act(ctx, &tenant, name, ServiceOp::Status),
        ServiceCmd::Start { tenant, name } => {
            corral_profile::suspend::check(&ctx.config_dir, &tenant)?;
            act(ctx, &tenant, name, ServiceOp::Start)
        }
        ServiceCmd::Stop { tenant, name } => act(ctx, &tenant, name, ServiceOp::Stop),
        ServiceCmd::Restart { tenant, name } => {
            corral_profile::suspend::check(&ctx.config_dir, &tenant)?;
            act(ctx, &tenant, name, ServiceOp::Restart)
        }
        ServiceCmd::Logs {
            tenant,
            name,
            lines,
            follow,
        } => logs(ctx, &tenant, &name, lines, follow),
        ServiceCmd::Boot { dry_run } => boot(ctx, dry_run),
    }
}

/// Ask a running tenant's init. None: the tenant is not up.
fn ask(
    ctx: &Ctx,
    tenant: &str,
    op: ServiceOp,
    name: Option<&str>,
) -> anyhow::Result<Option<Vec<ServiceStatus>>> {
    let Some(client) = crate::ctx::init_client(ctx, tenant)? else {
        return Ok(None);
    };
    let req = Request::Service {
        op,
        name: name.map(str::to_string),
    };
    match client.call(&req, &[]) {
        Ok(Reply::Services(list)) => Ok(Some(list)),
        Ok(Reply::Error { message }) => anyhow::bail!("{tenant}: {message}"),
        Ok(other) => anyhow::bail!("{tenant}: unexpected answer of the tenant init: {other:?}"),
        Err(e) => anyhow::bail!(
            "{tenant}: the tenant init did not answer ({e}); a sandbox built by an older corral: `corral restart {tenant}`"
        ),
    }
}

fn act(ctx: &Ctx, tenant: &str, name: Option<String>, op: ServiceOp) -> anyhow::Result<i32> {
    let plan = corral_profile::load(&ctx.config_dir, tenant)?;
    if let Some(n) = &name {
        if !plan.services.iter().any(|s| &s.name == n) {
            let names: Vec<&str> = plan.services.iter().map(|s| s.name.as_str()).collect();
            anyhow::bail!(
                "{tenant}: no service {n:?} in its profile{}",
                if names.is_empty() {
                    " (it declares none: see [services.NAME] in docs/profile.md)".to_string()
                } else {
                    format!("; it has: {}", names.join(", "))
                }
            );
        }
    }
    if matches!(op, ServiceOp::Start | ServiceOp::Restart) {
        // Starting a service of a tenant that is down brings it up first.
        if let corral_sandbox::UpOutcome::AlreadyUp { stale: true, .. } =
            super::tenants::up_one(ctx, tenant)?
        {
            eprintln!("corral: {tenant}: the sandbox was built from an older profile; `corral restart {tenant}` applies the current one");
        }
    }
    let mut list = match ask(ctx, tenant, op, name.as_deref())? {
        Some(l) => l,
        None => down_rows(&plan, name.as_deref()),
    };
    // A stop (or the stop half of a restart) takes effect when the process
    // has exited: wait for it, at most the longest stop timeout (then the
    // init has sent SIGKILL) and a little more.
    let longest = plan
        .services
        .iter()
        .map(|s| s.stop_timeout_ms)
        .max()
        .unwrap_or(0);
    let until = std::time::Instant::now() + Duration::from_millis(longest + 2000);
    while list.iter().any(|s| s.state == "stopping") && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
        match ask(ctx, tenant, ServiceOp::Status, name.as_deref())? {
            Some(l) => list = l,
            None => break,
        }
    }
    print_status(ctx, tenant, &list)?;
    // A start that did not start: say so in the exit status.
    let failed = matches!(op, ServiceOp::Start | ServiceOp::Restart)
        && list
            .iter()
            .any(|s| s.last_error.is_some() && s.pid.is_none());
    Ok(if failed { EXIT_FAILURE } else { 0 })
}

/// What the profile declares, for a tenant that is not up.
fn down_rows(plan: &corral_profile::Plan, name: Option<&str>) -> Vec<ServiceStatus> {
    plan.services
        .iter()
        .filter(|s| name.is_none_or(|n| n == s.name))
        .map(|s| ServiceStatus {
            name: s.name.clone(),
            state: "down".into(),
            pid: None,
            workers: 0,
            since_ms: 0,
            starts: 0,
            restarts: 0,
            last_exit: None,
            last_error: None,
            listen: s.listen.iter().map(|p| p.display().to_string()).collect(),
            start: s.start.name().into(),
            idle_timeout_ms: s.idle_timeout_ms,
            log: s.log.display().to_string(),
        })
        .collect()
}

#[derive(Serialize)]
struct Row<'a> {
    tenant: &'a str,
    #[serde(flatten)]
    service: &'a ServiceStatus,
}

fn print_status(ctx: &Ctx, tenant: &str, list: &[ServiceStatus]) -> anyhow::Result<()> {
    if ctx.json {
        for s in list {
            outln!("{}", serde_json::to_string(&Row { tenant, service: s })?);
        }
        return Ok(());
    }
    if list.is_empty() {
        outln!("{tenant}: no services");
    }
    for s in list {
        let pid = s
            .pid
            .map(|p| format!(", pid {p} in the sandbox, {} worker(s)", s.workers))
            .unwrap_or_default();
        outln!("{tenant}/{}: {}{pid}{}", s.name, s.state, since(s.since_ms));
        let idle = if s.start == "on-demand" && s.idle_timeout_ms > 0 {
            format!(", stopped after {} s idle", s.idle_timeout_ms / 1000)
        } else {
            String::new()
        };
        outln!("  start: {}{idle}", s.start);
        for l in &s.listen {
            outln!("  listen: {l}");
        }
        outln!(
            "  starts {}, restarts after a failure {}",
            s.starts,
            s.restarts
        );
        if let Some(e) = &s.last_exit {
            outln!("  last run: {e}");
        }
        if let Some(e) = &s.last_error {
            outln!("  last start failed: {e}");
        }
        outln!("  log: {}", s.log);
    }
    Ok(())
}

fn since(ms: u64) -> String {
    if ms == 0 {
        return String::new();
    }
    let now = corral_sandbox::state::now_unix() * 1000;
    format!(" for {} s", now.saturating_sub(ms) / 1000)
}

fn ls(ctx: &Ctx, tenants: Vec<String>) -> anyhow::Result<i32> {
    let named = !tenants.is_empty();
    let tenants = if named { tenants } else { ctx.layout.list()? };
    let mut rows: Vec<(String, ServiceStatus)> = Vec::new();
    for t in &tenants {
        let list = match ask(ctx, t, ServiceOp::Status, None) {
            Ok(Some(l)) => l,
            Ok(None) if named => down_rows(&corral_profile::load(&ctx.config_dir, t)?, None),
            Ok(None) => continue,
            Err(e) if named => return Err(e),
            Err(e) => {
                eprintln!("corral: {e}");
                continue;
            }
        };
        rows.extend(list.into_iter().map(|s| (t.clone(), s)));
    }
    if ctx.json {
        let v: Vec<Row> = rows
            .iter()
            .map(|(t, s)| Row {
                tenant: t,
                service: s,
            })
            .collect();
        outln!("{}", serde_json::to_string(&v)?);
        return Ok(0);
    }
    outln!(
        "{:<16} {:<12} {:<9} {:>6} {:>7} {:>6} {:>8}  LISTEN",
        "TENANT",
        "SERVICE",
        "STATE",
        "PID",
        "WORKERS",
        "STARTS",
        "RESTARTS"
    );
    for (t, s) in &rows {
        outln!(
            "{:<16} {:<12} {:<9} {:>6} {:>7} {:>6} {:>8}  {}",
            t,
            s.name,
            s.state,
            s.pid.map_or("-".into(), |p| p.to_string()),
            s.workers,
            s.starts,
            s.restarts,
            s.listen.join(" ")
        );
    }
    Ok(0)
}

fn log_path(ctx: &Ctx, tenant: &str, name: &str) -> anyhow::Result<PathBuf> {
    // The running sandbox's plan first (it may predate a profile edit).
    let dir = ctx.layout.tenant(tenant);
    let plan = match std::fs::read(dir.plan())
        .ok()
        .and_then(|b| serde_json::from_slice::<corral_profile::Plan>(&b).ok())
    {
        Some(p) if p.services.iter().any(|s| s.name == name) => p,
        _ => corral_profile::load(&ctx.config_dir, tenant)?,
    };
    match plan.services.iter().find(|s| s.name == name) {
        Some(s) => Ok(s.log.clone()),
        None => anyhow::bail!("{tenant}: no service {name:?} in its profile"),
    }
}

fn logs(ctx: &Ctx, tenant: &str, name: &str, lines: usize, follow: bool) -> anyhow::Result<i32> {
    let path = log_path(ctx, tenant, name)?;
    let mut f = match std::fs::File::open(&path) {
        Ok(f) => Some(f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && follow => None,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!(
                "corral: {}: no log yet (the service has not written or started)",
                path.display()
            );
            return Ok(0);
        }
        Err(e) => anyhow::bail!("{}: {e}", path.display()),
    };
    if let Some(f) = &mut f {
        crate::out::write(format_args!("{}", printable(&tail(f, lines)?)));
    }
    if !follow {
        return Ok(0);
    }
    // Follow like `tail -F`: new bytes, and the new file after a rotation.
    let mut pos = f.as_mut().map_or(Ok(0), |f| f.stream_position())?;
    let mut ino = f
        .as_ref()
        .and_then(|f| f.metadata().ok())
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m));
    loop {
        std::thread::sleep(Duration::from_millis(250));
        let now = std::fs::metadata(&path)
            .ok()
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m));
        if now != ino {
            f = std::fs::File::open(&path).ok();
            ino = now;
            pos = 0;
        }
        if let Some(file) = &mut f {
            let len = file.metadata()?.len();
            if len < pos {
                pos = 0;
            }
            if len > pos {
                file.seek(SeekFrom::Start(pos))?;
                let mut buf = Vec::new();
                // At most 1 MiB per look (a log's size limit is 1 MiB by default).
                let want = (len - pos).min(1 << 20);
                file.take(want).read_to_end(&mut buf)?;
                pos += want;
                crate::out::write(format_args!(
                    "{}",
                    printable(&String::from_utf8_lossy(&buf))
                ));
                crate::out::flush();
            }
        }
    }
}

/// The tenant wrote these bytes: no terminal control sequence of its
/// reaches the admin's terminal (every control character but newline and
/// tab becomes U+FFFD).
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                '\u{FFFD}'
            } else {
                c
            }
        })
        .collect()
}

/// The last `n` lines of a file (reads at most its last 4 MiB).
fn tail(f: &mut std::fs::File, n: usize) -> anyhow::Result<String> {
    let len = f.metadata()?.len();
    let start = len.saturating_sub(4 << 20);
    f.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    let body = text.strip_suffix('\n').unwrap_or(&text);
    let skip = body.lines().count().saturating_sub(n);
    let mut out: String = body.lines().skip(skip).collect::<Vec<_>>().join("\n");
    if !out.is_empty() {
        out.push('\n');
    }
    Ok(out)
}

/// Accounts that may be tenants: passwd entries with a uid from
/// /etc/corral/access.toml's `min_uid` (default: login.defs UID_MIN) up to
/// 60000 (login.defs' UID_MAX default), not exempt there.
fn accounts() -> anyhow::Result<Vec<String>> {
    let cfg = corral_access::config::AccessConfig::load(
        Path::new(corral_access::config::DEFAULT_PATH),
        false,
    )?;
    let out = std::process::Command::new("getent")
        .arg("passwd")
        .output()
        .map_err(|e| anyhow::anyhow!("getent passwd: {e}"))?;
    anyhow::ensure!(
        out.status.success(),
        "getent passwd failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let db = corral_users::Db::system();
    let mut names = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(u) = corral_users::parse_passwd_line(line) else {
            continue;
        };
        if u.uid > 60000 || names.contains(&u.name) {
            continue;
        }
        match cfg.caged(&db, &u) {
            Ok(true) => names.push(u.name),
            Ok(false) => {}
            Err(e) => eprintln!("corral: {}: {e}; skipped", u.name),
        }
    }
    Ok(names)
}

/// Bring up every tenant whose profile declares services: what
/// `corral-services.service` (or config/corral-boot for hosts without
/// systemd) runs at boot, so every socket exists before the web server
/// takes traffic.
fn boot(ctx: &Ctx, dry_run: bool) -> anyhow::Result<i32> {
    let mut failed = 0;
    let mut up = 0;
    for t in accounts()? {
        let plan = match corral_profile::load(&ctx.config_dir, &t) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("corral: {t}: {e}");
                failed += 1;
                continue;
            }
        };
        if plan.services.is_empty() {
            continue;
        }
        if let Err(s) = corral_profile::suspend::check(&ctx.config_dir, &t) {
            // Not a failure of the boot: the operator's decision.
            outln!("{t}: not brought up: {s}");
            continue;
        }
        if dry_run {
            outln!("{t}: would bring up ({} service(s))", plan.services.len());
            continue;
        }
        match super::tenants::up_one(ctx, &t) {
            Ok(_) => {
                up += 1;
                if !ctx.json {
                    outln!("{t}: up ({} service(s))", plan.services.len());
                }
            }
            Err(e) => {
                eprintln!("corral: {t}: {e:#}");
                failed += 1;
            }
        }
    }
    if ctx.json {
        outln!("{}", serde_json::json!({"up": up, "failed": failed}));
    } else if !dry_run {
        outln!("{up} tenant(s) with services up, {failed} failed");
    }
    Ok(if failed > 0 { EXIT_FAILURE } else { 0 })
}
