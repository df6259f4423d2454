use super::*;
use crate::error::Problem;
use crate::spec::IoLimits;
use crate::testfs::{read, FakeTree, V1_FILES};

/// A v1 tenant `t` with every interface file present (and empty).
fn v1_tenant(ctrls: &[Controller]) -> (FakeTree, TenantCgroup) {
    let (tree, backend) = FakeTree::v1(ctrls);
    let cg = TenantCgroup::create(&backend, "t").unwrap();
    for (c, files) in V1_FILES {
        if let Some(d) = cg.dir(*c) {
            FakeTree::files(&d, files);
        }
    }
    (tree, cg)
}

fn v2_tenant(files: &[&str]) -> (FakeTree, TenantCgroup) {
    let (tree, backend) = FakeTree::v2("cpuset cpu io memory hugetlb pids");
    let cg = TenantCgroup::create(&backend, "t").unwrap();
    FakeTree::files(&cg.dirs()[0], files);
    (tree, cg)
}

fn full_limits() -> Limits {
    Limits {
        cpu_pct: Some(50),
        cpu_weight: Some(200),
        memory_max: Some(64 << 20),
        memory_high: Some(48 << 20),
        memory_swap_max: Some(16 << 20),
        processes: Some(20),
        io: IoLimits {
            write_bps: Some(2 << 20),
            read_iops: Some(300),
            devices: vec!["7:0".into()],
            ..Default::default()
        },
        ..Default::default()
    }
}

#[test]
fn v1_writes_exact_files() {
    let (_t, cg) = v1_tenant(&Controller::ALL);
    cg.apply(&full_limits()).unwrap();
    let f = |c, name: &str| read(cg.dir(c).unwrap().join(name));
    assert_eq!(f(Controller::Cpu, "cpu.cfs_period_us"), "100000\n");
    assert_eq!(f(Controller::Cpu, "cpu.cfs_quota_us"), "50000\n");
    assert_eq!(f(Controller::Cpu, "cpu.shares"), "2048\n");
    assert_eq!(f(Controller::Memory, "memory.limit_in_bytes"), "67108864\n");
    assert_eq!(
        f(Controller::Memory, "memory.memsw.limit_in_bytes"),
        "83886080\n"
    );
    assert_eq!(
        f(Controller::Memory, "memory.soft_limit_in_bytes"),
        "50331648\n"
    );
    assert_eq!(f(Controller::Pids, "pids.max"), "20\n");
    assert_eq!(
        f(Controller::Blkio, "blkio.throttle.write_bps_device"),
        "7:0 2097152\n"
    );
    assert_eq!(
        f(Controller::Blkio, "blkio.throttle.read_iops_device"),
        "7:0 300\n"
    );
    assert_eq!(f(Controller::Blkio, "blkio.throttle.read_bps_device"), "");
    assert_eq!(f(Controller::Blkio, "blkio.throttle.write_iops_device"), "");
    assert_eq!(
        f(Controller::Freezer, "freezer.state"),
        "",
        "apply does not freeze"
    );
}

#[test]
fn v1_live_update_resets_unset_limits_and_clears_old_device_rules() {
    let (_t, cg) = v1_tenant(&Controller::ALL);
    let blkio = cg.dir(Controller::Blkio).unwrap();
    // The kernel lists existing rules in the file: a rule from an earlier apply.
    std::fs::write(
        blkio.join("blkio.throttle.write_bps_device"),
        "7:0 2097152\n",
    )
    .unwrap();
    let mut l = Limits::default();
    l.io.read_bps = Some(1 << 20);
    l.io.devices = vec!["254:0".into()];
    cg.apply(&l).unwrap();
    let f = |c, name: &str| read(cg.dir(c).unwrap().join(name));
    assert_eq!(f(Controller::Cpu, "cpu.cfs_quota_us"), "-1\n");
    assert_eq!(f(Controller::Cpu, "cpu.shares"), "1024\n");
    assert_eq!(f(Controller::Memory, "memory.limit_in_bytes"), "-1\n");
    assert_eq!(f(Controller::Memory, "memory.memsw.limit_in_bytes"), "-1\n");
    assert_eq!(f(Controller::Memory, "memory.soft_limit_in_bytes"), "-1\n");
    assert_eq!(f(Controller::Pids, "pids.max"), "max\n");
    assert_eq!(
        f(Controller::Blkio, "blkio.throttle.read_bps_device"),
        "254:0 1048576\n"
    );
    assert_eq!(
        f(Controller::Blkio, "blkio.throttle.write_bps_device"),
        "7:0 2097152\n7:0 0\n"
    );
}

