//! The resumable state of a sampler, and the merge of all ranks' states for an elastic resume.
//!
//! See the [sampler module docs](super) for the representation and a worked example.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::Remainder;
use crate::dist::DistInfo;
use crate::error::{Error, ErrorKind, Result};

/// The version of the state format written by this crate.
pub(crate) const STATE_VERSION: u32 = 1;

/// What one rank has delivered of one epoch: enough to resume it, in a size that does not grow
/// with the dataset (the permutation is regenerated from `seed` and `epoch`, never stored).
///
/// The counterpart of a torchdata `StatefulDataLoader` `state_dict()` for the sampler. Serialize
/// it with serde (JSON: about 200 bytes) into the training checkpoint, one per rank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SamplerState {
    /// The format version (1).
    pub version: u32,
    /// The dataset length, in samples.
    pub len: u64,
    /// Whether the epoch order is shuffled.
    pub shuffle: bool,
    /// The shuffle seed.
    pub seed: u64,
    /// The epoch.
    pub epoch: u64,
    /// How the tail is made to divide evenly.
    pub remainder: Remainder,
    /// The world size this state was recorded under.
    pub world_size: u64,
    /// The rank this state was recorded by.
    pub rank: u64,
    /// Earlier reshardings of this epoch, oldest first; empty for an epoch that never changed
    /// world size.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reshards: Vec<Reshard>,
    /// The watermark: this rank's items `0..delivered` (in its strided order) are all delivered.
    pub delivered: u64,
    /// Global positions of this rank's items after the watermark that were delivered out of
    /// order, ascending. Padding items have positions `>= len`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delivered_ahead: Vec<u64>,
}

/// One resharding of an epoch: what the ranks of the old world size had delivered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reshard {
    /// The old world size.
    pub world_size: u64,
    /// Per old rank (indexed by rank), its watermark in its strided order.
    pub delivered: Vec<u64>,
    /// Real global positions (`< len`) delivered out of order above the watermarks, ascending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delivered_ahead: Vec<u64>,
}

/// What all ranks of a job had delivered of an epoch, made by [`merge_states`], from which
/// [`Sampler::resume`](super::Sampler::resume) deals the rest to a new world size.
///
/// Its size is `O(sum of world sizes + out-of-order deliveries)`, independent of the dataset
/// length.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpochProgress {
    /// The format version (1).
    pub version: u32,
    /// The dataset length, in samples.
    pub len: u64,
    /// Whether the epoch order is shuffled.
    pub shuffle: bool,
    /// The shuffle seed.
    pub seed: u64,
    /// The epoch.
    pub epoch: u64,
    /// Every resharding of the epoch so far, oldest first, the last one made by the merge.
    pub reshards: Vec<Reshard>,
}

/// Merges the states of all ranks of one job (any order) into the epoch's progress: every global
/// position any rank delivered is consumed, every other one remains.
///
/// Positions that no rank would have delivered (the tail that [`Remainder::Drop`] cut) remain
/// too, so a resumed epoch may deliver them; padding deliveries consume nothing.
///
/// # Errors
/// [`ErrorKind::InvalidArgument`] for an empty slice; [`ErrorKind::InvalidState`] when the number
/// of states is not their world size, a rank is missing or repeated, the states disagree on
/// length, shuffle, seed, epoch, remainder, world size or earlier reshards, a version is
/// unknown, or a state does not fit its own share (see [`Sampler::from_state`](super::Sampler::from_state)).
pub fn merge_states(states: &[SamplerState]) -> Result<EpochProgress> {
    let first = states
        .first()
        .ok_or_else(|| Error::new(ErrorKind::InvalidArgument, "no sampler state to merge"))?;
    let world_size = first.world_size;
    if states.len() as u64 != world_size {
        return Err(invalid(format!(
            "got {} states for a world size of {world_size}: the state of every rank is needed",
            states.len()
        )));
    }
    check_header(first.version, first.len)?;
    let base = base_sequence(first.len, &first.reshards)?;
    let mut delivered = vec![None; states.len()];
    let mut ahead = Vec::new();
    for state in states {
        let same = (
            state.len,
            state.shuffle,
            state.seed,
            state.epoch,
            state.remainder,
            state.world_size,
            &state.reshards,
        ) == (
            first.len,
            first.shuffle,
            first.seed,
            first.epoch,
            first.remainder,
            first.world_size,
            &first.reshards,
        );
        if !same || state.version != first.version {
            return Err(invalid(format!(
                "the states of ranks {} and {} are not of the same job and epoch",
                first.rank, state.rank
            )));
        }
        // Checks the watermark and out-of-order positions against the rank's share.
        super::Sampler::restore(state, base.clone())?;
        let slot = delivered
            .get_mut(state.rank as usize)
            .ok_or_else(|| invalid(format!("rank {} is not below {world_size}", state.rank)))?;
        if slot.replace(state.delivered).is_some() {
            return Err(invalid(format!("two states for rank {}", state.rank)));
        }
        ahead.extend(state.delivered_ahead.iter().filter(|&&p| p < state.len));
    }
    ahead.sort_unstable();
    ahead.dedup();
    let mut reshards = first.reshards.clone();
    reshards.push(Reshard {
        world_size,
        // Every rank is present: there are `world_size` states, none repeated.
        delivered: delivered
            .into_iter()
            .map(Option::unwrap_or_default)
            .collect(),
        delivered_ahead: ahead,
    });
    Ok(EpochProgress {
        version: STATE_VERSION,
        len: first.len,
        shuffle: first.shuffle,
        seed: first.seed,
        epoch: first.epoch,
        reshards,
    })
}

