use super::*;
use std::collections::BTreeMap;

fn origin(line: usize) -> Origin {
    Origin {
        file: "/etc/corral/plans/basic.toml".into(),
        line,
    }
}

/// A source from `key = value` TOML lines; each key's origin is its line.
fn source(lines: &[&str]) -> LimitsSource {
    let mut values = BTreeMap::new();
    for (i, line) in lines.iter().enumerate() {
        let table: toml::Table = line.parse().unwrap_or_else(|e| panic!("{line}: {e}"));
        let (k, v) = table.into_iter().next().unwrap();
        values.insert(k, (v, origin(i + 1)));
    }
    LimitsSource {
        limits_plan: "basic".into(),
        values,
    }
}

/// Like `source`, but keys may be dotted (`"memory.max" = ...` in TOML would be quoted).
fn src(pairs: &[(&str, &str)]) -> LimitsSource {
    let lines: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("x = {v}\n# {k}"))
        .collect();
    let mut values = BTreeMap::new();
    for (i, ((k, _), line)) in pairs.iter().zip(&lines).enumerate() {
        let table: toml::Table = line.parse().unwrap();
        values.insert(k.to_string(), (table["x"].clone(), origin(i + 1)));
    }
    LimitsSource {
        limits_plan: "basic".into(),
        values,
    }
}

#[test]
fn parses_every_key() {
    let l = Limits::from_source(&src(&[
        ("cpu", "\"50%\""),
        ("cpu.weight", "200"),
        ("memory.max", "\"512M\""),
        ("memory.high", "\"400M\""),
        ("memory.swap_max", "0"),
        ("processes", "64"),
        ("io.read_bps", "\"10M\""),
        ("io.write_bps", "\"2M\""),
        ("io.read_iops", "1000"),
        ("io.write_iops", "\"500\""),
        ("io.devices", "[\"7:0\", \"254:0\"]"),
        ("entry_processes", "10"),
        ("mail.per_hour", "50"),
        ("rlimits.nofile", "1024"),
        ("rlimits.core", "0"),
        ("rlimits.cpu", "3600"),
        ("rlimits.as", "\"4G\""),
    ]))
    .unwrap();
    let want = Limits {
        cpu_pct: Some(50),
        cpu_weight: Some(200),
        memory_max: Some(512 << 20),
        memory_high: Some(400 << 20),
        memory_swap_max: Some(0),
        processes: Some(64),
        io: IoLimits {
            read_bps: Some(10 << 20),
            write_bps: Some(2 << 20),
            read_iops: Some(1000),
            write_iops: Some(500),
            devices: vec!["7:0".into(), "254:0".into()],
        },
        entry_processes: Some(10),
        mail_per_hour: Some(50),
        rlimits: Rlimits {
            nofile: Some(1024),
            core: Some(0),
            cpu_seconds: Some(3600),
            address_space: Some(4 << 30),
        },
    };
    assert_eq!(l, want);
    assert!(l.has_cgroup_limits());
}

#[test]
fn memory_alias_and_unlimited() {
    let l = Limits::from_source(&source(&[
        "memory = \"1G\"",
        "processes = \"max\"",
        "cpu = \"unlimited\"",
    ]))
    .unwrap();
    assert_eq!(l.memory_max, Some(1 << 30));
    assert_eq!(l.processes, None);
    assert_eq!(l.cpu_pct, None);
    assert!(l.has_cgroup_limits());
    assert!(!Limits::default().has_cgroup_limits());
}

#[test]
fn error_messages_carry_origin_key_and_value() {
    let e = Limits::from_source(&src(&[("memory.max", "\"1G\""), ("cpu", "\"-5%\"")])).unwrap_err();
    // BTreeMap order: cpu (line 2) is checked first.
    assert_eq!(
        e.to_string(),
        "/etc/corral/plans/basic.toml:2: limits.cpu: expected a percentage like \"50%\" (100% = one core), or \"max\", found \"-5%\""
    );
    let e = Limits::from_source(&source(&["memory = \"lots\""])).unwrap_err();
    assert_eq!(e.origin, Some(origin(1)));
    assert!(
        e.to_string()
            .contains("limits.memory: expected a size like \"512M\""),
        "{e}"
    );
    assert!(e.to_string().ends_with("found \"lots\""), "{e}");
}

#[test]
fn rejects_bad_values() {
    let cases: &[(&str, &str, &str)] = &[
        ("cpu", "\"0%\"", "0 is not a usable"),
        ("cpu", "\"100000%\"", "cpu percentage"),
        ("cpu", "50", "expected a percentage"),
        ("cpu.weight", "0", "0 is not a usable weight"),
        ("cpu.weight", "10001", "between 1 and 10000"),
        ("memory.max", "-1", "expected a size"),
        ("memory.max", "0", "at least 1M"),
        ("memory.max", "64", "at least 1M"),
        ("memory.high", "true", "found boolean true"),
        ("processes", "0", "0 is not a usable process count"),
        ("processes", "\"20k\"", "expected a whole number"),
        ("io.read_bps", "0", "at least 1"),
        ("io.write_iops", "-3", "expected a whole number"),
        (
            "io.devices",
            "[\"/dev/nope\"]",
            "device /dev/nope: no such device",
        ),
        ("io.devices", "[\"/dev/null\"]", "not a block device"),
        ("io.devices", "[\"vda\"]", "expected a device path"),
        ("io.devices", "[7]", "expected an array of device paths"),
        ("io.devices", "7", "expected an array of device paths"),
        ("entry_processes", "0", "0 is not a usable"),
        ("rlimits.nofile", "0", "0 is not a usable"),
        ("rlimits.nofile", "99999999999", "fs.nr_open"),
        ("rlimits.cpu", "\"1h\"", "expected a whole number"),
        ("rlimits.as", "\"12\"", "at least 1M"),
        ("rlimits.bogus", "1", "unknown limit key"),
        ("cpu.shares", "1", "unknown limit key"),
    ];
    for (key, value, want) in cases {
        let e = Limits::from_source(&src(&[(key, value)])).unwrap_err();
        let s = e.to_string();
        assert!(s.contains(want), "{key} = {value}: {s}");
        assert!(
            s.starts_with(&format!("/etc/corral/plans/basic.toml:1: limits.{key}: ")),
            "{s}"
        );
    }
}

