//! `corral gateway` behind a real nginx, and `corral cgi`, for real (as
//! root). Every test starts its own gateway and nginx (127.0.0.1, a free
//! port, a temp prefix), writes its scripts into the test tenants' homes
//! and removes everything again, also when it fails.
//!
//! The leak test makes 20,000 requests; set CORRAL_GATEWAY_LEAK_REQUESTS
//! (e.g. 100000) for a longer run.

mod common;

use common::*;
use gw::*;
use std::time::{Duration, Instant};

const ENV_CGI: &str = r#"#!/bin/sh
printf 'Content-Type: text/plain\r\nX-Script: env\r\n\r\n'
echo "uid=$(id -u)"
echo "method=$REQUEST_METHOD"
echo "query=$QUERY_STRING"
echo "x_test=$HTTP_X_TEST"
echo "proxy=$HTTP_PROXY"
echo "gateway=$GATEWAY_INTERFACE"
echo "cwd=$(pwd)"
echo "path=$PATH"
"#;

const ECHO_CGI: &str = r#"#!/bin/sh
sum=$(sha256sum | cut -d' ' -f1)
printf 'Content-Type: text/plain\n\n'
echo "len=$CONTENT_LENGTH"
echo "sum=$sum"
"#;

#[test]
fn get_post_status_redirects_and_large_responses() {
    let s = Stack::start(&[], 30);
    s.script(T1, "env.cgi", ENV_CGI);
    s.script(T1, "echo.cgi", ECHO_CGI);
    s.script(T1, "status.cgi", "#!/bin/sh\nprintf 'Status: 418 Short And Stout\\r\\nContent-Type: text/plain\\r\\n\\r\\nteapot\\n'\n");
    s.script(
        T1,
        "away.cgi",
        "#!/bin/sh\nprintf 'Location: http://example.com/there\\n\\n'\n",
    );
    s.script(
        T1,
        "local.cgi",
        "#!/bin/sh\nprintf 'Location: /elsewhere?x=1\\n\\n'\n",
    );
    s.script(T1, "big.cgi", "#!/bin/sh\nprintf 'Content-Type: application/octet-stream\\n\\n'\nhead -c 10485760 /dev/zero\n");

    let r = s.get(
        &format!("/~{T1}/env.cgi?a=1&b=two"),
        &[("X-Test", "yes"), ("Proxy", "http://evil:1")],
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-script"), Some("env"));
    let b = r.text();
    assert!(b.contains(&format!("uid={}", uid_of(T1))), "{b}");
    for want in [
        "method=GET",
        "query=a=1&b=two",
        "x_test=yes",
        "proxy=\n",
        "gateway=CGI/1.1",
        "path=/usr/local/bin:/usr/bin:/bin",
    ] {
        assert!(b.contains(want), "{want:?} in {b}");
    }
    assert!(
        b.contains(&format!("cwd={}", s.dir(T1).display())),
        "cwd is the script's directory: {b}"
    );

    // 1 MiB body, streamed to the script and checksummed there.
    let body: Vec<u8> = (0..1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let r = s.request(
        "POST",
        &format!("/~{T1}/echo.cgi"),
        &[("Content-Type", "application/octet-stream")],
        &body,
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.text(),
        format!("len=1048576\nsum={}\n", sha256_hex(&body))
    );

    // A script that answers before reading its body still gets all of it
    // (nginx stops sending the body once a response head arrives: the
    // gateway holds the head until the body has been passed on).
    s.script(T1, "early.cgi", "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n'\necho \"sum=$(sha256sum | cut -d' ' -f1)\"\n");
    let r = s.request("POST", &format!("/~{T1}/early.cgi"), &[], &body);
    assert_eq!(
        (r.status, r.text()),
        (200, format!("sum={}\n", sha256_hex(&body)))
    );

    let r = s.get(&format!("/~{T1}/status.cgi"), &[]);
    assert_eq!((r.status, r.text().as_str()), (418, "teapot\n"), "{r:?}");
    let r = s.get(&format!("/~{T1}/away.cgi"), &[]);
    assert_eq!(r.status, 302);
    assert_eq!(r.header("location"), Some("http://example.com/there"));
    let r = s.get(&format!("/~{T1}/local.cgi"), &[]);
    assert_eq!(r.status, 302);
    assert!(
        r.header("location")
            .is_some_and(|l| l.ends_with("/elsewhere?x=1")),
        "{r:?}"
    );

    // A background process that keeps stdout open does not hold the
    // response until the timeout.
    s.script(
        T1,
        "bg.cgi",
        "#!/bin/sh\n/bin/sleep 20 &\nprintf 'Content-Type: text/plain\\n\\nbg\\n'\n",
    );
    let t = Instant::now();
    let r = s.get(&format!("/~{T1}/bg.cgi"), &[]);
    assert_eq!((r.status, r.text().as_str()), (200, "bg\n"));
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );

    let r = s.get(&format!("/~{T1}/big.cgi"), &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 10 * 1024 * 1024);
    assert!(r.body.iter().all(|&b| b == 0));
}

#[test]
fn bodyless_requests_read_an_empty_stdin_and_a_killed_init_is_replaced() {
    let s = Stack::start(&[], 30);
    s.script(
        T1,
        "stdin.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n'\necho \"stdin=$(wc -c)\"\n",
    );
    // No body: stdin is at its end at once (the script does not wait for
    // the timeout).
    let t = Instant::now();
    let r = s.get(&format!("/~{T1}/stdin.cgi"), &[]);
    assert_eq!((r.status, r.text().as_str()), (200, "stdin=0\n"), "{r:?}");
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );
    let r = s.request("POST", &format!("/~{T1}/stdin.cgi"), &[], b"12345");
    assert_eq!((r.status, r.text().as_str()), (200, "stdin=5\n"), "{r:?}");

    // The gateway caches the sandbox while its init lives; once the init
    // is killed the next request brings up a new one.
    let old = (s.env.init_pid(T1), s.env.state(T1)["init_start"].clone());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(old.0),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || {
            corral_sandbox::state::process_start(old.0).is_none()
        }),
        "init {} gone",
        old.0
    );
    let r = s.get(&format!("/~{T1}/stdin.cgi"), &[]);
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "stdin=0\n"),
        "{r:?}\n{}",
        s.log()
    );
    assert_ne!(
        (s.env.init_pid(T1), s.env.state(T1)["init_start"].clone()),
        old,
        "a new init serves the tenant"
    );
}

