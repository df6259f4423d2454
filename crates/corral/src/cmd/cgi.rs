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
    #[arg(long, value_name = "FILE", conflicts_with = "gateway")]
    pub map: Option<PathBuf>,
    /// Hand the request to a running `corral gateway` on this unix socket
    /// instead (FastCGI): needs no root, only access to the socket; the
    /// gateway checks and runs the script.
    #[arg(long, value_name = "SOCKET")]
    pub gateway: Option<PathBuf>,
}

/// A failure answered with a CGI error response.
struct Fail {
    status: u16,
    log: String,
    exit: i32,
}

fn fail(status: u16, log: impl Into<String>) -> Fail {
    Fail {
        status,
        log: log.into(),
        exit: EXIT_FAILURE,
    }
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
    let var = if a.path_translated {
        "PATH_TRANSLATED"
    } else {
        "SCRIPT_FILENAME"
    };
    std::env::var_os(var).map(|v| v.to_string_lossy().into_owned())
}

fn run(ctx: &Ctx, a: &CgiArgs) -> Result<i32, Fail> {
    if let Some(sock) = &a.gateway {
        return forward(a, sock);
    }
    if !nix::unistd::geteuid().is_root() {
        return Err(fail(500, "corral cgi must run as root (it talks to tenant inits), or use --gateway SOCKET; see docs/gateway.md"));
    }
    let script = script_name(a).ok_or_else(|| {
        fail(
            403,
            if a.path_translated {
                "PATH_TRANSLATED is not set"
            } else {
                "SCRIPT_FILENAME is not set"
            },
        )
    })?;
    let host = std::env::var("HTTP_HOST")
        .or_else(|_| std::env::var("SERVER_NAME"))
        .ok();
    let map = match &a.map {
        Some(p) => corral_gateway::TenantMap::load(p).map_err(|e| fail(500, e.to_string()))?,
        None => corral_gateway::TenantMap::default(),
    };
    let document_root = std::env::var("DOCUMENT_ROOT").ok();
    let checked = safety::check_in(&script, host.as_deref(), document_root.as_deref(), &map)
        .map_err(|r| fail(r.status, r.to_string()))?;
    let tenant = checked.tenant.name.clone();
    let target = super::run::target(ctx, &tenant).map_err(|e| {
        fail(
            503,
            format!("sandbox of {tenant}: {}", crate::out::error_line(&e)),
        )
    })?;
    let _slot = match join::entry(&ctx.layout, &target) {
        Ok(s) => s,
        Err(e @ JoinError::EntryLimit { .. }) => {
            return Err(Fail {
                status: 508,
                log: e.to_string(),
                exit: EXIT_ENTRY_LIMIT,
            })
        }
        Err(e) => return Err(fail(500, e.to_string())),
    };

    // The CGI environment this process got, filtered as the gateway does.
    let params: Vec<(Vec<u8>, Vec<u8>)> = std::env::vars_os()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
    let base = corral_sandbox::spawn::environment(&target.plan, std::iter::empty(), &[]);
    let (mut env, _dropped) = corral_gateway::cgienv::from_params(&base, &params, &map.pass_env);
    // With `Action` or an argument, SCRIPT_FILENAME named the wrapper.
    let requested = checked.requested.to_string_lossy().into_owned();
    match env.iter_mut().find(|(k, _)| k == "SCRIPT_FILENAME") {
        Some((_, v)) => *v = requested,
        None => env.push(("SCRIPT_FILENAME".into(), requested)),
    }
    let req = SpawnRequest {
        argv: checked.argv(),
        env,
        cwd: checked.dir.to_string_lossy().into_owned(),
        timeout_ms: a.timeout.saturating_mul(1000),
        detach: false,
        announce: false,
        nfds: 3,
        attrs: None,
        keep: false,
    };
    let control = ctx.layout.tenant(&tenant).control();
    let c = Client::connect(&control)
        .map_err(|e| fail(503, format!("connect to {}: {e}", control.display())))?;
    // Our own stdio goes to the script: the web server talks to it directly.
    c.send(&Request::Spawn(req), &[0, 1, 2])
        .map_err(|e| fail(502, format!("spawn through the tenant init: {e}")))?;
    // Unannounced: the one answer is Exited, or Failed if the script never
    // started (then it wrote nothing and an error page can still be sent).
    loop {
        match c.recv() {
            Ok(Reply::Failed { step, errno }) => {
                return Err(fail(
                    502,
                    format!(
                        "could not start {}: {}",
                        checked.real.display(),
                        corral_sandbox::proto::Failure::from_raw(step, errno)
                    ),
                ))
            }
            Ok(Reply::Exited {
                code,
                signal,
                timed_out,
                ..
            }) => {
                if timed_out {
                    eprintln!(
                        "corral cgi: [{tenant} {}] killed after the {}s timeout",
                        checked.requested.display(),
                        a.timeout
                    );
                }
                return Ok(code.unwrap_or_else(|| 128 + signal.unwrap_or(0)));
            }
            Ok(_) => continue,
            Err(e) => {
                eprintln!(
                    "corral cgi: [{tenant} {}] lost the tenant init: {e}",
                    checked.requested.display()
                );
                return Ok(EXIT_FAILURE);
            }
        }
    }
}

