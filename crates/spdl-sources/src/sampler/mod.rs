//! Which sample indices a rank reads in an epoch: sharded, deterministic, resumable, elastic.
//!
//! Mirrors torch's `DistributedSampler` (strided shards, `set_epoch`, `drop_last` as
//! [`Remainder::Drop`], padding by repetition as [`Remainder::Pad`]), with the resumable state of
//! torchdata's `StatefulDataLoader` and the elastic resumption of Mosaic Streaming.
//!
//! # The order of an epoch
//! The *global order* of epoch `e` is a permutation of `0..len`: global position `p` holds dataset
//! index `perm(seed, e)[p]` (or `p` without shuffling). It depends on the seed, the epoch and the
//! length only, never on the world size or the number of threads (a SplitMix64-driven Fisher–Yates
//! shuffle, fully specified in this crate so that it never changes under a dependency upgrade).
//!
//! # Sharding
//! Rank `r` of `W` takes global positions `r, r + W, r + 2W, …`: its *item* `k` is position
//! `r + k·W`. Every rank gets the same number of items, so no DDP rank waits forever for a
//! missing batch: with [`Remainder::Drop`] the last `len % W` positions are left out, with
//! [`Remainder::Pad`] the positions `len, len + 1, …` are added up to a multiple of `W`, each
//! repeating the sample of position `0, 1, …` and marked [`SampledIndex::padded`] so that
//! metrics can leave it out.
//!
//! # Recording what was delivered
//! A pipeline that completes out of order hands samples to the training loop in any order. The
//! loop calls [`Sampler::mark_delivered`] with each sample's [`SampledIndex::position`]; the
//! sampler keeps a *watermark* `delivered` (items `0..delivered` of this rank are all done) and
//! the few positions delivered above it (`delivered_ahead`). The watermark absorbs them as the gap
//! closes, so the set stays as small as the pipeline's reordering window.
//!
//! [`Sampler::state`] returns that as a [`SamplerState`], and [`Sampler::from_state`] in a fresh
//! process with the same world size yields exactly this rank's items not yet delivered (in-flight
//! samples that never reached the loop are yielded again).
//!
//! # Elastic resume
//! When the world size changes, [`merge_states`] takes the states of all old ranks and records a
//! [`Reshard`]: the old world size, every old rank's watermark, and the out-of-order positions.
//! The positions no old rank delivered, in ascending order, form the *base sequence* that
//! [`Sampler::resume`] deals to the new ranks with the same stride rule (slot `j` to rank
//! `j % W'`) and the same remainder policy. Every remaining position is then delivered exactly
//! once across the new ranks (with `Drop`, up to `W' - 1` of them are left out). A padding slot of
//! a resharded epoch gets position `len + i` for its `i`-th padding slot.
//! A job can reshard several times in one epoch: the [`Reshard`]s chain, each applied to the
//! sequence the previous ones left. This is the minimal representation: per old rank one number,
//! plus the out-of-order exceptions; `O(len)` work rebuilds the base sequence on resume, as it
//! rebuilds the permutation.
//!
//! # Example
//! Ten samples, unshuffled, three ranks, padded: rank 0 takes positions 0, 3, 6, 9; rank 1 takes
//! 1, 4, 7 and padding position 10 (a repeat of position 0); rank 2 takes 2, 5, 8 and padding 11.
//! Rank 0 delivered 0 and 3, rank 1 delivered 1 and then 7 (4 was still in flight), rank 2
//! delivered 2. Rank 1's state is
//! `{"version":1,"len":10,"shuffle":false,"seed":0,"epoch":0,"remainder":"pad","world_size":3,"rank":1,"delivered":1,"delivered_ahead":[7]}`.
//! Merged, positions 4, 5, 6, 8, 9 remain; two new ranks share them: rank 0 gets 4, 6, 9 and
//! rank 1 gets 5, 8 and a padding item (position 10, repeating position 4).
//!
//! ```
//! use spdl_sources::{merge_states, DistInfo, Remainder, Sampler, SamplerOptions};
//!
//! let options = SamplerOptions { shuffle: false, seed: 0, remainder: Remainder::Pad };
//! let mut ranks = (0..3)
//!     .map(|r| Sampler::new(10, DistInfo::new(r, 3)?, options))
//!     .collect::<Result<Vec<_>, _>>()?;
//! let positions = |s: &Sampler| s.iter().map(|i| i.position).collect::<Vec<_>>();
//! assert_eq!(positions(&ranks[1]), [1, 4, 7, 10]);
//!
//! for p in [0, 3] { ranks[0].mark_delivered(p)?; }
//! for p in [1, 7] { ranks[1].mark_delivered(p)?; }
//! ranks[2].mark_delivered(2)?;
//! let json = serde_json::to_string(&ranks[1].state())?;
//! assert!(json.ends_with(r#""delivered":1,"delivered_ahead":[7]}"#));
//!
//! // Same world size: rank 1 resumes its own share.
//! let state = serde_json::from_str(&json)?;
//! assert_eq!(positions(&Sampler::from_state(&state)?), [4, 10]);
//!
//! // Two ranks instead of three.
//! let states: Vec<_> = ranks.iter().map(Sampler::state).collect();
//! let progress = merge_states(&states)?;
//! let new0 = Sampler::resume(&progress, DistInfo::new(0, 2)?, Remainder::Pad)?;
//! let new1 = Sampler::resume(&progress, DistInfo::new(1, 2)?, Remainder::Pad)?;
//! assert_eq!(positions(&new0), [4, 6, 9]);
//! let last: Vec<_> = new1.iter().collect();
//! assert_eq!(last.iter().map(|i| i.position).collect::<Vec<_>>(), [5, 8, 10]);
//! assert!(last[2].padded && last[2].index == 4);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod permutation;
mod schedule;
mod state;

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use smart_default::SmartDefault;

