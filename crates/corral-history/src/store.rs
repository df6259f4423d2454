//! The history database: SQLite in WAL mode, written by one collector.
//!
//! Tables: `raw` (one row per tenant per sample, kept briefly), `m1`, `m5`
//! and `h1` (1-minute, 5-minute and hourly rollups), `limits` (a tenant's
//! limits, a row each time they change), `snapshots` (top processes at fault
//! incidents), `alerts` (alerts sent), `tenants` (names) and `meta` (how far
//! each rollup and each retention got). Every usage table has the same
//! columns ([`crate::row::COLUMNS`]) and the key (ts, tenant), so rows are
//! appended in time order and old rows are deleted from the front.
//!
//! Times are Unix seconds, except `raw.ts`, which is milliseconds (samples
//! can be less than a second apart).

use crate::row::{Agg, Row, COLUMNS};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Sql {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("{path}: no usage history there (is `corral daemon` running? docs/operating.md, \"Usage history\")")]
    Missing { path: PathBuf },
    #[error("{path}: written by a newer corral (schema {found}, this one knows {known})")]
    Schema {
        path: PathBuf,
        found: i64,
        known: i64,
    },
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// The schema version this code writes (`PRAGMA user_version`).
const SCHEMA: i64 = 1;

/// A table of usage rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    Raw,
    Minute,
    FiveMinutes,
    Hour,
}

impl Tier {
    pub const ALL: [Tier; 4] = [Tier::Raw, Tier::Minute, Tier::FiveMinutes, Tier::Hour];

    pub fn table(self) -> &'static str {
        match self {
            Tier::Raw => "raw",
            Tier::Minute => "m1",
            Tier::FiveMinutes => "m5",
            Tier::Hour => "h1",
        }
    }

    /// Bucket length in seconds (a raw sample has none).
    pub fn secs(self) -> i64 {
        match self {
            Tier::Raw => 0,
            Tier::Minute => 60,
            Tier::FiveMinutes => 300,
            Tier::Hour => 3600,
        }
    }

    /// The tier this one rolls up into.
    fn coarser(self) -> Option<Tier> {
        match self {
            Tier::Raw => Some(Tier::Minute),
            Tier::Minute => Some(Tier::FiveMinutes),
            Tier::FiveMinutes => Some(Tier::Hour),
            Tier::Hour => None,
        }
    }

    /// Its `ts` column in seconds, as SQL.
    fn ts_secs(self) -> &'static str {
        match self {
            Tier::Raw => "(ts / 1000)",
            _ => "ts",
        }
    }

    /// Its `ts` column's unit per second.
    fn ts_scale(self) -> i64 {
        match self {
            Tier::Raw => 1000,
            _ => 1,
        }
    }
}

/// How long each table keeps its rows, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Retention {
    pub raw: i64,
    pub minute: i64,
    pub five_minutes: i64,
    pub hour: i64,
}

impl Default for Retention {
    /// Samples 10 minutes, 1-minute rows 12 hours, 5-minute rows 7 days,
    /// hourly rows (and snapshots, alerts) 60 days: a busy tenant's first
    /// day costs about 75 KiB (docs/benchmarks.md).
    fn default() -> Retention {
        Retention {
            raw: 10 * 60,
            minute: 12 * 3600,
            five_minutes: 7 * 86_400,
            hour: 60 * 86_400,
        }
    }
}

impl Retention {
    fn of(&self, tier: Tier) -> i64 {
        match tier {
            Tier::Raw => self.raw,
            Tier::Minute => self.minute,
            Tier::FiveMinutes => self.five_minutes,
            Tier::Hour => self.hour,
        }
    }
}

/// A tenant's limits from some time on (`None`: not limited).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LimitsRow {
    pub ts: i64,
    /// % of one core.
    pub cpu_pct: Option<i64>,
    pub memory: Option<i64>,
    pub processes: Option<i64>,
    pub entry: Option<i64>,
    pub io_read_bps: Option<i64>,
    pub io_write_bps: Option<i64>,
    pub io_read_iops: Option<i64>,
    pub io_write_iops: Option<i64>,
}

