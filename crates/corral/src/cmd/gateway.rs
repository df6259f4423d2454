//! `corral gateway`: the FastCGI gateway (see the corral-gateway crate and
//! docs/gateway.md). This file only turns the command line into options and
//! tells the gateway how to bring sandboxes up.

use crate::ctx::Ctx;
use corral_sandbox::join::{self, Target};
use corral_sandbox::{Layout, UpOptions};
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct GatewayArgs {
    /// Where to listen: unix:/run/corral-gateway/gateway.sock, or tcp:127.0.0.1:9000
    /// (any local user can reach a TCP port: prefer a unix socket; with TCP,
    /// FCGI_WEB_SERVER_ADDRS=ip,ip limits the peers, as FastCGI §3.2 says).
    #[arg(long, value_name = "unix:PATH|tcp:ADDR:PORT")]
    pub listen: corral_gateway::Listen,
    /// Per-request timeout: the script is killed and the answer is 504.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout: u64,
    /// Most simultaneous FastCGI connections (more wait in the listen backlog).
    #[arg(long, value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub max_conns: u32,
    /// Most simultaneous connections one peer uid may hold; more are closed
    /// at once (default: --max-conns). Set it below --max-conns when several
    /// uids may connect, so that none can take every connection.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub max_conns_per_uid: Option<u32>,
    /// A connection must send a request's params within this long (from its
    /// start or the end of its previous request), and may pause a request
    /// body this long; then it is closed (and logged when a request was half
    /// sent). Not the script's timeout (--timeout).
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub idle_timeout: u64,
    /// A user (name or uid) allowed to speak FastCGI to the gateway besides
    /// root: the web server's (e.g. www-data); repeatable. Checked for TCP
    /// peers always (without it only root may connect over TCP: a tenant on
    /// the host could otherwise speak FastCGI itself and forge REMOTE_USER,
    /// HTTPS, REMOTE_ADDR), for unix peers when given (SO_PEERCRED).
    #[arg(long, value_name = "USER")]
    pub allow_user: Vec<String>,
    /// The page (HTML) a suspended tenant's visitors get, with status 503
    /// (`corral suspend`); default: a short built-in one.
    #[arg(long, value_name = "FILE")]
    pub suspended_page: Option<PathBuf>,
    /// Host/docroot -> tenant map and policy (TOML, reloaded on SIGHUP).
    /// Without it every script runs as its owner.
    #[arg(long, value_name = "FILE")]
    pub map: Option<PathBuf>,
    /// The access log: one JSON line per request (time, tenant, remote,
    /// host, method, uri, status, bytes, duration_ms, script) appended to
    /// FILE, or `-` for stderr. Reopened on SIGHUP (logrotate).
    #[arg(long, value_name = "FILE|-")]
    pub access_log: Option<corral_gateway::log::AccessTarget>,
    /// Mode of the unix socket, octal. Only the web server may reach it:
    /// whoever can connect can run any tenant's scripts.
    #[arg(long, value_name = "MODE", default_value = "660", value_parser = parse_mode)]
    pub socket_mode: u32,
    /// Group of the unix socket: the web server's (e.g. www-data).
    #[arg(long, value_name = "GROUP")]
    pub socket_group: Option<String>,
}

fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s, 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| format!("{s:?}: expected an octal mode such as 660"))
}

/// Sandboxes as `corral run` finds them: loaded from the state dir, built
/// from the profile on first use.
pub struct CliSandboxes {
    layout: Layout,
    config_dir: PathBuf,
    up: UpOptions,
}

impl CliSandboxes {
    pub fn new(ctx: &Ctx) -> anyhow::Result<CliSandboxes> {
        Ok(CliSandboxes {
            layout: ctx.layout.clone(),
            config_dir: ctx.config_dir.clone(),
            up: ctx.up_options()?,
        })
    }

    pub fn target(&self, tenant: &str) -> anyhow::Result<Target> {
        join::load_or_up(&self.layout, tenant, || {
            super::tenants::bring_up(&self.layout, &self.config_dir, &self.up, tenant).map(drop)
        })
    }
}

impl corral_gateway::Sandboxes for CliSandboxes {
    fn layout(&self) -> &Layout {
        &self.layout
    }
    fn target(&self, tenant: &str) -> anyhow::Result<Target> {
        CliSandboxes::target(self, tenant)
    }
    fn suspended(&self, tenant: &str) -> Option<String> {
        corral_profile::suspend::suspension(&self.config_dir, tenant).map(|s| s.reason)
    }
}

pub fn gateway(ctx: &Ctx, a: GatewayArgs) -> anyhow::Result<i32> {
    anyhow::ensure!(
        nix::unistd::geteuid().is_root(),
        "the gateway talks to tenant inits, which only root may do: run it as root"
    );
    let socket_gid = match &a.socket_group {
        None => None,
        Some(g) => Some(
            corral_users::Db::system()
                .group_by_name(g)
                .map_err(|e| anyhow::anyhow!("--socket-group {g}: {e}"))?
                .ok_or_else(|| anyhow::anyhow!("--socket-group {g}: no such group"))?
                .gid,
        ),
    };
    // FastCGI §3.2: the web servers allowed to connect over TCP.
    let web_server_addrs = match std::env::var("FCGI_WEB_SERVER_ADDRS") {
        Ok(v) => corral_gateway::parse_web_server_addrs(&v).map_err(anyhow::Error::msg)?,
        Err(_) => Vec::new(),
    };
    let db = corral_users::Db::system();
    let mut allow_uids = Vec::new();
    for u in &a.allow_user {
        let uid = match u.parse::<u32>() {
            Ok(uid) => uid,
            Err(_) => {
                db.user_by_name(u)
                    .map_err(|e| anyhow::anyhow!("--allow-user {u}: {e}"))?
                    .ok_or_else(|| anyhow::anyhow!("--allow-user {u}: no such user"))?
                    .uid
            }
        };
        allow_uids.push(uid);
    }
    let opts = corral_gateway::Options {
        listen: a.listen,
        web_server_addrs,
        timeout: Duration::from_secs(a.timeout),
        max_conns: a.max_conns,
        max_conns_per_uid: a.max_conns_per_uid.unwrap_or(a.max_conns),
        idle_timeout: Duration::from_secs(a.idle_timeout),
        allow_uids: (!allow_uids.is_empty()).then_some(allow_uids),
        map_file: a.map,
        access_log: a.access_log,
        socket_mode: a.socket_mode,
        socket_gid,
        suspended_page: match &a.suspended_page {
            Some(p) => std::fs::read_to_string(p)
                .map_err(|e| anyhow::anyhow!("--suspended-page {}: {e}", p.display()))?,
            None => corral_gateway::SUSPENDED_PAGE.to_string(),
        },
    };
    corral_gateway::run_blocking(opts, Box::new(CliSandboxes::new(ctx)?))?;
    Ok(0)
}
