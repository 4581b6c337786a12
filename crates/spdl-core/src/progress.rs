//! Which positions of an epoch are done, in a form whose size does not grow with the epoch:
//! a watermark ("every position below N is done") plus the few done positions above it
//! (items delivered out of order, at most about the number of items in flight).

use std::collections::BTreeSet;

/// Positions of an epoch (0-based, in source order) that are done: delivered to the consumer,
/// or filtered, failed or dropped on the way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    below: u64,
    above: BTreeSet<u64>,
}

impl Progress {
    /// Nothing done yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a progress from its parts (see [`Progress::watermark`], [`Progress::done_above`]).
    pub fn from_parts(watermark: u64, done_above: impl IntoIterator<Item = u64>) -> Self {
        let mut p = Progress {
            below: watermark,
            above: BTreeSet::new(),
        };
        for x in done_above {
            p.mark(x);
        }
        p
    }

    /// Marks `position` done.
    pub fn mark(&mut self, position: u64) {
        if position < self.below {
            return;
        }
        if position == self.below {
            self.below += 1;
            while self.above.remove(&self.below) {
                self.below += 1;
            }
        } else {
            self.above.insert(position);
        }
    }

    /// Whether `position` is done.
    pub fn contains(&self, position: u64) -> bool {
        position < self.below || self.above.contains(&position)
    }

    /// Every position below this one is done.
    pub fn watermark(&self) -> u64 {
        self.below
    }

    /// Done positions above the watermark, ascending.
    pub fn done_above(&self) -> Vec<u64> {
        self.above.iter().copied().collect()
    }

    /// How many positions are done.
    pub fn count(&self) -> u64 {
        self.below + self.above.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watermark_advances_over_out_of_order_marks() {
        let mut p = Progress::new();
        for x in [2, 0, 3, 5] {
            p.mark(x);
        }
        assert_eq!(p.watermark(), 1);
        assert_eq!(p.done_above(), vec![2, 3, 5]);
        p.mark(1);
        assert_eq!(p.watermark(), 4);
        assert_eq!(p.done_above(), vec![5]);
        assert!(p.contains(5) && !p.contains(4));
        assert_eq!(p.count(), 5);
        assert_eq!(Progress::from_parts(4, [5]), p);
    }
}
