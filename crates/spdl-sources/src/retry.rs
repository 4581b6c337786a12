//! When to try a request again, and how long to wait first.
//!
//! A failure is retried only when it is temporary ([`Error::is_temporary`]: 5xx, 408, 429,
//! throttling, timeouts, stalled or short bodies, reset connections). The wait before retry `n`
//! (1-based) is drawn from `[d/2, d]` with `d = min(max_backoff, initial_backoff * 2^(n-1))`
//! ("equal jitter": spread to avoid thundering herds, never shorter than half the backoff); a
//! server's `Retry-After` replaces it when longer, up to [`RetryPolicy::max_retry_after`].

use std::time::Duration;

use smart_default::SmartDefault;

use crate::error::Error;

/// How failed requests are retried. The defaults are in [`RetryPolicy::default`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, SmartDefault)]
pub struct RetryPolicy {
    /// Retries after the first attempt (so at most `max_retries + 1` attempts). Default 3.
    #[default(3)]
    pub max_retries: u32,
    /// The backoff before the first retry, before jitter. Default 200 ms.
    #[default(Duration::from_millis(200))]
    pub initial_backoff: Duration,
    /// The largest backoff, before jitter. Default 10 s.
    #[default(Duration::from_secs(10))]
    pub max_backoff: Duration,
    /// The longest `Retry-After` honoured: a server asking for longer makes the request fail
    /// at once with its error (the wait would outlast any sensible training step). Default 60 s.
    #[default(Duration::from_secs(60))]
    pub max_retry_after: Duration,
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// The backoff before retry `retry` (1-based), before jitter: `initial * 2^(retry-1)`,
    /// capped at `max_backoff`.
    pub fn backoff(&self, retry: u32) -> Duration {
        let shift = retry.saturating_sub(1).min(31);
        self.initial_backoff
            .saturating_mul(1u32 << shift)
            .min(self.max_backoff)
    }

    /// The backoff before retry `retry` with jitter: uniform in `[b/2, b]` where `b` is
    /// [`Self::backoff`]; `unit` is a random number in `[0, 1)`.
    pub fn jittered(&self, retry: u32, unit: f64) -> Duration {
        let b = self.backoff(retry);
        b / 2 + b.mul_f64(unit.clamp(0.0, 1.0) / 2.0)
    }

    /// What to do after attempt `attempt` (1-based) failed with `err`: `Some(wait)` to retry
    /// after `wait`, `None` to give up (a permanent error, retries used up, or a `Retry-After`
    /// longer than [`Self::max_retry_after`]). `unit` is a random number in `[0, 1)`.
    pub fn decide(&self, attempt: u32, err: &Error, unit: f64) -> Option<Duration> {
        if !err.is_temporary() || attempt > self.max_retries {
            return None;
        }
        let wait = self.jittered(attempt, unit);
        match err.retry_after() {
            Some(after) if after > self.max_retry_after => None,
            Some(after) => Some(wait.max(after)),
            None => Some(wait),
        }
    }
}

/// Parses a `Retry-After` header value: delay-seconds, or an HTTP date (IMF-fixdate) taken
/// relative to `now` (seconds since the Unix epoch). A date in the past gives zero.
pub fn parse_retry_after(value: &str, now_unix: u64) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = parse_http_date(value)?;
    Some(Duration::from_secs(at.saturating_sub(now_unix)))
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` -> seconds since the Unix epoch.
fn parse_http_date(s: &str) -> Option<u64> {
    let (_, rest) = s.split_once(", ")?;
    let mut it = rest.split(' ');
    let day: u64 = it.next()?.parse().ok()?;
    let month = match it.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = it.next()?.parse().ok()?;
    let mut hms = it.next()?.split(':');
    let h: u64 = hms.next()?.parse().ok()?;
    let m: u64 = hms.next()?.parse().ok()?;
    let sec: u64 = hms.next()?.parse().ok()?;
    if it.next()? != "GMT" || day == 0 || day > 31 || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    // Days from civil (Howard Hinnant's algorithm).
    let (y, mo) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * mo as i64 + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days)
        .ok()
        .map(|d| d * 86_400 + h * 3600 + m * 60 + sec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn http(status: u16) -> Error {
        Error::new(ErrorKind::Http, "x").with_status(status)
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let p = RetryPolicy {
            max_retries: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            ..RetryPolicy::default()
        };
        let got: Vec<_> = (1..=6).map(|n| p.backoff(n).as_millis()).collect();
        assert_eq!(got, vec![100, 200, 400, 800, 1000, 1000]);
        assert_eq!(p.backoff(200), Duration::from_secs(1));
    }

    #[test]
    fn jitter_stays_within_half_and_full() {
        let p = RetryPolicy::default();
        for unit in [0.0, 0.25, 0.5, 0.999] {
            let d = p.jittered(2, unit);
            assert!(d >= p.backoff(2) / 2 && d <= p.backoff(2), "{d:?}");
        }
        assert_eq!(p.jittered(1, 0.0), Duration::from_millis(100));
    }

    #[test]
    fn temporary_errors_are_retried_permanent_ones_not() {
        let p = RetryPolicy::default();
        for s in [500, 502, 503, 504, 408, 429] {
            assert!(p.decide(1, &http(s), 0.5).is_some(), "{s}");
        }
        for s in [400, 401, 403, 404, 410] {
            assert!(p.decide(1, &http(s), 0.5).is_none(), "{s}");
        }
        for kind in [
            ErrorKind::Timeout,
            ErrorKind::Stalled,
            ErrorKind::ShortBody,
            ErrorKind::Network,
        ] {
            assert!(p.decide(1, &Error::new(kind, "x"), 0.5).is_some());
        }
        for kind in [
            ErrorKind::NotAnImage,
            ErrorKind::NotFound,
            ErrorKind::InvalidUri,
        ] {
            assert!(p.decide(1, &Error::new(kind, "x"), 0.5).is_none());
        }
        // The budget: 3 retries after the first attempt.
        assert!(p.decide(3, &http(503), 0.5).is_some());
        assert!(p.decide(4, &http(503), 0.5).is_none());
        assert!(RetryPolicy::none().decide(1, &http(503), 0.5).is_none());
    }

    #[test]
    fn retry_after_is_honoured_and_capped() {
        let p = RetryPolicy::default();
        let e = http(503).with_retry_after(Some(Duration::from_secs(5)));
        assert_eq!(p.decide(1, &e, 0.9), Some(Duration::from_secs(5)));
        // A shorter Retry-After does not shorten the backoff.
        let e = http(503).with_retry_after(Some(Duration::ZERO));
        assert_eq!(p.decide(1, &e, 0.0), Some(Duration::from_millis(100)));
        // Longer than max_retry_after: give up at once.
        let e = http(503).with_retry_after(Some(Duration::from_secs(3600)));
        assert_eq!(p.decide(1, &e, 0.5), None);
    }

    #[test]
    fn retry_after_header_forms() {
        assert_eq!(parse_retry_after(" 7 ", 0), Some(Duration::from_secs(7)));
        // 1994-11-06T08:49:37Z = 784111777.
        let date = "Sun, 06 Nov 1994 08:49:37 GMT";
        assert_eq!(parse_http_date(date), Some(784_111_777));
        assert_eq!(
            parse_retry_after(date, 784_111_770),
            Some(Duration::from_secs(7))
        );
        assert_eq!(parse_retry_after(date, 784_111_999), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", 0), None);
        assert_eq!(parse_retry_after("-1", 0), None);
    }
}
