//! A network of its own per tenant (`net = "private"`): the host side.
//!
//! Every sandbox with `net = "private"` has its own network namespace (made
//! by `namespaces::create`) joined to the host by a veth pair:
//!
//! ```text
//!  tenant netns            host
//!  eth0 10.213.x.y/16 ==== corral-N ─┐  (bridge port, "isolated on")
//!  default via 10.213.0.1            ├─ corral-br 10.213.0.1/16 ── routing + masquerade
//!  lo 127.0.0.1/8                    ┘  (one nftables table for every tenant)
//! ```
//!
//! * One bridge and one nftables table (`inet corral_<bridge>`) serve every
//!   tenant; both are made at the first `corral up` that needs them and
//!   stay, like Docker's docker0. The rules name the bridge and fixed sets,
//!   never a tenant: their number does not grow with the tenants.
//! * Tenants cannot reach each other: bridge ports are isolated (no frame
//!   goes from one isolated port to another), and what a tenant routes
//!   through the gateway back onto the bridge is dropped.
//! * Nothing of the host is reachable: every packet a tenant sends to an
//!   address of the host (any interface's) meets the input chain, which
//!   lets only replies through. The host's 127.0.0.0/8 and its abstract
//!   Unix sockets are in the host's namespace, out of reach by construction.
//! * Denied on the way out: link-local (cloud metadata 169.254.169.254),
//!   the tenants' subnet, multicast, and the operator's `deny` list (e.g.
//!   RFC 1918); DNS to the host's own nameservers stays allowed. The rest is
//!   masqueraded out of the host's routes.
//! * Per tenant, `corral up` does seven netlink requests (no exec): the
//!   veth pair made with its peer straight in the init's namespace, the
//!   port isolated and up, then in the tenant's namespace lo and eth0 up,
//!   the address and the default route. A lease file (O_EXCL, at an index hashed from the
//!   tenant, probed linearly) gives each tenant a stable address.
//!
//! Tenants hold no capability, so they can neither change their address
//! nor send raw frames (ARP spoofing of another tenant's address).

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
    /// The bridge every tenant's veth joins.
    pub bridge: String,
    /// The tenants' subnet: the bridge takes its first address (the
    /// tenants' gateway), each tenant one of the rest.
    pub subnet: String,
    /// More destinations tenants may not reach, as CIDRs (e.g. RFC 1918:
    /// "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16").
    pub deny: Vec<String>,
    /// Where leases and the setup lock live (tmpfs: gone at reboot, with
    /// the bridge).
    pub run_dir: PathBuf,
    /// The host's resolver configuration: its non-loopback nameservers stay
    /// reachable, a loopback one gets the DNS relay.
    pub resolv_conf: PathBuf,
    /// Tenants per bridge, at most [`PORTS_PER_BRIDGE`] (a Linux bridge
    /// takes at most 1,024 ports); more go to `<bridge>1`, `<bridge>2`...
    pub ports_per_bridge: u32,
}

