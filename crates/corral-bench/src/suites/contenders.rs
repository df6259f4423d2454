//! How each contender runs a program for a tenant: the command lines of
//! `corral run`, an nsenter join of the persisted namespaces (what
//! OpenLiteSpeed does), and bubblewrap with a rootfs comparable to corral's
//! built-in default profile.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::{BenchError, Result};
use crate::suites::env::{BenchEnv, Tenant};

/// Mode names shared by the suites.
pub mod mode {
    pub const BARE: &str = "bare";
    pub const NATIVE: &str = "native";
    /// Native under a one-instruction allow-all seccomp filter.
    pub const SECCOMP_FLOOR: &str = "seccomp-floor";
    /// The seccomp floor in a cgroup of the tenant's depth with the
    /// tenant's limits: the whole kernel floor of a limited tenant.
    pub const FLOOR_CGROUP: &str = "floor-cgroup";
    pub const CORRAL_RUN: &str = "corral-run";
    pub const CORRAL: &str = "corral";
    pub const NSENTER: &str = "nsenter-join";
    /// bench/c/joinwrap.c: setns + fork + exec, the floor for a wrapper.
    pub const C_WRAPPER: &str = "c-wrapper";
    /// The same wrapper linked with musl instead of glibc: no CPU probing
    /// before `main` (glibc's costs 0.28 ms per exec in a VM, where each
    /// `cpuid` traps), the floor for a wrapper without the C library's
    /// start-up, as `corral` itself is built.
    pub const C_WRAPPER_MUSL: &str = "c-wrapper-musl";
    pub const BUBBLEWRAP: &str = "bubblewrap";
    pub const GATEWAY: &str = "corral-gateway";
}

/// `corral --state-dir … run [--cwd DIR] TENANT --`: append the program.
pub fn corral_run(env: &BenchEnv, t: &Tenant, cwd: Option<&Path>) -> Vec<String> {
    corral_run_with(&env.corral, &env.global_args(), t, cwd)
}

/// [`corral_run`] from its parts (no borrow of the environment).
pub fn corral_run_with(
    corral: &Path,
    global: &[String],
    t: &Tenant,
    cwd: Option<&Path>,
) -> Vec<String> {
    let mut v = vec![corral.display().to_string()];
    v.extend(global.iter().cloned());
    v.push("run".into());
    if let Some(d) = cwd {
        v.push("--cwd".into());
        v.push(d.display().to_string());
    }
    v.push(t.name.clone());
    v.push("--".into());
    v
}

/// `nsenter --mount=… --pid=… … [--wdns=DIR] -- setpriv --reuid … --`: join
/// the tenant's persisted namespace files (no /proc scan), then drop to the
/// tenant's ids. Like OpenLiteSpeed's namespace join: no cgroup, seccomp or
/// rlimits. Append the program.
pub fn nsenter_join(
    env: &BenchEnv,
    nsenter: &Path,
    setpriv: &Path,
    t: &Tenant,
    wd: Option<&Path>,
) -> Result<Vec<String>> {
    let ns = env.ns_dir(&t.name)?;
    let mut v = vec![nsenter.display().to_string()];
    for name in env.namespaces(&t.name)? {
        let opt = match name.as_str() {
            "mnt" => "mount",
            "pid" => "pid",
            "ipc" => "ipc",
            "uts" => "uts",
            "cgroup" => "cgroup",
            "net" => "net",
            "user" => "user",
            "time" => "time",
            other => {
                return Err(BenchError::suite(
                    "setup",
                    format!("unknown namespace file {other}"),
                ));
            }
        };
        v.push(format!("--{opt}={}", ns.join(&name).display()));
    }
    if let Some(d) = wd {
        v.push(format!("--wdns={}", d.display()));
    }
    v.push("--".into());
    v.push(setpriv.display().to_string());
    v.push(format!("--reuid={}", t.uid));
    v.push(format!("--regid={}", t.gid));
    v.push("--clear-groups".into());
    v.push("--".into());
    Ok(v)
}

/// Read-only binds of the built-in default profile (skipped when absent).
const ETC_BINDS: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/protocols",
    "/etc/services",
    "/etc/resolv.conf",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/crypto-policies",
    "/etc/alternatives",
    "/etc/php",
    "/etc/php.ini",
    "/etc/php.d",
    "/etc/mime.types",
    "/etc/magic",
    "/etc/magic.mime",
    "/etc/fonts",
    "/etc/os-release",
    "/etc/lsb-release",
    "/etc/debian_version",
    "/etc/shells",
    "/etc/profile",
    "/etc/profile.d",
    "/etc/bash.bashrc",
    "/etc/inputrc",
];

