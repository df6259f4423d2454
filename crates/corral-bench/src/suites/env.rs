//! The corral side of a benchmark run: a private state directory, a private
//! configuration (the built-in default profile, see [`bench_profile`]), a
//! unique cgroup parent, the tenants' sandboxes and the files put into the
//! tenants' homes. Everything is taken down and removed when the
//! [`BenchEnv`] is dropped, also on errors and Ctrl-C.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::error::{BenchError, Result};
use crate::suites::sys::{self, Output};
use corral_sandbox::state::{Layout, TenantState};

/// A tenant: a Unix user.
#[derive(Debug, Clone)]
pub struct Tenant {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
}

impl Tenant {
    pub fn lookup(name: &str) -> Result<Tenant> {
        match corral_users::Db::system().user_by_name(name) {
            Ok(Some(u)) => Ok(Tenant { name: name.to_string(), uid: u.uid, gid: u.gid, home: u.home }),
            Ok(None) => Err(BenchError::suite(
                "setup",
                format!("tenant {name}: no such user (scripts/test-users.sh creates corral-demo1 and corral-demo2)"),
            )),
            Err(e) => Err(BenchError::suite("setup", format!("tenant {name}: {e}"))),
        }
    }
}

/// How bench sandboxes differ from the built-in default profile: `/tmp` and
/// the PHP session directories live in the bench state directory, the CGI meta-variables pass the environment
/// filter (so `corral run` works as a CGI wrapper), and the plan's limits are
/// raised so they never bind (the CPU quota to every CPU, processes and
/// entry processes high): the suites measure the isolation, not the plan.
/// Namespaces, rootfs, seccomp and cgroup accounting are the default ones.
pub fn bench_profile(default_profile: &str, tmp_dir: &Path, cpus: usize) -> Result<String> {
    let tmp_line = "dir = \"/var/lib/corral/tmp/$USER\"";
    let sessions_line = "src = \"/var/lib/corral/php-sessions/$USER\"";
    let keep_line = "keep = [\"LANG\", \"LC_ALL\", \"TZ\", \"TERM\"]";
    let limits_line = "\n[limits]\n";
    for needle in [tmp_line, sessions_line, keep_line, limits_line] {
        if !default_profile.contains(needle) {
            return Err(BenchError::suite(
                "setup",
                format!("the built-in default profile changed: {needle:?} not found (update corral-bench's bench_profile)"),
            ));
        }
    }
    let keep: Vec<String> = ["LANG", "LC_ALL", "TZ", "TERM"]
        .iter()
        .chain(CGI_VARIABLES)
        .map(|v| format!("{v:?}"))
        .collect();
    Ok(default_profile
        .replace(tmp_line, &format!("dir = \"{}/$USER\"", tmp_dir.display()))
        // PHP session directories next to it (the scale suite's thousands
        // of users leave none on the host).
        .replace(
            sessions_line,
            &format!(
                "src = \"{}/$USER\"",
                tmp_dir.with_file_name("php-sessions").display()
            ),
        )
        .replace(keep_line, &format!("keep = [{}]", keep.join(", ")))
        .replace(
            limits_line,
            &format!(
                "\n[limits]\ncpu = \"{}%\"\nprocesses = 4000\nentry_processes = 500\n",
                cpus.max(1) * 100
            ),
        ))
}

/// CGI/1.1 meta-variables (RFC 3875 §4.1) and what nginx and PHP add.
pub const CGI_VARIABLES: &[&str] = &[
    "AUTH_TYPE",
    "CONTENT_LENGTH",
    "CONTENT_TYPE",
    "GATEWAY_INTERFACE",
    "PATH_INFO",
    "PATH_TRANSLATED",
    "QUERY_STRING",
    "REMOTE_ADDR",
    "REMOTE_HOST",
    "REMOTE_PORT",
    "REMOTE_USER",
    "REQUEST_METHOD",
    "REQUEST_URI",
    "REQUEST_SCHEME",
    "DOCUMENT_URI",
    "DOCUMENT_ROOT",
    "SCRIPT_NAME",
    "SCRIPT_FILENAME",
    "SERVER_ADDR",
    "SERVER_NAME",
    "SERVER_PORT",
    "SERVER_PROTOCOL",
    "SERVER_SOFTWARE",
    "REDIRECT_STATUS",
    "HTTPS",
];

/// One benchmark run's corral environment.
pub struct BenchEnv {
    pub corral: PathBuf,
    /// `<state-dir>/corral-bench-<pid>-XXXX`: state, config and tmp of the run.
    root: Option<tempfile::TempDir>,
    pub state_dir: PathBuf,
    pub config_dir: PathBuf,
    /// `<cgroup parent>/bench-<pid>`.
    pub cgroup_parent: String,
    pub tenants: Vec<Tenant>,
    /// `$HOME/.corral-bench-<pid>` of every tenant (removed at the end).
    home_dirs: Vec<PathBuf>,
}

