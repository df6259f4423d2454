//! One FastCGI transport connection: a reader (records in, through the
//! [`Connection`] state machine, to the requests' tasks) and a writer
//! (records out, batched). Several requests may share the connection
//! (FCGI_MPXS_CONNS=1); each has its own task.
//!
//! The idle timeout ([`Shared::idle_timeout`]): a web server sends a
//! request's params at once, so from the start of a connection, or from the
//! end of its previous request, the next request's params must be complete
//! within the timeout, however the bytes trickle in (a slow loris gains
//! nothing by sending a byte now and then). A request body may pause for
//! the timeout between reads (the request's own timeout bounds the whole).
//! While every request on the connection has its input and only waits for
//! its script, there is nothing to wait for from the web server: no timer.
//! A connection closed by the timeout with a request half-sent is logged,
//! with its peer: a truncated record or unfinished params held open is an
//! attack or a broken client, not an idle keep-alive connection.

use crate::link::{Link, Out, Response};
use crate::log;
use crate::peer::Peer;
use crate::request::{self, Input};
use crate::server::Shared;
use corral_fastcgi::{Connection, ConnectionConfig, Event};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// Records queued for the writer (each up to 64 KiB).
const OUT_QUEUE: usize = 32;
/// FCGI_STDIN chunks queued per request before the reader waits for the
/// script to take them.
const STDIN_QUEUE: usize = 4;

/// A request's input side, as the reader sees it.
struct Slot {
    /// Distinguishes this use of the request id from earlier ones: a
    /// finished request's notice must not remove its successor's slot.
    seq: u64,
    stdin: Option<mpsc::Sender<Vec<u8>>>,
    abort: Option<oneshot::Sender<()>>,
    /// Handed to the request's task when its params are complete.
    pending: Option<(mpsc::Receiver<Vec<u8>>, oneshot::Receiver<()>)>,
    /// SCRIPT_FILENAME, once the params are complete (for the log).
    script: Option<String>,
}

/// What the connection waits for from the web server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waiting {
    /// A request's params (or the next request): a deadline from when this
    /// began, not moved by the bytes that trickle in.
    Head,
    /// A request body: the timeout between reads.
    Body,
    /// Nothing: every request has its input and waits for its script.
    Nothing,
}

pub async fn serve<R, W>(shared: Arc<Shared>, rd: R, wr: W, peer: Peer)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let config = ConnectionConfig {
        max_conns: shared.max_conns,
        max_reqs: shared.max_conns,
        mpxs_conns: true,
        ..ConnectionConfig::default()
    };
    let (tx, rx) = mpsc::channel(OUT_QUEUE);
    let (done_tx, done_rx) = mpsc::unbounded_channel();
    let link = Link {
        tx,
        conn: Arc::new(Mutex::new(Connection::new(config))),
        done: done_tx,
    };
    let (closed_tx, closed_rx) = oneshot::channel();
    let writer = tokio::spawn(write_loop(wr, rx, closed_tx));
    read_loop(shared, rd, link, done_rx, closed_rx, &peer).await;
    // Every Link clone (ours and the requests') is gone once the requests
    // ended; the writer then drains its queue and closes.
    let _ = writer.await;
}

async fn write_loop<W: AsyncWrite + Unpin>(
    wr: W,
    mut rx: mpsc::Receiver<Out>,
    closed: oneshot::Sender<()>,
) {
    // Coalesces small records; full 64 KiB records pass straight through.
    let mut w = BufWriter::with_capacity(16 * 1024, wr);
    'outer: while let Some(mut msg) = rx.recv().await {
        loop {
            match msg {
                Out::Bytes(b) => {
                    if w.write_all(&b).await.is_err() {
                        break 'outer;
                    }
                }
                Out::Close => break 'outer,
            }
            match rx.try_recv() {
                Ok(m) => msg = m,
                Err(_) => break,
            }
        }
        if w.flush().await.is_err() {
            break;
        }
    }
    let _ = w.flush().await;
    let _ = w.shutdown().await;
    // The reader stops; requests still running see their sends fail.
    let _ = closed.send(());
    drop(rx);
}

