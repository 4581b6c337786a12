//! The bounded in-memory shuffle buffer (WebDataset's `shuffle(n)`): samples wait in a buffer
//! of at most `capacity`; each draw takes a seeded random one. Draw `k` of an epoch depends only
//! on the key (seed, epoch, rank), `k` and the buffer's contents, so a buffer restored with the
//! same contents in the same order and the same draw count goes on exactly as the original.

/// A buffer of at most `capacity` items and the number of draws made from it.
#[derive(Debug)]
pub(super) struct ShuffleBuffer<T> {
    items: Vec<T>,
    capacity: usize,
    key: u64,
    draws: u64,
}

impl<T> ShuffleBuffer<T> {
    /// An empty buffer for the epoch keyed by `key`, `draws` already made (a resume).
    pub(super) fn new(capacity: usize, key: u64, draws: u64) -> Self {
        ShuffleBuffer {
            items: Vec::with_capacity(capacity.min(1 << 16)),
            capacity,
            key,
            draws,
        }
    }

    /// Whether another item fits before a draw.
    pub(super) fn wants_more(&self) -> bool {
        self.items.len() < self.capacity
    }

    pub(super) fn push(&mut self, item: T) {
        self.items.push(item);
    }

    /// A random item (seeded), `None` when empty.
    pub(super) fn draw(&mut self) -> Option<T> {
        if self.items.is_empty() {
            return None;
        }
        let r = mix(self.key ^ self.draws.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        self.draws += 1;
        Some(
            self.items
                .swap_remove((r % self.items.len() as u64) as usize),
        )
    }

    /// The items waiting, in buffer order.
    pub(super) fn items(&self) -> &[T] {
        &self.items
    }

    /// Draws made this epoch.
    pub(super) fn draws(&self) -> u64 {
        self.draws
    }
}

/// SplitMix64's finalizer: a well-spread 64-bit hash.
pub(super) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_every_item_once_and_depend_on_the_key() {
        let order = |key| {
            let mut b = ShuffleBuffer::new(4, key, 0);
            let mut out = Vec::new();
            for i in 0..10 {
                if !b.wants_more() {
                    out.push(b.draw().unwrap());
                }
                b.push(i);
            }
            while let Some(i) = b.draw() {
                out.push(i);
            }
            out
        };
        let a = order(1);
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, (0..10).collect::<Vec<_>>());
        assert_eq!(a, order(1));
        assert_ne!(a, order(2));
    }
}
