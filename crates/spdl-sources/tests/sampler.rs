//! Property tests of the sampler: exactly-once, equal shares, order independent of the world
//! size, resume with out-of-order delivery, and elastic resume across world sizes.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use proptest::test_runner::{RngAlgorithm, TestRng};
use spdl_sources::{
    merge_states, DistInfo, ErrorKind, Remainder, SampledIndex, Sampler, SamplerOptions,
    SamplerState,
};

fn remainder() -> impl Strategy<Value = Remainder> {
    prop_oneof![Just(Remainder::Drop), Just(Remainder::Pad)]
}

fn options() -> impl Strategy<Value = SamplerOptions> {
    (any::<bool>(), any::<u64>(), remainder()).prop_map(|(shuffle, seed, remainder)| {
        SamplerOptions {
            shuffle,
            seed,
            remainder,
        }
    })
}

/// One epoch of a dataset of `len` samples split over `world_size` ranks.
#[derive(Debug, Clone, Copy)]
struct Split {
    len: u64,
    world_size: u64,
    options: SamplerOptions,
    epoch: u64,
}

/// Datasets of up to 300 samples over fewer than `max_world` ranks, in one of the first epochs.
fn split(max_world: u64) -> impl Strategy<Value = Split> {
    (0u64..300, 1..max_world, options(), 0u64..4).prop_map(|(len, world_size, options, epoch)| {
        Split {
            len,
            world_size,
            options,
            epoch,
        }
    })
}

fn ranks(len: u64, world_size: u64, options: SamplerOptions, epoch: u64) -> Vec<Sampler> {
    (0..world_size)
        .map(|r| {
            let mut s = Sampler::new(len, DistInfo::new(r, world_size).unwrap(), options).unwrap();
            s.set_epoch(epoch);
            s
        })
        .collect()
}

/// The global order (position -> index) of an epoch, read from a single rank.
fn global_order(len: u64, options: SamplerOptions, epoch: u64) -> Vec<u64> {
    let opts = SamplerOptions {
        remainder: Remainder::Drop,
        ..options
    };
    let single = &ranks(len, 1, opts, epoch)[0];
    let items: Vec<SampledIndex> = single.iter().collect();
    assert!(items
        .iter()
        .enumerate()
        .all(|(i, s)| s.position == i as u64));
    items.iter().map(|s| s.index).collect()
}

/// A deterministic generator for delivery patterns (proptest's, not the sampler's), seeded by
/// the case.
fn dice_from(seed: [u8; 32]) -> TestRng {
    TestRng::from_seed(RngAlgorithm::ChaCha, &seed)
}

/// Simulates a pipeline that completes out of order: the first `yielded` items were handed out,
/// most of them delivered (in a shuffled order), a few still in flight. Returns the positions
/// delivered.
fn deliver_some(sampler: &mut Sampler, dice: &mut TestRng) -> Vec<SampledIndex> {
    let items: Vec<SampledIndex> = sampler.iter().collect();
    let yielded = dice.random_range(0..=items.len());
    let mut delivered: Vec<SampledIndex> = items[..yielded]
        .iter()
        .copied()
        .filter(|_| !dice.random_ratio(1, 5))
        .collect();
    for i in (1..delivered.len()).rev() {
        let j = dice.random_range(0..=i);
        delivered.swap(i, j);
    }
    for item in &delivered {
        sampler.mark_delivered(item.position).unwrap();
    }
    delivered
}

