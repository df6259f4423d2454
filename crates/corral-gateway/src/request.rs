//! One FastCGI request: checks, spawn in the tenant's sandbox through its
//! init, then three streams at once — FCGI_STDIN to the script's stdin,
//! its stdout (CGI head parsed, then the body) to FCGI_STDOUT, its stderr
//! to the gateway log — until the script has exited and its stdout ended,
//! the timeout hits, or the web server aborts.

use crate::control::{pipe, Control, ControlError, Ours};
use crate::link::{Gone, Response};
use crate::server::Shared;
use crate::tenants::{Ask, Failure, Prepared};
use crate::{cgienv, log};
use corral_fastcgi::params::Pair;
use corral_fastcgi::{cgi_head_to_fastcgi_stdout, CgiHeaderParser};
use corral_sandbox::proto::{Reply, Request, SpawnRequest};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// After the deadline the init kills the script; the gateway gives it this
/// long to report, then gives up on it itself.
const GRACE: Duration = Duration::from_secs(2);
/// How long to wait for the exit status once stdout ended, and for the end
/// of stdout once the script exited (then the response ends, and what is
/// left of the script is killed).
const EXIT_WAIT: Duration = Duration::from_secs(1);
/// Script output held back while the request body is still being passed
/// on (see [`stream`]).
const HOLD_MAX: usize = 1024 * 1024;
/// Longest stderr line logged as one line.
const MAX_LOG_LINE: usize = 4096;
/// Dropped request variable names remembered (each is logged once); past
/// this many, new names are no longer logged (request headers are the
/// client's to invent).
const MAX_DROPPED_NAMES: usize = 1024;

pub struct Input {
    pub params: Vec<Pair>,
    pub stdin: mpsc::Receiver<Vec<u8>>,
    pub abort: oneshot::Receiver<()>,
}

/// How the script ended.
#[derive(Debug, Clone, Copy, Default)]
struct Exit {
    code: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
}

impl Exit {
    fn app_status(&self) -> u32 {
        match (self.code, self.signal) {
            (Some(c), _) => c as u32,
            (None, Some(s)) => 128 + s as u32,
            _ => 0,
        }
    }
    fn describe(&self) -> String {
        match (self.code, self.signal, self.timed_out) {
            (_, Some(s), true) => format!("killed by signal {s} at the timeout"),
            (_, Some(s), false) => format!("killed by signal {s}"),
            (Some(c), _, _) => format!("exit status {c}"),
            _ => "exit status unknown".into(),
        }
    }
}

/// Serve one request to its end; always ends it with FCGI_END_REQUEST.
pub async fn serve(shared: Arc<Shared>, mut resp: Response, input: Input) {
    let _inflight = shared.inflight.enter();
    let Input {
        params,
        stdin,
        mut abort,
    } = input;
    let start = std::time::Instant::now();
    // What the access log needs of the params, taken before they move on.
    let access = shared.access.as_ref().map(|_| AccessFields::of(&params));
    let mut tenant = None;
    let app_status = run(&shared, &mut resp, params, stdin, &mut abort, &mut tenant).await;
    // No head went out: the web server gave up on the request first
    // (nginx's 499, "client closed request").
    let status = if resp.status == 0 { 499 } else { resp.status };
    let bytes = resp.bytes;
    resp.end(app_status).await;
    if let (Some(log), Some(a)) = (&shared.access, access) {
        let time = corral_sandbox::services::log::timestamp(std::time::SystemTime::now());
        log.record(&log::Access {
            time: time.trim_end(),
            tenant: tenant.as_deref().unwrap_or("-"),
            remote: &a.remote,
            host: &a.host,
            method: &a.method,
            uri: &a.uri,
            status,
            bytes,
            duration_ms: (start.elapsed().as_micros() as f64) / 1000.0,
            script: &a.script,
        });
    }
}

/// The request params the access log records.
struct AccessFields {
    remote: String,
    host: String,
    method: String,
    uri: String,
    script: String,
}

