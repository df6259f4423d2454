//! A network of its own per tenant (`net = "private"`): the host side.
//!
//! Every sandbox with `net = "private"` has its own network namespace (made
//! by `namespaces::create`) joined to the host by a veth pair that is a
//! routed point-to-point link of its own, with no bridge: the layout of
//! Calico's and Cilium's routed veths.
//!
//! ```text
//!  tenant netns                          host
//!  eth0 10.213.x.y/32 peer 10.213.0.1 ==== corral_N (no IPv4 address)
//!  default via 10.213.0.1                  route 10.213.x.y/32 dev corral_N src 10.213.0.1
//!  neigh 10.213.0.1 lladdr <corral_N's>    neigh 10.213.x.y lladdr <eth0's> dev corral_N
//!                                          lo 10.213.0.1/32 scope link (once, for every tenant)
//!  lo 127.0.0.1/8                          routing + masquerade, one nftables table
//! ```
//!
//! * The tenants' gateway address (the subnet's first) is on the host once,
//!   as a /32 on `lo`, scope link (looked for at every `up`,
//!   [`ensure_gateway`]; it stays, like the table). Per tenant, the host has a /32 route to the tenant's
//!   address through its host end, with the gateway as its preferred source;
//!   the host end holds no address. (Until 2026-11 every host end held the
//!   gateway as a /32 with the tenant as its peer: the host's local table
//!   then had one `10.213.0.1` with one alias per host end, and adding or
//!   removing one walked that list: 0.2 → 0.9–1.9 ms per `up` at 5,000
//!   tenants. A host end made that way keeps working until its `down`.)
//!   The tenant's eth0 holds its own /32 with the gateway as its peer, a
//!   default route via it, and a permanent neighbour entry for the gateway
//!   with the host end's MAC address: the tenant never asks for it by ARP,
//!   which the host would answer for an address on `lo` only if the
//!   host-wide ARP settings allow (`arp_ignore = 1` or `2` refuse an address
//!   that is not on the interface asked); the host likewise has a permanent
//!   entry for the tenant with its eth0's MAC ([`tenant_mac`]), so neither
//!   side ever sends ARP on the link. No bridge: tenants' packets never
//!   meet the bridge layer nor `br_netfilter` (which, loaded host-wide, runs
//!   every bridged frame through the IP hooks a second time), and there is
//!   no port limit (a Linux bridge takes 1,024).
//! * One nftables table (`inet <name>_routed`) serves every tenant; it is made
//!   at the first `corral up` that needs it and stays, like Docker's. Its
//!   rules match the host ends by one name pattern (`<name>_*`), never a
//!   tenant: their number does not grow with the tenants.
//! * Tenants cannot reach each other: a tenant's packet to another tenant's
//!   address is routed by the host, and the forward chain refuses it.
//! * Nor send as another: a packet whose source address is not routed back
//!   out of the host end it came in by (another tenant's address, or any
//!   other) is dropped before conntrack sees it (`fib saddr . iif oif
//!   missing`, strict reverse-path filtering in nftables: the kernel's
//!   per-interface `rp_filter` would be overridden by a host-wide loose
//!   `all.rp_filter = 2`, systemd's default).
//! * Nothing of the host is reachable: every packet a tenant sends to an
//!   address of the host (any interface's) meets the input chain, which
//!   lets only replies through. The host's 127.0.0.0/8 and its abstract
//!   Unix sockets are in the host's namespace, out of reach by construction.
//!   The host ends have no IPv6 (`disable_ipv6`).
//! * Denied on the way out: link-local (cloud metadata 169.254.169.254),
//!   the tenants' subnet, multicast, and the operator's `deny` list (e.g.
//!   RFC 1918); DNS to the host's own nameservers stays allowed. The rest is
//!   masqueraded out of the host's routes, TCP and UDP to source ports of
//!   the tenants' own (outside the host's ephemeral range:
//!   [`tenant_ports`]), so that a tenant's new connection never meets a
//!   server's TIME_WAIT socket of the host's own;
//!   tenants' TCP timestamps have no per-address random offset
//!   (`tcp_timestamps = 2` in their namespace), so that meeting one of
//!   another tenant's passes the server's PAWS check.
//! * Per tenant, `corral up` does eight netlink requests (no exec) and two
//!   or three sysctl writes: the veth pair made with its peer straight in
//!   the init's namespace (the host end with a MAC address of corral's,
//!   [`host_mac`]), the host end's sysctls, up, the route to the tenant,
//!   then in the tenant's namespace lo and eth0 up, the address, the
//!   gateway's neighbour entry and the default route. A lease file (O_EXCL, at an index hashed from the tenant, probed
//!   linearly) gives each tenant a stable address.
//! * A host a bridged corral (before routed veths) ran on keeps its bridge
//!   (`corral-br`, shards `corral-br1`...), its table `inet corral_corral_br`
//!   and its leases for as long as one of its tenants is still on it; they
//!   are removed at the first `corral up` that installs the routed table and
//!   at the `down` of the last of those tenants ([`retire_bridges`]). Until
//!   then both coexist: each table matches only its own interfaces, each
//!   denies the whole subnet to its tenants, and no routed tenant gets an
//!   address a bridged tenant holds.
//!
//! Tenants hold no capability, so they can neither change their address
//! nor send raw frames.

use std::ffi::CString;
use std::io::Write;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use serde::{Deserialize, Serialize};

/// Host-wide settings of the tenants' network (`/etc/corral/network.toml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NetConfig {
    /// The name of the tenants' network: the host ends of their veth pairs
    /// are `<name>_<N>`, the nftables table is `inet <name>_routed`. Letters
    /// and digits.
    pub name: String,
    /// The tenants' subnet: its first address is the tenants' gateway (on
    /// the host's `lo`), each tenant has one of the rest.
    pub subnet: String,
    /// More destinations tenants may not reach, as CIDRs (e.g. RFC 1918:
    /// "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16").
    pub deny: Vec<String>,
    /// Where leases and the setup lock live (tmpfs: gone at reboot, with
    /// the interfaces).
    pub run_dir: PathBuf,
    /// The host's resolver configuration: its non-loopback nameservers stay
    /// reachable, a loopback one gets the DNS relay.
    pub resolv_conf: PathBuf,
    /// A bridged corral's setting (before routed veths): the name of its
    /// bridge, which is removed with its shards and its table once no tenant
    /// is on it (default `corral-br`). Nothing else reads it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bridge: Option<String>,
    /// A bridged corral's setting: its tenants per bridge, to know which
    /// addresses its tenants still hold. Nothing else reads it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ports_per_bridge: Option<u32>,
}

impl Default for NetConfig {
    fn default() -> NetConfig {
        NetConfig {
            name: "corral".into(),
            subnet: "10.213.0.0/16".into(),
            deny: Vec::new(),
            run_dir: PathBuf::from("/run/corral-net"),
            resolv_conf: PathBuf::from("/etc/resolv.conf"),
            bridge: None,
            ports_per_bridge: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("network config: {0}")]
    Config(String),
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    #[error("{0}: {1}")]
    Sys(String, #[source] Errno),
    #[error("no free address left in {0}")]
    Full(String),
    #[error("set up the tenants' network and firewall: {0}")]
    HostSetup(String),
}

fn sys(what: impl Into<String>) -> impl FnOnce(Errno) -> NetError {
    let w = what.into();
    move |e| NetError::Sys(w, e)
}
fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> NetError {
    let w = what.into();
    move |e| NetError::Io(w, e)
}

/// An IPv4 CIDR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub addr: Ipv4Addr,
    pub prefix: u8,
}

impl Cidr {
    pub fn parse(s: &str) -> Result<Cidr, NetError> {
        let bad = || NetError::Config(format!("{s:?} is not an IPv4 CIDR (a.b.c.d/n)"));
        let (a, p) = s.split_once('/').ok_or_else(bad)?;
        let addr: Ipv4Addr = a.parse().map_err(|_| bad())?;
        let prefix: u8 = p.parse().map_err(|_| bad())?;
        if prefix > 32 {
            return Err(bad());
        }
        Ok(Cidr { addr, prefix })
    }
    fn mask(self) -> u32 {
        if self.prefix == 0 {
            0
        } else {
            u32::MAX << (32 - self.prefix)
        }
    }
    pub fn network(self) -> u32 {
        u32::from(self.addr) & self.mask()
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.network()), self.prefix)
    }
}

/// The addressing of one configuration, checked.
#[derive(Debug, Clone)]
pub struct Net {
    pub cfg: NetConfig,
    pub subnet: Cidr,
    pub deny: Vec<Cidr>,
}

/// A bridged corral's default bridge (before routed veths).
pub const OLD_BRIDGE: &str = "corral-br";
/// A bridged corral's default tenants per bridge.
const OLD_PORTS_PER_BRIDGE: u32 = 1000;

