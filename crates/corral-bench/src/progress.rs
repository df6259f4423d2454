//! Progress for long suites: an indicatif bar with ETA on an interactive
//! stderr; one line per finished step otherwise (stderr not a terminal, or
//! `--json`, whose stdout must stay machine-readable).

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

enum Sink {
    Bar(ProgressBar),
    Lines(Mutex<Box<dyn Write + Send>>),
    Silent,
}

/// Progress over a known number of steps.
pub struct Progress {
    sink: Sink,
    len: u64,
    done: Mutex<u64>,
    started: Instant,
}

impl Progress {
    /// The bar when stderr is a terminal and `json` is false; else lines on stderr.
    pub fn new(len: u64, label: &str, json: bool) -> Progress {
        if !json && std::io::stderr().is_terminal() {
            Progress::bar(len, label)
        } else {
            Progress::lines(len, Box::new(std::io::stderr()))
        }
    }

    /// Always a bar (drawn on stderr).
    pub fn bar(len: u64, label: &str) -> Progress {
        let bar = ProgressBar::new(len);
        let style = ProgressStyle::with_template(
            "{prefix:.bold} [{bar:30.cyan/blue}] {pos}/{len} {wide_msg} ETA {eta}",
        )
        .expect("valid template")
        .progress_chars("=> ");
        bar.set_style(style);
        bar.set_prefix(label.to_string());
        bar.enable_steady_tick(Duration::from_millis(250));
        Progress::with(Sink::Bar(bar), len)
    }

    /// One line per finished step, written to `out`.
    pub fn lines(len: u64, out: Box<dyn Write + Send>) -> Progress {
        Progress::with(Sink::Lines(Mutex::new(out)), len)
    }

    /// No output at all.
    pub fn silent(len: u64) -> Progress {
        Progress::with(Sink::Silent, len)
    }

    fn with(sink: Sink, len: u64) -> Progress {
        Progress {
            sink,
            len,
            done: Mutex::new(0),
            started: Instant::now(),
        }
    }

    /// Whether the interactive bar is shown.
    pub fn is_bar(&self) -> bool {
        matches!(self.sink, Sink::Bar(_))
    }

    /// Say what is running now (bar only; lines mode prints on completion).
    pub fn set_message(&self, msg: &str) {
        if let Sink::Bar(b) = &self.sink {
            b.set_message(msg.to_string());
        }
    }

    /// A step finished: advance and show its one-line summary.
    pub fn step_done(&self, summary: &str) {
        let n = {
            let mut d = self.done.lock().unwrap_or_else(|e| e.into_inner());
            *d += 1;
            *d
        };
        match &self.sink {
            Sink::Bar(b) => {
                b.println(format!("  {summary}"));
                b.inc(1);
            }
            Sink::Lines(w) => {
                let t = self.started.elapsed().as_secs();
                let mut w = w.lock().unwrap_or_else(|e| e.into_inner());
                let _ = writeln!(
                    w,
                    "[{n}/{} {:02}:{:02}] {summary}",
                    self.len,
                    t / 60,
                    t % 60
                );
                let _ = w.flush();
            }
            Sink::Silent => {}
        }
    }

    /// A line that does not advance the count (warnings, skipped steps).
    pub fn note(&self, msg: &str) {
        match &self.sink {
            Sink::Bar(b) => b.println(format!("  {msg}")),
            Sink::Lines(w) => {
                let mut w = w.lock().unwrap_or_else(|e| e.into_inner());
                let _ = writeln!(w, "{msg}");
                let _ = w.flush();
            }
            Sink::Silent => {}
        }
    }

    /// Steps finished so far.
    pub fn done(&self) -> u64 {
        *self.done.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remove the bar.
    pub fn finish(&self) {
        if let Sink::Bar(b) = &self.sink {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_mode_prints_one_line_per_step() {
        let buf = Buf::default();
        let p = Progress::lines(2, Box::new(buf.clone()));
        assert!(!p.is_bar());
        p.set_message("running cgi/small/bare");
        p.step_done("cgi small bare: 761 req/s");
        p.note("skipping firejail: missing");
        p.step_done("cgi small corral: 613 req/s");
        assert_eq!(p.done(), 2);
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(
            lines[0].starts_with("[1/2 00:00] cgi small bare: 761 req/s"),
            "{text}"
        );
        assert_eq!(lines[1], "skipping firejail: missing");
        assert!(lines[2].starts_with("[2/2 "), "{text}");
    }

    #[test]
    fn json_mode_never_draws_a_bar() {
        assert!(!Progress::new(3, "bench", true).is_bar());
    }
}
