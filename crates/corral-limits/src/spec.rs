//! Typed limits, parsed from a plan's [`LimitsSource`] or set key by key.

use crate::device;
use crate::error::{LimitError, Problem};
use crate::value::{check_range, format_size, parse_count, parse_percent, parse_size, Raw};
use corral_profile::plan::{LimitsSource, Origin};
use serde::{Deserialize, Serialize};

/// Every key, in display order. `memory` is an alias of `memory.max`.
pub const KEYS: &[&str] = &[
    "cpu",
    "cpu.weight",
    "memory.max",
    "memory.high",
    "memory.swap_max",
    "processes",
    "io.read_bps",
    "io.write_bps",
    "io.read_iops",
    "io.write_iops",
    "io.devices",
    "entry_processes",
    "mail.per_hour",
    "rlimits.nofile",
    "rlimits.core",
    "rlimits.cpu",
    "rlimits.as",
];

/// Per-tenant limits. `None` everywhere means "no limit".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// CPU bandwidth in percent of one core (100 = one core), up to ncpu*100.
    pub cpu_pct: Option<u32>,
    /// Relative CPU weight under contention, 1..=10000 (default 100).
    pub cpu_weight: Option<u32>,
    /// Bytes.
    pub memory_max: Option<u64>,
    /// Bytes: reclaim pressure above this (v2 memory.high; v1 soft limit).
    pub memory_high: Option<u64>,
    /// Bytes of swap on top of memory_max.
    pub memory_swap_max: Option<u64>,
    /// Tasks (processes and threads).
    pub processes: Option<u32>,
    pub io: IoLimits,
    /// Concurrent entries (requests) into the sandbox, see [`crate::entry`].
    pub entry_processes: Option<u32>,
    /// Messages the tenant may send per hour through the mail broker
    /// (corral-mail).
    #[serde(default)]
    pub mail_per_hour: Option<u32>,
    pub rlimits: Rlimits,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoLimits {
    /// Bytes per second.
    pub read_bps: Option<u64>,
    pub write_bps: Option<u64>,
    /// Operations per second.
    pub read_iops: Option<u64>,
    pub write_iops: Option<u64>,
    /// "/dev/vda" paths or "MAJ:MIN"; empty = every real block device.
    pub devices: Vec<String>,
}

impl IoLimits {
    pub fn any(&self) -> bool {
        self.read_bps.is_some()
            || self.write_bps.is_some()
            || self.read_iops.is_some()
            || self.write_iops.is_some()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rlimits {
    pub nofile: Option<u64>,
    /// Bytes (0 = no core dumps).
    pub core: Option<u64>,
    /// Seconds of CPU time per process.
    pub cpu_seconds: Option<u64>,
    /// Bytes of address space.
    pub address_space: Option<u64>,
}

/// A value for one key: a scalar, or the device list of `io.devices`.
enum Input<'a> {
    Scalar(Raw<'a>),
    Devices(Vec<String>),
}

fn online_cpus() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n < 1 {
        1
    } else {
        n as u64
    }
}

fn nr_open() -> u64 {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1 << 20)
}

const MIB: u64 = 1 << 20;
const MAX_BYTES: u64 = i64::MAX as u64;
const PID_MAX_LIMIT: u64 = 4 << 20;

fn size_at_least(raw: &Raw<'_>, min: u64, what: &str) -> Result<Option<u64>, Problem> {
    match parse_size(raw)? {
        Some(n) if n < min => Err(Problem::OutOfRange {
            found: raw.shown(),
            reason: format!(
                "{what} must be at least {} (sizes take a unit: \"64M\")",
                format_size(min)
            ),
        }),
        Some(n) => check_range(raw, n, min, MAX_BYTES, what).map(Some),
        None => Ok(None),
    }
}

fn count_in(raw: &Raw<'_>, lo: u64, hi: u64, what: &str) -> Result<Option<u64>, Problem> {
    parse_count(raw)?
        .map(|n| check_range(raw, n, lo, hi, what))
        .transpose()
}

fn u32_of(n: Option<u64>) -> Option<u32> {
    // Ranges checked by the callers keep every value below u32::MAX.
    n.map(|v| u32::try_from(v).expect("range-checked"))
}