use self::schedule::Schedule;
pub use self::state::{merge_states, EpochProgress, Reshard, SamplerState};
use crate::dist::DistInfo;
use crate::error::{Error, ErrorKind, Result};

/// How an epoch whose length does not divide by the world size is made even.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Remainder {
    /// Leave out the last `len % world_size` positions of the global order (torch's
    /// `drop_last=True`).
    Drop,
    /// Add the fewest padding items that make every rank's share equal, repeating samples from
    /// the start of the order and marked [`SampledIndex::padded`] (torch's `drop_last=False`,
    /// which repeats without marking). The default, as in torch.
    #[default]
    Pad,
}

/// How a [`Sampler`] orders an epoch. The default is torch `DistributedSampler`'s: shuffled with
/// seed 0, padded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, SmartDefault)]
pub struct SamplerOptions {
    /// Shuffle each epoch by `(seed, epoch)`; otherwise the global order is `0..len`.
    #[default(true)]
    pub shuffle: bool,
    /// The shuffle seed; every rank must use the same one.
    pub seed: u64,
    /// How the tail is made to divide evenly.
    #[default(Remainder::Pad)]
    pub remainder: Remainder,
}

/// One item a sampler yields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SampledIndex {
    /// The dataset index to read (for [`crate::SampleList::get`]).
    pub index: u64,
    /// The item's place in the epoch's global order: what [`Sampler::mark_delivered`] takes.
    /// Real items have positions `< len`; padding items `>= len`.
    pub position: u64,
    /// Whether the item repeats a sample only to even out the ranks; exclude it from metrics.
    pub padded: bool,
}

/// One rank's sampler: yields its share of each epoch and records what was delivered.
///
/// Use one per rank. Hand [`Sampler::iter`] to the source of the pipeline; keep the sampler with
/// the training loop, call [`Sampler::mark_delivered`] as samples arrive and store
/// [`Sampler::state`] in checkpoints. See the [module docs](crate::sampler) for the guarantees.
#[derive(Debug, Clone)]
pub struct Sampler {
    len: u64,
    options: SamplerOptions,
    dist: DistInfo,
    epoch: u64,
    reshards: Vec<Reshard>,
    schedule: Schedule,
    /// Items `0..delivered` are delivered.
    delivered: u64,
    /// Item numbers above `delivered` delivered out of order.
    ahead: BTreeSet<u64>,
}

impl Sampler {
    /// The largest dataset length (2^32): the permutation holds `u32` indices.
    pub const MAX_LEN: u64 = 1 << 32;

