//! Brief waits before sleeping.
//!
//! Putting a thread to sleep and waking it again costs a futex call on each side and a context
//! switch, several microseconds, and more when the wake-up lands on an idle virtual CPU. With
//! cheap ops that was most of the engine's cost per item. So a thread about to sleep (the
//! scheduler with no task to run, a lane with no job, the consumer on an empty queue) first
//! yields its core for up to [`SPIN`], looking after each yield whether work has come. The
//! wait is bounded and offers the core to other runnable threads at each look (`sched_yield`:
//! the kernel decides), so a pipeline that is really idle, or whose ops take milliseconds,
//! spends at most one `SPIN` of CPU per sleep. Work that comes just over `SPIN` apart would
//! have each of these threads look in vain every time: up to about one core's worth of CPU
//! per looking thread, not more throughput.

use std::time::{Duration, Instant};

/// How long a thread looks for work before it sleeps.
pub(crate) const SPIN: Duration = Duration::from_micros(20);

/// Yields the core until `ready()` holds or [`SPIN`] has passed; returns `ready()`'s last
/// answer.
pub(crate) fn spin_until(mut ready: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if ready() {
            return true;
        }
        if start.elapsed() >= SPIN {
            return false;
        }
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_looking_when_ready_or_after_the_spin() {
        let mut calls = 0;
        assert!(spin_until(|| {
            calls += 1;
            calls == 3
        }));
        assert_eq!(calls, 3);
        // Never ready: it gives up (after SPIN) rather than waiting on.
        assert!(!spin_until(|| false));
    }
}
