//! Stat file parsing on contents captured from real kernels: v1 from this
//! project's Debian 12 VM (Linux 6.18, hybrid cgroups), v2 from Debian's
//! 6.1 kernel booted with only cgroup2 mounted.

use super::*;
use crate::testfs::{FakeTree, V1_FILES};
use std::fs;

// ---- v1, captured from corral/capture-<pid> after a throttled busy loop,
// direct IO to a loop device, an OOM kill at 16M and a refused fork.
const V1_CPU_STAT: &str =
    "nr_periods 11\nnr_throttled 10\nthrottled_time 494491333\nnr_bursts 0\nburst_time 0\n";
const V1_CPUACCT_USAGE: &str = "555636743\n";
const V1_OOM_CONTROL: &str = "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n";
const V1_FAILCNT: &str = "51\n";
const V1_PIDS_EVENTS: &str = "max 1\n";
const V1_IO_SERVICE_BYTES: &str = "\
7:0 Read 524288
7:0 Write 2097152
7:0 Sync 2621440
7:0 Async 0
7:0 Discard 0
7:0 Total 2621440
Total 2621440
";
const V1_IO_SERVICED: &str =
    "7:0 Read 8\n7:0 Write 32\n7:0 Sync 40\n7:0 Async 0\n7:0 Discard 0\n7:0 Total 40\nTotal 40\n";
const V1_IO_EMPTY: &str = "Total 0\n";

// ---- v2, captured in Debian's 6.1 kernel booted under qemu with only
// cgroup2 mounted (tests/scripts/test-cgroup-v2.sh), from a child cgroup with cpu.max
// "50000 100000", memory.max 16M and pids.max 5, after a 1 s busy loop,
// direct IO to a loop device, an OOM kill and a refused fork.
const V2_CPU_STAT: &str = "\
usage_usec 2053026
user_usec 983250
system_usec 1069776
nr_periods 43
nr_throttled 37
throttled_usec 2266572
nr_bursts 0
burst_usec 0
";
const V2_MEMORY_EVENTS: &str = "low 0\nhigh 0\nmax 18\noom 1\noom_kill 1\noom_group_kill 0\n";
const V2_PIDS_EVENTS: &str = "max 1\n";
const V2_IO_STAT: &str = "7:0 rbytes=524288 wbytes=2097152 rios=8 wios=32 dbytes=0 dios=0\n";
/// The same with a second device line (made up from the captured one).
const V2_IO_STAT_TWO: &str = "\
254:0 rbytes=1224704 wbytes=0 rios=42 wios=0 dbytes=0 dios=0
7:0 rbytes=524288 wbytes=2097152 rios=8 wios=32 dbytes=0 dios=0
";

#[test]
fn keyed_files() {
    let m = parse_keyed(V1_CPU_STAT);
    assert_eq!((m["nr_throttled"], m["throttled_time"]), (10, 494491333));
    assert_eq!(parse_keyed(V1_OOM_CONTROL)["oom_kill"], 1);
    assert_eq!(parse_keyed(V2_MEMORY_EVENTS)["max"], 18);
    assert_eq!(parse_keyed(V2_CPU_STAT)["usage_usec"], 2053026);
}

#[test]
fn blkio_v1_sums_read_and_write() {
    assert_eq!(parse_blkio_v1(V1_IO_SERVICE_BYTES), Some((524288, 2097152)));
    assert_eq!(parse_blkio_v1(V1_IO_SERVICED), Some((8, 32)));
    assert_eq!(parse_blkio_v1(V1_IO_EMPTY), Some((0, 0)));
    let two = "7:0 Read 524288\n7:0 Write 2097152\n7:0 Total 2621440\n8:0 Read 1\n8:0 Write 2\n8:0 Total 3\nTotal 2621443\n";
    assert_eq!(parse_blkio_v1(two), Some((524289, 2097154)));
    assert_eq!(parse_blkio_v1("7:0 Read lots\n"), None);
    assert_eq!(parse_blkio_v1("a b c d\n"), None);
}

#[test]
fn io_stat_v2_sums_devices() {
    assert_eq!(parse_io_stat(V2_IO_STAT), Some([524288, 2097152, 8, 32]));
    assert_eq!(
        parse_io_stat(V2_IO_STAT_TWO),
        Some([524288 + 1224704, 2097152, 50, 32])
    );
    assert_eq!(parse_io_stat(""), Some([0; 4]));
    assert_eq!(parse_io_stat("7:0 rbytes\n"), None);
}

