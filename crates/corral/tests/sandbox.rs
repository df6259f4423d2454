//! `corral up / run / down / ls`: persisted sandboxes, for real (as root).

mod common;
use common::*;
use std::os::unix::fs::MetadataExt;

#[test]
fn run_is_isolated_and_runs_as_the_tenant() {
    let env = Env::new();
    env.default_profile_with("");
    let uid = uid_of(T1);
    let out = env.sh(T1, "id -u; id -g; hostname; echo $HOME; cat /proc/1/cmdline | tr '\\0' ' '; echo; ls /proc | grep -c '^[0-9]'");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], uid.to_string(), "{out}");
    assert_eq!(lines[2], T1, "hostname is the tenant: {out}");
    assert_eq!(lines[3], home_of(T1).display().to_string());
    assert!(
        lines[4].starts_with("corral-init"),
        "pid 1 is the tenant init: {out}"
    );
    let nprocs: u32 = lines[5].trim().parse().unwrap();
    assert!(
        nprocs <= 5,
        "only the sandbox's own processes are visible, saw {nprocs}: {out}"
    );

    // The filesystem: only the tenant's home, a generated passwd, read-only root.
    let out = env.sh(T1, "ls /home; cat /etc/passwd | cut -d: -f1 | tr '\\n' ' '; echo; test -e /root && echo root-visible; touch /x 2>/dev/null && echo root-writable; echo done");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], T1, "only the tenant's home under /home: {out}");
    assert_eq!(lines[1].trim(), format!("root {T1} nobody"));
    assert!(
        !out.contains("root-visible") && !out.contains("root-writable"),
        "{out}"
    );
}

#[test]
fn environment_is_cleared_then_allow_listed() {
    let env = Env::new();
    env.default_profile_with("");
    let out = env
        .cmd()
        .args(["run", T1, "--env", "EXTRA=1", "--", "/usr/bin/env"])
        .env("CORRAL_SECRET", "leak")
        .env("LANG", "C.UTF-8")
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(!s.contains("CORRAL_SECRET"), "host environment leaked: {s}");
    assert!(
        s.contains("LANG=C.UTF-8"),
        "allow-listed variable kept: {s}"
    );
    assert!(s.contains("EXTRA=1"));
    assert!(s.contains(&format!("USER={T1}")));
}

#[test]
fn namespaces_persist_between_runs_and_up_is_idempotent() {
    let env = Env::new();
    env.default_profile_with("");
    let first = env.ok(&["up", T1]);
    assert!(first.contains("up (init pid"), "{first}");
    let pid = env.init_pid(T1);
    let again = env.ok(&["up", T1]);
    assert!(again.contains("already up"), "{again}");
    assert_eq!(env.init_pid(T1), pid);

    // Same mount namespace: a file on the sandbox's own /dev/shm survives.
    let marker = format!("m{}", std::process::id());
    env.sh(T1, &format!("echo hi > /dev/shm/{marker}"));
    assert_eq!(env.sh(T1, &format!("cat /dev/shm/{marker}")).trim(), "hi");
    assert!(
        !std::path::Path::new("/dev/shm").join(&marker).exists(),
        "the sandbox's /dev/shm is not the host's"
    );

    // Same pid namespace: a detached process is visible to later runs.
    env.ok(&["run", "--detach", T1, "--", "/bin/sleep", "300"]);
    let ps = env.sh(T1, "for p in /proc/[0-9]*; do cat $p/comm; done");
    assert!(ps.lines().any(|l| l == "sleep"), "{ps}");

    // A sandbox adds no mount to the host (joins go through the init's
    // /proc/PID/ns; each host mount would be copied by every later `up`),
    // and a command joined with setns is in the init's namespaces.
    assert_eq!(env.mounts_mentioning_state(), Vec::<String>::new());
    let st = env.state(T1);
    for ns in st["namespaces"].as_array().unwrap() {
        let ns = ns.as_str().unwrap();
        let want = std::fs::read_link(format!("/proc/{pid}/ns/{ns}")).unwrap();
        let mut c = env.cmd();
        c.env("CORRAL_RUN_SETNS", "1").args([
            "run",
            T1,
            "--",
            "/bin/readlink",
            &format!("/proc/self/ns/{ns}"),
        ]);
        let o = c.output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            want.to_string_lossy(),
            "setns path, {ns}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn fifty_concurrent_first_uses_create_exactly_one_sandbox() {
    let env = Env::new();
    env.default_profile_with("");
    // 50 simultaneous entries: above the default plan's 20 entry processes.
    env.write_config(
        &format!("tenants/{T2}.toml"),
        "[limits]\nentry_processes = 64\n",
    );
    let env = std::sync::Arc::new(env);
    let handles: Vec<_> = (0..50)
        .map(|_| {
            let env = env.clone();
            std::thread::spawn(move || env.run(&["run", T2, "--", "/bin/cat", "/proc/1/stat"]))
        })
        .collect();
    let mut starts = std::collections::BTreeSet::new();
    for h in handles {
        let o = h.join().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // Field 22 of pid 1's stat (its start time) names the init instance.
        let s = String::from_utf8(o.stdout).unwrap();
        let rest = &s[s.rfind(')').unwrap() + 2..];
        starts.insert(rest.split(' ').nth(19).unwrap().to_string());
    }
    assert_eq!(starts.len(), 1, "every run saw the same init: {starts:?}");
    let inits = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .map(|c| c.starts_with(format!("corral-init: {T2}").as_bytes()))
                .unwrap_or(false)
        })
        .filter(|e| std::fs::read_link(e.path().join("ns/pid")).is_ok())
        .count();
    assert!(inits >= 1);
    let env = std::sync::Arc::try_unwrap(env).ok().unwrap();
    drop(env);
}

#[test]
fn down_removes_processes_mounts_cgroups_and_state() {
    let env = Env::new();
    env.default_profile_with("");
    env.ok(&["up", T1]);
    env.ok(&["run", "--detach", T1, "--", "/bin/sleep", "300"]);
    let pid = env.init_pid(T1);
    assert!(
        !env.cgroup_dirs().is_empty(),
        "tenant cgroups exist while up"
    );
    let out = env.ok(&["down", T1]);
    assert!(out.contains("down"), "{out}");
    assert!(
        corral_sandbox::state::process_start(pid).is_none(),
        "init gone"
    );
    assert!(
        env.mounts_mentioning_state().is_empty(),
        "{:?}",
        env.mounts_mentioning_state()
    );
    assert!(!env.state_dir().join("tenants").join(T1).exists());
    for d in env.cgroup_dirs() {
        assert!(
            !d.join(T1).exists(),
            "cgroup {} left behind",
            d.join(T1).display()
        );
    }
    assert!(env.ok(&["down", T1]).contains("was not up"));
    // First use after down builds it again.
    assert_eq!(env.sh(T1, "echo back").trim(), "back");
}

