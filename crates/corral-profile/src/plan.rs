//! The plan: a profile expanded for one tenant and validated. It is pure data
//! (like bubblewrap's list of setup operations): `corral up` executes it and
//! nothing in it needs to be looked up again.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A tenant: by default a Unix user, looked up in the passwd database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tenant {
    /// Tenant name: `[a-z_][a-z0-9_.-]{0,31}` (a Unix user name).
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
    pub shell: PathBuf,
    /// Every group of the user (primary first): (name, gid).
    pub groups: Vec<(String, u32)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetMode {
    /// Share the host's network namespace.
    Host,
    /// A new network namespace holding only loopback.
    None,
    /// A new network namespace of its own, joined to the host by a veth
    /// pair routed by the host (no bridge): outbound traffic is routed and
    /// masqueraded, under an egress policy that keeps the host, other
    /// tenants and link-local (cloud metadata) addresses out of reach.
    Private,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Namespaces {
    /// Always true: a sandbox is a mount namespace.
    pub mount: bool,
    pub pid: bool,
    pub ipc: bool,
    pub uts: bool,
    pub cgroup: bool,
    pub net: NetMode,
    /// A user namespace mapping the tenant's uid/gid to themselves.
    pub user: bool,
}

/// One rootfs operation. Every `dst` is an absolute path inside the sandbox,
/// normalised (no `.`, `..`, or repeated `/`). Sources are absolute host paths.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum MountOp {
    /// bind / ro-bind / dev-bind and their -try forms.
    Bind {
        src: PathBuf,
        dst: PathBuf,
        ro: bool,
        dev: bool,
        optional: bool,
        /// `create = true`: `src` is the tenant's own directory, created at
        /// `up` when missing (owned by the tenant, mode 0700; missing
        /// parents root-owned 0711) and refused when it exists as anything
        /// else (a symlink, a file, someone else's). Left out of the JSON
        /// when false, so plans without it keep their digest.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        create: bool,
    },
    Tmpfs {
        dst: PathBuf,
        size: Option<u64>,
        mode: u32,
    },
    Dir {
        dst: PathBuf,
        mode: u32,
    },
    Symlink {
        target: PathBuf,
        dst: PathBuf,
    },
    File {
        dst: PathBuf,
        content: String,
        mode: u32,
    },
    /// Copy a host file's content into a new file (not a bind).
    Copy {
        src: PathBuf,
        dst: PathBuf,
        mode: Option<u32>,
    },
    Proc {
        dst: PathBuf,
    },
    /// A minimal /dev: null zero full random urandom tty, pts, shm.
    Dev {
        dst: PathBuf,
    },
    RemountRo {
        dst: PathBuf,
    },
    /// Mask a path: an empty read-only tmpfs on a directory, /dev/null on a file.
    Hide {
        dst: PathBuf,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TmpPlan {
    /// A disk-backed host directory (created 0700, owned by the tenant)
    /// bound on /tmp; `size` caps it with a project quota (the directory's
    /// project id is the tenant's uid) on a filesystem mounted with them.
    Disk {
        host_dir: PathBuf,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size: Option<u64>,
    },
    Tmpfs {
        size: Option<u64>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvPlan {
    /// Variables passed through from the caller's environment when set.
    pub keep: Vec<String>,
    /// Variables set (after `keep`, so they win).
    pub set: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SeccompAction {
    /// Fail the syscall with EPERM.
    Errno,
    /// Kill the process.
    Kill,
}

impl SeccompAction {
    /// The name a profile gives it (`action = "errno"`).
    pub fn name(self) -> &'static str {
        match self {
            SeccompAction::Errno => "errno",
            SeccompAction::Kill => "kill",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeccompPlan {
    pub enabled: bool,
    pub action: SeccompAction,
    pub allow_ptrace: bool,
    pub allow_io_uring: bool,
    /// Syscall names denied (every call), on top of the default policy.
    pub deny: Vec<String>,
    /// Syscall names allowed (every call, argument rules lifted), on top of
    /// the default allow list.
    pub allow: Vec<String>,
}

impl SeccompPlan {
    /// The default profile's `[seccomp]`: enabled, failing denied calls with
    /// EPERM, ptrace and io_uring denied, the default allow list unchanged.
    pub fn default_policy() -> SeccompPlan {
        SeccompPlan {
            enabled: true,
            action: SeccompAction::Errno,
            allow_ptrace: false,
            allow_io_uring: false,
            deny: vec![],
            allow: vec![],
        }
    }
}

/// Where a limit value came from, so errors can point at file and line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    pub file: PathBuf,
    pub line: usize,
}

/// Limits as written: the limits plan's values (`plans/NAME.toml`, named by
/// the profile's `plan` key) overlaid with the tenant's overrides.
/// corral-limits turns this into typed limits (and reports errors with
/// origin). In code, "plan" alone is the sandbox [`Plan`] (the resolved
/// profile); the named set of limits is always the "limits plan".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LimitsSource {
    /// Limits plan name (`default` if none is given).
    #[serde(alias = "plan")]
    pub limits_plan: String,
    /// Dotted key (e.g. `cpu`, `memory.max`, `io.read_bps`) → value and origin.
    pub values: BTreeMap<String, (toml::Value, Origin)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub tenant: Tenant,
    pub hostname: String,
    /// Working directory inside the sandbox for processes that don't ask for one.
    pub workdir: PathBuf,
    pub namespaces: Namespaces,
    /// In order; the generated /etc/passwd, /etc/group and /tmp come after these.
    pub mounts: Vec<MountOp>,
    pub tmp: TmpPlan,
    pub env: EnvPlan,
    pub seccomp: SeccompPlan,
    pub limits: LimitsSource,
    /// Files the plan was read from (template, tenant override, plan file).
    pub sources: Vec<PathBuf>,
    /// Services the tenant's init supervises (`[services.NAME]`).
    #[serde(default)]
    pub services: Vec<ServicePlan>,
    /// Where each of `mounts` was written, in the same order. Not part of
    /// the plan proper (not serialised, so not in the digest): only for
    /// messages, e.g. the warning about a `*-try` source that is missing.
    #[serde(skip)]
    pub mount_origins: Vec<MountOrigin>,
}

/// Where a `[[mount]]` entry of a plan was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountOrigin {
    /// The file, line and column of its `type`.
    pub at: crate::Location,
    /// `mount[N]`, counted within that file.
    pub key: String,
    /// Its `src` names a tenant variable (`$HOME`, `$USER`...).
    pub per_tenant: bool,
    /// The built-in default template has the same entry (type, src, dst as
    /// written): one of its portable `ro-bind-try` list of distribution
    /// files (/lib32, /etc/pki...), expected to be missing on some systems.
    pub builtin: bool,
}

/// When a supervised service runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StartMode {
    /// Socket activation: started by the first connection to one of its
    /// sockets, stopped again after `idle_timeout_ms` without work.
    OnDemand,
    /// Started with the sandbox.
    AtUp,
}

impl StartMode {
    /// As written in a profile.
    pub fn name(self) -> &'static str {
        match self {
            StartMode::OnDemand => "on-demand",
            StartMode::AtUp => "at-up",
        }
    }
}

/// What the init does when a service's main process exits by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Restart {
    Always,
    /// Only after a non-zero exit or a signal.
    OnFailure,
    Never,
}

/// One service, expanded for the tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServicePlan {
    pub name: String,
    /// Program (looked up on the profile's PATH inside the sandbox) and arguments.
    pub command: Vec<String>,
    /// Added to the profile's `env.set` (the caller's environment never reaches a service).
    pub env: BTreeMap<String, String>,
    pub workdir: PathBuf,
    pub start: StartMode,
    pub restart: Restart,
    /// On-demand services: stop after this long without work (0: never).
    pub idle_timeout_ms: u64,
    pub stop_signal: i32,
    /// SIGKILL this long after the stop signal.
    pub stop_timeout_ms: u64,
    /// Host paths of its listening unix sockets, created by `corral up`
    /// (owned by root, group `listen_gid`, mode `listen_mode`) and passed
    /// to the service as fds 3, 4, ... (`LISTEN_FDS`, `FPM_SOCKETS`).
    pub listen: Vec<PathBuf>,
    pub listen_gid: u32,
    pub listen_mode: u32,
    /// Host file its stdout and stderr go to (timestamped lines, rotated
    /// at `log_max_size` keeping `log_keep` old files).
    pub log: PathBuf,
    pub log_max_size: u64,
    pub log_keep: u32,
}
