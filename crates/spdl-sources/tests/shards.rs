//! WebDataset tar shards from local disk: exactly-once dealing over ranks, seeded shard
//! shuffle, sample grouping, and named failures for truncated and missing shards.
#![cfg(feature = "source-local")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use spdl_sources::shards::{
    list_shards, ShardError, ShardErrorKind, ShardSample, ShardSource, ShardState,
};
use spdl_sources::{DistInfo, Remainder, SamplerOptions, Uri};
use spdl_tar::TarWriter;

#[path = "common/tar_shards.rs"]
mod tar_shards;
use tar_shards::write_tar_shards;

/// `n_shards` shards of `per_shard` samples; sample `i` is `s/{i:05}` with fields `jpg`
/// (its index as text, repeated) and `cls` (`i % 10`). Returns the shard paths.
fn write_shards(dir: &Path, n_shards: usize, per_shard: usize) -> Vec<PathBuf> {
    write_sized(dir, n_shards, per_shard, 100)
}

/// As [`write_shards`], the `jpg` field `repeat` times the index.
fn write_sized(dir: &Path, n_shards: usize, per_shard: usize, repeat: usize) -> Vec<PathBuf> {
    write_tar_shards(dir, n_shards, per_shard, |i| {
        vec![
            (format!("s/{i:05}.jpg"), i.to_string().repeat(repeat).into()),
            (format!("s/{i:05}.cls"), (i % 10).to_string().into()),
        ]
    })
}

/// A tar at `path` whose members are `(name, text)`, in that order.
fn write_members(path: &Path, members: &[(&str, &str)]) {
    let mut w = TarWriter::new(std::fs::File::create(path).unwrap());
    for (name, data) in members {
        w.append(name, data.as_bytes()).unwrap();
    }
    w.finish().unwrap();
}

fn uris(paths: &[PathBuf]) -> Vec<Uri> {
    paths.iter().cloned().map(Uri::Local).collect()
}

fn options(seed: u64) -> SamplerOptions {
    SamplerOptions {
        shuffle: true,
        seed,
        remainder: Remainder::Drop,
    }
}

#[test]
fn every_sample_once_per_epoch_over_1_to_4_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_shards(dir.path(), 12, 5);
    let listed = list_shards(&format!(
        "{}/train-{{0000..0011}}.tar",
        dir.path().display()
    ))
    .unwrap();
    let paths = uris(&paths);
    assert_eq!(listed, paths);
    assert_eq!(list_shards(dir.path().to_str().unwrap()).unwrap(), paths);

    for world in [1u64, 2, 3, 4] {
        for epoch in 0..2 {
            let mut seen: BTreeMap<String, u64> = BTreeMap::new();
            let mut per_rank = Vec::new();
            for rank in 0..world {
                let src = ShardSource::new(
                    paths.clone(),
                    DistInfo::new(rank, world).unwrap(),
                    options(7),
                )
                .unwrap();
                let mut n = 0;
                for s in src.epoch(epoch) {
                    let s = s.unwrap();
                    let i: usize = s.key[2..].parse().unwrap();
                    assert_eq!(s.get("cls").unwrap(), (i % 10).to_string().as_bytes());
                    assert_eq!(s.get("jpg").unwrap(), i.to_string().repeat(100).as_bytes());
                    assert_eq!(s.fields.len(), 2);
                    *seen.entry(s.key).or_default() += 1;
                    n += 1;
                }
                per_rank.push(n);
            }
            assert_eq!(seen.len(), 60, "world {world}");
            assert!(seen.values().all(|&c| c == 1), "world {world}");
            assert!(per_rank.iter().all(|&n| n == per_rank[0]), "{per_rank:?}");
        }
    }
}

#[test]
fn shard_order_is_seeded_and_changes_per_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let paths = uris(&write_shards(dir.path(), 16, 1));
    let src = ShardSource::new(paths.clone(), DistInfo::single(), options(3)).unwrap();
    let again = ShardSource::new(paths.clone(), DistInfo::single(), options(3)).unwrap();
    let other_seed = ShardSource::new(paths, DistInfo::single(), options(4)).unwrap();
    let e0 = src.epoch_shards(0);
    assert_eq!(e0, again.epoch_shards(0));
    assert_ne!(e0, src.epoch_shards(1));
    assert_ne!(e0, other_seed.epoch_shards(0));
    let mut sorted = e0.clone();
    sorted.sort();
    assert_eq!(sorted, (0..16).collect::<Vec<_>>());
    // Samples follow the shard order.
    let keys: Vec<usize> = src.epoch(0).map(|s| s.unwrap().shard).collect();
    assert_eq!(keys, e0);
}

