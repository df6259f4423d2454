//! The blocking half of a request: choose and check the script's tenant,
//! find (or bring up) its sandbox, take an entry-process slot. Runs on
//! tokio's blocking pool: passwd lookups, stat/realpath and `corral up`
//! may all block.

use crate::map::TenantMap;
use crate::safety::{self, CheckedScript};
use corral_limits::EntryGuard;
use corral_sandbox::join::{self, JoinError, Target};
use corral_sandbox::Layout;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

/// Where sandboxes come from: the `corral` binary implements this with its
/// own `up` (profile loading, init path, cgroup parent).
pub trait Sandboxes: Send + Sync + 'static {
    fn layout(&self) -> &Layout;
    /// The tenant's join target, bringing its sandbox up first if needed.
    fn target(&self, tenant: &str) -> anyhow::Result<Target>;
}

/// Why a request does not run: its HTTP status, the rule or step that
/// failed (for the log), and the details.
#[derive(Debug)]
pub struct Failure {
    pub status: u16,
    pub what: String,
}

impl Failure {
    pub fn new(status: u16, what: impl Into<String>) -> Failure {
        Failure { status, what: what.into() }
    }
}

impl From<safety::Refusal> for Failure {
    fn from(r: safety::Refusal) -> Failure {
        Failure { status: r.status, what: r.to_string() }
    }
}

/// A request ready to run.
pub struct Prepared {
    pub script: CheckedScript,
    pub target: Arc<Target>,
    /// Held until the script has exited.
    pub slot: Option<EntryGuard>,
    pub control: PathBuf,
}

pub struct Tenants {
    provider: Box<dyn Sandboxes>,
    map: RwLock<Arc<TenantMap>>,
    cache: Mutex<HashMap<String, Arc<Target>>>,
}

impl Tenants {
    pub fn new(provider: Box<dyn Sandboxes>, map: TenantMap) -> Tenants {
        Tenants { provider, map: RwLock::new(Arc::new(map)), cache: Mutex::new(HashMap::new()) }
    }

    pub fn map(&self) -> Arc<TenantMap> {
        self.map.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn set_map(&self, m: TenantMap) {
        *self.map.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(m);
    }

    pub fn layout(&self) -> &Layout {
        self.provider.layout()
    }

    /// Checks, sandbox, entry slot.
    pub fn prepare(&self, script_filename: &str, host: Option<&str>) -> Result<Prepared, Failure> {
        let map = self.map();
        let script = safety::check(script_filename, host, &map)?;
        let name = script.tenant.name.clone();
        let target = self.target(&name, false)?;
        let slot = match join::entry(self.layout(), &target) {
            Ok(s) => s,
            Err(e @ JoinError::EntryLimit { .. }) => return Err(Failure::new(508, e.to_string())),
            Err(e) => return Err(Failure::new(500, format!("entry slot for {name}: {e}"))),
        };
        let control = self.layout().tenant(&name).control();
        Ok(Prepared { script, target, slot, control })
    }

    /// The cached target while its init is alive; else load it (bringing
    /// the sandbox up). `reload` forces a fresh load.
    pub fn target(&self, tenant: &str, reload: bool) -> Result<Arc<Target>, Failure> {
        if !reload {
            let cached = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(tenant).cloned();
            if let Some(t) = cached.filter(|t| t.state.init_alive()) {
                return Ok(t);
            }
        }
        let t = self.provider.target(tenant).map_err(|e| Failure::new(503, format!("sandbox of {tenant}: {e:#}")))?;
        let t = Arc::new(t);
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).insert(tenant.to_string(), t.clone());
        Ok(t)
    }

    /// Forget a tenant's cached target (e.g. its init went away).
    pub fn forget(&self, tenant: &str) {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).remove(tenant);
    }
}
