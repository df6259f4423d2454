//! A request's way back to the web server: records go through the
//! connection's writer task (a bounded channel, so a slow web server slows
//! the scripts' output down instead of filling memory), and the request is
//! ended through the shared [`Connection`] state machine.

use corral_fastcgi::record::{encode_stdout, encode_stdout_end};
use corral_fastcgi::Connection;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// What the writer task writes.
#[derive(Debug)]
pub enum Out {
    Bytes(Vec<u8>),
    /// Flush, then close the connection (a request without FCGI_KEEP_CONN
    /// ended, or the server shuts down).
    Close,
}

/// The web server's side is gone.
#[derive(Debug)]
pub struct Gone;

#[derive(Clone)]
pub struct Link {
    pub tx: mpsc::Sender<Out>,
    pub conn: Arc<Mutex<Connection>>,
    /// Tells the connection's reader that a request (id, instance) finished.
    pub done: mpsc::UnboundedSender<(u16, u64)>,
}

impl Link {
    pub async fn send(&self, bytes: Vec<u8>) -> Result<(), Gone> {
        self.tx.send(Out::Bytes(bytes)).await.map_err(|_| Gone)
    }
}

/// One request's output stream.
pub struct Response {
    pub id: u16,
    /// Which use of the id this is (web servers reuse ids, nginx always 1).
    pub seq: u64,
    pub link: Link,
    /// The CGI head (or an error page) went out: the status is decided.
    pub head_sent: bool,
    pub bytes: u64,
    /// The HTTP status of the head that went (or will go) out; 0 before.
    pub status: u16,
}

impl Response {
    pub fn new(id: u16, seq: u64, link: Link) -> Response {
        Response {
            id,
            seq,
            link,
            head_sent: false,
            bytes: 0,
            status: 0,
        }
    }

    /// `data` as FCGI_STDOUT records.
    pub async fn stdout(&mut self, data: &[u8]) -> Result<(), Gone> {
        if data.is_empty() {
            return Ok(());
        }
        let mut out = Vec::with_capacity(data.len() + 16);
        encode_stdout(self.id, data, &mut out);
        self.bytes += data.len() as u64;
        self.link.send(out).await
    }

    /// A gateway-generated error page (only if nothing was sent yet).
    pub async fn error(&mut self, status: u16, message: &str) -> Result<(), Gone> {
        if self.head_sent {
            return Ok(());
        }
        self.head_sent = true;
        self.status = status;
        let page = corral_fastcgi::error_response(status, message);
        self.stdout(&page).await
    }

    /// A whole page of the gateway's own (the suspended page): status,
    /// content type and body, unless the response has begun.
    pub async fn page(&mut self, status: u16, content_type: &str, body: &[u8]) -> Result<(), Gone> {
        if self.head_sent {
            return Ok(());
        }
        self.head_sent = true;
        self.status = status;
        let mut out = format!(
            "Status: {status} {}\r\nContent-Type: {content_type}\r\nCache-Control: no-store\r\n\r\n",
            corral_fastcgi::cgi::reason_phrase(status)
        )
        .into_bytes();
        out.extend_from_slice(body);
        self.stdout(&out).await
    }

    /// End the stdout stream and the request (FCGI_END_REQUEST); closes the
    /// connection afterwards when the web server did not ask to keep it.
    pub async fn end(self, app_status: u32) {
        let mut out = Vec::with_capacity(32);
        encode_stdout_end(self.id, &mut out);
        let ended = self
            .link
            .conn
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .end_request(self.id, app_status, &mut out);
        let keep = match ended {
            Ok(e) => e.keep_conn,
            // The id is not active: the connection was reset underneath.
            Err(_) => true,
        };
        if self.link.send(out).await.is_ok() && !keep {
            let _ = self.link.tx.send(Out::Close).await;
        }
        let _ = self.link.done.send((self.id, self.seq));
    }
}