#[test]
fn down_of_several_takes_every_one_down_even_when_one_fails() {
    // `down A B` asks every init of the batch to stop first; a tenant whose
    // `down` fails (here B, whose lock file cannot be opened) must not leave
    // the others asked to stop but not taken down: A is taken down, B is
    // untouched, and the command fails naming B's lock.
    let env = Env::new();
    env.default_profile_with("");
    env.ok(&["up", T1, T2]);
    let (p1, p2) = (env.init_pid(T1), env.init_pid(T2));
    let lock = env.state_dir().join("locks").join(format!("{T2}.lock"));
    std::fs::remove_file(&lock).unwrap();
    std::fs::create_dir(&lock).unwrap();
    let o = env.run(&["down", T1, T2, T1]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success(), "{out}");
    assert_eq!(out.trim(), format!("{T1}: down"), "each name once");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&format!("{T2}.lock")),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        corral_sandbox::state::process_start(p1).is_none(),
        "{T1}'s init gone"
    );
    assert!(!env.state_dir().join("tenants").join(T1).exists());
    assert!(
        corral_sandbox::state::process_start(p2).is_some(),
        "{T2} untouched"
    );
    std::fs::remove_dir(&lock).unwrap();
    assert_eq!(env.ok(&["down", T2]).trim(), format!("{T2}: down"));
    assert!(corral_sandbox::state::process_start(p2).is_none());
}

#[test]
fn the_init_runs_without_glibcs_tcache_and_its_children_do_not_inherit_that() {
    // The init's malloc keeps no per-thread cache, so that `malloc_trim`
    // after setup gives back what setup used (an idle init's heap: 56 ->
    // 12 KiB); the setting is the init's own: tenant programs get only the
    // environment the profile gives them.
    let env = Env::new();
    env.default_profile_with("");
    env.ok(&["up", T1]);
    let environ = std::fs::read(format!("/proc/{}/environ", env.init_pid(T1))).unwrap();
    assert!(
        environ
            .split(|b| *b == 0)
            .any(|v| v == b"GLIBC_TUNABLES=glibc.malloc.tcache_count=0"),
        "{}",
        String::from_utf8_lossy(&environ)
    );
    let out = env.sh(T1, "env");
    assert!(!out.contains("GLIBC_TUNABLES"), "{out}");
    assert!(!out.contains("CORRAL_INIT_FDS"), "{out}");
}

#[test]
fn corral_timing_prints_each_phase_of_up_and_down() {
    let env = Env::new();
    env.default_profile_with("");
    let quiet = env.run(&["up", T1]);
    assert!(quiet.status.success());
    assert!(
        !String::from_utf8_lossy(&quiet.stderr).contains("corral: timing"),
        "no timing lines unless asked"
    );
    env.ok(&["down", T1]);
    let phases = |args: &[&str]| -> String {
        let o = env
            .cmd()
            .env("CORRAL_TIMING", "1")
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {o:?}");
        String::from_utf8(o.stderr).unwrap()
    };
    let up = phases(&["up", T1]);
    let line = format!("corral: timing: up {T1}: lock ");
    assert!(up.starts_with(&line), "{up}");
    let mut at = 0;
    for p in [
        "state",
        "dirs",
        "cgroup",
        "services",
        "start",
        "net",
        "send plan",
        "limits",
        "ready",
        "state files",
    ] {
        let i = up[at..]
            .find(&format!(", {p} "))
            .unwrap_or_else(|| panic!("phase {p:?} missing or out of order in {up}"));
        at += i + 1;
    }
    assert!(
        up.trim_end().ends_with(" ms") && up.contains("; total "),
        "{up}"
    );
    let down = phases(&["down", T1]);
    assert!(
        down.starts_with(&format!("corral: timing: down {T1}: lock ")),
        "{down}"
    );
    for p in [", stop ", ", net ", ", cgroup ", ", files "] {
        assert!(down.contains(p), "{p:?} missing in {down}");
    }
}

#[test]
fn down_of_a_name_that_is_no_user_and_has_no_state_is_refused() {
    let env = Env::new();
    env.default_profile_with("");
    let o = env.run(&["down", "corral-nosuchtenant"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no such tenant"), "{err}");
    assert!(
        !env.state_dir()
            .join("locks/corral-nosuchtenant.lock")
            .exists(),
        "nothing created"
    );
}

#[test]
fn ls_lists_tenants_as_json() {
    let env = Env::new();
    env.default_profile_with("");
    env.ok(&["up", T1, T2]);
    let v: serde_json::Value = serde_json::from_str(&env.ok(&["ls", "--json"])).unwrap();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["tenant"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec![T1, T2]);
    assert!(v
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["state"] == "up" && r["stale"] == false));
    // Changing the profile marks running sandboxes stale until restarted.
    env.write_config(&format!("tenants/{T1}.toml"), "hostname = \"changed\"\n");
    let v: serde_json::Value = serde_json::from_str(&env.ok(&["ls", "--json"])).unwrap();
    let stale: Vec<bool> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["stale"].as_bool().unwrap())
        .collect();
    assert_eq!(
        stale,
        vec![true, false],
        "only the tenant whose profile changed is stale: {v}"
    );
    env.ok(&["restart", T1]);
    assert_eq!(env.sh(T1, "hostname").trim(), "changed");
}

#[test]
fn exit_codes_are_passed_through() {
    let env = Env::new();
    env.default_profile_with("");
    assert_eq!(
        env.run(&["run", T1, "--", "/bin/sh", "-c", "exit 7"])
            .status
            .code(),
        Some(7)
    );
    assert_eq!(
        env.run(&["run", T1, "--", "/bin/sh", "-c", "kill -TERM $$"])
            .status
            .code(),
        Some(128 + 15)
    );
    let o = env.run(&["run", T1, "--", "no-such-command-xyz"]);
    assert_eq!(
        o.status.code(),
        Some(127),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("not found"));
}

