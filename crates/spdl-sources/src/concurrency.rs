//! Fetch concurrency that follows the latency: how many requests to keep in flight for a
//! listing of small remote objects.
//!
//! Each request of a remote object pays one round trip, so the rate a fetch stage reaches is
//! about `in flight / latency` until something else (the decode threads, the network, the
//! server) is the limit. The right number of requests in flight therefore depends on the
//! latency, which the loader does not know in advance. [`ConcurrencyController`] finds it: it
//! starts at [`AdaptiveConcurrency::start`] (64) requests, measures the completion rate over one
//! window of requests, and grows the limit by [`AdaptiveConcurrency::growth`] while the rate
//! rises by at least [`AdaptiveConcurrency::min_gain`]; once it stops rising
//! ([`AdaptiveConcurrency::patience`] windows in a row), it stays at the limit it reached (not
//! the one before: on a busy machine a real rise can read as none, and holding a few more
//! requests costs little). It never passes [`AdaptiveConcurrency::max`].
//!
//! The controller is plain arithmetic on samples (completions and the time they took), so it
//! can be tested without clocks; [`FetchLimiter`] (feature `fetch`) drives it from the requests
//! of an async fetch stage. A concurrency the user sets is a [`FetchLimiter::fixed`] limit and
//! is never changed.

use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};

/// Settings of the adaptive fetch concurrency ([`ConcurrencyController`]).
///
/// | setting | default | meaning |
/// |---|---|---|
/// | [`start`](Self::start) | 64 | requests in flight at first |
/// | [`max`](Self::max) | 1024 | the limit never grows past this |
/// | [`growth`](Self::growth) | 1.5 | each step multiplies the limit by this (rounded up) |
/// | [`min_gain`](Self::min_gain) | 0.05 | a rise of the rate under 5% counts as no rise |
/// | [`patience`](Self::patience) | 2 | windows without a rise before the limit settles |
/// | [`min_window`](Self::min_window) | 100 ms | a window lasts at least this long |
#[derive(Clone, Debug, PartialEq)]
pub struct AdaptiveConcurrency {
    /// Requests in flight at first (at least 1).
    pub start: usize,
    /// The most requests in flight the limit may reach (at least `start`).
    pub max: usize,
    /// Factor of each step up (more than 1; the new limit is rounded up and at least one more).
    pub growth: f64,
    /// The relative rise of the rate (completions per second) over the best so far that counts
    /// as a rise: 0.05 is 5%. Smaller rises are noise, and more requests in flight cost CPU.
    pub min_gain: f64,
    /// Windows in a row without a rise before the limit stays where it is.
    pub patience: u32,
    /// The shortest window [`FetchLimiter`] times (besides at least
    /// [`ConcurrencyController::window`] completions): shorter ones would judge noise, as on a
    /// busy machine a few tens of milliseconds can go to other processes.
    pub min_window: Duration,
}

impl Default for AdaptiveConcurrency {
    fn default() -> Self {
        Self {
            start: 64,
            max: 1024,
            growth: 1.5,
            min_gain: 0.05,
            patience: 2,
            min_window: Duration::from_millis(100),
        }
    }
}

impl AdaptiveConcurrency {
    /// Checks the settings.
    ///
    /// # Errors
    /// [`ErrorKind::Config`] naming the setting: `start` 0, `max` below `start`, `growth` not
    /// above 1, `min_gain` negative or not finite, `patience` 0.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::new(ErrorKind::Config, what));
        if self.start == 0 {
            return bad("adaptive concurrency: start must be at least 1".into());
        }
        if self.max < self.start {
            return bad(format!(
                "adaptive concurrency: max ({}) is below start ({})",
                self.max, self.start
            ));
        }
        if !(self.growth.is_finite() && self.growth > 1.0) {
            return bad(format!(
                "adaptive concurrency: growth must be above 1, got {}",
                self.growth
            ));
        }
        if !(self.min_gain.is_finite() && self.min_gain >= 0.0) {
            return bad(format!(
                "adaptive concurrency: min_gain must be 0 or more, got {}",
                self.min_gain
            ));
        }
        if self.patience == 0 {
            return bad("adaptive concurrency: patience must be at least 1".into());
        }
        Ok(())
    }
}