/// `--gateway`: the request as FastCGI to a running gateway (one request,
/// FCGI_KEEP_CONN off); its FCGI_STDOUT is our stdout, FCGI_STDERR our
/// stderr, its appStatus our exit status.
fn forward(a: &CgiArgs, sock: &std::path::Path) -> Result<i32, Fail> {
    use corral_gateway::fastcgi::params::encode_pairs;
    use corral_gateway::fastcgi::record::{
        encode_begin_request, encode_stream, encode_stream_end, EndRequestBody, RecordDecoder,
        RecordType, Role, Stream, MAX_STREAM_CHUNK,
    };
    use std::io::Read;
    let script =
        script_name(a).ok_or_else(|| fail(403, "no script: SCRIPT_FILENAME is not set"))?;
    // The gateway filters the variables (as it does nginx's params).
    let mut params: Vec<(Vec<u8>, Vec<u8>)> = std::env::vars_os()
        .filter(|(k, _)| k != "SCRIPT_FILENAME")
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
    params.push((b"SCRIPT_FILENAME".to_vec(), script.into_bytes()));
    let mut head = Vec::new();
    encode_begin_request(1, Role::Responder, false, &mut head);
    let mut pairs = Vec::new();
    encode_pairs(params.iter().map(|(k, v)| (k, v)), &mut pairs)
        .map_err(|e| fail(500, format!("encode the CGI environment: {e}")))?;
    encode_stream(Stream::Params, 1, &pairs, &mut head);
    encode_stream_end(Stream::Params, 1, &mut head);
    let mut conn = std::os::unix::net::UnixStream::connect(sock).map_err(|e| {
        fail(
            503,
            format!("connect to the gateway at {}: {e}", sock.display()),
        )
    })?;
    conn.write_all(&head)
        .map_err(|e| fail(503, format!("send to the gateway: {e}")))?;
    // The body is copied by a thread while the answer is read, so neither
    // side can block the other.
    let mut body_conn = conn
        .try_clone()
        .map_err(|e| fail(500, format!("socket: {e}")))?;
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = vec![0u8; MAX_STREAM_CHUNK];
        let mut out = Vec::with_capacity(MAX_STREAM_CHUNK + 16);
        loop {
            let n = match stdin.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => 0,
            };
            out.clear();
            if n == 0 {
                encode_stream_end(Stream::Stdin, 1, &mut out);
            } else {
                encode_stream(Stream::Stdin, 1, &buf[..n], &mut out);
            }
            // The gateway may answer (and close) before the body is read.
            if body_conn.write_all(&out).is_err() || n == 0 {
                return;
            }
        }
    });
    let mut dec = RecordDecoder::new();
    let mut buf = vec![0u8; 64 * 1024];
    let (mut stdout, mut stderr) = (std::io::stdout().lock(), std::io::stderr().lock());
    let mut started = false;
    loop {
        let n = match conn.read(&mut buf) {
            Ok(0) => 0,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if !started => return Err(fail(502, format!("read from the gateway: {e}"))),
            Err(_) => 0,
        };
        if n == 0 {
            if !started {
                return Err(fail(
                    502,
                    "the gateway closed the connection without answering",
                ));
            }
            eprintln!(
                "corral cgi: the gateway closed the connection before the end of the response"
            );
            return Ok(EXIT_FAILURE);
        }
        let mut input = &buf[..n];
        loop {
            let rec = match dec.decode(&mut input) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => {
                    eprintln!("corral cgi: bad answer from the gateway: {e}");
                    return Ok(EXIT_FAILURE);
                }
            };
            match rec.kind {
                RecordType::Stdout => {
                    started = true;
                    if stdout.write_all(&rec.content).is_err() {
                        return Ok(EXIT_FAILURE);
                    }
                }
                RecordType::Stderr => {
                    let _ = stderr.write_all(&rec.content);
                }
                RecordType::EndRequest => {
                    let end = EndRequestBody::parse(&rec.content).map_err(|e| {
                        fail(502, format!("bad FCGI_END_REQUEST from the gateway: {e}"))
                    })?;
                    if !started {
                        return Err(fail(
                            502,
                            format!(
                                "the gateway refused the request ({:?})",
                                end.protocol_status
                            ),
                        ));
                    }
                    let _ = stdout.flush();
                    return Ok(end.app_status as i32);
                }
                _ => {}
            }
        }
    }
}