impl LimitsRow {
    pub fn from_limits(ts: i64, l: &corral_limits::Limits) -> LimitsRow {
        let i = |v: Option<u64>| v.map(|v| v.min(i64::MAX as u64) as i64);
        LimitsRow {
            ts,
            cpu_pct: l.cpu_pct.map(i64::from),
            memory: i(l.memory_max),
            processes: l.processes.map(i64::from),
            entry: l.entry_processes.map(i64::from),
            io_read_bps: i(l.io.read_bps),
            io_write_bps: i(l.io.write_bps),
            io_read_iops: i(l.io.read_iops),
            io_write_iops: i(l.io.write_iops),
        }
    }

    /// The same limits (whatever their time).
    pub fn same(&self, other: &LimitsRow) -> bool {
        LimitsRow {
            ts: 0,
            ..self.clone()
        } == LimitsRow {
            ts: 0,
            ..other.clone()
        }
    }
}

/// One process of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proc {
    pub pid: i32,
    /// Process state (R running, S sleeping, D waiting for IO, ...).
    pub state: String,
    /// CPU time used since it started, ms.
    pub cpu_ms: u64,
    /// Resident memory, bytes.
    pub rss: u64,
    pub cmdline: String,
}

/// The top processes of a tenant at a fault incident.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub tenant: String,
    /// Unix seconds.
    pub ts: i64,
    /// The faults of the sample that caused it ("processes=3 cpu=12").
    pub faults: String,
    /// Processes in the tenant then.
    pub total: u64,
    /// The top ones, by CPU time.
    pub procs: Vec<Proc>,
}

/// An alert that was sent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SentAlert {
    pub tenant: String,
    pub ts: i64,
    pub rule: String,
    pub message: String,
}

