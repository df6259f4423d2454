//! Limits enforced by the host's real cgroups (v1 on the project's VM; v2
//! hosts work the same). Root only: each test creates its own
//! `corral/test-<pid>-<n>` parent and removes it, also when failing.

mod common;

use common::{
    busy_loops, cpu_fraction, host_backend, serial, skip, spawn_in, LoopDevice, TestParent,
};
use corral_limits::{Controller, Limits};
use std::io::Read;
use std::time::{Duration, Instant};

fn limits(pairs: &[(&str, &str)]) -> Limits {
    let mut l = Limits::default();
    for (k, v) in pairs {
        l.set(k, v).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
    }
    l
}

fn assert_near(what: &str, got: f64, want: f64, rel: f64) {
    println!(
        "{what}: measured {got:.3}, target {want:.3} (±{:.0}%)",
        rel * 100.0
    );
    assert!(
        (got - want).abs() <= want * rel,
        "{what}: measured {got:.3}, want {want:.3} ±{:.0}%",
        rel * 100.0
    );
}

/// Measures the cgroup's CPU use in windows of `secs` until one lands
/// within ±`rel` of `want` (at most `tries` windows); returns the highest
/// measurement. Every window must stay below the upper bound: a limit is
/// never exceeded.
///
/// The lower bound needs the host to have that much CPU to give: the
/// group's parent `corral` competes with everything else on the host at
/// default weight. A group held back by its quota is throttled in nearly
/// every period (its demand is two cores); one throttled in fewer periods
/// was held back by other load. When no window was quota-bound, the lower
/// bound cannot be checked and this says so; a quota-bound window that is
/// still low means the limit is lower than set.
fn assert_cpu_near(
    cg: &corral_limits::TenantCgroup,
    what: &str,
    want: f64,
    rel: f64,
    secs: f64,
    tries: u32,
) -> f64 {
    let periods = (secs * 1e6 / corral_limits::CPU_PERIOD_US as f64) as u64;
    let mut seen = Vec::new();
    let mut best: f64 = 0.0;
    for _ in 0..tries {
        let before = cg.faults().unwrap().cpu_throttled_periods;
        let got = cpu_fraction(cg, secs);
        let throttled = cg.faults().unwrap().cpu_throttled_periods - before;
        best = best.max(got);
        println!(
            "{what}: measured {got:.3} of a core over {secs} s (target {want:.2} ±{:.0}%), throttled in {throttled} of {periods} periods",
            rel * 100.0
        );
        assert!(
            got <= want * (1.0 + rel),
            "{what}: {got:.3} exceeds the limit {want:.2} +{:.0}%",
            rel * 100.0
        );
        if got >= want * (1.0 - rel) {
            return best;
        }
        let quota_bound = throttled * 10 >= periods * 8;
        assert!(!quota_bound, "{what}: throttled by its quota in {throttled} of {periods} periods, yet {got:.3} is below {want:.2} -{:.0}%", rel * 100.0);
        seen.push(format!("{got:.3} (throttled in {throttled} periods)"));
    }
    println!(
        "{what}: NOT VERIFIED (lower bound): the busy host never gave the group its quota: {}",
        seen.join(", ")
    );
    best
}