/// The hill climb of [`AdaptiveConcurrency`]: feed it one sample per window
/// ([`ConcurrencyController::observe`]) and keep [`ConcurrencyController::limit`] requests in
/// flight.
///
/// A window is at least [`ConcurrencyController::window`] completions (the current limit:
/// about one round trip of every request in flight) and, as [`FetchLimiter`] times it, at
/// least [`AdaptiveConcurrency::min_window`] (warm-up windows only the completions). The first window, and the first after each step
/// up, is not judged: it still holds the requests sent before the step.
///
/// ```
/// use std::time::Duration;
/// use spdl_sources::concurrency::{AdaptiveConcurrency, ConcurrencyController};
///
/// let mut c = ConcurrencyController::new(AdaptiveConcurrency::default())?;
/// assert_eq!(c.limit(), 64);
/// let second = Duration::from_secs(1);
/// c.observe(64, second); // the first window is warm-up
/// assert_eq!(c.observe(1000, second), 96); // a first rate: try more
/// c.observe(1500, second); // warm-up after the step
/// assert_eq!(c.observe(1500, second), 144); // +50%: try more
/// c.observe(1500, second);
/// c.observe(1510, second); // +0.7%: no rise
/// assert_eq!(c.observe(1490, second), 144); // twice: it stays there, settled
/// assert!(c.is_settled());
/// # Ok::<(), spdl_sources::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ConcurrencyController {
    cfg: AdaptiveConcurrency,
    limit: usize,
    /// The best rate judged so far (completions per second); 0 before the first.
    best_rate: f64,
    /// Judged windows in a row without a rise.
    misses: u32,
    /// The next window is warm-up, not judged.
    warming: bool,
    settled: bool,
}

impl ConcurrencyController {
    /// A controller at `cfg.start`.
    ///
    /// # Errors
    /// As [`AdaptiveConcurrency::validate`].
    pub fn new(cfg: AdaptiveConcurrency) -> Result<Self> {
        cfg.validate()?;
        Ok(Self {
            limit: cfg.start,
            best_rate: 0.0,
            misses: 0,
            warming: true,
            settled: false,
            cfg,
        })
    }

    /// The settings.
    pub fn config(&self) -> &AdaptiveConcurrency {
        &self.cfg
    }

    /// Requests to keep in flight now.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The fewest completions per window: the current limit.
    pub fn window(&self) -> u64 {
        self.limit as u64
    }

    /// Whether the limit has stopped moving (the rate stopped rising, or `max` was reached).
    pub fn is_settled(&self) -> bool {
        self.settled
    }

    /// Whether the next window is warm-up (the first, and the first after each step up): it is
    /// not judged, so it need not last [`AdaptiveConcurrency::min_window`].
    pub fn is_warming(&self) -> bool {
        self.warming
    }

    /// The best rate judged so far, in completions per second (0 before the first).
    pub fn best_rate(&self) -> f64 {
        self.best_rate
    }

    /// One window: `completed` requests finished in `elapsed`. Returns the limit to keep from
    /// now on. A window with no completions or no time is ignored.
    pub fn observe(&mut self, completed: u64, elapsed: Duration) -> usize {
        if self.settled || completed == 0 || elapsed.is_zero() {
            return self.limit;
        }
        if self.warming {
            self.warming = false;
            return self.limit;
        }
        let rate = completed as f64 / elapsed.as_secs_f64();
        if rate > self.best_rate * (1.0 + self.cfg.min_gain) {
            self.best_rate = rate;
            self.misses = 0;
            if self.limit >= self.cfg.max {
                self.settled = true;
                return self.limit;
            }
            let next = ((self.limit as f64) * self.cfg.growth).ceil() as usize;
            self.limit = next.max(self.limit + 1).min(self.cfg.max);
            self.warming = true;
            return self.limit;
        }
        self.misses += 1;
        if self.misses >= self.cfg.patience {
            // More in flight stopped paying: grow no further.
            self.settled = true;
        }
        self.limit
    }
}

