//! Before a request runs: choose and check the script's tenant, find (or
//! bring up) its sandbox, take an entry-process slot.
//!
//! Two things in it may block for long: a passwd lookup (NSS can be a
//! network service) and bringing a sandbox up. Both are cached (tenants'
//! passwd entries in [`Users`], sandboxes while their init lives), so a
//! request normally runs [`Tenants::try_prepare`] right on the runtime
//! (some stat calls, one flock); only a cache miss sends it to tokio's
//! blocking pool ([`Tenants::prepare`]), which costs two thread switches.

use crate::control::Pool;
use crate::map::TenantMap;
use crate::safety::{self, CheckedScript};
use crate::users::Users;
use corral_limits::{EntryError, EntrySlots, FdBudget, PooledEntry, SlotPool};
use corral_sandbox::join::{JoinError, Target};
use corral_sandbox::Layout;
use std::collections::HashMap;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

/// Where sandboxes come from: the `corral` binary implements this with its
/// own `up` (profile loading, init path, cgroup parent).
pub trait Sandboxes: Send + Sync + 'static {
    fn layout(&self) -> &Layout;
    /// The tenant's join target, bringing its sandbox up first if needed.
    fn target(&self, tenant: &str) -> anyhow::Result<Target>;
    /// Why the tenant is suspended, if it is (checked on every request).
    fn suspended(&self, _tenant: &str) -> Option<String> {
        None
    }
}

/// Why a request does not run: its HTTP status, the rule or step that
/// failed (for the log), and the details.
#[derive(Debug)]
pub struct Failure {
    pub status: u16,
    pub what: String,
    /// The tenant is suspended: the answer is the suspended page.
    pub suspended: bool,
    /// The tenant the request was for, when known before the failure.
    pub tenant: Option<String>,
}

impl Failure {
    pub fn new(status: u16, what: impl Into<String>) -> Failure {
        Failure {
            status,
            what: what.into(),
            suspended: false,
            tenant: None,
        }
    }
}

impl From<safety::Refusal> for Failure {
    fn from(r: safety::Refusal) -> Failure {
        Failure {
            status: r.status,
            what: r.to_string(),
            suspended: false,
            tenant: r.tenant,
        }
    }
}

/// What a request says about its script: `SCRIPT_FILENAME`, the host
/// (`HTTP_HOST`, else `SERVER_NAME`) and `DOCUMENT_ROOT`.
#[derive(Debug, Clone, Default)]
pub struct Ask {
    pub script_filename: String,
    pub host: Option<String>,
    pub document_root: Option<String>,
}

/// A request ready to run.
pub struct Prepared {
    pub script: CheckedScript,
    pub target: Arc<Target>,
    /// Held until the script has exited.
    pub slot: Option<PooledEntry>,
    pub control: PathBuf,
    /// Idle connections to the tenant's init.
    pub pool: Arc<Pool>,
}

/// A tenant's sandbox as last loaded, while its init lives.
struct Sandbox {
    target: Arc<Target>,
    /// A pidfd of the init: readable once it has exited (one `poll` per
    /// request instead of reading /proc/PID/stat).
    init: Option<OwnedFd>,
    /// The entry-process slots, when the tenant has that limit.
    slots: Option<SlotPool>,
    control: PathBuf,
    /// Idle connections to this init (gone with it: a new init gets a new
    /// sandbox entry and an empty pool).
    pool: Arc<Pool>,
}

impl Sandbox {
    fn new(layout: &Layout, target: Target, budget: &FdBudget) -> Result<Sandbox, Failure> {
        let name = target.state.tenant.clone();
        let dir = layout.tenant(&name);
        let slots = match target.limits.entry_processes {
            Some(limit) => Some(SlotPool::new(
                EntrySlots::open(&dir.entry(), limit)
                    .map_err(|e| Failure::new(500, format!("entry slots of {name}: {e}")))?,
                budget.clone(),
            )),
            None => None,
        };
        // Opened first, then the start time compared: a pid reused before
        // the open is caught by the comparison.
        let init = pidfd_open(target.state.init_pid);
        if !target.state.init_alive() {
            return Err(Failure::new(
                503,
                format!("the init of {name} exited while its sandbox was being loaded"),
            ));
        }
        Ok(Sandbox {
            target: Arc::new(target),
            init,
            slots,
            control: dir.control(),
            pool: Arc::default(),
        })
    }

    fn alive(&self) -> bool {
        match &self.init {
            Some(fd) => {
                let mut fds = [nix::poll::PollFd::new(
                    fd.as_fd(),
                    nix::poll::PollFlags::POLLIN,
                )];
                matches!(
                    nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO),
                    Ok(0)
                )
            }
            None => self.target.state.init_alive(),
        }
    }

    fn slot(&self) -> Result<Option<PooledEntry>, Failure> {
        let Some(slots) = &self.slots else {
            return Ok(None);
        };
        match slots.try_acquire() {
            Ok(g) => Ok(Some(g)),
            Err(EntryError::Full { limit }) => Err(Failure::new(
                508,
                JoinError::EntryLimit {
                    tenant: self.target.state.tenant.clone(),
                    limit,
                }
                .to_string(),
            )),
            Err(e) => Err(Failure::new(
                500,
                format!("entry slot for {}: {e}", self.target.state.tenant),
            )),
        }
    }
}

