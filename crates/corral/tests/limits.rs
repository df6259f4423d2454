//! Per-tenant limits through the CLI: live changes, entry processes, fork
//! bombs, OOM, bad values (real cgroups, as root).

mod common;
use common::*;
use std::time::Duration;

#[test]
fn live_cpu_limit_change_applies_to_a_running_tenant() {
    let env = Env::new();
    env.default_profile_with("");
    env.ok(&["up", T1]);
    env.ok(&[
        "run",
        "--detach",
        T1,
        "--",
        "/bin/sh",
        "-c",
        "end=$(( $(date +%s) + 30 )); while [ $(date +%s) -lt $end ]; do :; done",
    ]);
    env.ok(&["limits", "set", T1, "cpu=20%"]);
    std::thread::sleep(Duration::from_millis(300));
    let low = env.stats(T1, 2000)["cpu_percent"].as_f64().unwrap();
    env.ok(&["limits", "set", T1, "cpu=60%"]);
    std::thread::sleep(Duration::from_millis(300));
    let high = env.stats(T1, 2000)["cpu_percent"].as_f64().unwrap();
    eprintln!("cpu at 20%: {low:.1}%, at 60%: {high:.1}%");
    assert!((5.0..=30.0).contains(&low), "20% limit held: {low}");
    assert!(
        high > low + 15.0 && high <= 70.0,
        "60% limit applied live: {high}"
    );
    let shown = env.ok(&["limits", "show", T1]);
    assert!(shown.contains("60%"), "{shown}");
    let s = env.stats(T1, 100);
    assert!(
        s["faults"]["cpu_throttled_periods"].as_u64().unwrap() > 0,
        "throttling is counted: {s}"
    );
}

#[test]
fn bad_limit_values_are_refused_and_nothing_changes() {
    let env = Env::new();
    env.default_profile_with("");
    env.ok(&["up", T1]);
    let before = env.ok(&["limits", "show", T1, "--json"]);
    for bad in [
        "cpu=-5%",
        "memory=lots",
        "io.devices=/dev/nope",
        "nosuchkey=1",
    ] {
        let o = env.run(&["limits", "set", T1, "processes=77", bad]);
        assert!(!o.status.success(), "{bad} accepted");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(bad.split('=').next().unwrap()),
            "{bad}: error names the key: {err}"
        );
    }
    assert_eq!(
        env.ok(&["limits", "show", T1, "--json"]),
        before,
        "no partial application"
    );
    // In a plan file, the error names file and line.
    env.write_config("plans/broken.toml", "cpu = \"50%\"\nmemory = \"lots\"\n");
    env.write_config(&format!("tenants/{T2}.toml"), "plan = \"broken\"\n");
    let o = env.run(&["up", T2]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("broken.toml:2"), "{err}");
    assert!(!env.state_dir().join("tenants").join(T2).exists());
}

#[test]
fn entry_process_limit_refuses_exactly_the_excess_and_slots_come_back() {
    let env = Env::new();
    env.default_profile_with("");
    env.write_config(
        &format!("tenants/{T1}.toml"),
        "[limits]\nentry_processes = 2\n",
    );
    env.ok(&["up", T1]);
    let spawn = || {
        env.cmd()
            .args(["run", T1, "--", "/bin/sleep", "3"])
            .spawn()
            .unwrap()
    };
    let mut kids: Vec<_> = (0..2).map(|_| spawn()).collect();
    std::thread::sleep(Duration::from_millis(700));
    let third = env.run(&["run", T1, "--", "/bin/true"]);
    assert_eq!(
        third.status.code(),
        Some(75),
        "third entry refused: {}",
        String::from_utf8_lossy(&third.stderr)
    );
    assert!(String::from_utf8_lossy(&third.stderr).contains("entry-process limit"));
    // Kill one entry: its slot comes back at once.
    kids[0].kill().unwrap();
    kids[0].wait().unwrap();
    assert!(
        env.run(&["run", T1, "--", "/bin/true"]).status.success(),
        "slot of a killed entry is reusable"
    );
    kids[1].wait().unwrap();
    let s = env.stats(T1, 50);
    assert_eq!(s["entry_rejections"].as_u64(), Some(1), "{s}");
}