#[test]
fn empty_device_list_means_every_real_disk() {
    let (_t, cg) = v1_tenant(&Controller::ALL);
    let mut l = Limits::default();
    l.io.write_iops = Some(100);
    cg.apply(&l).unwrap();
    // Fake sysfs: sda 8:0 and vda 254:0 count, loop0 does not.
    let got = read(
        cg.dir(Controller::Blkio)
            .unwrap()
            .join("blkio.throttle.write_iops_device"),
    );
    assert_eq!(got, "8:0 100\n254:0 100\n");
}

#[test]
fn weight_to_shares() {
    let (_t, cg) = v1_tenant(&Controller::ALL);
    for (weight, shares) in [(1, "10"), (100, "1024"), (10000, "102400"), (50, "512")] {
        let l = Limits {
            cpu_weight: Some(weight),
            ..Default::default()
        };
        let steps = cg.plan(&l).unwrap();
        let path = cg.dir(Controller::Cpu).unwrap().join("cpu.shares");
        assert!(
            steps.contains(&Step::Write {
                path,
                value: shares.into()
            }),
            "{weight}: {steps:?}"
        );
    }
}

#[test]
fn v2_writes_exact_files() {
    let files = [
        "cpu.max",
        "cpu.weight",
        "memory.max",
        "memory.high",
        "memory.swap.max",
        "pids.max",
        "io.max",
    ];
    let (_t, cg) = v2_tenant(&files);
    let dir = cg.dirs()[0].clone();
    std::fs::write(
        dir.join("io.max"),
        "8:0 rbps=1 wbps=max riops=max wiops=max\n",
    )
    .unwrap();
    cg.apply(&full_limits()).unwrap();
    assert_eq!(read(dir.join("cpu.max")), "50000 100000\n");
    assert_eq!(read(dir.join("cpu.weight")), "200\n");
    assert_eq!(read(dir.join("memory.max")), "67108864\n");
    assert_eq!(read(dir.join("memory.high")), "50331648\n");
    assert_eq!(read(dir.join("memory.swap.max")), "16777216\n");
    assert_eq!(read(dir.join("pids.max")), "20\n");
    assert_eq!(
        read(dir.join("io.max")),
        "8:0 rbps=1 wbps=max riops=max wiops=max\n\
         7:0 rbps=max wbps=2097152 riops=300 wiops=max\n\
         8:0 rbps=max wbps=max riops=max wiops=max\n"
    );
    cg.apply(&Limits::default()).unwrap();
    assert_eq!(read(dir.join("cpu.max")), "50000 100000\nmax 100000\n");
    assert_eq!(read(dir.join("cpu.weight")), "200\n100\n");
    assert_eq!(read(dir.join("memory.max")), "67108864\nmax\n");
}