/// A quarter of the soft `RLIMIT_NOFILE` (256 of Debian's 1,024).
fn slot_files_budget() -> usize {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(0, |(soft, _)| {
            usize::try_from(soft / SLOT_FILES_SHARE).unwrap_or(usize::MAX)
        })
}

fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: integer arguments; a non-negative result is a new fd we own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: pidfd_open returned a new descriptor nothing else owns, so the
    // OwnedFd is its only owner (and closes it once).
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

pub struct Tenants {
    provider: Box<dyn Sandboxes>,
    map: RwLock<Arc<TenantMap>>,
    users: Users,
    cache: Mutex<HashMap<String, Arc<Sandbox>>>,
    /// The entry-slot descriptors every tenant's [`SlotPool`] may keep.
    slot_files: FdBudget,
}

/// The share of the soft `RLIMIT_NOFILE` the entry-slot descriptors may
/// keep (the rest is for connections, pipes and the inits' sockets).
const SLOT_FILES_SHARE: u64 = 4;

impl Tenants {
    pub fn new(provider: Box<dyn Sandboxes>, map: TenantMap) -> Tenants {
        Tenants {
            provider,
            map: RwLock::new(Arc::new(map)),
            users: Users::default(),
            cache: Mutex::new(HashMap::new()),
            slot_files: FdBudget::new(slot_files_budget()),
        }
    }

    pub fn map(&self) -> Arc<TenantMap> {
        self.map.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A new map (SIGHUP); passwd answers are looked up afresh too.
    pub fn set_map(&self, m: TenantMap) {
        *self.map.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(m);
        self.users.clear();
    }

    pub fn layout(&self) -> &Layout {
        self.provider.layout()
    }

    /// Checks, sandbox, entry slot from the caches alone: None when a
    /// passwd lookup or a sandbox load is needed (then [`Self::prepare`],
    /// off the runtime). Never blocks for long.
    pub fn try_prepare(&self, ask: &Ask) -> Result<Option<Prepared>, Failure> {
        self.prepare_with(ask, false)
    }

    /// Checks, sandbox (brought up if needed), entry slot. May block.
    pub fn prepare(&self, ask: &Ask) -> Result<Prepared, Failure> {
        Ok(self
            .prepare_with(ask, true)?
            .expect("a blocking prepare always ends"))
    }

    fn prepare_with(&self, ask: &Ask, may_block: bool) -> Result<Option<Prepared>, Failure> {
        let map = self.map();
        let mut users = |k: &safety::UserKey| match self.users.cached(k) {
            Some(u) => Some(u),
            None if may_block => Some(self.users.lookup(k)),
            None => None,
        };
        let Some(script) = safety::check_with(
            &ask.script_filename,
            ask.host.as_deref(),
            ask.document_root.as_deref(),
            &map,
            &mut users,
        )?
        else {
            return Ok(None);
        };
        // Before the sandbox: a suspended tenant's is not brought up.
        if let Some(reason) = self.provider.suspended(&script.tenant.name) {
            return Err(Failure {
                status: 503,
                what: format!("suspended: {reason}"),
                suspended: true,
                tenant: Some(script.tenant.name.clone()),
            });
        }
        let name = &script.tenant.name;
        let with_tenant = |mut f: Failure| {
            f.tenant.get_or_insert_with(|| name.clone());
            f
        };
        let sandbox = match self.cached(name) {
            Some(s) => s,
            None if may_block => self.load_sandbox(name).map_err(with_tenant)?,
            None => return Ok(None),
        };
        let slot = sandbox.slot().map_err(with_tenant)?;
        Ok(Some(Prepared {
            script,
            target: sandbox.target.clone(),
            slot,
            control: sandbox.control.clone(),
            pool: sandbox.pool.clone(),
        }))
    }

    fn cached(&self, tenant: &str) -> Option<Arc<Sandbox>> {
        let cached = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(tenant)
            .cloned();
        cached.filter(|s| s.alive())
    }

    /// Load the tenant's sandbox afresh (bringing it up if needed) and
    /// cache it. Blocks.
    pub fn reload(&self, tenant: &str) -> Result<(), Failure> {
        self.load_sandbox(tenant).map(drop)
    }

    fn load_sandbox(&self, tenant: &str) -> Result<Arc<Sandbox>, Failure> {
        let t = self
            .provider
            .target(tenant)
            .map_err(|e| Failure::new(503, format!("sandbox of {tenant}: {e:#}")))?;
        let s = Arc::new(Sandbox::new(self.layout(), t, &self.slot_files)?);
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(tenant.to_string(), s.clone());
        Ok(s)
    }

    /// Forget a tenant's cached sandbox (e.g. its init went away).
    pub fn forget(&self, tenant: &str) {
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(tenant);
    }
}
