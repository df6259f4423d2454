use super::*;
use crate::testfs::{read, FakeTree};
use std::fs;

#[test]
fn v1_create_is_idempotent_and_spans_every_hierarchy() {
    let (t, b) = FakeTree::v1(&Controller::ALL);
    let cg = TenantCgroup::create(&b, "alice").unwrap();
    assert_eq!(cg.dirs().len(), 6);
    for c in Controller::ALL {
        let d = t.path().join("v1").join(c.name()).join("corral/alice");
        assert!(d.is_dir(), "{}", d.display());
        assert_eq!(cg.dir(c), Some(d));
    }
    TenantCgroup::create(&b, "alice").unwrap();
    assert_eq!(TenantCgroup::open(&b, "alice").unwrap().dirs(), cg.dirs());
    assert!(cg.v2_dir_fd().unwrap().is_none());
}

#[test]
fn comounted_hierarchies_are_written_once() {
    let t = tempfile::tempdir().unwrap();
    let cpu = t.path().join("cpu,cpuacct");
    let mut dirs = vec![(Controller::Cpu, cpu.clone()), (Controller::Cpuacct, cpu)];
    for c in [Controller::Memory, Controller::Pids] {
        dirs.push((c, t.path().join(c.name())));
    }
    for (_, d) in &dirs {
        fs::create_dir_all(d).unwrap();
    }
    let b = Backend::v1_at(dirs).with_parent("tenants/web").unwrap();
    let cg = TenantCgroup::create(&b, "bob").unwrap();
    assert_eq!(cg.dirs().len(), 3);
    for d in cg.dirs() {
        fs::write(d.join("cgroup.procs"), "").unwrap();
    }
    cg.add_pid(4242).unwrap();
    for d in cg.dirs() {
        assert_eq!(read(d.join("cgroup.procs")), "4242\n");
    }
    assert_eq!(cg.procs().unwrap(), vec![4242]);
    assert!(t.path().join("cpu,cpuacct/tenants/web/bob").is_dir());
}

#[test]
fn open_reports_the_missing_directory() {
    let (t, b) = FakeTree::v1(&Controller::REQUIRED);
    TenantCgroup::create(&b, "carol").unwrap();
    let gone = t.path().join("v1/pids/corral/carol");
    fs::remove_dir(&gone).unwrap();
    match TenantCgroup::open(&b, "carol") {
        Err(CgroupError::NotFound { path }) => assert_eq!(path, gone),
        other => panic!("{other:?}"),
    }
}

#[test]
fn tenant_names_are_checked() {
    let (_t, b) = FakeTree::v1(&Controller::REQUIRED);
    for bad in ["", "a/b", "..", ".", "x\n"] {
        let e = TenantCgroup::create(&b, bad).unwrap_err();
        assert!(matches!(e, CgroupError::BadName { .. }), "{bad:?}: {e}");
    }
}

#[test]
fn v2_create_enables_controllers_from_root_to_parent() {
    let (t, b) = FakeTree::v2("cpuset cpu io memory hugetlb pids");
    let root = t.path().join("v2");
    fs::write(root.join("corral/cgroup.subtree_control"), "cpu memory\n").unwrap();
    let cg = TenantCgroup::create(&b, "dave").unwrap();
    assert_eq!(
        read(root.join("cgroup.subtree_control")),
        "+cpu +memory +pids +io\n"
    );
    assert_eq!(
        read(root.join("corral/cgroup.subtree_control")),
        "cpu memory\n+pids +io\n"
    );
    assert!(root.join("corral/dave").is_dir());
    // Again: everything is enabled now, nothing more is written.
    TenantCgroup::create(&b, "dave").unwrap();
    assert_eq!(
        read(root.join("cgroup.subtree_control")),
        "+cpu +memory +pids +io\n"
    );
    let fd = cg.v2_dir_fd().unwrap().expect("v2 has a directory fd");
    let flags = nix::fcntl::fcntl(
        std::os::fd::AsRawFd::as_raw_fd(&fd),
        nix::fcntl::FcntlArg::F_GETFL,
    )
    .unwrap();
    assert_ne!(flags & libc::O_PATH, 0);
    let link = fs::read_link(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&fd)
    ))
    .unwrap();
    assert_eq!(link, root.join("corral/dave"));
}

#[test]
fn v2_without_pids_controller_is_refused() {
    let (t, b) = FakeTree::v2("cpu io memory");
    let e = TenantCgroup::create(&b, "erin").unwrap_err().to_string();
    assert!(
        e.contains("controller pids is not available") && e.contains("cgroup.controllers"),
        "{e}"
    );
    assert_eq!(
        read(t.path().join("v2/cgroup.subtree_control")),
        "",
        "nothing enabled on failure"
    );
}

#[test]
fn v2_io_is_optional() {
    let (t, b) = FakeTree::v2("cpu memory pids");
    TenantCgroup::create(&b, "fay").unwrap();
    assert_eq!(
        read(t.path().join("v2/cgroup.subtree_control")),
        "+cpu +memory +pids\n"
    );
}

#[test]
fn create_survives_a_concurrent_remover_of_the_empty_parent() {
    // Another corral process removing the (empty) parent between our mkdir
    // of the parent and of the tenant makes the latter fail with ENOENT;
    // create must retry. Without retries this fails within a few hundred
    // iterations; bounded to one second.
    let (t, b) = FakeTree::v1(&[Controller::Pids]);
    let parent = t.path().join("v1/pids/corral");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let remover = {
        let (parent, stop) = (parent.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut removed = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if fs::remove_dir(&parent).is_ok() {
                    removed += 1;
                }
                // A remover does its work now and then, not in a tight loop.
                std::thread::sleep(Duration::from_micros(100));
            }
            removed
        })
    };
    let started = Instant::now();
    let mut created = 0;
    let mut result = Ok(());
    while started.elapsed() < Duration::from_secs(1) {
        match TenantCgroup::create(&b, "hal") {
            Ok(cg) => {
                created += 1;
                fs::remove_dir(&cg.dirs()[0]).unwrap();
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let removed = remover.join().unwrap();
    result.unwrap_or_else(|e| panic!("after {created} creates: {e}"));
    assert!(
        removed > 10 && created > 10,
        "the race was exercised: removed {removed}, created {created}"
    );
}

#[test]
fn remove_of_missing_cgroup_succeeds() {
    let (_t, b) = FakeTree::v1(&Controller::REQUIRED);
    let cg = TenantCgroup {
        backend: b,
        name: "never".into(),
    };
    cg.remove().unwrap();
}