impl Default for NetConfig {
    fn default() -> NetConfig {
        NetConfig {
            bridge: "corral-br".into(),
            subnet: "10.213.0.0/16".into(),
            deny: Vec::new(),
            run_dir: PathBuf::from("/run/corral-net"),
            resolv_conf: PathBuf::from("/etc/resolv.conf"),
            ports_per_bridge: PORTS_PER_BRIDGE,
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
    #[error("set up the tenants' bridge and firewall: {0}")]
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

impl Net {
    pub fn new(cfg: NetConfig) -> Result<Net, NetError> {
        let subnet = Cidr::parse(&cfg.subnet)?;
        if !(8..=28).contains(&subnet.prefix) {
            return Err(NetError::Config(format!(
                "subnet {} must be between /8 and /28",
                cfg.subnet
            )));
        }
        // Shards are named <bridge><n>, within the kernel's 15 bytes.
        if cfg.bridge.is_empty()
            || cfg.bridge.len() > 10
            || !cfg
                .bridge
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(NetError::Config(format!(
                "bridge {:?}: 1 to 10 of [A-Za-z0-9_-]",
                cfg.bridge
            )));
        }
        if !(1..=PORTS_PER_BRIDGE).contains(&cfg.ports_per_bridge) {
            return Err(NetError::Config(format!(
                "ports_per_bridge {}: from 1 to {PORTS_PER_BRIDGE}",
                cfg.ports_per_bridge
            )));
        }
        let deny = cfg
            .deny
            .iter()
            .map(|s| Cidr::parse(s))
            .collect::<Result<_, _>>()?;
        Ok(Net { cfg, subnet, deny })
    }

    /// The prefix of one bridge's network: a /22 of the subnet (1,024
    /// addresses for at most [`PORTS_PER_BRIDGE`] tenants: a Linux bridge
    /// takes at most 1,024 ports, BR_MAX_PORTS), or the whole subnet when it
    /// is smaller.
    pub fn shard_prefix(&self) -> u8 {
        self.subnet.prefix.max(22)
    }
    fn shards(&self) -> u32 {
        1 << (self.shard_prefix() - self.subnet.prefix)
    }
    fn per_shard(&self) -> u32 {
        ((1u32 << (32 - self.shard_prefix())) - 3).min(self.cfg.ports_per_bridge)
    }
    fn shard_network(&self, shard: u32) -> u32 {
        self.subnet.network() + (shard << (32 - self.shard_prefix()))
    }
    /// The bridge of lease `index`: `<bridge>` for the first
    /// [`PORTS_PER_BRIDGE`] tenants, then `<bridge>1`, `<bridge>2`...
    pub fn bridge_of(&self, index: u32) -> String {
        match index / self.per_shard() {
            0 => self.cfg.bridge.clone(),
            s => format!("{}{s}", self.cfg.bridge),
        }
    }
    /// The gateway of lease `index`: its bridge's address.
    pub fn gateway_of(&self, index: u32) -> Ipv4Addr {
        Ipv4Addr::from(self.shard_network(index / self.per_shard()) + 1)
    }
    /// The first bridge's address.
    pub fn gateway(&self) -> Ipv4Addr {
        self.gateway_of(0)
    }
    /// How many tenants fit.
    pub fn capacity(&self) -> u32 {
        self.shards() * self.per_shard()
    }
    /// Tenant address of lease `index` (0-based): after its bridge's
    /// network and gateway addresses.
    pub fn address(&self, index: u32) -> Ipv4Addr {
        let (shard, slot) = (index / self.per_shard(), index % self.per_shard());
        Ipv4Addr::from(self.shard_network(shard) + 2 + slot)
    }
    fn leases(&self) -> PathBuf {
        self.cfg.run_dir.join(&self.cfg.bridge)
    }
    fn table(&self) -> String {
        format!("corral_{}", self.cfg.bridge.replace('-', "_"))
    }
}

/// Tenants per bridge (a Linux bridge takes at most 1,024 ports).
pub const PORTS_PER_BRIDGE: u32 = 1000;

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
/// from its hash on. `owner` names the tenant across state dirs.
fn lease(net: &Net, owner: &str) -> Result<(u32, PathBuf), NetError> {
    let dir = net.leases();
    std::fs::create_dir_all(&dir).map_err(io(format!("create {}", dir.display())))?;
    // The first bridge fills first (from the tenant's hash on), then the
    // next: a bridge is made only when the ones before are full.
    let per = net.per_shard();
    let start = fnv(owner) % per;
    let order = (0..net.shards()).flat_map(|s| (0..per).map(move |i| s * per + (start + i) % per));
    for index in order {
        let p = dir.join(index.to_string());
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)
        {
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

/// The host end's name for lease `index`: `corral-N` on the default
/// bridge, else prefixed with a hash of the bridge's name, so that two
/// configurations on one host (a test's or a benchmark's own bridge next to
/// the operator's) never name two tenants' pairs alike. At most 15 bytes
/// (IFNAMSIZ - 1).
fn host_if_name(net: &Net, index: u32) -> String {
    if net.cfg.bridge == NetConfig::default().bridge {
        format!("corral-{index}")
    } else {
        format!("c{:05x}-{index}", fnv(&net.cfg.bridge) & 0xf_ffff)
    }
}

/// Whether the interface `name` is a port of the bridge `bridge`.
fn is_port_of(name: &str, bridge: &str) -> bool {
    std::fs::read_link(Path::new("/sys/class/net").join(name).join("master"))
        .ok()
        .and_then(|t| t.file_name().map(|n| n == bridge))
        .unwrap_or(false)
}

/// Attach the network namespace of `pid` (new, holding only lo) to the
/// tenants' bridge: make the bridge and firewall at first use, lease an
/// address, create the veth pair and configure both ends. On failure,
/// nothing of the tenant's stays (the bridge and the table do).
pub fn attach(net: &Net, owner: &str, pid: i32) -> Result<Attached, NetError> {
    ensure_host(net)?;
    let (index, lease_path) = lease(net, owner)?;
    let a = Attached {
        host_if: host_if_name(net, index),
        address: net.address(index),
        gateway: net.gateway_of(index),
        lease: lease_path,
    };
    let bridge = net.bridge_of(index);
    let plugged = ensure_bridge(net, &bridge, a.gateway).and_then(|()| plug(net, &a, &bridge, pid));
    match plugged {
        Ok(()) => Ok(a),
        Err(e) => {
            // What this attach made; an interface of that name on another
            // bridge (another configuration's tenant) stays.
            if is_port_of(&a.host_if, &bridge) {
                detach(&a);
            } else {
                let _ = std::fs::remove_file(&a.lease);
            }
            Err(e)
        }
    }
}

/// Remove what [`attach`] made for a tenant. The veth pair goes with the
/// tenant's namespace anyway, but asynchronously: deleted here so that the
/// next `up` finds its name free.
pub fn detach(a: &Attached) {
    if let Ok(mut nl) = Netlink::open() {
        let mut m = Msg::new(libc::RTM_DELLINK, 0);
        m.ifinfo(libc::AF_UNSPEC as u8, 0, 0, 0);
        m.attr_str(libc::IFLA_IFNAME, &a.host_if);
        let _ = nl.request(m);
    }
    let _ = std::fs::remove_file(&a.lease);
}

fn plug(net: &Net, a: &Attached, bridge_name: &str, pid: i32) -> Result<(), NetError> {
    let mut host = Netlink::open().map_err(sys("open a netlink socket"))?;
    let bridge = ifindex(bridge_name)
        .ok_or_else(|| NetError::HostSetup(format!("bridge {bridge_name} vanished")))?;
    let make = |host: &mut Netlink| {
        let mut m = Msg::new(libc::RTM_NEWLINK, libc::NLM_F_CREATE | libc::NLM_F_EXCL);
        // Up only once both ends exist (a veth without its peer refuses
        // to open: ENOTCONN).
        m.ifinfo(libc::AF_UNSPEC as u8, 0, 0, 0);
        m.attr_str(libc::IFLA_IFNAME, &a.host_if);
        m.attr_u32(libc::IFLA_MASTER, bridge);
        let info = m.nest(libc::IFLA_LINKINFO);
        m.attr_str(libc::IFLA_INFO_KIND, "veth");
        let data = m.nest(libc::IFLA_INFO_DATA);
        let peer = m.nest(VETH_INFO_PEER);
        m.ifinfo(libc::AF_UNSPEC as u8, 0, 0, 0);
        m.attr_str(libc::IFLA_IFNAME, "eth0");
        m.attr_u32(libc::IFLA_NET_NS_PID, pid as u32);
        m.end(peer);
        m.end(data);
        m.end(info);
        host.request(m)
    };
    match make(&mut host) {
        // A pair of an earlier sandbox of this lease whose namespace the
        // kernel has not destroyed yet: remove it, then again. Only a port
        // of this bridge: an interface of that name elsewhere is not ours.
        Err(Errno::EEXIST) if is_port_of(&a.host_if, bridge_name) => {
            let mut m = Msg::new(libc::RTM_DELLINK, 0);
            m.ifinfo(libc::AF_UNSPEC as u8, 0, 0, 0);
            m.attr_str(libc::IFLA_IFNAME, &a.host_if);
            let _ = host.request(m);
            make(&mut host)
        }
        r => r,
    }
    .map_err(sys(format!("create the veth pair {}", a.host_if)))?;
    let host_index = ifindex(&a.host_if)
        .ok_or_else(|| NetError::HostSetup(format!("{} vanished", a.host_if)))?;
    // `bridge link set dev corral-N isolated on`.
    let mut m = Msg::new(libc::RTM_SETLINK, 0);
    m.ifinfo(libc::AF_BRIDGE as u8, host_index, 0, 0);
    let p = m.nest(libc::IFLA_PROTINFO);
    m.attr_u8(IFLA_BRPORT_ISOLATED, 1);
    m.end(p);
    host.request(m)
        .map_err(sys(format!("isolate bridge port {}", a.host_if)))?;
    let mut m = Msg::new(libc::RTM_NEWLINK, 0);
    m.ifinfo(
        libc::AF_UNSPEC as u8,
        host_index,
        libc::IFF_UP as u32,
        libc::IFF_UP as u32,
    );
    host.request(m)
        .map_err(sys(format!("set {} up", a.host_if)))?;

    // The tenant's side, on a netlink socket made in its namespace.
    let (mut inner, eth0) = in_netns(pid, || {
        let nl = Netlink::open()?;
        let eth0 = ifindex("eth0").ok_or(Errno::ENODEV)?;
        Ok((nl, eth0))
    })
    .map_err(sys(format!(
        "open a netlink socket in the network namespace of pid {pid}"
    )))?;
    let mut m = Msg::new(libc::RTM_NEWLINK, 0);
    m.ifinfo(
        libc::AF_UNSPEC as u8,
        LO_INDEX,
        libc::IFF_UP as u32,
        libc::IFF_UP as u32,
    );
    inner.request(m).map_err(sys("set lo up"))?;
    let mut m = Msg::new(libc::RTM_NEWLINK, 0);
    m.ifinfo(
        libc::AF_UNSPEC as u8,
        eth0,
        libc::IFF_UP as u32,
        libc::IFF_UP as u32,
    );
    inner.request(m).map_err(sys("set the tenant's eth0 up"))?;
    let mut m = Msg::new(libc::RTM_NEWADDR, libc::NLM_F_CREATE | libc::NLM_F_EXCL);
    m.ifaddr(net.shard_prefix(), eth0);
    m.attr(libc::IFA_LOCAL, &a.address.octets());
    m.attr(libc::IFA_ADDRESS, &a.address.octets());
    inner
        .request(m)
        .map_err(sys(format!("add {} to the tenant's eth0", a.address)))?;
    let mut m = Msg::new(libc::RTM_NEWROUTE, libc::NLM_F_CREATE | libc::NLM_F_EXCL);
    m.rtmsg();
    m.attr(libc::RTA_GATEWAY, &a.gateway.octets());
    m.attr_u32(libc::RTA_OIF, eth0);
    inner
        .request(m)
        .map_err(sys(format!("route the tenant's traffic via {}", a.gateway)))?;
    Ok(())
}

/// lo is ifindex 1 in every network namespace.
const LO_INDEX: u32 = 1;
const VETH_INFO_PEER: u16 = 1;
/// linux/if_link.h (not in libc).
const IFLA_BRPORT_ISOLATED: u16 = 33;

fn ifindex(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    // SAFETY: a NUL-terminated name.
    match unsafe { libc::if_nametoindex(c.as_ptr()) } {
        0 => None,
        i => Some(i),
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

/// The bridge and the nftables table, made under a host-wide lock when the
/// bridge is not up or the rules installed last (kept in
/// `<run_dir>/<bridge>.nft`) differ from the configuration's; the bridge
/// is set up last, so a bridge that is up means both are there (each step
/// is idempotent: a setup cut short is finished by the next).
fn ensure_host(net: &Net) -> Result<(), NetError> {
    let br = &net.cfg.bridge;
    let relay = loopback_nameserver(&net.cfg.resolv_conf);
    let rules = ruleset(net, &host_nameservers(&net.cfg.resolv_conf), relay);
    let installed = net.cfg.run_dir.join(format!("{br}.nft"));
    let ready =
        || is_up(br) && std::fs::read_to_string(&installed).ok().as_deref() == Some(rules.as_str());
    if ready() {
        return Ok(());
    }
    std::fs::create_dir_all(&net.cfg.run_dir)
        .map_err(io(format!("create {}", net.cfg.run_dir.display())))?;
    let _lock = setup_lock(net)?;
    if ready() {
        return Ok(());
    }
    run("nft", &["-f", "-"], Some(&rules))?;
    std::fs::write(&installed, &rules).map_err(io(format!("write {}", installed.display())))?;
    std::fs::write("/proc/sys/net/ipv4/ip_forward", "1")
        .map_err(io("enable IPv4 forwarding (net.ipv4.ip_forward)"))?;
    // Every bridge already made is set up again (its address, the relay's
    // route_localnet), the first one last: up means ready.
    for s in 1..net.shards() {
        let index = s * net.per_shard();
        let b = net.bridge_of(index);
        if Path::new("/sys/class/net").join(&b).exists() {
            setup_bridge(net, &b, net.gateway_of(index), relay.is_some())?;
        }
    }
    setup_bridge(net, br, net.gateway(), relay.is_some())
}

/// Whether interface `name` exists and is up.
fn is_up(name: &str) -> bool {
    std::fs::read_to_string(format!("/sys/class/net/{name}/flags"))
        .ok()
        .and_then(|s| u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok())
        .is_some_and(|f| f & libc::IFF_UP as u32 != 0)
}

/// The host-wide lock around making bridges and installing the rules
/// (`<run_dir>/setup.lock`), held until dropped.
fn setup_lock(net: &Net) -> Result<nix::fcntl::Flock<std::fs::File>, NetError> {
    let lock_path = net.cfg.run_dir.join("setup.lock");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io(format!("open {}", lock_path.display())))?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| NetError::Sys(format!("lock {}", lock_path.display()), e))
}

/// A bridge of the tenants (a shard), made under the setup lock when it
/// does not exist yet (the first one is made by [`ensure_host`]).
fn ensure_bridge(net: &Net, bridge: &str, gateway: Ipv4Addr) -> Result<(), NetError> {
    if is_up(bridge) {
        return Ok(());
    }
    let _lock = setup_lock(net)?;
    if is_up(bridge) {
        return Ok(());
    }
    let relay = loopback_nameserver(&net.cfg.resolv_conf).is_some();
    setup_bridge(net, bridge, gateway, relay)
}

/// Make (if needed) and configure one bridge: no IPv6, exactly its
/// gateway address on its /22, route_localnet for the DNS relay, up.
fn setup_bridge(net: &Net, br: &str, gateway: Ipv4Addr, relay: bool) -> Result<(), NetError> {
    if !Path::new("/sys/class/net").join(br).exists() {
        run("ip", &["link", "add", br, "type", "bridge"], None)?;
    }
    // No IPv6 on the bridge: tenants get none, and the host keeps no
    // link-local address there for them to reach.
    let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{br}/disable_ipv6"), "1");
    // Exactly one address: an older one with another prefix (the whole
    // subnet, before bridges were sharded) would route other shards' replies
    // here.
    run("ip", &["-4", "addr", "flush", "dev", br], None)?;
    let gw = format!("{gateway}/{}", net.shard_prefix());
    run("ip", &["addr", "add", &gw, "dev", br], None)?;
    // With a relay, packets from the bridge may be routed to 127/8 (its
    // DNAT target); the input chain admits only those.
    let localnet = if relay { "1" } else { "0" };
    std::fs::write(
        format!("/proc/sys/net/ipv4/conf/{br}/route_localnet"),
        localnet,
    )
    .map_err(io("set route_localnet on the bridge (the DNS relay)"))?;
    run("ip", &["link", "set", br, "up"], None)
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
/// reach: DNS sent to the bridge's address is relayed there (DNAT, with
/// `route_localnet` on the bridge), and the sandbox's /etc/resolv.conf names
/// the bridge's address instead ([`relay_resolv_conf`]).
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
pub fn ruleset(net: &Net, nameservers: &[Ipv4Addr], relay_to: Option<Ipv4Addr>) -> String {
    let t = net.table();
    // Every bridge: the first and its shards (<bridge>1, <bridge>2...).
    let br = format!("{}*", net.cfg.bridge);
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
            "    iifname \"{br}\" ip daddr {{ {} }} meta l4proto {{ tcp, udp }} th dport 53 accept\n",
            list.join(", ")
        )
    };
    // DNS to the bridge's address, relayed to the host's loopback resolver.
    let (relay_in, relay_nat) = match relay_to {
        None => (String::new(), String::new()),
        Some(to) => (
            format!(
                "    iifname \"{br}\" ct status dnat meta l4proto {{ tcp, udp }} th dport 53 accept\n"
            ),
            format!(
                "  chain prerouting {{
    type nat hook prerouting priority dstnat; policy accept;
    iifname \"{br}\" fib daddr type local meta l4proto {{ tcp, udp }} th dport 53 dnat ip to {to}
  }}
"
            ),
        ),
    };
    format!(
        "table inet {t} {{}}
delete table inet {t}
table inet {t} {{
  set deny4 {{
    type ipv4_addr; flags interval; auto-merge
    elements = {{ {deny} }}
  }}
  chain input {{
    type filter hook input priority filter; policy accept;
    iifname \"{br}\" ct state established,related accept
{relay_in}    iifname \"{br}\" reject with icmpx type admin-prohibited
  }}
{relay_nat}
  chain forward {{
    type filter hook forward priority filter; policy accept;
    ct state established accept
    iifname \"{br}\" oifname \"{br}\" reject with icmpx type admin-prohibited
{dns}    iifname \"{br}\" ip daddr @deny4 reject with icmpx type admin-prohibited
    iifname \"{br}\" meta nfproto ipv6 reject with icmpx type admin-prohibited
    iifname \"{br}\" accept
    oifname \"{br}\" ct state established,related accept
    oifname \"{br}\" drop
  }}
  chain postrouting {{
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr {subnet} oifname != \"{br}\" masquerade
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
        // SAFETY: socket(2) with constant arguments.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
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
        self.buf
            .extend_from_slice(&[libc::AF_INET as u8, prefix, 0, libc::RT_SCOPE_UNIVERSE]);
        self.buf.extend_from_slice(&index.to_ne_bytes());
    }
    /// struct rtmsg: an IPv4 default route in the main table.
    fn rtmsg(&mut self) {
        self.buf.extend_from_slice(&[
            libc::AF_INET as u8,
            0,
            0,
            0,
            libc::RT_TABLE_MAIN,
            libc::RTPROT_BOOT,
            libc::RT_SCOPE_UNIVERSE,
            libc::RTN_UNICAST,
        ]);
        self.buf.extend_from_slice(&0u32.to_ne_bytes());
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
    fn attr_u8(&mut self, ty: u16, v: u8) {
        self.attr(ty, &[v]);
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

    #[test]
    fn host_interface_names_differ_between_bridges_and_fit_ifnamsiz() {
        let default = Net::new(NetConfig::default()).unwrap();
        assert_eq!(host_if_name(&default, 7), "corral-7");
        let other = |bridge: &str| {
            Net::new(NetConfig {
                bridge: bridge.into(),
                ..NetConfig::default()
            })
            .unwrap()
        };
        let (a, b) = (other("ctest-br"), other("cbench-br"));
        assert_ne!(host_if_name(&a, 7), host_if_name(&default, 7));
        assert_ne!(host_if_name(&a, 7), host_if_name(&b, 7));
        let last = a.capacity() - 1;
        assert!(
            host_if_name(&a, last).len() <= 15,
            "{}",
            host_if_name(&a, last)
        );
        assert!(host_if_name(&default, last).len() <= 15);
    }

    #[test]
    fn addresses_leave_out_the_network_the_gateway_and_the_broadcast() {
        let net = Net::new(NetConfig::default()).unwrap();
        assert_eq!(net.gateway(), Ipv4Addr::new(10, 213, 0, 1));
        assert_eq!(net.address(0), Ipv4Addr::new(10, 213, 0, 2));
        // 64 bridges of 1,000 tenants, each on its own /22.
        assert_eq!(net.capacity(), 64_000);
        assert_eq!(net.address(999), Ipv4Addr::new(10, 213, 3, 233));
        assert_eq!(net.bridge_of(999), "corral-br");
        assert_eq!(net.address(1000), Ipv4Addr::new(10, 213, 4, 2));
        assert_eq!(net.gateway_of(1000), Ipv4Addr::new(10, 213, 4, 1));
        assert_eq!(net.bridge_of(1000), "corral-br1");
        assert_eq!(net.bridge_of(63_999), "corral-br63");
        assert_eq!(net.address(63_999), Ipv4Addr::new(10, 213, 255, 233));
        // A subnet smaller than a /22 is one bridge.
        let small = Net::new(NetConfig {
            subnet: "10.9.0.0/24".into(),
            ..NetConfig::default()
        })
        .unwrap();
        assert_eq!(small.capacity(), 253);
        assert_eq!(small.address(252), Ipv4Addr::new(10, 9, 0, 254));
        assert_eq!(small.bridge_of(252), "corral-br");
    }

    #[test]
    fn bad_configs_are_refused() {
        for (subnet, bridge) in [
            ("10.213.0.0", "corral-br"),
            ("10.213.0.0/30", "corral-br"),
            ("10.213.0.0/16", "a-bridge-name-too-long"),
            ("10.213.0.0/16", "br;x"),
            ("300.1.0.0/16", "corral-br"),
        ] {
            let cfg = NetConfig {
                subnet: subnet.into(),
                bridge: bridge.into(),
                ..NetConfig::default()
            };
            assert!(Net::new(cfg).is_err(), "{subnet} {bridge}");
        }
    }

    #[test]
    fn leases_are_stable_and_distinct() {
        let dir = tempfile::tempdir().unwrap();
        let net = Net::new(NetConfig {
            subnet: "10.213.0.0/28".into(),
            run_dir: dir.path().into(),
            ..NetConfig::default()
        })
        .unwrap();
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
    fn the_ruleset_names_no_tenant_and_denies_metadata() {
        let net = Net::new(NetConfig {
            deny: vec!["192.168.0.0/16".into()],
            ..NetConfig::default()
        })
        .unwrap();
        let r = ruleset(&net, &[Ipv4Addr::new(10, 255, 255, 53)], None);
        assert!(!r.contains("dnat"), "{r}");
        let r2 = ruleset(&net, &[], Some(Ipv4Addr::new(127, 0, 0, 53)));
        assert!(
            r2.contains(
                "iifname \"corral-br*\" fib daddr type local meta l4proto { tcp, udp } th dport 53 dnat ip to 127.0.0.53"
            ),
            "{r2}"
        );
        assert!(r2.contains("ct status dnat meta l4proto"), "{r2}");
        assert!(r.contains("169.254.0.0/16"));
        assert!(r.contains("10.213.0.0/16, 192.168.0.0/16"));
        assert!(r.contains("ip daddr { 10.255.255.53 }"));
        assert!(r.contains("table inet corral_corral_br {\n"));
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
            rules[2].starts_with("iifname \"corral-br*\" oifname \"corral-br*\" reject"),
            "{fwd}"
        );
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
}