#[test]
fn fork_bomb_stops_at_the_process_limit_and_the_neighbour_keeps_working() {
    let env = Env::new();
    env.default_profile_with("");
    env.write_config(&format!("tenants/{T1}.toml"), "[limits]\nprocesses = 30\n");
    env.ok(&["up", T1, T2]);
    // A bounded fork bomb: each shell forks two more until 10 s pass.
    let bomb =
        "b() { [ $(date +%s) -lt $END ] || return; b & b & wait; }; END=$(( $(date +%s) + 8 )); b";
    env.ok(&["run", "--detach", T1, "--", "/bin/sh", "-c", bomb]);
    std::thread::sleep(Duration::from_millis(1500));
    let start = std::time::Instant::now();
    assert_eq!(env.sh(T2, "echo alive").trim(), "alive");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "neighbour answered in {:?}",
        start.elapsed()
    );
    let s = env.stats(T1, 100);
    assert!(s["usage"]["processes"].as_u64().unwrap() <= 30, "{s}");
    assert!(
        s["faults"]["pids_max_hits"].as_u64().unwrap() > 0,
        "process-limit hits counted: {s}"
    );
}

#[test]
fn a_full_process_limit_refuses_new_commands_on_every_path() {
    // The command is born inside the cgroup (by the init, or by a setns
    // join that moved itself in first): a fork is refused at pids.max, a
    // migration would not be.
    let env = Env::new();
    env.default_profile_with("");
    env.write_config(&format!("tenants/{T1}.toml"), "[limits]\nprocesses = 2\n");
    env.ok(&["up", T1]);
    env.ok(&["run", "--detach", T1, "--", "/bin/sleep", "30"]);
    let marker = corral_users::Db::system()
        .user_by_name(T1)
        .unwrap()
        .unwrap()
        .home
        .join(".pids-full-marker");
    let _ = std::fs::remove_file(&marker);
    for setns in [false, true] {
        let mut c = env.cmd();
        c.args([
            "run",
            T1,
            "--",
            "/bin/sh",
            "-c",
            &format!("touch {}", marker.display()),
        ]);
        if setns {
            c.env("CORRAL_RUN_SETNS", "1");
        }
        let o = c.output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success(),
            "setns={setns}: ran at a full process limit: {err}"
        );
        assert!(
            err.contains("Resource temporarily unavailable") || err.contains("EAGAIN"),
            "setns={setns}: {err}"
        );
        assert!(!marker.exists(), "setns={setns}: the command ran");
        let s = env.stats(T1, 50);
        assert!(
            s["usage"]["processes"].as_u64().unwrap() <= 2,
            "setns={setns}: {s}"
        );
    }
}

#[test]
fn memory_hog_is_oom_killed_inside_its_tenant() {
    let env = Env::new();
    env.default_profile_with("");
    env.write_config(
        &format!("tenants/{T1}.toml"),
        "[limits]\nmemory.max = \"32M\"\nmemory.swap_max = \"0\"\n",
    );
    env.ok(&["up", T1, T2]);
    // Grows a shell variable until the cgroup's OOM killer ends it.
    let o = env.run(&[
        "run",
        T1,
        "--",
        "/bin/sh",
        "-c",
        "x=a; while :; do x=\"$x$x\"; done",
    ]);
    assert_eq!(
        o.status.code(),
        Some(128 + 9),
        "killed by SIGKILL: {:?}",
        o.status
    );
    let s = env.stats(T1, 50);
    let f = &s["faults"];
    assert!(
        f["oom_kills"].as_u64().unwrap() > 0 || f["memory_max_hits"].as_u64().unwrap() > 0,
        "{s}"
    );
    assert_eq!(
        env.sh(T2, "echo fine").trim(),
        "fine",
        "neighbour untouched"
    );
    assert_eq!(env.stats(T2, 50)["faults"]["oom_kills"].as_u64(), Some(0));
}

