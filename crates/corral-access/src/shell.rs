//! `corral-shell`, a login shell that enters the tenant's sandbox.
//!
//! Set as a tenant's shell (`usermod -s /usr/sbin/corral-shell alice`), it
//! is what sshd runs for a login, `ssh host CMD` (`-c CMD`), scp and the
//! sftp-server subsystem, and what `su - alice` runs. It is installed
//! setuid root, like the login shells of jailkit and firejail, because the
//! login has already dropped to the tenant: with root it brings the sandbox
//! up if needed, enters it ([`corral_sandbox::join::enter`]: entry slot,
//! cgroup, namespaces), starts the tenant's real shell (the profile's
//! `shell`) there through the same vfork-and-harden path as `corral run`
//! (the tenant's uid, no capabilities, no_new_privs, the seccomp filter,
//! descriptors closed, the profile's environment rules), then drops every
//! privilege before it waits or relays a terminal. Its configuration is never
//! taken from the environment or the command line, which the tenant
//! controls: only from `corral-access.toml` beside the executable (a
//! relocated install; it must be root's and not writable by others) or
//! `/etc/corral/access.toml`.
//!
//! When `pam_corral.so` has already placed the session in the sandbox (the
//! setuid bit then has no effect: no_new_privs), it only runs the real
//! shell, through a terminal of the sandbox's own if it was handed one from
//! outside (su).

use crate::config::{AccessConfig, DEFAULT_PATH};
use crate::pty;
use crate::session::{self, EnterError};
use corral_sandbox::join;
use corral_sandbox::spawn::{environment, unusual_policy, ChildStack, Exec, ExecSpec};
use corral_sandbox::state::Layout;
use std::ffi::OsString;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Exit status when the session is refused (the sandbox cannot be entered).
pub const EXIT_REFUSED: i32 = 1;

/// What the login asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    /// argv[0] began with '-', or -l/--login: a login shell.
    pub login: bool,
    /// `-c CMD [ARG0 ARGS...]`: passed on to the real shell.
    pub command: Option<Vec<OsString>>,
}

impl Invocation {
    pub fn parse(args: &[OsString]) -> Result<Invocation, String> {
        let login = args.first().is_some_and(|a| a.as_bytes().starts_with(b"-"));
        let mut inv = Invocation {
            login,
            command: None,
        };
        let mut rest = args.iter().skip(1);
        while let Some(a) = rest.next() {
            match a.as_bytes() {
                b"-l" | b"--login" => inv.login = true,
                b"-c" => {
                    let cmd: Vec<OsString> = rest.by_ref().cloned().collect();
                    if cmd.is_empty() {
                        return Err("-c: option requires an argument".into());
                    }
                    inv.command = Some(cmd);
                }
                _ => {
                    return Err(format!(
                        "unexpected argument {:?}; usage: corral-shell [-l] [-c COMMAND [ARG...]]",
                        a
                    ))
                }
            }
        }
        Ok(inv)
    }

    /// The real shell's argv.
    pub fn argv(&self, shell: &Path) -> Vec<String> {
        let mut v = vec![shell.to_string_lossy().into_owned()];
        if self.login {
            v.push("-l".into());
        }
        if let Some(cmd) = &self.command {
            v.push("-c".into());
            v.extend(cmd.iter().map(|a| a.to_string_lossy().into_owned()));
        }
        v
    }
}

/// The config file: `corral-access.toml` beside the executable when it is
/// there (root's, not writable by group or others, in a directory of the
/// same kind), else /etc/corral/access.toml.
pub fn config_path() -> Result<(PathBuf, bool), String> {
    let exe = std::fs::read_link("/proc/self/exe").map_err(|e| format!("/proc/self/exe: {e}"))?;
    if let Some(dir) = exe.parent() {
        let local = dir.join("corral-access.toml");
        if let Ok(m) = std::fs::symlink_metadata(&local) {
            for (p, m) in [(local.as_path(), Ok(m)), (dir, std::fs::metadata(dir))] {
                let m = m.map_err(|e| format!("{}: {e}", p.display()))?;
                if m.uid() != 0 || m.mode() & 0o022 != 0 || m.file_type().is_symlink() {
                    return Err(format!(
                        "{}: must be owned by root and not writable by group or others",
                        p.display()
                    ));
                }
            }
            return Ok((local, true));
        }
    }
    Ok((PathBuf::from(DEFAULT_PATH), false))
}

