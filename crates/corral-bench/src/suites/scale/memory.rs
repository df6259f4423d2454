//! Memory per idle tenant: the init's own pages (PSS and RSS from
//! `/proc/PID/smaps_rollup`) plus the kernel's share, from `/proc/meminfo`
//! and `/proc/slabinfo` before and after bringing N tenants up, divided by N:
//! slab (namespaces, mounts, dentries, cgroups), kernel stacks, page
//! tables, per-CPU data (memory cgroups' statistics), and tmpfs (the state
//! files under /run and each sandbox's generated files).
//!
//! The slab share is the growth of the objects in use (`active_objs` ×
//! `objsize`, cache by cache), not of the slab pages (`SUnreclaim`,
//! `SReclaimable`): objects freed before the run (an earlier, larger run;
//! anyone's) leave free slots in partly used slabs, which the tenants' objects
//! then fill without a new page, so page deltas under-count by as much as was
//! freed before (seen: kmalloc-1k +0 KiB per tenant by pages, +700 by
//! objects, at 10 tenants after a 1,000-tenant run).

use std::collections::BTreeMap;

use crate::suites::neighbours::parse_meminfo;

/// `/proc/slabinfo` (version 2.1) as cache name → bytes of its objects in
/// use (`active_objs` × `objsize`).
pub fn parse_slabinfo(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if line.starts_with("slabinfo") || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        // name active_objs num_objs objsize objperslab pagesperslab : tunables l b s : slabdata active num shared
        if !f.contains(&"slabdata") {
            continue;
        }
        let active: u64 = f.get(1).and_then(|v| v.parse().ok()).unwrap_or(0);
        let size: u64 = f.get(3).and_then(|v| v.parse().ok()).unwrap_or(0);
        *out.entry(f[0].to_string()).or_insert(0) += active * size;
    }
    out
}

/// `Rss` and `Pss` of `/proc/PID/smaps_rollup`, KiB.
pub fn parse_smaps_rollup(text: &str) -> Option<(u64, u64)> {
    let get = |key: &str| {
        text.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l[key.len()..].split_whitespace().next()?.parse().ok())
    };
    Some((get("Rss:")?, get("Pss:")?))
}

/// The kernel's memory at one moment.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub meminfo: BTreeMap<String, u64>,
    pub slab: BTreeMap<String, u64>,
    /// Mounts in the host's mount namespace (lines of /proc/self/mountinfo).
    pub mounts: usize,
}

/// `/proc/meminfo` fields counted as the kernel's share of a tenant, with
/// the slab objects.
pub const KERNEL_FIELDS: &[&str] = &["KernelStack", "PageTables", "Percpu"];

/// `/proc/meminfo` fields reported for comparison only: slab pages.
pub const SLAB_PAGE_FIELDS: &[&str] = &["SUnreclaim", "SReclaimable"];

pub fn snapshot() -> Snapshot {
    Snapshot {
        meminfo: parse_meminfo(&std::fs::read_to_string("/proc/meminfo").unwrap_or_default()),
        slab: parse_slabinfo(&std::fs::read_to_string("/proc/slabinfo").unwrap_or_default()),
        mounts: std::fs::read_to_string("/proc/self/mountinfo")
            .map(|m| m.lines().count())
            .unwrap_or(0),
    }
}

/// What N tenants added, per tenant, KiB (negative deltas count as 0 in
/// the sums of the kernel's share: memory freed meanwhile by someone else
/// says nothing about the tenants).
#[derive(Debug, Clone, PartialEq)]
pub struct PerTenant {
    /// Slab objects + kernel stacks + page tables + per-CPU.
    pub kernel_kib: f64,
    /// Slab objects in use: the caches' growths, those that shrank
    /// meanwhile (reclaim, someone else) counted as 0.
    pub slab_kib: f64,
    /// Shmem (tmpfs).
    pub tmpfs_kib: f64,
    /// `MemTotal − MemAvailable` growth: the system's own view.
    pub used_kib: f64,
    /// Per meminfo field of [`KERNEL_FIELDS`], [`SLAB_PAGE_FIELDS`] and
    /// Shmem.
    pub fields: Vec<(String, f64)>,
    /// The slab caches that grew most, KiB per tenant, largest first.
    pub top_slabs: Vec<(String, f64)>,
    /// Mounts added to the host's mount namespace per tenant.
    pub host_mounts: f64,
}

fn delta(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>, k: &str) -> f64 {
    b.get(k).copied().unwrap_or(0) as f64 - a.get(k).copied().unwrap_or(0) as f64
}

