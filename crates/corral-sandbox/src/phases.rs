//! Where `corral up` and `corral down` spend their time, phase by phase:
//! with `CORRAL_TIMING=1` in the environment each tenant's `up` and `down`
//! prints one line on stderr, e.g.
//!
//! ```text
//! corral: timing: up alice: lock 0.02, state 0.03, cgroup 0.61, start 2.40, net 4.12, ready 6.90, state files 0.21; total 14.29 ms
//! ```
//!
//! (also when the step fails: the line then ends at the failing phase).
//! Costs nothing when unset. The benchmarks' scale suite measures `up` and
//! `down` from outside; this says which phase grows.

use std::time::{Duration, Instant};

/// The environment variable that turns the timing lines on (any value but
/// empty or "0").
pub const ENV: &str = "CORRAL_TIMING";

/// One `up` or `down` of one tenant: the phases measured so far.
pub struct Phases {
    what: &'static str,
    tenant: String,
    start: Instant,
    last: Instant,
    marks: Vec<(&'static str, Duration)>,
}

/// Whether the timing lines are on.
pub fn enabled() -> bool {
    std::env::var_os(ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

impl Phases {
    /// Starts timing `what` ("up", "down") of `tenant`; `None` when the
    /// timing lines are off.
    pub fn start(what: &'static str, tenant: &str) -> Option<Phases> {
        enabled().then(|| {
            let now = Instant::now();
            Phases {
                what,
                tenant: tenant.to_string(),
                start: now,
                last: now,
                marks: Vec::new(),
            }
        })
    }

    /// The phase `name` ended now (it began where the last one ended).
    pub fn mark(&mut self, name: &'static str) {
        let now = Instant::now();
        self.marks.push((name, now - self.last));
        self.last = now;
    }

    /// The line printed when timing ends.
    pub fn line(&self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let phases: Vec<String> = self
            .marks
            .iter()
            .map(|(n, d)| format!("{n} {:.2}", ms(*d)))
            .collect();
        format!(
            "corral: timing: {} {}: {}; total {:.2} ms",
            self.what,
            self.tenant,
            phases.join(", "),
            ms(self.last - self.start)
        )
    }
}

impl Drop for Phases {
    fn drop(&mut self) {
        eprintln!("{}", self.line());
    }
}

/// [`Phases::mark`] on an optional timer.
pub fn mark(p: &mut Option<Phases>, name: &'static str) {
    if let Some(p) = p {
        p.mark(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_each_phase_in_order_and_the_total() {
        let now = Instant::now();
        let mut p = Phases {
            what: "up",
            tenant: "alice".into(),
            start: now,
            last: now,
            marks: Vec::new(),
        };
        p.mark("lock");
        p.mark("cgroup");
        let line = p.line();
        assert!(
            line.starts_with("corral: timing: up alice: lock "),
            "{line}"
        );
        let lock = line.find("lock ").unwrap();
        let cgroup = line.find(", cgroup ").unwrap();
        assert!(lock < cgroup, "{line}");
        assert!(line.ends_with(" ms") && line.contains("; total "), "{line}");
    }
}
