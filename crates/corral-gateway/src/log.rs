//! The gateway log: one line per event on stderr (journald or the service
//! manager adds timestamps), prefixed so that it can be grepped.

use std::io::Write;

/// Write one log line, `corral-gateway: ` first. Lines are written whole
/// (stderr is locked for the write), so concurrent requests never interleave
/// inside a line.
pub fn line(args: std::fmt::Arguments<'_>) {
    let mut s = String::with_capacity(128);
    s.push_str("corral-gateway: ");
    std::fmt::Write::write_fmt(&mut s, args).ok();
    // Control characters from scripts' output would forge log lines.
    let mut s: String = s
        .chars()
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect();
    s.push('\n');
    let _ = std::io::stderr().lock().write_all(s.as_bytes());
}
