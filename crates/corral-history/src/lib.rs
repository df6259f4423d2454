//! corral-history: the usage history of corral's tenants.
//!
//! - [`Store`]: the SQLite database (WAL, one writer): samples, 1-minute,
//!   5-minute and hourly rollups, retention, limits, snapshots, alerts.
//! - [`Collector`]: successive readings → samples, fault incidents and
//!   their process snapshots, alert decisions, maintenance once a minute.
//! - [`query`]: totals, `--by-fault`, `--by-usage`, steps of a tenant's usage.
//! - [`chart`]: a tenant's usage against its limits, as an offline HTML page.
//! - [`HistoryConfig`]: `history.toml` (database, interval, retention, alert rules).
//!
//! `corral daemon` runs the collector and `corral history` queries it
//! (docs/operating.md, "Usage history").

pub mod chart;
mod collector;
mod config;
mod procs;
pub mod query;
mod row;
mod store;

pub use collector::{
    describe_faults, usage_and_limit, Alert, Collector, Reading, Round, UsageAlert, INCIDENT_GAP,
    SNAPSHOTS_PER_INCIDENT, SNAPSHOT_PROCS, SNAPSHOT_SPACING,
};
pub use config::{
    parse_duration, parse_percent, parse_webhook, Condition, ConfigError, HistoryConfig, Resource,
    Rule, Webhook, DEFAULT_DATABASE, DEFAULT_INTERVAL, MIN_INTERVAL,
};
pub use procs::top as top_processes;
pub use row::{fault_count, Agg, Row, COLUMNS, FAULT_KINDS};
pub use store::{LimitsRow, Proc, Retention, SentAlert, Snapshot, Store, StoreError, Tier};

/// Now, in Unix seconds.
pub fn now_secs() -> i64 {
    now_ms() / 1000
}

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
