//! `corral-sendmail`: what a sandbox has as `/usr/sbin/sendmail`. Reads the
//! message from stdin and hands it, with its command line, to the broker.

use crate::args;
use crate::proto::{exit, Reply, Request, MAX_LINE, MAX_MESSAGE};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

/// Where the broker's socket is inside a sandbox (the profile binds the
/// host's socket directory there; docs/access.md).
pub const SOCKET: &str = "/run/corral-mail/sendmail.sock";

/// The message as sendmail reads it: up to end of input, or without `-i`
/// up to a line holding a single dot.
pub fn message_from(input: &[u8], ignore_dots: bool) -> &[u8] {
    if ignore_dots {
        return input;
    }
    let mut start = 0;
    for line in input.split_inclusive(|&b| b == b'\n') {
        if line == b".\n" || line == b".\r\n" || line == b"." {
            return &input[..start];
        }
        start += line.len();
    }
    input
}

/// Returns the exit status.
pub fn main(args: &[String], socket: &Path) -> i32 {
    match send(args, socket) {
        Ok(()) => 0,
        Err((status, reason)) => {
            eprintln!("sendmail: {reason}");
            status
        }
    }
}

fn send(args: &[String], socket: &Path) -> Result<(), (i32, String)> {
    let sub = args::parse(args).map_err(|e| (e.status(), e.0))?;
    let mut input = Vec::new();
    std::io::stdin()
        .take(MAX_MESSAGE as u64 + 1)
        .read_to_end(&mut input)
        .map_err(|e| (exit::SOFTWARE, format!("read the message: {e}")))?;
    if input.len() > MAX_MESSAGE {
        return Err((
            exit::DATAERR,
            format!("message larger than {} MiB", MAX_MESSAGE >> 20),
        ));
    }
    let msg = message_from(&input, sub.ignore_dots);
    let mut s = UnixStream::connect(socket).map_err(|e| {
        (
            exit::UNAVAILABLE,
            format!(
                "the mail broker is not reachable at {}: {e}",
                socket.display()
            ),
        )
    })?;
    let io = |e: std::io::Error| (exit::TEMPFAIL, format!("talking to the mail broker: {e}"));
    let mut line = serde_json::to_vec(&Request {
        args: args.to_vec(),
    })
    .expect("a request serializes");
    line.push(b'\n');
    s.write_all(&line).map_err(io)?;
    s.write_all(msg).map_err(io)?;
    s.shutdown(std::net::Shutdown::Write).map_err(io)?;
    let mut reply = String::new();
    BufReader::new(s)
        .take(MAX_LINE as u64)
        .read_line(&mut reply)
        .map_err(io)?;
    match serde_json::from_str::<Reply>(&reply) {
        Ok(Reply::Accepted) => Ok(()),
        Ok(Reply::Refused { status, reason }) => Err((status, reason)),
        Err(_) => Err((exit::TEMPFAIL, "the mail broker gave no answer".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dot_line_ends_the_message_without_i() {
        let m = b"Subject: x\n\nbody\n.\nafter\n";
        assert_eq!(message_from(m, false), b"Subject: x\n\nbody\n");
        assert_eq!(message_from(m, true), m);
        assert_eq!(message_from(b"a\n..\nb\n", false), b"a\n..\nb\n");
        assert_eq!(message_from(b"a\r\n.\r\n", false), b"a\r\n");
    }
}