pub struct Store {
    conn: Connection,
    path: PathBuf,
    ids: HashMap<String, i64>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

fn columns_sql(with_type: bool) -> String {
    COLUMNS
        .iter()
        .map(|(c, _)| {
            if with_type {
                format!("{c} INTEGER NOT NULL")
            } else {
                c.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl Store {
    /// Opens (creating if needed) the database for writing: WAL mode, so
    /// readers (`corral history`) never block the collector and a killed
    /// collector leaves a valid database with every committed sample.
    pub fn create(path: &Path) -> Result<Store> {
        let conn = Connection::open(path).map_err(|e| sql(path, e))?;
        let mut s = Store::with(conn, path)?;
        s.setup()?;
        Ok(s)
    }

    /// Opens an existing database (to read it, or for tests to write it).
    pub fn open(path: &Path) -> Result<Store> {
        if !path.exists() {
            return Err(StoreError::Missing { path: path.into() });
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| sql(path, e))?;
        let s = Store::with(conn, path)?;
        let v: i64 = s
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| s.err(e))?;
        if v == 0 {
            return Err(StoreError::Missing { path: path.into() });
        }
        if v > SCHEMA {
            return Err(StoreError::Schema {
                path: path.into(),
                found: v,
                known: SCHEMA,
            });
        }
        Ok(s)
    }

    fn with(conn: Connection, path: &Path) -> Result<Store> {
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(|e| sql(path, e))?;
        Ok(Store {
            conn,
            path: path.into(),
            ids: HashMap::new(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, e: rusqlite::Error) -> StoreError {
        sql(&self.path, e)
    }

    fn setup(&mut self) -> Result<()> {
        let v: i64 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        if v > SCHEMA {
            return Err(StoreError::Schema {
                path: self.path.clone(),
                found: v,
                known: SCHEMA,
            });
        }
        let cols = columns_sql(true);
        let mut ddl = String::from(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = NORMAL;
             BEGIN;
             CREATE TABLE IF NOT EXISTS tenants (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
             CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
             CREATE TABLE IF NOT EXISTS limits (ts INTEGER NOT NULL, tenant INTEGER NOT NULL,
                cpu_pct INTEGER, memory INTEGER, processes INTEGER, entry INTEGER,
                io_read_bps INTEGER, io_write_bps INTEGER, io_read_iops INTEGER, io_write_iops INTEGER,
                PRIMARY KEY (tenant, ts)) WITHOUT ROWID;
             CREATE TABLE IF NOT EXISTS snapshots (ts INTEGER NOT NULL, tenant INTEGER NOT NULL,
                faults TEXT NOT NULL, total INTEGER NOT NULL, procs TEXT NOT NULL,
                PRIMARY KEY (ts, tenant)) WITHOUT ROWID;
             CREATE TABLE IF NOT EXISTS alerts (ts INTEGER NOT NULL, tenant INTEGER NOT NULL,
                rule TEXT NOT NULL, message TEXT NOT NULL,
                PRIMARY KEY (ts, tenant, rule)) WITHOUT ROWID;\n",
        );
        for t in Tier::ALL {
            ddl.push_str(&format!(
                "CREATE TABLE IF NOT EXISTS {} (ts INTEGER NOT NULL, tenant INTEGER NOT NULL, {cols},
                   PRIMARY KEY (ts, tenant)) WITHOUT ROWID;\n",
                t.table()
            ));
        }
        ddl.push_str(&format!("PRAGMA user_version = {SCHEMA}; COMMIT;"));
        self.conn.execute_batch(&ddl).map_err(|e| self.err(e))
    }

    /// Runs `f` in one write transaction (BEGIN IMMEDIATE ... COMMIT),
    /// rolled back if it fails.
    pub fn transaction<T>(&mut self, f: impl FnOnce(&mut Store) -> Result<T>) -> Result<T> {
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(|e| self.err(e))?;
        match f(self) {
            Ok(v) => {
                self.conn.execute_batch("COMMIT").map_err(|e| self.err(e))?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                // Ids handed out in the rolled-back transaction are gone.
                self.ids.clear();
                Err(e)
            }
        }
    }

    /// The id of a tenant's name, created on first use.
    pub fn tenant_id(&mut self, name: &str) -> Result<i64> {
        if let Some(id) = self.ids.get(name) {
            return Ok(*id);
        }
        let c = &self.conn;
        let found: Option<i64> = c
            .prepare_cached("SELECT id FROM tenants WHERE name = ?1")
            .and_then(|mut s| s.query_row([name], |r| r.get(0)).optional())
            .map_err(|e| sql(&self.path, e))?;
        let id = match found {
            Some(id) => id,
            None => {
                c.prepare_cached("INSERT INTO tenants (name) VALUES (?1)")
                    .and_then(|mut s| s.execute([name]))
                    .map_err(|e| sql(&self.path, e))?;
                c.last_insert_rowid()
            }
        };
        self.ids.insert(name.to_string(), id);
        Ok(id)
    }

    fn lookup_id(&self, name: &str) -> Result<Option<i64>> {
        self.conn
            .prepare_cached("SELECT id FROM tenants WHERE name = ?1")
            .and_then(|mut s| s.query_row([name], |r| r.get(0)).optional())
            .map_err(|e| self.err(e))
    }

    /// The id to filter by: `Some(None)` for every tenant, `Some(Some(id))`
    /// for a known one, `None` for a tenant the history does not know.
    fn filter(&self, tenant: Option<&str>) -> Result<Option<Option<i64>>> {
        match tenant {
            Some(t) => Ok(self.lookup_id(t)?.map(Some)),
            None => Ok(Some(None)),
        }
    }

    fn names(&self) -> Result<HashMap<i64, String>> {
        let mut st = self
            .conn
            .prepare_cached("SELECT id, name FROM tenants")
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|it| it.collect::<rusqlite::Result<HashMap<i64, String>>>())
            .map_err(|e| sql(&self.path, e));
        rows
    }

    /// Stores one sample of a tenant taken at `ts_ms`.
    pub fn insert_sample(&mut self, tenant: &str, ts_ms: i64, row: &Row) -> Result<()> {
        let id = self.tenant_id(tenant)?;
        let placeholders = (0..COLUMNS.len())
            .map(|i| format!("?{}", i + 3))
            .collect::<Vec<_>>()
            .join(", ");
        let sql_text = format!(
            "INSERT OR REPLACE INTO raw (ts, tenant, {}) VALUES (?1, ?2, {placeholders})",
            columns_sql(false)
        );
        let mut values = vec![ts_ms, id];
        values.extend(row.values());
        self.conn
            .prepare_cached(&sql_text)
            .and_then(|mut s| s.execute(rusqlite::params_from_iter(values)))
            .map_err(|e| sql(&self.path, e))?;
        Ok(())
    }

    /// Records a tenant's limits from `l.ts` on.
    pub fn insert_limits(&mut self, tenant: &str, l: &LimitsRow) -> Result<()> {
        let id = self.tenant_id(tenant)?;
        self.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO limits (ts, tenant, cpu_pct, memory, processes, entry,
                 io_read_bps, io_write_bps, io_read_iops, io_write_iops)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    l.ts,
                    id,
                    l.cpu_pct,
                    l.memory,
                    l.processes,
                    l.entry,
                    l.io_read_bps,
                    l.io_write_bps,
                    l.io_read_iops,
                    l.io_write_iops
                ])
            })
            .map_err(|e| sql(&self.path, e))?;
        Ok(())
    }

    /// The latest limits recorded of every tenant (what the collector
    /// compares new readings against after a restart).
    pub fn latest_limits(&self) -> Result<HashMap<String, LimitsRow>> {
        let all = self.limits_of(None)?;
        let mut out: HashMap<String, LimitsRow> = HashMap::new();
        for (t, l) in all {
            match out.get(&t) {
                Some(have) if have.ts >= l.ts => {}
                _ => {
                    out.insert(t, l);
                }
            }
        }
        Ok(out)
    }

    /// Every limits row (of one tenant), oldest first.
    pub fn limits_of(&self, tenant: Option<&str>) -> Result<Vec<(String, LimitsRow)>> {
        let names = self.names()?;
        let Some(want) = self.filter(tenant)? else {
            return Ok(vec![]);
        };
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT tenant, ts, cpu_pct, memory, processes, entry, io_read_bps, io_write_bps,
                 io_read_iops, io_write_iops FROM limits
                 WHERE ?1 IS NULL OR tenant = ?1 ORDER BY ts",
            )
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map([want], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    LimitsRow {
                        ts: r.get(1)?,
                        cpu_pct: r.get(2)?,
                        memory: r.get(3)?,
                        processes: r.get(4)?,
                        entry: r.get(5)?,
                        io_read_bps: r.get(6)?,
                        io_write_bps: r.get(7)?,
                        io_read_iops: r.get(8)?,
                        io_write_iops: r.get(9)?,
                    },
                ))
            })
            .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| sql(&self.path, e))?;
        Ok(rows
            .into_iter()
            .filter_map(|(id, l)| Some((names.get(&id)?.clone(), l)))
            .collect())
    }

    pub fn insert_snapshot(&mut self, s: &Snapshot) -> Result<()> {
        let id = self.tenant_id(&s.tenant)?;
        let procs = serde_json::to_string(&s.procs).unwrap_or_else(|_| "[]".into());
        self.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO snapshots (ts, tenant, faults, total, procs)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut st| st.execute(params![s.ts, id, s.faults, s.total as i64, procs]))
            .map_err(|e| sql(&self.path, e))?;
        Ok(())
    }

    /// Snapshots of a tenant taken in [from, to), oldest first.
    pub fn snapshots(&self, tenant: &str, from: i64, to: i64) -> Result<Vec<Snapshot>> {
        let Some(id) = self.lookup_id(tenant)? else {
            return Ok(vec![]);
        };
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT ts, faults, total, procs FROM snapshots
                 WHERE ts >= ?1 AND ts < ?2 AND tenant = ?3 ORDER BY ts",
            )
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map(params![from, to, id], |r| {
                let procs: String = r.get(3)?;
                Ok(Snapshot {
                    tenant: tenant.to_string(),
                    ts: r.get(0)?,
                    faults: r.get(1)?,
                    total: r.get::<_, i64>(2)? as u64,
                    procs: serde_json::from_str(&procs).unwrap_or_default(),
                })
            })
            .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| sql(&self.path, e));
        rows
    }

    pub fn insert_alert(&mut self, a: &SentAlert) -> Result<()> {
        let id = self.tenant_id(&a.tenant)?;
        self.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO alerts (ts, tenant, rule, message) VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut st| st.execute(params![a.ts, id, a.rule, a.message]))
            .map_err(|e| sql(&self.path, e))?;
        Ok(())
    }

    /// Alerts sent in [from, to) (of one tenant), oldest first.
    pub fn alerts(&self, tenant: Option<&str>, from: i64, to: i64) -> Result<Vec<SentAlert>> {
        let names = self.names()?;
        let Some(want) = self.filter(tenant)? else {
            return Ok(vec![]);
        };
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT ts, tenant, rule, message FROM alerts
                 WHERE ts >= ?1 AND ts < ?2 AND (?3 IS NULL OR tenant = ?3) ORDER BY ts",
            )
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map(params![from, to, want], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })
            .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| sql(&self.path, e))?;
        Ok(rows
            .into_iter()
            .filter_map(|(ts, id, rule, message)| {
                Some(SentAlert {
                    tenant: names.get(&id)?.clone(),
                    ts,
                    rule,
                    message,
                })
            })
            .collect())
    }

    fn meta(&self, key: &str) -> Result<Option<i64>> {
        self.conn
            .prepare_cached("SELECT value FROM meta WHERE key = ?1")
            .and_then(|mut s| s.query_row([key], |r| r.get(0)).optional())
            .map_err(|e| self.err(e))
    }

    fn set_meta(&self, key: &str, value: i64) -> Result<()> {
        self.conn
            .prepare_cached("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute(params![key, value]))
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Up to when (Unix seconds, exclusive) `tier` holds everything of the
    /// finer tier: its rollups are done until there.
    fn rolled_until(&self, tier: Tier) -> Result<i64> {
        Ok(self.meta(&format!("rolled_{}", tier.table()))?.unwrap_or(0))
    }

    /// From when (Unix seconds) `tier` still holds every row: its retention
    /// deleted what came before.
    fn kept_from(&self, tier: Tier) -> Result<i64> {
        Ok(self.meta(&format!("kept_{}", tier.table()))?.unwrap_or(0))
    }

    /// Rolls every bucket that ended by `now` (Unix seconds) up into the
    /// next tier (samples → 1 minute → 5 minutes → 1 hour), then deletes
    /// what `keep` no longer keeps. Rows are deleted only once rolled up, so
    /// a query always finds each moment in some tier. Returns the rows
    /// deleted. Call it inside a [`Store::transaction`].
    pub fn maintain(&mut self, now: i64, keep: &Retention) -> Result<usize> {
        for fine in [Tier::Raw, Tier::Minute, Tier::FiveMinutes] {
            let coarse = fine.coarser().expect("a coarser tier");
            let len = coarse.secs();
            let from = self.rolled_until(coarse)?;
            let to = now.div_euclid(len) * len;
            if to <= from {
                continue;
            }
            let aggs = COLUMNS
                .iter()
                .map(|(c, agg)| match agg {
                    Agg::Sum => format!("SUM({c})"),
                    Agg::Max => format!("MAX({c})"),
                })
                .collect::<Vec<_>>()
                .join(", ");
            let scale = fine.ts_scale();
            let q = format!(
                "INSERT OR REPLACE INTO {coarse_t} (ts, tenant, {cols})
                 SELECT ({ts} / {len}) * {len} AS b, tenant, {aggs} FROM {fine_t}
                 WHERE ts >= ?1 AND ts < ?2 GROUP BY b, tenant",
                coarse_t = coarse.table(),
                fine_t = fine.table(),
                cols = columns_sql(false),
                ts = fine.ts_secs(),
            );
            self.conn
                .prepare_cached(&q)
                .and_then(|mut s| s.execute(params![from * scale, to * scale]))
                .map_err(|e| self.err(e))?;
            self.set_meta(&format!("rolled_{}", coarse.table()), to)?;
        }
        let mut deleted = 0;
        for tier in Tier::ALL {
            let mut cutoff = now - keep.of(tier);
            if let Some(coarse) = tier.coarser() {
                // Whole buckets of the coarser tier, and only what it holds.
                cutoff = (cutoff.div_euclid(coarse.secs()) * coarse.secs())
                    .min(self.rolled_until(coarse)?);
            }
            if cutoff <= self.kept_from(tier)? {
                continue;
            }
            deleted += self
                .conn
                .prepare_cached(&format!("DELETE FROM {} WHERE ts < ?1", tier.table()))
                .and_then(|mut s| s.execute([cutoff * tier.ts_scale()]))
                .map_err(|e| self.err(e))?;
            self.set_meta(&format!("kept_{}", tier.table()), cutoff)?;
        }
        let cutoff = now - keep.hour;
        for table in ["snapshots", "alerts"] {
            deleted += self
                .conn
                .prepare_cached(&format!("DELETE FROM {table} WHERE ts < ?1"))
                .and_then(|mut s| s.execute([cutoff]))
                .map_err(|e| self.err(e))?;
        }
        // Limits older than the history, except the one in force at its start.
        deleted += self
            .conn
            .prepare_cached(
                "DELETE FROM limits WHERE ts < (SELECT MAX(l2.ts) FROM limits l2
                 WHERE l2.tenant = limits.tenant AND l2.ts <= ?1)",
            )
            .and_then(|mut s| s.execute([cutoff]))
            .map_err(|e| self.err(e))?;
        Ok(deleted)
    }

    /// Usage rows of [from, to) (Unix seconds), of one tenant or all, each
    /// moment from the finest tier that still holds it: samples for the
    /// last minutes, then 1-minute, 5-minute and hourly rows further back.
    /// A row belongs to the window when its time (bucket start) does.
    /// Ordered by time.
    pub fn rows(&self, tenant: Option<&str>, from: i64, to: i64) -> Result<Vec<(String, Row)>> {
        let names = self.names()?;
        let Some(want) = self.filter(tenant)? else {
            return Ok(vec![]);
        };
        let mut out = Vec::new();
        let mut upper = to;
        for tier in Tier::ALL {
            // Coarser tiers hold what finer ones no longer do.
            let lower = if tier == Tier::Hour {
                from
            } else {
                from.max(self.kept_from(tier)?)
            };
            if lower < upper {
                let s = tier.ts_scale();
                let q = format!(
                    "SELECT ts, tenant, {} FROM {} WHERE ts >= ?1 AND ts < ?2
                     AND (?3 IS NULL OR tenant = ?3)",
                    columns_sql(false),
                    tier.table()
                );
                let mut st = self.conn.prepare_cached(&q).map_err(|e| self.err(e))?;
                let rows = st
                    .query_map(params![lower * s, upper * s, want], |r| {
                        Ok((
                            r.get::<_, i64>(1)?,
                            read_row(r, 2, r.get::<_, i64>(0)? / s)?,
                        ))
                    })
                    .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
                    .map_err(|e| sql(&self.path, e))?;
                out.extend(
                    rows.into_iter()
                        .filter_map(|(id, row)| Some((names.get(&id)?.clone(), row))),
                );
            }
            upper = upper.min(lower);
        }
        out.sort_by_key(|(t, r)| (r.ts, t.clone()));
        Ok(out)
    }

    /// Rows of one tier as stored (tests, and checks of rollups).
    pub fn tier_rows(&self, tier: Tier) -> Result<Vec<(String, Row)>> {
        let names = self.names()?;
        let q = format!(
            "SELECT ts, tenant, {} FROM {} ORDER BY ts, tenant",
            columns_sql(false),
            tier.table()
        );
        let mut st = self.conn.prepare(&q).map_err(|e| self.err(e))?;
        let s = tier.ts_scale();
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(1)?,
                    read_row(r, 2, r.get::<_, i64>(0)? / s)?,
                ))
            })
            .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| sql(&self.path, e))?;
        Ok(rows
            .into_iter()
            .filter_map(|(id, row)| Some((names.get(&id)?.clone(), row)))
            .collect())
    }

    /// Faults of one tenant in its samples since `since_ms`: the window
    /// an alert rule looks at.
    pub fn recent(&self, tenant: &str, since_ms: i64) -> Result<Row> {
        let mut total = Row::default();
        let Some(id) = self.ids.get(tenant).copied().or(self.lookup_id(tenant)?) else {
            return Ok(total);
        };
        let q = format!(
            "SELECT {} FROM raw WHERE ts >= ?1 AND tenant = ?2",
            columns_sql(false)
        );
        let mut st = self.conn.prepare_cached(&q).map_err(|e| self.err(e))?;
        let rows = st
            .query_map(params![since_ms, id], |r| read_row(r, 0, 0))
            .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| sql(&self.path, e))?;
        for r in &rows {
            total.add(r);
        }
        Ok(total)
    }

    /// Bytes of each table (and index) in the file, largest first (SQLite's
    /// dbstat table).
    pub fn table_sizes(&self) -> Result<Vec<(String, i64)>> {
        let mut st = self
            .conn
            .prepare("SELECT name, SUM(pgsize) AS s FROM dbstat GROUP BY name ORDER BY s DESC")
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| sql(&self.path, e));
        rows
    }

    /// The most recent alert of each rule and tenant: (rule, tenant, ts).
    pub fn last_alerts(&self) -> Result<Vec<(String, String, i64)>> {
        let names = self.names()?;
        let mut st = self
            .conn
            .prepare("SELECT rule, tenant, MAX(ts) FROM alerts GROUP BY rule, tenant")
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })
            .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| sql(&self.path, e))?;
        Ok(rows
            .into_iter()
            .filter_map(|(rule, id, ts)| Some((rule, names.get(&id)?.clone(), ts)))
            .collect())
    }

    /// `PRAGMA integrity_check`: "ok", or what is wrong.
    pub fn integrity_check(&self) -> Result<String> {
        let mut st = self
            .conn
            .prepare("PRAGMA integrity_check")
            .map_err(|e| self.err(e))?;
        let lines = st
            .query_map([], |r| r.get::<_, String>(0))
            .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| sql(&self.path, e))?;
        Ok(lines.join("\n"))
    }

    /// Writes the WAL back into the database file and truncates it (what
    /// the size measurement needs; SQLite also does it every 1,000 pages).
    pub fn checkpoint(&self) -> Result<()> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(|e| self.err(e))
    }
}

/// A usage row from the value columns starting at column `first`.
fn read_row(r: &rusqlite::Row, first: usize, ts: i64) -> rusqlite::Result<Row> {
    let mut v = Vec::with_capacity(COLUMNS.len());
    for i in 0..COLUMNS.len() {
        v.push(r.get::<_, i64>(first + i)?);
    }
    Ok(Row::from_values(ts, &v))
}

fn sql(path: &Path, e: rusqlite::Error) -> StoreError {
    StoreError::Sql {
        path: path.into(),
        source: e,
    }
}