#[test]
fn bad_profile_is_refused_with_its_location_and_nothing_is_created() {
    let env = Env::new();
    env.write_config(
        "profile.toml",
        "hostname = \"x\"\n[[mount]]\ntype = \"rbind\"\nsrc = \"/usr\"\n",
    );
    let o = env.run(&["up", T1]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("profile.toml:3:"),
        "error names file and line: {err}"
    );
    assert!(err.contains("rbind"), "{err}");
    assert!(!env.state_dir().join("tenants").join(T1).exists());
    assert!(env.cgroup_dirs().iter().all(|d| !d.join(T1).exists()));
}

/// After a failed `up` of T1: no state dir, no mount, no cgroup.
fn assert_failed_up_left_nothing(env: &Env) {
    assert!(
        !env.state_dir().join("tenants").join(T1).exists(),
        "no half-built state"
    );
    assert!(env.mounts_mentioning_state().is_empty());
    assert!(
        env.cgroup_dirs().iter().all(|d| !d.join(T1).exists()),
        "no cgroup left"
    );
}

#[test]
fn failing_mount_in_the_init_leaves_nothing_behind() {
    let env = Env::new();
    env.default_profile_with(
        "[[mount]]\ntype = \"ro-bind\"\nsrc = \"/nonexistent-corral-src\"\ndst = \"/opt/x\"\n",
    );
    let o = env.run(&["up", T1]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("/nonexistent-corral-src"), "{err}");
    assert_failed_up_left_nothing(&env);
    let inits = std::fs::read_dir("/proc").unwrap().flatten().filter(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| c.starts_with(format!("corral-init: {T1}").as_bytes()))
            .unwrap_or(false)
            && std::fs::read_to_string(e.path().join("environ"))
                .map(|_| true)
                .unwrap_or(false)
            && corral_sandbox::state::process_start(
                e.file_name().to_string_lossy().parse().unwrap_or(0),
            )
            .is_some()
    });
    // Other tests may run a T1 init of their own: only ours must be gone,
    // which the missing state dir and cgroup already prove; count for the log.
    let _ = inits.count();
}

/// A failure while the init starts comes back as its step and real errno
/// (here: exec of corral-init), and `up` undoes what it did.
#[test]
fn an_init_that_cannot_start_is_reported_with_its_step_and_errno() {
    let env = Env::new();
    env.default_profile_with("");
    let o = env
        .cmd()
        .env("CORRAL_INIT", "/nonexistent-corral/corral-init")
        .args(["up", T1])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("exec corral-init: ENOENT: No such file or directory"),
        "{err}"
    );
    assert_failed_up_left_nothing(&env);
}

