//! The article's client machines: one network namespace per load client,
//! joined to the host by a veth pair with a private /30 from 198.18.0.0/15
//! (RFC 2544's benchmarking range), so every client has its own TCP stack,
//! address and port range. nginx listens on the host end of every pair.
//!
//! [`ClientNets`] removes what it created when dropped, also after errors
//! and Ctrl-C: `ip netns del` destroys the client end of each veth pair, and
//! the host end goes with its peer (deleted explicitly when it lingers).

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::error::{BenchError, Result};
use crate::suites::sys::{self, Output};

/// One client machine.
#[derive(Debug, Clone)]
pub struct ClientNet {
    /// Network namespace name (`corral-bench-<pid>-c<k>`).
    pub ns: String,
    /// veth end in the host's namespace (`cb<pid>h<k>`).
    pub host_if: String,
    /// veth end in the client's namespace (`cb<pid>c<k>`).
    pub client_if: String,
    /// `198.18.x.4k+1`: where nginx listens for this client.
    pub host_ip: Ipv4Addr,
    /// `198.18.x.4k+2`.
    pub client_ip: Ipv4Addr,
}

/// Names and addresses of client `k` of run `pid` in /24 block `block`
/// (0..512 over 198.18.0.0/15).
pub fn plan(pid: u32, block: u32, k: u8) -> ClientNet {
    let (b, c) = (18 + (block / 256) as u8, (block % 256) as u8);
    ClientNet {
        ns: format!("corral-bench-{pid}-c{k}"),
        host_if: format!("cb{pid}h{k}"),
        client_if: format!("cb{pid}c{k}"),
        host_ip: Ipv4Addr::new(198, b, c, 4 * k + 1),
        client_ip: Ipv4Addr::new(198, b, c, 4 * k + 2),
    }
}

/// The first /24 of 198.18.0.0/15, starting at `pid % 512`, that no address
/// or route of the host mentions (`ip addr`/`ip route` text).
pub fn free_block(pid: u32, ip_addr_and_routes: &str) -> Option<u32> {
    if ip_addr_and_routes.contains("198.18.0.0/15") {
        return None;
    }
    (0..512).map(|i| (pid + i) % 512).find(|&blk| {
        let (b, c) = (18 + blk / 256, blk % 256);
        !ip_addr_and_routes.contains(&format!("198.{b}.{c}."))
    })
}

/// The client machines of one run; removed on drop.
pub struct ClientNets {
    ip: PathBuf,
    pub nets: Vec<ClientNet>,
}

const IP_LIMIT: Duration = Duration::from_secs(20);

fn ip_cmd(ip: &PathBuf, args: &[&str]) -> Command {
    let mut c = Command::new(ip);
    c.args(args);
    c
}

impl ClientNets {
    /// Create `count` (≤ 63) client namespaces with their veth pairs.
    pub fn create(ip: PathBuf, count: u8) -> Result<ClientNets> {
        let pid = std::process::id();
        let mut seen = String::new();
        for args in [
            &["-o", "-4", "addr", "show"][..],
            &["-4", "route", "show", "table", "all"][..],
        ] {
            let f = sys::run_bounded(&mut ip_cmd(&ip, args), IP_LIMIT, Output::Capture)?;
            seen.push_str(&f.stdout);
        }
        let block = free_block(pid, &seen).ok_or_else(|| {
            BenchError::suite(
                "neighbours",
                "no free /24 in 198.18.0.0/15 for the client networks",
            )
        })?;
        let mut nets = ClientNets {
            ip,
            nets: Vec::new(),
        };
        for k in 0..count.min(63) {
            let n = plan(pid, block, k);
            // Registered first: a half-made client is removed too.
            nets.nets.push(n.clone());
            let (h, c) = (format!("{}/30", n.host_ip), format!("{}/30", n.client_ip));
            let steps: [&[&str]; 6] = [
                &["netns", "add", &n.ns],
                &[
                    "link",
                    "add",
                    &n.host_if,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &n.client_if,
                    "netns",
                    &n.ns,
                ],
                &["addr", "add", &h, "dev", &n.host_if],
                &["link", "set", &n.host_if, "up"],
                &["-n", &n.ns, "addr", "add", &c, "dev", &n.client_if],
                &["-n", &n.ns, "link", "set", &n.client_if, "up"],
            ];
            for args in steps
                .iter()
                .chain([&["-n", &n.ns, "link", "set", "lo", "up"][..]].iter())
            {
                nets.run(args)?;
            }
        }
        Ok(nets)
    }

    fn run(&self, args: &[&str]) -> Result<()> {
        let what = format!("ip {}", args.join(" "));
        sys::run_ok(&mut ip_cmd(&self.ip, args), IP_LIMIT, "neighbours", what).map(drop)
    }

    /// `ip netns exec NS` as an argv prefix.
    pub fn exec_prefix(&self, k: usize) -> Vec<String> {
        vec![
            self.ip.display().to_string(),
            "netns".into(),
            "exec".into(),
            self.nets[k].ns.clone(),
        ]
    }

    /// Remove every namespace and veth pair (idempotent); what could not be
    /// removed.
    pub fn remove(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        for n in self.nets.drain(..).rev() {
            let mut c = ip_cmd(&self.ip, &["netns", "del", &n.ns]);
            let _ = sys::run_cleanup(&mut c, IP_LIMIT);
            // The host end normally vanishes with its peer; delete it if not.
            let link = Command::new(&self.ip)
                .args(["link", "show", &n.host_if])
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
            if link {
                let _ = sys::run_cleanup(
                    &mut ip_cmd(&self.ip, &["link", "del", &n.host_if]),
                    IP_LIMIT,
                );
            }
            if PathBuf::from("/run/netns").join(&n.ns).exists() {
                problems.push(format!("network namespace {} still exists", n.ns));
            }
        }
        problems
    }
}

impl Drop for ClientNets {
    fn drop(&mut self) {
        sys::report_cleanup(self.remove());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_interface_limits_and_addresses_are_slash30s() {
        let n = plan(4_194_304, 300, 2);
        assert!(n.host_if.len() <= 15 && n.client_if.len() <= 15, "{n:?}");
        assert_eq!(n.host_ip, Ipv4Addr::new(198, 19, 44, 9));
        assert_eq!(n.client_ip, Ipv4Addr::new(198, 19, 44, 10));
        // Host and client of one pair share a /30; pairs do not overlap.
        let m = plan(4_194_304, 300, 3);
        assert_eq!(u32::from(n.host_ip) >> 2, u32::from(n.client_ip) >> 2);
        assert_ne!(u32::from(n.host_ip) >> 2, u32::from(m.host_ip) >> 2);
    }

    #[test]
    fn free_block_skips_used_prefixes() {
        assert_eq!(free_block(5, "inet 192.0.2.2/24"), Some(5));
        assert_eq!(
            free_block(5, "inet 198.18.5.1/30 dev x\n198.18.6.0/24 dev y"),
            Some(7)
        );
        assert_eq!(free_block(511, "198.19.255.1"), Some(0));
        assert_eq!(free_block(1, "198.18.0.0/15 via 10.0.0.1"), None);
    }
}
