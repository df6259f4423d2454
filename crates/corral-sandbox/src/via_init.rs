//! `corral run` through the tenant init's control socket: the command is a
//! spawn of the init, born inside every namespace and the cgroup already,
//! with the seccomp filter inherited: no cgroup migration, no setns, no
//! filter compilation in this process. Measured faster than the setns join
//! ([`crate::join::run`]), so `corral run` takes it unless it needs the
//! caller's terminal as a controlling terminal or extra fds.

use crate::client::Client;
use crate::forward::Blocked;
use crate::join::{entry, entry_slot, JoinError, RunOptions, Target};
use crate::proto::{Reply, Request, RunRequest};
use crate::spawn::SpawnError;
use crate::state::Layout;
use corral_limits::Limits;
use nix::errno::Errno;

/// Run a command as a spawn of the loaded tenant's init, with this
/// process's stdin/stdout/stderr, and wait for it; returns its exit status
/// as a shell reports it. [`run_fast`] does the same without loading the
/// target first.
pub fn run_via_init(layout: &Layout, t: &Target, opts: &RunOptions) -> Result<i32, JoinError> {
    let _slot = entry(layout, t)?;
    let ready = Ready::new(opts)?;
    let client = connect(layout, &t.state.tenant)?;
    ready.converse(&client, opts)
}

/// `corral run` on a running sandbox without loading its state or plan:
/// take an entry slot (the limit from limits.json, which `corral limits
/// set` keeps current), get everything ready, then connect to the init's
/// control socket (it accepts only while the init lives) and send a
/// [`Request::Run`] at once, for which the init applies the profile's
/// environment rules and workdir itself. Saves reading and parsing
/// state.json and plan.json and the /proc check on every run. Connecting
/// last wakes the init only when its request is one system call away: it
/// reads the request in the wake-up that accepts it instead of waking a
/// second time for it (docs/benchmarks.md, "corral run at the C floor").
///
/// `Ok(None)`: the tenant is not up (no limits.json, or no init listening)
/// and nothing was started; the caller brings it up and takes
/// [`run_via_init`].
pub fn run_fast(
    layout: &Layout,
    tenant: &str,
    opts: &RunOptions,
) -> Result<Option<i32>, JoinError> {
    let dir = layout.tenant(tenant);
    let Ok(raw) = std::fs::read(dir.limits()) else {
        return Ok(None);
    };
    let Ok(limits) = serde_json::from_slice::<Limits>(&raw) else {
        return Ok(None);
    };
    let _slot = entry_slot(layout, tenant, limits.entry_processes)?;
    let ready = Ready::new(opts)?;
    let Ok(client) = Client::connect(&dir.control()) else {
        return Ok(None);
    };
    ready.converse(&client, opts).map(Some)
}

fn connect(layout: &Layout, tenant: &str) -> Result<Client, JoinError> {
    let path = layout.tenant(tenant).control();
    Client::connect(&path).map_err(|errno| JoinError::Connect { path, errno })
}

/// The `Run` request for `opts`: the init derives the environment (from
/// the caller's, filtered by the profile) and the working directory.
pub fn run_request(opts: &RunOptions, caller_env: Vec<(String, String)>) -> Request {
    Request::Run(RunRequest {
        argv: opts.argv.clone(),
        caller_env,
        extra_env: opts.env.clone(),
        cwd: opts.cwd.clone(),
        nfds: 3,
        // The command runs with this process's affinity, nice value and
        // I/O priority, as a child of it would (docs/architecture.md).
        attrs: Some(crate::proto::ProcAttrs::of_self()),
    })
}

/// This process's environment for a `Run` request: the variables whose
/// name and value are UTF-8 (the protocol's strings; `std::env::vars`
/// would panic on any other). The lean `corral` does the same.
fn caller_env() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// A foreground `Run` request ready to go: the forwarded signals caught
/// from now on, the request encoded.
struct Ready {
    forwarding: Blocked,
    request: Vec<u8>,
}

impl Ready {
    /// `corral run` has one thread: the forwarded signals are blocked and
    /// read from a signalfd ([`Blocked`]).
    fn new(opts: &RunOptions) -> Result<Ready, JoinError> {
        let forwarding = Blocked::start().map_err(|errno| JoinError::Sys {
            what: "signalfd",
            errno,
        })?;
        let request = crate::proto::encode(&run_request(opts, caller_env()));
        Ok(Ready {
            forwarding,
            request,
        })
    }