#[cfg(feature = "fetch")]
pub use limiter::{FetchLimiter, FetchPermit};

#[cfg(feature = "fetch")]
mod limiter {
    use std::sync::{Arc, Mutex};

    use tokio::sync::{OwnedSemaphorePermit, Semaphore};
    use tokio::time::Instant;

    use super::{AdaptiveConcurrency, ConcurrencyController};
    use crate::error::Result;

    /// Admission of the requests of a fetch stage: a fixed number in flight, or as many as a
    /// [`ConcurrencyController`] finds (see the [module](super) docs).
    ///
    /// Give the stage itself [`FetchLimiter::max`] concurrency and make every request hold a
    /// [`FetchPermit`] from [`FetchLimiter::acquire`] until its bytes are in, or, for the
    /// adaptive limit to climb on the rate of the whole loader and bound the fetched bytes
    /// waiting downstream, until the next stage takes them (as `spdl load` does); each permit
    /// given back counts one completion (a failure too: it also freed its slot). Clones share
    /// the limit. Completions are timed with Tokio's clock.
    ///
    /// ```
    /// use spdl_sources::concurrency::FetchLimiter;
    ///
    /// let limiter = FetchLimiter::fixed(16);
    /// assert_eq!((limiter.limit(), limiter.max(), limiter.is_adaptive()), (16, 16, false));
    /// ```
    #[derive(Clone, Debug)]
    pub struct FetchLimiter {
        inner: Arc<Inner>,
    }

    #[derive(Debug)]
    struct Inner {
        sem: Arc<Semaphore>,
        max: usize,
        state: Mutex<State>,
    }

    #[derive(Debug)]
    struct State {
        controller: Option<ConcurrencyController>,
        limit: usize,
        /// Permits to drop instead of giving back, after a step down.
        debt: usize,
        window_start: Option<Instant>,
        done: u64,
        /// The largest limit used so far.
        peak: usize,
    }

    impl FetchLimiter {
        /// Exactly `n` requests in flight (at least 1), never changed: a concurrency the user
        /// set.
        pub fn fixed(n: usize) -> Self {
            let n = n.max(1);
            Self::with(None, n, n)
        }

        /// Requests in flight as `cfg` finds them, from `cfg.start` up to `cfg.max`.
        ///
        /// # Errors
        /// As [`AdaptiveConcurrency::validate`].
        pub fn adaptive(cfg: AdaptiveConcurrency) -> Result<Self> {
            let max = cfg.max;
            let controller = ConcurrencyController::new(cfg)?;
            let limit = controller.limit();
            Ok(Self::with(Some(controller), limit, max))
        }

        fn with(controller: Option<ConcurrencyController>, limit: usize, max: usize) -> Self {
            Self {
                inner: Arc::new(Inner {
                    sem: Arc::new(Semaphore::new(limit)),
                    max,
                    state: Mutex::new(State {
                        controller,
                        limit,
                        debt: 0,
                        window_start: None,
                        done: 0,
                        peak: limit,
                    }),
                }),
            }
        }

        /// Whether the limit adapts (else it is fixed).
        pub fn is_adaptive(&self) -> bool {
            self.state().controller.is_some()
        }

        /// Requests allowed in flight now.
        pub fn limit(&self) -> usize {
            self.state().limit
        }

        /// The largest limit used so far.
        pub fn peak(&self) -> usize {
            self.state().peak
        }