#[test]
fn truncated_and_missing_shards_are_named_and_the_epoch_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_shards(dir.path(), 3, 4);
    // Cut shard 1 inside its third sample's jpg.
    let bytes = std::fs::read(&paths[1]).unwrap();
    let at = bytes.windows(8).position(|w| w == b"66666666").unwrap();
    std::fs::write(&paths[1], &bytes[..at + 10]).unwrap();
    let mut shards = uris(&paths);
    shards.push(Uri::Local(dir.path().join("gone.tar")));
    let src = ShardSource::new(
        shards,
        DistInfo::single(),
        SamplerOptions {
            shuffle: false,
            seed: 0,
            remainder: Remainder::Drop,
        },
    )
    .unwrap();
    let items: Vec<_> = src.epoch(0).collect();
    let ok: Vec<String> = items
        .iter()
        .filter_map(|r| r.as_ref().ok().map(|s| s.key.clone()))
        .collect();
    // Shard 1 delivered samples 4 and 5 (whole), lost 6 (cut) and 7.
    let want: Vec<String> = [0, 1, 2, 3, 4, 5, 8, 9, 10, 11]
        .iter()
        .map(|i| format!("s/{i:05}"))
        .collect();
    assert_eq!(ok, want);
    let errors: Vec<_> = items.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(errors.len(), 2);
    assert_eq!(errors[0].kind, ShardErrorKind::Truncated);
    assert_eq!(errors[0].shard, paths[1].display().to_string());
    assert_eq!(errors[0].key.as_deref(), Some("s/00006"));
    assert!(
        errors[0]
            .to_string()
            .contains("train-0001.tar: sample s/00006: "),
        "{}",
        errors[0]
    );
    assert_eq!(errors[1].kind, ShardErrorKind::Open);
    assert!(errors[1].to_string().contains("gone.tar"), "{}", errors[1]);
}

/// An item as text: the sample key, or the failure's kind and key.
fn shown(
    item: &Result<spdl_sources::shards::ShardSample, spdl_sources::shards::ShardError>,
) -> String {
    match item {
        Ok(s) => s.key.clone(),
        Err(e) => format!("failed {:?} {:?} in {}", e.kind, e.key, e.shard),
    }
}

#[test]
fn a_resume_after_a_failure_counts_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut paths = write_shards(dir.path(), 3, 4);
    // Shard 1 cut inside its third sample; shard 3 has a repeated field; shard 4 is missing.
    let bytes = std::fs::read(&paths[1]).unwrap();
    let at = bytes.windows(8).position(|w| w == b"66666666").unwrap();
    std::fs::write(&paths[1], &bytes[..at + 10]).unwrap();
    let dup = dir.path().join("dup.tar");
    write_members(
        &dup,
        &[("d/a.jpg", "1"), ("d/a.jpg", "1 again"), ("d/b.jpg", "2")],
    );
    paths.push(dup);
    paths.push(dir.path().join("gone.tar"));
    for buffer in [0, 3] {
        let src = ShardSource::new(uris(&paths), DistInfo::single(), options(7))
            .unwrap()
            .with_shuffle_buffer(buffer);
        let mut it = src.epoch(0);
        let all: Vec<String> = it.by_ref().map(|i| shown(&i)).collect();
        let failed = all.iter().filter(|s| s.starts_with("failed")).count();
        assert_eq!(failed, 3, "{all:?}");
        assert_eq!(it.failures(), 3);
        assert_eq!(all.len(), 4 + 2 + 4 + 1 + 3, "{all:?}");
        // A state taken after any item, failures included, resumes with exactly the rest:
        // no failure handed on twice, and the epoch's count carried over.
        for cut in 0..=all.len() {
            let mut it = src.epoch(0);
            for _ in 0..cut {
                let _ = it.next().unwrap();
            }
            let json = serde_json::to_string(&it.state()).unwrap();
            let state: ShardState = serde_json::from_str(&json).unwrap();
            let mut resumed = src.resume(&state).unwrap();
            let rest: Vec<String> = resumed.by_ref().map(|i| shown(&i)).collect();
            assert_eq!(
                rest,
                all[cut..],
                "buffer {buffer}, resumed after item {cut}"
            );
            assert_eq!(resumed.failures(), 3, "buffer {buffer}, cut {cut}");
        }
    }
}

