//! `corral run` on a running sandbox: the steps of the full CLI's
//! `cmd/run.rs` up to `via_init::run_fast`, in the same order, without the
//! standard library. Every case the fast path does not take, and every
//! error before the init has the command, is [`Declined`]: then nothing was
//! started, what this program took (an entry slot, the signal mask) is
//! given back, and the full CLI answers from the start with its own
//! messages and exit statuses.

use crate::wire::{self, ProcAttrs, Reply, Request, RunRequest};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use rustix::fd::OwnedFd;
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

/// Not for the fast path: the full CLI runs instead.
pub struct Declined;

/// The signals passed on to the command (forward::FORWARDED): INT, TERM,
/// HUP, QUIT, USR1, USR2.
const FORWARDED: [i32; 6] = [2, 15, 1, 3, 10, 12];

/// The environment as the kernel gave it.
pub struct Env<'a>(pub Vec<&'a [u8]>);

impl<'a> Env<'a> {
    /// A variable's value; as the standard library splits an entry (at the
    /// first `=` after its first byte; entries without one are skipped).
    pub fn get(&self, name: &str) -> Option<&'a [u8]> {
        self.pairs()
            .find(|(k, _)| *k == name.as_bytes())
            .map(|(_, v)| v)
    }

    fn pairs(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + '_ {
        self.0.iter().filter_map(|e| {
            let i = e.iter().skip(1).position(|&b| b == b'=')? + 1;
            Some((&e[..i], &e[i + 1..]))
        })
    }

    /// The variables whose name and value are UTF-8, the others left out
    /// (as the full CLI's `via_init::caller_env`: the protocol's strings).
    fn utf8(&self) -> Vec<(&'a str, &'a str)> {
        self.pairs()
            .filter_map(|(k, v)| {
                Some((core::str::from_utf8(k).ok()?, core::str::from_utf8(v).ok()?))
            })
            .collect()
    }
}

/// `--env NAME=VALUE` values as pairs (the full CLI's rule, shared).
fn parse_env(v: &[String]) -> Result<Vec<(String, String)>, Declined> {
    crate::runline::env_pairs(v).map_err(|_| Declined)
}

/// The command line `args` (argv[0] left out) answered on the fast path:
/// the command's exit status once the init had it.
pub fn answer(args: &[&str], env: &Env) -> Result<i32, Declined> {
    let args = crate::runline::run_command_args(args).ok_or(Declined)?;
    let line = crate::runline::RunLine::parse(&args, |v| env.get(v).map(<[u8]>::to_vec))
        .ok_or(Declined)?;
    if line.detach || line.preserve_fds > 0 || !crate::name::is_user_name(&line.tenant) {
        return Err(Declined);
    }
    // A suspension record, or one that cannot be checked: the full CLI says.
    let record = format!("{}/suspended/{}.json", line.config_dir, line.tenant);
    match rustix::fs::access(record.as_str(), rustix::fs::Access::EXISTS) {
        Err(Errno::NOENT) => {}
        _ => return Err(Declined),
    }
    let extra_env = parse_env(&line.env)?;
    // As the full CLI: nothing the caller leaked reaches the tenant.
    crate::sys::close_from(3).map_err(|_| Declined)?;
    // fastrun::wants_setns: a terminal on stdin, or CORRAL_RUN_SETNS.
    if rustix::termios::isatty(crate::sys::stdio(0)) || env.get("CORRAL_RUN_SETNS").is_some() {
        return Err(Declined);
    }
    let dir = format!("{}/tenants/{}", line.state_dir, line.tenant);
    let _slot = entry_slot(&dir)?;
    let request = wire::encode(&Request::Run(RunRequest {
        argv: &line.command,
        caller_env: env.utf8(),
        extra_env: &extra_env,
        cwd: line.cwd.as_deref(),
        nfds: 3,
        attrs: Some(attributes()),
    }));
    let signals = Blocked::start()?;
    let sock = connect(&format!("{dir}/control.sock"))?;
    send(&sock, &request, true).map_err(|_| Declined)?;
    let code = converse(&sock, &signals)?;
    // The command has ended and the program ends next: the forwarded
    // signals stay blocked to the end (a signal that came after the last
    // read would otherwise take its default action between unblocking and
    // exit, and end this program with it instead of the command's status).
    core::mem::forget(signals);
    Ok(code)
}