/// corral-shell's main: returns the exit status (or never, having exec'd).
pub fn main() -> i32 {
    let args: Vec<OsString> = std::env::args_os().collect();
    let inv = match Invocation::parse(&args) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("corral-shell: {e}");
            return 2;
        }
    };
    let (ruid, euid) = (
        nix::unistd::getuid().as_raw(),
        nix::unistd::geteuid().as_raw(),
    );
    let db = corral_users::Db::system();
    let user = match db.user_by_uid(ruid) {
        Ok(Some(u)) => u,
        Ok(None) => return refuse(&EnterError::NoUser(ruid)),
        Err(e) => return refuse(&EnterError::Users(e)),
    };
    if ruid == 0 {
        // Root is never caged.
        return exec_plain(&corral_profile::real_shell(&user.shell), &inv);
    }
    if euid != 0 {
        return unprivileged(&user, &inv);
    }
    match privileged(&db, &user, &inv) {
        Ok(code) => code,
        Err(e) => refuse(&e),
    }
}

fn refuse(e: &EnterError) -> i32 {
    eprintln!("corral-shell: session refused: {e}");
    EXIT_REFUSED
}

/// Run as the setuid-root login shell of `user`.
fn privileged(
    db: &corral_users::Db,
    user: &corral_users::User,
    inv: &Invocation,
) -> Result<i32, EnterError> {
    // Wholly root while corral works: a real uid of the tenant's would let
    // it signal what this process starts (the init on a first login).
    become_root().map_err(|errno| harden(user, "become root", errno))?;
    let (path, explicit) = config_path().map_err(|what| {
        EnterError::Config(crate::config::ConfigError::Invalid {
            path: PathBuf::from("corral-access.toml"),
            what,
        })
    })?;
    let cfg = AccessConfig::load(&path, explicit)?;
    if !cfg.caged(db, user)? {
        drop_to(user).map_err(|errno| harden(user, "drop privileges", errno))?;
        return Ok(exec_plain(&corral_profile::real_shell(&user.shell), inv));
    }
    let t = session::target(&cfg, &user.name)?;
    let layout = Layout::new(&cfg.state_dir);
    let join_err = |source| EnterError::Join {
        tenant: user.name.clone(),
        source,
    };
    let entered = join::enter(&layout, &t).map_err(join_err)?;
    // In the sandbox's mount namespace now: a pty of its own devpts.
    // SAFETY: isatty only queries fd 0.
    let terminal = unsafe { libc::isatty(0) } == 1;
    let pty = if terminal {
        Some(
            pty::open(Some(t.plan.tenant.uid), 0)
                .map_err(|errno| harden(user, "open a pty", errno))?,
        )
    } else {
        None
    };
    let env = environment(&t.plan, std::env::vars(), &[]);
    let argv = inv.argv(&t.plan.tenant.shell);
    let cwd = t.plan.workdir.to_string_lossy().into_owned();
    let slave = pty.as_ref().map(|p| p.slave.as_raw_fd());
    let spec = ExecSpec {
        argv: &argv,
        env: &env,
        cwd: &cwd,
        stdio: [slave; 3],
        new_session: terminal,
        controlling_tty: terminal,
        preserve_fds: 0,
        pass_fds: &[],
        listen_pid: false,
        reset_signals: None,
        reset_sched: unusual_policy(),
        reset_oom: false,
        subreaper: false,
        attrs: None,
    };
    let spawn_err = |e| join_err(join::JoinError::Spawn(e));
    let exec = Exec::prepare(&entered.security, &entered.rlimits, spec).map_err(spawn_err)?;
    let stack = ChildStack::new().map_err(spawn_err)?;
    // Without a terminal, signals are forwarded from before the shell
    // exists (join::wait_forwarding); the child resets the handlers.
    let waiter = match pty {
        Some(p) => Waiter::Terminal(p),
        None => Waiter::Signals(
            corral_sandbox::forward::Forwarding::start()
                .map_err(|errno| harden(user, "catch signals", errno))?,
        ),
    };
    let pid = exec.spawn(&mut { stack }).map_err(spawn_err)?;
    // Nothing of root's is needed to wait, relay and forward signals.
    drop_to(user).map_err(|errno| harden(user, "drop privileges", errno))?;
    match waiter {
        Waiter::Terminal(p) => {
            drop(p.slave);
            pty::relay(p.master, pid).map_err(|errno| harden(user, "relay the terminal", errno))
        }
        Waiter::Signals(f) => join::wait_forwarding(f, pid).map_err(join_err),
    }
}

/// How the login shell is waited for: through its terminal (the relay
/// passes signals on as the terminal's), or forwarding the signals sent to
/// this process.
enum Waiter {
    Terminal(pty::Pty),
    Signals(corral_sandbox::forward::Forwarding),
}

fn harden(user: &corral_users::User, step: &'static str, errno: nix::errno::Errno) -> EnterError {
    EnterError::Harden {
        tenant: user.name.clone(),
        step,
        errno,
    }
}