impl Net {
    pub fn new(cfg: NetConfig) -> Result<Net, NetError> {
        let subnet = Cidr::parse(&cfg.subnet)?;
        if !(8..=28).contains(&subnet.prefix) {
            return Err(NetError::Config(format!(
                "subnet {} must be between /8 and /28",
                cfg.subnet
            )));
        }
        let deny = cfg
            .deny
            .iter()
            .map(|s| Cidr::parse(s))
            .collect::<Result<_, _>>()?;
        let net = Net { cfg, subnet, deny };
        // Letters and digits only: two names' patterns (`<name>_*`) then
        // never match each other's interfaces, nor a bridged corral's.
        let name = &net.cfg.name;
        let room = 15 - 1 - (net.capacity() - 1).to_string().len();
        if name.is_empty() || name.len() > room || !name.bytes().all(|b| b.is_ascii_alphanumeric())
        {
            return Err(NetError::Config(format!(
                "name {name:?}: 1 to {room} letters or digits (the host ends are \
                 {name}_0 to {name}_{}, at most 15 bytes)",
                net.capacity() - 1
            )));
        }
        if let Some(b) = &net.cfg.bridge {
            if b.is_empty()
                || b.len() > 15
                || !b
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
            {
                return Err(NetError::Config(format!(
                    "bridge {b:?} (a bridged corral's): 1 to 15 of [A-Za-z0-9_-]"
                )));
            }
        }
        if net.cfg.ports_per_bridge == Some(0) {
            return Err(NetError::Config(
                "ports_per_bridge (a bridged corral's): at least 1".into(),
            ));
        }
        Ok(net)
    }

    /// The tenants' gateway: the subnet's first address, on the host's `lo`.
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.subnet.network() + 1)
    }
    /// How many tenants fit: every address but the network's, the
    /// gateway's and the broadcast's.
    pub fn capacity(&self) -> u32 {
        (1u32 << (32 - self.subnet.prefix)) - 3
    }
    /// Tenant address of lease `index` (0-based): after the gateway.
    pub fn address(&self, index: u32) -> Ipv4Addr {
        Ipv4Addr::from(self.subnet.network() + 2 + index)
    }
    /// The host end of lease `index`'s veth pair: `<name>_<index>`.
    pub fn host_if(&self, index: u32) -> String {
        format!("{}_{index}", self.cfg.name)
    }
    /// The nftables pattern of every host end.
    fn pattern(&self) -> String {
        format!("{}_*", self.cfg.name)
    }
    fn leases(&self) -> PathBuf {
        self.cfg.run_dir.join(&self.cfg.name)
    }
    /// The tenants' nftables table (`inet <name>_routed`).
    pub fn table(&self) -> String {
        format!("{}_routed", self.cfg.name)
    }
    /// Where the rules installed last are kept (`<run_dir>/<name>.nft`): a
    /// valid nft script, which a host firewall may `include`.
    pub fn rules_file(&self) -> PathBuf {
        self.cfg.run_dir.join(format!("{}.nft", self.cfg.name))
    }
    fn old_bridge(&self) -> &str {
        self.cfg.bridge.as_deref().unwrap_or(OLD_BRIDGE)
    }
    /// The address a bridged corral gave its lease `index`: its bridges had
    /// a /22 each (or the whole subnet when smaller), `ports_per_bridge`
    /// tenants from the /22's third address on.
    fn old_address(&self, index: u32) -> Ipv4Addr {
        let shard_prefix = self.subnet.prefix.max(22);
        let per = ((1u32 << (32 - shard_prefix)) - 3)
            .min(self.cfg.ports_per_bridge.unwrap_or(OLD_PORTS_PER_BRIDGE));
        let shard = self.subnet.network() + ((index / per) << (32 - shard_prefix));
        Ipv4Addr::from(shard + 2 + index % per)
    }
    /// The addresses a bridged corral's tenants still hold (its lease files,
    /// `<run_dir>/<bridge>/<index>`): none once its bridges are retired.
    fn old_addresses(&self) -> Vec<Ipv4Addr> {
        let dir = self.cfg.run_dir.join(self.old_bridge());
        let Ok(rd) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .map(|i| self.old_address(i))
            .collect()
    }
}

/// What `up` made for a tenant, kept in the tenant's dir (net.json) so that
/// `down` removes exactly that.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attached {
    /// The host end of the veth pair.
    pub host_if: String,
    pub address: Ipv4Addr,
    pub gateway: Ipv4Addr,
    /// The lease file holding the address.
    pub lease: PathBuf,
}

