//! Writing limits into a tenant's cgroup. Everything is validated and the
//! list of writes computed first (devices resolved, files checked), so bad
//! limits change nothing. Unset limits are written as "no limit", so calling
//! [`TenantCgroup::apply`] again moves a running tenant to the new limits.

use crate::backend::{Controller, Kind};
use crate::cgroup::TenantCgroup;
use crate::device::{self, DeviceId};
use crate::error::{CgroupError, LimitError, Result};
use crate::fsutil::{read_text, write_value};
use crate::spec::Limits;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// CFS period for CPU bandwidth, in microseconds.
pub const CPU_PERIOD_US: u64 = 100_000;

/// One step of applying limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Write {
        path: PathBuf,
        value: String,
    },
    /// v1 memory.limit_in_bytes and memory.memsw.limit_in_bytes: the kernel
    /// requires limit <= memsw at every moment, so the order depends on the
    /// old values: limit first, and if that fails with EINVAL, memsw first.
    MemoryPair {
        limit: (PathBuf, String),
        memsw: (PathBuf, String),
    },
}

fn w(dir: &Path, file: &str, value: impl ToString) -> Step {
    Step::Write {
        path: dir.join(file),
        value: value.to_string(),
    }
}

fn or_max(v: Option<u64>, unlimited: &str) -> String {
    v.map_or(unlimited.to_string(), |n| n.to_string())
}

/// Devices already having a rule in a v1 throttle file ("7:0 2097152") or v2 io.max.
fn devices_with_rules(path: &Path) -> Result<BTreeSet<DeviceId>> {
    let text = read_text(path)?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(DeviceId::parse)
        .collect())
}