        /// Whether the limit has stopped moving (always, for a fixed one).
        pub fn is_settled(&self) -> bool {
            self.state()
                .controller
                .as_ref()
                .is_none_or(ConcurrencyController::is_settled)
        }

        /// The most requests that may ever be in flight: the concurrency to give the stage.
        pub fn max(&self) -> usize {
            self.inner.max
        }

        /// Waits for a slot. Hold the permit until the request is done.
        pub async fn acquire(&self) -> FetchPermit {
            {
                let mut st = self.state();
                if st.window_start.is_none() {
                    st.window_start = Some(Instant::now());
                }
            }
            let permit = self
                .inner
                .sem
                .clone()
                .acquire_owned()
                .await
                // Never closed: the semaphore lives as long as `inner`.
                .ok();
            FetchPermit {
                inner: self.inner.clone(),
                permit,
            }
        }

        fn state(&self) -> std::sync::MutexGuard<'_, State> {
            self.inner.state()
        }

        /// Free slots now (tests: all given back once idle).
        #[cfg(test)]
        pub(crate) fn available(&self) -> usize {
            self.inner.sem.available_permits()
        }
    }

    impl Inner {
        fn state(&self) -> std::sync::MutexGuard<'_, State> {
            self.state.lock().unwrap_or_else(|e| e.into_inner())
        }

        /// One request done: its slot back (or dropped, after a step down), one completion
        /// counted, and at the end of a window the controller's verdict applied.
        fn release(&self, permit: Option<OwnedSemaphorePermit>) {
            let mut st = self.state();
            if let Some(p) = permit {
                if st.debt > 0 {
                    st.debt -= 1;
                    p.forget();
                } else {
                    drop(p);
                }
            }
            // A warm-up window only has to let one round of requests through.
            let Some((window, min_time)) = st.controller.as_ref().map(|c| {
                let min_time = if c.is_warming() {
                    std::time::Duration::ZERO
                } else {
                    c.config().min_window
                };
                (c.window(), min_time)
            }) else {
                return;
            };
            st.done += 1;
            if st.done < window {
                return;
            }
            let now = Instant::now();
            let elapsed = st.window_start.map_or_else(Default::default, |s| now - s);
            if elapsed < min_time {
                return;
            }
            let done = std::mem::take(&mut st.done);
            st.window_start = Some(now);
            let old = st.limit;
            let Some(c) = st.controller.as_mut() else {
                return;
            };
            let new = c.observe(done, elapsed);
            st.limit = new;
            st.peak = st.peak.max(new);
            if new > old {
                let mut add = new - old;
                // Owed drops cancel against new slots first.
                let paid = add.min(st.debt);
                st.debt -= paid;
                add -= paid;
                self.sem.add_permits(add);
            } else if new < old {
                let take = old - new;
                let gone = self.sem.forget_permits(take);
                st.debt += take - gone;
            }
        }
    }

    /// A slot of a [`FetchLimiter`]; dropping it ends the request (one completion).
    #[derive(Debug)]
    pub struct FetchPermit {
        inner: Arc<Inner>,
        permit: Option<OwnedSemaphorePermit>,
    }

    impl Drop for FetchPermit {
        fn drop(&mut self) {
            self.inner.release(self.permit.take());
        }
    }
}