fn json_round_trip(state: &SamplerState) -> SamplerState {
    serde_json::from_str(&serde_json::to_string(state).unwrap()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Every sample of an epoch goes to exactly one rank, shares are equal, padding is marked.
    #[test]
    fn exactly_once_and_equal_shares(split in split(20)) {
        let Split { len, world_size, options, epoch } = split;
        let order = global_order(len, options, epoch);
        let shares: Vec<Vec<SampledIndex>> =
            ranks(len, world_size, options, epoch).iter().map(|s| s.iter().collect()).collect();
        let expected = match options.remainder {
            Remainder::Drop => len / world_size,
            Remainder::Pad => len.div_ceil(world_size),
        };
        for (r, share) in shares.iter().enumerate() {
            prop_assert_eq!(share.len() as u64, expected, "rank {}", r);
        }
        let all: Vec<SampledIndex> = shares.iter().flatten().copied().collect();
        let real: Vec<&SampledIndex> = all.iter().filter(|s| !s.padded).collect();
        let padded: Vec<&SampledIndex> = all.iter().filter(|s| s.padded).collect();
        let real_positions: BTreeSet<u64> = real.iter().map(|s| s.position).collect();
        prop_assert_eq!(real_positions.len(), real.len(), "a real position twice");
        for item in &all {
            prop_assert!(item.index < len.max(1));
        }
        for item in &real {
            prop_assert_eq!(item.index, order[item.position as usize]);
        }
        match options.remainder {
            Remainder::Drop => {
                prop_assert!(padded.is_empty());
                prop_assert_eq!(real_positions, (0..expected * world_size).collect());
            }
            Remainder::Pad => {
                // The union of the non-padded items is the dataset, exactly once.
                let indices: BTreeSet<u64> = real.iter().map(|s| s.index).collect();
                prop_assert_eq!(indices.len() as u64, len);
                prop_assert_eq!(real.len() as u64, len);
                prop_assert_eq!(padded.len() as u64, expected * world_size - len);
                for item in &padded {
                    prop_assert!(item.position >= len);
                    prop_assert_eq!(item.index, order[((item.position - len) % len) as usize]);
                }
            }
        }
        // Rank r takes positions r, r + W, ...
        for (r, share) in shares.iter().enumerate() {
            for (k, item) in share.iter().enumerate() {
                prop_assert_eq!(item.position, r as u64 + k as u64 * world_size);
            }
        }
    }

    /// The global order depends on seed and epoch only: the same for the same pair, whatever the
    /// world size.
    #[test]
    fn order_depends_on_seed_and_epoch_only(
        len in 1u64..500,
        [w1, w2] in prop::array::uniform2(1u64..16),
        options in options(),
        epoch in 0u64..1000,
    ) {
        let positions = |w| -> BTreeMap<u64, u64> {
            ranks(len, w, options, epoch)
                .iter()
                .flat_map(|s| s.iter())
                .filter(|s| !s.padded)
                .map(|s| (s.position, s.index))
                .collect()
        };
        let a = positions(w1);
        let b = positions(w2);
        for (p, i) in &a {
            if let Some(j) = b.get(p) {
                prop_assert_eq!(i, j);
            }
        }
        prop_assert_eq!(global_order(len, options, epoch), global_order(len, options, epoch));
    }

    /// A fresh process with the same world size resumes exactly the positions not delivered.
    #[test]
    fn resume_same_world_size(split in split(12), seed in any::<[u8; 32]>()) {
        let Split { len, world_size, options, epoch } = split;
        let mut dice = dice_from(seed);
        for mut sampler in ranks(len, world_size, options, epoch) {
            let full: Vec<SampledIndex> = sampler.iter().collect();
            let delivered = deliver_some(&mut sampler, &mut dice);
            let done: BTreeSet<u64> = delivered.iter().map(|s| s.position).collect();
            let state = json_round_trip(&sampler.state());
            prop_assert_eq!(state.delivered as usize + state.delivered_ahead.len(), done.len());
            let resumed = Sampler::from_state(&state).unwrap();
            let got: Vec<SampledIndex> = resumed.iter().collect();
            let want: Vec<SampledIndex> =
                full.iter().copied().filter(|s| !done.contains(&s.position)).collect();
            prop_assert_eq!(resumed.iter().len(), want.len());
            prop_assert_eq!(got, want);
            prop_assert_eq!(resumed.num_delivered(), done.len() as u64);
        }
    }

    /// `state_after(pipeline positions)` equals marking the same items one by one, also on a
    /// sampler that already had progress (a resumed run): position p = the p-th item of `iter()`.
    #[test]
    fn state_after_maps_pipeline_positions_to_items(
        len in 0u64..300,
        world_size in 1u64..12,
        options in options(),
        seed in any::<[u8; 32]>(),
    ) {
        let mut dice = dice_from(seed);
        for mut sampler in ranks(len, world_size, options, 2) {
            deliver_some(&mut sampler, &mut dice); // progress before this pipeline started
            let fed: Vec<SampledIndex> = sampler.iter().collect();
            let n = fed.len() as u64;
            let done_below = dice.random_range(0..=n);
            let done_above: Vec<u64> =
                (done_below..n).filter(|_| dice.random_ratio(1, 3)).collect();
            let got = json_round_trip(&sampler.state_after(done_below, &done_above).unwrap());
            let mut want = sampler.clone();
            for (p, item) in fed.iter().enumerate() {
                let p = p as u64;
                if p < done_below || done_above.contains(&p) {
                    want.mark_delivered(item.position).unwrap();
                }
            }
            prop_assert_eq!(&got, &want.state());
            // Unchanged: a later checkpoint asks again with the pipeline's newer state.
            prop_assert_eq!(sampler.iter().len() as u64, n);
            prop_assert_eq!(
                sampler.state_after(n + 1, &[]).unwrap_err().kind(),
                ErrorKind::InvalidArgument
            );
        }
    }

    /// After a change of world size, the new ranks deliver every remaining position exactly once
    /// (with `Pad`; with `Drop`, fewer than W' are left out), with equal shares.
    #[test]
    fn elastic_resume_delivers_the_rest_exactly_once(
        len in 0u64..300,
        old_w in 1u64..10,
        new_w in 1u64..10,
        options in options(),
        new_remainder in remainder(),
        seed in any::<[u8; 32]>(),
    ) {
        let mut dice = dice_from(seed);
        let order = global_order(len, options, 3);
        let mut old = ranks(len, old_w, options, 3);
        let mut done = BTreeSet::new();
        for sampler in &mut old {
            done.extend(deliver_some(sampler, &mut dice).iter().filter(|s| !s.padded).map(|s| s.position));
        }
        let mut states: Vec<SamplerState> = old.iter().map(|s| json_round_trip(&s.state())).collect();
        states.reverse(); // any order
        let progress = merge_states(&states).unwrap();
        let progress = serde_json::from_str(&serde_json::to_string(&progress).unwrap()).unwrap();
        let new: Vec<Vec<SampledIndex>> = (0..new_w)
            .map(|r| {
                Sampler::resume(&progress, DistInfo::new(r, new_w).unwrap(), new_remainder)
                    .unwrap()
                    .iter()
                    .collect()
            })
            .collect();
        check_rest(len, &order, &done, &new, new_remainder)?;
    }

    /// Two reshardings in one epoch (e.g. 8 -> 6 -> 5), with deliveries before each.
    #[test]
    fn chained_reshards(
        len in 0u64..200,
        w in prop::array::uniform3(1u64..9),
        options in options(),
        seed in any::<[u8; 32]>(),
    ) {
        let mut dice = dice_from(seed);
        let order = global_order(len, options, 0);
        let mut done = BTreeSet::new();
        let mut samplers = ranks(len, w[0], options, 0);
        for &next_w in &w[1..] {
            for sampler in &mut samplers {
                done.extend(deliver_some(sampler, &mut dice).iter().filter(|s| !s.padded).map(|s| s.position));
            }
            let states: Vec<SamplerState> = samplers.iter().map(|s| json_round_trip(&s.state())).collect();
            let progress = merge_states(&states).unwrap();
            samplers = (0..next_w)
                .map(|r| Sampler::resume(&progress, DistInfo::new(r, next_w).unwrap(), options.remainder).unwrap())
                .collect();
            // A resharded sampler's own state resumes it too.
            for sampler in &samplers {
                let again = Sampler::from_state(&json_round_trip(&sampler.state())).unwrap();
                prop_assert_eq!(again.iter().collect::<Vec<_>>(), sampler.iter().collect::<Vec<_>>());
            }
        }
        let new: Vec<Vec<SampledIndex>> = samplers.iter().map(|s| s.iter().collect()).collect();
        check_rest(len, &order, &done, &new, options.remainder)?;
    }
}

/// The new ranks' items cover the positions not in `done` as the remainder policy says.
fn check_rest(
    len: u64,
    order: &[u64],
    done: &BTreeSet<u64>,
    new: &[Vec<SampledIndex>],
    remainder: Remainder,
) -> Result<(), TestCaseError> {
    let new_w = new.len() as u64;
    let rest: Vec<u64> = (0..len).filter(|p| !done.contains(p)).collect();
    let share = match remainder {
        Remainder::Drop => rest.len() as u64 / new_w,
        Remainder::Pad => (rest.len() as u64).div_ceil(new_w),
    };
    for items in new {
        prop_assert_eq!(items.len() as u64, share);
    }
    let real: Vec<u64> = new
        .iter()
        .flatten()
        .filter(|s| !s.padded)
        .map(|s| s.position)
        .collect();
    let real_set: BTreeSet<u64> = real.iter().copied().collect();
    prop_assert_eq!(real_set.len(), real.len(), "a position delivered twice");
    prop_assert!(real_set.is_disjoint(done), "a delivered position again");
    match remainder {
        Remainder::Pad => prop_assert_eq!(real_set, rest.iter().copied().collect()),
        Remainder::Drop => {
            let kept = (share * new_w) as usize;
            prop_assert_eq!(real_set, rest[..kept].iter().copied().collect());
        }
    }
    for item in new.iter().flatten() {
        if item.padded {
            prop_assert!(item.position >= len);
            prop_assert!(rest.iter().any(|&p| order[p as usize] == item.index));
        } else {
            prop_assert_eq!(item.index, order[item.position as usize]);
        }
    }
    Ok(())
}

#[test]
fn named_elastic_cases() {
    // 8 -> 6 and 3 -> 5 on an odd length, shuffled, with deliveries.
    for (len, old_w, new_w) in [(1001, 8, 6), (1001, 3, 5), (7, 8, 3), (0, 2, 3)] {
        let options = SamplerOptions {
            shuffle: true,
            seed: 17,
            remainder: Remainder::Pad,
        };
        let mut dice = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let order = global_order(len, options, 0);
        let mut old = ranks(len, old_w, options, 0);
        let mut done = BTreeSet::new();
        for s in &mut old {
            done.extend(
                deliver_some(s, &mut dice)
                    .iter()
                    .filter(|s| !s.padded)
                    .map(|s| s.position),
            );
        }
        let states: Vec<_> = old.iter().map(Sampler::state).collect();
        let progress = merge_states(&states).unwrap();
        let new: Vec<Vec<SampledIndex>> = (0..new_w)
            .map(|r| {
                Sampler::resume(&progress, DistInfo::new(r, new_w).unwrap(), Remainder::Pad)
                    .unwrap()
                    .iter()
                    .collect()
            })
            .collect();
        check_rest(len, &order, &done, &new, Remainder::Pad).unwrap();
    }
}

#[test]
fn mark_delivered_rejects_positions_of_other_ranks() {
    let options = SamplerOptions::default();
    let mut s = Sampler::new(10, DistInfo::new(1, 3).unwrap(), options).unwrap();
    for p in [0, 2, 3, 12, u64::MAX] {
        let err = s.mark_delivered(p).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.to_string().contains("rank 1 of 3"), "{err}");
    }
    // Padding position 10 is rank 1's; marking twice is harmless.
    s.mark_delivered(10).unwrap();
    s.mark_delivered(10).unwrap();
    assert_eq!(s.num_delivered(), 1);
    assert_eq!(s.state().delivered_ahead, [10]);
}