impl Attached {
    /// What a tenant's `net.json` at `path` says; None when it is missing
    /// or unreadable.
    pub fn read(path: &Path) -> Option<Attached> {
        std::fs::read(path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
    }
}

/// FNV-1a: a hash that stays the same across builds (the tenant's address
/// should not change with a compiler update).
fn fnv(s: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The tenant's lease: its own if it has one, else the first free index
/// from its hash on whose address no tenant of a bridged corral still
/// holds. `owner` names the tenant across state dirs.
fn lease(net: &Net, owner: &str) -> Result<(u32, PathBuf), NetError> {
    let dir = net.leases();
    std::fs::create_dir_all(&dir).map_err(io(format!("create {}", dir.display())))?;
    let old = net.old_addresses();
    let cap = net.capacity();
    let start = fnv(owner) % cap;
    for index in (0..cap).map(|i| (start + i) % cap) {
        let p = dir.join(index.to_string());
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)
        {
            Ok(_) if old.contains(&net.address(index)) => {
                let _ = std::fs::remove_file(&p);
            }
            Ok(mut f) => {
                f.write_all(owner.as_bytes())
                    .map_err(io(format!("write {}", p.display())))?;
                return Ok((index, p));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // Its own lease from an earlier `up` (or one a crash left).
                if std::fs::read_to_string(&p).ok().as_deref() == Some(owner) {
                    return Ok((index, p));
                }
            }
            Err(e) => return Err(io(format!("create {}", p.display()))(e)),
        }
    }
    Err(NetError::Full(net.cfg.subnet.clone()))
}

/// Whether a bridged corral attached the tenant (its host end a port of
/// that corral's bridge). Only while its namespace, and so the pair, lives:
/// `down` asks before it stops the init (see [`detach_after_exit`]).
pub fn on_old_bridge(a: &Attached) -> bool {
    master_of(&a.host_if).is_some()
}

/// The bridge the interface `name` is a port of, if any.
fn master_of(name: &str) -> Option<String> {
    std::fs::read_link(Path::new("/sys/class/net").join(name).join("master"))
        .ok()
        .and_then(|t| Some(t.file_name()?.to_str()?.to_string()))
}

/// Attach the network namespace of `pid` (new, holding only lo) to the
/// host: install the firewall at first use, lease an address, create the
/// veth pair and configure both ends. On failure, nothing of the tenant's
/// stays (the table does).
pub fn attach(net: &Net, owner: &str, pid: i32) -> Result<Attached, NetError> {
    let host = ensure_host(net)?;
    let (index, lease_path) = lease(net, owner)?;
    let a = Attached {
        host_if: net.host_if(index),
        address: net.address(index),
        gateway: net.gateway(),
        lease: lease_path,
    };
    let mut made = false;
    match plug(&a, pid, &host, &mut made) {
        Ok(()) => Ok(a),
        Err(e) => {
            if made {
                detach(&a);
            } else {
                let _ = std::fs::remove_file(&a.lease);
            }
            Err(e)
        }
    }
}

/// Remove what [`attach`] made for a tenant whose namespace is still alive
/// (an `up` failing after the pair was made): the veth pair (the route to
/// the tenant goes with it, and on a host end made before the gateway moved
/// to lo, its address) and the lease. A tenant a bridged corral attached
/// (its host end a port of that corral's bridge) is removed the same way,
/// and when it was the last on its bridge, the bridges and their table go
/// too.
pub fn detach(a: &Attached) {
    detach_with(a, None, on_old_bridge(a))
}

/// [`detach`] once the sandbox's processes are gone (`down`). `on_bridge`:
/// [`on_old_bridge`], asked before the init was stopped. After the exit the
/// kernel may take the pair away at any moment, and with it the only sign
/// that the tenant was on a bridge: asked then, the last tenant of a bridged
/// corral could leave its bridge, table and leases behind.
pub fn detach_after_exit(a: &Attached, on_bridge: bool) {
    detach_with(a, Some(GONE_WAIT), on_bridge)
}

fn detach_with(a: &Attached, wait: Option<std::time::Duration>, on_bridge: bool) {
    // After the exit, the pair goes with the tenant's namespace: once the
    // init and every process of the sandbox are gone, the kernel's
    // namespace teardown deletes both ends (asynchronously, one teardown for every namespace
    // that died meanwhile). Wait for that rather than delete the host end
    // here: an `RTM_DELLINK` of our own ends in the kernel's `rcu_barrier()`
    // (`netdev_run_todo`), which waits for every RCU callback queued on the
    // host, the teardowns' piles included: measured 0.5 ms per `down` with
    // 10 tenants, 15–170 ms with 5,000, 34 ms per tenant in `down --all`,
    // where waiting is 5–8 ms alone and ≈ 3 ms per tenant in a batch
    // (docs/benchmarks.md, "down without RTM_DELLINK"). Fail closed: a pair
    // still there after [`GONE_WAIT`] (something outside the sandbox holds
    // its namespace, e.g. a socket passed out) is deleted, as it always was;
    // so is one whose namespace is alive (no `wait`). Deleted before the
    // lease goes, so that no next holder of the address meets it.
    // A bridged tenant's port must have left its bridge before the bridge's
    // ports are counted below; that happens after the name leaves the name
    // table (`wait_link_gone`), and before the device's sysfs directory goes.
    let gone = |limit| {
        if on_bridge {
            wait_unregistered(&a.host_if, limit)
        } else {
            wait_link_gone(&a.host_if, limit)
        }
    };
    if !wait.is_some_and(gone) {
        if let Ok(mut nl) = Netlink::open() {
            let _ = nl.request(del_link(&a.host_if));
        }
    }
    let _ = std::fs::remove_file(&a.lease);
    // A bridged corral's lease: <run_dir>/<bridge>/<index>.
    if on_bridge {
        if let (Some(dir), Some(bridge)) = (
            a.lease.parent().and_then(Path::parent),
            a.lease
                .parent()
                .and_then(Path::file_name)
                .and_then(|n| n.to_str()),
        ) {
            let _ = retire_bridges(dir, bridge);
        }
    }
}

/// How long [`detach`] waits for the kernel to take a pair away with its
/// namespace (milliseconds when nothing holds the namespace).
pub const GONE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether the host's interface `name` is gone within `limit`: asked of
/// the kernel by name (`if_nametoindex` in corral's own namespace: a device
/// leaves the name table under the rtnl lock, in the same step that flushes
/// its routes and neighbours, so the next `up`'s netlink requests come
/// after that), every 0.5 ms at first, then less often. Only "no such
/// device" counts as gone; any other failure as there (fail closed).
pub fn wait_link_gone(name: &str, limit: std::time::Duration) -> bool {
    poll_until(limit, || index_of(name) == Err(Errno::ENODEV))
}

/// Whether the host's interface `name` has no sysfs directory within
/// `limit`: the last step of its unregistration (under the rtnl lock, which
/// `if_nametoindex` does not take), after it left the name table and after
/// the notifiers ran that take a port off its bridge. An error other than
/// "not found" counts as there (fail closed).
fn wait_unregistered(name: &str, limit: std::time::Duration) -> bool {
    let path = Path::new("/sys/class/net").join(name);
    poll_until(
        limit,
        || matches!(std::fs::symlink_metadata(&path), Err(e) if e.kind() == std::io::ErrorKind::NotFound),
    )
}

/// Whether `done` holds within `limit`, asked every 0.5 ms at first, then
/// less often (up to every 8 ms).
fn poll_until(limit: std::time::Duration, done: impl Fn() -> bool) -> bool {
    let start = std::time::Instant::now();
    let mut step = std::time::Duration::from_micros(500);
    loop {
        if done() {
            return true;
        }
        let left = limit.saturating_sub(start.elapsed());
        if left.is_zero() {
            return false;
        }
        std::thread::sleep(step.min(left));
        step = (step * 2).min(std::time::Duration::from_millis(8));
    }
}

fn del_link(name: &str) -> Msg {
    let mut m = Msg::new(libc::RTM_DELLINK, 0);
    m.ifinfo(libc::AF_UNSPEC as u8, 0, 0, 0);
    m.attr_str(libc::IFLA_IFNAME, name);
    m
}

/// Write a sysctl of one interface (`/proc/sys/net/<family>/conf/<if>/<key>`).
fn set_conf(family: &str, ifname: &str, key: &str, value: &str) -> std::io::Result<()> {
    std::fs::write(format!("/proc/sys/net/{family}/conf/{ifname}/{key}"), value)
}

fn plug(a: &Attached, pid: i32, host_side: &HostSide, made: &mut bool) -> Result<(), NetError> {
    let relay = host_side.relay;
    let mut host = Netlink::open().map_err(sys("open a netlink socket"))?;
    let make = |host: &mut Netlink| {
        let mut m = Msg::new(libc::RTM_NEWLINK, libc::NLM_F_CREATE | libc::NLM_F_EXCL);
        // Up only once both ends exist (a veth without its peer refuses
        // to open: ENOTCONN).
        m.ifinfo(libc::AF_UNSPEC as u8, 0, 0, 0);
        m.attr_str(libc::IFLA_IFNAME, &a.host_if);
        m.attr(libc::IFLA_ADDRESS, &host_mac(a.address));
        let info = m.nest(libc::IFLA_LINKINFO);
        m.attr_str(libc::IFLA_INFO_KIND, "veth");
        let data = m.nest(libc::IFLA_INFO_DATA);
        let peer = m.nest(VETH_INFO_PEER);
        m.ifinfo(libc::AF_UNSPEC as u8, 0, 0, 0);
        m.attr_str(libc::IFLA_IFNAME, "eth0");
        m.attr(libc::IFLA_ADDRESS, &tenant_mac(a.address));
        m.attr_u32(libc::IFLA_NET_NS_PID, pid as u32);
        m.end(peer);
        m.end(data);
        m.end(info);
        host.request(m)
    };
    match make(&mut host) {
        // A pair of an earlier sandbox of this lease whose namespace the
        // kernel has not destroyed yet (the name is the lease's, which is
        // this tenant's now): remove it, then again. Never a bridge or a
        // bridge's port.
        Err(Errno::EEXIST)
            if master_of(&a.host_if).is_none()
                && !Path::new("/sys/class/net")
                    .join(&a.host_if)
                    .join("bridge")
                    .exists() =>
        {
            let _ = host.request(del_link(&a.host_if));
            make(&mut host)
        }
        r => r,
    }
    .map_err(sys(format!("create the veth pair {}", a.host_if)))?;
    *made = true;
    let host_index = ifindex(&a.host_if)
        .ok_or_else(|| NetError::HostSetup(format!("{} vanished", a.host_if)))?;
    // No IPv6 on the host end: tenants get none, and the host keeps no
    // link-local address there for them to reach (absent when the host has
    // IPv6 off altogether).
    match set_conf("ipv6", &a.host_if, "disable_ipv6", "1") {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(io(format!("disable IPv6 on {}", a.host_if))(e))
        }
        _ => {}
    }
    // With the DNS relay, packets from the tenant may be routed to 127/8
    // (its DNAT target); the input chain admits only those.
    if relay {
        set_conf("ipv4", &a.host_if, "route_localnet", "1").map_err(io(format!(
            "set route_localnet on {} (the DNS relay)",
            a.host_if
        )))?;
    }
    // No address on the host end (the gateway is on lo): the route to the
    // tenant is its own, added once the host end is up (the kernel refuses
    // a route through an interface that is down).
    host.request(set_up(host_index))
        .map_err(sys(format!("set {} up", a.host_if)))?;
    // `ip route add <tenant>/32 dev <host_if> src <gateway>`: the host's
    // own packets to the tenant (replies, ICMP errors, the DNS relay's
    // answers) leave from the gateway address, the one the tenant knows.
    let route = |host: &mut Netlink| host.request(tenant_route(a.address, host_index, a.gateway));
    match route(&mut host) {
        // The gateway is not a local address (EINVAL for the preferred
        // source): someone removed it from lo. Put it back, then again.
        Err(Errno::EINVAL) => {
            gateway_on_lo(&mut host, a.gateway)?;
            route(&mut host)
        }
        // Another `up` found the gateway gone meanwhile and routed every
        // host end again, this new one too ([`ensure_gateway`]): the lease
        // makes the address ours and the host end is the one just made,
        // so the route there is this one.
        Err(Errno::EEXIST) => Ok(()),
        r => r,
    }
    .map_err(sys(format!(
        "route {}/32 via {} from {}",
        a.address, a.host_if, a.gateway
    )))?;
    // `ip neigh add <tenant> lladdr <its eth0's MAC> dev <host_if> nud
    // permanent`: the host does not ask for the tenant by ARP either (the
    // tenant's namespace inherits the host's `arp_ignore`, and the sender
    // address of the host's request would depend on its other addresses),
    // and permanent entries do not count against the neighbour table's
    // `gc_thresh3` (1,024 by default) as thousands of tenants' ARP entries
    // would.
    host.request(neighbour(host_index, a.address, tenant_mac(a.address)))
        .map_err(sys(format!(
            "add the tenant {} to {}'s neighbours",
            a.address, a.host_if
        )))?;