#[test]
fn lifecycle_add_procs_kill_remove() {
    let host = host_backend();
    let _s = serial();
    let parent = TestParent::new(&host);
    let cg = parent.tenant("life");
    let again =
        corral_limits::TenantCgroup::create(&parent.backend, "life").expect("create is idempotent");
    assert_eq!(again.dirs(), cg.dirs());
    let mut child = spawn_in(&cg, "exec sleep 30");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(cg.procs().unwrap(), vec![child.pid()]);
    assert_eq!(cg.usage().unwrap().processes, 1);
    cg.kill_all().unwrap();
    let st = child
        .wait_for(Duration::from_secs(5))
        .expect("killed child exits");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&st),
        Some(libc::SIGKILL)
    );
    assert!(cg.procs().unwrap().is_empty());
    // Memory limit up and down with memsw present: the write order matters.
    for (value, bytes) in [("64M", 64u64 << 20), ("1G", 1 << 30), ("32M", 32 << 20)] {
        cg.apply(&limits(&[("memory.max", value)]))
            .unwrap_or_else(|e| panic!("memory.max={value}: {e}"));
        let file = if host.is_v2() {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        };
        let got = std::fs::read_to_string(cg.dir(Controller::Memory).unwrap().join(file)).unwrap();
        assert_eq!(got.trim(), bytes.to_string());
    }
    cg.remove().unwrap();
    for d in cg.dirs() {
        assert!(!d.exists(), "{} removed", d.display());
    }
    cg.remove().expect("remove is idempotent");
}