impl AccessFields {
    fn of(params: &[Pair]) -> AccessFields {
        let get = |n: &str| {
            cgienv::param(params, n)
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_default()
        };
        let uri = match cgienv::param(params, "REQUEST_URI") {
            Some(u) => String::from_utf8_lossy(u).into_owned(),
            None => {
                let (name, query) = (get("SCRIPT_NAME"), get("QUERY_STRING"));
                if query.is_empty() {
                    name
                } else {
                    format!("{name}?{query}")
                }
            }
        };
        let host = match cgienv::param(params, "HTTP_HOST") {
            Some(h) => String::from_utf8_lossy(h).into_owned(),
            None => get("SERVER_NAME"),
        };
        AccessFields {
            remote: get("REMOTE_ADDR"),
            host,
            method: get("REQUEST_METHOD"),
            uri,
            script: get("SCRIPT_FILENAME"),
        }
    }
}

/// Log the request variables left out, each name once per gateway process,
/// with the rule that dropped it and how to pass it (when it can be).
fn log_dropped(shared: &Shared, tenant: &str, script: &str, dropped: &[cgienv::Dropped]) {
    if dropped.is_empty() {
        return;
    }
    let mut seen = shared
        .dropped_logged
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    for (name, why) in dropped {
        if seen.contains(name) {
            continue;
        }
        if seen.len() >= MAX_DROPPED_NAMES {
            if seen.insert(String::new()) {
                log::line(format_args!(
                    "{MAX_DROPPED_NAMES} names of dropped request variables logged: further ones are not"
                ));
            }
            return;
        }
        seen.insert(name.clone());
        log::line(format_args!(
            "[{tenant} {script}] request variable {name} not passed (rule {:?}): {} (logged once per name)",
            why.rule(),
            why.explain(name)
        ));
    }
}

async fn run(
    shared: &Arc<Shared>,
    resp: &mut Response,
    params: Vec<Pair>,
    stdin: mpsc::Receiver<Vec<u8>>,
    abort: &mut oneshot::Receiver<()>,
    tenant_out: &mut Option<String>,
) -> u32 {
    let start = Instant::now();
    let deadline = start + shared.timeout;
    let text = |v: &[u8]| String::from_utf8_lossy(v).into_owned();
    let ask = Ask {
        script_filename: cgienv::param(&params, "SCRIPT_FILENAME")
            .map(text)
            .unwrap_or_default(),
        host: cgienv::param(&params, "HTTP_HOST")
            .or_else(|| cgienv::param(&params, "SERVER_NAME"))
            .map(text),
        document_root: cgienv::param(&params, "DOCUMENT_ROOT").map(text),
    };
    let script = ask.script_filename.clone();
    if shared.draining() {
        let _ = resp.error(503, "the gateway is shutting down").await;
        return 0;
    }
    // From the caches right here; a passwd lookup or a sandbox load goes
    // to the blocking pool.
    let p = match shared.tenants.try_prepare(&ask) {
        Ok(Some(p)) => p,
        Ok(None) => {
            let s = shared.clone();
            match tokio::task::spawn_blocking(move || s.tenants.prepare(&ask)).await {
                Ok(Ok(p)) => p,
                Ok(Err(f)) => return fail(shared, resp, &script, tenant_out, f).await,
                Err(e) => {
                    return fail(
                        shared,
                        resp,
                        &script,
                        tenant_out,
                        Failure::new(500, format!("checks panicked: {e}")),
                    )
                    .await
                }
            }
        }
        Err(f) => return fail(shared, resp, &script, tenant_out, f).await,
    };
    let tenant = p.script.tenant.name.clone();
    *tenant_out = Some(tenant.clone());
    let base = corral_sandbox::spawn::environment(&p.target.plan, std::iter::empty(), &[]);
    let (env, dropped) = cgienv::from_params(&base, &params, &shared.tenants.map().pass_env);
    log_dropped(shared, &tenant, &script, &dropped);
    let remaining = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    let req = SpawnRequest {
        argv: p.script.argv(),
        env,
        cwd: p.script.dir.to_string_lossy().into_owned(),
        timeout_ms: remaining.as_millis() as u64,
        detach: false,
        // No `Spawned`: output is streamed from the start; a script that
        // could not be started ends with `Failed` instead of `Exited`.
        announce: false,
        nfds: 3,
        attrs: shared.attrs.clone(),
        // The connection goes back to the tenant's pool after the Exited.
        keep: true,
    };
    let label = format!("{tenant} {}", p.script.requested.display());
    let stdin = cgienv::has_body(&params).then_some(stdin);
    match execute(shared, resp, &p, req, stdin, abort, deadline, &label).await {
        Ok(status) => status,
        Err(f) => fail(shared, resp, &script, tenant_out, f).await,
    }
}

