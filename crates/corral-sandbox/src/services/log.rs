//! A service's log: its stdout and stderr, one timestamped line at a time,
//! in a host file the init writes through a directory fd it got from
//! `corral up` (the file is not reachable from inside the sandbox), rotated
//! by size like logrotate's `size` + `rotate N`.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

pub struct LogFile {
    dir: OwnedFd,
    name: String,
    file: Option<OwnedFd>,
    size: u64,
    max_size: u64,
    keep: u32,
    /// The last byte written ended a line: the next byte starts one (and
    /// gets a timestamp).
    at_line_start: bool,
    /// Bytes of the current line so far.
    line_len: usize,
}

/// Longest line kept whole; longer output is cut into lines of this size.
pub const MAX_LINE: usize = 16 * 1024;

impl LogFile {
    pub fn new(dir: OwnedFd, name: String, max_size: u64, keep: u32) -> LogFile {
        LogFile {
            dir,
            name,
            file: None,
            size: 0,
            max_size,
            keep,
            at_line_start: true,
            line_len: 0,
        }
    }

    /// A message of corral itself about the service (start, exit, restart).
    pub fn note(&mut self, msg: &str) {
        if !self.at_line_start {
            self.write(b"\n");
        }
        self.write(format!("corral: {msg}\n").as_bytes());
    }

    /// Output of the service: timestamps go at the start of each line. A
    /// line longer than [`MAX_LINE`] is cut into several, and a file is
    /// rotated as soon as it reaches its size, inside a line if need be:
    /// output without newlines cannot grow a file past its limit.
    pub fn write(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            if self.at_line_start {
                if self.file.is_none() {
                    self.open();
                }
                if self.size >= self.max_size {
                    self.rotate();
                }
                let stamp = timestamp(std::time::SystemTime::now());
                self.append(stamp.as_bytes());
                self.at_line_start = false;
                self.line_len = 0;
            }
            let room = MAX_LINE - self.line_len;
            let line_end = data.iter().take(room).position(|&b| b == b'\n');
            let n = line_end.map_or(data.len().min(room), |i| i + 1);
            self.append(&data[..n]);
            self.line_len += n;
            data = &data[n..];
            if line_end.is_some() {
                self.at_line_start = true;
            } else if self.line_len >= MAX_LINE || self.size >= self.max_size {
                // Cut here; the rest follows on a line of its own.
                self.append(b"\n");
                self.at_line_start = true;
            }
        }
    }

    fn append(&mut self, b: &[u8]) {
        if self.file.is_none() {
            self.open();
        }
        let Some(f) = &self.file else { return };
        if let Ok(n) = nix::unistd::write(f, b) {
            self.size += n as u64;
        }
    }

    fn open(&mut self) {
        use nix::fcntl::OFlag;
        let flags = OFlag::O_WRONLY
            | OFlag::O_APPEND
            | OFlag::O_CREAT
            | OFlag::O_NOFOLLOW
            | OFlag::O_CLOEXEC;
        let mode = nix::sys::stat::Mode::from_bits_truncate(0o640);
        let Ok(fd) =
            nix::fcntl::openat(Some(self.dir.as_raw_fd()), self.name.as_str(), flags, mode)
        else {
            return;
        };
        // SAFETY: openat just returned this fd; nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        self.size = nix::sys::stat::fstat(fd.as_raw_fd()).map_or(0, |st| st.st_size as u64);
        self.file = Some(fd);
    }

    /// NAME -> NAME.1 -> ... -> NAME.keep (the oldest is replaced).
    fn rotate(&mut self) {
        self.file = None;
        let dir = Some(self.dir.as_raw_fd());
        let path = |i: u32| match i {
            0 => self.name.clone(),
            i => format!("{}.{i}", self.name),
        };
        if self.keep == 0 {
            let _ = nix::unistd::unlinkat(
                dir,
                path(0).as_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
        } else {
            for i in (0..self.keep).rev() {
                let _ = nix::fcntl::renameat(dir, path(i).as_str(), dir, path(i + 1).as_str());
            }
        }
        self.size = 0;
    }
}

/// `2026-11-24T23:59:59.123Z ` (UTC, milliseconds).
pub fn timestamp(t: std::time::SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (y, mo, day) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{mo:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z ",
        s / 3600,
        s / 60 % 60,
        s % 60,
        d.subsec_millis()
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian
/// calendar (Howard Hinnant's `civil_from_days`).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn timestamps_are_utc_dates() {
        assert_eq!(timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000Z ");
        // 2000-02-29 (a leap day of a century leap year) 12:34:56.789
        let t = UNIX_EPOCH + Duration::from_millis(951_827_696_789);
        assert_eq!(timestamp(t), "2000-02-29T12:34:56.789Z ");
        let t = UNIX_EPOCH + Duration::from_secs(1_795_564_799);
        assert_eq!(timestamp(t), "2026-11-24T23:59:59.000Z ");
    }

    fn dir_fd(d: &std::path::Path) -> OwnedFd {
        OwnedFd::from(std::fs::File::open(d).unwrap())
    }

    #[test]
    fn output_without_newlines_is_cut_and_rotated_too() {
        let d = tempfile::tempdir().unwrap();
        let mut log = LogFile::new(dir_fd(d.path()), "svc.log".into(), 64 * 1024, 1);
        let chunk = vec![b'x'; 10_000];
        for _ in 0..100 {
            log.write(&chunk); // 1 MB, never a newline
        }
        for name in ["svc.log", "svc.log.1"] {
            let text = std::fs::read_to_string(d.path().join(name)).unwrap();
            assert!(
                text.len() <= 64 * 1024 + MAX_LINE + 64,
                "{name}: {} bytes",
                text.len()
            );
            assert!(text.lines().all(|l| l.len() <= MAX_LINE + 32), "{name}");
        }
        assert!(!d.path().join("svc.log.2").exists());
    }

    #[test]
    fn lines_are_stamped_and_files_rotate_keeping_n() {
        let d = tempfile::tempdir().unwrap();
        let mut log = LogFile::new(dir_fd(d.path()), "svc.log".into(), 100, 2);
        log.write(b"first ");
        log.write(b"line\nsecond line\n");
        let text = std::fs::read_to_string(d.path().join("svc.log")).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].ends_with("Z first line"), "{text}");
        assert!(lines[1].ends_with("Z second line"), "{text}");
        // Past 100 bytes the file moves to .1, then .1 to .2; never a .3.
        for i in 0..20 {
            log.write(format!("{i:040}\n").as_bytes());
        }
        log.note("done");
        let names: Vec<String> = {
            let mut v: Vec<String> = std::fs::read_dir(d.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            v.sort();
            v
        };
        assert_eq!(names, ["svc.log", "svc.log.1", "svc.log.2"]);
        for n in &names {
            let len = std::fs::metadata(d.path().join(n)).unwrap().len();
            assert!(len < 100 + 70, "{n}: {len} bytes");
        }
        let last = std::fs::read_to_string(d.path().join("svc.log")).unwrap();
        assert!(last.ends_with("Z corral: done\n"), "{last}");
    }
}