impl Limits {
    /// Typed limits from a plan, with every value checked; errors carry the
    /// file and line the value came from.
    pub fn from_source(src: &LimitsSource) -> Result<Limits, LimitError> {
        let mut limits = Limits::default();
        let mut memory_key: Option<&str> = None;
        for (key, (value, origin)) in &src.values {
            if key == "memory" || key == "memory.max" {
                if let Some(other) = memory_key {
                    let p = Problem::Duplicate {
                        other: other.to_string(),
                    };
                    return Err(LimitError::new(key, p).at(Some(origin)));
                }
                memory_key = Some(key);
            }
            let input = match (key.as_str(), value) {
                ("io.devices", toml::Value::Array(items)) => {
                    let mut list = Vec::new();
                    for item in items {
                        match item {
                            toml::Value::String(s) => list.push(s.clone()),
                            other => {
                                let p = Problem::Invalid {
                                    expected: "an array of device paths or \"MAJ:MIN\" strings",
                                    found: format!("{} {other}", other.type_str()),
                                };
                                return Err(LimitError::new(key, p).at(Some(origin)));
                            }
                        }
                    }
                    Input::Devices(list)
                }
                ("io.devices", toml::Value::String(s)) => Input::Devices(split_devices(s)),
                ("io.devices", other) => {
                    let p = Problem::Invalid {
                        expected: "an array of device paths or \"MAJ:MIN\" strings",
                        found: format!("{} {other}", other.type_str()),
                    };
                    return Err(LimitError::new(key, p).at(Some(origin)));
                }
                (_, v) => Input::Scalar(Raw::from_toml(v)),
            };
            limits
                .set_input(key, input)
                .map_err(|p| LimitError::new(key, p).at(Some(origin)))?;
        }
        let origin_of = |k: &str| src.values.get(k).map(|(_, o): &(toml::Value, Origin)| o);
        limits.validate().map_err(|e| {
            let o = origin_of(&e.key);
            e.at(o)
        })?;
        Ok(limits)
    }

