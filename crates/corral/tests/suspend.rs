//! `corral suspend` / `unsuspend` (as root, real cgroups and sandboxes):
//! the tenant's processes stop and resume exactly, every way in refuses
//! with exit 77 and the reason, and the decision survives a rebuild and a
//! wiped state dir. The gateway's 503 is tested in gateway.rs, logins in
//! logins.rs' harness terms by the shared check (corral-access).

mod common;
use common::*;
use std::time::Duration;

const EXIT_SUSPENDED: i32 = 77;

fn cpu(env: &Env, tenant: &str) -> f64 {
    env.stats(tenant, 1500)["cpu_percent"].as_f64().unwrap()
}

fn refused(env: &Env, args: &[&str]) -> String {
    let o = env.run(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(
        o.status.code(),
        Some(EXIT_SUSPENDED),
        "corral {args:?} while suspended: {err}"
    );
    assert!(
        err.contains("is suspended") && err.contains("unpaid invoice"),
        "{err}"
    );
    err
}

#[test]
fn a_suspended_tenant_stops_is_refused_everywhere_and_resumes_exactly() {
    let env = Env::new();
    env.default_profile_with("");
    env.ok(&["up", T1]);
    // A CPU hog that runs for 60 s unless stopped.
    env.ok(&[
        "run",
        "--detach",
        T1,
        "--",
        "/bin/sh",
        "-c",
        "end=$(( $(date +%s) + 60 )); while [ $(date +%s) -lt $end ]; do :; done",
    ]);
    std::thread::sleep(Duration::from_millis(300));
    let running = cpu(&env, T1);
    env.ok(&["suspend", T1, "--reason", "unpaid invoice"]);
    let stopped = cpu(&env, T1);
    eprintln!("cpu before: {running:.1}%, suspended: {stopped:.1}%");
    assert!(running > 20.0, "the hog runs: {running}");
    assert!(
        stopped < 2.0,
        "a suspended tenant's hog makes no progress: {stopped}"
    );

    refused(&env, &["run", T1, "--", "/bin/true"]);
    refused(&env, &["up", T1]);
    refused(&env, &["restart", T1]);
    // The sandbox stays up, and says so.
    assert!(env.ok(&["ls"]).contains(T1));

    env.ok(&["unsuspend", T1]);
    let resumed = cpu(&env, T1);
    eprintln!("resumed: {resumed:.1}%");
    assert!(resumed > 20.0, "unsuspend resumes the hog: {resumed}");
    env.ok(&["run", T1, "--", "/bin/true"]);

    // The decision survives a reboot: every sandbox down, the state dir
    // wiped (it lives in the configuration directory).
    env.ok(&["suspend", T1, "--reason", "unpaid invoice"]);
    env.ok(&["down", "--all"]);
    for e in std::fs::read_dir(env.state_dir()).unwrap().flatten() {
        let _ = std::fs::remove_dir_all(e.path()).or_else(|_| std::fs::remove_file(e.path()));
    }
    refused(&env, &["up", T1]);
    refused(&env, &["run", T1, "--", "/bin/true"]);
    assert!(!env.ok(&["ls"]).contains(T1), "nothing was brought up");
    env.ok(&["unsuspend", T1]);
    env.ok(&["run", T1, "--", "/bin/true"]);
    let again = env.ok(&["unsuspend", T1]);
    assert!(again.contains("was not suspended"), "{again}");
}

#[test]
fn an_unknown_tenant_cannot_be_suspended() {
    let env = Env::new();
    env.default_profile_with("");
    let o = env.run(&["suspend", "corral-nosuchuser"]);
    assert!(!o.status.success());
    assert!(!env
        .config
        .path()
        .join("suspended/corral-nosuchuser.json")
        .exists());
}