fn put(dir: &Path, name: &str, text: &str) {
    fs::write(dir.join(name), text).unwrap();
}

#[test]
fn v1_usage_and_faults_from_files() {
    let (_t, b) = FakeTree::v1(&Controller::ALL);
    let cg = TenantCgroup::create(&b, "t").unwrap();
    for (c, files) in V1_FILES {
        FakeTree::files(&cg.dir(*c).unwrap(), files);
    }
    let d = |c| cg.dir(c).unwrap();
    put(&d(Controller::Cpu), "cpu.stat", V1_CPU_STAT);
    put(&d(Controller::Cpuacct), "cpuacct.usage", V1_CPUACCT_USAGE);
    put(&d(Controller::Memory), "memory.usage_in_bytes", "1015808\n");
    put(&d(Controller::Memory), "memory.failcnt", V1_FAILCNT);
    put(&d(Controller::Memory), "memory.oom_control", V1_OOM_CONTROL);
    put(&d(Controller::Pids), "pids.current", "5\n");
    put(&d(Controller::Pids), "pids.events", V1_PIDS_EVENTS);
    put(
        &d(Controller::Blkio),
        "blkio.throttle.io_service_bytes",
        V1_IO_EMPTY,
    );
    put(
        &d(Controller::Blkio),
        "blkio.throttle.io_service_bytes_recursive",
        V1_IO_SERVICE_BYTES,
    );
    put(
        &d(Controller::Blkio),
        "blkio.throttle.io_serviced",
        V1_IO_SERVICED,
    );
    let u = cg.usage().unwrap();
    assert_eq!(
        u,
        Usage {
            cpu_usage_ns: 555636743,
            memory_bytes: 1015808,
            processes: 5,
            io_read_bytes: 524288,
            io_write_bytes: 2097152,
            io_read_ops: 8,
            io_write_ops: 32,
        }
    );
    let f = cg.faults().unwrap();
    assert_eq!(
        f,
        Faults {
            cpu_throttled_periods: 10,
            cpu_throttled_ns: 494491333,
            memory_max_hits: 51,
            oom_kills: 1,
            pids_max_hits: 1,
            io_throttled: None,
        }
    );
    assert_eq!(
        cg.usage_and_faults().unwrap(),
        (u.clone(), f.clone()),
        "reading by directory descriptors reads the same"
    );
    // Kept open: the same numbers, then new ones through the same descriptors.
    let budget = FdBudget::new(100);
    let mut reader = CgroupReader::new(cg.clone(), budget.clone());
    assert_eq!(reader.usage_and_faults().unwrap(), (u.clone(), f.clone()));
    assert_eq!(
        reader.open_files(),
        9,
        "only the files usage and faults need"
    );
    assert_eq!(budget.available(), 91);
    put(&d(Controller::Pids), "pids.current", "7\n");
    put(&d(Controller::Memory), "memory.failcnt", "52\n");
    let (u7, f52) = reader.usage_and_faults().unwrap();
    assert_eq!((u7.processes, f52.memory_max_hits), (7, 52));
    assert_eq!(reader.open_files(), 9, "none opened again");
    // Beyond its budget a reader opens the rest at every reading: the first
    // four files read are kept (cpuacct.usage, memory.usage_in_bytes,
    // pids.current, blkio...io_service_bytes_recursive), memory.failcnt is not.
    let small = FdBudget::new(4);
    let mut partial = CgroupReader::new(cg.clone(), small.clone());
    assert_eq!(
        partial.usage_and_faults().unwrap(),
        (u7.clone(), f52.clone())
    );
    assert_eq!((partial.open_files(), small.available()), (4, 0));
    put(&d(Controller::Pids), "pids.current", "8\n");
    put(&d(Controller::Memory), "memory.failcnt", "53\n");
    let (u8_, f53) = partial.usage_and_faults().unwrap();
    assert_eq!((u8_.processes, f53.memory_max_hits), (8, 53));
    drop((reader, partial));
    assert_eq!(
        (budget.available(), small.available()),
        (100, 4),
        "closed descriptors are given back"
    );
    // Without the _recursive files (older kernels): the plain ones.
    fs::remove_file(d(Controller::Blkio).join("blkio.throttle.io_service_bytes_recursive"))
        .unwrap();
    let mut reader = CgroupReader::new(cg.clone(), budget.clone());
    assert_eq!(reader.usage_and_faults().unwrap().0.io_read_bytes, 0);
    assert_eq!(reader.open_files(), 9);
    let json = serde_json::to_value(&f).unwrap();
    assert_eq!(json["oom_kills"], 1);
    assert_eq!(json["io_throttled"], serde_json::Value::Null);
    // A malformed file names itself.
    put(&d(Controller::Pids), "pids.events", "");
    let e = cg.faults().unwrap_err().to_string();
    assert!(e.contains("pids.events: cannot parse max"), "{e}");
}