    /// Send the request with this process's stdio, forward signals, and
    /// wait for its end.
    fn converse(self, client: &Client, opts: &RunOptions) -> Result<i32, JoinError> {
        let sys = |what| move |errno| JoinError::Sys { what, errno };
        // Unannounced: the init's only answer is the end (Exited), or Failed
        // when the command could not be started.
        client
            .send_encoded(&self.request, &[0, 1, 2])
            .map_err(sys("send the run request"))?;
        let mut first = true;
        // SAFETY: the client's socket outlives this function's polls.
        let client_fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(client.fd()) };
        loop {
            let mut fds = [
                nix::poll::PollFd::new(self.forwarding.fd(), nix::poll::PollFlags::POLLIN),
                nix::poll::PollFd::new(client_fd, nix::poll::PollFlags::POLLIN),
            ];
            match nix::poll::poll(&mut fds, nix::poll::PollTimeout::NONE) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(e) => return Err(sys("poll")(e)),
            }
            if fds[0].revents().is_some_and(|r| !r.is_empty()) {
                for signal in self.forwarding.pending() {
                    let _ = client.send(&Request::Signal { pid: 0, signal }, &[]);
                }
            }
            if fds[1].revents().is_some_and(|r| !r.is_empty()) {
                let reply = client.recv();
                let was_first = std::mem::replace(&mut first, false);
                match reply {
                    Ok(Reply::Exited { code: Some(c), .. }) => return Ok(c),
                    Ok(Reply::Exited {
                        signal: Some(s), ..
                    }) => return Ok(128 + s),
                    Ok(Reply::Exited { .. }) => return Ok(128),
                    Ok(Reply::Failed { step, errno }) => {
                        return Err(SpawnError::from_reply(&opts.argv, step, errno).into())
                    }
                    // Replies come in order: an error before anything else
                    // answers the request itself.
                    Ok(Reply::Error { message }) if was_first => {
                        return Err(JoinError::Refused { message })
                    }
                    Ok(_) => {} // answers to Signal requests
                    Err(e) => return Err(JoinError::InitGone(e)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{self, Reply, Request};
    use corral_security::Step;
    use nix::sys::socket::{
        accept, bind, listen, recv, send, socket, AddressFamily, Backlog, MsgFlags, SockFlag,
        SockType, UnixAddr,
    };
    use std::os::fd::AsRawFd;

    /// A stand-in init on the tenant's control socket: takes one request,
    /// hands it to the caller's thread, answers `reply`.
    fn fake_init(layout: &Layout, tenant: &str, reply: Reply) -> std::thread::JoinHandle<Request> {
        let path = layout.tenant(tenant).control();
        let fd = socket(
            AddressFamily::Unix,
            SockType::SeqPacket,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .unwrap();
        bind(fd.as_raw_fd(), &UnixAddr::new(&path).unwrap()).unwrap();
        listen(&fd, Backlog::new(1).unwrap()).unwrap();
        std::thread::spawn(move || {
            let c = accept(fd.as_raw_fd()).unwrap();
            let mut buf = vec![0u8; proto::MAX_MESSAGE];
            let n = recv(c, &mut buf, MsgFlags::empty()).unwrap();
            let req: Request = proto::decode(&buf[..n]).unwrap();
            send(c, &proto::encode(&reply), MsgFlags::empty()).unwrap();
            nix::unistd::close(c).unwrap();
            req
        })
    }

    fn opts() -> RunOptions {
        RunOptions {
            argv: vec!["/bin/true".into()],
            cwd: None,
            env: vec![("EXTRA".into(), "1".into())],
            preserve_fds: 0,
        }
    }

    #[test]
    fn run_fast_applies_only_to_a_running_init() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let t = "fast";
        std::fs::create_dir_all(layout.tenant(t).dir.clone()).unwrap();
        assert!(
            run_fast(&layout, t, &opts()).unwrap().is_none(),
            "no limits.json: not up"
        );
        std::fs::write(
            layout.tenant(t).limits(),
            serde_json::to_vec(&Limits::default()).unwrap(),
        )
        .unwrap();
        assert!(
            run_fast(&layout, t, &opts()).unwrap().is_none(),
            "no init listening"
        );

        // A running init: the request is a Run, its answer the command's
        // exit status.
        let init = fake_init(
            &layout,
            t,
            Reply::Exited {
                pid: 2,
                code: Some(7),
                signal: None,
                timed_out: false,
            },
        );
        assert_eq!(run_fast(&layout, t, &opts()).unwrap(), Some(7));
        let Request::Run(req) = init.join().unwrap() else {
            panic!("expected a Run request")
        };
        assert_eq!(req.argv, ["/bin/true"]);
        assert_eq!(req.extra_env, [("EXTRA".to_string(), "1".to_string())]);
        assert_eq!(req.cwd, None, "the init picks the profile's workdir");
        assert_eq!(req.nfds, 3);
        assert!(
            req.caller_env.iter().any(|(k, _)| k == "PATH"),
            "the caller's environment goes to the init, which filters it"
        );
        std::fs::remove_file(layout.tenant(t).control()).unwrap();
        let init = fake_init(
            &layout,
            t,
            Reply::Exited {
                pid: 2,
                code: None,
                signal: Some(9),
                timed_out: false,
            },
        );
        assert_eq!(run_fast(&layout, t, &opts()).unwrap(), Some(128 + 9));
        init.join().unwrap();
        std::fs::remove_file(layout.tenant(t).control()).unwrap();

        // An init that refuses the request: an error, not a silent retry.
        let init = fake_init(
            &layout,
            t,
            Reply::Error {
                message: "bad request".into(),
            },
        );
        assert!(matches!(
            run_fast(&layout, t, &opts()),
            Err(JoinError::Refused { message }) if message == "bad request"
        ));
        init.join().unwrap();
        std::fs::remove_file(layout.tenant(t).control()).unwrap();

        // A command the init could not start: the typed step comes back.
        let init = fake_init(
            &layout,
            t,
            Reply::Failed {
                step: Step::Resolve,
                errno: libc::ENOENT,
            },
        );
        match run_fast(&layout, t, &opts()) {
            Err(JoinError::Spawn(e @ SpawnError::NotFound(_))) => {
                assert_eq!(e.exit_code(), 127);
                assert_eq!(e.to_string(), "/bin/true: command not found in the sandbox");
            }
            other => panic!("expected NotFound, got {other:?}"),
        }
        init.join().unwrap();
        std::fs::remove_file(layout.tenant(t).control()).unwrap();
        let init = fake_init(
            &layout,
            t,
            Reply::Failed {
                step: Step::Chdir,
                errno: libc::EACCES,
            },
        );
        match run_fast(&layout, t, &opts()) {
            Err(JoinError::Spawn(e)) => {
                assert_eq!(e.exit_code(), 125);
                assert_eq!(e.to_string(), "change directory: EACCES: Permission denied");
            }
            other => panic!("expected a failed start, got {other:?}"),
        }
        init.join().unwrap();
    }
}
