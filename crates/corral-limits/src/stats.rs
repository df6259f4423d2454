//! Usage and fault counters of a tenant's cgroup, and parsers for the
//! kernel's stat file formats (tested on captured contents).

use crate::backend::{Controller, Kind};
use crate::cgroup::TenantCgroup;
use crate::error::{CgroupError, Result};
use crate::fsutil::{read_text, read_u64};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Resource use so far (counters since the cgroup was created, and current
/// memory and process counts).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub cpu_usage_ns: u64,
    pub memory_bytes: u64,
    pub processes: u64,
    pub io_read_bytes: u64,
    pub io_write_bytes: u64,
    pub io_read_ops: u64,
    pub io_write_ops: u64,
}

/// How often limits were hit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Faults {
    /// CFS periods in which the cgroup was throttled.
    pub cpu_throttled_periods: u64,
    pub cpu_throttled_ns: u64,
    /// v2: memory.events `max`; v1: memory.failcnt.
    pub memory_max_hits: u64,
    pub oom_kills: u64,
    /// Forks refused by pids.max.
    pub pids_max_hits: u64,
    /// No kernel counts IO throttling events: always `None` for now.
    pub io_throttled: Option<u64>,
}

fn parse_err(path: &Path, what: &'static str, content: &str) -> CgroupError {
    CgroupError::Parse {
        path: path.to_path_buf(),
        what,
        content: content.to_string(),
    }
}

/// "key value" lines (cpu.stat, memory.events, pids.events, memory.oom_control).
pub(crate) fn parse_keyed(text: &str) -> BTreeMap<&str, u64> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (k, v) = (it.next()?, it.next()?);
            Some((k, v.parse().ok()?))
        })
        .collect()
}

/// Reads a keyed file and picks keys; `required` keys must be there.
fn keyed(path: &Path, keys: &[(&'static str, bool)]) -> Result<Vec<u64>> {
    let text = read_text(path)?;
    let map = parse_keyed(&text);
    keys.iter()
        .map(|(k, required)| match map.get(k) {
            Some(v) => Ok(*v),
            None if !required => Ok(0),
            None => Err(parse_err(path, k, &text)),
        })
        .collect()
}

/// v1 blkio.throttle.io_service_bytes / io_serviced: "7:0 Read 524288"
/// lines per device (plus Write, Sync, Async, Discard, Total) and a final
/// "Total N". Returns (read, write) summed over devices.
pub(crate) fn parse_blkio_v1(text: &str) -> Option<(u64, u64)> {
    let (mut r, mut w) = (0u64, 0u64);
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            [_dev, "Read", n] => r = r.checked_add(n.parse().ok()?)?,
            [_dev, "Write", n] => w = w.checked_add(n.parse().ok()?)?,
            [_, _, n] | [_, n] => {
                n.parse::<u64>().ok()?;
            }
            [] => {}
            _ => return None,
        }
    }
    Some((r, w))
}

/// v2 io.stat: "254:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0" per
/// device. Returns (rbytes, wbytes, rios, wios) summed over devices.
pub(crate) fn parse_io_stat(text: &str) -> Option<[u64; 4]> {
    let mut sums = [0u64; 4];
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        for kv in line.split_whitespace().skip(1) {
            let (k, v) = kv.split_once('=')?;
            let idx = match k {
                "rbytes" => 0,
                "wbytes" => 1,
                "rios" => 2,
                "wios" => 3,
                _ => continue,
            };
            sums[idx] = sums[idx].checked_add(v.parse().ok()?)?;
        }
    }
    Some(sums)
}

impl TenantCgroup {
    fn file(&self, c: Controller, name: &str) -> Option<PathBuf> {
        self.dir(c).map(|d| d.join(name))
    }

    fn required_file(&self, c: Controller, name: &str) -> Result<PathBuf> {
        self.file(c, name).ok_or_else(|| {
            CgroupError::NoCgroups(format!("the {} controller is not mounted", c.name()))
        })
    }