#[test]
fn fork_bomb_stops_at_process_limit() {
    let host = host_backend();
    let _s = serial();
    let parent = TestParent::new(&host);
    let bomb_cg = parent.tenant("bomb");
    let neighbour = parent.tenant("neighbour");
    bomb_cg.apply(&limits(&[("processes", "20")])).unwrap();
    // Forks until refused, then keeps retrying, for 10 s at most (timeout
    // kills its whole process group). dash exits on a failed fork; bash
    // retries with backoff, but gives up early when a SIGCHLD cuts its
    // backoff short, so its children live on until the end.
    let _bomb = spawn_in(
        &bomb_cg,
        "exec timeout -s KILL 10 bash -c 'exec 2>/dev/null; while ((SECONDS < 9)); do sleep 30 & done'",
    );
    std::thread::sleep(Duration::from_secs(2));
    let mut peak = 0;
    for _ in 0..10 {
        peak = peak.max(bomb_cg.usage().unwrap().processes);
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("fork bomb: processes sampled up to {peak}");
    assert!(
        (10..=20).contains(&peak),
        "bomb runs but stays at the limit: {peak}"
    );
    let hits = bomb_cg.faults().unwrap().pids_max_hits;
    println!("fork bomb: pids max hits {hits}");
    assert!(hits > 0);
    // The neighbour still gets work done while the bomb runs.
    let t0 = Instant::now();
    let mut n = spawn_in(&neighbour, "echo neighbour-ok");
    let st = n
        .wait_for(Duration::from_secs(5))
        .expect("neighbour command finishes within 5 s");
    let mut out = String::new();
    n.0.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    println!("fork bomb: neighbour command took {:?}", t0.elapsed());
    assert!(
        st.success() && out.trim() == "neighbour-ok",
        "{st:?} {out:?}"
    );
    assert!(
        !bomb_cg.procs().unwrap().is_empty(),
        "bomb still running during the neighbour check"
    );
    bomb_cg.kill_all().unwrap();
    assert!(bomb_cg.procs().unwrap().is_empty());
}

#[test]
fn memory_hog_is_oom_killed_and_neighbour_untouched() {
    let host = host_backend();
    let _s = serial();
    let parent = TestParent::new(&host);
    let hog_cg = parent.tenant("hog");
    let neighbour = parent.tenant("neighbour");
    hog_cg.apply(&limits(&[("memory.max", "64M")])).unwrap();
    let mut quiet = spawn_in(&neighbour, "exec sleep 30");
    // dd's 200 MiB buffer is filled by read(2) from /dev/zero: every page touched.
    let mut hog = spawn_in(
        &hog_cg,
        "exec timeout -s KILL 20 dd if=/dev/zero of=/dev/null bs=200M count=1",
    );
    let st = hog.wait_for(Duration::from_secs(25)).expect("hog ends");
    // GNU timeout passes its child's death by SIGKILL on by killing itself the same way.
    let sig = std::os::unix::process::ExitStatusExt::signal(&st);
    assert!(
        sig == Some(libc::SIGKILL) || st.code() == Some(137),
        "hog was killed: {st:?}"
    );
    let f = hog_cg.faults().unwrap();
    println!("memory hog: {f:?}");
    assert!(f.oom_kills > 0 && f.memory_max_hits > 0, "{f:?}");
    assert!(
        quiet.0.try_wait().unwrap().is_none(),
        "neighbour still running"
    );
    let nf = neighbour.faults().unwrap();
    assert_eq!((nf.oom_kills, nf.memory_max_hits), (0, 0), "{nf:?}");
    assert_eq!(neighbour.procs().unwrap(), vec![quiet.pid()]);
}

#[test]
fn cpu_limit_holds_at_50_percent() {
    let host = host_backend();
    let _s = serial();
    let parent = TestParent::new(&host);
    let cg = parent.tenant("cpu");
    // Highest weight so sibling tenants under corral/ cannot starve the
    // group below its quota; the quota is what is measured.
    cg.apply(&limits(&[("cpu", "50%"), ("cpu.weight", "10000")]))
        .unwrap();
    let _loops = busy_loops(&cg, 25);
    std::thread::sleep(Duration::from_millis(500));
    assert_cpu_near(&cg, "cpu 50%", 0.5, 0.10, 3.0, 6);
    let f = cg.faults().unwrap();
    assert!(
        f.cpu_throttled_periods > 0 && f.cpu_throttled_ns > 0,
        "{f:?}"
    );
}

#[test]
fn cpu_limit_changes_live() {
    let host = host_backend();
    let _s = serial();
    let parent = TestParent::new(&host);
    let cg = parent.tenant("live");
    let mut l = limits(&[("cpu", "20%"), ("cpu.weight", "10000")]);
    cg.apply(&l).unwrap();
    let _loops = busy_loops(&cg, 40);
    std::thread::sleep(Duration::from_millis(500));
    assert_cpu_near(&cg, "cpu 20%", 0.2, 0.10, 2.5, 6);
    l.set("cpu", "80%").unwrap();
    cg.apply(&l).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let best = assert_cpu_near(&cg, "cpu 80% (changed live)", 0.8, 0.10, 2.5, 6);
    assert!(
        best > 0.2 * 1.1 + 0.05,
        "usage did not follow the raised limit: at most {best:.3}"
    );
}

#[test]
fn direct_io_is_throttled_on_a_loop_device() {
    let host = host_backend();
    let _s = serial();
    let dev = match LoopDevice::new(64 << 20) {
        Ok(d) => d,
        Err(reason) => {
            skip(
                "direct_io_is_throttled_on_a_loop_device",
                &format!("loop devices unavailable: {reason}"),
            );
            return;
        }
    };
    let parent = TestParent::new(&host);
    let cg = parent.tenant("io");
    let dev_path = dev.path().to_str().unwrap().to_string();
    cg.apply(&limits(&[
        ("io.write_bps", "2M"),
        ("io.devices", &dev_path),
    ]))
    .unwrap();
    let total: u64 = 6 << 20;
    let t0 = Instant::now();
    let mut dd = spawn_in(
        &cg,
        &format!(
            "exec timeout -s KILL 30 dd if=/dev/zero of={dev_path} bs=256K count=24 oflag=direct"
        ),
    );
    let st = dd.wait_for(Duration::from_secs(35)).expect("dd ends");
    let secs = t0.elapsed().as_secs_f64();
    assert!(st.success(), "dd: {st:?}");
    let rate = total as f64 / secs / (1u64 << 20) as f64;
    println!("io: wrote 6 MiB in {secs:.2} s");
    assert_near("io write MiB/s at 2M", rate, 2.0, 0.25);
    let u = cg.usage().unwrap();
    assert!(u.io_write_bytes >= total && u.io_write_ops >= 24, "{u:?}");
}

#[test]
fn bad_limits_change_nothing_on_a_live_cgroup() {
    let host = host_backend();
    let _s = serial();
    let parent = TestParent::new(&host);
    let cg = parent.tenant("bad");
    cg.apply(&limits(&[("cpu", "30%"), ("processes", "50")]))
        .unwrap();
    let read_all = || -> Vec<String> {
        let mut v = Vec::new();
        for d in cg.dirs() {
            let mut names: Vec<_> = std::fs::read_dir(&d)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            names.sort();
            for p in names {
                let name = p.file_name().unwrap().to_string_lossy().to_string();
                // Values only: counters and stat files may move on their own.
                if [
                    ".max",
                    "_us",
                    ".shares",
                    "_in_bytes",
                    "_device",
                    ".weight",
                    ".high",
                ]
                .iter()
                .any(|s| name.ends_with(s))
                {
                    v.push(format!(
                        "{name}={}",
                        std::fs::read_to_string(&p).unwrap_or_default()
                    ));
                }
            }
        }
        v
    };
    let before = read_all();
    let mut bad = limits(&[
        ("cpu", "90%"),
        ("memory.max", "64M"),
        ("io.write_bps", "1M"),
    ]);
    bad.io.devices = vec!["/dev/nope".into()];
    let e = cg.apply(&bad).unwrap_err();
    assert_eq!(
        e.to_string(),
        "limits.io.devices: device /dev/nope: no such device"
    );
    assert_eq!(read_all(), before);
}

/// `CgroupReader` keeps the counter files open: the counters it reads move
/// with the cgroup, no file is opened again, and a cgroup removed and made
/// again under the same name is read through new descriptors (the kernel
/// answers ENODEV on the old ones), never as the old cgroup's numbers.
#[test]
fn kept_reader_follows_counters_and_a_recreated_cgroup() {
    use corral_limits::{CgroupError, CgroupReader, FdBudget};
    let host = host_backend();
    let _s = serial();
    let parent = TestParent::new(&host);
    let cg = parent.tenant("kept");
    let budget = FdBudget::new(64);
    let mut reader = CgroupReader::new(cg.clone(), budget.clone());
    let (u0, _) = reader.usage_and_faults().unwrap();
    assert_eq!(u0.processes, 0);
    let kept = reader.open_files();
    // v1: 9 files in 5 hierarchies; v2: 5, or 6 with the io controller.
    let want = if host.is_v2() { 5..=6 } else { 9..=9 };
    assert!(want.contains(&kept), "{kept} files kept open");
    assert_eq!(budget.available(), 64 - kept);

    let mut child = spawn_in(
        &cg,
        "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exec sleep 30",
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let u1 = loop {
        let (u, _) = reader.usage_and_faults().unwrap();
        if u.cpu_usage_ns > u0.cpu_usage_ns && u.processes == 1 {
            break u;
        }
        assert!(Instant::now() < deadline, "counters did not move: {u:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        reader.open_files(),
        kept,
        "the same descriptors, none opened again"
    );

    // Down and up again between two readings.
    cg.kill_all().unwrap();
    child
        .wait_for(Duration::from_secs(5))
        .expect("killed child exits");
    cg.remove().unwrap();
    let cg = parent.tenant("kept");
    let (u2, f2) = reader.usage_and_faults().expect("the new cgroup is read");
    assert_eq!(u2.processes, 0, "not the old cgroup's process: {u2:?}");
    assert!(u2.cpu_usage_ns < u1.cpu_usage_ns, "{u2:?} after {u1:?}");
    assert_eq!(f2.pids_max_hits, 0);
    assert_eq!(reader.open_files(), kept);
    assert_eq!(
        budget.available(),
        64 - kept,
        "the old descriptors were closed"
    );

    // Down for good: NotFound, every descriptor given back.
    cg.remove().unwrap();
    let e = reader.usage_and_faults().unwrap_err();
    assert!(matches!(e, CgroupError::NotFound { .. }), "{e}");
    assert_eq!(reader.open_files(), 0);
    assert_eq!(budget.available(), 64);
}