#[test]
fn duplicate_fields_fail_the_sample_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dup.tar");
    write_members(
        &path,
        &[
            ("a.jpg", "1"),
            ("a.cls", "1"),
            ("b.jpg", "2"),
            ("b.jpg", "2 again"),
            ("README", "skipped: no field"),
            ("c.jpg", "3"),
        ],
    );
    let src = ShardSource::new(vec![Uri::Local(path)], DistInfo::single(), options(0)).unwrap();
    let items: Vec<_> = src.epoch(0).collect();
    assert_eq!(items.len(), 3);
    assert_eq!(items[0].as_ref().unwrap().key, "a");
    let e = items[1].as_ref().unwrap_err();
    assert_eq!(
        (e.kind, e.key.as_deref()),
        (ShardErrorKind::DuplicateField, Some("b"))
    );
    assert_eq!(items[2].as_ref().unwrap().get("jpg"), Some(&b"3"[..]));
}

#[test]
fn listing_errors() {
    let dir = tempfile::tempdir().unwrap();
    write_shards(dir.path(), 2, 1);
    let err = list_shards(&format!(
        "{}/train-{{0000..0002}}.tar",
        dir.path().display()
    ))
    .unwrap_err();
    assert_eq!(err.kind(), spdl_sources::ErrorKind::NotFound);
    assert!(err.to_string().contains("train-0002.tar"), "{err}");
    let empty = tempfile::tempdir().unwrap();
    assert_eq!(
        list_shards(empty.path().to_str().unwrap())
            .unwrap_err()
            .kind(),
        spdl_sources::ErrorKind::InvalidArgument
    );
}

#[test]
fn resume_mid_shard_reads_no_shard_from_its_start_again() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_shards(dir.path(), 3, 4);
    let src = ShardSource::new(uris(&paths), DistInfo::single(), options(11)).unwrap();
    let all: Vec<_> = src.epoch(2).map(Result::unwrap).collect();
    assert_eq!(all.len(), 12);
    // Offsets tile each shard: a sample starts where the one before ended.
    for w in all.windows(2) {
        if w[0].shard == w[1].shard {
            assert_eq!(w[0].end, w[1].offset);
        }
    }
    for cut in [0usize, 5, 6, 11] {
        let state = all[cut].state(2);
        let json = serde_json::to_string(&state).unwrap();
        let state: spdl_sources::shards::ShardState = serde_json::from_str(&json).unwrap();
        // Break the head of the shard being resumed: a resume must not read it.
        let shard = &paths[state.shard];
        let mut bytes = std::fs::read(shard).unwrap();
        let saved = bytes.clone();
        bytes[..512].fill(0xAB);
        std::fs::write(shard, &bytes).unwrap();
        let rest: Vec<_> = src.resume(&state).unwrap().map(Result::unwrap).collect();
        std::fs::write(shard, &saved).unwrap();
        assert_eq!(rest, all[cut + 1..], "resumed after sample {cut}");
    }
    let other_rank =
        ShardSource::new(uris(&paths), DistInfo::new(1, 3).unwrap(), options(11)).unwrap();
    let mine = other_rank.epoch_shards(2)[0];
    let not_mine = (0..3).find(|&s| s != mine).unwrap();
    let bad = spdl_sources::shards::ShardState {
        epoch: 2,
        shard: not_mine,
        offset: 0,
        skip: 0,
        draws: 0,
        buffered: Vec::new(),
        failures: 0,
    };
    assert_eq!(
        other_rank.resume(&bad).err().unwrap().kind(),
        spdl_sources::ErrorKind::InvalidState
    );
}