    /// A sampler over `len` samples for rank `dist`, at epoch 0.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] when `len` is above [`Self::MAX_LEN`].
    pub fn new(len: u64, dist: DistInfo, options: SamplerOptions) -> Result<Self> {
        if len > Self::MAX_LEN {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "dataset length {len} is above the maximum {}",
                    Self::MAX_LEN
                ),
            ));
        }
        Ok(Self::build(len, options, dist, 0, Vec::new(), None))
    }

    fn build(
        len: u64,
        options: SamplerOptions,
        dist: DistInfo,
        epoch: u64,
        reshards: Vec<Reshard>,
        base: Option<Arc<[u64]>>,
    ) -> Self {
        Self {
            len,
            options,
            dist,
            epoch,
            reshards,
            schedule: Schedule::new(len, base, dist, options.remainder),
            delivered: 0,
            ahead: BTreeSet::new(),
        }
    }

    /// Starts epoch `epoch` from its beginning, forgetting what was delivered and any reshard
    /// (torch `DistributedSampler.set_epoch`; call it before each epoch).
    pub fn set_epoch(&mut self, epoch: u64) {
        *self = Self::build(self.len, self.options, self.dist, epoch, Vec::new(), None);
    }

    /// The current epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The dataset length, in samples.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the dataset is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// This rank's position in the job.
    pub fn dist(&self) -> DistInfo {
        self.dist
    }

    /// The options.
    pub fn options(&self) -> SamplerOptions {
        self.options
    }

    /// The number of items this rank yields in the whole epoch, delivered ones included (torch's
    /// `len(DistributedSampler)`); the same on every rank.
    pub fn num_samples(&self) -> u64 {
        self.schedule.num_items()
    }

    /// The number of this rank's items already delivered in this epoch.
    pub fn num_delivered(&self) -> u64 {
        self.delivered + self.ahead.len() as u64
    }

    /// This rank's items not yet delivered, in order (the pipeline's source).
    ///
    /// The iterator owns its data, so the sampler stays free for [`Self::mark_delivered`]. It
    /// regenerates the epoch's permutation: `O(len)` time and 4 bytes per sample.
    pub fn iter(&self) -> SamplerIter {
        let permutation = self
            .options
            .shuffle
            .then(|| permutation::permutation(self.options.seed, self.epoch, self.len));
        SamplerIter {
            schedule: self.schedule.clone(),
            permutation,
            next: self.delivered,
            end: self.schedule.num_items(),
            skip: self
                .ahead
                .iter()
                .copied()
                .collect::<Vec<_>>()
                .into_iter()
                .peekable(),
        }
    }

    /// Records that the item at global `position` (a [`SampledIndex::position`] this rank
    /// yielded) has been delivered, in any order. Marking an item twice is harmless.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] when `position` is not one of this rank's items in this
    /// epoch.
    pub fn mark_delivered(&mut self, position: u64) -> Result<()> {
        let item = self.schedule.item_of(position).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "position {position} is not in the share of rank {} of {} in epoch {}",
                    self.dist.rank(),
                    self.dist.world_size(),
                    self.epoch
                ),
            )
        })?;
        self.mark_item(item);
        Ok(())
    }

    fn mark_item(&mut self, item: u64) {
        if item == self.delivered {
            self.delivered += 1;
            while self.ahead.remove(&self.delivered) {
                self.delivered += 1;
            }
        } else if item > self.delivered {
            self.ahead.insert(item);
        }
    }

    /// The resumable state: this rank's progress in the current epoch.
    pub fn state(&self) -> SamplerState {
        SamplerState {
            version: state::STATE_VERSION,
            len: self.len,
            shuffle: self.options.shuffle,
            seed: self.options.seed,
            epoch: self.epoch,
            remainder: self.options.remainder,
            world_size: self.dist.world_size(),
            rank: self.dist.rank(),
            reshards: self.reshards.clone(),
            delivered: self.delivered,
            delivered_ahead: self
                .ahead
                .iter()
                .map(|&k| self.schedule.item(k).position)
                .collect(),
        }
    }

    /// The state once a pipeline fed with [`Self::iter`] (taken at this sampler's present
    /// progress) has delivered the source positions below `done_below` and those in
    /// `done_above`: position `p` is the `p`-th item that iterator yields. These are the fields
    /// of the pipeline's `spdl_core::PipelineState`, so a sharded job checkpoints one value that
    /// [`merge_states`] and [`Self::resume`] understand, even for a new world size. The sampler
    /// itself is unchanged: ask again at the next checkpoint with the pipeline's newer state.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] when a position is not below the number of items the
    /// iterator yields.
    pub fn state_after(&self, done_below: u64, done_above: &[u64]) -> Result<SamplerState> {
        let left = self.schedule.num_items() - self.num_delivered();
        let mut above = done_above.to_vec();
        above.sort_unstable();
        above.dedup();
        let last = above.last().map_or(done_below, |&p| done_below.max(p + 1));
        if last > left {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "pipeline position {} is past the {left} items rank {} had left in epoch {}",
                    last - 1,
                    self.dist.rank(),
                    self.epoch
                ),
            ));
        }
        let mut after = self.clone();
        // The items the iterator yields, in order: the undelivered ones after the watermark.
        let remaining =
            (self.delivered..self.schedule.num_items()).filter(|i| !self.ahead.contains(i));
        for (p, item) in (0..last).zip(remaining) {
            if p < done_below || above.binary_search(&p).is_ok() {
                after.mark_item(item);
            }
        }
        Ok(after.state())
    }

    /// Restores the sampler of rank `state.rank` exactly where `state` left it, for a restart
    /// with the same world size (torchdata `load_state_dict`). Its iterator yields the rank's
    /// items that were not delivered.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidState`] when the version is unknown, the length is above
    /// [`Self::MAX_LEN`], the rank or world size is invalid, a reshard does not fit the sequence
    /// before it, the watermark exceeds the rank's share or an out-of-order position is not in it.
    pub fn from_state(state: &SamplerState) -> Result<Self> {
        state::check_header(state.version, state.len)?;
        let base = state::base_sequence(state.len, &state.reshards)?;
        Self::restore(state, base)
    }

    /// [`Self::from_state`] with the base sequence already built from `state.reshards`.
    fn restore(state: &SamplerState, base: Option<Arc<[u64]>>) -> Result<Self> {
        let invalid = |reason: String| Error::new(ErrorKind::InvalidState, reason);
        let dist = DistInfo::new(state.rank, state.world_size)
            .map_err(|e| invalid(e.reason().to_owned()))?;
        let options = SamplerOptions {
            shuffle: state.shuffle,
            seed: state.seed,
            remainder: state.remainder,
        };
        let mut sampler = Self::build(
            state.len,
            options,
            dist,
            state.epoch,
            state.reshards.clone(),
            base,
        );
        if state.delivered > sampler.num_samples() {
            return Err(invalid(format!(
                "rank {} delivered {} items of {}",
                state.rank,
                state.delivered,
                sampler.num_samples()
            )));
        }
        sampler.delivered = state.delivered;
        for &position in &state.delivered_ahead {
            let item = sampler.schedule.item_of(position).ok_or_else(|| {
                invalid(format!(
                    "position {position} is not in the share of rank {} of {}",
                    state.rank, state.world_size
                ))
            })?;
            sampler.mark_item(item);
        }
        Ok(sampler)
    }

    /// The sampler of rank `dist` that deals what `progress` left of its epoch to a new world
    /// size (elastic resume; Mosaic Streaming's resumption across a changed number of nodes).
    /// The new ranks together yield every remaining position exactly once, plus padding with
    /// [`Remainder::Pad`].
    ///
    /// # Errors
    /// [`ErrorKind::InvalidState`] when `progress` has an unknown version, a length above
    /// [`Self::MAX_LEN`], or a reshard that does not fit the sequence before it.
    pub fn resume(progress: &EpochProgress, dist: DistInfo, remainder: Remainder) -> Result<Self> {
        state::check_header(progress.version, progress.len)?;
        let base = state::base_sequence(progress.len, &progress.reshards)?;
        let options = SamplerOptions {
            shuffle: progress.shuffle,
            seed: progress.seed,
            remainder,
        };
        Ok(Self::build(
            progress.len,
            options,
            dist,
            progress.epoch,
            progress.reshards.clone(),
            base,
        ))
    }
}

/// The items of one rank not yet delivered, in order; made by [`Sampler::iter`].
#[derive(Debug)]
pub struct SamplerIter {
    schedule: Schedule,
    permutation: Option<Vec<u32>>,
    next: u64,
    end: u64,
    /// Items above the watermark already delivered, ascending.
    skip: std::iter::Peekable<std::vec::IntoIter<u64>>,
}

impl Iterator for SamplerIter {
    type Item = SampledIndex;

    fn next(&mut self) -> Option<SampledIndex> {
        while self.next < self.end {
            let item = self.next;
            self.next += 1;
            if self.skip.next_if_eq(&item).is_some() {
                continue;
            }
            let slot = self.schedule.item(item);
            let index = match &self.permutation {
                Some(perm) => u64::from(perm[slot.source as usize]),
                None => slot.source,
            };
            return Some(SampledIndex {
                index,
                position: slot.position,
                padded: slot.padded,
            });
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.end - self.next).saturating_sub(self.skip.len() as u64);
        let left = usize::try_from(left).unwrap_or(usize::MAX);
        (left, Some(left))
    }
}

impl ExactSizeIterator for SamplerIter {}
