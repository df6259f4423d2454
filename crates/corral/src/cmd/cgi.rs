//! `corral cgi`: the wrapper for web servers without FastCGI (Apache
//! mod_cgi with `Action`, lighttpd `cgi.assign`, OpenLiteSpeed). Invoked as
//! the CGI program, it applies the gateway's safety checks to the script
//! named by its argument, `PATH_TRANSLATED` or `SCRIPT_FILENAME`, then has
//! the tenant's init start the script inside the sandbox with this
//! process's own stdin/stdout/stderr: the body and the response never pass
//! through corral. The script's exit status is passed through; corral's own
//! failures answer with a CGI error response (403, 404, 502, 503, 508).

use crate::ctx::{Ctx, EXIT_ENTRY_LIMIT, EXIT_FAILURE};
use corral_gateway::safety;
use corral_sandbox::client::Client;
use corral_sandbox::join::{self, JoinError};
use corral_sandbox::proto::{Reply, Request, SpawnRequest};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct CgiArgs {
    /// The script (lighttpd's cgi.assign passes it here). Default:
    /// PATH_TRANSLATED with --path-translated (Apache `Action`), else
    /// SCRIPT_FILENAME.
    pub script: Option<PathBuf>,
    /// Take the script from PATH_TRANSLATED (Apache's `Action` handlers get
    /// the wrapper itself as SCRIPT_FILENAME).
    #[arg(long)]
    pub path_translated: bool,
    /// Kill the script after this many seconds (0: never; the web server's
    /// own timeout still applies: when it kills this wrapper, the script dies).
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    pub timeout: u64,
    /// Host/docroot -> tenant map and policy, as for `corral gateway --map`.
    #[arg(long, value_name = "FILE")]
    pub map: Option<PathBuf>,
}

/// A failure answered with a CGI error response.
struct Fail {
    status: u16,
    log: String,
    exit: i32,
}

fn fail(status: u16, log: impl Into<String>) -> Fail {
    Fail { status, log: log.into(), exit: EXIT_FAILURE }
}

pub fn cgi(ctx: &Ctx, a: CgiArgs) -> anyhow::Result<i32> {
    match run(ctx, &a) {
        Ok(code) => Ok(code),
        Err(f) => {
            let script = script_name(&a).unwrap_or_default();
            eprintln!("corral cgi: {} [{script}] {}", f.status, f.log);
            let public = match f.status {
                403 => "The script is not allowed to run (the server's error log says why).",
                404 => "No such script.",
                508 => "The site's entry-process limit is reached; try again later.",
                _ => "The script could not be run (the server's error log says why).",
            };
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(&corral_gateway::fastcgi::error_response(f.status, public));
            let _ = out.flush();
            Ok(f.exit)
        }
    }
}

fn script_name(a: &CgiArgs) -> Option<String> {
    if let Some(p) = &a.script {
        return Some(p.to_string_lossy().into_owned());
    }
    let var = if a.path_translated { "PATH_TRANSLATED" } else { "SCRIPT_FILENAME" };
    std::env::var_os(var).map(|v| v.to_string_lossy().into_owned())
}

fn run(ctx: &Ctx, a: &CgiArgs) -> Result<i32, Fail> {
    if !nix::unistd::geteuid().is_root() {
        return Err(fail(500, "corral cgi must run as root (it talks to tenant inits); see docs/gateway.md"));
    }
    let script = script_name(a).ok_or_else(|| fail(403, if a.path_translated { "PATH_TRANSLATED is not set" } else { "SCRIPT_FILENAME is not set" }))?;
    let host = std::env::var("HTTP_HOST").or_else(|_| std::env::var("SERVER_NAME")).ok();
    let map = match &a.map {
        Some(p) => corral_gateway::TenantMap::load(p).map_err(|e| fail(500, e.to_string()))?,
        None => corral_gateway::TenantMap::default(),
    };
    let checked = safety::check(&script, host.as_deref(), &map).map_err(|r| fail(r.status, r.to_string()))?;
    let tenant = checked.tenant.name.clone();
    let target = super::run::target(ctx, &tenant).map_err(|e| fail(503, format!("sandbox of {tenant}: {e:#}")))?;
    let _slot = match join::entry(&ctx.layout, &target) {
        Ok(s) => s,
        Err(e @ JoinError::EntryLimit { .. }) => return Err(Fail { status: 508, log: e.to_string(), exit: EXIT_ENTRY_LIMIT }),
        Err(e) => return Err(fail(500, e.to_string())),
    };

    // The CGI environment this process got, filtered as the gateway does.
    let params: Vec<(Vec<u8>, Vec<u8>)> = std::env::vars_os().map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec())).collect();
    let cgi = corral_gateway::fastcgi::cgi_env_from_params(&params);
    let base = corral_sandbox::spawn::environment(&target.plan, std::iter::empty(), &[]);
    let (mut env, _dropped) = corral_gateway::cgienv::build(&base, &cgi, &map.pass_env);
    // With `Action` or an argument, SCRIPT_FILENAME named the wrapper.
    let requested = checked.requested.to_string_lossy().into_owned();
    match env.iter_mut().find(|(k, _)| k == "SCRIPT_FILENAME") {
        Some((_, v)) => *v = requested,
        None => env.push(("SCRIPT_FILENAME".into(), requested)),
    }
    let req = SpawnRequest {
        argv: vec![checked.real.to_string_lossy().into_owned()],
        env,
        cwd: checked.dir.to_string_lossy().into_owned(),
        timeout_ms: a.timeout.saturating_mul(1000),
        detach: false,
        nfds: 3,
    };
    let control = ctx.layout.tenant(&tenant).control();
    let c = Client::connect(&control).map_err(|e| fail(503, format!("connect to {}: {e}", control.display())))?;
    // Our own stdio goes to the script: the web server talks to it directly.
    match c.call(&Request::Spawn(req), &[0, 1, 2]).map_err(|e| fail(502, format!("spawn through the tenant init: {e}")))? {
        Reply::Spawned { .. } => {}
        Reply::Failed { step, errno } => return Err(fail(502, format!("could not start {}: {step}: {}", checked.real.display(), nix::errno::Errno::from_raw(errno)))),
        other => return Err(fail(502, format!("unexpected answer from the tenant init: {other:?}"))),
    }
    // From here on the script owns stdout: no error page can follow.
    loop {
        match c.recv() {
            Ok(Reply::Exited { code, signal, timed_out, .. }) => {
                if timed_out {
                    eprintln!("corral cgi: [{tenant} {}] killed after the {}s timeout", checked.requested.display(), a.timeout);
                }
                return Ok(code.unwrap_or_else(|| 128 + signal.unwrap_or(0)));
            }
            Ok(_) => continue,
            Err(e) => {
                eprintln!("corral cgi: [{tenant} {}] lost the tenant init: {e}", checked.requested.display());
                return Ok(EXIT_FAILURE);
            }
        }
    }
}