    // The tenant's side, on a netlink socket made in its namespace.
    let mut timestamps = Ok(());
    let (mut inner, eth0) = in_netns(pid, || {
        let nl = Netlink::open()?;
        let eth0 = ifindex("eth0").ok_or(Errno::ENODEV)?;
        // TCP timestamps from the one clock all tenants share, without the
        // random offset per source address: every tenant leaves by the
        // same masquerading address, and NAT may give one tenant's new
        // connection the tuple of another's still in TIME_WAIT on the
        // server, whose PAWS check refuses a SYN whose timestamps come from
        // another offset (measured: two tenants alternating new connections
        // to one server, 333 refused SYNs and a fifth of the rate; none
        // with this). The cost: a server can read the host's uptime from
        // the timestamps (the offset's purpose); the host's own
        // connections keep theirs.
        timestamps = write_net_sysctl("ipv4/tcp_timestamps", "2");
        Ok((nl, eth0))
    })
    .map_err(sys(format!(
        "open a netlink socket in the network namespace of pid {pid}"
    )))?;
    timestamps.map_err(sys(
        "set net.ipv4.tcp_timestamps = 2 in the tenant's network namespace",
    ))?;
    inner.request(set_up(LO_INDEX)).map_err(sys("set lo up"))?;
    inner
        .request(set_up(eth0))
        .map_err(sys("set the tenant's eth0 up"))?;
    // `ip addr add <tenant>/32 peer <gateway> dev eth0`: the gateway is on
    // the link, nothing else is.
    let mut m = Msg::new(libc::RTM_NEWADDR, libc::NLM_F_CREATE | libc::NLM_F_EXCL);
    m.ifaddr(32, eth0);
    m.attr(libc::IFA_LOCAL, &a.address.octets());
    m.attr(libc::IFA_ADDRESS, &a.gateway.octets());
    inner
        .request(m)
        .map_err(sys(format!("add {} to the tenant's eth0", a.address)))?;
    // `ip neigh add <gateway> lladdr <host end's MAC> dev eth0 nud
    // permanent`. The gateway is on the host's lo, not on the host end:
    // whether the host answers ARP for it there depends on host-wide
    // settings an operator may have changed (`arp_ignore = 1` refuses an
    // address not on the interface asked, `2` one outside its subnet), and
    // proxy ARP on the host end would answer for every address, one
    // sysctl more per tenant. A permanent entry needs no answer at all,
    // and the host end's MAC is corral's own (set when the pair was made,
    // so no udev policy changes it afterwards). The tenant cannot change
    // the entry (no CAP_NET_ADMIN); ARP it receives does not override it.
    inner
        .request(neighbour(eth0, a.gateway, host_mac(a.address)))
        .map_err(sys(format!(
            "add the gateway {} to the tenant's neighbours",
            a.gateway
        )))?;
    let mut m = Msg::new(libc::RTM_NEWROUTE, libc::NLM_F_CREATE | libc::NLM_F_EXCL);
    m.rtmsg(0, libc::RT_SCOPE_UNIVERSE);
    m.attr(libc::RTA_GATEWAY, &a.gateway.octets());
    m.attr_u32(libc::RTA_OIF, eth0);
    inner
        .request(m)
        .map_err(sys(format!("route the tenant's traffic via {}", a.gateway)))?;
    Ok(())
}

/// The MAC address of the host end of the tenant at `address`: locally
/// administered, unicast (`02:00:` and the address's four bytes), so one
/// per tenant, and known before the pair is made (the tenant's neighbour
/// entry for its gateway names it).
pub fn host_mac(address: Ipv4Addr) -> [u8; 6] {
    let o = address.octets();
    [0x02, 0x00, o[0], o[1], o[2], o[3]]
}

/// The MAC address of the tenant's eth0 (`02:01:` and its address): the
/// host's permanent neighbour entry for the tenant names it.
pub fn tenant_mac(address: Ipv4Addr) -> [u8; 6] {
    let o = address.octets();
    [0x02, 0x01, o[0], o[1], o[2], o[3]]
}

/// `ip neigh replace <address> lladdr <mac> dev <index> nud permanent`.
fn neighbour(index: u32, address: Ipv4Addr, mac: [u8; 6]) -> Msg {
    let mut m = Msg::new(libc::RTM_NEWNEIGH, libc::NLM_F_CREATE | libc::NLM_F_REPLACE);
    m.ndmsg(index, libc::NUD_PERMANENT);
    m.attr(libc::NDA_DST, &address.octets());
    m.attr(libc::NDA_LLADDR, &mac);
    m
}

/// Write `/proc/sys/net/<rel>` of this thread's network namespace through
/// a procfs instance of its own (the new mount API: made, used and gone
/// with its fds, never attached anywhere).
///
/// Not through the host's /proc: every network namespace whose
/// /proc/sys/net entries are looked up through one procfs instance leaves
/// dentries of its own there, under the same names and so in one hash
/// chain, and from then on every lookup of such a path on the host (the
/// operator's `sysctl`, corral's own) walks one entry per namespace that
/// ever looked: measured 15 µs per open before, 490 µs after 2,000
/// namespaces had looked, and 4–12 ms per open at 5,000 tenants
/// (docs/benchmarks.md). A fresh instance holds this namespace's only.
fn write_net_sysctl(rel: &str, value: &str) -> Result<(), Errno> {
    // <linux/mount.h>; not in the libc crate.
    const FSOPEN_CLOEXEC: libc::c_uint = 1;
    const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
    const FSMOUNT_CLOEXEC: libc::c_uint = 1;
    let fd = |r: libc::c_long| -> Result<OwnedFd, Errno> {
        if r < 0 {
            return Err(Errno::last());
        }
        // SAFETY: a fresh fd from the kernel, owned here only.
        Ok(unsafe { OwnedFd::from_raw_fd(r as i32) })
    };
    // SAFETY: fsopen(2) with a NUL-terminated filesystem name.
    let fs = match fd(unsafe { libc::syscall(libc::SYS_fsopen, c"proc".as_ptr(), FSOPEN_CLOEXEC) })
    {
        Ok(fs) => fs,
        // No new mount API (Linux < 5.2, or a filter that refuses it):
        // through the host's /proc, at the lookup cost described above.
        Err(Errno::ENOSYS | Errno::EPERM) => {
            return std::fs::write(format!("/proc/sys/net/{rel}"), value)
                .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
        }
        Err(e) => return Err(e),
    };
    // SAFETY: fsconfig(2) CMD_CREATE takes no key, value or aux.
    let r = unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        )
    };
    if r < 0 {
        return Err(Errno::last());
    }
    let attrs = libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV | libc::MOUNT_ATTR_NOEXEC;
    // SAFETY: fsmount(2) of the context made above.
    let mnt = fd(unsafe {
        libc::syscall(
            libc::SYS_fsmount,
            fs.as_raw_fd(),
            FSMOUNT_CLOEXEC,
            attrs as libc::c_uint,
        )
    })?;
    let path = CString::new(format!("sys/net/{rel}")).map_err(|_| Errno::EINVAL)?;
    // SAFETY: openat(2) relative to the detached mount, a NUL-terminated path.
    let file = fd(unsafe {
        libc::openat(
            mnt.as_raw_fd(),
            path.as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
        )
    } as libc::c_long)?;
    let mut file = std::fs::File::from(file);
    file.write_all(value.as_bytes())
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
}

/// `ip addr add <gateway>/32 dev lo`, if not there yet. On lo, not on an
/// interface of corral's: the firewall matches the host ends by their name
/// pattern, and lo is the one interface every host has and no one takes
/// down. Scope link, not global: for an interface without an IPv4 address
/// of its own, the kernel picks the host's source address from lo's
/// non-loopback addresses first (`inet_select_addr`), so a global gateway
/// there would become the source of the host's own traffic on unnumbered
/// links (a VPN, another container runtime's veths); the tenants' routes
/// name it as their preferred source, which any local address may be.
/// Returns whether it was missing (and is there now).
fn gateway_on_lo(nl: &mut Netlink, gateway: Ipv4Addr) -> Result<bool, NetError> {
    let mut m = Msg::new(libc::RTM_NEWADDR, libc::NLM_F_CREATE | libc::NLM_F_EXCL);
    m.ifaddr_scoped(32, LO_INDEX, libc::RT_SCOPE_LINK);
    m.attr(libc::IFA_LOCAL, &gateway.octets());
    m.attr(libc::IFA_ADDRESS, &gateway.octets());
    match nl.request(m) {
        Ok(()) => Ok(true),
        Err(Errno::EEXIST) => Ok(false),
        Err(e) => Err(sys(format!("add the tenants' gateway {gateway}/32 to lo"))(
            e,
        )),
    }
}

/// The gateway on lo, at every `up` (one netlink request): if someone
/// removed it, the kernel removed with it every route that named it as
/// the preferred source, i.e. every running tenant's, so those are added
/// again (a host end of the layout before, holding the gateway itself,
/// keeps its own and answers EEXIST).
fn ensure_gateway(net: &Net) -> Result<(), NetError> {
    let mut nl = Netlink::open().map_err(sys("open a netlink socket"))?;
    if !gateway_on_lo(&mut nl, net.gateway())? {
        return Ok(());
    }
    let prefix = format!("{}_", net.cfg.name);
    let Ok(rd) = std::fs::read_dir("/sys/class/net") else {
        return Ok(());
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(index) = name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|i| i.parse::<u32>().ok())
        else {
            continue;
        };
        let (Some(ifi), address) = (ifindex(&net.host_if(index)), net.address(index)) else {
            continue;
        };
        match nl.request(tenant_route(address, ifi, net.gateway())) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => {
                return Err(sys(format!(
                    "route {address}/32 via {} again (the gateway was gone from lo)",
                    net.host_if(index)
                ))(e))
            }
        }
    }
    Ok(())
}