/// `n` shards of `per` samples each, written once per shape and shared by the cases.
fn shared_shards(n: usize, per: usize) -> Vec<Uri> {
    use std::sync::{Mutex, OnceLock};
    static DIRS: OnceLock<Mutex<BTreeMap<(usize, usize), tempfile::TempDir>>> = OnceLock::new();
    let mut dirs = DIRS.get_or_init(Default::default).lock().unwrap();
    let dir = dirs.entry((n, per)).or_insert_with(|| {
        let d = tempfile::tempdir().unwrap();
        write_sized(d.path(), n, per, 3);
        d
    });
    uris(
        &(0..n)
            .map(|s| dir.path().join(format!("train-{s:04}.tar")))
            .collect::<Vec<_>>(),
    )
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, ..Default::default() })]

    /// Every sample exactly once per epoch over 1-8 ranks, equal counts per rank, with and
    /// without a shuffle buffer.
    #[test]
    fn exactly_once_over_ranks(
        world in 1u64..=8,
        per_rank in 1usize..=2,
        per in 1usize..=4,
        buffer in 0usize..=6,
        seed in 0u64..1000,
        epoch in 0u64..3,
    ) {
        let n = world as usize * per_rank;
        let shards = shared_shards(n, per);
        let mut seen: BTreeMap<String, u32> = BTreeMap::new();
        let mut counts = Vec::new();
        for rank in 0..world {
            let src = ShardSource::new(shards.clone(), DistInfo::new(rank, world).unwrap(), options(seed))
                .unwrap()
                .with_shuffle_buffer(buffer);
            let mut c = 0;
            for s in src.epoch(epoch) {
                *seen.entry(s.unwrap().key).or_default() += 1;
                c += 1;
            }
            counts.push(c);
        }
        proptest::prop_assert_eq!(seen.len(), n * per);
        proptest::prop_assert!(seen.values().all(|&c| c == 1));
        proptest::prop_assert!(counts.iter().all(|&c| c == per_rank * per));
    }

    /// A resume from the state after any number of samples (JSON round trip) yields exactly
    /// the rest of the epoch, in the same order.
    #[test]
    fn resume_at_any_point_gives_exactly_the_rest(
        world in 1u64..=4,
        rank_pick in 0u64..4,
        n in 1usize..=8,
        per in 1usize..=4,
        buffer in 0usize..=6,
        seed in 0u64..1000,
        cut_pick in 0usize..1000,
    ) {
        let shards = shared_shards(n, per);
        let rank = rank_pick % world;
        let src = ShardSource::new(shards, DistInfo::new(rank, world).unwrap(), options(seed))
            .unwrap()
            .with_shuffle_buffer(buffer);
        let full: Vec<_> = src.epoch(1).map(Result::unwrap).collect();
        let cut = cut_pick % (full.len() + 1);
        let mut it = src.epoch(1);
        for _ in 0..cut {
            it.next().unwrap().unwrap();
        }
        let json = serde_json::to_string(&it.state()).unwrap();
        let state: ShardState = serde_json::from_str(&json).unwrap();
        let rest: Vec<_> = src.resume(&state).unwrap().map(Result::unwrap).collect();
        proptest::prop_assert_eq!(&rest[..], &full[cut..]);
    }
}

/// The items of one local shard file, read from its start.
fn read_shard(path: &Path) -> Vec<Result<ShardSample, ShardError>> {
    let src = ShardSource::new(
        vec![Uri::Local(path.to_path_buf())],
        DistInfo::single(),
        options(0),
    )
    .unwrap();
    src.epoch(0).collect()
}

