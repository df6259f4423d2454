//! The top processes of a tenant for a fault snapshot, read from /proc.

use crate::collector::SNAPSHOT_PROCS;
use crate::store::Proc;

/// Longest command line kept, in characters.
const CMDLINE_MAX: usize = 200;

/// How many of `pids` there were, and the [`SNAPSHOT_PROCS`] that used the
/// most CPU time (then memory). Processes that exit while being read are
/// left out.
pub fn top(pids: &[i32]) -> (u64, Vec<Proc>) {
    // SAFETY: sysconf has no memory effects; it returns -1 on error.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    // SAFETY: as above.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    let mut procs: Vec<Proc> = pids
        .iter()
        .filter_map(|&pid| read(pid, tick, page))
        .collect();
    procs.sort_by(|a, b| b.cpu_ms.cmp(&a.cpu_ms).then(b.rss.cmp(&a.rss)));
    procs.truncate(SNAPSHOT_PROCS);
    (pids.len() as u64, procs)
}

fn read(pid: i32, tick: u64, page: u64) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, rest) = stat.rsplit_once(") ")?;
    let comm = head.split_once(" (").map(|(_, c)| c).unwrap_or("");
    // `rest` starts at field 3 (state): utime is field 14, stime 15, rss 24.
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i - 3).and_then(|v| v.parse::<u64>().ok());
    let cpu_ms = (num(14)? + num(15)?) * 1000 / tick;
    let rss = num(24)? * page;
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let mut cmdline: String = String::from_utf8_lossy(&raw)
        .trim_end_matches('\0')
        .replace('\0', " ")
        .chars()
        .take(CMDLINE_MAX)
        .collect();
    if cmdline.is_empty() {
        cmdline = format!("[{comm}]");
    }
    Some(Proc {
        pid,
        state: f.first()?.to_string(),
        cpu_ms,
        rss,
        cmdline,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_is_read() {
        let me = std::process::id() as i32;
        let (n, top) = super::top(&[me, i32::MAX]);
        assert_eq!(n, 2);
        assert_eq!(top.len(), 1, "the missing pid is left out");
        assert_eq!(top[0].pid, me);
        assert!(top[0].rss > 0);
        assert!(!top[0].cmdline.is_empty());
    }
}