#[test]
fn unsupported_limits_fail_before_writing() {
    // v1 without blkio, IO limit set.
    let (t, cg) = v1_tenant(&Controller::REQUIRED);
    let before = t.snapshot();
    let e = cg
        .apply(&Limits {
            io: IoLimits {
                read_bps: Some(1),
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("limits.io cannot be enforced here: the v1 blkio controller is not mounted"),
        "{e}"
    );
    assert_eq!(t.snapshot(), before);
    // v1 without memsw (swap accounting off), swap limit set.
    std::fs::remove_file(
        cg.dir(Controller::Memory)
            .unwrap()
            .join("memory.memsw.limit_in_bytes"),
    )
    .unwrap();
    let before = t.snapshot();
    let e = cg
        .apply(&Limits {
            memory_swap_max: Some(0),
            cpu_pct: Some(10),
            ..Default::default()
        })
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("memory.memsw.limit_in_bytes is missing"),
        "{e}"
    );
    assert_eq!(t.snapshot(), before);
    // Without a swap limit, memory.limit_in_bytes alone is written.
    cg.apply(&Limits {
        memory_max: Some(64 << 20),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(
        read(
            cg.dir(Controller::Memory)
                .unwrap()
                .join("memory.limit_in_bytes")
        ),
        "67108864\n"
    );
    // v2 without io.max (io not enabled).
    let (t, cg) = v2_tenant(&[
        "cpu.max",
        "cpu.weight",
        "memory.max",
        "memory.high",
        "pids.max",
    ]);
    let before = t.snapshot();
    let e = cg
        .apply(&Limits {
            io: IoLimits {
                write_bps: Some(1),
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap_err();
    assert!(
        e.to_string().contains("io controller is not enabled"),
        "{e}"
    );
    assert_eq!(t.snapshot(), before);
}

#[test]
fn bad_values_write_nothing() {
    let (t, cg) = v1_tenant(&Controller::ALL);
    let before = t.snapshot();
    // A device that does not exist, with valid limits before it in the order.
    let mut l = full_limits();
    l.io.devices = vec!["/dev/nope".into()];
    let e = cg.apply(&l).unwrap_err();
    match &e {
        CgroupError::Limit(le) => assert_eq!(
            le.problem,
            Problem::Device {
                device: "/dev/nope".into(),
                reason: "no such device".into()
            }
        ),
        other => panic!("{other}"),
    }
    assert_eq!(
        e.to_string(),
        "limits.io.devices: device /dev/nope: no such device"
    );
    // A partition, and a MAJ:MIN unknown to sysfs.
    l.io.devices = vec!["254:1".into()];
    assert!(cg.apply(&l).unwrap_err().to_string().contains("partition"));
    l.io.devices = vec!["9:9".into()];
    assert!(cg
        .apply(&l)
        .unwrap_err()
        .to_string()
        .contains("no block device 9:9"));
    // Limits built by hand that contradict each other.
    let l = Limits {
        memory_max: Some(64 << 20),
        memory_high: Some(128 << 20),
        ..Default::default()
    };
    assert!(cg
        .apply(&l)
        .unwrap_err()
        .to_string()
        .contains("above memory.max"));
    assert_eq!(t.snapshot(), before, "nothing may be written");
    // And values rejected by parsing never reach apply at all.
    let mut l = Limits::default();
    assert!(l.set("memory", "lots").is_err());
    assert!(l.set("io.devices", "/dev/nope").is_err());
    assert_eq!(l, Limits::default());
}

#[test]
fn v1_cpu_bandwidth_values_the_cgroup_has_are_not_written_again() {
    let (_t, cg) = v1_tenant(&Controller::ALL);
    let cpu = cg.dir(Controller::Cpu).unwrap();
    let writes = |cg: &TenantCgroup, l: &Limits| -> Vec<String> {
        cg.plan(l)
            .unwrap()
            .into_iter()
            .filter_map(|s| match s {
                Step::Write { path, value } if path.starts_with(&cpu) => Some(format!(
                    "{}={value}",
                    path.file_name().unwrap().to_string_lossy()
                )),
                _ => None,
            })
            .collect()
    };
    let half = Limits {
        cpu_pct: Some(50),
        ..Default::default()
    };
    // What a new cgroup holds (the kernel's defaults): only the quota and shares.
    std::fs::write(cpu.join("cpu.cfs_period_us"), "100000\n").unwrap();
    std::fs::write(cpu.join("cpu.cfs_quota_us"), "-1\n").unwrap();
    assert_eq!(
        writes(&cg, &half),
        ["cpu.cfs_quota_us=50000", "cpu.shares=1024"]
    );
    assert_eq!(writes(&cg, &Limits::default()), ["cpu.shares=1024"]);
    cg.apply(&half).unwrap();
    // (The stand-in file keeps each write; the kernel's shows the last.)
    assert_eq!(read(cpu.join("cpu.cfs_quota_us")), "-1\n50000\n");
    assert_eq!(read(cpu.join("cpu.cfs_period_us")), "100000\n");
    std::fs::write(cpu.join("cpu.cfs_quota_us"), "50000\n").unwrap();
    assert_eq!(writes(&cg, &half), ["cpu.shares=1024"]);
    // Another period (set by hand): written back, then the quota if it differs.
    std::fs::write(cpu.join("cpu.cfs_period_us"), "250000\n").unwrap();
    assert_eq!(
        writes(&cg, &half),
        ["cpu.cfs_period_us=100000", "cpu.shares=1024"]
    );
    assert_eq!(
        writes(&cg, &Limits::default()),
        [
            "cpu.cfs_period_us=100000",
            "cpu.cfs_quota_us=-1",
            "cpu.shares=1024"
        ]
    );
}