pub fn per_tenant(before: &Snapshot, after: &Snapshot, n: usize) -> PerTenant {
    let n = n.max(1) as f64;
    let kib = |bytes: f64| bytes / 1024.0 / n;
    let fields: Vec<(String, f64)> = KERNEL_FIELDS
        .iter()
        .chain(SLAB_PAGE_FIELDS)
        .chain(["Shmem"].iter())
        .map(|k| {
            (
                k.to_string(),
                kib(delta(&before.meminfo, &after.meminfo, k)),
            )
        })
        .collect();
    let mut slabs: Vec<(String, f64)> = after
        .slab
        .keys()
        .map(|k| (k.clone(), kib(delta(&before.slab, &after.slab, k))))
        .filter(|(_, v)| *v > 0.0)
        .collect();
    let slab_kib: f64 = slabs.iter().map(|(_, v)| v).sum();
    let kernel_kib = slab_kib
        + fields
            .iter()
            .filter(|(k, _)| KERNEL_FIELDS.contains(&k.as_str()))
            .map(|(_, v)| v.max(0.0))
            .sum::<f64>();
    let used = |m: &BTreeMap<String, u64>| {
        m.get("MemTotal").copied().unwrap_or(0) as f64
            - m.get("MemAvailable").copied().unwrap_or(0) as f64
    };
    slabs.sort_by(|a, b| b.1.total_cmp(&a.1));
    slabs.truncate(6);
    PerTenant {
        kernel_kib,
        slab_kib,
        tmpfs_kib: kib(delta(&before.meminfo, &after.meminfo, "Shmem")).max(0.0),
        used_kib: kib(used(&after.meminfo) - used(&before.meminfo)),
        fields,
        top_slabs: slabs,
        host_mounts: (after.mounts as f64 - before.mounts as f64) / n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLAB: &str = "slabinfo - version: 2.1\n\
# name            <active_objs> <num_objs> <objsize> <objperslab> <pagesperslab> : tunables <limit> <batchcount> <sharedfactor> : slabdata <active_slabs> <num_slabs> <sharedavail>\n\
mnt_cache           5040   5100    320   25    2 : tunables    0    0    0 : slabdata    204    204      0\n\
dentry             90000  91000    192   21    1 : tunables    0    0    0 : slabdata   4333   4333      0\n";

    #[test]
    fn slab_bytes_per_cache() {
        let s = parse_slabinfo(SLAB);
        assert_eq!(s["mnt_cache"], 5040 * 320);
        assert_eq!(s["dentry"], 90000 * 192);
        assert_eq!(s.len(), 2);
    }

    fn fixture(name: &str) -> String {
        let p = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    #[test]
    fn captured_proc_files() {
        let s = parse_slabinfo(&fixture("scale-slabinfo.txt"));
        assert!(s.len() > 100, "{}", s.len());
        assert!(s["mnt_cache"] > 0 && s["dentry"] > 0);
        // An idle corral-init (built-in default profile).
        let (rss, pss) = parse_smaps_rollup(&fixture("scale-smaps-rollup-init.txt")).unwrap();
        assert!(rss > pss && pss > 0, "{rss} {pss}");
    }

    #[test]
    fn smaps_rollup() {
        let t = "55d0c0a00000-7ffd5b3f1000 ---p 00000000 00:00 0                          [rollup]\nRss:                 812 kB\nPss:                 121 kB\nPss_Anon:             96 kB\n";
        assert_eq!(parse_smaps_rollup(t), Some((812, 121)));
        assert_eq!(parse_smaps_rollup("Rss: 1 kB\n"), None);
    }

    #[test]
    fn deltas_per_tenant() {
        let snap = |slab: u64, stack: u64, shmem: u64, avail: u64| Snapshot {
            meminfo: [
                ("MemTotal", 1_000_000_000u64),
                ("MemAvailable", avail),
                ("SUnreclaim", slab),
                ("KernelStack", stack),
                ("Shmem", shmem),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            slab: [("mnt_cache".to_string(), slab)].into_iter().collect(),
            mounts: (slab >> 20) as usize,
        };
        let a = snap(10 << 20, 1 << 20, 1 << 20, 900_000_000);
        // 100 tenants: +10 MiB slab, +1.5625 MiB stacks, +1 MiB tmpfs.
        let b = snap(
            20 << 20,
            (1 << 20) + 1_638_400,
            2 << 20,
            900_000_000 - 13_000_000,
        );
        let p = per_tenant(&a, &b, 100);
        // The slab share comes from the objects (slabinfo), not SUnreclaim.
        assert!((p.slab_kib - 102.4).abs() < 1e-9, "{p:?}");
        assert!((p.kernel_kib - (102.4 + 16.0)).abs() < 1e-9, "{p:?}");
        let mut freed = b.clone();
        freed.slab.insert("dentry".into(), 0);
        let mut had = a.clone();
        had.slab.insert("dentry".into(), 50 << 20);
        let q = per_tenant(&had, &freed, 100);
        assert!(
            (q.slab_kib - 102.4).abs() < 1e-9,
            "a cache that shrank counts 0: {q:?}"
        );
        assert!((p.tmpfs_kib - 10.24).abs() < 1e-9, "{p:?}");
        assert!((p.used_kib - 13_000_000.0 / 1024.0 / 100.0).abs() < 1e-9);
        assert_eq!(p.top_slabs[0].0, "mnt_cache");
        assert!((p.host_mounts - 0.1).abs() < 1e-9, "{p:?}");
    }
}