/// Per-tenant files bubblewrap binds: a generated passwd and group (the
/// tenant only, like corral's) and a private /tmp.
pub struct BwrapTenant {
    pub etc: PathBuf,
    pub tmp: PathBuf,
}

/// Prepare `dir/<tenant>/{etc,tmp}` for bubblewrap runs of `t`.
pub fn bwrap_prepare(dir: &Path, t: &Tenant) -> Result<BwrapTenant> {
    let base = dir.join(&t.name);
    let etc = base.join("etc");
    let tmp = base.join("tmp");
    for d in [&base, &etc, &tmp] {
        std::fs::create_dir_all(d).map_err(|e| BenchError::io(d, e))?;
        let _ = std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755));
    }
    std::os::unix::fs::chown(&tmp, Some(t.uid), Some(t.gid))
        .map_err(|e| BenchError::io(&tmp, e))?;
    let _ = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1700));
    let passwd = format!(
        "root:x:0:0:root:/root:/usr/sbin/nologin\n{n}:x:{u}:{g}::{h}:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
        n = t.name,
        u = t.uid,
        g = t.gid,
        h = t.home.display()
    );
    let group = format!(
        "root:x:0:\n{n}:x:{g}:\nnogroup:x:65534:\n",
        n = t.name,
        g = t.gid
    );
    for (name, text) in [("passwd", passwd), ("group", group)] {
        let p = etc.join(name);
        std::fs::write(&p, text).map_err(|e| BenchError::io(&p, e))?;
        let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644));
    }
    Ok(BwrapTenant { etc, tmp })
}

/// `bwrap …rootfs… --chdir DIR --`: the namespaces corral's default profile
/// uses (mount, pid, ipc, uts, cgroup; bubblewrap adds a user namespace when
/// run unprivileged, as here: it runs as the tenant) and the same rootfs
/// (read-only /usr and the /etc files, /proc, a minimal /dev, an empty /run
/// and /var, a private /tmp, the tenant's home). Append the program.
pub fn bwrap(bwrap: &Path, t: &Tenant, files: &BwrapTenant, chdir: &Path) -> Vec<String> {
    let mut v: Vec<String> = vec![bwrap.display().to_string()];
    let mut push = |a: &[&str]| v.extend(a.iter().map(|s| s.to_string()));
    push(&[
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]);
    push(&["--hostname", &t.name]);
    push(&["--ro-bind", "/usr", "/usr"]);
    for top in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
        let p = Path::new(top);
        match std::fs::read_link(p) {
            Ok(target) => push(&["--symlink", &target.display().to_string(), top]),
            Err(_) if p.is_dir() => push(&["--ro-bind", top, top]),
            Err(_) => {}
        }
    }
    for e in ETC_BINDS {
        push(&["--ro-bind-try", e, e]);
    }
    let passwd = files.etc.join("passwd").display().to_string();
    let group = files.etc.join("group").display().to_string();
    push(&[
        "--ro-bind",
        &passwd,
        "/etc/passwd",
        "--ro-bind",
        &group,
        "/etc/group",
    ]);
    push(&[
        "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/run", "--dir", "/var",
    ]);
    push(&["--bind", &files.tmp.display().to_string(), "/tmp"]);
    push(&[
        "--symlink",
        "/tmp",
        "/var/tmp",
        "--symlink",
        "../run",
        "/var/run",
    ]);
    let home = t.home.display().to_string();
    push(&["--bind", &home, &home]);
    push(&["--chdir", &chdir.display().to_string(), "--"]);
    v
}

/// Optional contenders measured by the join suite when installed, as
/// (mode, argv prefix, runs as the tenant).
pub fn optional(tool: &str, path: &Path, t: &Tenant) -> (String, Vec<String>, bool) {
    let p = path.display().to_string();
    match tool {
        // setuid root; drops to the caller (the tenant).
        "firejail" => (
            "firejail".into(),
            vec![p, "--quiet".into(), "--noprofile".into(), "--".into()],
            true,
        ),
        "nsjail" => (
            "nsjail".into(),
            vec![
                p,
                "-Mo".into(),
                "--quiet".into(),
                "--chroot".into(),
                "/".into(),
                "--user".into(),
                t.uid.to_string(),
                "--group".into(),
                t.gid.to_string(),
                "--disable_clone_newnet".into(),
                "--".into(),
            ],
            false,
        ),
        _ => (
            "minijail".into(),
            vec![
                p,
                "-p".into(),
                "-v".into(),
                "-u".into(),
                t.uid.to_string(),
                "-g".into(),
                t.gid.to_string(),
                "--".into(),
            ],
            false,
        ),
    }
}