/// `ip route add <tenant>/32 dev <host end> scope link src <gateway>`.
fn tenant_route(address: Ipv4Addr, host_index: u32, gateway: Ipv4Addr) -> Msg {
    let mut m = Msg::new(libc::RTM_NEWROUTE, libc::NLM_F_CREATE | libc::NLM_F_EXCL);
    m.rtmsg(32, libc::RT_SCOPE_LINK);
    m.attr(libc::RTA_DST, &address.octets());
    m.attr_u32(libc::RTA_OIF, host_index);
    m.attr(libc::RTA_PREFSRC, &gateway.octets());
    m
}

/// `ip link set <index> up`.
fn set_up(index: u32) -> Msg {
    let mut m = Msg::new(libc::RTM_NEWLINK, 0);
    m.ifinfo(
        libc::AF_UNSPEC as u8,
        index,
        libc::IFF_UP as u32,
        libc::IFF_UP as u32,
    );
    m
}

/// lo is ifindex 1 in every network namespace.
const LO_INDEX: u32 = 1;
const VETH_INFO_PEER: u16 = 1;

fn ifindex(name: &str) -> Option<u32> {
    index_of(name).ok()
}

/// The index of the interface `name` in corral's namespace, or why not
/// (ENODEV: there is none).
fn index_of(name: &str) -> Result<u32, Errno> {
    let c = CString::new(name).map_err(|_| Errno::EINVAL)?;
    // SAFETY: a NUL-terminated name.
    match unsafe { libc::if_nametoindex(c.as_ptr()) } {
        0 => Err(Errno::last()),
        i => Ok(i),
    }
}

/// Run `f` with this thread in the network namespace of `pid`, then go
/// back (sockets made in there stay in there).
fn in_netns<T>(pid: i32, f: impl FnOnce() -> Result<T, Errno>) -> Result<T, Errno> {
    use nix::sched::{setns, CloneFlags};
    let open = |p: &str| -> Result<OwnedFd, Errno> {
        let fd = nix::fcntl::open(
            p,
            nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )?;
        // SAFETY: a fresh fd from open(2), owned here only.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    let home = open("/proc/thread-self/ns/net")?;
    let theirs = open(&format!("/proc/{pid}/ns/net"))?;
    setns(&theirs, CloneFlags::CLONE_NEWNET)?;
    let r = f();
    if let Err(e) = setns(&home, CloneFlags::CLONE_NEWNET) {
        // Staying in a tenant's namespace would do everything after this
        // in the wrong network: never go on.
        panic!("return to the host's network namespace: {e}");
    }
    r
}

// ------------------------------------------------------------ the host side

/// What the host side decided for every tenant.
struct HostSide {
    /// DNS is relayed to a resolver on the host's loopback.
    relay: bool,
}

/// The host's ephemeral port range (`net.ipv4.ip_local_port_range`).
pub fn host_port_range() -> Option<(u16, u16)> {
    let s = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut it = s.split_whitespace().map(|w| w.parse::<u16>().ok());
    Some((it.next()??, it.next()??))
}

/// Fewer ports than this for the tenants' NAT: no range of their own (all
/// tenants together get one connection per port to one server address
/// and port, so a small range would cap them, e.g. a site's MySQL
/// connections to one database server).
pub const MIN_TENANT_PORTS: u32 = 8192;

/// The source ports for the tenants' masqueraded connections: the larger
/// range of 1024–65535 the host's own ephemeral range (`host`) leaves free,
/// if it holds at least [`MIN_TENANT_PORTS`] (32768–60999, the kernel's
/// default, leaves 1024–32767).
///
/// Why apart: every tenant leaves by the host's address, like the host's
/// own connections. Were a tenant's flow masqueraded to a source port the
/// host has just used to the same server, the server would still hold that
/// connection in TIME_WAIT, with the host's TCP timestamps (each source
/// address has its own random offset); the tenant's SYN then carries
/// timestamps from another clock, the server's PAWS check refuses it
/// (`TcpExtPAWSTimewait`) and the tenant retries a second later. Conntrack
/// does not prevent it: NAT may reuse the tuple of a connection of the
/// host's own (not NATed) once that is in TIME_WAIT. Measured with the host
/// and a tenant opening new connections to one server (docs/benchmarks.md):
/// hundreds of refused SYNs and a third of the rate, none with the ranges
/// apart. Between tenants NAT does the same; there the remedy is one
/// timestamp clock for all of them (`tcp_timestamps = 2` in [`plug`]).
/// The tenants' namespaces keep the kernel's ephemeral range: NAT picks
/// the port in this range, and a tenant's own listener on a port below
/// 32768 (a Node app on 3000) never finds it taken by an outgoing
/// connection.
pub fn tenant_ports(host: (u16, u16)) -> Option<(u16, u16)> {
    let (lo, hi) = (host.0.min(host.1), host.0.max(host.1));
    let below = (lo > 1024).then(|| (1024u16, lo - 1));
    let above = (hi < u16::MAX).then(|| (hi.max(1023) + 1, u16::MAX));
    let size = |r: &Option<(u16, u16)>| r.map_or(0, |(a, b)| u32::from(b) - u32::from(a) + 1);
    let best = if size(&above) > size(&below) {
        above
    } else {
        below
    };
    best.filter(|_| size(&best) >= MIN_TENANT_PORTS)
}

/// The nftables table and the gateway address on lo, installed under a
/// host-wide lock when the rules installed last (kept in
/// `<run_dir>/<name>.nft`) differ from the configuration's, or the gateway
/// put on lo last (`<run_dir>/<name>.gateway`) is not this one (at the
/// first `up` after a boot or an upgrade, or when the host's resolver or
/// ephemeral port range changed), and the gateway on lo ([`ensure_gateway`],
/// every time).
fn ensure_host(net: &Net) -> Result<HostSide, NetError> {
    ensure_gateway(net)?;
    let relay = loopback_nameserver(&net.cfg.resolv_conf);
    let ports = host_port_range().and_then(tenant_ports);
    let side = HostSide {
        relay: relay.is_some(),
    };
    let rules = ruleset(net, &host_nameservers(&net.cfg.resolv_conf), relay, ports);
    let installed = net.rules_file();
    // The table itself is looked for too: a host firewall reload that
    // flushes the whole ruleset (`flush ruleset`, the first line of
    // Debian's /etc/nftables.conf) removes it behind corral's back.
    let ready = || {
        std::fs::read_to_string(&installed).ok().as_deref() == Some(rules.as_str())
            && table_present(&net.table()) == Some(true)
    };
    if ready() {
        return Ok(side);
    }
    std::fs::create_dir_all(&net.cfg.run_dir)
        .map_err(io(format!("create {}", net.cfg.run_dir.display())))?;
    let lock = setup_lock(&net.cfg.run_dir)?;
    if ready() {
        return Ok(side);
    }
    std::fs::write("/proc/sys/net/ipv4/ip_forward", "1")
        .map_err(io("enable IPv4 forwarding (net.ipv4.ip_forward)"))?;
    run("nft", &["-f", "-"], Some(&rules))?;
    // The host ends already up follow a change of the relay.
    let prefix = format!("{}_", net.cfg.name);
    if let Ok(rd) = std::fs::read_dir("/sys/class/net") {
        for e in rd.flatten() {
            if let Some(n) = e.file_name().to_str().filter(|n| n.starts_with(&prefix)) {
                let v = if relay.is_some() { "1" } else { "0" };
                let _ = set_conf("ipv4", n, "route_localnet", v);
            }
        }
    }
    std::fs::write(&installed, &rules).map_err(io(format!("write {}", installed.display())))?;
    drop(lock);
    // What a bridged corral left, unless its tenants are still on it.
    retire_bridges(&net.cfg.run_dir, net.old_bridge())?;
    Ok(side)
}

/// Whether the live ruleset holds table `inet <table>`: one
/// `NFT_MSG_GETTABLE` on a netfilter netlink socket (no exec of `nft`).
/// None when that cannot be asked.
pub fn table_present(table: &str) -> Option<bool> {
    const NFNL_SUBSYS_NFTABLES: u16 = 10;
    const NFT_MSG_GETTABLE: u16 = 1;
    const NFTA_TABLE_NAME: u16 = 1;
    let mut nl = Netlink::open_protocol(libc::NETLINK_NETFILTER).ok()?;
    let mut m = Msg::new((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETTABLE, 0);
    // struct nfgenmsg: family, version (NFNETLINK_V0), resource id (big endian).
    m.buf
        .extend_from_slice(&[libc::NFPROTO_INET as u8, 0, 0, 0]);
    m.attr_str(NFTA_TABLE_NAME, table);
    match nl.request(m) {
        Ok(()) => Some(true),
        Err(Errno::ENOENT) => Some(false),
        Err(_) => None,
    }
}

/// The host-wide lock around installing the rules and removing a bridged
/// corral's bridges (`<run_dir>/setup.lock`, the bridged corral's too),
/// held until dropped.
fn setup_lock(run_dir: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, NetError> {
    let lock_path = run_dir.join("setup.lock");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io(format!("open {}", lock_path.display())))?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| NetError::Sys(format!("lock {}", lock_path.display()), e))
}

/// A bridged corral's bridges on this host: `<bridge>` and its shards
/// `<bridge>1`, `<bridge>2`...
fn old_bridges(bridge: &str) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir("/sys/class/net") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| {
            n.strip_prefix(bridge)
                .is_some_and(|rest| rest.bytes().all(|b| b.is_ascii_digit()))
                && Path::new("/sys/class/net").join(n).join("bridge").exists()
        })
        .collect()
}