impl BenchEnv {
    /// Create the private state/config directories below `state_base` and
    /// look the tenants up. Nothing is brought up yet.
    pub fn new(
        corral: &Path,
        state_base: &Path,
        cgroup_base: &str,
        tenants: &[String],
        default_profile: &str,
    ) -> Result<BenchEnv> {
        let tenants = tenants
            .iter()
            .map(|t| Tenant::lookup(t))
            .collect::<Result<Vec<_>>>()?;
        std::fs::create_dir_all(state_base).map_err(|e| BenchError::io(state_base, e))?;
        let root = tempfile::Builder::new()
            .prefix(&format!("corral-bench-{}-", std::process::id()))
            .tempdir_in(state_base)
            .map_err(|e| BenchError::io(state_base, e))?;
        let state_dir = root.path().join("state");
        let config_dir = root.path().join("config");
        let tmp_dir = root.path().join("tmp");
        for d in [&state_dir, &config_dir, &tmp_dir] {
            std::fs::create_dir_all(d).map_err(|e| BenchError::io(d, e))?;
        }
        // Tenants create their /tmp below tmp/ (0755 so it can be traversed).
        let _ = std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755));
        let _ = std::fs::set_permissions(&tmp_dir, std::fs::Permissions::from_mode(0o755));
        let profile = bench_profile(default_profile, &tmp_dir, crate::suites::cpus())?;
        let p = config_dir.join("profile.toml");
        std::fs::write(&p, profile).map_err(|e| BenchError::io(&p, e))?;
        let base = cgroup_base.trim_matches('/');
        let cgroup_parent = if base.is_empty() {
            format!("bench-{}", std::process::id())
        } else {
            format!("{base}/bench-{}", std::process::id())
        };
        Ok(BenchEnv {
            corral: corral.to_path_buf(),
            root: Some(root),
            state_dir,
            config_dir,
            cgroup_parent,
            tenants,
            home_dirs: Vec::new(),
        })
    }

    /// The run's root directory (state, config, tmp).
    pub fn root(&self) -> &Path {
        self.root
            .as_ref()
            .map(|r| r.path())
            .unwrap_or(Path::new("/nonexistent"))
    }

    /// `corral` with this run's state dir, config dir and cgroup parent.
    pub fn corral_cmd(&self) -> Command {
        let mut c = Command::new(&self.corral);
        c.env("CORRAL_STATE_DIR", &self.state_dir)
            .env("CORRAL_CONFIG_DIR", &self.config_dir)
            .env("CORRAL_CGROUP_PARENT", &self.cgroup_parent)
            .env_remove("CORRAL_INIT");
        c
    }

    /// The same settings as command-line options, for wrappers whose
    /// environment is not ours (fcgiwrap passes the request's).
    pub fn global_args(&self) -> Vec<String> {
        vec![
            "--state-dir".into(),
            self.state_dir.display().to_string(),
            "--config-dir".into(),
            self.config_dir.display().to_string(),
            "--cgroup-parent".into(),
            self.cgroup_parent.clone(),
        ]
    }

    /// The run's state directory, as corral lays it out.
    pub fn layout(&self) -> Layout {
        Layout::new(&self.state_dir)
    }

    /// The directory of a running tenant's namespace files: its init's
    /// /proc/PID/ns (corral joins through them; nothing is bind-mounted on
    /// the host).
    pub fn ns_dir(&self, tenant: &str) -> Result<PathBuf> {
        Ok(PathBuf::from(format!(
            "/proc/{}/ns",
            self.tenant_state(tenant)?.init_pid
        )))
    }

    /// A running sandbox's state (its state.json).
    pub fn tenant_state(&self, tenant: &str) -> Result<TenantState> {
        let dir = self.layout().tenant(tenant);
        match dir.read_state() {
            Ok(Some(st)) => Ok(st),
            Ok(None) => Err(BenchError::suite(
                "setup",
                format!(
                    "{}: the sandbox of {tenant} is not up",
                    dir.state().display()
                ),
            )),
            Err(e) => Err(BenchError::io(dir.state(), e)),
        }
    }

    /// The namespace files in join order, from the sandbox's state.
    pub fn namespaces(&self, tenant: &str) -> Result<Vec<String>> {
        Ok(self.tenant_state(tenant)?.namespaces)
    }

    /// `corral up TENANT`; its wall time. With `pin`, under `taskset -c CPU`,
    /// and the tenant init is then pinned to that CPU too: the init starts
    /// with every CPU whatever its starter's affinity (so that commands
    /// without a caller of their own do not inherit it), which in a pinned
    /// setup let its work, and the start of every child it forks, run on
    /// the load generator's CPU (one in six samples of the init's CPU in
    /// the cgi suite's pinned gateway runs, and one migration per request).
    pub fn up(&self, tenant: &str, pin: Option<usize>) -> Result<Duration> {
        let mut c = match pin {
            Some(cpu) => {
                let mut c = Command::new("taskset");
                c.arg("-c").arg(cpu.to_string()).arg(&self.corral);
                c.env("CORRAL_STATE_DIR", &self.state_dir)
                    .env("CORRAL_CONFIG_DIR", &self.config_dir)
                    .env("CORRAL_CGROUP_PARENT", &self.cgroup_parent)
                    .env_remove("CORRAL_INIT");
                c
            }
            None => self.corral_cmd(),
        };
        c.args(["up", tenant]);
        let f = sys::run_bounded(&mut c, Duration::from_secs(60), Output::Capture)?;
        if !f.success() {
            return Err(BenchError::suite(
                "setup",
                format!(
                    "corral up {tenant}: {}",
                    f.describe(Duration::from_secs(60))
                ),
            ));
        }
        if let Some(cpu) = pin {
            let pid = self.tenant_state(tenant)?.init_pid;
            let mut set = nix::sched::CpuSet::new();
            set.set(cpu)
                .and_then(|()| nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(pid), &set))
                .map_err(|e| {
                    BenchError::suite(
                        "setup",
                        format!("pin the init of {tenant} (pid {pid}) to CPU {cpu}: {e}"),
                    )
                })?;
        }
        Ok(f.wall)
    }

    /// `corral down TENANT`.
    pub fn down(&self, tenant: &str) -> Result<()> {
        let mut c = self.corral_cmd();
        c.args(["down", tenant]);
        let f = sys::run_bounded(&mut c, Duration::from_secs(60), Output::Capture)?;
        if !f.success() {
            return Err(BenchError::suite(
                "setup",
                format!(
                    "corral down {tenant}: {}",
                    f.describe(Duration::from_secs(60))
                ),
            ));
        }
        Ok(())
    }

    /// `$HOME/.corral-bench-<pid>/<rel>` of a tenant, created (with its
    /// parents below the home) owned by the tenant, mode 0755.
    pub fn home_dir(&mut self, t: &Tenant, rel: &str) -> Result<PathBuf> {
        let base = t.home.join(format!(".corral-bench-{}", std::process::id()));
        if !self.home_dirs.contains(&base) {
            self.home_dirs.push(base.clone());
        }
        let dir = if rel.is_empty() {
            base.clone()
        } else {
            base.join(rel)
        };
        std::fs::create_dir_all(&dir).map_err(|e| BenchError::io(&dir, e))?;
        let mut p = dir.as_path();
        loop {
            chown(p, t.uid, t.gid)?;
            let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755));
            if p == base {
                break;
            }
            match p.parent() {
                Some(q) => p = q,
                None => break,
            }
        }
        Ok(dir)
    }

    /// Copy `src` to `dst` owned by the tenant with `mode`.
    pub fn install(&self, t: &Tenant, src: &Path, dst: &Path, mode: u32) -> Result<()> {
        std::fs::copy(src, dst).map_err(|e| BenchError::io(dst, e))?;
        chown(dst, t.uid, t.gid)?;
        std::fs::set_permissions(dst, std::fs::Permissions::from_mode(mode))
            .map_err(|e| BenchError::io(dst, e))
    }

    /// Write `text` to `dst` owned by the tenant with `mode`.
    pub fn write_file(&self, t: &Tenant, dst: &Path, text: &str, mode: u32) -> Result<()> {
        std::fs::write(dst, text).map_err(|e| BenchError::io(dst, e))?;
        chown(dst, t.uid, t.gid)?;
        std::fs::set_permissions(dst, std::fs::Permissions::from_mode(mode))
            .map_err(|e| BenchError::io(dst, e))
    }

    /// Take everything down and remove it; returns what could not be
    /// cleaned (also printed by the caller). Runs after Ctrl-C too. If a
    /// sandbox cannot be taken down, the state directory is kept (its init
    /// would otherwise be unreachable) and the problem says how to finish.
    pub fn cleanup(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        let Some(root) = self.root.take() else {
            return problems;
        };
        let mut stuck = Vec::new();
        if let Ok(names) = self.layout().list() {
            for name in names {
                let mut c = self.corral_cmd();
                c.args(["down", &name]);
                match sys::run_cleanup(&mut c, Duration::from_secs(60)) {
                    Ok(f) if f.success() => {}
                    Ok(f) => {
                        problems.push(format!(
                            "corral down {name}: {}",
                            f.describe(Duration::from_secs(60))
                        ));
                        stuck.push(name);
                    }
                    Err(e) => {
                        problems.push(format!("corral down {name}: {e}"));
                        stuck.push(name);
                    }
                }
            }
        }
        for d in self.home_dirs.drain(..) {
            if let Err(e) = std::fs::remove_dir_all(&d) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    problems.push(format!("{}: {e}", d.display()));
                }
            }
        }
        if !stuck.is_empty() {
            let kept = root.keep();
            problems.push(format!(
                "kept {} (sandboxes still up): finish with CORRAL_STATE_DIR={} CORRAL_CONFIG_DIR={} CORRAL_CGROUP_PARENT={} corral down {}, then remove the directory",
                kept.display(),
                self.state_dir.display(),
                self.config_dir.display(),
                self.cgroup_parent,
                stuck.join(" ")
            ));
            return problems;
        }
        problems.extend(remove_cgroups(&self.cgroup_parent));
        // Mounts left behind by a failed `down`: detach them before removing files.
        let needle = root.path().to_string_lossy().into_owned();
        if let Ok(mi) = std::fs::read_to_string("/proc/self/mountinfo") {
            let mut points: Vec<String> = mi
                .lines()
                .filter_map(|l| l.split(' ').nth(4))
                .filter(|mp| mp.starts_with(&needle))
                .map(String::from)
                .collect();
            points.sort_by_key(|p| std::cmp::Reverse(p.len()));
            for mp in points {
                if nix::mount::umount2(mp.as_str(), nix::mount::MntFlags::MNT_DETACH).is_err() {
                    problems.push(format!("could not unmount {mp}"));
                }
            }
        }
        if let Err(e) = root.close() {
            problems.push(format!("remove the bench state directory: {e}"));
        }
        problems
    }
}

