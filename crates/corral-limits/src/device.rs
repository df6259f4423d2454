//! Block devices for IO limits: `io.devices` entries ("/dev/vda" or
//! "MAJ:MIN") and "every real block device" from sysfs.

use crate::error::Problem;
use std::fmt;
use std::io;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// A block device number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceId {
    pub major: u32,
    pub minor: u32,
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

impl DeviceId {
    /// Parses "MAJ:MIN" (decimal, no spaces).
    pub fn parse(s: &str) -> Option<DeviceId> {
        let (a, b) = s.split_once(':')?;
        let num = |t: &str| {
            (!t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()))
                .then(|| t.parse().ok())
                .flatten()
        };
        Some(DeviceId {
            major: num(a)?,
            minor: num(b)?,
        })
    }
}

fn problem(spec: &str, reason: impl Into<String>) -> Problem {
    Problem::Device {
        device: spec.to_string(),
        reason: reason.into(),
    }
}

/// The device number of a device node, which must be a block device.
fn stat_block(spec: &str) -> Result<DeviceId, Problem> {
    let md = std::fs::metadata(spec).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => problem(spec, "no such device"),
        _ => problem(spec, e.to_string()),
    })?;
    if !md.file_type().is_block_device() {
        return Err(problem(spec, "not a block device"));
    }
    let rdev = md.rdev();
    Ok(DeviceId {
        major: libc::major(rdev),
        minor: libc::minor(rdev),
    })
}

/// Checks an `io.devices` entry without a cgroup backend: "MAJ:MIN" for its
/// form, a path for being an existing block device.
pub(crate) fn check_entry(spec: &str) -> Result<(), Problem> {
    if spec.starts_with('/') {
        stat_block(spec).map(|_| ())
    } else if DeviceId::parse(spec).is_some() {
        Ok(())
    } else {
        Err(problem(
            spec,
            "expected a device path like \"/dev/vda\" or \"MAJ:MIN\" like \"254:0\"",
        ))
    }
}

/// Resolves an `io.devices` entry to a whole-disk device known to `sysfs`
/// (normally `/sys`): throttling applies to disks, not partitions.
pub(crate) fn resolve(spec: &str, sysfs: &Path) -> Result<DeviceId, Problem> {
    let id = if spec.starts_with('/') {
        stat_block(spec)?
    } else {
        check_entry(spec)?;
        DeviceId::parse(spec).expect("checked by check_entry")
    };
    let node = sysfs.join("dev/block").join(id.to_string());
    if !node.exists() {
        return Err(problem(
            spec,
            format!(
                "no block device {id} in {}",
                sysfs.join("dev/block").display()
            ),
        ));
    }
    if node.join("partition").exists() {
        return Err(problem(
            spec,
            format!("{id} is a partition; IO limits apply to whole disks"),
        ));
    }
    Ok(id)
}

/// Every real block device: entries of `<sysfs>/block` except loop, ram and
/// zram devices, with numbers from their `dev` files. Sorted.
pub(crate) fn real_block_devices(
    sysfs: &Path,
) -> Result<Vec<DeviceId>, (std::path::PathBuf, io::Error)> {
    let dir = sysfs.join("block");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| (dir.clone(), e))? {
        let entry = entry.map_err(|e| (dir.clone(), e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if ["loop", "ram", "zram"].iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let dev = entry.path().join("dev");
        let text = std::fs::read_to_string(&dev).map_err(|e| (dev.clone(), e))?;
        let id = DeviceId::parse(text.trim()).ok_or_else(|| {
            (
                dev.clone(),
                io::Error::new(io::ErrorKind::InvalidData, format!("not MAJ:MIN: {text:?}")),
            )
        })?;
        out.push(id);
    }
    out.sort();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn fake_sysfs() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        for (name, dev, part) in [
            ("vda", "254:0", false),
            ("loop0", "7:0", false),
            ("zram0", "253:0", false),
            ("sda", "8:0", false),
        ] {
            fs::create_dir_all(t.path().join("block").join(name)).unwrap();
            fs::write(
                t.path().join("block").join(name).join("dev"),
                format!("{dev}\n"),
            )
            .unwrap();
            fs::create_dir_all(t.path().join("dev/block").join(dev)).unwrap();
            if part {
                fs::write(
                    t.path().join("dev/block").join(dev).join("partition"),
                    "1\n",
                )
                .unwrap();
            }
        }
        fs::create_dir_all(t.path().join("dev/block/254:1")).unwrap();
        fs::write(t.path().join("dev/block/254:1/partition"), "1\n").unwrap();
        t
    }

    #[test]
    fn parse_ids() {
        assert_eq!(
            DeviceId::parse("254:0"),
            Some(DeviceId {
                major: 254,
                minor: 0
            })
        );
        for bad in ["254", "254:", ":0", "a:b", "254:0:1", " 254:0", "-1:0"] {
            assert_eq!(DeviceId::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn real_devices_skip_loop_ram_zram() {
        let s = fake_sysfs();
        let ids: Vec<String> = real_block_devices(s.path())
            .unwrap()
            .iter()
            .map(|d| d.to_string())
            .collect();
        assert_eq!(ids, ["8:0", "254:0"]);
    }

    #[test]
    fn resolve_entries() {
        let s = fake_sysfs();
        assert_eq!(resolve("254:0", s.path()).unwrap().to_string(), "254:0");
        let e = resolve("254:1", s.path()).unwrap_err().to_string();
        assert!(e.contains("partition"), "{e}");
        let e = resolve("9:9", s.path()).unwrap_err().to_string();
        assert!(e.contains("no block device 9:9"), "{e}");
        let e = resolve("/dev/nope", s.path()).unwrap_err().to_string();
        assert_eq!(e, "device /dev/nope: no such device");
        let e = resolve("/dev/null", s.path()).unwrap_err().to_string();
        assert_eq!(e, "device /dev/null: not a block device");
        assert!(check_entry("vda").is_err());
    }
}