    /// Current usage counters.
    pub fn usage(&self) -> Result<Usage> {
        let v2 = matches!(self.backend().kind(), Kind::V2 { .. });
        let mut u = Usage::default();
        if v2 {
            let cpu = self.required_file(Controller::Cpu, "cpu.stat")?;
            u.cpu_usage_ns = keyed(&cpu, &[("usage_usec", true)])?[0].saturating_mul(1000);
            u.memory_bytes = read_u64(&self.required_file(Controller::Memory, "memory.current")?)?;
            u.processes = read_u64(&self.required_file(Controller::Pids, "pids.current")?)?;
            let io = self.required_file(Controller::Blkio, "io.stat")?;
            if io.exists() {
                let text = read_text(&io)?;
                let [rb, wb, ro, wo] =
                    parse_io_stat(&text).ok_or_else(|| parse_err(&io, "io.stat lines", &text))?;
                (
                    u.io_read_bytes,
                    u.io_write_bytes,
                    u.io_read_ops,
                    u.io_write_ops,
                ) = (rb, wb, ro, wo);
            }
        } else {
            u.cpu_usage_ns = read_u64(&self.required_file(Controller::Cpuacct, "cpuacct.usage")?)?;
            u.memory_bytes =
                read_u64(&self.required_file(Controller::Memory, "memory.usage_in_bytes")?)?;
            u.processes = read_u64(&self.required_file(Controller::Pids, "pids.current")?)?;
            if let Some(dir) = self.dir(Controller::Blkio) {
                let pick = |name: &str| {
                    let rec = dir.join(format!("{name}_recursive"));
                    if rec.exists() {
                        rec
                    } else {
                        dir.join(name)
                    }
                };
                let read_pair = |path: PathBuf| -> Result<(u64, u64)> {
                    let text = read_text(&path)?;
                    parse_blkio_v1(&text)
                        .ok_or_else(|| parse_err(&path, "blkio per-device lines", &text))
                };
                (u.io_read_bytes, u.io_write_bytes) =
                    read_pair(pick("blkio.throttle.io_service_bytes"))?;
                (u.io_read_ops, u.io_write_ops) = read_pair(pick("blkio.throttle.io_serviced"))?;
            }
        }
        Ok(u)
    }

    /// How often limits were hit.
    pub fn faults(&self) -> Result<Faults> {
        let v2 = matches!(self.backend().kind(), Kind::V2 { .. });
        let mut f = Faults::default();
        let cpu = self.required_file(Controller::Cpu, "cpu.stat")?;
        let pids = self.required_file(Controller::Pids, "pids.events")?;
        f.pids_max_hits = keyed(&pids, &[("max", true)])?[0];
        if v2 {
            let c = keyed(&cpu, &[("nr_throttled", true), ("throttled_usec", true)])?;
            (f.cpu_throttled_periods, f.cpu_throttled_ns) = (c[0], c[1].saturating_mul(1000));
            let mem = self.required_file(Controller::Memory, "memory.events")?;
            let m = keyed(&mem, &[("max", true), ("oom_kill", true)])?;
            (f.memory_max_hits, f.oom_kills) = (m[0], m[1]);
        } else {
            let c = keyed(&cpu, &[("nr_throttled", true), ("throttled_time", true)])?;
            (f.cpu_throttled_periods, f.cpu_throttled_ns) = (c[0], c[1]);
            f.memory_max_hits =
                read_u64(&self.required_file(Controller::Memory, "memory.failcnt")?)?;
            // oom_kill is missing before Linux 4.13: counted as 0 there.
            let oom = self.required_file(Controller::Memory, "memory.oom_control")?;
            f.oom_kills = keyed(&oom, &[("oom_kill", false)])?[0];
        }
        Ok(f)
    }
}

#[cfg(test)]
#[path = "stats_tests.rs"]
mod tests;
