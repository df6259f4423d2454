//! One FastCGI transport connection: a reader (records in, through the
//! [`Connection`] state machine, to the requests' tasks) and a writer
//! (records out, batched). Several requests may share the connection
//! (FCGI_MPXS_CONNS=1); each has its own task.

use crate::link::{Link, Out, Response};
use crate::log;
use crate::request::{self, Input};
use crate::server::Shared;
use corral_fastcgi::{Connection, ConnectionConfig, Event};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{mpsc, oneshot};

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
}

pub async fn serve<R, W>(shared: Arc<Shared>, rd: R, wr: W)
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
    read_loop(shared, rd, link, done_rx, closed_rx).await;
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
) {
    let mut slots: HashMap<u16, Slot> = HashMap::new();
    let mut buf = vec![0u8; 16 * 1024];
    let mut events = Vec::new();
    let mut drain = shared.drain_signal();
    let mut seq = 0u64;
    loop {
        if *drain.borrow() && slots.is_empty() {
            let _ = link.tx.send(Out::Close).await;
            return;
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
        };
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
                },
            );
        }
        Event::Params { id, params } => {
            let slot = slots.get_mut(&id);
            if let Some((s, (stdin, abort))) =
                slot.and_then(|s| s.pending.take().map(|p| (s.seq, p)))
            {
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