/// Log the failure (naming the tenant when it is known) and answer it.
async fn fail(
    shared: &Shared,
    resp: &mut Response,
    script: &str,
    tenant: &mut Option<String>,
    f: Failure,
) -> u32 {
    if tenant.is_none() {
        tenant.clone_from(&f.tenant);
    }
    log::line(format_args!(
        "{} [{} {script}] {}",
        f.status,
        tenant.as_deref().unwrap_or("-"),
        f.what
    ));
    if f.suspended {
        let _ = resp
            .page(
                503,
                "text/html; charset=utf-8",
                shared.suspended_page.as_bytes(),
            )
            .await;
        return 0;
    }
    let public = match f.status {
        403 => "The script is not allowed to run (the gateway log says why).",
        404 => "No such script.",
        503 => "The tenant's sandbox is not available.",
        504 => "The script did not answer in time.",
        508 => "The site's entry-process limit is reached; try again later.",
        _ => "The script failed (the gateway log says why).",
    };
    let _ = resp.error(f.status, public).await;
    0
}

/// Pipes, spawn, streams. Errors before the head become error pages.
#[allow(clippy::too_many_arguments)]
async fn execute(
    shared: &Arc<Shared>,
    resp: &mut Response,
    p: &Prepared,
    req: SpawnRequest,
    // None: the request has no body.
    stdin: Option<mpsc::Receiver<Vec<u8>>>,
    abort: &mut oneshot::Receiver<()>,
    deadline: Instant,
    label: &str,
) -> Result<u32, Failure> {
    let sys = |what: &str| {
        let what = what.to_string();
        move |e: nix::errno::Errno| Failure::new(500, format!("{what}: {e}"))
    };
    // No body (RFC 3875 §4.1.2: CONTENT_LENGTH unset or 0): the script's
    // stdin is /dev/null, and no pipe or pump task is needed.
    let stdin_pipe = match stdin {
        Some(rx) => Some((pipe(Ours::Write).map_err(sys("stdin pipe"))?, rx)),
        None => None,
    };
    let (out_r, out_w) = pipe(Ours::Read).map_err(sys("stdout pipe"))?;
    let (err_r, err_w) = pipe(Ours::Read).map_err(sys("stderr pipe"))?;
    let in_fd = stdin_pipe
        .as_ref()
        .map(|((r, _), _)| r.as_raw_fd())
        .unwrap_or(shared.devnull.as_raw_fd());
    let (mut control, mut pooled) = connect(shared, p).await?;
    let req = Request::Spawn(req);
    let fds = [in_fd, out_w.as_raw_fd(), err_w.as_raw_fd()];
    loop {
        match control.send(&req, &fds).await {
            Ok(()) => break,
            // An idle connection the init closed (an init older than
            // `keep` closes it after the Exited): nothing was sent; take
            // the next one, or a new one.
            Err(ControlError::Send(_)) if pooled => {
                (control, pooled) = connect(shared, p).await?;
            }
            Err(e) => return Err(spawn_err(e)),
        }
    }
    // The child holds its ends now; ours must go, or EOF never comes.
    drop(out_w);
    drop(err_w);
    let mut stdin_task = stdin_pipe.map(|((in_r, in_w), rx)| {
        drop(in_r);
        tokio::spawn(pump_stdin(in_w, rx))
    });
    let stderr_task = tokio::spawn(pump_stderr(err_r, label.to_string()));
    let stdout = pipe::Receiver::from_owned_fd_unchecked(out_r)
        .map_err(|e| Failure::new(500, format!("stdout pipe: {e}")))?;
    let mut exited = false;
    let result = stream(
        resp,
        stdout,
        &control,
        &mut stdin_task,
        abort,
        deadline,
        label,
        &mut exited,
    )
    .await;
    if exited {
        // The init reported the script's end: the connection is idle (its
        // request started nothing else), and serves the next request.
        p.pool.put(control);
    } else {
        // Whatever is left of the script dies with the control connection.
        drop(control);
    }
    if let Some(t) = &stdin_task {
        t.abort();
    }
    let mut stderr_task = stderr_task;
    if tokio::time::timeout(Duration::from_millis(200), &mut stderr_task)
        .await
        .is_err()
    {
        // Something that escaped the kill still holds stderr: stop reading.
        stderr_task.abort();
    }
    result
}