/// Remove what a bridged corral (before routed veths) left, under the
/// setup lock: each of its bridges that no tenant is on (no port), and
/// once none is left, its nftables table (`inet corral_<bridge>`), its
/// rules file and its leases. While a tenant of it is still up, its bridge
/// and table stay and keep serving it (its rules name only its bridges).
pub fn retire_bridges(run_dir: &Path, bridge: &str) -> Result<(), NetError> {
    let table = format!("corral_{}", bridge.replace('-', "_"));
    let rules = run_dir.join(format!("{bridge}.nft"));
    let bridges = old_bridges(bridge);
    if bridges.is_empty() && !rules.exists() {
        return Ok(());
    }
    let _lock = setup_lock(run_dir)?;
    let mut left = 0;
    for b in old_bridges(bridge) {
        let ports = std::fs::read_dir(Path::new("/sys/class/net").join(&b).join("brif"))
            .map(|rd| rd.count())
            .unwrap_or(0);
        if ports > 0 {
            left += 1;
            continue;
        }
        let mut nl = Netlink::open().map_err(sys("open a netlink socket"))?;
        match nl.request(del_link(&b)) {
            Ok(()) | Err(Errno::ENODEV) => {}
            Err(e) => return Err(sys(format!("remove the old bridge {b}"))(e)),
        }
    }
    if left == 0 {
        run(
            "nft",
            &["-f", "-"],
            Some(&format!(
                "table inet {table} {{}}\ndelete table inet {table}\n"
            )),
        )?;
        let _ = std::fs::remove_file(&rules);
        let _ = std::fs::remove_dir_all(run_dir.join(bridge));
    }
    Ok(())
}

/// Where `prog` is among the system's program directories. Not looked up
/// on the caller's PATH: corral runs it as root, and callers such as cron
/// jobs, CGI wrappers and `env -i` scripts have a PATH without the sbin
/// directories (the first `corral run` of such a caller brings the sandbox
/// up, and used to fail with "nft: No such file or directory").
fn system_program(prog: &str) -> std::path::PathBuf {
    ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .iter()
        .map(|d| std::path::Path::new(d).join(prog))
        .find(|p| p.is_file())
        .unwrap_or_else(|| std::path::PathBuf::from(prog))
}

fn run(prog: &str, args: &[&str], stdin: Option<&str>) -> Result<(), NetError> {
    use std::process::{Command, Stdio};
    let what = format!("{prog} {}", args.join(" "));
    let mut c = Command::new(system_program(prog));
    c.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = c.spawn().map_err(|e| {
        NetError::HostSetup(format!("{what}: {e} (nftables and iproute2 installed?)"))
    })?;
    if let (Some(text), Some(mut i)) = (stdin, child.stdin.take()) {
        let _ = i.write_all(text.as_bytes());
    }
    let o = child
        .wait_with_output()
        .map_err(|e| NetError::HostSetup(format!("{what}: {e}")))?;
    if !o.status.success() {
        return Err(NetError::HostSetup(format!(
            "{what}: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )));
    }
    Ok(())
}

/// The host's non-loopback IPv4 nameservers (/etc/resolv.conf): tenants may
/// send DNS there even when the `deny` list covers them.
pub fn host_nameservers(resolv_conf: &Path) -> Vec<Ipv4Addr> {
    resolv_nameservers(resolv_conf)
        .into_iter()
        .filter(|a| !a.is_loopback())
        .collect()
}

/// The host's first nameserver on its loopback (systemd-resolved's
/// 127.0.0.53, a local dnsmasq or unbound), which a tenant's namespace cannot
/// reach: DNS sent to the tenants' gateway address is relayed there (DNAT,
/// with `route_localnet` on the host ends), and the sandbox's
/// /etc/resolv.conf names the gateway's address instead
/// ([`relay_resolv_conf`]).
pub fn loopback_nameserver(resolv_conf: &Path) -> Option<Ipv4Addr> {
    resolv_nameservers(resolv_conf)
        .into_iter()
        .find(|a| a.is_loopback())
}

fn resolv_nameservers(resolv_conf: &Path) -> Vec<Ipv4Addr> {
    std::fs::read_to_string(resolv_conf)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("nameserver")).then(|| w.next()?.parse::<Ipv4Addr>().ok())?
        })
        .collect()
}

/// `resolv.conf` text with every loopback nameserver replaced by `relay`
/// (once); None when it names none.
pub fn relay_resolv_conf(text: &str, relay: Ipv4Addr) -> Option<String> {
    let mut out = String::new();
    let (mut found, mut written) = (false, false);
    for l in text.lines() {
        let mut w = l.split_whitespace();
        let loopback = w.next() == Some("nameserver")
            && w.next()
                .and_then(|a| a.parse::<std::net::IpAddr>().ok())
                .is_some_and(|a| a.is_loopback());
        if loopback {
            found = true;
            if !written {
                out.push_str(&format!("nameserver {relay}\n"));
                written = true;
            }
        } else {
            out.push_str(l);
            out.push('\n');
        }
    }
    found.then_some(out)
}

/// The one nftables table of all tenants (replaced whole, atomically).
///
/// The `source` chain (prerouting, at the raw priority: before conntrack
/// looks at the packet) drops what a tenant sends with a source address
/// that is not routed back out of the host end it came in by: strict
/// reverse-path filtering, so no tenant sends as another (nor touches
/// another's conntrack entries). The host ends are point-to-point links
/// with one /32 route each, so the lookup is exact.
///
/// The forward chain starts with `ct state established accept`: every packet
/// of a flow after its first (nearly all of them: keep-alive requests and
/// their answers, in both directions) is accepted after one conntrack state
/// test instead of six interface-name matches and a set lookup (measured:
/// the rule evaluation went from ~2.3 % to ~0.9 % of the CPU time of a
/// keep-alive HTTP client and its server, docs/benchmarks.md). This admits
/// nothing new: a flow is established only once its first packet has passed
/// every base chain (a conntrack entry is confirmed after the last hook; a
/// packet the rules below reject or drop leaves none), so a flow to another
/// tenant, the host or a denied address never gets there. `related` (ICMP
/// errors) still meets the rules. One difference: a destination added to
/// `deny` applies to new flows; flows open when the rules change run until
/// they end, as in any stateful firewall.
pub fn ruleset(
    net: &Net,
    nameservers: &[Ipv4Addr],
    relay_to: Option<Ipv4Addr>,
    ports: Option<(u16, u16)>,
) -> String {
    let t = net.table();
    // Every tenant's host end.
    let p = net.pattern();
    let mut deny: Vec<String> = vec![
        "0.0.0.0/8".into(),
        "127.0.0.0/8".into(),
        "169.254.0.0/16".into(),
        "224.0.0.0/3".into(),
        net.subnet.to_string(),
    ];
    deny.extend(net.deny.iter().map(|c| c.to_string()));
    let dns = if nameservers.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = nameservers.iter().map(|a| a.to_string()).collect();
        format!(
            "    iifname \"{p}\" ip daddr {{ {} }} meta l4proto {{ tcp, udp }} th dport 53 accept\n",
            list.join(", ")
        )
    };
    // DNS to the gateway's address, relayed to the host's loopback resolver.
    let (relay_in, relay_nat) = match relay_to {
        None => (String::new(), String::new()),
        Some(to) => (
            format!(
                "    iifname \"{p}\" ct status dnat meta l4proto {{ tcp, udp }} th dport 53 accept\n"
            ),
            format!(
                "  chain prerouting {{
    type nat hook prerouting priority dstnat; policy accept;
    iifname \"{p}\" fib daddr type local meta l4proto {{ tcp, udp }} th dport 53 dnat ip to {to}
  }}
"
            ),
        ),
    };
    // TCP and UDP leave from the tenants' own port range (see
    // [`tenant_ports`]); the rest (ICMP) by the plain rule below.
    let nat_ports = match ports {
        Some((lo, hi)) => format!(
            "    ip saddr {} oifname != \"{p}\" meta l4proto {{ tcp, udp }} masquerade to :{lo}-{hi}\n",
            net.subnet
        ),
        None => String::new(),
    };
    format!(
        "table inet {t} {{}}
delete table inet {t}
table inet {t} {{
  set deny4 {{
    type ipv4_addr; flags interval; auto-merge
    elements = {{ {deny} }}
  }}
  chain source {{
    type filter hook prerouting priority raw; policy accept;
    iifname \"{p}\" fib saddr . iif oif missing drop
  }}
  chain input {{
    type filter hook input priority filter; policy accept;
    iifname \"{p}\" ct state established,related accept
{relay_in}    iifname \"{p}\" reject with icmpx type admin-prohibited
  }}
{relay_nat}
  chain forward {{
    type filter hook forward priority filter; policy accept;
    ct state established accept
    iifname \"{p}\" oifname \"{p}\" reject with icmpx type admin-prohibited
{dns}    iifname \"{p}\" ip daddr @deny4 reject with icmpx type admin-prohibited
    iifname \"{p}\" meta nfproto ipv6 reject with icmpx type admin-prohibited
    iifname \"{p}\" accept
    oifname \"{p}\" ct state established,related accept
    oifname \"{p}\" drop
  }}
  chain postrouting {{
    type nat hook postrouting priority srcnat; policy accept;
{nat_ports}    ip saddr {subnet} oifname != \"{p}\" masquerade
  }}
}}
",
        deny = deny.join(", "),
        subnet = net.subnet,
    )
}

