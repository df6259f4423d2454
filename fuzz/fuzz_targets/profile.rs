//! Profile parser and validator on arbitrary text: every input is either a
//! valid template or a clear error; never a panic or a hang. Errors that
//! come from a file position must name a line and column inside the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = corral_profile::check_str(text, Path::new("fuzz.toml")) {
        let msg = e.to_string();
        assert!(!msg.is_empty());
        if let Some(loc) = e.location() {
            let lines = text.lines().count().max(1);
            assert!(
                loc.line >= 1 && loc.line <= lines + 1,
                "line {} of {lines}: {msg}",
                loc.line
            );
        }
    }
});