/// A connection to the tenant's init: an idle one from its pool (true), or
/// a new one.
async fn connect(shared: &Arc<Shared>, p: &Prepared) -> Result<(Control, bool), Failure> {
    if let Some(c) = p.pool.take() {
        return Ok((c, true));
    }
    let tenant = &p.script.tenant.name;
    let fresh = match Control::connect(&p.control, Duration::from_secs(5)).await {
        Ok(c) => Ok(c),
        Err(first) => {
            // The sandbox may have gone down since it was checked: bring it
            // up again once.
            shared.tenants.forget(tenant);
            let (s, t) = (shared.clone(), tenant.clone());
            match tokio::task::spawn_blocking(move || s.tenants.reload(&t)).await {
                Ok(Ok(_)) => Control::connect(&p.control, Duration::from_secs(5))
                    .await
                    .map_err(|e| Failure::new(503, format!("{e} (first attempt: {first})"))),
                Ok(Err(f)) => Err(f),
                Err(e) => Err(Failure::new(
                    500,
                    format!("bringing {tenant} up panicked: {e}"),
                )),
            }
        }
    };
    fresh.map(|c| (c, false))
}

fn spawn_err(e: ControlError) -> Failure {
    match e {
        ControlError::TooLarge { .. } => {
            Failure::new(500, format!("request environment too large: {e}"))
        }
        e => Failure::new(502, format!("spawn through the tenant init: {e}")),
    }
}

