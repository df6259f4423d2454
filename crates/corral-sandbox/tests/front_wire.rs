//! The lean `corral` program (crates/corral-front, without the standard
//! library) writes the init's protocol out by hand: its requests must be
//! what `proto` decodes, and it must read `proto`'s replies as the full CLI
//! does. Its wire module is included here as it is.
extern crate alloc;

#[allow(dead_code)]
#[path = "../../corral-front/src/wire.rs"]
mod wire;

use corral_sandbox::proto::{self, ProcAttrs, Reply, Request, RunRequest, Step};

#[test]
fn the_fronts_requests_are_protos() {
    let argv = vec!["/bin/sh".to_string(), "-c".into(), "echo \"hi\" ü".into()];
    let extra = vec![("A".to_string(), "1=2".to_string())];
    let body = wire::encode(&wire::Request::Run(wire::RunRequest {
        argv: &argv,
        caller_env: vec![("PATH", "/bin"), ("=X", "")],
        extra_env: &extra,
        cwd: Some("/w"),
        nfds: 3,
        attrs: Some(wire::ProcAttrs {
            cpus: vec![0, 1],
            nice: 5,
            ioprio: Some(0x4007),
        }),
    }));
    let expected = Request::Run(RunRequest {
        argv: argv.clone(),
        caller_env: vec![("PATH".into(), "/bin".into()), ("=X".into(), String::new())],
        extra_env: extra.clone(),
        cwd: Some("/w".into()),
        nfds: 3,
        attrs: Some(ProcAttrs {
            cpus: vec![0, 1],
            nice: 5,
            ioprio: Some(0x4007),
        }),
    });
    assert_eq!(proto::decode::<Request>(&body).unwrap(), expected);
    let none = wire::encode(&wire::Request::Run(wire::RunRequest {
        argv: &argv,
        caller_env: vec![],
        extra_env: &[],
        cwd: None,
        nfds: 3,
        attrs: None,
    }));
    let Request::Run(r) = proto::decode::<Request>(&none).unwrap() else {
        panic!("a Run request")
    };
    assert_eq!((r.cwd, r.attrs), (None, None));
    let sig = wire::encode(&wire::Request::Signal { pid: 0, signal: 2 });
    assert_eq!(
        proto::decode::<Request>(&sig).unwrap(),
        Request::Signal { pid: 0, signal: 2 }
    );
}

#[test]
fn protos_replies_read_as_the_full_cli_reads_them() {
    let read = |r: Reply| wire::decode(&proto::encode(&r));
    let exited = |code, signal| Reply::Exited {
        pid: 3,
        code,
        signal,
        timed_out: false,
    };
    assert_eq!(read(exited(Some(0), None)), Some(wire::Reply::Exited(0)));
    assert_eq!(read(exited(Some(42), None)), Some(wire::Reply::Exited(42)));
    assert_eq!(read(exited(None, Some(15))), Some(wire::Reply::Exited(143)));
    assert_eq!(read(exited(None, None)), Some(wire::Reply::Exited(128)));
    assert_eq!(
        read(Reply::Failed {
            step: Step::Resolve,
            errno: 2
        }),
        Some(wire::Reply::NotStarted)
    );
    assert_eq!(
        read(Reply::Error {
            message: "refused".into()
        }),
        Some(wire::Reply::Other { error: true })
    );
    assert_eq!(
        read(Reply::Spawned { pid: 4 }),
        Some(wire::Reply::Other { error: false })
    );
}
