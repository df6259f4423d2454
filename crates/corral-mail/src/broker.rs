//! The broker: takes messages from sandboxes and hands them to the host's
//! MTA as the tenant that sent them.

use crate::args;
use crate::proto::{exit, Reply, Request, MAX_LINE, MAX_MESSAGE};
use crate::rate::RateLimiter;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A tenant's messages-per-hour limit (None: unlimited), or why it could
/// not be read.
pub type LimitOf = dyn Fn(&corral_users::User) -> Result<Option<u32>, String> + Send + Sync;

pub struct Broker {
    /// The host's sendmail (exim4's or postfix's).
    pub sendmail: PathBuf,
    /// uids below are not tenants; root never is.
    pub min_uid: u32,
    pub limit_of: Box<LimitOf>,
    pub rate: Mutex<RateLimiter>,
    /// How long the MTA may take to accept a message.
    pub timeout: Duration,
}

/// Connections served at once; more are refused with a temporary failure.
const MAX_CONNECTIONS: usize = 64;

/// Accept and serve connections, one thread each, forever.
pub fn serve(listener: UnixListener, broker: Arc<Broker>) -> std::io::Result<()> {
    let busy = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        let mut conn = match conn {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if busy.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            busy.fetch_sub(1, Ordering::SeqCst);
            let _ = answer(
                &mut conn,
                &Reply::Refused {
                    status: exit::TEMPFAIL,
                    reason: "the mail broker is busy; try again".into(),
                },
            );
            continue;
        }
        let (broker, busy) = (broker.clone(), busy.clone());
        std::thread::spawn(move || {
            let reply = broker.handle(&mut conn);
            let _ = answer(&mut conn, &reply);
            busy.fetch_sub(1, Ordering::SeqCst);
        });
    }
    Ok(())
}

fn answer(conn: &mut UnixStream, reply: &Reply) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(reply).expect("a reply serializes");
    line.push(b'\n');
    conn.write_all(&line)
}

fn refused(status: i32, reason: impl Into<String>) -> Reply {
    Reply::Refused {
        status,
        reason: reason.into(),
    }
}

fn log(who: &str, what: &str) {
    eprintln!("corral mail-broker: {who}: {what}");
}

impl Broker {
    /// One connection: who sent it, what it asks, whether its plan lets it,
    /// then the MTA. Every refusal is logged with the tenant's name.
    pub fn handle(&self, conn: &mut UnixStream) -> Reply {
        let _ = conn.set_read_timeout(Some(Duration::from_secs(60)));
        let uid = match nix::sys::socket::getsockopt(
            &*conn,
            nix::sys::socket::sockopt::PeerCredentials,
        ) {
            Ok(c) => c.uid(),
            Err(e) => return refused(exit::SOFTWARE, format!("peer credentials: {e}")),
        };
        let user = match corral_users::Db::system().user_by_uid(uid) {
            Ok(Some(u)) if uid != 0 && uid >= self.min_uid => u,
            Ok(_) => {
                log(&format!("uid {uid}"), "refused: not a tenant");
                return refused(
                    exit::NOPERM,
                    format!("uid {uid} is not a tenant of this mail broker"),
                );
            }
            Err(e) => return refused(exit::TEMPFAIL, format!("user database: {e}")),
        };
        let reply = self.submit(conn, &user);
        match &reply {
            Reply::Accepted => {}
            Reply::Refused { reason, .. } => log(&user.name, &format!("refused: {reason}")),
        }
        reply
    }