fn shown(env: &Env, tenant: &str) -> serde_json::Value {
    serde_json::from_str(&env.ok(&["limits", "show", tenant, "--json"])).unwrap()
}

#[test]
fn limits_set_is_saved_in_the_override_and_survives_restart_and_reboot() {
    let env = Env::new();
    env.default_profile_with("");
    let over = env.config.path().join(format!("tenants/{T1}.toml"));
    env.write_config(
        &format!("tenants/{T1}.toml"),
        "# operator's note: the shop\n[limits]\nprocesses = 150 # raised for the shop\n",
    );
    env.ok(&["up", T1]);
    let out = env.ok(&["limits", "set", T1, "cpu=50%", "memory.max=512M"]);
    assert!(out.contains("saved in") && out.contains("applied"), "{out}");
    let l = shown(&env, T1);
    assert_eq!(l["cpu_pct"], 50, "{l}");
    assert_eq!(l["memory_max"], 512 << 20, "{l}");
    assert_eq!(l["processes"], 150, "{l}");
    let text = std::fs::read_to_string(&over).unwrap();
    assert!(text.starts_with("# operator's note: the shop\n"), "{text}");
    assert!(
        text.contains("processes = 150 # raised for the shop"),
        "{text}"
    );
    assert!(
        text.contains("cpu = \"50%\"") && text.contains("memory.max = \"512M\""),
        "{text}"
    );

    // --runtime: the running sandbox only.
    env.ok(&["limits", "set", T1, "processes=300", "--runtime"]);
    assert_eq!(shown(&env, T1)["processes"], 300);
    env.ok(&["restart", T1]);
    let l = shown(&env, T1);
    assert_eq!(
        l["processes"], 150,
        "a --runtime change is gone after restart: {l}"
    );
    assert_eq!(l["cpu_pct"], 50, "a saved change survives restart: {l}");

    // A reboot: every sandbox down and the state dir wiped.
    env.ok(&["down", "--all"]);
    for e in std::fs::read_dir(env.state_dir()).unwrap().flatten() {
        let _ = std::fs::remove_dir_all(e.path()).or_else(|_| std::fs::remove_file(e.path()));
    }
    env.ok(&["up", T1]);
    assert_eq!(shown(&env, T1)["cpu_pct"], 50, "survives a wiped state dir");

    // Impossible together: refused with the reason, the file unchanged.
    let before = std::fs::read(&over).unwrap();
    let o = env.run(&["limits", "set", T1, "entry_processes=500"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success(),
        "entry_processes above processes accepted"
    );
    assert!(err.contains("above processes"), "{err}");
    assert_eq!(std::fs::read(&over).unwrap(), before, "nothing written");
    assert_eq!(shown(&env, T1)["entry_processes"], 20, "nothing applied");
}

#[test]
fn a_tenant_that_is_not_up_can_be_changed_and_given_a_plan() {
    let env = Env::new();
    env.default_profile_with("");
    let out = env.ok(&["limits", "set", T2, "memory.max=256M"]);
    assert!(out.contains("applies when"), "{out}");
    assert!(!env.ok(&["ls"]).contains(T2), "set does not bring it up");
    assert_eq!(shown(&env, T2)["memory_max"], 256 << 20);
    env.write_config("plans/business.toml", "cpu = \"150%\"\nprocesses = 400\n");
    env.ok(&["plan", "set", T2, "business"]);
    let text =
        std::fs::read_to_string(env.config.path().join(format!("tenants/{T2}.toml"))).unwrap();
    assert!(text.starts_with("plan = \"business\"\n"), "{text}");
    let l = shown(&env, T2);
    assert_eq!(l["processes"], 400, "{l}");
    assert_eq!(
        l["memory_max"],
        256 << 20,
        "the override's own key stays: {l}"
    );
    // A plan that does not exist: refused, nothing written.
    let o = env.run(&["plan", "set", T2, "nosuch"]);
    assert!(!o.status.success());
    let after =
        std::fs::read_to_string(env.config.path().join(format!("tenants/{T2}.toml"))).unwrap();
    assert_eq!(after, text);
}
