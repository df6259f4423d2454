//! The `results.json` schema (version 1), documented in `docs/benchmarks.md`.
//!
//! A [`ResultSet`] is one benchmark invocation: the machine it ran on and a
//! list of [`Row`]s, one per `(suite, test, mode)`, each holding named
//! [`Figure`]s (a unit, which direction is better, and the samples of every
//! repetition with their median and range).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use crate::machine::Machine;
use crate::stats;

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: u32 = 1;

/// Which direction of a figure is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Higher,
    Lower,
}

impl Better {
    pub fn as_str(self) -> &'static str {
        match self {
            Better::Higher => "higher",
            Better::Lower => "lower",
        }
    }
}

/// One measured quantity of a row: all repetitions plus their summary.
///
/// `median` is the nearest-rank median (see [`crate::stats`]). A figure with no
/// finite sample has `median`/`min`/`max` = NaN, written as `null` in JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub unit: String,
    pub better: Better,
    #[serde(with = "nan_as_null")]
    pub median: f64,
    #[serde(with = "nan_as_null")]
    pub min: f64,
    #[serde(with = "nan_as_null")]
    pub max: f64,
    pub samples: Vec<f64>,
}

impl Figure {
    /// Summarise `samples`. Non-finite samples are dropped (they cannot be
    /// stored in JSON and would poison the summary).
    pub fn from_samples(unit: impl Into<String>, better: Better, samples: Vec<f64>) -> Figure {
        let samples: Vec<f64> = samples.into_iter().filter(|x| x.is_finite()).collect();
        let (median, min, max) = match stats::sorted(&samples) {
            Some(s) => (
                stats::percentile_sorted(&s, 50.0).unwrap_or(f64::NAN),
                s[0],
                s[s.len() - 1],
            ),
            None => (f64::NAN, f64::NAN, f64::NAN),
        };
        Figure {
            unit: unit.into(),
            better,
            median,
            min,
            max,
            samples,
        }
    }

    /// A figure measured once.
    pub fn single(unit: impl Into<String>, better: Better, value: f64) -> Figure {
        Figure::from_samples(unit, better, vec![value])
    }

    /// True when no finite sample was recorded.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }
}

/// One `(suite, test, mode)` measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub suite: String,
    pub test: String,
    pub mode: String,
    pub figures: BTreeMap<String, Figure>,
    #[serde(default)]
    pub notes: Vec<String>,
}

impl Row {
    pub fn new(suite: impl Into<String>, test: impl Into<String>, mode: impl Into<String>) -> Row {
        Row {
            suite: suite.into(),
            test: test.into(),
            mode: mode.into(),
            figures: BTreeMap::new(),
            notes: Vec::new(),
        }
    }

    /// Builder: add (or replace) a figure.
    pub fn with(mut self, name: impl Into<String>, figure: Figure) -> Row {
        self.figures.insert(name.into(), figure);
        self
    }

    /// Builder: add a note.
    pub fn with_note(mut self, note: impl Into<String>) -> Row {
        self.notes.push(note.into());
        self
    }

    pub fn figure(&self, name: &str) -> Option<&Figure> {
        self.figures.get(name)
    }

    /// Median of a figure, if present and non-empty.
    pub fn median(&self, name: &str) -> Option<f64> {
        self.figure(name)
            .map(|f| f.median)
            .filter(|m| m.is_finite())
    }

    fn key(&self) -> (&str, &str, &str) {
        (&self.suite, &self.test, &self.mode)
    }
}

/// Accumulates per-repetition values into figures: push each run's values,
/// then turn them into a [`Row`].
#[derive(Debug, Default, Clone)]
pub struct Samples {
    figures: BTreeMap<String, (String, Better, Vec<f64>)>,
}

impl Samples {
    pub fn new() -> Samples {
        Samples::default()
    }

    /// Record one value of figure `name` (unit and direction are taken from the
    /// first push).
    pub fn push(&mut self, name: &str, unit: &str, better: Better, value: f64) {
        self.figures
            .entry(name.to_string())
            .or_insert_with(|| (unit.to_string(), better, Vec::new()))
            .2
            .push(value);
    }

    /// Build the row.
    pub fn into_row(self, suite: &str, test: &str, mode: &str) -> Row {
        let mut row = Row::new(suite, test, mode);
        for (name, (unit, better, samples)) in self.figures {
            row.figures
                .insert(name, Figure::from_samples(unit, better, samples));
        }
        row
    }
}

/// One benchmark invocation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultSet {
    pub schema: u32,
    pub corral_version: String,
    /// RFC 3339 UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub started: String,
    /// RFC 3339 UTC; equal to `started` until [`ResultSet::finish`].
    pub finished: String,
    /// Reduced counts/durations (`--quick`): numbers are not comparable to a full run.
    pub quick: bool,
    pub machine: Machine,
    pub rows: Vec<Row>,
    #[serde(default)]
    pub notes: Vec<String>,
}

impl ResultSet {
    /// A new, empty set started now.
    pub fn new(machine: Machine, quick: bool) -> ResultSet {
        let now = now_rfc3339();
        ResultSet {
            schema: SCHEMA_VERSION,
            corral_version: env!("CARGO_PKG_VERSION").to_string(),
            started: now.clone(),
            finished: now,
            quick,
            machine,
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Stamp `finished` with the current time.
    pub fn finish(&mut self) {
        self.finished = now_rfc3339();
    }

    pub fn push(&mut self, row: Row) {
        self.rows.push(row);
    }

    pub fn row(&self, suite: &str, test: &str, mode: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.key() == (suite, test, mode))
    }

    /// Suites in order of first appearance.
    pub fn suites(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for r in &self.rows {
            if !out.contains(&r.suite.as_str()) {
                out.push(&r.suite);
            }
        }
        out
    }

    /// Rows of one suite, in stored order.
    pub fn suite_rows<'a>(&'a self, suite: &'a str) -> impl Iterator<Item = &'a Row> + 'a {
        self.rows.iter().filter(move |r| r.suite == suite)
    }

