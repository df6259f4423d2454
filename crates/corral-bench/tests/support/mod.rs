//! What the bench's smoke tests add to corral's test harness
//! (`crates/corral/tests/common`): running `corral-bench` under a watchdog,
//! and finding the processes a run may have left.
#![allow(dead_code)]

use crate::common::{corral_bin, Env};
use corral_bench::{Figure, ResultSet};
use std::path::Path;
use std::process::{Command, Output};

/// `corral-bench --corral <corral under test> SUITE --smoke --out OUT`,
/// with the variables that point corral at the test's own state, config
/// and cgroup parent (the bench takes the cgroup parent from them too).
pub fn bench_command(env: &Env, suite: &str, out: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_corral-bench"));
    for (k, v) in env.cmd().get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd.arg("--corral")
        .arg(corral_bin())
        .args([suite, "--smoke", "--out"])
        .arg(out);
    cmd
}

/// `corral-bench SUITE --smoke --json --out OUT`, measuring the `corral`
/// under test with `env`'s cgroup parent, in a process group of its own,
/// with a watchdog: past `limit` it gets SIGTERM (the bench cleans up),
/// `grace` later the group gets SIGKILL. Returns the output, the bench's pid
/// and how long it took.
pub fn run_bench_smoke(
    env: &Env,
    suite: &str,
    out: &Path,
    limit: std::time::Duration,
    grace: std::time::Duration,
) -> (Output, i32, std::time::Duration) {
    use std::os::unix::process::CommandExt;
    let mut cmd = bench_command(env, suite, out);
    cmd.arg("--json");
    cmd.process_group(0);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let started = std::time::Instant::now();
    let child = cmd.spawn().expect("spawn corral-bench");
    let pid = child.id() as i32;
    std::thread::spawn(move || {
        while started.elapsed() < limit {
            std::thread::sleep(std::time::Duration::from_millis(200));
            // SAFETY: existence check of our own child's group.
            if unsafe { libc::kill(-pid, 0) } != 0 {
                return;
            }
        }
        // SAFETY: signalling the process group we created.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        std::thread::sleep(grace);
        // SAFETY: as above; the group's leader is our unreaped child.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    });
    let o = child.wait_with_output().unwrap();
    (o, pid, started.elapsed())
}

/// Processes whose command line mentions `needle` (nginx -p, fcgiwrap -s,
/// the gateway's --listen and corral's --state-dir all name the run's dir).
pub fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(raw) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&raw).replace('\0', " ");
            if cmd.contains(needle) {
                v.push(format!("{name}: {cmd}"));
            }
        }
    }
    v
}

fn ip(args: &[&str]) -> String {
    let o = std::process::Command::new("ip")
        .args(args)
        .output()
        .expect("run ip");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The run's state dir, processes, cgroups, mounts, network namespaces and
/// veth pairs are gone.
pub fn nothing_left(env: &Env, pid: i32) {
    let left: Vec<_> = std::fs::read_dir(env.state_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left in the state dir: {left:?}");
    let state = env.state_dir().to_string_lossy().into_owned();
    assert_eq!(
        processes_mentioning(&state),
        Vec::<String>::new(),
        "processes left"
    );
    let cgroups: Vec<_> = env
        .cgroup_dirs()
        .iter()
        .flat_map(|d| {
            std::fs::read_dir(d)
                .unwrap()
                .flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| e.path())
        })
        .collect();
    assert!(
        cgroups.is_empty(),
        "cgroups left under {}: {cgroups:?}",
        env.parent
    );
    assert_eq!(
        env.mounts_mentioning_state(),
        Vec::<String>::new(),
        "mounts left"
    );
    let netns = ip(&["netns", "list"]);
    assert!(
        !netns.contains(&format!("corral-bench-{pid}-")),
        "network namespaces left: {netns}"
    );
    let links = ip(&["-o", "link", "show"]);
    assert!(
        !links.contains(&format!(" cb{pid}h")),
        "veth pairs left: {links}"
    );
    // The scale suite's floor names its host ends cfl<pid % 100000>_<i>.
    assert!(
        !links.contains(&format!(" cfl{}_", pid % 100_000)),
        "the scale floor's veth pairs left: {links}"
    );
}

/// [`run_bench_smoke`], checked: the bench succeeded, its `--json` stdout
/// names no error, it wrote its three files, and the results are marked as
/// reduced. The results and the bench's pid.
pub fn smoke_results(
    env: &Env,
    suite: &str,
    out: &Path,
    limit: std::time::Duration,
    grace: std::time::Duration,
) -> (ResultSet, i32) {
    let (o, pid, took) = run_bench_smoke(env, suite, out, limit, grace);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    eprintln!(
        "corral-bench {suite} --smoke: {:.1} s, {:?}\n{stderr}",
        took.as_secs_f64(),
        o.status
    );
    assert!(
        o.status.success(),
        "corral-bench {suite} failed ({:?}) after {took:?}\nstdout: {stdout}\nstderr: {stderr}",
        o.status
    );
    // stdout (--json) names the files; all three exist.
    let v: serde_json::Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert!(v["error"].is_null(), "{v}");
    for f in ["results.json", "report.md", "report.html"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let rs = ResultSet::load(out.join("results.json")).unwrap();
    assert!(rs.quick, "a smoke run is marked as reduced");
    (rs, pid)
}

/// A figure of the results that holds data.
pub fn figure(rs: &ResultSet, suite: &str, test: &str, mode: &str, figure: &str) -> Figure {
    let row = rs
        .row(suite, test, mode)
        .unwrap_or_else(|| panic!("no row {suite}/{test}/{mode}"));
    let f = row
        .figure(figure)
        .unwrap_or_else(|| panic!("{suite}/{test}/{mode}: no figure {figure}: {row:?}"));
    assert!(
        !f.is_empty() && f.median.is_finite(),
        "{suite}/{test}/{mode}/{figure} is empty: {row:?}"
    );
    f.clone()
}

/// The neighbours suite's summary figures of one content (`static`, `php`)
/// and limit mode hold data: the neighbour's retention, 3 hosts' fairness.
pub fn neighbours_summary(rs: &ResultSet, content: &str, limits: &str) {
    let test = format!("{content}: summary");
    figure(
        rs,
        "neighbours",
        &test,
        &format!("noisy neighbour · {limits}"),
        "retention",
    );
    figure(
        rs,
        "neighbours",
        &test,
        &format!("3 hosts · {limits}"),
        "jain",
    );
}