/// The script's stdout to the web server, until it ended and the script
/// exited. Returns the FastCGI appStatus; `exited` tells whether the init's
/// `Exited` came (then the control connection is idle).
///
/// Like fcgiwrap, the response goes out only once the request body has been
/// handed to the script (or the script stopped reading it): nginx stops
/// sending the body as soon as a response head arrives, so a script that
/// prints its head before reading a large body would otherwise wait
/// forever. Unlike fcgiwrap, stdout is still read meanwhile (up to
/// [`HOLD_MAX`] bytes are held), so a script that writes before it reads
/// does not block either.
#[allow(clippy::too_many_arguments)]
async fn stream(
    resp: &mut Response,
    mut stdout: pipe::Receiver,
    control: &Control,
    stdin_task: &mut Option<JoinHandle<()>>,
    abort: &mut oneshot::Receiver<()>,
    deadline: Instant,
    label: &str,
    exited: &mut bool,
) -> Result<u32, Failure> {
    let hard = deadline + GRACE;
    let mut parser = CgiHeaderParser::new();
    // Filled by read_buf without zeroing; cleared after each chunk.
    let mut buf: Vec<u8> = Vec::with_capacity(corral_fastcgi::record::MAX_STREAM_CHUNK);
    let mut exit: Option<Exit> = None;
    let mut eof = false;
    let mut stdin_done = stdin_task.is_none();
    // A complete head (serialised) and body bytes not sent yet.
    let mut held: Option<Vec<u8>> = None;
    // Once stdout ended, how long to wait for the exit status.
    let mut exit_by = hard;
    // Once the script exited, how long stdout may stay open (held by
    // something it left running); then what is in the pipe is taken and
    // the response ends (`linger`).
    let mut eof_by = hard;
    let mut linger = false;
    // One timer for the whole request, moved when the deadline does (a new
    // one per wake-up would be set up in the timer wheel and torn down
    // each time).
    let sleep = tokio::time::sleep_until(hard);
    tokio::pin!(sleep);
    loop {
        if exit.is_some_and(|e| e.timed_out) && !resp.head_sent {
            // Killed at the deadline: whatever it had written is not sent.
            return Err(Failure::new(
                504,
                "timed out before its response could be sent: killed",
            ));
        }
        if stdin_done {
            if let Some(h) = held.take() {
                resp.head_sent = true;
                send(resp, &h, hard).await?;
            }
        }
        if eof && exit.is_some() && held.is_none() {
            break;
        }
        let room = !matches!(&held, Some(h) if h.len() >= HOLD_MAX);
        let wait_until = match (eof, exit.is_some()) {
            (true, _) => exit_by.min(hard),
            (false, true) => eof_by.min(hard),
            (false, false) => hard,
        };
        if sleep.deadline() != wait_until {
            sleep.as_mut().reset(wait_until);
        }
        // In this order: output first, the timer last.
        tokio::select! {
            biased;
            r = read_chunk(&mut stdout, &mut buf, linger), if !eof && room => match r {
                Ok(0) => {
                    eof = true;
                    exit_by = Instant::now() + EXIT_WAIT;
                }
                Ok(n) => match held.as_mut() {
                    Some(h) => h.extend_from_slice(&buf[..n]),
                    None if resp.head_sent => send(resp, &buf[..n], hard).await?,
                    None => match parser.feed(&buf[..n]) {
                        Ok(Some(head)) => {
                            resp.status = head.status;
                            let mut first = cgi_head_to_fastcgi_stdout(&head);
                            first.extend_from_slice(&buf[head.body_start..n]);
                            held = Some(first);
                        }
                        Ok(None) => {}
                        Err(e) => return Err(Failure::new(502, format!("invalid CGI response: {e}"))),
                    },
                },
                Err(e) => {
                    log::line(format_args!("[{label}] read stdout: {e}"));
                    eof = true;
                }
            },
            _ = finished(stdin_task), if !stdin_done => stdin_done = true,
            r = control.recv(), if exit.is_none() => match r {
                Ok(Reply::Exited { code, signal, timed_out, .. }) => {
                    *exited = true;
                    exit = Some(Exit { code, signal, timed_out });
                    eof_by = Instant::now() + EXIT_WAIT;
                }
                // Never exec'd, so it wrote nothing: no head can have gone out.
                Ok(Reply::Failed { step, errno }) => {
                    let hint = if errno == libc::ENOEXEC {
                        " (no #! line: give it one, or map its extension to an interpreter in the map file's [interpreters])"
                    } else {
                        ""
                    };
                    return Err(Failure::new(502, format!("could not start the script: {}{hint}", corral_sandbox::proto::Failure::from_raw(step, errno))));
                }
                Ok(other) => log::line(format_args!("[{label}] unexpected message from the tenant init: {other:?}")),
                Err(e) => {
                    log::line(format_args!("[{label}] control connection: {e}"));
                    exit = Some(Exit::default());
                }
            },
            _ = &mut *abort => {
                log::line(format_args!("[{label}] aborted by the web server"));
                return Ok(0);
            }
            _ = &mut sleep => {
                if !eof && exit.is_some() && Instant::now() < hard {
                    if linger {
                        // Output is held and the pipe was not read again: stop.
                        eof = true;
                        exit_by = Instant::now() + EXIT_WAIT;
                    } else {
                        log::line(format_args!("[{label}] exited, but a process it left running keeps stdout open: ending the response"));
                        linger = true;
                    }
                    continue;
                }
                if eof && Instant::now() < hard {
                    // The script closed stdout but lingers: end the response
                    // (what is left of it dies with the control connection).
                    stdin_done = true;
                    exit.get_or_insert_with(Exit::default);
                    continue;
                }
                if resp.head_sent {
                    log::line(format_args!("[{label}] timed out while sending the body ({} bytes sent): response truncated", resp.bytes));
                    return Ok(0);
                }
                return Err(Failure::new(504, "timed out (the script did not exit after being killed)"));
            }
        }
    }
    let ex = exit.unwrap_or_default();
    if resp.head_sent {
        if ex.timed_out {
            log::line(format_args!(
                "[{label}] timed out after sending its head: response truncated ({} bytes)",
                resp.bytes
            ));
        }
        return Ok(ex.app_status());
    }
    if ex.timed_out {
        return Err(Failure::new(
            504,
            "timed out before sending a CGI header: killed",
        ));
    }
    let why = parser
        .finish()
        .err()
        .map(|e| e.to_string())
        .unwrap_or_else(|| "no output".into());
    Err(Failure::new(502, format!("{why} ({})", ex.describe())))
}