impl Drop for BenchEnv {
    fn drop(&mut self) {
        sys::report_cleanup(self.cleanup());
    }
}

fn chown(p: &Path, uid: u32, gid: u32) -> Result<()> {
    std::os::unix::fs::chown(p, Some(uid), Some(gid)).map_err(|e| BenchError::io(p, e))
}

/// Remove `<hierarchy>/<parent>` and everything below it in every cgroup
/// hierarchy (v1 controllers, the unified one, or the v2 root), deepest
/// first. Returns the directories that could not be removed.
pub fn remove_cgroups(parent: &str) -> Vec<String> {
    let mut roots = vec![PathBuf::from("/sys/fs/cgroup").join(parent)];
    if let Ok(rd) = std::fs::read_dir("/sys/fs/cgroup") {
        for e in rd.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                roots.push(e.path().join(parent));
            }
        }
    }
    let mut left = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    for r in roots {
        if !r.is_dir() {
            continue;
        }
        let mut dirs = walk_dirs(&r);
        dirs.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        for d in dirs {
            // A cgroup may need a moment to empty after its processes died.
            let mut ok = false;
            loop {
                if std::fs::remove_dir(&d).is_ok() || !d.exists() {
                    ok = true;
                    break;
                }
                if std::time::Instant::now() >= deadline {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if !ok {
                left.push(format!("could not remove cgroup {}", d.display()));
            }
        }
        // The base it was created under (e.g. corral/), once nothing else is
        // below it: rmdir refuses otherwise, and corral recreates it on demand.
        if parent.trim_matches('/').contains('/') {
            if let Some(base) = r.parent() {
                let _ = std::fs::remove_dir(base);
            }
        }
    }
    left
}

fn walk_dirs(p: &Path) -> Vec<PathBuf> {
    let mut v = vec![p.to_path_buf()];
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                v.extend(walk_dirs(&e.path()));
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAKE: &str = "keep = [\"LANG\", \"LC_ALL\", \"TZ\", \"TERM\"]\n[tmp]\ndir = \"/var/lib/corral/tmp/$USER\"\n\n[limits]\n# x\n[[mount]]\ntype = \"bind\"\nsrc = \"/var/lib/corral/php-sessions/$USER\"\n";

    #[test]
    fn bench_profile_relocates_tmp_and_raises_limits() {
        let p = bench_profile(FAKE, Path::new("/run/x/tmp"), 2).unwrap();
        assert!(p.contains("dir = \"/run/x/tmp/$USER\""), "{p}");
        assert!(p.contains("src = \"/run/x/php-sessions/$USER\""), "{p}");
        assert!(p.contains("\"SCRIPT_FILENAME\""), "{p}");
        assert!(p.contains("cpu = \"200%\""), "{p}");
        assert!(bench_profile("nothing", Path::new("/x"), 2).is_err());
    }
}