    fn submit(&self, conn: &mut UnixStream, user: &corral_users::User) -> Reply {
        let mut r = BufReader::new(&*conn);
        let mut line = Vec::new();
        if let Err(e) = (&mut r).take(MAX_LINE as u64).read_until(b'\n', &mut line) {
            return refused(exit::TEMPFAIL, format!("read the request: {e}"));
        }
        let req: Request = match serde_json::from_slice(&line) {
            Ok(r) => r,
            Err(e) => return refused(exit::USAGE, format!("bad request: {e}")),
        };
        let sub = match args::parse(&req.args) {
            Ok(s) => s,
            Err(e) => return refused(e.status(), e.0),
        };
        let mut msg = Vec::new();
        if let Err(e) = r.take(MAX_MESSAGE as u64 + 1).read_to_end(&mut msg) {
            return refused(exit::TEMPFAIL, format!("read the message: {e}"));
        }
        if msg.len() > MAX_MESSAGE {
            return refused(
                exit::DATAERR,
                format!("message larger than {} MiB", MAX_MESSAGE >> 20),
            );
        }
        let limit = match (self.limit_of)(user) {
            Ok(l) => l,
            Err(e) => return refused(exit::TEMPFAIL, format!("{}: its plan: {e}", user.name)),
        };
        let taken = self.rate.lock().unwrap_or_else(|e| e.into_inner()).take(
            user.uid,
            limit,
            Instant::now(),
        );
        if let Err(wait) = taken {
            return refused(
                exit::TEMPFAIL,
                format!(
                    "{}: mail rate limit reached ({} messages per hour, the plan's mail.per_hour); \
                     the next may go in {} s",
                    user.name,
                    limit.unwrap_or(0),
                    wait.as_secs().max(1)
                ),
            );
        }
        match self.deliver(user, &sub, &msg) {
            Ok(()) => {
                log(
                    &user.name,
                    &format!(
                        "accepted by the MTA ({} bytes, {})",
                        msg.len(),
                        if sub.from_headers {
                            "recipients from headers".to_string()
                        } else {
                            format!("to {}", sub.recipients.join(", "))
                        }
                    ),
                );
                Reply::Accepted
            }
            Err(reply) => {
                self.rate
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .refund(user.uid);
                reply
            }
        }
    }

    /// The host's sendmail, run as the tenant (uid and primary gid; std
    /// drops every supplementary group of root's), with a clean
    /// environment: the MTA sees an untrusted local user and sets the
    /// envelope sender to it. `-f` is never passed. Errors at submission
    /// come back to the caller (`-oep`); later delivery failures bounce to
    /// the tenant, as for any local sender.
    fn deliver(
        &self,
        user: &corral_users::User,
        sub: &args::Submission,
        msg: &[u8],
    ) -> Result<(), Reply> {
        let mut cmd = Command::new(&self.sendmail);
        // -oep: what the MTA refuses at submission goes to its stderr, which
        // the caller gets, not into a bounce message as well.
        cmd.args(["-i", "-oep"]);
        if sub.from_headers {
            cmd.arg("-t");
        }
        cmd.arg("--")
            .args(&sub.recipients)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("HOME", &user.home)
            .env("USER", &user.name)
            .env("LOGNAME", &user.name)
            .current_dir("/")
            .uid(user.uid)
            .gid(user.gid)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| {
            refused(
                exit::UNAVAILABLE,
                format!("run {}: {e}", self.sendmail.display()),
            )
        })?;
        let mut stdin = child.stdin.take().expect("piped");
        let body = msg.to_vec();
        let writer = std::thread::spawn(move || stdin.write_all(&body));
        let pid = child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        let out = match rx.recv_timeout(self.timeout) {
            Ok(Ok(o)) => o,
            Ok(Err(e)) => return Err(refused(exit::TEMPFAIL, format!("wait for the MTA: {e}"))),
            Err(_) => {
                // SAFETY: kill with plain arguments, to our own child.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                return Err(refused(
                    exit::TEMPFAIL,
                    "the MTA did not answer in time".to_string(),
                ));
            }
        };
        let _ = writer.join();
        if out.status.success() {
            return Ok(());
        }
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        Err(refused(
            out.status
                .code()
                .filter(|&c| c > 0 && c < 126)
                .unwrap_or(exit::TEMPFAIL),
            format!("the MTA refused the message ({}): {last}", out.status),
        ))
    }
}
