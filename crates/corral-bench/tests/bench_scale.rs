//! `corral-bench scale --smoke` and `corral-bench neighbours --smoke`, for
//! real (as root), each against a private state dir and cgroup parent: the
//! result file is complete and nothing is left behind (users, processes,
//! cgroups, mounts, network namespaces, files in the tenants' homes). The
//! numbers are not checked: benchmarks print numbers, they are not timed
//! tests. The two runs are serialised (they share tenants and, for scale,
//! machine-wide users).

// corral's integration-test harness (state dir, config, cgroup parent,
// clean-up on drop), shared rather than copied.
#[path = "../../corral/tests/common/mod.rs"]
mod common;
mod support;
use common::*;
use corral_bench::ResultSet;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;
use support::*;

static SERIAL: Mutex<()> = Mutex::new(());

/// Hang guard only (each smoke run takes well under a minute): SIGTERM (the
/// bench cleans up), then SIGKILL.
const HANG_LIMIT: Duration = Duration::from_secs(240);

/// Run `corral-bench SUITE --smoke --json` (checked); its results and pid.
fn bench(env: &Env, suite: &str, out: &Path) -> (ResultSet, i32) {
    let (rs, pid) = smoke_results(env, suite, out, HANG_LIMIT, Duration::from_secs(60));
    assert_eq!(rs.suites(), [suite], "only the suite asked for");
    (rs, pid)
}

#[test]
fn scale_smoke_is_complete_and_leaves_nothing_behind() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let out = tempfile::Builder::new()
        .prefix("corral-bench-scale")
        .tempdir_in("/var/tmp")
        .unwrap();
    let (rs, pid) = bench(&env, "scale", out.path());

    // results.json: the smoke size (20 tenants), every figure.
    let mode = "20 tenants";
    for f in [
        "up_ms_per_tenant",
        "up_total_s",
        "up_one_ms",
        "join_ms",
        "join_p90_ms",
        "join_ref_ms",
        "join_vs_ref",
        "join_vs_first",
        "down_total_s",
        "down_ms_per_tenant",
    ] {
        figure(&rs, "scale", "time", mode, f);
    }
    assert_eq!(
        figure(&rs, "scale", "time", mode, "join_ms").samples.len(),
        40,
        "every join sampled"
    );
    assert_eq!(
        figure(&rs, "scale", "time", mode, "join_vs_first").median,
        1.0,
        "the first size is the reference"
    );
    for f in [
        "init_pss_kib",
        "init_rss_kib",
        "kernel_kib",
        "tmpfs_kib",
        "total_kib",
        "used_kib",
        "host_mounts",
        "floor_kib",
        "floor_kernel_kib",
        "floor_holder_pss_kib",
        "above_floor_kib",
    ] {
        figure(&rs, "scale", "memory", mode, f);
    }
    // The peer: 20 holders measured at the same size, one PSS sample each,
    // a kernel share that is not nothing (namespaces, cgroups, a process).
    let floor = figure(&rs, "scale", "memory", mode, "floor_holder_pss_kib");
    assert_eq!(floor.samples.len(), 20, "one PSS sample per holder");
    assert!(
        figure(&rs, "scale", "memory", mode, "floor_kernel_kib").median > 20.0,
        "the floor's kernel share is counted"
    );
    assert!(
        rs.notes
            .iter()
            .any(|n| n.starts_with("scale 20 tenants: the kernel's floor (no corral")),
        "{:?}",
        rs.notes
    );
    assert_eq!(
        figure(&rs, "scale", "memory", mode, "init_pss_kib")
            .samples
            .len(),
        20,
        "one PSS sample per init"
    );
    assert!(
        rs.notes
            .iter()
            .any(|n| n.starts_with("scale targets at 20 tenants")),
        "{:?}",
        rs.notes
    );
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(
        md.contains("## Scale: many idle tenants") && md.contains("| 20 tenants |"),
        "{md}"
    );

    // The suite's users, their homes and group are gone, and so is everything else.
    for i in 1..=20 {
        let u = format!("corral-s{i:05}");
        assert!(
            corral_users::Db::system()
                .user_by_name(&u)
                .unwrap()
                .is_none(),
            "user {u} left"
        );
    }
    assert!(
        corral_users::Db::system()
            .group_by_name("corral-scale")
            .unwrap()
            .is_none(),
        "group corral-scale left"
    );
    assert!(
        !Path::new("/var/lib/corral-bench/homes").exists(),
        "homes left"
    );
    nothing_left(&env, pid);
}

#[test]
fn neighbours_smoke_is_complete_and_leaves_nothing_behind() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let out = tempfile::Builder::new()
        .prefix("corral-bench-neighbours")
        .tempdir_in("/var/tmp")
        .unwrap();
    let (rs, pid) = bench(&env, "neighbours", out.path());

    for c in ["static", "php"] {
        for l in ["no limits", "cpu 25%"] {
            for (test, sites) in [
                ("1 host", 1),
                ("2 hosts", 2),
                ("3 hosts", 3),
                ("noisy neighbour", 2),
            ] {
                for s in 1..=sites {
                    let t = format!("{c}: {test}");
                    let m = format!("site{s} · {l}");
                    for f in [
                        "transactions",
                        "availability",
                        "response_time_ms",
                        "p99_ms",
                        "trans_per_s",
                        "throughput_mb_s",
                        "longest_ms",
                        "failed",
                        "tenant_cpu_pct",
                    ] {
                        figure(&rs, "neighbours", &t, &m, f);
                    }
                }
                let sum = format!("{test} · {l}");
                for f in [
                    "total_trans_per_s",
                    "cpu_user",
                    "cpu_system",
                    "cpu_idle",
                    "mem_used_mib",
                    "nginx_cpu_pct",
                ] {
                    figure(&rs, "neighbours", &format!("{c}: summary"), &sum, f);
                }
            }
            neighbours_summary(&rs, c, l);
            // The noisy host has two clients of 50 users.
            assert_eq!(
                figure(
                    &rs,
                    "neighbours",
                    &format!("{c}: noisy neighbour"),
                    &format!("site2 · {l}"),
                    "users"
                )
                .median,
                100.0
            );
        }
    }
    // With the cap, PHP's tenants were throttled by their cgroups.
    let throttled: f64 = ["1 host", "2 hosts", "3 hosts"]
        .iter()
        .map(|t| {
            figure(
                &rs,
                "neighbours",
                &format!("php: {t}"),
                "site1 · cpu 25%",
                "throttled_periods",
            )
            .median
        })
        .sum();
    assert!(throttled > 0.0, "PHP under a 25% cap was never throttled");

    nothing_left(&env, pid);
    for t in ["corral-demo1", "corral-demo2", "corral-t1"] {
        let p = home_of(t).join(format!(".corral-bench-{pid}"));
        assert!(!p.exists(), "{} left", p.display());
    }
    let fpm = processes_mentioning(&format!(".corral-bench-{pid}/"));
    assert!(fpm.is_empty(), "PHP-FPM left: {fpm:?}");
}
