//! `Plan::digest`: a stable fingerprint of a plan.

use crate::plan::Plan;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt::Write;

impl Plan {
    /// Hex SHA-256 of the plan's canonical JSON: object keys sorted, no
    /// whitespace. Equal plans give equal digests on every build, whatever
    /// serde_json's map ordering features.
    pub fn digest(&self) -> String {
        // A Plan holds only strings, numbers, booleans, maps with string keys
        // and sequences, so JSON always represents it; were that ever to
        // change, the Debug form still tells plans apart.
        let mut json = String::new();
        match serde_json::to_value(self) {
            Ok(value) => canonical(&value, &mut json),
            Err(_) => json = format!("{self:?}"),
        }
        Sha256::digest(json.as_bytes())
            .iter()
            .fold(String::with_capacity(64), |mut hex, b| {
                let _ = write!(hex, "{b:02x}");
                hex
            })
    }
}

pub(crate) fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}