#[test]
fn timeouts_crashes_and_stderr() {
    let s = Stack::start(&[], 2);
    s.script(T1, "slow.cgi", "#!/bin/sh\nexec /bin/sleep 30\n");
    s.script(
        T1,
        "crash.cgi",
        "#!/bin/sh\necho 'about to crash' >&2\nkill -SEGV $$\n",
    );
    s.script(T1, "nohead.cgi", "#!/bin/sh\necho 'not a header line'\n");
    s.script(T1, "noisy.cgi", "#!/bin/sh\necho 'warning: disk almost full' >&2\nprintf 'Content-Type: text/plain\\n\\nok\\n'\n");

    let t = Instant::now();
    let r = s.get(&format!("/~{T1}/slow.cgi"), &[]);
    assert_eq!(r.status, 504, "{r:?}");
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );
    // The init killed the script's process group: nothing is left.
    assert!(
        wait_until(Duration::from_secs(5), || in_sandbox(&s.env, T1, "sleep")
            == 0),
        "a sleep survived the timeout"
    );

    let r = s.get(&format!("/~{T1}/crash.cgi"), &[]);
    assert_eq!(r.status, 502, "{r:?}");
    let r = s.get(&format!("/~{T1}/nohead.cgi"), &[]);
    assert_eq!(r.status, 502, "{r:?}");
    let r = s.get(&format!("/~{T1}/noisy.cgi"), &[]);
    assert_eq!((r.status, r.text().as_str()), (200, "ok\n"));

    let log = s.log();
    let script = s.dir(T1).join("noisy.cgi");
    assert!(
        log.contains(&format!(
            "[{T1} {}] stderr: warning: disk almost full",
            script.display()
        )),
        "{log}"
    );
    assert!(log.contains("stderr: about to crash"), "{log}");
    assert!(log.contains("killed by signal 11"), "{log}");
    assert!(log.contains("504") && log.contains("timed out"), "{log}");
}

