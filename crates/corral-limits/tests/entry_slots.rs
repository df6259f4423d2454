//! Entry slots across processes: this test binary re-runs itself as helper
//! processes (`entry_helper` with CORRAL_ENTRY_HELPER set) that take a slot,
//! report on stdout, and hold the slot until their stdin closes.

use corral_limits::{EntryError, EntrySlots};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const HELPER_ENV: &str = "CORRAL_ENTRY_HELPER";

/// Helper mode: `dir:limit`. Prints `ENTRY ok <slot>` or `ENTRY full`, then
/// holds the slot until stdin reaches EOF (at most 30 s). Not a test of its
/// own: ignored, so a test run lists it as such; `Helper::start` runs it
/// with `--ignored`.
#[test]
#[ignore = "the helper process of the entry-slot tests (they run it)"]
fn entry_helper() {
    let Ok(spec) = std::env::var(HELPER_ENV) else {
        return;
    };
    let (dir, limit) = spec.rsplit_once(':').unwrap();
    let slots = EntrySlots::open(Path::new(dir), limit.parse().unwrap()).unwrap();
    let guard = match slots.try_acquire() {
        Ok(g) => {
            println!("ENTRY ok {}", g.slot());
            Some(g)
        }
        Err(EntryError::Full { .. }) => {
            println!("ENTRY full");
            None
        }
        Err(e) => panic!("{e}"),
    };
    std::io::stdout().flush().unwrap();
    // Bounded hold: a reader thread ends at EOF; give up after 30 s.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        let _ = tx.send(());
    });
    let _ = rx.recv_timeout(Duration::from_secs(30));
    drop(guard);
}

/// A helper process, killed by pid and reaped on drop.
struct Helper {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Helper {
    fn start(dir: &Path, limit: u32) -> Helper {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "entry_helper",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(HELPER_ENV, format!("{}:{limit}", dir.display()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        Helper { child, out }
    }

    /// The helper's `ENTRY ...` line (other lines are the test harness's).
    fn result(&mut self) -> String {
        let until = Instant::now() + Duration::from_secs(20);
        let mut line = String::new();
        while Instant::now() < until {
            line.clear();
            if self.out.read_line(&mut line).unwrap() == 0 {
                panic!("helper exited without a result");
            }
            // The harness prints "test entry_helper ... " before it on the same line.
            if let Some(at) = line.find("ENTRY ") {
                return line[at + "ENTRY ".len()..].trim().to_string();
            }
        }
        panic!("no result from helper within 20 s");
    }

    fn release(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

#[test]
fn n_plus_one_processes_one_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ep");
    let n = 4;
    // Start all at once, then collect: they race for the slots.
    let mut helpers: Vec<Helper> = (0..=n).map(|_| Helper::start(&dir, n)).collect();
    let results: Vec<String> = helpers.iter_mut().map(Helper::result).collect();
    let refused = results.iter().filter(|r| *r == "full").count();
    let mut slots: Vec<&str> = results
        .iter()
        .filter_map(|r| r.strip_prefix("ok "))
        .collect();
    slots.sort();
    println!("entry slots: {results:?}");
    assert_eq!(refused, 1, "{results:?}");
    assert_eq!(slots, ["0", "1", "2", "3"], "each slot held once");
    let slots_view = EntrySlots::open(&dir, n).unwrap();
    assert_eq!(slots_view.in_use().unwrap(), n);
    assert_eq!(slots_view.rejections().unwrap(), 1);
    assert!(matches!(
        slots_view.try_acquire(),
        Err(EntryError::Full { limit: 4 })
    ));
    assert_eq!(slots_view.rejections().unwrap(), 2);
    for h in &mut helpers {
        h.release();
    }
    assert_eq!(slots_view.in_use().unwrap(), 0);
}

#[test]
fn slot_of_a_killed_process_comes_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ep");
    let slots = EntrySlots::open(&dir, 1).unwrap();
    let mut holder = Helper::start(&dir, 1);
    assert_eq!(holder.result(), "ok 0");
    assert!(matches!(
        slots.try_acquire(),
        Err(EntryError::Full { limit: 1 })
    ));
    assert_eq!(slots.rejections().unwrap(), 1);
    // SIGKILL: no destructor runs, the kernel drops the lock with the process.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(holder.child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let st = holder.child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&st),
        Some(libc::SIGKILL)
    );
    let g = slots
        .try_acquire()
        .expect("slot is free again after the holder died");
    assert_eq!(g.slot(), 0);
    assert_eq!(slots.rejections().unwrap(), 1);
}

#[test]
fn guard_fd_is_not_inherited_across_exec() {
    let tmp = tempfile::tempdir().unwrap();
    let slots = EntrySlots::open(tmp.path(), 1).unwrap();
    let g = slots.try_acquire().unwrap();
    // A long-lived child started while the guard is held must not keep the slot.
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    drop(g);
    // Other tests of this binary fork helpers concurrently; a fork that has
    // not reached exec yet holds a copy for a moment, hence the short retry.
    let until = Instant::now() + Duration::from_secs(2);
    let free = loop {
        match slots.try_acquire() {
            Err(EntryError::Full { .. }) if Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(20))
            }
            r => break r,
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        free.is_ok(),
        "slot still held through an inherited descriptor: {free:?}"
    );
}