impl TenantCgroup {
    /// Applies limits (all of them: unset ones are reset to "no limit").
    /// Nothing is written when any limit is invalid or cannot be enforced.
    pub fn apply(&self, limits: &Limits) -> Result<()> {
        for step in self.plan(limits)? {
            match step {
                Step::Write { path, value } => write_value(&path, &value)?,
                Step::MemoryPair { limit, memsw } => match write_value(&limit.0, &limit.1) {
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                        write_value(&memsw.0, &memsw.1)?;
                        write_value(&limit.0, &limit.1)?;
                    }
                    Err(e) => return Err(e),
                    Ok(()) => write_value(&memsw.0, &memsw.1)?,
                },
            }
        }
        Ok(())
    }

    /// The writes [`Self::apply`] would do, after validating everything.
    pub fn plan(&self, limits: &Limits) -> Result<Vec<Step>> {
        limits.validate()?;
        let devices = self.io_devices(limits)?;
        match self.backend().kind() {
            Kind::V1 { .. } => self.plan_v1(limits, &devices),
            Kind::V2 { .. } => self.plan_v2(limits, &devices),
        }
    }

    /// The devices IO limits go to: empty when no IO limit is set.
    fn io_devices(&self, limits: &Limits) -> Result<Vec<DeviceId>> {
        if !limits.io.any() {
            return Ok(Vec::new());
        }
        let sysfs = self.backend().sysfs();
        if limits.io.devices.is_empty() {
            return device::real_block_devices(sysfs)
                .map_err(|(path, e)| CgroupError::io("listing block devices in", path, e));
        }
        let mut out = Vec::new();
        for spec in &limits.io.devices {
            out.push(device::resolve(spec, sysfs).map_err(|p| LimitError::new("io.devices", p))?);
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    fn need(&self, c: Controller, key: &'static str) -> Result<PathBuf> {
        self.dir(c).ok_or_else(|| CgroupError::Unsupported {
            key,
            reason: format!("the v1 {} controller is not mounted", c.name()),
        })
    }

    fn plan_v1(&self, l: &Limits, devices: &[DeviceId]) -> Result<Vec<Step>> {
        let mut steps = Vec::new();
        let cpu = self.need(Controller::Cpu, "cpu")?;
        let quota = l.cpu_pct.map_or("-1".to_string(), |p| {
            (u64::from(p) * CPU_PERIOD_US / 100).to_string()
        });
        // Each write of the period or the quota makes the kernel check the
        // bandwidth of every CPU cgroup on the machine (a walk of the whole
        // task-group tree under a global mutex: with 5,000 tenants up the
        // first write of an `up` took 1.5 ms, a second 0.2 ms): a value the
        // cgroup already has (a new cgroup's period, 100 ms; its quota, -1)
        // is not written again.
        for (file, value) in [
            ("cpu.cfs_period_us", CPU_PERIOD_US.to_string()),
            ("cpu.cfs_quota_us", quota),
        ] {
            let path = cpu.join(file);
            if read_text(&path).map_or(true, |old| old.trim() != value) {
                steps.push(Step::Write { path, value });
            }
        }
        // Weight 100 (the v2 default) = 1024 shares (the v1 default).
        let shares = l
            .cpu_weight
            .map_or(1024, |wt| (1024 * u64::from(wt) / 100).max(2));
        steps.push(w(&cpu, "cpu.shares", shares));

        let mem = self.need(Controller::Memory, "memory.max")?;
        let limit = (
            mem.join("memory.limit_in_bytes"),
            or_max(l.memory_max, "-1"),
        );
        let memsw_path = mem.join("memory.memsw.limit_in_bytes");
        if memsw_path.exists() {
            let memsw = match (l.memory_max, l.memory_swap_max) {
                (Some(m), Some(s)) => m.saturating_add(s).min(i64::MAX as u64).to_string(),
                _ => "-1".to_string(),
            };
            steps.push(Step::MemoryPair {
                limit,
                memsw: (memsw_path, memsw),
            });
        } else if l.memory_swap_max.is_some() {
            return Err(CgroupError::Unsupported {
                key: "memory.swap_max",
                reason: format!(
                    "{} is missing: swap accounting is off",
                    memsw_path.display()
                ),
            });
        } else {
            steps.push(Step::Write {
                path: limit.0,
                value: limit.1,
            });
        }
        steps.push(w(
            &mem,
            "memory.soft_limit_in_bytes",
            or_max(l.memory_high, "-1"),
        ));

        let pids = self.need(Controller::Pids, "processes")?;
        steps.push(w(
            &pids,
            "pids.max",
            or_max(l.processes.map(u64::from), "max"),
        ));

        match self.dir(Controller::Blkio) {
            None if l.io.any() => {
                return Err(CgroupError::Unsupported {
                    key: "io",
                    reason: "the v1 blkio controller is not mounted".into(),
                })
            }
            None => {}
            Some(blkio) => {
                let io = &l.io;
                for (file, v) in [
                    ("blkio.throttle.read_bps_device", io.read_bps),
                    ("blkio.throttle.write_bps_device", io.write_bps),
                    ("blkio.throttle.read_iops_device", io.read_iops),
                    ("blkio.throttle.write_iops_device", io.write_iops),
                ] {
                    let path = blkio.join(file);
                    let old = devices_with_rules(&path)?;
                    // "MAJ:MIN 0" removes a device's rule.
                    for d in devices {
                        if v.is_some() || old.contains(d) {
                            steps.push(Step::Write {
                                path: path.clone(),
                                value: format!("{d} {}", v.unwrap_or(0)),
                            });
                        }
                    }
                    for d in old.iter().filter(|d| !devices.contains(d)) {
                        steps.push(Step::Write {
                            path: path.clone(),
                            value: format!("{d} 0"),
                        });
                    }
                }
            }
        }
        Ok(steps)
    }

    fn plan_v2(&self, l: &Limits, devices: &[DeviceId]) -> Result<Vec<Step>> {
        let dir = self.dirs().remove(0);
        let mut steps = Vec::new();
        let quota = l.cpu_pct.map_or("max".to_string(), |p| {
            (u64::from(p) * CPU_PERIOD_US / 100).to_string()
        });
        steps.push(w(&dir, "cpu.max", format!("{quota} {CPU_PERIOD_US}")));
        steps.push(w(&dir, "cpu.weight", l.cpu_weight.unwrap_or(100)));
        steps.push(w(&dir, "memory.max", or_max(l.memory_max, "max")));
        steps.push(w(&dir, "memory.high", or_max(l.memory_high, "max")));
        let swap = dir.join("memory.swap.max");
        if swap.exists() {
            steps.push(Step::Write {
                path: swap,
                value: or_max(l.memory_swap_max, "max"),
            });
        } else if l.memory_swap_max.is_some() {
            return Err(CgroupError::Unsupported {
                key: "memory.swap_max",
                reason: format!("{} is missing: swap accounting is off", swap.display()),
            });
        }
        steps.push(w(
            &dir,
            "pids.max",
            or_max(l.processes.map(u64::from), "max"),
        ));

        let io_max = dir.join("io.max");
        if !io_max.exists() {
            if l.io.any() {
                return Err(CgroupError::Unsupported {
                    key: "io",
                    reason: format!(
                        "{} is missing: the io controller is not enabled for {}",
                        io_max.display(),
                        self.backend().parent().display()
                    ),
                });
            }
            return Ok(steps);
        }
        let io = &l.io;
        let old = devices_with_rules(&io_max)?;
        for d in devices {
            let value = format!(
                "{d} rbps={} wbps={} riops={} wiops={}",
                or_max(io.read_bps, "max"),
                or_max(io.write_bps, "max"),
                or_max(io.read_iops, "max"),
                or_max(io.write_iops, "max")
            );
            steps.push(Step::Write {
                path: io_max.clone(),
                value,
            });
        }
        for d in old.iter().filter(|d| !devices.contains(d)) {
            steps.push(Step::Write {
                path: io_max.clone(),
                value: format!("{d} rbps=max wbps=max riops=max wiops=max"),
            });
        }
        Ok(steps)
    }
}

#[cfg(test)]
#[path = "apply_tests.rs"]
mod tests;