/// Checks the version and the dataset length of a state.
pub(crate) fn check_header(version: u32, len: u64) -> Result<()> {
    if version != STATE_VERSION {
        return Err(invalid(format!(
            "state format version {version} is not supported (expected {STATE_VERSION})"
        )));
    }
    if len > super::Sampler::MAX_LEN {
        return Err(invalid(format!(
            "dataset length {len} is above the maximum {}",
            super::Sampler::MAX_LEN
        )));
    }
    Ok(())
}

/// The ascending global positions left after `reshards` (`None`: none, so all of `0..len`).
///
/// Each reshard removes, from the sequence left by the ones before it, the slots its ranks
/// delivered: slot `j` of rank `j % w` is item `j / w`, delivered when below that rank's
/// watermark, or listed among the out-of-order positions. `O(len)` time and memory.
pub(crate) fn base_sequence(len: u64, reshards: &[Reshard]) -> Result<Option<Arc<[u64]>>> {
    let mut base: Option<Vec<u64>> = None;
    for (n, reshard) in reshards.iter().enumerate() {
        let base_len = base.as_ref().map_or(len, |b| b.len() as u64);
        let w = reshard.world_size;
        if DistInfo::new(0, w).is_err() || reshard.delivered.len() as u64 != w {
            return Err(invalid(format!(
                "reshard {n} has world size {w} and {} watermarks",
                reshard.delivered.len()
            )));
        }
        let max_items = base_len.div_ceil(w);
        if let Some(r) = reshard.delivered.iter().position(|&d| d > max_items) {
            return Err(invalid(format!(
                "reshard {n}: rank {r} delivered {} items of at most {max_items}",
                reshard.delivered[r]
            )));
        }
        let mut ahead = Vec::with_capacity(reshard.delivered_ahead.len());
        for &p in &reshard.delivered_ahead {
            let j = match &base {
                None => (p < len).then_some(p),
                Some(b) => b.binary_search(&p).ok().map(|j| j as u64),
            };
            ahead.push(j.ok_or_else(|| {
                invalid(format!(
                    "reshard {n}: position {p} is not among the positions left"
                ))
            })?);
        }
        ahead.sort_unstable();
        let mut next_ahead = ahead.iter().peekable();
        let mut left = Vec::new();
        for j in 0..base_len {
            while next_ahead.next_if(|&&a| a < j).is_some() {}
            let out_of_order = next_ahead.peek().is_some_and(|&&a| a == j);
            let below_watermark = j / w < reshard.delivered[(j % w) as usize];
            if !out_of_order && !below_watermark {
                left.push(base.as_ref().map_or(j, |b| b[j as usize]));
            }
        }
        base = Some(left);
    }
    Ok(base.map(Arc::from))
}

fn invalid(reason: String) -> Error {
    Error::new(ErrorKind::InvalidState, reason)
}