#[test]
fn v2_usage_and_faults_from_files() {
    let (_t, b) = FakeTree::v2("cpu io memory pids");
    let cg = TenantCgroup::create(&b, "t").unwrap();
    let dir = cg.dirs()[0].clone();
    put(&dir, "cpu.stat", V2_CPU_STAT);
    put(&dir, "memory.current", "16777216\n");
    put(&dir, "memory.events", V2_MEMORY_EVENTS);
    put(&dir, "pids.current", "3\n");
    put(&dir, "pids.events", V2_PIDS_EVENTS);
    put(&dir, "io.stat", V2_IO_STAT_TWO);
    let u = cg.usage().unwrap();
    assert_eq!(u.cpu_usage_ns, 2053026000);
    assert_eq!((u.memory_bytes, u.processes), (16777216, 3));
    assert_eq!(
        (
            u.io_read_bytes,
            u.io_write_bytes,
            u.io_read_ops,
            u.io_write_ops
        ),
        (1748992, 2097152, 50, 32)
    );
    let f = cg.faults().unwrap();
    assert_eq!(
        f,
        Faults {
            cpu_throttled_periods: 37,
            cpu_throttled_ns: 2266572000,
            memory_max_hits: 18,
            oom_kills: 1,
            pids_max_hits: 1,
            io_throttled: None,
        }
    );
    assert_eq!(cg.usage_and_faults().unwrap(), (u.clone(), f.clone()));
    let budget = FdBudget::new(100);
    let mut reader = CgroupReader::new(cg.clone(), budget.clone());
    assert_eq!(reader.usage_and_faults().unwrap(), (u, f));
    assert_eq!(reader.open_files(), 6);
    // Without the io controller, IO usage is zero rather than an error.
    fs::remove_file(dir.join("io.stat")).unwrap();
    assert_eq!(cg.usage().unwrap().io_read_bytes, 0);
    assert_eq!(cg.usage_and_faults().unwrap().0.io_read_bytes, 0);
    let mut reader = CgroupReader::new(cg.clone(), budget.clone());
    assert_eq!(reader.usage_and_faults().unwrap().0.io_read_bytes, 0);
    assert_eq!(
        reader.open_files(),
        5,
        "a missing optional file is not open"
    );
    // ... and is looked for again only after MISSING_RECHECK.
    put(&dir, "io.stat", V2_IO_STAT);
    assert_eq!(reader.usage_and_faults().unwrap().0.io_read_bytes, 0);
    fs::remove_file(dir.join("io.stat")).unwrap();
    // A number that is not one names the file and what it holds.
    put(&dir, "memory.current", "max\n");
    let e = cg.usage_and_faults().unwrap_err().to_string();
    assert!(
        e.contains("memory.current: cannot parse a number from \"max\\n\""),
        "{e}"
    );
    put(&dir, "memory.current", "16777216\n");
    // A missing file is an error that names it, either way.
    fs::remove_file(dir.join("pids.current")).unwrap();
    for e in [
        cg.usage().unwrap_err().to_string(),
        cg.usage_and_faults().unwrap_err().to_string(),
        CgroupReader::new(cg.clone(), budget.clone())
            .usage_and_faults()
            .unwrap_err()
            .to_string(),
    ] {
        assert!(e.contains("pids.current"), "{e}");
    }
    // A cgroup removed since it was opened (its tenant went down).
    for d in cg.dirs() {
        fs::remove_dir_all(d).unwrap();
    }
    assert!(matches!(
        cg.usage_and_faults(),
        Err(crate::CgroupError::NotFound { .. })
    ));
}
