//! docs/security.md must describe what the code does.

use corral_security::{seccomp, Step};

fn doc() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/security.md");
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn every_default_deny_entry_is_documented() {
    let doc = doc();
    let missing: Vec<_> = seccomp::default_deny_reasons()
        .into_iter()
        .filter(|(name, _)| !doc.contains(&format!("`{name}`")))
        .map(|(name, _)| name)
        .collect();
    assert!(missing.is_empty(), "not in docs/security.md: {missing:?}");
}

#[test]
fn every_step_is_documented_in_order() {
    let doc = doc();
    let mut from = 0;
    for &step in Step::SEQUENCE {
        let at = doc[from..].find(step.as_str()).unwrap_or_else(|| {
            panic!(
                "step {:?} ({:?}) missing or out of order",
                step,
                step.as_str()
            )
        });
        from += at;
    }
}