/// Not root: either pam_corral.so already placed this session in the
/// tenant's sandbox (no_new_privs kept the setuid bit from working), or
/// corral-shell is not installed setuid root. Only the first may go on.
fn unprivileged(user: &corral_users::User, inv: &Invocation) -> i32 {
    if !inside_own_sandbox(&user.name) {
        eprintln!(
            "corral-shell: session refused: not inside {}'s sandbox, and corral-shell has no \
             privileges to enter it (install it setuid root: chmod 4755, or place the session \
             with pam_corral.so)",
            user.name
        );
        return EXIT_REFUSED;
    }
    // Inside, /etc/passwd is the sandbox's: it names the real shell.
    let shell = corral_profile::real_shell(&user.shell);
    if pty::is_local_terminal(0) || !is_terminal(0) {
        return exec_plain(&shell, inv);
    }
    // A terminal from outside (su hands over the caller's): the shell gets
    // one of the sandbox's own.
    match relay_local(&shell, inv) {
        Ok(code) => code,
        Err(e) => {
            eprintln!(
                "corral-shell: session refused: {}: open a pty: {e}",
                user.name
            );
            EXIT_REFUSED
        }
    }
}

fn is_terminal(fd: RawFd) -> bool {
    // SAFETY: isatty only queries the fd.
    unsafe { libc::isatty(fd) == 1 }
}

/// pid 1 of this process's pid namespace is `tenant`'s init (its command
/// line, which no tenant can set for a pid 1; on the host pid 1 is the
/// host's init).
pub fn inside_own_sandbox(tenant: &str) -> bool {
    std::fs::read("/proc/1/cmdline").is_ok_and(|c| {
        let arg0 = c.split(|&b| b == 0).next().unwrap_or_default();
        arg0 == format!("corral-init: {tenant}").as_bytes()
    })
}

fn relay_local(shell: &Path, inv: &Invocation) -> Result<i32, nix::errno::Errno> {
    use std::os::unix::process::CommandExt;
    let p = pty::open(None, 0)?;
    let argv = inv.argv(shell);
    let slave = p.slave.as_raw_fd();
    let mut cmd = std::process::Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    // SAFETY: setsid, ioctl and dup2 are async-signal-safe; this process is
    // single-threaded.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0
                || libc::ioctl(slave, libc::TIOCSCTTY, 0) < 0
                || (0..3).any(|fd| libc::dup2(slave, fd) < 0)
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
    drop(p.slave);
    // SAFETY: the process is not dumpable from here: the caller's terminal
    // it relays can't be taken through /proc by the tenant's processes.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    pty::relay(p.master, nix::unistd::Pid::from_raw(child.id() as i32))
}

/// exec the shell with the login's environment (a user corral does not
/// cage, or a session already inside).
fn exec_plain(shell: &Path, inv: &Invocation) -> i32 {
    use std::os::unix::process::CommandExt;
    let argv = inv.argv(shell);
    let err = std::process::Command::new(&argv[0]).args(&argv[1..]).exec();
    eprintln!("corral-shell: {}: {err}", shell.display());
    if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}

/// Root in all three uids and gids, no supplementary groups.
fn become_root() -> Result<(), nix::errno::Errno> {
    // SAFETY: setgroups with no list; setresgid/setresuid take plain ids.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) < 0
            || libc::setresgid(0, 0, 0) < 0
            || libc::setresuid(0, 0, 0) < 0
        {
            return Err(nix::errno::Errno::last());
        }
    }
    Ok(())
}

/// Become `user` for good (all three ids, its groups, checked by reading
/// them back), not dumpable.
fn drop_to(user: &corral_users::User) -> Result<(), nix::errno::Errno> {
    let groups = corral_users::Db::system()
        .group_list(&user.name, user.gid)
        .unwrap_or_else(|_| vec![user.gid]);
    corral_security::identity::become_user(user.uid, user.gid, &groups)?;
    // SAFETY: prctl with plain arguments. A process that was root stays
    // undumpable after the switch (fs.suid_dumpable 0), made explicit here.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn invocations_of_sshd_su_and_login() {
        let i = Invocation::parse(&os(&["-corral-shell"])).unwrap();
        assert!(i.login && i.command.is_none());
        assert_eq!(i.argv(Path::new("/bin/bash")), ["/bin/bash", "-l"]);
        let i = Invocation::parse(&os(&["corral-shell", "-c", "scp -t /tmp"])).unwrap();
        assert!(!i.login);
        assert_eq!(
            i.argv(Path::new("/bin/sh")),
            ["/bin/sh", "-c", "scp -t /tmp"]
        );
        let i = Invocation::parse(&os(&["-corral-shell", "-c", "echo $0", "zero"])).unwrap();
        assert_eq!(
            i.argv(Path::new("/bin/sh")),
            ["/bin/sh", "-l", "-c", "echo $0", "zero"]
        );
        assert!(Invocation::parse(&os(&["corral-shell", "-c"])).is_err());
        assert!(Invocation::parse(&os(&["corral-shell", "--rcfile", "x"])).is_err());
    }

    #[test]
    fn the_host_is_not_a_sandbox() {
        // This test runs on the host (or in some other pid namespace whose
        // pid 1 is not a corral init of that name).
        assert!(!inside_own_sandbox("corral-no-such-tenant"));
    }
}