/// An entry slot when limits.json sets `entry_processes`
/// (corral_limits::EntrySlots::try_acquire: slot.N files under `entry`,
/// one flock each, the search starting at a pid-dependent slot among the
/// first 32). Declined when the sandbox is not up (no limits.json), and
/// when every slot is taken: the full CLI then counts the rejection and
/// says so. The slot is held while the returned fd is open (to exit).
fn entry_slot(dir: &str) -> Result<Option<OwnedFd>, Declined> {
    let limits = read_file(&format!("{dir}/limits.json")).ok_or(Declined)?;
    let v: serde_json::Value = serde_json::from_slice(&limits).map_err(|_| Declined)?;
    let limit = match v.get("entry_processes") {
        Some(serde_json::Value::Null) | None => return Ok(None),
        Some(n) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|&n| n > 0),
    }
    .ok_or(Declined)?;
    let entry = format!("{dir}/entry");
    match rustix::fs::mkdir(entry.as_str(), Mode::from_raw_mode(0o700)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(_) => return Err(Declined),
    }
    // The pid and this stack's random address spread concurrent entries
    // over the window (the full CLI uses the pid and the clock).
    let here = 0u8;
    let seed = rustix::process::getpid().as_raw_nonzero().get() as u32
        ^ ((&here as *const u8 as usize) >> 4) as u32;
    let start = seed % limit.min(32);
    for _pass in 0..2 {
        for k in 0..limit {
            let path = format!("{entry}/slot.{}", (start + k) % limit);
            let fd = rustix::fs::open(
                path.as_str(),
                OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            )
            .map_err(|_| Declined)?;
            match rustix::fs::flock(&fd, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => return Ok(Some(fd)),
                Err(Errno::WOULDBLOCK) | Err(Errno::INTR) => {}
                Err(_) => return Err(Declined),
            }
        }
    }
    Err(Declined)
}

fn read_file(path: &str) -> Option<Vec<u8>> {
    let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let mut out = Vec::with_capacity(4096);
    loop {
        let len = out.len();
        out.resize(len + 4096, 0);
        match rustix::io::read(&fd, &mut out[len..]) {
            Ok(0) => {
                out.truncate(len);
                return Some(out);
            }
            Ok(n) => out.truncate(len + n),
            Err(Errno::INTR) => out.truncate(len),
            Err(_) => return None,
        }
    }
}

/// proto::ProcAttrs::of_self.
fn attributes() -> ProcAttrs {
    let cpus = rustix::thread::sched_getaffinity(None)
        .map(|set| {
            (0..rustix::thread::CpuSet::MAX_CPU as u32)
                .filter(|&c| set.is_set(c as usize))
                .collect()
        })
        .unwrap_or_default();
    ProcAttrs {
        cpus,
        nice: rustix::process::getpriority_process(None).unwrap_or(0),
        ioprio: crate::sys::ioprio().ok(),
    }
}

/// forward::Blocked: the forwarded signals blocked and read from a
/// signalfd while the command runs; the mask comes back on drop (before
/// the full CLI is exec'd, which would inherit it).
struct Blocked {
    fd: OwnedFd,
    previous: crate::sys::SigSet,
}

impl Blocked {
    fn start() -> Result<Blocked, Declined> {
        let set = crate::sys::sigset(&FORWARDED);
        let previous = crate::sys::block(set).map_err(|_| Declined)?;
        match crate::sys::signalfd(set) {
            Ok(fd) => Ok(Blocked { fd, previous }),
            Err(_) => {
                crate::sys::set_mask(previous);
                Err(Declined)
            }
        }
    }