#[test]
fn five_hundred_concurrent_requests_are_all_correct() {
    let s = Stack::start(
        &[(T1, "[limits]\nentry_processes = 100\nprocesses = 400\n")],
        60,
    );
    s.script(
        T1,
        "q.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n%s\\n' \"$QUERY_STRING\"\n",
    );
    // 500 requests, 50 at a time, each checked (half over kept-alive,
    // multiplexable FastCGI connections).
    let s = std::sync::Arc::new(s);
    let workers: Vec<_> = (0..50)
        .map(|w| {
            let s = s.clone();
            std::thread::spawn(move || {
                for i in 0..10 {
                    let q = format!("w{w}-r{i}");
                    let prefix = if (w + i) % 2 == 0 { "" } else { "/k" };
                    let r = s.get(&format!("{prefix}/~{T1}/q.cgi?{q}"), &[]);
                    assert_eq!((r.status, r.text()), (200, format!("{q}\n")));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a worker saw a wrong answer");
    }
    // And with a load generator, when there is one.
    if let Some(out) = h2load(&s, &format!("/~{T1}/q.cgi?h2load"), 500, 50) {
        assert!(
            out.contains("500 succeeded") && out.contains("500 2xx"),
            "{out}"
        );
    }
    let s = std::sync::Arc::try_unwrap(s)
        .ok()
        .expect("workers are done");
    drop(s);
}

#[test]
fn scripts_run_as_their_owner_and_never_as_another_tenant() {
    let s = Stack::start(&[], 30);
    let id = "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n'; id -u\n";
    s.script(T1, "id.cgi", id);
    s.script(T2, "id.cgi", id);
    assert_eq!(
        s.get(&format!("/~{T1}/id.cgi"), &[]).text().trim(),
        uid_of(T1).to_string()
    );
    assert_eq!(
        s.get(&format!("/~{T2}/id.cgi"), &[]).text().trim(),
        uid_of(T2).to_string()
    );
    // Owned by T2 but lying in T1's home: not T2's file to run, and never T1's.
    let p = s.script(T1, "foreign.cgi", id);
    let t2 = corral_users::Db::system()
        .user_by_name(T2)
        .unwrap()
        .unwrap();
    nix::unistd::chown(&p, Some(t2.uid.into()), Some(t2.gid.into())).unwrap();
    let r = s.get(&format!("/~{T1}/foreign.cgi"), &[]);
    assert_eq!(r.status, 403, "{r:?}");
    assert!(
        s.log().contains("refused by rule \"inside-home\""),
        "{}",
        s.log()
    );
}

#[test]
fn traversal_symlink_escapes_and_unsafe_files_are_refused() {
    let s = Stack::start(&[], 30);
    let ok = "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\nran\\n'\n";
    let target = s.script(T2, "private.cgi", ok);
    s.script(T1, "ok.cgi", ok);
    let d1 = s.dir(T1);
    // SCRIPT_FILENAME straight from the query string (/raw?f=...).
    let raw = |f: &str| s.get(&format!("/raw?f={f}"), &[]);
    assert_eq!(raw(&format!("{}/ok.cgi", d1.display())).status, 200);
    assert_eq!(
        raw(&format!(
            "{}/../{}/ok.cgi",
            d1.display(),
            d1.file_name().unwrap().to_string_lossy()
        ))
        .status,
        403,
        "'..' is refused even when it stays inside"
    );
    assert_eq!(
        raw(&format!(
            "{}/../../{T2}/{}/private.cgi",
            d1.display(),
            s.dir_name()
        ))
        .status,
        403
    );
    assert_eq!(raw("relative/ok.cgi").status, 403);
    // A symlink in T1's home to T2's script, and to a T1-owned file outside the home.
    std::os::unix::fs::symlink(&target, d1.join("to-t2.cgi")).unwrap();
    assert_eq!(s.get(&format!("/~{T1}/to-t2.cgi"), &[]).status, 403);
    let outside = s.tmp.path().join("outside.cgi");
    std::fs::write(&outside, ok).unwrap();
    let t1 = corral_users::Db::system()
        .user_by_name(T1)
        .unwrap()
        .unwrap();
    nix::unistd::chown(&outside, Some(t1.uid.into()), Some(t1.gid.into())).unwrap();
    set_mode(&outside, 0o755);
    std::os::unix::fs::symlink(&outside, d1.join("out.cgi")).unwrap();
    assert_eq!(s.get(&format!("/~{T1}/out.cgi"), &[]).status, 403);
    // A root-owned program reached through a link.
    std::os::unix::fs::symlink("/usr/bin/id", d1.join("root.cgi")).unwrap();
    assert_eq!(s.get(&format!("/~{T1}/root.cgi"), &[]).status, 403);
    // Writable by group, setuid, not executable, missing.
    set_mode(&s.script(T1, "gw.cgi", ok), 0o775);
    set_mode(&s.script(T1, "suid.cgi", ok), 0o4755);
    set_mode(&s.script(T1, "plain.cgi", ok), 0o644);
    for name in ["gw.cgi", "suid.cgi", "plain.cgi"] {
        assert_eq!(s.get(&format!("/~{T1}/{name}"), &[]).status, 403, "{name}");
    }
    assert_eq!(s.get(&format!("/~{T1}/missing.cgi"), &[]).status, 404);
    let log = s.log();
    for rule in [
        "dotdot",
        "absolute-path",
        "inside-home",
        "symlink-escape",
        "min-uid",
        "writable",
        "setid",
        "executable",
        "exists",
    ] {
        assert!(
            log.contains(&format!("refused by rule \"{rule}\"")),
            "rule {rule} logged: {log}"
        );
    }
}

/// Like a CGI forked by fcgiwrap, a script takes the gateway's CPU affinity,
/// nice value and I/O priority (bounded as `corral run`'s are: never a
/// negative nice, never the real-time I/O class), whatever the process that
/// brought the sandbox up had; an unpinned gateway's scripts get the
/// sandbox's defaults.
#[test]
fn scripts_take_the_gateways_affinity_nice_and_io_priority() {
    let script = "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n'\n\
                  grep Cpus_allowed_list /proc/self/status | cut -f2; nice; ionice\n";
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let last = (ncpu - 1).to_string();
    let pinned = Stack::start_under(&[
        "taskset", "-c", &last, "nice", "-n", "6", "ionice", "-c", "1", "-n", "3",
    ]);
    pinned.script(T1, "attrs.cgi", script);
    let r = pinned.get(&format!("/~{T1}/attrs.cgi"), &[]);
    assert_eq!(r.status, 200, "{r:?} {}", pinned.log());
    assert_eq!(
        r.text().lines().collect::<Vec<_>>(),
        [last.as_str(), "6", "best-effort: prio 3"],
        "a gateway pinned to CPU {last}, nice 6, real-time I/O class"
    );
    drop(pinned);
    let plain = Stack::start(&[], 30);
    plain.script(T1, "attrs.cgi", script);
    let all = if ncpu > 1 {
        format!("0-{}", ncpu - 1)
    } else {
        "0".into()
    };
    assert_eq!(
        plain
            .get(&format!("/~{T1}/attrs.cgi"), &[])
            .text()
            .lines()
            .collect::<Vec<_>>(),
        [all.as_str(), "0", "none: prio 0"],
        "an unpinned gateway"
    );
}

#[test]
fn entry_process_limit_answers_508() {
    let s = Stack::start(&[(T3, "[limits]\nentry_processes = 2\n")], 30);
    s.script(
        T3,
        "slow.cgi",
        "#!/bin/sh\nsleep 2\nprintf 'Content-Type: text/plain\\n\\ndone\\n'\n",
    );
    let s = std::sync::Arc::new(s);
    let hs: Vec<_> = (0..3)
        .map(|_| {
            let s = s.clone();
            std::thread::spawn(move || s.get(&format!("/~{T3}/slow.cgi"), &[]).status)
        })
        .collect();
    let mut codes: Vec<u16> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    codes.sort();
    assert_eq!(codes, [200, 200, 508]);
    assert!(s.log().contains("entry-process limit"), "{}", s.log());
}

#[test]
fn no_fd_or_zombie_leaks_after_many_requests() {
    let n: usize = std::env::var("CORRAL_GATEWAY_LEAK_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let s = Stack::start(&[(T1, "[limits]\nentry_processes = 64\n")], 30);
    s.script(
        T1,
        "tiny.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\nok\\n'\n",
    );
    s.script(T1, "err.cgi", "#!/bin/sh\necho oops >&2\nexit 3\n");
    // Warm up (brings the sandbox up), then take the baseline.
    assert_eq!(s.get(&format!("/~{T1}/tiny.cgi"), &[]).status, 200);
    let gw = s.gateway_pid();
    let fds0 = fd_count(gw);
    let init = s.env.init_pid(T1);
    let zombies = || zombies_of(&[gw, init]);
    let z0 = zombies();
    let init_socks0 = sockets_of(init);
    let clients = 10;
    let done = match h2load(&s, &format!("/~{T1}/tiny.cgi"), n, clients) {
        Some(out) => {
            assert!(out.contains(&format!("{n} succeeded")), "{out}");
            n
        }
        None => {
            let m = n.min(2000);
            for _ in 0..m {
                assert_eq!(s.get(&format!("/~{T1}/tiny.cgi"), &[]).status, 200);
            }
            m
        }
    };
    for _ in 0..50 {
        assert_eq!(s.get(&format!("/~{T1}/err.cgi"), &[]).status, 502);
    }
    // The idle connections to the init (the pool) are not leaks: at most
    // Pool::MAX_IDLE of them, on either side. Nor are the entry-slot files
    // the gateway keeps open (SlotPool): one per slot held at once, at most
    // two per client (a slot is freed at the script's exit, which may come
    // after the client has its answer and sent the next request).
    let pooled = corral_gateway::control::Pool::MAX_IDLE;
    let slots = 2 * clients;
    let settled = wait_until(Duration::from_secs(10), || {
        fd_count(gw) <= fds0 + pooled + slots
            && zombies() <= z0
            && sockets_of(init) <= init_socks0 + pooled
    });
    assert!(
        settled,
        "after {done} requests: fds {} (was {fds0}, at most {pooled} + {slots} more), zombies {} (was {z0}), init sockets {} (was {init_socks0})",
        fd_count(gw),
        zombies(),
        sockets_of(init),
    );
}

#[test]
fn requests_reuse_a_kept_connection_to_the_init() {
    let s = Stack::start(&[], 30);
    s.script(
        T1,
        "tiny.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\nok\\n'\n",
    );
    s.script(T1, "err.cgi", "#!/bin/sh\nexit 3\n");
    s.env.ok(&["up", T1]);
    let init = s.env.init_pid(T1);
    // `up` talked to the init too and its connection may still be open for a
    // moment: take the baseline once the count has held still.
    let idle = steady_sockets_of(init);
    assert_eq!(s.get(&format!("/~{T1}/tiny.cgi"), &[]).status, 200);
    // After one request the init holds one socket more, the connection the
    // gateway kept; requests one after another all go over it.
    let after_one = sockets_of(init);
    assert_eq!(after_one, idle + 1, "the gateway keeps its connection");
    for _ in 0..20 {
        let r = s.get(&format!("/~{T1}/tiny.cgi"), &[]);
        assert_eq!((r.status, r.text().as_str()), (200, "ok\n"), "{r:?}");
    }
    assert_eq!(
        sockets_of(init),
        after_one,
        "20 sequential requests opened no new connection to the init"
    );
    // A script that fails (no output: 502) also ends with its Exited: the
    // connection is idle and kept too. (A request that ends without one
    // closes it, which kills the script: timeouts_crashes_and_stderr,
    // fastcgi_multiplexing_aborts_and_client_disconnects.)
    for _ in 0..5 {
        assert_eq!(s.get(&format!("/~{T1}/err.cgi"), &[]).status, 502);
    }
    assert_eq!(sockets_of(init), after_one);
}

#[test]
fn sigterm_drains_in_flight_requests_and_sighup_reloads_the_map() {
    let s = Stack::start_with_map(&[], 30, &format!("[hosts]\n\"site.test\" = \"{T2}\"\n"));
    s.script(
        T1,
        "slow.cgi",
        "#!/bin/sh\nsleep 1\nprintf 'Content-Type: text/plain\\n\\nfinished\\n'\n",
    );
    s.script(
        T1,
        "id.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n'; id -u\n",
    );
    // Mapped to T2, but the script is T1's: refused.
    assert_eq!(
        s.get(&format!("/~{T1}/id.cgi"), &[("Host", "site.test")])
            .status,
        403
    );
    s.write_map(&format!("[hosts]\n\"site.test\" = \"{T1}\"\n"));
    s.signal(nix::sys::signal::Signal::SIGHUP);
    assert!(
        wait_until(Duration::from_secs(5), || s
            .log()
            .contains("SIGHUP: reloaded")),
        "{}",
        s.log()
    );
    let r = s.get(&format!("/~{T1}/id.cgi"), &[("Host", "site.test")]);
    assert_eq!(
        (r.status, r.text().trim().to_string()),
        (200, uid_of(T1).to_string())
    );

    let s = std::sync::Arc::new(s);
    let slow = {
        let s = s.clone();
        std::thread::spawn(move || s.get(&format!("/~{T1}/slow.cgi"), &[]))
    };
    std::thread::sleep(Duration::from_millis(400));
    s.signal(nix::sys::signal::Signal::SIGTERM);
    let r = slow.join().unwrap();
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "finished\n"),
        "the in-flight request completed"
    );
    let mut s = std::sync::Arc::try_unwrap(s)
        .ok()
        .expect("the request thread is done");
    let status = s
        .wait_gateway(Duration::from_secs(10))
        .expect("the gateway exits after draining");
    assert!(status.success(), "{status:?}");
    assert!(!s.socket().exists(), "socket removed");
}

#[test]
fn fastcgi_multiplexing_aborts_and_client_disconnects() {
    let s = Stack::start(&[], 30);
    s.script(
        T1,
        "q.cgi",
        "#!/bin/sh\nsleep 0.2\nprintf 'Content-Type: text/plain\\n\\n%s\\n' \"$QUERY_STRING\"\n",
    );
    let script = s.dir(T1).join("q.cgi");
    let answers = fastcgi_mpx(&s.socket(), &script, &["one", "two", "three"]);
    assert_eq!(answers.len(), 3);
    for (q, out) in ["one", "two", "three"].iter().zip(&answers) {
        assert!(
            out.contains("Status: 200") && out.ends_with(&format!("\r\n\r\n{q}\n")),
            "{q}: {out:?}"
        );
    }
    // Request id 1 over and over on one kept connection, as nginx does.
    s.script(
        T1,
        "fast.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n%s\\n' \"$QUERY_STRING\"\n",
    );
    fastcgi_sequential(&s.socket(), &s.dir(T1).join("fast.cgi"), 300);
    // FCGI_ABORT_REQUEST ends the request at once and kills the script.
    s.script(T1, "sleepy.cgi", "#!/bin/sh\nexec /bin/sleep 60\n");
    let t = Instant::now();
    fastcgi_abort(&s.socket(), &s.dir(T1).join("sleepy.cgi"), || {
        in_sandbox(&s.env, T1, "sleep") == 1
    });
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert!(
        wait_until(Duration::from_secs(5), || in_sandbox(&s.env, T1, "sleep")
            == 0),
        "the aborted script was killed"
    );
    // The client goes away: nginx closes the FastCGI connection, the
    // gateway drops the control connection, the init kills the script.
    {
        use std::io::Write;
        let mut c = std::net::TcpStream::connect(("127.0.0.1", s.port())).unwrap();
        c.write_all(format!("GET /~{T1}/sleepy.cgi HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
            .unwrap();
        assert!(
            wait_until(Duration::from_secs(5), || in_sandbox(&s.env, T1, "sleep")
                == 1),
            "the script started"
        );
    }
    assert!(
        wait_until(Duration::from_secs(5), || in_sandbox(&s.env, T1, "sleep")
            == 0),
        "the script outlived its client"
    );
}

#[test]
fn tcp_listener_honours_fcgi_web_server_addrs() {
    let s = Stack::start(&[], 30);
    let script = s.script(
        T1,
        "fast.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\ntcp\\n'\n",
    );
    for (allowed, served) in [("127.0.0.1, ::1", true), ("127.0.0.2", false)] {
        let port = free_port();
        let log = std::fs::File::create(s.tmp.path().join("tcp.log")).unwrap();
        let mut g = s
            .env
            .cmd()
            .args(["gateway", "--listen", &format!("tcp:127.0.0.1:{port}")])
            .env("FCGI_WEB_SERVER_ADDRS", allowed)
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let up = wait_until(Duration::from_secs(10), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        let answer = up.then(|| {
            fastcgi_once(
                std::net::TcpStream::connect(("127.0.0.1", port)).unwrap(),
                &script,
            )
        });
        stop(
            &mut g,
            nix::sys::signal::Signal::SIGTERM,
            Duration::from_secs(20),
        );
        assert!(up, "the TCP gateway did not start");
        let log = std::fs::read_to_string(s.tmp.path().join("tcp.log")).unwrap();
        match answer.flatten() {
            Some(out) => assert!(
                served && out.ends_with("\r\n\r\ntcp\n"),
                "{allowed}: {out:?}"
            ),
            None => assert!(
                !served && log.contains("not in FCGI_WEB_SERVER_ADDRS"),
                "{allowed}: {log}"
            ),
        }
    }
}

#[test]
fn cgi_wrapper_runs_scripts_in_the_sandbox() {
    let s = Stack::start(&[], 30);
    let echo = s.script(T1, "echo.cgi", ECHO_CGI);
    let env_cgi = s.script(T1, "env.cgi", ENV_CGI);
    let run = |args: &[&str], vars: &[(&str, &str)], stdin: &[u8]| {
        use std::io::Write;
        let mut c = s.env.cmd();
        c.arg("cgi")
            .args(args)
            .env("REQUEST_METHOD", "POST")
            .env("GATEWAY_INTERFACE", "CGI/1.1");
        for (k, v) in vars {
            c.env(k, v);
        }
        let mut ch = c
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        ch.stdin.take().unwrap().write_all(stdin).unwrap();
        ch.wait_with_output().unwrap()
    };
    let body = b"hello from the web server".to_vec();
    let o = run(
        &[],
        &[
            ("SCRIPT_FILENAME", echo.to_str().unwrap()),
            ("CONTENT_LENGTH", "25"),
        ],
        &body,
    );
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!(
            "Content-Type: text/plain\n\nlen=25\nsum={}\n",
            sha256_hex(&body)
        )
    );
    // lighttpd's cgi.assign passes the script as an argument; Apache's Action in PATH_TRANSLATED.
    let o = run(
        &[env_cgi.to_str().unwrap()],
        &[("QUERY_STRING", "via=arg"), ("LD_PRELOAD", "/x.so")],
        b"",
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(&format!("uid={}", uid_of(T1))) && out.contains("query=via=arg"),
        "{out}"
    );
    let o = run(
        &["--path-translated"],
        &[
            ("PATH_TRANSLATED", env_cgi.to_str().unwrap()),
            ("SCRIPT_FILENAME", "/usr/lib/cgi-bin/corral"),
        ],
        b"",
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(&format!("uid={}", uid_of(T1))),
        "{o:?}"
    );
    // Forwarded to the running gateway over FastCGI (no root needed there).
    let sock = format!("{}", s.socket().display());
    let o = run(
        &["--gateway", &sock],
        &[
            ("SCRIPT_FILENAME", echo.to_str().unwrap()),
            ("CONTENT_LENGTH", "25"),
        ],
        &body,
    );
    assert!(o.status.success(), "{o:?}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.starts_with("Status: 200 OK\r\n")
            && out.ends_with(&format!("\r\n\r\nlen=25\nsum={}\n", sha256_hex(&body))),
        "{out:?}"
    );
    let o = run(&["--gateway", &sock, "/etc/passwd"], &[], b"");
    assert!(
        String::from_utf8_lossy(&o.stdout).starts_with("Status: 403"),
        "{o:?}"
    );
    // Exit status passes through; refusals are CGI error responses.
    let fail = s.script(
        T1,
        "fail.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n'\nexit 7\n",
    );
    assert_eq!(
        run(&[fail.to_str().unwrap()], &[], b"").status.code(),
        Some(7)
    );
    set_mode(&fail, 0o777);
    let o = run(&[fail.to_str().unwrap()], &[], b"");
    assert!(
        String::from_utf8_lossy(&o.stdout).starts_with("Status: 403"),
        "{o:?}"
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("\"writable\""),
        "{o:?}"
    );
}

/// The test rig: a gateway and an nginx in front of it, per test.
#[test]
fn a_suspended_tenants_scripts_answer_503_with_the_suspended_page() {
    let s = Stack::start(&[], 30);
    s.script(T1, "env.cgi", ENV_CGI);
    s.script(T2, "env.cgi", ENV_CGI);
    let path = format!("/~{T1}/env.cgi");
    assert_eq!(s.get(&path, &[]).status, 200);
    s.env.ok(&["suspend", T1, "--reason", "unpaid invoice"]);
    let r = s.get(&path, &[]);
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.text().contains("This site is suspended"), "{}", r.text());
    assert!(
        r.header("Content-Type")
            .is_some_and(|v| v.starts_with("text/html")),
        "{:?}",
        r.headers
    );
    assert!(s.log().contains("suspended: unpaid invoice"), "{}", s.log());
    // A neighbour is not affected.
    assert_eq!(s.get(&format!("/~{T2}/env.cgi"), &[]).status, 200);
    s.env.ok(&["unsuspend", T1]);
    let r = s.get(&path, &[]);
    assert_eq!(r.status, 200, "{}", r.text());
}

mod gw {
    use super::common::*;
    use std::io::{Read, Write};
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, ExitStatus, Stdio};
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::{Duration, Instant};

    static N: AtomicU32 = AtomicU32::new(0);

    pub struct Stack {
        pub env: Env,
        pub tmp: tempfile::TempDir,
        nginx: Option<Child>,
        gateway: Option<Child>,
        port: u16,
        dir_name: String,
    }

    pub type Resp = HttpResp;

    impl Stack {
        /// `overrides`: per-tenant profile overrides; `timeout`: the gateway's, in seconds.
        pub fn start(overrides: &[(&str, &str)], timeout: u64) -> Stack {
            Stack::launch(overrides, timeout, None, &[])
        }

        pub fn start_with_map(overrides: &[(&str, &str)], timeout: u64, map: &str) -> Stack {
            Stack::launch(overrides, timeout, Some(map), &[])
        }

        /// The gateway started through `wrapper` (e.g. `taskset -c 0`).
        pub fn start_under(wrapper: &[&str]) -> Stack {
            Stack::launch(&[], 30, None, wrapper)
        }

        fn launch(
            overrides: &[(&str, &str)],
            timeout: u64,
            map: Option<&str>,
            wrapper: &[&str],
        ) -> Stack {
            let env = Env::new();
            env.default_profile_with("");
            for (t, text) in overrides {
                env.write_config(&format!("tenants/{t}.toml"), text);
            }
            let tmp = tempfile::Builder::new()
                .prefix("corral-gw-test")
                .tempdir_in("/var/tmp")
                .unwrap();
            let dir_name = format!(
                "gwtest-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            );
            let mut s = Stack {
                env,
                tmp,
                nginx: None,
                gateway: None,
                port: 0,
                dir_name,
            };
            for t in [T1, T2, T3] {
                let d = s.dir(t);
                std::fs::create_dir_all(&d).unwrap();
                let u = corral_users::Db::system().user_by_name(t).unwrap().unwrap();
                nix::unistd::chown(&d, Some(u.uid.into()), Some(u.gid.into())).unwrap();
                set_mode(&d, 0o755);
            }
            if let Some(m) = map {
                s.write_map(m);
            }
            s.start_gateway(timeout, map.is_some(), wrapper);
            s.start_nginx();
            s
        }

        fn start_gateway(&mut self, timeout: u64, map: bool, wrapper: &[&str]) {
            let log = std::fs::File::create(self.tmp.path().join("gateway.log")).unwrap();
            let mut c = match wrapper.split_first() {
                None => self.env.cmd(),
                Some((program, args)) => {
                    let mut c = self.env.command(program);
                    c.args(args).arg(corral_bin());
                    c
                }
            };
            c.args([
                "gateway",
                "--listen",
                &format!("unix:{}", self.socket().display()),
                "--timeout",
                &timeout.to_string(),
            ]);
            if map {
                c.arg("--map").arg(self.tmp.path().join("map.toml"));
            }
            let child = c
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("start corral gateway");
            self.gateway = Some(child);
            let up = wait_until(Duration::from_secs(10), || {
                self.socket().exists()
                    || self.gateway.as_mut().unwrap().try_wait().unwrap().is_some()
            });
            assert!(
                up && self.socket().exists(),
                "the gateway did not start: {}",
                self.log()
            );
        }

        fn start_nginx(&mut self) {
            for _attempt in 0..5 {
                self.port = free_port();
                let conf = self.tmp.path().join("nginx.conf");
                std::fs::write(&conf, self.nginx_conf()).unwrap();
                let out = std::fs::File::create(self.tmp.path().join("nginx.out")).unwrap();
                let err_log = self.tmp.path().join("error.log");
                let child = Command::new("nginx")
                    .arg("-p")
                    .arg(self.tmp.path())
                    .arg("-e")
                    .arg(&err_log)
                    .arg("-c")
                    .arg(&conf)
                    .args(["-g", "daemon off;"])
                    .stdin(Stdio::null())
                    .stdout(out.try_clone().unwrap())
                    .stderr(out)
                    .spawn()
                    .expect("start nginx (Debian: nginx-light)");
                self.nginx = Some(child);
                let port = self.port;
                let ok = wait_until(Duration::from_secs(10), || {
                    std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
                        || self.nginx.as_mut().unwrap().try_wait().unwrap().is_some()
                });
                if ok && self.nginx.as_mut().unwrap().try_wait().unwrap().is_none() {
                    return;
                }
                // Most likely the port was taken meanwhile: try another.
                self.stop_nginx();
            }
            panic!(
                "nginx did not start: {}",
                std::fs::read_to_string(self.tmp.path().join("nginx.out")).unwrap_or_default()
            );
        }

        fn nginx_conf(&self) -> String {
            let t = self.tmp.path().display();
            let sock = self.socket();
            let sock = sock.display();
            let mut locations = String::new();
            for tenant in [T1, T2, T3] {
                let dir = self.dir(tenant);
                let dir = dir.display();
                locations.push_str(&format!(
                    "location ~ ^/~{tenant}(/[^/]+)$ {{ include /etc/nginx/fastcgi_params; fastcgi_param SCRIPT_FILENAME {dir}$1; fastcgi_pass unix:{sock}; }}\n\
                     location ~ ^/k/~{tenant}(/[^/]+)$ {{ include /etc/nginx/fastcgi_params; fastcgi_param SCRIPT_FILENAME {dir}$1; fastcgi_keep_conn on; fastcgi_pass gw; }}\n"
                ));
            }
            format!(
                "worker_processes 2;\nuser root root;\npid {t}/nginx.pid;\nerror_log {t}/error.log warn;\n\
                 events {{ worker_connections 1024; }}\n\
                 http {{\n access_log off;\n client_body_temp_path {t}/body;\n fastcgi_temp_path {t}/fastcgi;\n client_max_body_size 16m;\n fastcgi_read_timeout 120s;\n\
                 upstream gw {{ server unix:{sock}; keepalive 8; }}\n\
                 server {{\n listen 127.0.0.1:{port};\n{locations}\
                 location = /raw {{ include /etc/nginx/fastcgi_params; fastcgi_param SCRIPT_FILENAME $arg_f; fastcgi_pass unix:{sock}; }}\n }}\n}}\n",
                port = self.port
            )
        }

        pub fn dir_name(&self) -> &str {
            &self.dir_name
        }

        /// This test's script directory in a tenant's home.
        pub fn dir(&self, tenant: &str) -> PathBuf {
            home_of(tenant).join(&self.dir_name)
        }

        /// Write an executable script (0755, owned by the tenant).
        pub fn script(&self, tenant: &str, name: &str, text: &str) -> PathBuf {
            write_home_file(tenant, &format!("{}/{name}", self.dir_name), text, 0o755)
        }

        pub fn socket(&self) -> PathBuf {
            self.tmp.path().join("gw.sock")
        }

        pub fn write_map(&self, text: &str) {
            std::fs::write(self.tmp.path().join("map.toml"), text).unwrap();
        }

        pub fn log(&self) -> String {
            std::fs::read_to_string(self.tmp.path().join("gateway.log")).unwrap_or_default()
        }

        pub fn port(&self) -> u16 {
            self.port
        }

        pub fn gateway_pid(&self) -> i32 {
            self.gateway.as_ref().unwrap().id() as i32
        }

        pub fn signal(&self, sig: nix::sys::signal::Signal) {
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.gateway_pid()), sig).unwrap();
        }

        pub fn wait_gateway(&mut self, timeout: Duration) -> Option<ExitStatus> {
            let g = self.gateway.as_mut()?;
            let start = Instant::now();
            while start.elapsed() < timeout {
                if let Some(st) = g.try_wait().unwrap() {
                    self.gateway = None;
                    return Some(st);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            None
        }

        pub fn get(&self, path: &str, headers: &[(&str, &str)]) -> Resp {
            self.request("GET", path, headers, b"")
        }

        /// One HTTP/1.0 request to nginx (the connection closes after it).
        pub fn request(
            &self,
            method: &str,
            path: &str,
            headers: &[(&str, &str)],
            body: &[u8],
        ) -> Resp {
            http_request(self.port, method, path, headers, body)
        }

        fn stop_nginx(&mut self) {
            if let Some(mut n) = self.nginx.take() {
                stop(
                    &mut n,
                    nix::sys::signal::Signal::SIGQUIT,
                    Duration::from_secs(5),
                );
            }
        }
    }

    impl Drop for Stack {
        fn drop(&mut self) {
            if std::thread::panicking() {
                // What the failure looked like from both servers.
                let tail = |p: PathBuf| {
                    let t = std::fs::read_to_string(&p).unwrap_or_default();
                    let lines: Vec<&str> = t.lines().collect();
                    lines[lines.len().saturating_sub(30)..].join("\n")
                };
                eprintln!(
                    "--- gateway log (tail)\n{}",
                    tail(self.tmp.path().join("gateway.log"))
                );
                eprintln!(
                    "--- nginx error log (tail)\n{}",
                    tail(self.tmp.path().join("error.log"))
                );
            }
            self.stop_nginx();
            if let Some(mut g) = self.gateway.take() {
                stop(
                    &mut g,
                    nix::sys::signal::Signal::SIGTERM,
                    Duration::from_secs(40),
                );
            }
            for t in [T1, T2, T3] {
                let _ = std::fs::remove_dir_all(self.dir(t));
            }
        }
    }

    /// Signal a child we started, wait (bounded), then SIGKILL it.
    pub fn stop(c: &mut Child, sig: nix::sys::signal::Signal, grace: Duration) {
        stop_child(c, sig, grace)
    }

    pub fn set_mode(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    pub fn sha256_hex(data: &[u8]) -> String {
        let mut c = Command::new("sha256sum")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(data).unwrap();
        let o = c.wait_with_output().unwrap();
        String::from_utf8(o.stdout)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .to_string()
    }

    fn proc_field(pid: &str, file: &str, key: &str) -> Option<String> {
        let s = std::fs::read_to_string(format!("/proc/{pid}/{file}")).ok()?;
        s.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim().to_string())
    }

    /// Processes named `comm` inside this test's sandbox of `tenant` (its
    /// init's pid namespace): other tests' processes of the same user do not count.
    pub fn in_sandbox(env: &Env, tenant: &str, comm: &str) -> usize {
        let init = env.init_pid(tenant);
        let Ok(ns) = std::fs::read_link(format!("/proc/{init}/ns/pid")) else {
            return 0;
        };
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .bytes()
                    .all(|b| b.is_ascii_digit())
            })
            .filter(|e| std::fs::read_link(e.path().join("ns/pid")).ok().as_ref() == Some(&ns))
            .filter(|e| {
                proc_field(&e.file_name().to_string_lossy(), "status", "Name:").as_deref()
                    == Some(comm)
            })
            .count()
    }

    /// Sockets among the open fds of `pid`.
    pub fn sockets_of(pid: i32) -> usize {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|d| {
                d.flatten()
                    .filter_map(|e| std::fs::read_link(e.path()).ok())
                    .filter(|l| l.to_string_lossy().starts_with("socket:"))
                    .count()
            })
            .unwrap_or(usize::MAX)
    }

    /// The init's socket count once it has been the same for 300 ms (at most 5 s).
    pub fn steady_sockets_of(pid: i32) -> usize {
        let mut last = sockets_of(pid);
        let mut since = std::time::Instant::now();
        let start = since;
        while since.elapsed() < Duration::from_millis(300)
            && start.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(20));
            let now = sockets_of(pid);
            if now != last {
                (last, since) = (now, std::time::Instant::now());
            }
        }
        last
    }

    pub fn fd_count(pid: i32) -> usize {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|d| d.count())
            .unwrap_or(usize::MAX)
    }

    /// Zombie children of these processes.
    pub fn zombies_of(parents: &[i32]) -> usize {
        let ps: Vec<String> = parents.iter().map(|p| p.to_string()).collect();
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
            .filter(|s| {
                let Some(i) = s.rfind(')') else { return false };
                let f: Vec<&str> = s[i + 2..].split(' ').collect();
                f.first() == Some(&"Z") && f.get(1).is_some_and(|pp| ps.iter().any(|p| p == pp))
            })
            .count()
    }

    /// `h2load --h1 -n N -c C` against nginx, if h2load is installed
    /// (Debian: nghttp2-client); bounded to 10 minutes.
    pub fn h2load(s: &Stack, path: &str, n: usize, c: usize) -> Option<String> {
        let out = s.tmp.path().join("h2load.out");
        let f = std::fs::File::create(&out).ok()?;
        let mut ch = Command::new("h2load")
            .args(["--h1", "-n", &n.to_string(), "-c", &c.to_string()])
            .arg(format!("http://127.0.0.1:{}{path}", s.port()))
            .stdout(f.try_clone().ok()?)
            .stderr(f)
            .spawn()
            .ok()?;
        let done = wait_until(Duration::from_secs(600), || {
            ch.try_wait().ok().flatten().is_some()
        });
        if !done {
            let _ = ch.kill();
            let _ = ch.wait();
            panic!("h2load did not finish in 10 minutes");
        }
        std::fs::read_to_string(out).ok()
    }

    /// One request on `c`; its stdout, or None if the gateway closed the
    /// connection without answering.
    pub fn fastcgi_once<S: Read + Write>(mut c: S, script: &Path) -> Option<String> {
        use corral_gateway::fastcgi::params::encode_pairs;
        use corral_gateway::fastcgi::record::{
            encode_begin_request, encode_stream, encode_stream_end, RecordDecoder, RecordType,
            Role, Stream,
        };
        let mut out = Vec::new();
        encode_begin_request(1, Role::Responder, false, &mut out);
        let mut p = Vec::new();
        encode_pairs(
            [
                ("SCRIPT_FILENAME", script.to_string_lossy().as_ref()),
                ("REQUEST_METHOD", "GET"),
            ],
            &mut p,
        )
        .unwrap();
        encode_stream(Stream::Params, 1, &p, &mut out);
        encode_stream_end(Stream::Params, 1, &mut out);
        encode_stream_end(Stream::Stdin, 1, &mut out);
        // A refused connection may already be closed: the answer tells.
        let _ = c.write_all(&out);
        let (mut dec, mut buf, mut stdout) = (RecordDecoder::new(), vec![0u8; 65536], Vec::new());
        loop {
            let n = c.read(&mut buf).unwrap_or(0);
            if n == 0 {
                return None;
            }
            let mut input = &buf[..n];
            while let Some(r) = dec.decode(&mut input).unwrap() {
                match r.kind {
                    RecordType::Stdout => stdout.extend_from_slice(&r.content),
                    RecordType::EndRequest => {
                        return Some(String::from_utf8_lossy(&stdout).into_owned())
                    }
                    _ => {}
                }
            }
        }
    }

    /// `n` requests one after the other on one kept connection, all with
    /// request id 1; each answer must be its own.
    pub fn fastcgi_sequential(sock: &Path, script: &Path, n: usize) {
        use corral_gateway::fastcgi::params::encode_pairs;
        use corral_gateway::fastcgi::record::{
            encode_begin_request, encode_stream, encode_stream_end, RecordDecoder, RecordType,
            Role, Stream,
        };
        let mut c = std::os::unix::net::UnixStream::connect(sock).expect("connect to the gateway");
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut dec = RecordDecoder::new();
        let mut buf = vec![0u8; 65536];
        for i in 0..n {
            let q = format!("seq{i}");
            let mut out = Vec::new();
            encode_begin_request(1, Role::Responder, true, &mut out);
            let mut p = Vec::new();
            encode_pairs(
                [
                    ("SCRIPT_FILENAME", script.to_string_lossy().as_ref()),
                    ("REQUEST_METHOD", "GET"),
                    ("QUERY_STRING", &q),
                ],
                &mut p,
            )
            .unwrap();
            encode_stream(Stream::Params, 1, &p, &mut out);
            encode_stream_end(Stream::Params, 1, &mut out);
            encode_stream_end(Stream::Stdin, 1, &mut out);
            c.write_all(&out).unwrap();
            let mut stdout = Vec::new();
            'request: loop {
                let got = c.read(&mut buf).expect("read from the gateway");
                assert!(
                    got > 0,
                    "request {i}: the gateway closed the kept connection"
                );
                let mut input = &buf[..got];
                while let Some(r) = dec.decode(&mut input).unwrap() {
                    match r.kind {
                        RecordType::Stdout => stdout.extend_from_slice(&r.content),
                        RecordType::EndRequest => break 'request,
                        _ => {}
                    }
                }
            }
            let text = String::from_utf8_lossy(&stdout);
            assert!(
                text.starts_with("Status: 200") && text.ends_with(&format!("\r\n\r\n{q}\n")),
                "request {i}: {text:?}"
            );
        }
    }

    /// Start a request, wait until `started`, send FCGI_ABORT_REQUEST and
    /// wait for its FCGI_END_REQUEST.
    pub fn fastcgi_abort(sock: &Path, script: &Path, mut started: impl FnMut() -> bool) {
        use corral_gateway::fastcgi::params::encode_pairs;
        use corral_gateway::fastcgi::record::{
            encode_abort_request, encode_begin_request, encode_stream, encode_stream_end,
            RecordDecoder, RecordType, Role, Stream,
        };
        let mut out = Vec::new();
        encode_begin_request(7, Role::Responder, true, &mut out);
        let mut p = Vec::new();
        encode_pairs(
            [
                ("SCRIPT_FILENAME", script.to_string_lossy().as_ref()),
                ("REQUEST_METHOD", "GET"),
            ],
            &mut p,
        )
        .unwrap();
        encode_stream(Stream::Params, 7, &p, &mut out);
        encode_stream_end(Stream::Params, 7, &mut out);
        encode_stream_end(Stream::Stdin, 7, &mut out);
        let mut c = std::os::unix::net::UnixStream::connect(sock).expect("connect to the gateway");
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        c.write_all(&out).unwrap();
        assert!(
            wait_until(Duration::from_secs(10), &mut started),
            "the script started"
        );
        out.clear();
        encode_abort_request(7, &mut out);
        c.write_all(&out).unwrap();
        let mut dec = RecordDecoder::new();
        let mut buf = vec![0u8; 65536];
        loop {
            let n = c.read(&mut buf).expect("read from the gateway");
            assert!(
                n > 0,
                "the gateway closed the connection instead of ending the request"
            );
            let mut input = &buf[..n];
            while let Some(r) = dec.decode(&mut input).unwrap() {
                if r.kind == RecordType::EndRequest {
                    assert_eq!(r.request_id, 7);
                    return;
                }
            }
        }
    }

    /// Several requests on one FastCGI connection, their records
    /// interleaved, plus FCGI_GET_VALUES; returns each request's stdout.
    pub fn fastcgi_mpx(sock: &Path, script: &Path, queries: &[&str]) -> Vec<String> {
        use corral_gateway::fastcgi::params::encode_pairs;
        use corral_gateway::fastcgi::record::{
            encode_begin_request, encode_get_values, encode_stream, encode_stream_end,
            RecordDecoder, RecordType, Role, Stream,
        };
        let mut out = Vec::new();
        encode_get_values(["FCGI_MPXS_CONNS", "FCGI_MAX_REQS"], &mut out).unwrap();
        let ids: Vec<u16> = (1..=queries.len() as u16).collect();
        for id in &ids {
            encode_begin_request(*id, Role::Responder, true, &mut out);
        }
        for (id, q) in ids.iter().zip(queries) {
            let mut p = Vec::new();
            let script = script.to_string_lossy();
            encode_pairs(
                [
                    ("SCRIPT_FILENAME", script.as_ref()),
                    ("REQUEST_METHOD", "GET"),
                    ("QUERY_STRING", q),
                ],
                &mut p,
            )
            .unwrap();
            encode_stream(Stream::Params, *id, &p, &mut out);
        }
        for id in ids.iter().rev() {
            encode_stream_end(Stream::Params, *id, &mut out);
            encode_stream_end(Stream::Stdin, *id, &mut out);
        }
        let mut c = std::os::unix::net::UnixStream::connect(sock).expect("connect to the gateway");
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        c.write_all(&out).unwrap();
        let mut dec = RecordDecoder::new();
        let mut stdout: Vec<Vec<u8>> = vec![Vec::new(); queries.len()];
        let (mut ended, mut values) = (0, None);
        let mut buf = vec![0u8; 65536];
        while ended < queries.len() {
            let n = c.read(&mut buf).expect("read from the gateway");
            assert!(n > 0, "the gateway closed a kept connection");
            let mut input = &buf[..n];
            while let Some(r) = dec.decode(&mut input).unwrap() {
                match r.kind {
                    RecordType::Stdout => {
                        stdout[r.request_id as usize - 1].extend_from_slice(&r.content)
                    }
                    RecordType::EndRequest => ended += 1,
                    RecordType::GetValuesResult => values = Some(r.content.clone()),
                    other => panic!("unexpected {other}"),
                }
            }
        }
        let v = values.expect("FCGI_GET_VALUES_RESULT");
        assert!(
            v.windows(16).any(|w| w == b"FCGI_MPXS_CONNS1"),
            "{:?}",
            String::from_utf8_lossy(&v)
        );
        stdout
            .into_iter()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .collect()
    }
}