// ---------------------------------------------------------------- netlink

/// A NETLINK_ROUTE socket: one request at a time, each acknowledged.
struct Netlink {
    fd: OwnedFd,
    seq: u32,
}

impl Netlink {
    fn open() -> Result<Netlink, Errno> {
        Netlink::open_protocol(libc::NETLINK_ROUTE)
    }

    fn open_protocol(protocol: libc::c_int) -> Result<Netlink, Errno> {
        // SAFETY: socket(2) with constant arguments.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                protocol,
            )
        };
        if fd < 0 {
            return Err(Errno::last());
        }
        // SAFETY: a fresh fd from socket(2), owned here only.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: an all-zero sockaddr_nl is the kernel's address.
        let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        kernel.nl_family = libc::AF_NETLINK as u16;
        // SAFETY: connect(2) with a sockaddr_nl of its own size.
        let r = unsafe {
            libc::connect(
                fd.as_raw_fd(),
                (&kernel as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if r < 0 {
            return Err(Errno::last());
        }
        Ok(Netlink { fd, seq: 0 })
    }

    /// Send `m` and wait for its acknowledgement.
    fn request(&mut self, mut m: Msg) -> Result<(), Errno> {
        self.seq += 1;
        let len = m.buf.len() as u32;
        m.buf[0..4].copy_from_slice(&len.to_ne_bytes());
        m.buf[8..12].copy_from_slice(&self.seq.to_ne_bytes());
        // SAFETY: sending a buffer we own; the kernel is the default peer.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), m.buf.as_ptr().cast(), m.buf.len(), 0) };
        if n < 0 {
            return Err(Errno::last());
        }
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: receiving into a stack buffer of that size.
            let n =
                unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                match Errno::last() {
                    Errno::EINTR => continue,
                    e => return Err(e),
                }
            }
            let mut off = 0usize;
            let n = n as usize;
            while off + 16 <= n {
                let u32_at = |o: usize| u32::from_ne_bytes(buf[o..o + 4].try_into().unwrap());
                let len = u32_at(off) as usize;
                let ty = u16::from_ne_bytes([buf[off + 4], buf[off + 5]]);
                let seq = u32_at(off + 8);
                if len < 16 || off + len > n {
                    return Err(Errno::EPROTO);
                }
                if ty == libc::NLMSG_ERROR as u16 && seq == self.seq && len >= 20 {
                    let code = i32::from_ne_bytes(buf[off + 16..off + 20].try_into().unwrap());
                    return if code == 0 {
                        Ok(())
                    } else {
                        Err(Errno::from_raw(-code))
                    };
                }
                off += (len + 3) & !3;
            }
        }
    }
}

/// One netlink message under construction (header filled in by `request`).
struct Msg {
    buf: Vec<u8>,
}