#[test]
fn hard_and_symbolic_links_resolve_to_their_targets_bytes() {
    // Case 38 of the shared hard cases (tests/fixtures/38-tar-links-dirs-empty/README.md).
    let case = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/38-tar-links-dirs-empty/links.tar");
    let items = read_shard(&case);
    let samples: Vec<&ShardSample> = items.iter().map(|r| r.as_ref().unwrap()).collect();
    let keys: Vec<&str> = samples.iter().map(|s| s.key.as_str()).collect();
    // The directory and the FIFO are neither samples nor failures.
    assert_eq!(
        keys,
        [
            "data/0001",
            "data/0002",
            "data/0003",
            "data/0004",
            "data/0005",
            "data/0006"
        ]
    );
    let red = samples[0].get("png").unwrap();
    assert_eq!(red.len(), 75);
    assert!(red.starts_with(b"\x89PNG"));
    // The hard link and the symlink carry the red PNG's bytes, as `tarfile.extractfile`.
    assert_eq!(samples[1].get("png"), Some(red));
    assert_eq!(samples[2].get("png"), Some(red));
    for (i, s) in samples.iter().enumerate() {
        assert_eq!(
            s.get("cls"),
            Some((i + 1).to_string().as_bytes()),
            "{}",
            s.key
        );
    }
    assert_eq!(samples[3].get("txt"), Some(&b""[..]));
    assert_eq!(samples[3].get("png").map(<[u8]>::len), Some(76));
    // A 0-byte member is a 0-byte field: the loader judges it.
    assert_eq!(samples[4].get("png"), Some(&b""[..]));

    // Links written by our writer: long targets, `..`, chains, and those that cannot resolve.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("links.tar");
    let mut w = TarWriter::new(std::fs::File::create(&path).unwrap());
    let long_dir = "deep/".repeat(30);
    w.append_dir("a").unwrap();
    w.append("a/1.jpg", b"one").unwrap();
    w.append("a/1.cls", b"1").unwrap();
    w.append(&format!("{long_dir}2.jpg"), b"two").unwrap();
    // Hard link by archive path (long target: a GNU `K` entry), symlink through `..`.
    w.append_link("b/3.jpg", &format!("{long_dir}2.jpg"), true)
        .unwrap();
    w.append_link("b/4.jpg", "../a/1.jpg", false).unwrap();
    // A chain: a symlink to a hard link.
    w.append_link("b/5.jpg", "3.jpg", false).unwrap();
    w.append("b/5.cls", b"5").unwrap();
    // Unresolvable: a later member, outside the archive, absolute, missing.
    w.append_link("c/6.jpg", "7.jpg", false).unwrap();
    w.append("c/7.jpg", b"seven").unwrap();
    w.append_link("c/8.jpg", "../../x.jpg", false).unwrap();
    w.append_link("c/9.jpg", "/etc/passwd", false).unwrap();
    w.append_link("c/10.jpg", "c/none.jpg", true).unwrap();
    w.finish().unwrap();
    let items = read_shard(&path);
    let shown: Vec<String> = items
        .iter()
        .map(|r| match r {
            Ok(s) => format!("{} {:?}", s.key, s.fields),
            Err(e) => format!("{:?} {}", e.kind, e.key.as_deref().unwrap_or("-")),
        })
        .collect();
    let field = |v: &[u8]| format!("{:?}", [("jpg".to_owned(), v.to_vec())]);
    assert_eq!(
        shown,
        [
            format!(
                "a/1 {:?}",
                [
                    ("jpg".to_owned(), b"one".to_vec()),
                    ("cls".into(), b"1".to_vec())
                ]
            ),
            format!("{long_dir}2 {}", field(b"two")),
            format!("b/3 {}", field(b"two")),
            format!("b/4 {}", field(b"one")),
            format!(
                "b/5 {:?}",
                [
                    ("jpg".to_owned(), b"two".to_vec()),
                    ("cls".into(), b"5".to_vec())
                ]
            ),
            "Link c/6".to_owned(),
            format!("c/7 {}", field(b"seven")),
            "Link c/8".to_owned(),
            "Link c/9".to_owned(),
            "Link c/10".to_owned(),
        ]
    );
    let reason = |i: usize| items[i].as_ref().unwrap_err().to_string();
    assert!(
        reason(5).contains(
            "c/6.jpg: symbolic link to \"c/7.jpg\": no member of that name before the link"
        ),
        "{}",
        reason(5)
    );
    assert!(reason(7).contains("outside the archive"), "{}", reason(7));
    assert!(reason(8).contains("outside the archive"), "{}", reason(8));
    assert!(
        reason(9).contains("hard link to \"c/none.jpg\""),
        "{}",
        reason(9)
    );
    assert!(reason(9).starts_with("unresolved link: "), "{}", reason(9));
}

/// `shown` of each item of one shard file.
fn items_shown(path: &Path) -> Vec<String> {
    read_shard(path)
        .iter()
        .map(|r| match r {
            Ok(s) => {
                let fields: Vec<&str> = s.fields.iter().map(|(f, _)| f.as_str()).collect();
                format!("{} {}", s.key, fields.join("+"))
            }
            Err(e) => format!("{:?} {}", e.kind, e.key.as_deref().unwrap_or("-")),
        })
        .collect()
}

