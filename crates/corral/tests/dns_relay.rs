//! net = "private" on a host whose resolver listens on its own loopback
//! (Ubuntu's systemd-resolved at 127.0.0.53): DNS from the sandbox is
//! relayed there. A test binary of its own: the relay is part of the one
//! host-wide nftables table, which another test's `corral up` (seeing this
//! host's real resolv.conf) would rewrite meanwhile; cargo runs test
//! binaries one after another.

mod common;
use common::*;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// A DNS server for a test: answers every A query with `answer`, every
/// other query with no records; stops on drop.
struct TinyDns {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TinyDns {
    fn start(addr: &str, answer: [u8; 4]) -> TinyDns {
        let sock = std::net::UdpSocket::bind(addr).unwrap_or_else(|e| panic!("bind {addr}: {e}"));
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while !s.load(Ordering::Relaxed) {
                let Ok((n, from)) = sock.recv_from(&mut buf) else {
                    continue;
                };
                let q = &buf[..n];
                // The question: labels from byte 12 to a zero, then type, class.
                let mut i = 12;
                while i < n && q[i] != 0 {
                    i += 1 + q[i] as usize;
                }
                if i + 5 > n {
                    continue;
                }
                let qend = i + 5;
                let is_a = q[i + 1..i + 3] == [0, 1];
                let mut r = Vec::with_capacity(qend + 16);
                r.extend_from_slice(&q[..2]);
                r.extend_from_slice(&[0x81, 0x80, 0, 1, 0, is_a as u8, 0, 0, 0, 0]);
                r.extend_from_slice(&q[12..qend]);
                if is_a {
                    r.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
                    r.extend_from_slice(&answer);
                }
                let _ = sock.send_to(&r, from);
            }
        });
        TinyDns {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for TinyDns {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn private_net_relays_dns_to_a_resolver_on_the_hosts_loopback() {
    // As on Ubuntu: the host's resolv.conf names systemd-resolved's stub,
    // 127.0.0.53, which a tenant's own network namespace cannot reach.
    let env = Env::new();
    env.default_profile_with("");
    let dns = TinyDns::start("127.0.0.53:53", [192, 0, 2, 7]);
    let fake = env.state_dir().join("host-resolv.conf");
    std::fs::write(
        &fake,
        "# systemd-resolved\nnameserver 127.0.0.53\noptions edns0\n",
    )
    .unwrap();
    // corral reads it as the host's resolver configuration (network.toml),
    // and the profile copies it into the sandbox as /etc/resolv.conf.
    env.write_config(
        "network.toml",
        &format!("resolv_conf = \"{}\"\n", fake.display()),
    );
    let profile = std::fs::read_to_string(env.config.path().join("profile.toml")).unwrap();
    let copy = "src = \"/etc/resolv.conf\"";
    assert!(
        profile.contains(copy),
        "the default profile copies /etc/resolv.conf"
    );
    env.write_config(
        "profile.toml",
        &profile.replace(copy, &format!("src = \"{}\"", fake.display())),
    );
    env.ok(&["up", T1]);
    // The relay answers at the gateway's address, which is on the host's
    // lo: the tenant's host end holds no IPv4 address.
    let attached: serde_json::Value = serde_json::from_slice(
        &std::fs::read(env.state_dir().join("tenants").join(T1).join("net.json")).unwrap(),
    )
    .unwrap();
    let end = attached["host_if"].as_str().unwrap();
    let o = std::process::Command::new("ip")
        .args(["-o", "-4", "addr", "show", "dev", end])
        .output()
        .unwrap();
    assert!(o.status.success(), "ip addr show dev {end}: {o:?}");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "",
        "{end} carries no IPv4 address"
    );
    let out = env.ok(&[
        "run",
        T1,
        "--",
        "/bin/sh",
        "-c",
        "cat /etc/resolv.conf; getent ahostsv4 relay-test.example | head -1",
    ]);
    println!("-- inside: {out}");
    drop(dns);
    assert!(
        !out.contains("127.0.0.53"),
        "the sandbox names the host's loopback resolver: {out}"
    );
    assert!(
        out.contains("nameserver 10."),
        "the sandbox names the relay: {out}"
    );
    assert!(
        out.contains("192.0.2.7"),
        "the name resolved through the relay: {out}"
    );
}