#[test]
fn merge_rejects_inconsistent_states() {
    let options = SamplerOptions::default();
    let states: Vec<SamplerState> = ranks(100, 4, options, 2)
        .iter()
        .map(Sampler::state)
        .collect();
    assert!(merge_states(&states).is_ok());

    let err = merge_states(&states[..3]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidState);
    assert!(err.to_string().contains("every rank"), "{err}");

    let mut twice = states.clone();
    twice[3] = states[0].clone();
    assert_eq!(
        merge_states(&twice).unwrap_err().kind(),
        ErrorKind::InvalidState
    );

    let mut other_epoch = states.clone();
    other_epoch[1].epoch = 3;
    assert_eq!(
        merge_states(&other_epoch).unwrap_err().kind(),
        ErrorKind::InvalidState
    );

    let mut too_far = states.clone();
    too_far[2].delivered = 26;
    assert_eq!(
        merge_states(&too_far).unwrap_err().kind(),
        ErrorKind::InvalidState
    );

    assert_eq!(
        merge_states(&[]).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn from_state_rejects_bad_states() {
    let s = Sampler::new(100, DistInfo::new(1, 4).unwrap(), SamplerOptions::default()).unwrap();
    let good = s.state();
    let mut cases = Vec::new();
    let mut bad = good.clone();
    bad.version = 2;
    cases.push(bad);
    let mut bad = good.clone();
    bad.rank = 4;
    cases.push(bad);
    let mut bad = good.clone();
    bad.delivered_ahead = vec![4]; // rank 0's position
    cases.push(bad);
    let mut bad = good.clone();
    bad.len = u64::MAX;
    cases.push(bad);
    let mut bad = good.clone();
    bad.world_size = 0;
    cases.push(bad);
    for bad in cases {
        let err = Sampler::from_state(&bad).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidState, "{bad:?}");
    }
}

#[test]
fn set_epoch_restarts_and_changes_the_order() {
    let mut s = Sampler::new(50, DistInfo::single(), SamplerOptions::default()).unwrap();
    let e0: Vec<u64> = s.iter().map(|i| i.index).collect();
    s.mark_delivered(e0.len() as u64 - 1).unwrap();
    s.set_epoch(1);
    assert_eq!(s.num_delivered(), 0);
    let e1: Vec<u64> = s.iter().map(|i| i.index).collect();
    assert_ne!(e0, e1);
    s.set_epoch(0);
    assert_eq!(s.iter().map(|i| i.index).collect::<Vec<_>>(), e0);
}

/// The state does not grow with the dataset: ImageNet-1k scale, 8 ranks, a window of 64 items
/// in flight. Figures: `cargo test -p spdl-sources --test sampler imagenet -- --nocapture`
/// (release figures: `cargo run --release -p spdl-sources --example sampler_scale`).
#[test]
fn imagenet_scale_state_is_small_and_resumes() {
    const LEN: u64 = 1_281_167;
    let options = SamplerOptions {
        shuffle: true,
        seed: 1,
        remainder: Remainder::Pad,
    };
    let mut s = Sampler::new(LEN, DistInfo::new(3, 8).unwrap(), options).unwrap();
    let items: Vec<SampledIndex> = s.iter().collect();
    assert_eq!(items.len(), 160_146);
    for item in &items[..100_000] {
        s.mark_delivered(item.position).unwrap();
    }
    for item in items[100_001..100_064].iter().step_by(2) {
        s.mark_delivered(item.position).unwrap();
    }
    let json = serde_json::to_string(&s.state()).unwrap();
    let start = std::time::Instant::now();
    let resumed = Sampler::from_state(&serde_json::from_str(&json).unwrap()).unwrap();
    let left: Vec<SampledIndex> = resumed.iter().collect();
    let elapsed = start.elapsed();
    println!(
        "{LEN} samples, rank 3 of 8: state {} bytes of JSON; resume + full iteration {elapsed:.2?}",
        json.len()
    );
    assert!(json.len() < 512, "{json}");
    assert_eq!(left.len(), 160_146 - 100_000 - 32);
    assert_eq!(left[0], items[100_000]);
}