    /// The signals received since the last call (signalfd_siginfo is 128
    /// bytes, ssi_signo its first u32).
    fn pending(&self) -> Vec<i32> {
        let mut out = Vec::new();
        let mut info = [0u8; 128];
        while let Ok(128) = rustix::io::read(&self.fd, &mut info) {
            out.push(u32::from_ne_bytes([info[0], info[1], info[2], info[3]]) as i32);
        }
        out
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        let _ = self.pending();
        crate::sys::set_mask(self.previous);
    }
}

/// The init's control socket: declined when nothing listens (not up).
fn connect(path: &str) -> Result<OwnedFd, Declined> {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let addr = SocketAddrUnix::new(path).map_err(|_| Declined)?;
    let fd = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|_| Declined)?;
    rustix::net::connect(&fd, &addr).map_err(|_| Declined)?;
    Ok(fd)
}

/// One packet, with this process's stdin, stdout and stderr attached when
/// `stdio`.
fn send(sock: &OwnedFd, body: &[u8], stdio: bool) -> Result<(), Errno> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let iov = [rustix::io::IoSlice::new(body)];
    let fds = [
        crate::sys::stdio(0),
        crate::sys::stdio(1),
        crate::sys::stdio(2),
    ];
    let mut space = [core::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if stdio && !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(Errno::NOBUFS);
    }
    rustix::net::sendmsg(sock, &iov, &mut control, SendFlags::NOSIGNAL)?;
    Ok(())
}

/// Forward signals and wait for the end (via_init's `converse`).
fn converse(sock: &OwnedFd, signals: &Blocked) -> Result<i32, Declined> {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut first = true;
    let mut buf = alloc::vec![0u8; 32 * 1024];
    loop {
        let mut fds = [
            PollFd::new(&signals.fd, PollFlags::IN),
            PollFd::new(sock, PollFlags::IN),
        ];
        match poll(&mut fds, None) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(e) => gone(e),
        }
        let (sig_ready, sock_ready) = (!fds[0].revents().is_empty(), !fds[1].revents().is_empty());
        if sig_ready {
            for signal in signals.pending() {
                let _ = send(
                    sock,
                    &wire::encode(&Request::Signal { pid: 0, signal }),
                    false,
                );
            }
        }
        if sock_ready {
            let was_first = core::mem::replace(&mut first, false);
            let n = loop {
                match rustix::net::recv(sock, &mut buf[..], rustix::net::RecvFlags::TRUNC) {
                    Ok((0, _)) => gone(Errno::CONNRESET),
                    Ok((_, n)) if n > buf.len() => gone(Errno::MSGSIZE),
                    Ok((n, _)) => break n,
                    Err(Errno::INTR) => {}
                    Err(e) => gone(e),
                }
            };
            match wire::decode(&buf[..n]) {
                Some(Reply::Exited(code)) => return Ok(code),
                // Nothing ran: the full CLI asks again and reports it.
                Some(Reply::NotStarted) => return Err(Declined),
                Some(Reply::Other { error: true }) if was_first => return Err(Declined),
                Some(Reply::Other { .. }) => {}
                None => gone(Errno::PROTO),
            }
        }
    }
}