#[test]
fn duplicate_and_conflicting_keys() {
    let e =
        Limits::from_source(&src(&[("memory", "\"1G\""), ("memory.max", "\"2G\"")])).unwrap_err();
    assert!(e.to_string().contains("also set as `limits.memory`"), "{e}");
    let e = Limits::from_source(&src(&[("memory.max", "\"1G\""), ("memory.high", "\"2G\"")]))
        .unwrap_err();
    assert_eq!(e.origin, Some(origin(2)));
    assert!(
        e.to_string()
            .contains("memory.high (2G) is above memory.max (1G)"),
        "{e}"
    );
}

#[test]
fn set_changes_one_key_and_leaves_limits_alone_on_error() {
    let mut l = Limits::default();
    l.set("cpu", "150%").unwrap_or_else(|e| {
        // One-core hosts cannot take 150%; 100% works everywhere.
        assert!(e.to_string().contains("cpu percentage"), "{e}");
        l.set("cpu", "100%").unwrap();
    });
    l.set("memory", "256M").unwrap();
    l.set_assignment("io.devices = 7:0,254:0").unwrap();
    assert_eq!(l.io.devices, ["7:0", "254:0"]);
    l.set("io.devices", "all").unwrap();
    assert!(l.io.devices.is_empty());
    let before = l.clone();
    assert!(l.set("memory.high", "1G").is_err(), "above memory.max");
    assert!(l.set("processes", "-1").is_err());
    assert!(l.set("nope", "1").is_err());
    assert!(l.set("io.devices", "/dev/nope").is_err());
    let e = l.set_assignment("cpu").unwrap_err();
    assert_eq!(e.to_string(), "limits: expected key=value, found \"cpu\"");
    assert_eq!(l, before);
    l.set("memory.max", "max").unwrap();
    assert_eq!(l.memory_max, None);
}

#[test]
fn describe_roundtrips_through_set() {
    let mut l = Limits::default();
    for (k, v) in [
        ("cpu", "50%"),
        ("memory.max", "1G"),
        ("memory.high", "768M"),
        ("io.write_bps", "2M"),
        ("io.devices", "7:0"),
        ("rlimits.core", "0"),
        ("entry_processes", "5"),
    ] {
        l.set(k, v).unwrap();
    }
    let d = l.describe();
    assert_eq!(d.len(), KEYS.len());
    let get = |k: &str| d.iter().find(|(dk, _)| dk == k).unwrap().1.clone();
    assert_eq!(get("cpu"), "50%");
    assert_eq!(get("memory.max"), "1G");
    assert_eq!(get("processes"), "max");
    assert_eq!(get("io.devices"), "7:0");
    assert_eq!(get("rlimits.core"), "0");
    let mut back = Limits::default();
    for (k, v) in &d {
        back.set(k, v).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
    }
    assert_eq!(back, l);
    assert_eq!(
        Limits::default()
            .describe()
            .iter()
            .find(|(k, _)| k == "io.devices")
            .unwrap()
            .1,
        "all"
    );
}

#[test]
fn rlimits_list() {
    let mut l = Limits::default();
    // Only the default: no core files.
    assert_eq!(l.rlimits(), vec![(libc::RLIMIT_CORE as libc::c_int, 0, 0)]);
    l.set("rlimits.nofile", "4096").unwrap();
    l.set("rlimits.cpu", "60").unwrap();
    l.set("rlimits.as", "2G").unwrap();
    l.set("rlimits.core", "0").unwrap();
    assert_eq!(
        l.rlimits(),
        vec![
            (libc::RLIMIT_NOFILE as libc::c_int, 4096, 4096),
            (libc::RLIMIT_CORE as libc::c_int, 0, 0),
            (libc::RLIMIT_CPU as libc::c_int, 60, 61),
            (libc::RLIMIT_AS as libc::c_int, 2 << 30, 2 << 30),
        ]
    );
}

#[test]
fn serializes_for_json() {
    let mut l = Limits::default();
    l.set("cpu", "50%").unwrap();
    let v = serde_json::to_value(&l).unwrap();
    assert_eq!(v["cpu_pct"], 50);
    assert_eq!(v["memory_max"], serde_json::Value::Null);
    assert_eq!(v["io"]["devices"], serde_json::json!([]));
}

#[test]
fn entry_processes_above_processes_is_a_conflict() {
    let mut l = Limits::default();
    l.set("processes", "100").unwrap();
    l.set("entry_processes", "20").unwrap();
    l.validate_change().unwrap();
    l.set("entry_processes", "500").unwrap();
    l.validate().unwrap();
    let e = l.validate_change().unwrap_err().to_string();
    assert!(
        e.contains("entry_processes (500) is above processes (100)"),
        "{e}"
    );
}