async fn read_loop<R: AsyncRead + Unpin>(
    shared: Arc<Shared>,
    mut rd: R,
    link: Link,
    mut done: mpsc::UnboundedReceiver<(u16, u64)>,
    mut closed: oneshot::Receiver<()>,
    peer: &Peer,
) {
    let mut slots: HashMap<u16, Slot> = HashMap::new();
    let mut buf = vec![0u8; 16 * 1024];
    let mut events = Vec::new();
    let mut drain = shared.drain_signal();
    let mut seq = 0u64;
    let idle = shared.idle_timeout;
    // When the current wait for a request's head began; when the last
    // bytes came; whether any came at all.
    let mut head_since = Some(Instant::now());
    let mut last_read = Instant::now();
    let mut got_any = false;
    let timer = tokio::time::sleep(idle);
    tokio::pin!(timer);
    loop {
        if *drain.borrow() && slots.is_empty() {
            let _ = link.tx.send(Out::Close).await;
            return;
        }
        let partial = link
            .conn
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .finish_input()
            .is_err();
        let waiting = waiting_for(&slots, partial);
        let deadline = match waiting {
            Waiting::Head => Some(*head_since.get_or_insert_with(Instant::now) + idle),
            Waiting::Body => {
                head_since = None;
                Some(last_read + idle)
            }
            Waiting::Nothing => {
                head_since = None;
                None
            }
        };
        if let Some(d) = deadline {
            if timer.deadline() != d {
                timer.as_mut().reset(d);
            }
        }
        let n = tokio::select! {
            r = rd.read(&mut buf) => match r {
                Ok(0) => {
                    if let Err(e) = link.conn.lock().unwrap_or_else(|e| e.into_inner()).finish_input() {
                        log::line(format_args!("web server connection: {e}"));
                    }
                    return;
                }
                Ok(n) => n,
                Err(e) => {
                    log::line(format_args!("web server connection: read: {e}"));
                    return;
                }
            },
            Some((id, seq)) = done.recv() => {
                if slots.get(&id).is_some_and(|s| s.seq == seq) {
                    slots.remove(&id);
                }
                continue;
            }
            _ = drain.changed() => continue,
            _ = &mut closed => return,
            _ = &mut timer, if deadline.is_some() => {
                if let Some(why) = idle_reason(&slots, partial, got_any, waiting) {
                    log::line(format_args!(
                        "idle timeout: closed the connection from {} after {}s: {why}",
                        peer.desc,
                        idle.as_secs_f64()
                    ));
                }
                // The requests on it are aborted when their slots go.
                let _ = link.tx.send(Out::Close).await;
                return;
            }
        };
        last_read = Instant::now();
        got_any = true;
        let mut out = Vec::new();
        events.clear();
        let r = link.conn.lock().unwrap_or_else(|e| e.into_inner()).process(
            &buf[..n],
            &mut out,
            &mut events,
        );
        if !out.is_empty() && link.send(out).await.is_err() {
            return;
        }
        if let Err(e) = r {
            // Framing is lost: the connection cannot go on (the requests on it
            // are aborted when their slots go).
            log::line(format_args!("web server broke the FastCGI protocol: {e}"));
            let _ = link.tx.send(Out::Close).await;
            return;
        }
        for ev in events.drain(..) {
            if !handle(&shared, &link, &mut slots, &mut seq, ev).await {
                return;
            }
        }
    }
}

/// Returns false when the connection is to be closed.
async fn handle(
    shared: &Arc<Shared>,
    link: &Link,
    slots: &mut HashMap<u16, Slot>,
    seq: &mut u64,
    ev: Event,
) -> bool {
    match ev {
        Event::Begin { id, .. } => {
            let (stx, srx) = mpsc::channel(STDIN_QUEUE);
            let (atx, arx) = oneshot::channel();
            *seq += 1;
            slots.insert(
                id,
                Slot {
                    seq: *seq,
                    stdin: Some(stx),
                    abort: Some(atx),
                    pending: Some((srx, arx)),
                    script: None,
                },
            );
        }
        Event::Params { id, params } => {
            let slot = slots.get_mut(&id);
            if let Some((s, (stdin, abort))) = slot.and_then(|s| {
                s.script = crate::cgienv::param(&params, "SCRIPT_FILENAME")
                    .map(|v| String::from_utf8_lossy(v).into_owned());
                s.pending.take().map(|p| (s.seq, p))
            }) {
                let resp = Response::new(id, s, link.clone());
                tokio::spawn(request::serve(
                    shared.clone(),
                    resp,
                    Input {
                        params,
                        stdin,
                        abort,
                    },
                ));
            }
        }
        Event::Stdin { id, data } => {
            if let Some(slot) = slots.get_mut(&id) {
                if let Some(tx) = &slot.stdin {
                    // Waits while the script is slower than the upload: the
                    // body is never buffered whole. A script that stopped
                    // reading dropped its receiver: the rest is discarded.
                    if tx.send(data).await.is_err() {
                        slot.stdin = None;
                    }
                }
            }
        }
        Event::StdinEnd { id } => {
            if let Some(slot) = slots.get_mut(&id) {
                slot.stdin = None;
            }
        }
        Event::Abort { id } => {
            if let Some(a) = slots.get_mut(&id).and_then(|s| s.abort.take()) {
                let _ = a.send(());
            }
        }
        Event::GetValues { .. } => {}
        Event::Rejected {
            id,
            status,
            keep_conn,
            ..
        } => {
            log::line(format_args!("request {id} rejected: {status:?}"));
            if !keep_conn && slots.is_empty() {
                let _ = link.tx.send(Out::Close).await;
                return false;
            }
        }
    }
    true
}

fn waiting_for(slots: &HashMap<u16, Slot>, partial: bool) -> Waiting {
    if slots.is_empty() || slots.values().any(|s| s.pending.is_some()) {
        Waiting::Head
    } else if slots.values().any(|s| s.stdin.is_some()) {
        Waiting::Body
    } else if partial {
        // A record begun after every request's input ended (a new request
        // on a multiplexed connection): its head.
        Waiting::Head
    } else {
        Waiting::Nothing
    }
}

/// What the idle timeout interrupted, for the log; None for a kept-alive
/// connection idle between requests (the normal end of one).
fn idle_reason(
    slots: &HashMap<u16, Slot>,
    partial: bool,
    got_any: bool,
    waiting: Waiting,
) -> Option<String> {
    let mut ids: Vec<u16> = slots
        .iter()
        .filter(|(_, s)| s.pending.is_some())
        .map(|(id, _)| *id)
        .collect();
    ids.sort_unstable();
    if waiting == Waiting::Body {
        let mut body: Vec<String> = slots
            .iter()
            .filter(|(_, s)| s.stdin.is_some())
            .map(|(id, s)| format!("request {id} ({})", s.script.as_deref().unwrap_or("?")))
            .collect();
        body.sort();
        return Some(format!("FCGI_STDIN stalled for {}", body.join(", ")));
    }
    if partial {
        Some(format!(
            "truncated FastCGI record{}",
            if ids.is_empty() {
                String::new()
            } else {
                format!(" (unfinished FCGI_PARAMS of request {ids:?})")
            }
        ))
    } else if !ids.is_empty() {
        Some(format!("unfinished FCGI_PARAMS of request {ids:?}"))
    } else if !got_any {
        Some("it sent nothing".into())
    } else {
        None
    }
}
