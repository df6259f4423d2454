//! What every command needs: where config and state live, and how to find
//! the tenant init binary.

use crate::cli::Global;
use corral_sandbox::Layout;
use std::path::PathBuf;

pub use corral::{EXIT_ENTRY_LIMIT, EXIT_FAILURE};

pub struct Ctx {
    pub layout: Layout,
    pub config_dir: PathBuf,
    pub cgroup_parent: String,
    pub json: bool,
}

impl Ctx {
    pub fn new(g: &Global) -> Ctx {
        Ctx {
            layout: Layout::new(&g.state_dir),
            config_dir: g.config_dir.clone(),
            cgroup_parent: g.cgroup_parent.clone(),
            json: g.json,
        }
    }

    /// corral-init: $CORRAL_INIT, else where corral's programs are
    /// ([`corral::programs::init`]).
    pub fn init_path(&self) -> anyhow::Result<PathBuf> {
        if let Some(p) = std::env::var_os("CORRAL_INIT") {
            return Ok(PathBuf::from(p));
        }
        let exe = std::env::current_exe()?;
        corral::programs::init(&exe).ok_or_else(|| {
            anyhow::anyhow!(
                "corral-init not found next to {} (set CORRAL_INIT)",
                exe.display()
            )
        })
    }

    pub fn up_options(&self) -> anyhow::Result<corral_sandbox::UpOptions> {
        Ok(corral_sandbox::UpOptions {
            init: self.init_path()?,
            cgroup_parent: self.cgroup_parent.clone(),
            net: self.net_config()?,
        })
    }

    /// `network.toml` in the config dir: the tenants' network name, subnet and
    /// extra denied destinations (defaults: [`corral_sandbox::net::NetConfig`]).
    pub fn net_config(&self) -> anyhow::Result<corral_sandbox::net::NetConfig> {
        let p = self.config_dir.join("network.toml");
        match std::fs::read_to_string(&p) {
            Ok(text) => toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Default::default()),
            Err(e) => Err(anyhow::anyhow!("{}: {e}", p.display())),
        }
    }
}

/// A tenant name as `down` accepts it without a passwd lookup (the user may
/// be gone already): a Unix user name, never a path.
pub fn check_tenant_name(name: &str) -> anyhow::Result<()> {
    Ok(corral_users::check_user_name(name)?)
}

/// A connection to a running tenant's init; None when the tenant is not up.
pub fn init_client(
    ctx: &Ctx,
    tenant: &str,
) -> anyhow::Result<Option<corral_sandbox::client::Client>> {
    let dir = ctx.layout.tenant(tenant);
    match dir.read_state() {
        Ok(Some(st)) if st.init_alive() => {}
        _ => return Ok(None),
    }
    corral_sandbox::client::Client::connect(&dir.control())
        .map(Some)
        .map_err(|e| anyhow::anyhow!("{tenant}: connect to the tenant init: {e}"))
}
