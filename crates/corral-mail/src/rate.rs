//! Messages per tenant per hour, in a sliding window (like the per-user
//! limits hosting operators set on their MTA against spam from hacked
//! sites). In memory: a broker restart starts every window anew.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

pub const HOUR: Duration = Duration::from_secs(3600);

#[derive(Debug)]
pub struct RateLimiter {
    window: Duration,
    sent: HashMap<u32, VecDeque<Instant>>,
}

impl RateLimiter {
    pub fn new(window: Duration) -> RateLimiter {
        RateLimiter {
            window,
            sent: HashMap::new(),
        }
    }

    /// Count one message of `uid` if fewer than `limit` were counted in the
    /// window before `now`; else how long until one more may go.
    pub fn take(&mut self, uid: u32, limit: Option<u32>, now: Instant) -> Result<(), Duration> {
        let q = self.sent.entry(uid).or_default();
        while q
            .front()
            .is_some_and(|&t| now.duration_since(t) >= self.window)
        {
            q.pop_front();
        }
        if let Some(limit) = limit {
            if q.len() >= limit as usize {
                let oldest = *q.front().expect("a full window is not empty");
                return Err(self.window.saturating_sub(now.duration_since(oldest)));
            }
        }
        q.push_back(now);
        Ok(())
    }

    /// Give back the last message counted for `uid` (it was not sent).
    pub fn refund(&mut self, uid: u32) {
        if let Some(q) = self.sent.get_mut(&uid) {
            q.pop_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_slides() {
        let mut r = RateLimiter::new(Duration::from_secs(10));
        let t0 = Instant::now();
        for i in 0..3 {
            r.take(1, Some(3), t0 + Duration::from_secs(i)).unwrap();
        }
        let wait = r.take(1, Some(3), t0 + Duration::from_secs(4)).unwrap_err();
        assert_eq!(wait, Duration::from_secs(6));
        r.take(2, Some(3), t0).unwrap(); // another tenant has its own window
        r.take(1, Some(3), t0 + Duration::from_secs(10)).unwrap();
        r.refund(1);
        r.take(1, Some(3), t0 + Duration::from_secs(10)).unwrap();
        assert!(r.take(1, Some(3), t0 + Duration::from_secs(10)).is_err());
        r.take(1, None, t0 + Duration::from_secs(10)).unwrap();
    }
}