/// The init went away while the command was its (JoinError::InitGone).
fn gone(e: Errno) -> ! {
    let what = match e {
        Errno::CONNRESET => "ECONNRESET: Connection reset by peer",
        Errno::MSGSIZE => "EMSGSIZE: Message too long",
        Errno::PROTO => "EPROTO: Protocol error",
        _ => "",
    };
    if what.is_empty() {
        crate::out::say(format_args!(
            "the tenant init went away: errno {}",
            e.raw_os_error()
        ));
    } else {
        crate::out::say(format_args!("the tenant init went away: {what}"));
    }
    crate::sys::exit(125)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_is_split_as_the_standard_library_splits_it() {
        let env = Env(alloc::vec![
            &b"A=1"[..],
            b"=B=2",
            b"NOEQUALS",
            b"C==3",
            b"A=again"
        ]);
        assert_eq!(env.get("A"), Some(&b"1"[..]), "the first one counts");
        assert_eq!(env.get("=B"), Some(&b"2"[..]));
        assert_eq!(env.get("C"), Some(&b"=3"[..]));
        assert_eq!(env.get("NOEQUALS"), None);
        let all = env.utf8();
        assert_eq!(all, [("A", "1"), ("=B", "2"), ("C", "=3"), ("A", "again")]);
        let env = Env(alloc::vec![&b"X=\xff"[..], b"\xfe=1", b"Y=2"]);
        assert_eq!(env.utf8(), [("Y", "2")], "only UTF-8 goes to the init");
    }

    #[test]
    fn env_options_need_a_name() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let ok = parse_env(&v(&["A=1", "B==2", "C="])).ok().unwrap();
        assert_eq!(ok[1], ("B".to_string(), "=2".to_string()));
        assert_eq!(ok[2], ("C".to_string(), String::new()));
        assert!(parse_env(&v(&["=1"])).is_err());
        assert!(parse_env(&v(&["NOVALUE"])).is_err());
    }

    /// Lines the fast path does not take are declined before anything is
    /// done (these return before the fds are closed).
    #[test]
    fn other_lines_are_declined_untouched() {
        let env = Env(alloc::vec![&b"PATH=/bin"[..]]);
        for line in [
            &["ls"][..],
            &["run", "t1"],
            &["run", "--help"],
            &["run", "t1", "--detach", "--", "true"],
            &["run", "--preserve-fds", "1", "t1", "--", "true"],
            &["run", "Bad/Name", "--", "true"],
            &["run", "../t1", "--", "true"],
        ] {
            assert!(answer(line, &env).is_err(), "{line:?}");
        }
    }

    fn scratch(name: &str) -> String {
        let d = std::env::temp_dir().join(alloc::format!(
            "corral-front-test-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d.to_str().unwrap().to_string()
    }

    #[test]
    fn entry_slots_follow_limits_json() {
        let dir = scratch("slots");
        assert!(entry_slot(&dir).is_err(), "no limits.json: not up");
        std::fs::write(
            alloc::format!("{dir}/limits.json"),
            "{\"entry_processes\":null}",
        )
        .unwrap();
        assert!(matches!(entry_slot(&dir), Ok(None)), "no limit, no slot");
        std::fs::write(
            alloc::format!("{dir}/limits.json"),
            "{\"entry_processes\":2}",
        )
        .unwrap();
        let a = entry_slot(&dir).ok().unwrap().expect("a slot");
        let b = entry_slot(&dir).ok().unwrap().expect("the other slot");
        assert!(entry_slot(&dir).is_err(), "both taken: declined");
        let mode = std::fs::metadata(alloc::format!("{dir}/entry")).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
            0o700
        );
        drop(a);
        assert!(entry_slot(&dir).ok().unwrap().is_some(), "a freed slot");
        drop(b);
        for bad in ["{\"entry_processes\":0}", "{\"entry_processes\":-1}", "[]x"] {
            std::fs::write(alloc::format!("{dir}/limits.json"), bad).unwrap();
            assert!(entry_slot(&dir).is_err(), "{bad}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn attributes_are_this_processs() {
        let a = attributes();
        assert!(!a.cpus.is_empty());
        assert_eq!(a.nice, nice_of_self());
    }

    /// This process's nice value as /proc says it.
    fn nice_of_self() -> i32 {
        let s = std::fs::read_to_string("/proc/self/stat").unwrap();
        let after = &s[s.rfind(')').unwrap() + 2..];
        after.split(' ').nth(16).unwrap().parse().unwrap()
    }
}