#[cfg(all(test, feature = "fetch"))]
mod limiter_tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use futures_util::StreamExt as _;
    use tokio::sync::Semaphore;

    use super::*;

    /// `n` requests of 20 ms (Tokio's paused clock: no real time passes) through `limiter`,
    /// against a server that serves at most `server` at once. Returns the most in flight seen.
    async fn run(limiter: &FetchLimiter, n: usize, server: usize) -> usize {
        let server = Arc::new(Semaphore::new(server));
        let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        futures_util::stream::iter(0..n)
            .map(|_| {
                let (server, now, most) = (server.clone(), now.clone(), most.clone());
                async move {
                    let _slot = limiter.acquire().await;
                    let here = now.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(here, Ordering::SeqCst);
                    let _served = server.acquire().await.unwrap();
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    now.fetch_sub(1, Ordering::SeqCst);
                }
            })
            .buffer_unordered(limiter.max())
            .count()
            .await;
        most.load(Ordering::SeqCst)
    }

    #[tokio::test(start_paused = true)]
    async fn fixed_never_moves() {
        let limiter = FetchLimiter::fixed(16);
        let most = run(&limiter, 2000, usize::MAX >> 4).await;
        assert_eq!(most, 16);
        assert_eq!(
            (limiter.limit(), limiter.peak(), limiter.available()),
            (16, 16, 16)
        );
        assert!(limiter.is_settled() && !limiter.is_adaptive());
    }

    #[tokio::test(start_paused = true)]
    async fn grows_while_latency_is_the_limit() {
        let limiter = FetchLimiter::adaptive(AdaptiveConcurrency::default()).unwrap();
        let most = run(&limiter, 40_000, usize::MAX >> 4).await;
        assert_eq!(limiter.limit(), 1024);
        assert!(limiter.is_settled());
        assert_eq!(most, 1024);
        assert_eq!(limiter.available(), 1024);
    }

    #[tokio::test(start_paused = true)]
    async fn stops_at_what_the_server_serves() {
        // 100 at once: the rate stops rising past 96 in flight.
        let limiter = FetchLimiter::adaptive(AdaptiveConcurrency::default()).unwrap();
        let most = run(&limiter, 20_000, 100).await;
        let (limit, peak) = (limiter.limit(), limiter.peak());
        assert!(limiter.is_settled(), "limit {limit} peak {peak}");
        assert!((96..=216).contains(&limit), "limit {limit} peak {peak}");
        assert!(peak <= 216, "limit {limit} peak {peak}");
        assert!(most <= peak);
        // A step down drops slots as their requests end: all that is left is the limit.
        assert_eq!(limiter.available(), limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn ctl(cfg: AdaptiveConcurrency) -> ConcurrencyController {
        ConcurrencyController::new(cfg).unwrap()
    }

    /// Feeds `rate(limit)` completions per second until settled; returns the limits seen.
    fn climb(c: &mut ConcurrencyController, rate: impl Fn(usize) -> f64) -> Vec<usize> {
        let mut seen = vec![c.limit()];
        for _ in 0..200 {
            if c.is_settled() {
                break;
            }
            let l = c.observe((rate(c.limit()) * 1000.0) as u64, S * 1000);
            if seen.last() != Some(&l) {
                seen.push(l);
            }
        }
        assert!(c.is_settled(), "never settled: {seen:?}");
        seen
    }

    #[test]
    fn defaults() {
        let c = ctl(AdaptiveConcurrency::default());
        assert_eq!((c.limit(), c.window(), c.is_settled()), (64, 64, false));
        assert_eq!(c.config().max, 1024);
    }

    #[test]
    fn latency_bound_rate_grows_to_the_cap() {
        // 20 ms per request and nothing else in the way: rate = limit / 0.02 s.
        let mut c = ctl(AdaptiveConcurrency::default());
        let seen = climb(&mut c, |l| l as f64 / 0.02);
        assert_eq!(
            seen,
            vec![64, 96, 144, 216, 324, 486, 729, 1024],
            "grows by 1.5x up to max"
        );
        assert_eq!(c.limit(), 1024);
    }

    #[test]
    fn stops_where_the_rate_stops_rising() {
        // The decode threads take 2,000 images/s: 40 in flight at 20 ms would be enough.
        let mut c = ctl(AdaptiveConcurrency::default());
        let seen = climb(&mut c, |l| (l as f64 / 0.02).min(2000.0));
        assert_eq!(seen, vec![64, 96], "one step up, no rise: stays");
        assert_eq!(c.best_rate(), 2000.0);

        // A server that serves 5,000 requests/s: 100 in flight at 20 ms.
        let mut c = ctl(AdaptiveConcurrency::default());
        let seen = climb(&mut c, |l| (l as f64 / 0.02).min(5000.0));
        assert_eq!(seen, vec![64, 96, 144]);
        assert_eq!(c.limit(), 144, "where the rise stopped");
    }

    #[test]
    fn small_rises_are_noise() {
        let mut c = ctl(AdaptiveConcurrency::default());
        // 4% more for 50% more requests: not worth it.
        let seen = climb(&mut c, |l| if l > 64 { 1040.0 } else { 1000.0 });
        assert_eq!(seen, vec![64, 96]);
        let mut c = ctl(AdaptiveConcurrency {
            min_gain: 0.0,
            ..AdaptiveConcurrency::default()
        });
        let seen = climb(&mut c, |l| if l > 64 { 1040.0 } else { 1000.0 });
        assert_eq!(seen, vec![64, 96, 144]);
    }

    #[test]
    fn warm_up_windows_are_not_judged() {
        let mut c = ctl(AdaptiveConcurrency::default());
        // The first window is warm-up: even a high rate there moves nothing.
        assert_eq!(c.observe(1_000_000, S), 64);
        assert_eq!(c.best_rate(), 0.0);
        assert_eq!(c.observe(1000, S), 96);
        // After the step: warm-up again (a slow window here is the ramp, not a verdict).
        assert_eq!(c.observe(1, S), 96);
        assert!(!c.is_settled());
        assert_eq!(c.observe(2000, S), 144);
    }

    #[test]
    fn patience_counts_windows_in_a_row() {
        let mut c = ctl(AdaptiveConcurrency {
            patience: 3,
            ..AdaptiveConcurrency::default()
        });
        c.observe(1, S);
        assert_eq!(c.observe(1000, S), 96);
        c.observe(1, S);
        assert_eq!(c.observe(1000, S), 96); // miss 1
        assert_eq!(c.observe(1000, S), 96); // miss 2
        assert_eq!(c.observe(2000, S), 144, "a rise resets the count");
        c.observe(1, S);
        c.observe(2000, S);
        c.observe(2000, S);
        assert!(!c.is_settled());
        assert_eq!(c.observe(2000, S), 144);
        assert!(c.is_settled());
        assert_eq!(c.observe(1_000_000, S), 144, "settled stays");
    }

    #[test]
    fn empty_windows_are_ignored() {
        let mut c = ctl(AdaptiveConcurrency::default());
        c.observe(1, S);
        assert_eq!(c.observe(0, S), 64);
        assert_eq!(c.observe(10, Duration::ZERO), 64);
        assert_eq!(c.best_rate(), 0.0);
        assert_eq!(c.observe(10, S), 96);
    }

    #[test]
    fn small_limits_grow_by_at_least_one() {
        let mut c = ctl(AdaptiveConcurrency {
            start: 1,
            max: 4,
            growth: 1.01,
            ..AdaptiveConcurrency::default()
        });
        let seen = climb(&mut c, |l| l as f64);
        assert_eq!(seen, vec![1, 2, 3, 4]);
    }

    #[test]
    fn bad_settings_are_named() {
        // The defaults with one setting changed.
        let with = |change: fn(&mut AdaptiveConcurrency)| {
            let mut c = AdaptiveConcurrency::default();
            change(&mut c);
            c
        };
        for (cfg, word) in [
            (with(|c| c.start = 0), "start"),
            (with(|c| c.max = 8), "max (8) is below start (64)"),
            (with(|c| c.growth = 1.0), "growth"),
            (with(|c| c.min_gain = f64::NAN), "min_gain"),
            (with(|c| c.patience = 0), "patience"),
        ] {
            let err = ConcurrencyController::new(cfg).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Config);
            assert!(err.to_string().contains(word), "{err}");
        }
    }
}