    /// Merge `other` into `self` (used by `bench all`, which runs each suite
    /// into its own set). `started` becomes the earlier start, `finished` the
    /// later finish, `quick` is true if either was quick. A row of `other` with
    /// the same `(suite, test, mode)` replaces ours in place (the later run
    /// wins) and the replacement is noted. Notes are appended without
    /// duplicates. A differing machine description is noted, ours is kept.
    pub fn merge(&mut self, other: ResultSet) {
        if other.started < self.started {
            self.started = other.started;
        }
        if other.finished > self.finished {
            self.finished = other.finished;
        }
        self.quick |= other.quick;
        if other.machine != self.machine {
            self.add_note(format!(
                "merged results from a different machine description ({} / {})",
                other.machine.kernel, other.machine.cpu_model
            ));
        }
        for row in other.rows {
            match self.rows.iter().position(|r| r.key() == row.key()) {
                Some(i) => {
                    let note = format!(
                        "{}/{}/{}: replaced by a later run when merging",
                        row.suite, row.test, row.mode
                    );
                    self.rows[i] = row;
                    self.add_note(note);
                }
                None => self.rows.push(row),
            }
        }
        for n in other.notes {
            self.add_note(n);
        }
    }

    /// Append a note unless it is already there.
    pub fn add_note(&mut self, note: impl Into<String>) {
        let note = note.into();
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }

    /// Read a `results.json`, refusing other schema versions.
    pub fn load(path: impl AsRef<Path>) -> Result<ResultSet> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| BenchError::io(path, e))?;
        Self::from_json(&text).map_err(|e| match e {
            BenchError::Json { source, .. } => BenchError::Json {
                path: path.into(),
                source,
            },
            BenchError::Schema {
                found, expected, ..
            } => BenchError::Schema {
                path: path.into(),
                found,
                expected,
            },
            other => other,
        })
    }

    /// Parse JSON text (the path in errors is empty).
    pub fn from_json(text: &str) -> Result<ResultSet> {
        let bad = |source| BenchError::Json {
            path: Default::default(),
            source,
        };
        // Check the version first so a future schema gets a clear message.
        #[derive(Deserialize)]
        struct Probe {
            schema: u32,
        }
        let probe: Probe = serde_json::from_str(text).map_err(bad)?;
        if probe.schema != SCHEMA_VERSION {
            return Err(BenchError::Schema {
                path: Default::default(),
                found: probe.schema,
                expected: SCHEMA_VERSION,
            });
        }
        serde_json::from_str(text).map_err(bad)
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("ResultSet serialises");
        s.push('\n');
        s
    }

    /// Write `results.json` atomically (temp file + rename).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        crate::write_atomic(path.as_ref(), self.to_json().as_bytes())
    }
}

/// Format a time as RFC 3339 UTC with second precision: `2026-03-01T12:00:05Z`.
pub fn rfc3339_utc(t: SystemTime) -> String {
    let secs = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    };
    let days = secs.div_euclid(86_400);
    let tod = secs.rem_euclid(86_400);
    let (y, m, d) = corral_sandbox::services::log::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        tod / 3600,
        tod % 3600 / 60,
        tod % 60
    )
}

/// The current time, see [`rfc3339_utc`].
pub fn now_rfc3339() -> String {
    rfc3339_utc(SystemTime::now())
}

/// NaN (an empty figure) is stored as JSON `null` and read back as NaN.
mod nan_as_null {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f64(*v)
        } else {
            s.serialize_none()
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_rfc3339() {
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        // 2000-02-29 (leap day) 12:34:56 UTC
        let t = UNIX_EPOCH + Duration::from_secs(951_827_696);
        assert_eq!(rfc3339_utc(t), "2000-02-29T12:34:56Z");
        // The h2load fixture's first request: 1795368450050266 µs since epoch.
        let t = UNIX_EPOCH + Duration::from_micros(1_795_368_450_050_266);
        assert_eq!(rfc3339_utc(t), "2026-11-22T17:27:30Z");
    }

    #[test]
    fn figure_summary() {
        let f = Figure::from_samples("req/s", Better::Higher, vec![613.0, 145.0, f64::NAN, 761.0]);
        assert_eq!(f.samples, vec![613.0, 145.0, 761.0]);
        assert_eq!((f.median, f.min, f.max), (613.0, 145.0, 761.0));
        let e = Figure::from_samples("s", Better::Lower, vec![]);
        assert!(e.is_empty() && e.median.is_nan());
    }

    #[test]
    fn empty_figure_round_trips_as_null() {
        let row =
            Row::new("s", "t", "m").with("x", Figure::from_samples("s", Better::Lower, vec![]));
        let json = serde_json::to_string(&row).unwrap();
        assert!(json.contains("\"median\":null"), "{json}");
        let back: Row = serde_json::from_str(&json).unwrap();
        assert!(back.figures["x"].median.is_nan());
    }

    #[test]
    fn samples_accumulate_into_row() {
        let mut s = Samples::new();
        for v in [3.0, 1.0, 2.0] {
            s.push("req_per_s", "req/s", Better::Higher, v);
        }
        let row = s.into_row("cgi", "small", "bare");
        assert_eq!(row.median("req_per_s"), Some(2.0));
        assert_eq!(row.figures["req_per_s"].samples, vec![3.0, 1.0, 2.0]);
    }
}