impl Msg {
    fn new(ty: u16, flags: libc::c_int) -> Msg {
        let mut buf = Vec::with_capacity(256);
        buf.extend_from_slice(&0u32.to_ne_bytes()); // length
        buf.extend_from_slice(&ty.to_ne_bytes());
        let f = (libc::NLM_F_REQUEST | libc::NLM_F_ACK | flags) as u16;
        buf.extend_from_slice(&f.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes()); // seq
        buf.extend_from_slice(&0u32.to_ne_bytes()); // pid
        Msg { buf }
    }
    fn pad(&mut self) {
        while self.buf.len() & 3 != 0 {
            self.buf.push(0);
        }
    }
    /// struct ifinfomsg.
    fn ifinfo(&mut self, family: u8, index: u32, flags: u32, change: u32) {
        self.buf.extend_from_slice(&[family, 0, 0, 0]);
        self.buf.extend_from_slice(&(index as i32).to_ne_bytes());
        self.buf.extend_from_slice(&flags.to_ne_bytes());
        self.buf.extend_from_slice(&change.to_ne_bytes());
    }
    /// struct ifaddrmsg (IPv4, global scope).
    fn ifaddr(&mut self, prefix: u8, index: u32) {
        self.ifaddr_scoped(prefix, index, libc::RT_SCOPE_UNIVERSE);
    }
    /// struct ifaddrmsg (IPv4).
    fn ifaddr_scoped(&mut self, prefix: u8, index: u32, scope: u8) {
        self.buf
            .extend_from_slice(&[libc::AF_INET as u8, prefix, 0, scope]);
        self.buf.extend_from_slice(&index.to_ne_bytes());
    }
    /// struct rtmsg: an IPv4 unicast route to a /`dst_len` in the main
    /// table.
    fn rtmsg(&mut self, dst_len: u8, scope: u8) {
        self.buf.extend_from_slice(&[
            libc::AF_INET as u8,
            dst_len,
            0,
            0,
            libc::RT_TABLE_MAIN,
            libc::RTPROT_BOOT,
            scope,
            libc::RTN_UNICAST,
        ]);
        self.buf.extend_from_slice(&0u32.to_ne_bytes());
    }
    /// struct ndmsg: an IPv4 neighbour on interface `index`.
    fn ndmsg(&mut self, index: u32, state: u16) {
        self.buf.extend_from_slice(&[libc::AF_INET as u8, 0, 0, 0]);
        self.buf.extend_from_slice(&(index as i32).to_ne_bytes());
        self.buf.extend_from_slice(&state.to_ne_bytes());
        self.buf.extend_from_slice(&[0, 0]); // flags, type
    }
    fn attr(&mut self, ty: u16, data: &[u8]) {
        self.pad();
        self.buf
            .extend_from_slice(&((4 + data.len()) as u16).to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(data);
        self.pad();
    }
    fn attr_str(&mut self, ty: u16, s: &str) {
        let mut v = s.as_bytes().to_vec();
        v.push(0);
        self.attr(ty, &v);
    }
    fn attr_u32(&mut self, ty: u16, v: u32) {
        self.attr(ty, &v.to_ne_bytes());
    }
    /// Start a nested attribute; [`Msg::end`] sets its length.
    fn nest(&mut self, ty: u16) -> usize {
        self.pad();
        let at = self.buf.len();
        self.buf.extend_from_slice(&0u16.to_ne_bytes());
        self.buf
            .extend_from_slice(&(ty | libc::NLA_F_NESTED as u16).to_ne_bytes());
        at
    }
    fn end(&mut self, at: usize) {
        self.pad();
        let len = (self.buf.len() - at) as u16;
        self.buf[at..at + 2].copy_from_slice(&len.to_ne_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> Net {
        Net::new(NetConfig {
            name: name.into(),
            ..NetConfig::default()
        })
        .unwrap()
    }

    #[test]
    fn host_interface_names_differ_between_networks_and_fit_ifnamsiz() {
        let default = Net::new(NetConfig::default()).unwrap();
        assert_eq!(default.host_if(7), "corral_7");
        let (a, b) = (named("ctest"), named("cbench"));
        assert_ne!(a.host_if(7), default.host_if(7));
        assert_ne!(a.host_if(7), b.host_if(7));
        let last = default.capacity() - 1;
        assert_eq!(default.host_if(last), "corral_65532");
        assert!(named("corral123").host_if(last).len() <= 15);
        // Names are letters and digits: no name's pattern matches another
        // name's host ends, nor a bridged corral's (corral-br, corral-7).
        assert_eq!(default.pattern(), "corral_*");
        assert_eq!(default.table(), "corral_routed");
    }

    #[test]
    fn addresses_leave_out_the_network_the_gateway_and_the_broadcast() {
        let net = Net::new(NetConfig::default()).unwrap();
        assert_eq!(net.gateway(), Ipv4Addr::new(10, 213, 0, 1));
        assert_eq!(net.address(0), Ipv4Addr::new(10, 213, 0, 2));
        // One routed /32 each, no bridge and no /22 shards: the whole /16.
        assert_eq!(net.capacity(), 65_533);
        assert_eq!(net.address(1000), Ipv4Addr::new(10, 213, 3, 234));
        assert_eq!(net.address(65_532), Ipv4Addr::new(10, 213, 255, 254));
        let small = Net::new(NetConfig {
            subnet: "10.9.0.0/24".into(),
            ..NetConfig::default()
        })
        .unwrap();
        assert_eq!(small.capacity(), 253);
        assert_eq!(small.address(252), Ipv4Addr::new(10, 9, 0, 254));
        // What a bridged corral gave: 1,000 tenants per /22.
        assert_eq!(net.old_address(999), Ipv4Addr::new(10, 213, 3, 233));
        assert_eq!(net.old_address(1000), Ipv4Addr::new(10, 213, 4, 2));
    }

    #[test]
    fn bad_configs_are_refused() {
        for (subnet, name) in [
            ("10.213.0.0", "corral"),
            ("10.213.0.0/30", "corral"),
            ("10.213.0.0/16", "toolongname"),
            ("10.0.0.0/8", "corral123"),
            ("10.213.0.0/16", "cor-ral"),
            ("10.213.0.0/16", "cor_ral"),
            ("10.213.0.0/16", ""),
            ("300.1.0.0/16", "corral"),
        ] {
            let cfg = NetConfig {
                subnet: subnet.into(),
                name: name.into(),
                ..NetConfig::default()
            };
            assert!(Net::new(cfg).is_err(), "{subnet} {name}");
        }
        let e = Net::new(NetConfig {
            name: "corral-x".into(),
            ..NetConfig::default()
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("letters or digits") && e.contains("corral-x_0"),
            "{e}"
        );
        // A bridged corral's network.toml still reads.
        let old: NetConfig =
            serde_json::from_str(r#"{"bridge": "corral-br", "ports_per_bridge": 500}"#).unwrap();
        assert!(Net::new(old).is_ok());
    }

    /// A /28 (13 leases) whose leases live in `run_dir`.
    fn small_net(run_dir: &Path) -> Net {
        Net::new(NetConfig {
            subnet: "10.213.0.0/28".into(),
            run_dir: run_dir.into(),
            ..NetConfig::default()
        })
        .unwrap()
    }

    #[test]
    fn leases_are_stable_and_distinct() {
        let dir = tempfile::tempdir().unwrap();
        let net = small_net(dir.path());
        let a = lease(&net, "/run/corral/alice").unwrap();
        assert_eq!(lease(&net, "/run/corral/alice").unwrap(), a, "stable");
        let mut seen = vec![a.0];
        for i in 0..net.capacity() - 1 {
            let (idx, _) = lease(&net, &format!("/run/corral/t{i}")).unwrap();
            assert!(!seen.contains(&idx), "index {idx} given twice");
            seen.push(idx);
        }
        assert!(matches!(lease(&net, "one more"), Err(NetError::Full(_))));
        std::fs::remove_file(&a.1).unwrap();
        assert_eq!(lease(&net, "one more").unwrap().0, a.0, "freed, reused");
    }

    #[test]
    fn leases_skip_the_addresses_a_bridged_corrals_tenants_hold() {
        let dir = tempfile::tempdir().unwrap();
        let net = small_net(dir.path());
        // Its tenants at its leases 0..=5 (10.213.0.2-7) are still up.
        let old = dir.path().join(OLD_BRIDGE);
        std::fs::create_dir_all(&old).unwrap();
        for i in 0..6 {
            std::fs::write(old.join(i.to_string()), "/old/tenant").unwrap();
        }
        let mut got = Vec::new();
        while let Ok((i, _)) = lease(&net, &format!("/run/corral/t{}", got.len())) {
            got.push(net.address(i));
        }
        assert_eq!(got.len() as u32, net.capacity() - 6);
        for a in &got {
            assert!(
                u32::from(*a) >= u32::from(Ipv4Addr::new(10, 213, 0, 8)),
                "{a}"
            );
        }
    }

    #[test]
    fn the_ruleset_names_no_tenant_and_denies_metadata() {
        let net = Net::new(NetConfig {
            deny: vec!["192.168.0.0/16".into()],
            ..NetConfig::default()
        })
        .unwrap();
        let r = ruleset(&net, &[Ipv4Addr::new(10, 255, 255, 53)], None, None);
        assert!(!r.contains("dnat"), "{r}");
        let r2 = ruleset(&net, &[], Some(Ipv4Addr::new(127, 0, 0, 53)), None);
        assert!(
            r2.contains(
                "iifname \"corral_*\" fib daddr type local meta l4proto { tcp, udp } th dport 53 dnat ip to 127.0.0.53"
            ),
            "{r2}"
        );
        assert!(r2.contains("ct status dnat meta l4proto"), "{r2}");
        assert!(r.contains("169.254.0.0/16"));
        assert!(r.contains("10.213.0.0/16, 192.168.0.0/16"));
        assert!(r.contains("ip daddr { 10.255.255.53 }"));
        assert!(r.contains("table inet corral_routed {\n"));
        // Anti-spoofing before conntrack: strict reverse path per host end.
        let src = r.split("chain source {").nth(1).unwrap();
        assert!(src.contains("hook prerouting priority raw"), "{src}");
        assert!(
            src.contains("iifname \"corral_*\" fib saddr . iif oif missing drop"),
            "{src}"
        );
        // Established flows are accepted first, by a rule that names no
        // interface; the isolation rules follow for every new flow.
        let fwd = r.split("chain forward {").nth(1).unwrap();
        let rules: Vec<&str> = fwd
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(rules[1], "ct state established accept", "{fwd}");
        assert!(
            rules[2].starts_with("iifname \"corral_*\" oifname \"corral_*\" reject"),
            "{fwd}"
        );
    }

    #[test]
    fn tenants_are_masqueraded_to_ports_the_hosts_own_range_leaves_free() {
        // The kernel's default leaves 1024-32767 (and the smaller 61000-65535).
        assert_eq!(tenant_ports((32768, 60999)), Some((1024, 32767)));
        // A range low on the scale leaves the top.
        assert_eq!(tenant_ports((1024, 20000)), Some((20001, 65535)));
        assert_eq!(tenant_ports((20000, 1024)), Some((20001, 65535)));
        // Fewer than 8,192 ports left: no range of their own.
        assert_eq!(tenant_ports((1024, 65535)), None);
        assert_eq!(tenant_ports((1500, 65000)), None);
        assert_eq!(tenant_ports((2048, 64000)), None);
        assert_eq!(tenant_ports((9216, 60000)), Some((1024, 9215)));
        assert_eq!(tenant_ports((12000, 56000)), Some((1024, 11999)));
        assert_eq!(tenant_ports((16000, 50000)), Some((50001, 65535)));

        let net = Net::new(NetConfig::default()).unwrap();
        let r = ruleset(&net, &[], None, Some((1024, 32767)));
        let nat = r.split("chain postrouting {").nth(1).unwrap();
        let rules: Vec<&str> = nat.lines().map(str::trim).collect();
        assert_eq!(
            rules[2],
            "ip saddr 10.213.0.0/16 oifname != \"corral_*\" meta l4proto { tcp, udp } masquerade to :1024-32767",
            "{nat}"
        );
        // ICMP and the rest by the plain rule after it.
        assert_eq!(
            rules[3], "ip saddr 10.213.0.0/16 oifname != \"corral_*\" masquerade",
            "{nat}"
        );
        let plain = ruleset(&net, &[], None, None);
        assert!(!plain.contains("masquerade to"), "{plain}");
    }

    #[test]
    fn host_ends_have_a_locally_administered_mac_of_their_tenant() {
        let m = host_mac(Ipv4Addr::new(10, 213, 3, 234));
        assert_eq!(m, [0x02, 0x00, 10, 213, 3, 234]);
        // Locally administered (bit 1), unicast (bit 0 clear).
        assert_eq!(m[0] & 0b11, 0b10);
        assert_ne!(m, host_mac(Ipv4Addr::new(10, 213, 3, 235)));
        let t = tenant_mac(Ipv4Addr::new(10, 213, 3, 234));
        assert_eq!(t, [0x02, 0x01, 10, 213, 3, 234]);
        assert_eq!(t[0] & 0b11, 0b10);
        assert_ne!(t, m);
    }

    #[test]
    fn loopback_nameservers_are_replaced_by_the_relay_once() {
        let relay = Ipv4Addr::new(10, 213, 0, 1);
        let t = "# systemd-resolved\nnameserver 127.0.0.53\nnameserver ::1\noptions edns0 trust-ad\nsearch example.org\n";
        assert_eq!(
            relay_resolv_conf(t, relay).unwrap(),
            "# systemd-resolved\nnameserver 10.213.0.1\noptions edns0 trust-ad\nsearch example.org\n"
        );
        assert_eq!(relay_resolv_conf("nameserver 10.255.255.53\n", relay), None);
    }

    #[test]
    fn a_link_is_gone_at_once_when_absent_and_never_while_it_stays() {
        let t = std::time::Instant::now();
        assert!(wait_link_gone("corral-no-such-if", GONE_WAIT));
        assert!(t.elapsed() < std::time::Duration::from_millis(100));
        // `lo` is in every network namespace: it stays, so the wait ends
        // at its limit, not before.
        let t = std::time::Instant::now();
        let limit = std::time::Duration::from_millis(60);
        assert!(!wait_link_gone("lo", limit));
        assert!(t.elapsed() >= limit, "{:?}", t.elapsed());
        // The same by the sysfs directory (a bridge's port).
        assert!(wait_unregistered("corral-no-such-if", GONE_WAIT));
        let t = std::time::Instant::now();
        assert!(!wait_unregistered("lo", limit));
        assert!(t.elapsed() >= limit, "{:?}", t.elapsed());
    }
}