#[test]
fn a_symlink_planted_where_the_profile_binds_is_not_followed() {
    let env = Env::new();
    let home = home_of(T3);
    let link = home.join("corral-race-target");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink("/etc", &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(uid_of(T3)), None).unwrap();
    env.default_profile_with("[[mount]]\ntype = \"tmpfs\"\ndst = \"$HOME/corral-race-target\"\n");
    let o = env.run(&["up", T3]);
    let _ = std::fs::remove_file(&link);
    assert!(
        !o.status.success(),
        "mounting over a tenant-planted symlink must fail"
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("symlink"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        std::path::Path::new("/etc/passwd").exists(),
        "host /etc untouched"
    );
}

#[test]
fn tmp_is_per_tenant_and_disk_backed() {
    let env = Env::new();
    env.default_profile_with("");
    let name = format!("f{}", std::process::id());
    env.sh(
        T1,
        &format!("echo secret > /tmp/{name}; chmod 600 /tmp/{name}"),
    );
    let host = env.state_dir().join("tmp").join(T1).join(&name);
    assert!(host.exists(), "/tmp is the disk dir {}", host.display());
    let meta = std::fs::metadata(host.parent().unwrap()).unwrap();
    assert_eq!(meta.uid(), uid_of(T1));
    assert_eq!(meta.mode() & 0o777, 0o700);
    let other = env.sh(T2, &format!("ls /tmp/{name} 2>&1 || echo absent"));
    assert!(
        other.contains("absent") || other.contains("No such file"),
        "{other}"
    );
}

#[test]
fn check_validates_files() {
    let env = Env::new();
    let bad = env.config_dir().join("bad.toml");
    std::fs::write(&bad, "hostname = 5\n").unwrap();
    let o = env.run(&["check", bad.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("bad.toml:1:"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let good = env.config_dir().join("good.toml");
    std::fs::write(&good, corral_profile::DEFAULT_PROFILE).unwrap();
    assert!(env.ok(&["check", good.to_str().unwrap()]).contains("ok"));
    assert!(env.ok(&["profile", "default"]).contains("[[mount]]"));
    env.default_profile_with("");
    let shown = env.ok(&["profile", "show", T1]);
    assert!(
        shown.contains(&home_of(T1).display().to_string()),
        "{shown}"
    );
}

/// Bringing a sandbox up does not depend on the caller's PATH: the first
/// `corral run` of a cron job, a CGI wrapper or an `env -i` script (a PATH
/// without /usr/sbin) sets up the host side of the private network with
/// `nft` and `ip` too. (Failed before: "nft -f -: No such file or directory".)
#[test]
fn bring_up_finds_nft_and_ip_without_sbin_on_the_path() {
    let env = Env::new();
    env.default_profile_with("");
    // corral re-installs its rules when the copy it keeps of the last ones
    // is missing: this up runs nft (idempotent for other tests' sandboxes).
    for e in std::fs::read_dir("/run/corral-net")
        .into_iter()
        .flatten()
        .flatten()
    {
        if e.path().extension().is_some_and(|x| x == "nft") {
            let _ = std::fs::remove_file(e.path());
        }
    }
    let out = env
        .cmd()
        .env("PATH", "/usr/bin:/bin")
        .args(["run", T1, "--", "/bin/echo", "in"])
        .output()
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "in",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let installed = std::fs::read_dir("/run/corral-net")
        .unwrap()
        .flatten()
        .any(|e| e.path().extension().is_some_and(|x| x == "nft"));
    assert!(installed, "the rules were installed again");
}

/// `corral profile seccomp` compiles the tenant's filter: the program it
/// writes is what the kernel takes (8 bytes per instruction, as many as it
/// reports), and a profile without seccomp is an error, not an empty file.
#[test]
fn profile_seccomp_writes_the_tenants_program() {
    let env = Env::new();
    env.default_profile_with("");
    let file = env.state_dir().join("filter.bpf");
    let said = env.ok(&[
        "--json",
        "profile",
        "seccomp",
        T1,
        "--out",
        file.to_str().unwrap(),
    ]);
    let v: serde_json::Value = serde_json::from_str(said.trim()).unwrap();
    let n = v["instructions"].as_u64().unwrap();
    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(bytes.len() as u64, n * 8, "{said}");
    // The first instruction loads the architecture (BPF_LD|W|ABS, offset 4).
    assert_eq!(&bytes[..2], &0x20u16.to_ne_bytes());
    assert_eq!(&bytes[4..8], &4u32.to_ne_bytes());
    env.write_config(
        &format!("tenants/{T2}.toml"),
        "[seccomp]\nenabled = false\n",
    );
    let off = env.run(&["profile", "seccomp", T2]);
    assert!(!off.status.success());
    assert!(String::from_utf8_lossy(&off.stderr).contains("disables seccomp"));
}

/// `corral check` without FILE also validates the config dir's access.toml
/// and gateway.toml (what the Debian package ships), naming a broken one.
#[test]
fn check_validates_the_config_dirs_other_files() {
    let env = Env::new();
    let access = env.config_dir().join("access.toml");
    let map = env.config_dir().join("gateway.toml");
    std::fs::write(&access, "exempt = []\ncorral = \"/usr/bin/corral\"\n").unwrap();
    std::fs::write(&map, "min_uid = 1000\nunmapped = \"owner\"\n").unwrap();
    let network = env.config_dir().join("network.toml");
    std::fs::write(&network, "deny = [\"192.168.0.0/16\"]\n").unwrap();
    let out = env.ok(&["check"]);
    for f in [&access, &map, &network] {
        assert!(out.contains(&format!("{}: ok", f.display())), "{out}");
    }
    for (file, broken) in [
        (&access, "corral = \"relative/corral\"\n"),
        (&map, "unmapped = \"sometimes\"\n"),
        (&network, "subnet = \"nonsense\"\n"),
    ] {
        let good = std::fs::read_to_string(file).unwrap();
        std::fs::write(file, broken).unwrap();
        let o = env.run(&["check"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{} accepted: {broken}", file.display());
        assert!(err.contains(&file.display().to_string()), "{err}");
        std::fs::write(file, good).unwrap();
    }
    // A file named explicitly is checked alone, as before.
    std::fs::write(&map, "unmapped = \"sometimes\"\n").unwrap();
    let good = env.config_dir().join("good.toml");
    std::fs::write(&good, corral_profile::DEFAULT_PROFILE).unwrap();
    env.ok(&["check", good.to_str().unwrap()]);
}

#[test]
fn detached_service_logs_and_outlives_the_caller() {
    let env = Env::new();
    env.default_profile_with("");
    let log = env.state_dir().join("svc.log");
    env.ok(&[
        "run",
        "--detach",
        "--log",
        log.to_str().unwrap(),
        T1,
        "--",
        "/bin/sh",
        "-c",
        "echo out; echo err >&2; ls -l /proc/self/fd/0 | grep -c null; sleep 300",
    ]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut text = String::new();
    while std::time::Instant::now() < deadline {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.lines().count() >= 3 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(text.contains("out") && text.contains("err"), "{text}");
    assert!(text.lines().any(|l| l == "1"), "stdin is /dev/null: {text}");
    let ps = env.sh(T1, "for p in /proc/[0-9]*; do cat $p/comm; done");
    assert!(ps.lines().any(|l| l == "sleep"), "{ps}");
}

#[test]
fn every_rootfs_operation_does_what_the_profile_says() {
    let env = Env::new();
    let src = env.state_dir().join("copy-src");
    std::fs::write(&src, "copied\n").unwrap();
    env.default_profile_with(&format!(
        r#"
[[mount]]
type = "file"
dst = "/etc/corral-note"
content = "hello $USER\n"
mode = "0604"
[[mount]]
type = "copy"
src = "{src}"
dst = "/opt/copied"
[[mount]]
type = "dir"
dst = "/srv/data"
mode = "0711"
[[mount]]
type = "symlink"
target = "/srv/data"
dst = "/data"
[[mount]]
type = "tmpfs"
dst = "/scratch"
size = "1M"
mode = "1777"
[[mount]]
type = "ro-bind-try"
src = "/nonexistent-is-skipped"
dst = "/opt/skipped"
[[mount]]
type = "hide"
dst = "/usr/share/doc"
"#,
        src = src.display()
    ));
    let out = env.sh(
        T1,
        "cat /etc/corral-note; stat -c %a /etc/corral-note; cat /opt/copied; stat -c %a /srv/data; readlink /data; \
         df -k /scratch | tail -1 | awk '{print $2}'; test -e /opt/skipped && echo skipped-exists; \
         ls /usr/share/doc | wc -l; echo x > /etc/corral-note 2>/dev/null && echo note-writable; \
         head -c 2M /dev/zero > /scratch/big 2>/dev/null || echo scratch-full; echo end",
    );
    let l: Vec<&str> = out.lines().collect();
    assert_eq!(l[0], format!("hello {T1}"), "{out}");
    assert_eq!(l[1], "604");
    assert_eq!(l[2], "copied");
    assert_eq!(l[3], "711");
    assert_eq!(l[4], "/srv/data");
    assert_eq!(l[5], "1024", "tmpfs size 1M: {out}");
    assert_eq!(l[6], "0", "hidden directory is empty: {out}");
    assert!(
        !out.contains("skipped-exists") && !out.contains("note-writable"),
        "{out}"
    );
    assert!(out.contains("scratch-full"), "{out}");
    assert!(
        std::fs::read_dir("/usr/share/doc").unwrap().count() > 0,
        "the host's directory is untouched"
    );
}

#[test]
fn net_none_and_user_namespace_modes() {
    let env = Env::new();
    env.default_profile_with("");
    env.write_config(
        &format!("tenants/{T1}.toml"),
        "[namespaces]\nnet = \"none\"\nuser = true\n",
    );
    let out = env.sh(T1, "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '; cat /proc/self/uid_map | tr -s ' '; id -u");
    let l: Vec<&str> = out.lines().collect();
    assert_eq!(l[0], "lo", "only loopback: {out}");
    assert_eq!(l.len(), 3, "{out}");
    assert_eq!(
        l[1].trim(),
        "0 0 4294967295",
        "identity-mapped user namespace: {out}"
    );
    assert_eq!(l[2], uid_of(T1).to_string());
    let st = env.state(T1);
    let ns: Vec<&str> = st["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        ns.first(),
        Some(&"user"),
        "the user namespace is joined first: {ns:?}"
    );
    assert!(ns.contains(&"net"));
    let host_user = std::fs::read_link("/proc/self/ns/user").unwrap();
    let init_user = std::fs::read_link(format!("/proc/{}/ns/user", env.init_pid(T1))).unwrap();
    assert_ne!(host_user, init_user);
}

#[test]
fn a_killed_init_is_noticed_and_the_next_run_rebuilds() {
    let env = Env::new();
    env.default_profile_with("");
    env.ok(&["up", T1, T2]);
    let pid = env.init_pid(T1);
    let start = env.state(T1)["init_start"].clone();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while corral_sandbox::state::process_start(pid).is_some()
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let v: serde_json::Value = serde_json::from_str(&env.ok(&["ls", "--json"])).unwrap();
    assert_eq!(v[0]["state"], "dead", "ls shows the dead sandbox: {v}");
    assert_eq!(env.sh(T1, "echo rebuilt").trim(), "rebuilt");
    // A new init (namespace inode numbers are recycled, so compare inits).
    assert!(env.init_pid(T1) != pid || env.state(T1)["init_start"] != start);
    assert!(corral_sandbox::state::process_start(env.init_pid(T1)).is_some());
    // down --all takes everything away, leaving no mount under the state dir.
    let out = env.ok(&["down", "--all"]);
    assert!(out.contains(T1) && out.contains(T2), "{out}");
    assert!(
        env.mounts_mentioning_state().is_empty(),
        "{:?}",
        env.mounts_mentioning_state()
    );
}

#[test]
fn a_state_file_cut_short_by_a_crash_counts_as_dead() {
    // State files are not fsync'd (runtime state): after a machine crash the
    // inits are gone and a state file may be empty or truncated.
    let env = Env::new();
    env.default_profile_with("");
    env.ok(&["up", T1, T2]);
    for (t, cut) in [(T1, 0usize), (T2, 20)] {
        let pid = env.init_pid(t);
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while corral_sandbox::state::process_start(pid).is_some()
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let p = env.state_dir().join("tenants").join(t).join("state.json");
        let text = std::fs::read(&p).unwrap();
        std::fs::write(&p, &text[..cut]).unwrap();
    }
    // `run` rebuilds T1; `up` rebuilds T2.
    assert_eq!(env.sh(T1, "echo rebuilt").trim(), "rebuilt");
    let out = env.ok(&["up", T2]);
    assert!(out.contains(&format!("{T2}: up (init pid")), "{out}");
    for t in [T1, T2] {
        assert!(
            corral_sandbox::state::process_start(env.init_pid(t)).is_some(),
            "{t} has a live init"
        );
    }
    // A state file damaged while its init runs: `up` takes down whatever
    // runs in the tenant's cgroup (no orphaned init) and builds anew.
    env.ok(&["up", T3]);
    let old = env.init_pid(T3);
    let p = env.state_dir().join("tenants").join(T3).join("state.json");
    std::fs::write(&p, b"{\"tenant\":").unwrap();
    let out = env.ok(&["up", T3]);
    assert!(out.contains(&format!("{T3}: up (init pid")), "{out}");
    assert_ne!(env.init_pid(T3), old);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while corral_sandbox::state::process_start(old).is_some()
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        corral_sandbox::state::process_start(old).is_none(),
        "the old init {old} was killed"
    );
    env.ok(&["down", "--all"]);
    assert!(
        env.mounts_mentioning_state().is_empty(),
        "{:?}",
        env.mounts_mentioning_state()
    );
}

#[test]
fn preserve_fds_passes_exactly_the_named_descriptors() {
    let env = Env::new();
    env.default_profile_with("");
    env.ok(&["up", T1]);
    let corral = corral_bin();
    let script = format!(
        "exec 3</dev/null 4</dev/null; {c} run --preserve-fds 1 {T1} -- /bin/sh -c 'ls /proc/self/fd'",
        c = corral.display()
    );
    let o = env.cmd().arg("--help").output().unwrap();
    assert!(o.status.success());
    let out = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(&script)
        .env("CORRAL_STATE_DIR", env.state_dir())
        .env("CORRAL_CONFIG_DIR", env.config_dir())
        .env("CORRAL_CGROUP_PARENT", &env.parent)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fds: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    // 0 1 2, the preserved 3, and the fd `ls` opens for the directory itself.
    assert!(fds.contains(&"3".to_string()), "{fds:?}");
    assert!(!fds.contains(&"4".to_string()) || fds.len() <= 5, "{fds:?}");
    assert!(fds.len() <= 5, "no other descriptor leaks in: {fds:?}");
    let bad = env.run(&["run", "--preserve-fds", "40", T1, "--", "/bin/true"]);
    assert_eq!(bad.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("is not open"));
}

#[test]
fn isolation_attempts_fail() {
    let env = Env::new();
    env.default_profile_with("");
    // A SysV message queue on the host must not be visible inside.
    let q = std::process::Command::new("ipcmk")
        .arg("-Q")
        .output()
        .unwrap();
    let qid = String::from_utf8_lossy(&q.stdout)
        .split(':')
        .nth(1)
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let out = env.sh(
        T1,
        "cat /etc/shadow 2>/dev/null && echo READ-SHADOW; ls /root 2>/dev/null && echo SAW-ROOT; \
         hostname; cat /proc/sysvipc/msg | wc -l; \
         touch /usr/corral-x 2>&1 | grep -o 'Read-only file system'; \
         grep -E '^(CapEff|NoNewPrivs)' /proc/self/status | tr -s '\\t' ' '; \
         grep ' /usr ' /proc/self/mountinfo | grep -o nosuid | head -1",
    );
    if !qid.is_empty() {
        let _ = std::process::Command::new("ipcrm")
            .args(["-q", &qid])
            .status();
    }
    assert!(
        !out.contains("READ-SHADOW") && !out.contains("SAW-ROOT"),
        "{out}"
    );
    let host = nix::unistd::gethostname().unwrap().into_string().unwrap();
    let l: Vec<&str> = out.lines().collect();
    assert_ne!(l[0], host, "host name hidden");
    assert_eq!(
        l[1], "1",
        "no host message queues (header line only): {out}"
    );
    assert_eq!(l[2], "Read-only file system", "{out}");
    assert_eq!(l[3], "CapEff: 0000000000000000");
    assert_eq!(l[4], "NoNewPrivs: 1");
    assert_eq!(
        l[5], "nosuid",
        "setuid binaries can't raise privileges: {out}"
    );
}

#[test]
fn tenant_programs_start_with_a_clean_signal_state() {
    let env = Env::new();
    env.default_profile_with("");
    let script = "grep -E '^(SigBlk|SigIgn)' /proc/self/status | tr -s '\\t' ' '";
    // Through the init (the default path) and through the setns join.
    for setns in [false, true] {
        let mut c = env.cmd();
        c.args(["run", T1, "--", "/bin/sh", "-c", script])
            .stdin(std::process::Stdio::null());
        if setns {
            c.env("CORRAL_RUN_SETNS", "1");
        }
        let o = c.output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(
            out.trim(),
            "SigBlk: 0000000000000000\nSigIgn: 0000000000000000",
            "setns={setns}: no blocked or ignored signals (SIGPIPE included): {out}"
        );
    }
    assert_eq!(
        env.run(&["run", T1, "--", "/bin/sh", "-c", "kill -TERM $$"])
            .status
            .code(),
        Some(128 + 15)
    );
}

#[test]
fn signals_sent_to_corral_run_reach_the_command() {
    use std::io::BufRead;
    let env = Env::new();
    env.default_profile_with("");
    assert!(env.run(&["up", T1]).status.success());
    // The command traps the signal, says so and exits 7; `corral run`
    // forwards what it gets and ends with the command's status. Through
    // the init (the fast path: signals read from a signalfd) and through
    // the setns join (a self-pipe, set up before the command is spawned:
    // sent right after "ready", a signal used to find `corral run` still
    // without its handler and end it), for each forwarded signal tried.
    let script = "trap 'echo got; exit 7' TERM INT HUP USR1; echo ready; \
                  i=0; while [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; exit 9";
    for setns in [false, true] {
        for sig in [
            nix::sys::signal::Signal::SIGTERM,
            nix::sys::signal::Signal::SIGUSR1,
            nix::sys::signal::Signal::SIGHUP,
        ] {
            let mut c = env.cmd();
            if setns {
                c.env("CORRAL_RUN_SETNS", "1");
            }
            c.args(["run", T1, "--", "/bin/sh", "-c", script])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped());
            let mut child = c.spawn().unwrap();
            let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            assert_eq!(line.trim(), "ready", "setns={setns} {sig:?}");
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
            line.clear();
            out.read_line(&mut line).unwrap();
            let status = child.wait().unwrap();
            assert_eq!(line.trim(), "got", "setns={setns} {sig:?}: forwarded");
            assert_eq!(
                status.code(),
                Some(7),
                "setns={setns} {sig:?}: the command's own status"
            );
        }
    }
}

#[test]
fn neither_the_init_nor_tenant_programs_inherit_a_batch_policy_or_the_inits_slice() {
    let env = Env::new();
    env.default_profile_with("");
    let field = |sched: &str, name: &str| -> Option<u64> {
        sched
            .lines()
            .find(|l| l.split(':').next().map(str::trim) == Some(name))
            .and_then(|l| l.split(':').nth(1))
            .and_then(|v| v.trim().parse().ok())
    };
    let policy = |sched: &str| field(sched, "policy").map(|p| p as i32);
    // A process started as every other: the default time slice (absent
    // before EEVDF, Linux 6.6).
    let default_slice = field(
        &std::fs::read_to_string("/proc/self/sched").unwrap(),
        "se.slice",
    );
    // Brought up under a batch policy, the init still serves as a normal
    // task (a batch init made spawn requests wait behind running scripts).
    let mut up = std::process::Command::new("chrt");
    up.args(["-b", "0"]).arg(corral_bin()).args(["up", T1]);
    up.env("CORRAL_STATE_DIR", env.state_dir())
        .env("CORRAL_CONFIG_DIR", env.config_dir())
        .env("CORRAL_CGROUP_PARENT", &env.parent)
        .env_remove("CORRAL_INIT");
    let o = up.stdin(std::process::Stdio::null()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let init = std::fs::read_to_string(format!("/proc/{}/sched", env.init_pid(T1))).unwrap();
    assert_eq!(
        policy(&init),
        Some(libc::SCHED_OTHER),
        "the init serves spawns as a normal task: {init}"
    );
    // Also when the caller itself runs under a batch policy: nothing is
    // inherited, through the init or through the setns join.
    for setns in [false, true] {
        let mut c = std::process::Command::new("chrt");
        c.args(["-b", "0"]).arg(corral_bin()).args([
            "run",
            T1,
            "--",
            "/bin/cat",
            "/proc/self/sched",
        ]);
        c.env("CORRAL_STATE_DIR", env.state_dir())
            .env("CORRAL_CONFIG_DIR", env.config_dir())
            .env("CORRAL_CGROUP_PARENT", &env.parent)
            .env_remove("CORRAL_INIT");
        if setns {
            c.env("CORRAL_RUN_SETNS", "1");
        }
        let o = c.stdin(std::process::Stdio::null()).output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "setns={setns}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(
            policy(&out),
            Some(libc::SCHED_OTHER),
            "setns={setns}: {out}"
        );
        // The init's short slice (SERVER_SLICE_NS, Linux >= 6.12) is its
        // own: a command gets the default one.
        assert_eq!(
            field(&out, "se.slice"),
            default_slice,
            "setns={setns}: {out}"
        );
    }
}

#[test]
fn the_cgroup_namespace_hides_where_the_tenant_sits() {
    let env = Env::new();
    env.default_profile_with("");
    // The namespace is rooted at the tenant's own cgroup: no host path
    // (corral's parent, the tenant's name) shows inside, whichever way the
    // command enters.
    for setns in [false, true] {
        let mut c = env.cmd();
        c.args(["run", T1, "--", "/bin/cat", "/proc/self/cgroup"])
            .stdin(std::process::Stdio::null());
        if setns {
            c.env("CORRAL_RUN_SETNS", "1");
        }
        let o = c.output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && !out.trim().is_empty(),
            "setns={setns}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        for line in out.lines() {
            let path = line.splitn(3, ':').nth(2).unwrap_or("");
            assert!(
                !path.contains("corral") && !path.contains(T1),
                "setns={setns}: host cgroup path visible: {line}\n{out}"
            );
        }
    }
}

/// A Unix user made for one test, with its home a symlink made by root
/// (/home/NAME -> /srv/NAME-real), removed with its files on drop.
struct LinkedHomeUser {
    name: String,
    real: std::path::PathBuf,
    link: std::path::PathBuf,
}

impl LinkedHomeUser {
    fn new() -> LinkedHomeUser {
        let name = format!("corral-lh{}", std::process::id() % 100000);
        let real = std::path::PathBuf::from(format!("/srv/{name}-real"));
        let link = std::path::PathBuf::from(format!("/home/{name}"));
        let u = LinkedHomeUser { name, real, link };
        let st = std::process::Command::new("useradd")
            .args(["--no-create-home", "--home-dir"])
            .arg(&u.link)
            .args(["--shell", "/bin/sh", "--user-group", &u.name])
            .status()
            .unwrap();
        assert!(st.success(), "useradd {}", u.name);
        std::fs::create_dir_all(&u.real).unwrap();
        std::os::unix::fs::symlink(&u.real, &u.link).unwrap();
        let uid = uid_of(&u.name);
        std::os::unix::fs::chown(&u.real, Some(uid), Some(uid)).unwrap();
        std::fs::write(u.real.join("hello"), "hello from a linked home\n").unwrap();
        std::os::unix::fs::chown(u.real.join("hello"), Some(uid), Some(uid)).unwrap();
        u
    }
}

impl Drop for LinkedHomeUser {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.link);
        let _ = std::fs::remove_dir_all(&self.real);
        let _ = std::process::Command::new("userdel")
            .arg(&self.name)
            .status();
    }
}

#[test]
fn a_home_that_is_a_symlink_made_by_root_is_the_tenants_home_inside() {
    let user = LinkedHomeUser::new();
    let env = Env::new();
    env.default_profile_with("");
    let out = env.sh(
        &user.name,
        "cd \"$HOME\" && pwd && pwd -P && cat hello && touch made-inside && echo ok",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some(user.link.to_str().unwrap()),
        "{out}"
    );
    assert_eq!(
        lines.get(1).copied(),
        Some(user.real.to_str().unwrap()),
        "{out}"
    );
    assert_eq!(
        lines.get(2).copied(),
        Some("hello from a linked home"),
        "{out}"
    );
    assert_eq!(lines.get(3).copied(), Some("ok"), "{out}");
    assert!(
        user.real.join("made-inside").is_file(),
        "written through to the real home"
    );
    env.ok(&["down", &user.name]);
}

#[test]
fn system_accounts_unknown_names_and_missing_files_are_refused_and_down_all_cleans_up() {
    let env = Env::new();
    env.default_profile_with("");
    // A system account (daemon, uid 1, home /usr/sbin) is not a tenant.
    let o = env.run(&["run", "daemon", "--", "/bin/true"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "daemon ran as a tenant");
    assert!(err.contains("a system account"), "{err}");
    // down of a name that is nothing: an error, and nothing created.
    let o = env.run(&["down", "corral-nosuchuser"]);
    assert!(!o.status.success());
    assert!(
        !env.state_dir()
            .join("locks/corral-nosuchuser.lock")
            .exists(),
        "no lock file left"
    );
    // check of a file named explicitly that does not exist.
    let o = env.run(&["check", "/nonexistent-corral.toml"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no such file"));
    // down --all removes the cgroup parent it leaves empty.
    env.ok(&["up", T1]);
    let parents: Vec<_> = std::fs::read_dir("/sys/fs/cgroup")
        .unwrap()
        .flatten()
        .map(|e| e.path().join(&env.parent))
        .filter(|p| p.is_dir())
        .collect();
    assert!(
        !parents.is_empty(),
        "the tenant's cgroup parent exists while it is up"
    );
    env.ok(&["down", "--all"]);
    let left: Vec<_> = parents.iter().filter(|p| p.exists()).collect();
    assert!(left.is_empty(), "empty cgroup parents left: {left:?}");
}

#[test]
fn a_command_takes_its_callers_affinity_nice_and_io_priority_on_both_paths() {
    let env = Env::new();
    env.default_profile_with("");
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let all = if ncpu > 1 {
        format!("0-{}", ncpu - 1)
    } else {
        "0".into()
    };
    // The sandbox brought up by a pinned, niced caller: its init keeps none
    // of that (it would hand it to every later command).
    let mut up = env.command("taskset");
    up.args(["-c", "0", "nice", "-n", "5"])
        .arg(corral_bin())
        .args(["up", T1]);
    assert!(up.status().unwrap().success());
    let script = "grep Cpus_allowed_list /proc/self/status | cut -f2; nice; ionice";
    let out = env.sh(T1, script);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [all.as_str(), "0", "none: prio 0"],
        "unpinned caller: {out}"
    );
    for setns in [false, true] {
        let mut c = env.command("taskset");
        c.args([
            "-c",
            &(ncpu - 1).to_string(),
            "nice",
            "-n",
            "-3",
            "ionice",
            "-c",
            "1",
            "-n",
            "2",
        ])
        .arg(corral_bin())
        .args(["run", T1, "--", "/bin/sh", "-c", script]);
        if setns {
            c.env("CORRAL_RUN_SETNS", "1");
        }
        let o = c.output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let lines: Vec<&str> = out.lines().collect();
        let last = (ncpu - 1).to_string();
        assert_eq!(
            lines,
            [last.as_str(), "0", "best-effort: prio 2"],
            "pinned, nice -3, real-time I/O caller (setns path: {setns}): the CPU is kept, \
             the negative nice and the real-time class are not: {out} {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // A positive nice is kept.
    let mut c = env.command("nice");
    c.args(["-n", "7"])
        .arg(corral_bin())
        .args(["run", T1, "--", "nice"]);
    assert_eq!(
        String::from_utf8_lossy(&c.output().unwrap().stdout).trim(),
        "7"
    );
}

/// The filesystems a sandbox mounts of its own are one tmpfs (the root,
/// /dev, /dev/shm, /run and the masks are directories of it), its /proc and
/// its /dev/pts: every superblock registers a shrinker, which every memory
/// cgroup pays for (rootfs::build). Each mount point keeps the flags it had
/// as a tmpfs of its own, and the tenant can write only /dev/shm of it, up
/// to 64 MiB.
#[test]
fn a_sandbox_mounts_one_tmpfs_with_each_mount_points_flags() {
    let env = Env::new();
    env.default_profile_with("");
    env.ok(&["up", T1]);
    let pid = env.init_pid(T1);
    // mountinfo: id parent major:minor root mount-point options ... - type source super-options
    let parse = |text: &str| -> Vec<(String, String, String, String)> {
        text.lines()
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                let dash = f.iter().position(|x| *x == "-").unwrap();
                (
                    f[2].to_string(),
                    f[4].to_string(),
                    f[5].to_string(),
                    f[dash + 1].to_string(),
                )
            })
            .collect()
    };
    let host: std::collections::HashSet<String> =
        parse(&std::fs::read_to_string("/proc/self/mountinfo").unwrap())
            .into_iter()
            .map(|m| m.0)
            .collect();
    let inside = parse(&std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap());
    let mut own: Vec<(String, String)> = inside
        .iter()
        .filter(|m| !host.contains(&m.0))
        .map(|m| (m.0.clone(), m.3.clone()))
        .collect();
    own.sort();
    own.dedup();
    let mut types: Vec<&str> = own.iter().map(|o| o.1.as_str()).collect();
    types.sort();
    assert_eq!(
        types,
        ["devpts", "proc", "tmpfs"],
        "the sandbox's own superblocks: {own:?}"
    );
    let tmpfs = &own.iter().find(|o| o.1 == "tmpfs").unwrap().0;
    let mut expected = vec![
        ("/", "ro,nosuid,nodev"),
        ("/dev", "rw,nosuid,noexec"),
        ("/dev/shm", "rw,nosuid,nodev"),
        ("/run", "rw,nosuid,nodev"),
    ];
    if std::path::Path::new("/proc/acpi").is_dir() {
        expected.push(("/proc/acpi", "ro,nosuid,nodev,noexec"));
    }
    for (point, flags) in expected {
        let m = inside
            .iter()
            .rfind(|m| m.1 == point)
            .unwrap_or_else(|| panic!("{point} is not a mount point: {inside:?}"));
        assert_eq!(&m.0, tmpfs, "{point} is on the sandbox's tmpfs: {m:?}");
        let have: Vec<&str> =
            m.2.split(',')
                .filter(|f| ["ro", "rw", "nosuid", "nodev", "noexec"].contains(f))
                .collect();
        assert_eq!(have.join(","), flags, "{point}'s mount flags: {m:?}");
    }
    let out = env.sh(
        T1,
        "for p in /x /run/x /dev/x /proc/acpi/x; do touch $p 2>/dev/null && echo wrote-$p; done; \
         ls -A / | tr '\\n' ' '; echo; { ls -A /run; ls -A /proc/acpi 2>/dev/null; } | grep -c .; \
         head -c 100M /dev/zero > /dev/shm/fill 2>/dev/null || echo shm-full; \
         du -k /dev/shm/fill | cut -f1; rm -f /dev/shm/fill; echo end",
    );
    let l: Vec<&str> = out.lines().collect();
    assert!(!out.contains("wrote-"), "only /dev/shm is writable: {out}");
    for name in ["staging", "empty", "root", ".corral-staging"] {
        assert!(
            !l[0].split(' ').any(|n| n == name),
            "the tmpfs's other directories are out of reach: {out}"
        );
    }
    assert_eq!(l[1], "0", "/run and the mask are empty: {out}");
    assert_eq!(l[2], "shm-full", "{out}");
    let kib: u64 = l[3].parse().unwrap();
    assert!(
        (60 << 10..=64 << 10).contains(&kib),
        "/dev/shm holds at most 64 MiB: {kib} KiB written: {out}"
    );
}

/// `corral` answers `corral run` on a running sandbox by itself and execs
/// the full CLI (`corral-cli`) for everything else: a copy of `corral`
/// alone in a directory runs commands (their status) but says what is
/// missing for anything else, having started nothing. A command the init
/// could not start is the full CLI's to report too (it asks again).
#[test]
fn the_front_program_answers_run_alone_and_hands_the_rest_to_corral_cli() {
    let env = Env::new();
    env.default_profile_with("");
    env.ok(&["up", T1]);
    let alone = tempfile::tempdir().unwrap();
    let front = alone.path().join("corral");
    std::fs::copy(corral_bin(), &front).unwrap();
    let run = |args: &[&str]| {
        env.command(&front)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let o = run(&["run", T1, "--", "/bin/sh", "-c", "echo in; exit 7"]);
    assert_eq!(o.status.code(), Some(7), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "in\n");
    let o = run(&["run", T1, "--", "/bin/sh", "-c", "kill -TERM $$"]);
    assert_eq!(o.status.code(), Some(128 + 15), "{o:?}");
    // A caller that left stdin and stderr closed: the command gets
    // /dev/null there, never a file of the front's own (its signalfd, its
    // entry slot, its connection to the init).
    let mut c = env.command(&front);
    c.args([
        "run",
        T1,
        "--",
        "/bin/sh",
        "-c",
        "readlink /proc/self/fd/0; readlink /proc/self/fd/2",
    ]);
    // SAFETY: only close(2) between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut c, || {
            libc::close(0);
            libc::close(2);
            Ok(())
        });
    }
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "/dev/null\n/dev/null\n");

    // Not the fast path: the full CLI is needed, and missing.
    for args in [
        &["ls"][..],
        &["run", T1, "--", "no-such-command-xyz"],
        &["run", T1, "--detach", "--", "true"],
        &["run", T2, "--", "true"],
        &["run", "Bad/Name", "--", "true"],
    ] {
        let o = run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(125), "{args:?}: {err}");
        assert!(
            err.contains("corral-cli not found next to") && err.contains("../lib/corral"),
            "{args:?}: {err}"
        );
    }
    assert!(
        !env.state_dir().join("tenants").join(T2).exists(),
        "declining started nothing for {T2}"
    );
    // With corral-cli next to it, the same front program answers them all.
    std::fs::copy(
        corral_bin().with_file_name("corral-cli"),
        alone.path().join("corral-cli"),
    )
    .unwrap();
    let o = run(&["run", "Bad/Name", "--", "true"]);
    assert_eq!(o.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("corral: "));
    assert!(run(&["ls"]).status.success());
    let o = run(&["run", T1, "--", "no-such-command-xyz"]);
    assert_eq!(o.status.code(), Some(127), "{o:?}");
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!("corral: {T1}: no-such-command-xyz: command not found in the sandbox\n"),
        "said once, by the full CLI"
    );
    // A variable that is not UTF-8 does not stop a run (it cannot travel
    // in the init's protocol: both programs leave it out).
    use std::os::unix::ffi::OsStrExt;
    for program in [front.clone(), alone.path().join("corral-cli")] {
        let o = env
            .command(&program)
            .env(
                std::ffi::OsStr::from_bytes(b"CORRAL_T_BAD"),
                std::ffi::OsStr::from_bytes(b"\xff"),
            )
            .args(["run", T1, "--", "/bin/sh", "-c", "echo in"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{program:?}: {o:?}");
        assert_eq!(String::from_utf8_lossy(&o.stdout), "in\n");
    }
}