/// The end of `task`; never, without one.
async fn finished(task: &mut Option<JoinHandle<()>>) {
    match task {
        Some(t) => {
            let _ = t.await;
        }
        None => std::future::pending().await,
    }
}

/// One read of stdout into `buf` (emptied first). With `linger`, only what
/// is in the pipe now: an empty pipe counts as the end.
async fn read_chunk(
    stdout: &mut pipe::Receiver,
    buf: &mut Vec<u8>,
    linger: bool,
) -> std::io::Result<usize> {
    buf.clear();
    if !linger {
        return stdout.read_buf(buf).await;
    }
    match stdout.try_read_buf(buf) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(0),
        r => r,
    }
}

async fn send(resp: &mut Response, data: &[u8], hard: Instant) -> Result<(), Failure> {
    match tokio::time::timeout_at(hard, resp.stdout(data)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(Gone)) => Err(Failure::new(499, "the web server closed the connection")),
        Err(_) => Err(Failure::new(504, "timed out writing to the web server")),
    }
}

/// FCGI_STDIN chunks into the script's stdin; ends (closing the pipe) at
/// the end of the body, or when the script stops reading (EPIPE), which
/// also makes further chunks be discarded. `fd`: the write end of a
/// [`pipe`] made with [`Ours::Write`] (non-blocking).
async fn pump_stdin(fd: OwnedFd, mut rx: mpsc::Receiver<Vec<u8>>) {
    let Ok(mut tx) = pipe::Sender::from_owned_fd_unchecked(fd) else {
        return;
    };
    while let Some(chunk) = rx.recv().await {
        if tx.write_all(&chunk).await.is_err() {
            return;
        }
    }
}

/// The script's stderr, line by line, into the gateway log. `fd`: the read
/// end of a [`pipe`] made with [`Ours::Read`] (non-blocking).
async fn pump_stderr(fd: OwnedFd, label: String) {
    let Ok(rx) = pipe::Receiver::from_owned_fd_unchecked(fd) else {
        return;
    };
    let mut r = tokio::io::BufReader::with_capacity(MAX_LOG_LINE, rx);
    let mut line = Vec::new();
    loop {
        line.clear();
        // A bounded read: at most one buffer's worth per line.
        let n = match (&mut r)
            .take(MAX_LOG_LINE as u64)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let text = String::from_utf8_lossy(&line[..n]);
        log::line(format_args!(
            "[{label}] stderr: {}",
            text.trim_end_matches(['\n', '\r'])
        ));
    }
}