#[test]
fn a_cut_shard_delivers_its_whole_samples_and_fails_the_cut_one_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = TarWriter::new(Vec::new());
    let mut starts = Vec::new();
    for key in ["a", "b", "c"] {
        for (field, size) in [("jpg", 700), ("cls", 1)] {
            starts.push(w.bytes_written());
            w.append(&format!("{key}.{field}"), &vec![b'x'; size])
                .unwrap();
        }
    }
    let bytes = w.finish().unwrap();
    let end = bytes.len() - 1024;
    let path = dir.path().join("cut.tar");
    let cut = |at: usize| {
        std::fs::write(&path, &bytes[..at]).unwrap();
        items_shown(&path)
    };
    let whole = ["a jpg+cls", "b jpg+cls", "c jpg+cls"];
    // No end-of-archive marker, or half of it, or a cut in the last member's padding: every
    // sample is whole and delivered, nothing failed.
    for at in [
        end,
        end + 700,
        starts[5] as usize + 512 + 1,
        starts[5] as usize + 600,
    ] {
        assert_eq!(cut(at), whole, "cut at {at}");
        // Resumed after any sample, even the last one (at the very end of the data).
        let src = ShardSource::new(
            vec![Uri::Local(path.clone())],
            DistInfo::single(),
            options(0),
        )
        .unwrap();
        for k in 0..=3 {
            let mut it = src.epoch(0);
            it.by_ref().take(k).for_each(drop);
            let rest: Vec<String> = src
                .resume(&it.state())
                .unwrap()
                .map(|i| shown(&i))
                .collect();
            let want: Vec<String> = src.epoch(0).skip(k).map(|i| shown(&i)).collect();
            assert_eq!(want.len(), 3 - k);
            assert_eq!(rest, want, "cut at {at}, resumed after {k}");
        }
    }
    // Cut inside c.jpg's data: a and b delivered, c one failure; its bytes go nowhere.
    assert_eq!(
        cut(starts[4] as usize + 512 + 300),
        ["a jpg+cls", "b jpg+cls", "Truncated c"]
    );
    let items = read_shard(&path);
    let e = items[2].as_ref().unwrap_err();
    assert!(
        e.to_string()
            .contains("cut.tar: sample c: truncated: c.jpg:"),
        "{e}"
    );
    // Cut inside c.jpg's header after its name: b is whole (the next key is c).
    assert_eq!(
        cut(starts[4] as usize + 500),
        ["a jpg+cls", "b jpg+cls", "Truncated c"]
    );
    // Cut inside b.cls's header after its name: b may miss members, it fails.
    assert_eq!(cut(starts[3] as usize + 511), ["a jpg+cls", "Truncated b"]);
    // Cut before the header's name is whole: the sample being read fails, once.
    assert_eq!(cut(starts[4] as usize + 50), ["a jpg+cls", "Truncated b"]);
    // Every sample seen is accounted for: samples + failures = keys seen.
    for at in (0..bytes.len()).step_by(97) {
        let got = cut(at);
        let keys: std::collections::BTreeSet<&str> =
            got.iter().map(|s| s.split(' ').next().unwrap()).collect();
        assert!(got.len() <= 3, "cut at {at}: {got:?}");
        let failed = got.iter().filter(|s| s.starts_with("Truncated")).count();
        assert!(failed <= 1, "cut at {at}: {got:?}");
        assert!(
            keys.len() == got.len() || failed == 1,
            "cut at {at}: {got:?}"
        );
    }
}

