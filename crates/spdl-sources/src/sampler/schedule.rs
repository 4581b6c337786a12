//! One rank's share of an epoch: which global positions it yields, in which order.
//!
//! The epoch's *base sequence* is the ascending list of global positions still to deliver: all of
//! `0..len` for a fresh epoch, or what earlier ranks left when the job was resharded. Slot `j` of
//! the base sequence is dealt to rank `j % world_size` as its item `j / world_size` (strided, as
//! torch's `DistributedSampler` deals `indices[rank::world_size]`). The remainder policy sets
//! the number of slots: `Drop` rounds the base length down to a multiple of the world size, `Pad`
//! rounds it up, the extra slots repeating the base sequence from its start.

use std::sync::Arc;

use super::Remainder;
use crate::dist::DistInfo;

/// What an item of the schedule designates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    /// The item's global position: a real one (`< len`), or `len + k` for the `k`-th padding slot.
    pub(crate) position: u64,
    /// The real global position whose sample the item uses (differs from `position` for padding).
    pub(crate) source: u64,
    /// Whether the item is padding.
    pub(crate) padded: bool,
}

/// A rank's share of one epoch.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    len: u64,
    /// The base sequence; `None` stands for all of `0..len`.
    base: Option<Arc<[u64]>>,
    world_size: u64,
    rank: u64,
    /// Number of slots: the base length rounded by the remainder policy.
    slots: u64,
}

impl Schedule {
    /// The share of `dist` in the base sequence `base` (`None`: `0..len`).
    pub(crate) fn new(
        len: u64,
        base: Option<Arc<[u64]>>,
        dist: DistInfo,
        remainder: Remainder,
    ) -> Self {
        let base_len = base.as_ref().map_or(len, |b| b.len() as u64);
        let world_size = dist.world_size();
        let slots = match remainder {
            Remainder::Drop => base_len / world_size * world_size,
            Remainder::Pad => base_len.div_ceil(world_size) * world_size,
        };
        Self {
            len,
            base,
            world_size,
            rank: dist.rank(),
            slots,
        }
    }

    /// The number of items this rank yields in the epoch (delivered ones included).
    pub(crate) fn num_items(&self) -> u64 {
        self.slots / self.world_size
    }

    fn base_len(&self) -> u64 {
        self.base.as_ref().map_or(self.len, |b| b.len() as u64)
    }

    fn base_at(&self, j: u64) -> u64 {
        match &self.base {
            None => j,
            Some(base) => base[j as usize],
        }
    }

    /// Item `k` (`k < num_items()`).
    pub(crate) fn item(&self, k: u64) -> Slot {
        let j = self.rank + k * self.world_size;
        let base_len = self.base_len();
        if j < base_len {
            let position = self.base_at(j);
            Slot {
                position,
                source: position,
                padded: false,
            }
        } else {
            Slot {
                position: self.len + (j - base_len),
                source: self.base_at((j - base_len) % base_len),
                padded: true,
            }
        }
    }

    /// The item number of global `position` in this rank's share, if it is in it.
    pub(crate) fn item_of(&self, position: u64) -> Option<u64> {
        let base_len = self.base_len();
        let j = if position < self.len {
            match &self.base {
                None => position,
                Some(base) => base.binary_search(&position).ok()? as u64,
            }
        } else {
            base_len.checked_add(position - self.len)?
        };
        (j < self.slots && j % self.world_size == self.rank).then(|| j / self.world_size)
    }
}
