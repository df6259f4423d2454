//! `corral bench all --smoke`, for real (as root): every suite runs at tiny
//! sizes against a private state dir and cgroup parent, writes a complete
//! results.json, and leaves nothing behind. The numbers are not checked:
//! benchmarks print numbers, they are not timed tests.

mod common;
use common::*;
use corral_bench::ResultSet;
use std::path::Path;
use std::time::Duration;

/// Hang guard only (a smoke run takes well under a minute): SIGTERM (the
/// bench cleans up), then SIGKILL.
const HANG_LIMIT: Duration = Duration::from_secs(300);

/// Processes whose command line mentions `needle` (nginx -p, fcgiwrap -s,
/// the gateway's --listen and corral's --state-dir all name the run's dir).
fn processes_mentioning(needle: &str) -> Vec<String> {
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

fn figure_ok(rs: &ResultSet, suite: &str, test: &str, mode: &str, figure: &str) {
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
}

#[test]
fn bench_all_smoke_is_complete_and_leaves_nothing_behind() {
    let env = Env::new();
    let out = tempfile::Builder::new()
        .prefix("corral-bench-out")
        .tempdir_in("/var/tmp")
        .unwrap();
    let (o, pid, took) =
        run_bench_smoke(&env, "all", out.path(), HANG_LIMIT, Duration::from_secs(30));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    eprintln!(
        "corral bench all --smoke: {:.1} s, {:?}",
        took.as_secs_f64(),
        o.status
    );
    assert!(
        o.status.success(),
        "corral bench failed ({:?}) after {took:?}\nstdout: {stdout}\nstderr: {stderr}",
        o.status
    );

    // stdout (--json) names the files; all three exist.
    let v: serde_json::Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert!(v["error"].is_null(), "{v}");
    for f in ["results.json", "report.md", "report.html"] {
        assert!(out.path().join(f).is_file(), "{f} missing");
    }

    // results.json: every suite, corral's modes with data.
    let rs = ResultSet::load(out.path().join("results.json")).unwrap();
    let every: Vec<&str> = corral_bench::suites::Suite::ALL
        .iter()
        .map(|s| s.name())
        .collect();
    assert_eq!(rs.suites(), every, "every suite, in order");
    assert!(rs.quick, "a smoke run is marked as reduced");
    figure_ok(&rs, "join", "corral up", "corral", "ms");
    figure_ok(&rs, "join", "exec /bin/true", "corral-run", "ms");
    figure_ok(&rs, "join", "exec /bin/true", "bare", "ms");
    let gateway = rs.suite_rows("cgi").any(|r| r.mode == "corral-gateway");
    for test in ["small", "large", "php"] {
        figure_ok(&rs, "cgi", test, "corral-run", "req_per_s");
        figure_ok(&rs, "cgi", test, "corral-run", "succeeded");
        assert_eq!(
            rs.row("cgi", test, "corral-run").unwrap().median("failed"),
            Some(0.0),
            "cgi {test}: corral-run failed requests"
        );
        if gateway {
            figure_ok(&rs, "cgi", test, "corral-gateway", "req_per_s");
        }
    }
    let micro_tests: Vec<String> = rs
        .suite_rows("micro")
        .filter(|r| r.mode == "corral")
        .map(|r| r.test.clone())
        .collect();
    assert_eq!(micro_tests.len(), 10, "{micro_tests:?}");
    for t in &micro_tests {
        figure_ok(&rs, "micro", t, "corral", "single");
        figure_ok(&rs, "micro", t, "corral", "parallel");
        figure_ok(&rs, "micro", t, "native", "single");
    }
    for c in ["static", "php"] {
        for l in ["no limits", "cpu 25%"] {
            figure_ok(
                &rs,
                "neighbours",
                &format!("{c}: noisy neighbour"),
                &format!("site1 · {l}"),
                "trans_per_s",
            );
            figure_ok(
                &rs,
                "neighbours",
                &format!("{c}: summary"),
                &format!("noisy neighbour · {l}"),
                "retention",
            );
            figure_ok(
                &rs,
                "neighbours",
                &format!("{c}: summary"),
                &format!("3 hosts · {l}"),
                "jain",
            );
        }
    }
    figure_ok(&rs, "scale", "time", "20 tenants", "join_ms");
    figure_ok(&rs, "scale", "memory", "20 tenants", "total_kib");
    for op in ["getpid", "fork", "thread"] {
        figure_ok(&rs, "pidns", op, "corral", "cpu_ns");
        figure_ok(&rs, "pidns", op, "host", "cpu_ns");
        figure_ok(&rs, "pidns", op, "nested-3", "cpu_ns");
    }

    // Nothing left behind: the run's directory (state, config, sockets,
    // nginx prefix) is gone, so are its processes, cgroups, mounts and the
    // files it put in the tenants' homes.
    let state = env.state_dir().to_string_lossy().into_owned();
    let left: Vec<_> = std::fs::read_dir(env.state_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left in the state dir: {left:?}");
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
    for t in ["corral-demo1", "corral-demo2", "corral-t1"] {
        let p = home_of(t).join(format!(".corral-bench-{pid}"));
        assert!(!Path::new(&p).exists(), "{} left", p.display());
    }
    // neighbours' client namespaces and scale's users are gone too.
    let netns = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    let netns = String::from_utf8_lossy(&netns.stdout).into_owned();
    assert!(
        !netns.contains(&format!("corral-bench-{pid}-")),
        "network namespaces left: {netns}"
    );
    assert!(
        corral_users::Db::system()
            .user_by_name("corral-s00001")
            .unwrap()
            .is_none(),
        "scale users left"
    );
}