#[test]
fn keys_out_of_order_fail_once_and_never_as_half_samples() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mixed.tar");
    let mut w = TarWriter::new(std::fs::File::create(&path).unwrap());
    // a's label comes after b's image, b's after a's label: both are broken, one failure
    // each; c is whole.
    for name in ["a.jpg", "b.jpg", "a.cls", "b.cls", "c.jpg", "c.cls"] {
        w.append(name, name.as_bytes()).unwrap();
    }
    // x reappears after more samples than the window holds: its first part was handed on,
    // the later one is a failure of its own.
    w.append("x.jpg", b"x").unwrap();
    for i in 0..spdl_sources::shards::REGROUP_WINDOW + 1 {
        w.append(&format!("f{i:02}.jpg"), b"f").unwrap();
    }
    w.append("x.cls", b"late").unwrap();
    w.append("x.json", b"late").unwrap();
    w.append("z.jpg", b"z").unwrap();
    w.finish().unwrap();
    let got = items_shown(&path);
    let mut want = vec![
        "KeyNotGrouped a".to_owned(),
        "KeyNotGrouped b".into(),
        "c jpg+cls".into(),
        "x jpg".into(),
    ];
    want.extend((0..=spdl_sources::shards::REGROUP_WINDOW).map(|i| format!("f{i:02} jpg")));
    want.extend(["KeyNotGrouped x".into(), "z jpg".into()]);
    assert_eq!(got, want);
    // Resumed after any item, the rest is exactly the same: a's failure spans b's start, so
    // a state after it goes back before b and passes over what was handed on.
    let src = ShardSource::new(
        vec![Uri::Local(path.clone())],
        DistInfo::single(),
        options(0),
    )
    .unwrap();
    let all: Vec<String> = src.epoch(0).map(|i| shown(&i)).collect();
    for k in 0..=all.len() {
        let mut it = src.epoch(0);
        it.by_ref().take(k).for_each(drop);
        let state = it.state();
        assert_eq!(state.skip > 0, k == 1, "after {k}: {state:?}");
        let json = serde_json::to_string(&state).unwrap();
        let rest: Vec<String> = src
            .resume(&serde_json::from_str(&json).unwrap())
            .unwrap()
            .map(|i| shown(&i))
            .collect();
        // Bounded: a read resumed after x's first part was handed on (item 4 on) does not
        // know x, and reads its later part as a sample (documented on `Samples`).
        let want: Vec<String> = all[k..]
            .iter()
            .map(
                |s| match s.contains("KeyNotGrouped Some(\"x\")") && k >= 4 {
                    true => "x".to_owned(),
                    false => s.clone(),
                },
            )
            .collect();
        assert_eq!(rest, want, "resumed after {k}");
    }
    let items = read_shard(&path);
    let e = items[0].as_ref().unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "key not grouped: {}: sample a: members of this key are not consecutive (a.cls comes after other samples)",
            path.display()
        )
    );
}

#[test]
fn links_resolve_far_back_and_after_a_resume() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("far.tar");
    let mut w = TarWriter::new(std::fs::File::create(&path).unwrap());
    w.append("t.jpg", b"target").unwrap();
    let n = spdl_sources::shards::REGROUP_WINDOW + 4;
    for i in 0..n {
        w.append(&format!("s{i:02}.jpg"), i.to_string().as_bytes())
            .unwrap();
    }
    // Further back than the held samples: the shard is read again up to the link.
    w.append_link("h.jpg", "t.jpg", true).unwrap();
    w.append_link("y.jpg", "h.jpg", false).unwrap();
    w.finish().unwrap();
    let src = ShardSource::new(vec![Uri::Local(path)], DistInfo::single(), options(0)).unwrap();
    for buffer in [0, 4] {
        let src = src.clone().with_shuffle_buffer(buffer);
        let all: Vec<_> = src.epoch(0).map(Result::unwrap).collect();
        assert_eq!(all.len(), n + 3);
        for s in all
            .iter()
            .filter(|s| ["t", "h", "y"].contains(&s.key.as_str()))
        {
            assert_eq!(s.get("jpg"), Some(&b"target"[..]), "{}", s.key);
        }
        // Resumed after any sample: the rest is the same, links resolved.
        for k in 0..all.len() {
            let mut it = src.epoch(0);
            it.by_ref().take(k).for_each(drop);
            let rest: Vec<_> = src
                .resume(&it.state())
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert_eq!(rest, all[k..], "buffer {buffer}, resumed after {k}");
        }
    }
}

#[test]
fn a_sample_without_a_required_field_is_one_named_failure() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("labels.tar");
    write_members(
        &path,
        &[
            ("a.jpg", "1"),
            ("a.cls", "1"),
            ("b.cls", "2"),
            ("b.json", "{}"),
            ("c.png", "3"),
        ],
    );
    let src = ShardSource::new(
        vec![Uri::Local(path.clone())],
        DistInfo::single(),
        options(0),
    )
    .unwrap()
    .with_required_fields(vec![vec!["jpg".into(), "png".into()]]);
    let items: Vec<_> = src.epoch(0).collect();
    assert_eq!(
        items.iter().map(shown).collect::<Vec<_>>(),
        [
            "a".to_owned(),
            format!("failed MissingField Some(\"b\") in {}", path.display()),
            "c".to_owned(),
        ]
    );
    assert_eq!(
        items[1].as_ref().unwrap_err().to_string(),
        format!(
            "missing field: {}: sample b: no field jpg or png; its fields: cls, json",
            path.display()
        )
    );
    // Without the requirement, b is a sample like any other.
    let src = ShardSource::new(vec![Uri::Local(path)], DistInfo::single(), options(0)).unwrap();
    assert!(src.epoch(0).all(|i| i.is_ok()));
}