    /// Sets one key from text (`corral limits set TENANT key=value`). The
    /// limits are unchanged when the key or value is rejected. `io.devices`
    /// takes a comma-separated list; "all" or "" means every real device.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), LimitError> {
        let mut next = self.clone();
        let input = if key == "io.devices" {
            Input::Devices(split_devices(value))
        } else {
            Input::Scalar(Raw::Str(value))
        };
        next.set_input(key, input)
            .map_err(|p| LimitError::new(key, p))?;
        next.validate()?;
        *self = next;
        Ok(())
    }

    /// [`Limits::set`] for one `key=value` argument.
    pub fn set_assignment(&mut self, assignment: &str) -> Result<(), LimitError> {
        let (k, v) = assignment
            .split_once('=')
            .ok_or_else(|| LimitError::new("", Problem::Syntax(assignment.to_string())))?;
        self.set(k.trim(), v.trim())
    }

    fn set_input(&mut self, key: &str, input: Input<'_>) -> Result<(), Problem> {
        let raw = match input {
            Input::Devices(list) if key == "io.devices" => {
                for d in &list {
                    device::check_entry(d)?;
                }
                self.io.devices = list;
                return Ok(());
            }
            Input::Devices(_) => unreachable!("device lists are only built for io.devices"),
            Input::Scalar(raw) => raw,
        };
        let raw = &raw;
        match key {
            "cpu" => {
                let max = online_cpus() * 100;
                let p = parse_percent(raw)?
                    .map(|n| check_range(raw, n, 1, max, "cpu percentage (100% per core)"))
                    .transpose()?;
                self.cpu_pct = u32_of(p);
            }
            "cpu.weight" => self.cpu_weight = u32_of(count_in(raw, 1, 10000, "weight")?),
            "memory" | "memory.max" => self.memory_max = size_at_least(raw, MIB, "memory.max")?,
            "memory.high" => self.memory_high = size_at_least(raw, MIB, "memory.high")?,
            "memory.swap_max" => self.memory_swap_max = size_at_least(raw, 0, "memory.swap_max")?,
            "processes" => {
                self.processes = u32_of(count_in(raw, 1, PID_MAX_LIMIT, "process count")?)
            }
            "io.read_bps" => self.io.read_bps = size_at_least(raw, 1, "bytes per second")?,
            "io.write_bps" => self.io.write_bps = size_at_least(raw, 1, "bytes per second")?,
            "io.read_iops" => {
                self.io.read_iops = count_in(raw, 1, u64::MAX, "operations per second")?
            }
            "io.write_iops" => {
                self.io.write_iops = count_in(raw, 1, u64::MAX, "operations per second")?
            }
            "io.devices" => unreachable!("io.devices arrives as a device list"),
            "entry_processes" => {
                self.entry_processes = u32_of(count_in(raw, 1, 100_000, "entry process count")?)
            }
            "mail.per_hour" => {
                self.mail_per_hour = u32_of(count_in(raw, 1, 1_000_000, "messages per hour")?)
            }
            "rlimits.nofile" => {
                self.rlimits.nofile = count_in(raw, 1, nr_open(), "open file limit (fs.nr_open)")?
            }
            "rlimits.core" => self.rlimits.core = size_at_least(raw, 0, "core size")?,
            "rlimits.cpu" => {
                self.rlimits.cpu_seconds = count_in(raw, 1, u64::MAX - 2, "CPU seconds")?
            }
            "rlimits.as" => self.rlimits.address_space = size_at_least(raw, MIB, "address space")?,
            _ => {
                return Err(Problem::UnknownKey {
                    known: format!("{}, memory (= memory.max)", KEYS.join(", ")),
                })
            }
        }
        Ok(())
    }

    /// Checks limits that depend on each other.
    pub fn validate(&self) -> Result<(), LimitError> {
        if let (Some(high), Some(max)) = (self.memory_high, self.memory_max) {
            if high > max {
                let msg = format!(
                    "memory.high ({}) is above memory.max ({}), so it would never apply",
                    format_size(high),
                    format_size(max)
                );
                return Err(LimitError::new("memory.high", Problem::Conflict(msg)));
            }
        }
        Ok(())
    }

    /// What [`Limits::validate`] checks, and combinations that are not
    /// contradictions but cannot work as meant, refused when an operator
    /// sets limits (`corral limits set`, `corral plan set`), not when a
    /// sandbox comes up with files that already hold them.
    pub fn validate_change(&self) -> Result<(), LimitError> {
        self.validate()?;
        if let (Some(entry), Some(procs)) = (self.entry_processes, self.processes) {
            if entry > procs {
                let msg = format!(
                    "entry_processes ({entry}) is above processes ({procs}): the process limit \
                     would refuse entries before the entry limit is reached"
                );
                return Err(LimitError::new("entry_processes", Problem::Conflict(msg)));
            }
        }
        Ok(())
    }

    /// True when some limit needs a cgroup (everything but entry processes and rlimits).
    pub fn has_cgroup_limits(&self) -> bool {
        self.cpu_pct.is_some()
            || self.cpu_weight.is_some()
            || self.memory_max.is_some()
            || self.memory_high.is_some()
            || self.memory_swap_max.is_some()
            || self.processes.is_some()
            || self.io.any()
    }

    /// Every key with its value as text that [`Limits::set`] accepts back
    /// ("max" for no limit, "all" for every device).
    pub fn describe(&self) -> Vec<(String, String)> {
        let size = |v: Option<u64>| v.map_or("max".to_string(), format_size);
        let num = |v: Option<u64>| v.map_or("max".to_string(), |n| n.to_string());
        let small = |v: Option<u32>| num(v.map(u64::from));
        let devices = if self.io.devices.is_empty() {
            "all".to_string()
        } else {
            self.io.devices.join(",")
        };
        let values = [
            self.cpu_pct.map_or("max".to_string(), |p| format!("{p}%")),
            small(self.cpu_weight),
            size(self.memory_max),
            size(self.memory_high),
            size(self.memory_swap_max),
            small(self.processes),
            size(self.io.read_bps),
            size(self.io.write_bps),
            num(self.io.read_iops),
            num(self.io.write_iops),
            devices,
            small(self.entry_processes),
            small(self.mail_per_hour),
            num(self.rlimits.nofile),
            size(self.rlimits.core),
            num(self.rlimits.cpu_seconds),
            size(self.rlimits.address_space),
        ];
        KEYS.iter().map(|k| k.to_string()).zip(values).collect()
    }

    /// The rlimits to set in a new process after fork: (resource, soft, hard).
    /// Unset rlimits are inherited and not listed. `rlimits.cpu` gets a hard
    /// limit one second above the soft one, so SIGXCPU comes before SIGKILL.
    pub fn rlimits(&self) -> Vec<(libc::c_int, u64, u64)> {
        let r = &self.rlimits;
        let mut out = Vec::new();
        if let Some(n) = r.nofile {
            out.push((libc::RLIMIT_NOFILE as libc::c_int, n, n));
        }
        // No core files unless the plan asks: a tenant's crash would
        // otherwise feed the host's core handler, which is often a pipe to a
        // program run as root (systemd-coredump, apport).
        let core = r.core.unwrap_or(0);
        out.push((libc::RLIMIT_CORE as libc::c_int, core, core));
        if let Some(n) = r.cpu_seconds {
            out.push((libc::RLIMIT_CPU as libc::c_int, n, n + 1));
        }
        if let Some(n) = r.address_space {
            out.push((libc::RLIMIT_AS as libc::c_int, n, n));
        }
        out
    }
}

/// "a,b" → ["a", "b"]; "" and "all" → [] (every device).
fn split_devices(s: &str) -> Vec<String> {
    let t = s.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("all") {
        return Vec::new();
    }
    t.split(',')
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
