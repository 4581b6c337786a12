//! Property tests of tar shards: random shards (hard and symbolic links, dangling links,
//! empty members, directories, PAX headers, shuffled member order) read whole and cut at
//! every byte of their last three members, through `Samples`, the in-memory and streaming
//! tar readers (`iter_tarfile`'s), and `ShardSource` over 1-8 ranks with a resume after any
//! item. Every sample seen is handed on once, whole or as one failure; nothing panics.
#![cfg(feature = "source-local")]

use std::collections::{BTreeSet, HashMap};
use std::io::Cursor;

use proptest::prelude::*;
use proptest::sample::Index;
use spdl_sources::shards::{Samples, ShardError, ShardSample, ShardSource, ShardState};
use spdl_sources::{DistInfo, Remainder, SamplerOptions, Uri};
use spdl_tar::{self as tar, TarWriter};

const FIELDS: [&str; 4] = ["jpg", "cls", "json", "txt"];

/// What a member holds.
#[derive(Debug, Clone)]
enum Content {
    Bytes(Vec<u8>),
    /// A hard link to one of the shard's regular members (any: earlier or later).
    Hard(Index),
    /// A symbolic link (relative to its directory) to one of the regular members.
    Sym(Index),
    /// A symbolic link to no member.
    Dangling,
}

#[derive(Debug, Clone)]
struct Spec {
    /// Samples in key order: `(field, content, behind a PAX header)` each.
    samples: Vec<Vec<(usize, Content, bool)>>,
    /// Directory entries, each before the member at this index.
    dirs: Vec<Index>,
    /// Member order shuffled with this seed (keys no longer grouped), or written in order.
    shuffle: Option<u64>,
    /// `./d/` or `d/` before every name.
    dot: bool,
    /// Written without the end-of-archive marker (as a killed writer leaves a shard).
    no_end: bool,
}

fn content() -> impl Strategy<Value = Content> {
    prop_oneof![
        5 => prop::collection::vec(any::<u8>(), 0..300).prop_map(Content::Bytes),
        1 => Just(Content::Bytes(Vec::new())),
        1 => any::<Index>().prop_map(Content::Hard),
        1 => any::<Index>().prop_map(Content::Sym),
        1 => Just(Content::Dangling),
    ]
}

fn sample() -> impl Strategy<Value = Vec<(usize, Content, bool)>> {
    (
        prop::sample::subsequence(vec![0usize, 1, 2, 3], 1..=3),
        prop::collection::vec((content(), prop::bool::weighted(0.2)), 3),
    )
        .prop_map(|(fields, contents)| {
            fields
                .into_iter()
                .zip(contents)
                .map(|(f, (c, pax))| (f, c, pax))
                .collect()
        })
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop::collection::vec(sample(), 1..=7),
        prop::collection::vec(any::<Index>(), 0..3),
        prop::option::weighted(0.3, any::<u64>()),
        any::<bool>(),
        prop::bool::weighted(0.3),
    )
        .prop_map(|(samples, dirs, shuffle, dot, no_end)| Spec {
            samples,
            dirs,
            shuffle,
            dot,
            no_end,
        })
}

/// A sample's fields and bytes.
type Fields = Vec<(String, Vec<u8>)>;
/// A key and its fields when delivered (`None`: failed).
type Outcome = (String, Option<Fields>);
/// A key's fields with the bytes they resolve to (`None`: a link that cannot), written order.
type Resolved = HashMap<String, Vec<(String, Option<Vec<u8>>)>>;

/// A member as written.
#[derive(Debug, Clone)]
struct Written {
    key: String,
    field: &'static str,
    /// Normalized path (no `./`).
    path: String,
    /// Link target path (normalized) for links that name a member; `Some("")` dangling.
    link: Option<String>,
    bytes: Vec<u8>,
    /// Offset of its first header (a PAX header's, if any) and of its own header.
    start: u64,
    header: u64,
}

/// A written shard and what reading it must give.
struct Shard {
    bytes: Vec<u8>,
    members: Vec<Written>,
    /// Offset of each directory entry.
    dirs: Vec<u64>,
    /// Per key in order of first appearance: its fields when delivered, `None` when failed.
    expected: Vec<Outcome>,
    /// Per key: its members' fields with the bytes they resolve to (`None`: a link that
    /// cannot), in written order.
    resolved: Resolved,
    grouped: bool,
    /// Where the end-of-archive marker starts (or the data ends without one).
    content_end: u64,
}

/// A small seeded generator (splitmix64) for the member shuffle.
fn mix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn build(spec: &Spec) -> Shard {
    let prefix = if spec.dot { "./d/" } else { "d/" };
    let mut members: Vec<(String, &'static str, Content, bool)> = Vec::new();
    for (i, fields) in spec.samples.iter().enumerate() {
        for (f, content, pax) in fields {
            members.push((format!("k{i:02}"), FIELDS[*f], content.clone(), *pax));
        }
    }
    if let Some(seed) = spec.shuffle {
        let mut s = seed;
        for i in (1..members.len()).rev() {
            let j = (mix(&mut s) % (i as u64 + 1)) as usize;
            members.swap(i, j);
        }
    }
    let regular: Vec<String> = members
        .iter()
        .filter(|m| matches!(m.2, Content::Bytes(_)))
        .map(|m| format!("d/{}.{}", m.0, m.1))
        .collect();
    let dir_at: Vec<usize> = spec.dirs.iter().map(|i| i.index(members.len())).collect();
    let mut w = TarWriter::new(Vec::new());
    let mut written = Vec::new();
    let mut dirs = Vec::new();
    for (n, (key, field, content, pax)) in members.into_iter().enumerate() {
        for _ in dir_at.iter().filter(|&&d| d == n) {
            dirs.push(w.bytes_written());
            w.append_dir(&format!("{prefix}sub{n}")).unwrap();
        }
        let name = format!("{prefix}{key}.{field}");
        let start = w.bytes_written();
        let shown = if pax {
            w.append_pax(&[("comment", "x"), ("path", &name)]).unwrap();
            "placeholder"
        } else {
            name.as_str()
        };
        let header = w.bytes_written();
        let target =
            |i: &Index| (!regular.is_empty()).then(|| regular[i.index(regular.len())].clone());
        let (bytes, link) = match &content {
            Content::Bytes(b) => {
                w.append(shown, b).unwrap();
                (b.clone(), None)
            }
            Content::Hard(i) => match target(i) {
                Some(t) => {
                    let stored = if spec.dot {
                        format!("./{t}")
                    } else {
                        t.clone()
                    };
                    w.append_link(shown, &stored, true).unwrap();
                    (Vec::new(), Some(t))
                }
                None => {
                    w.append_link(shown, "nothing.jpg", true).unwrap();
                    (Vec::new(), Some(String::new()))
                }
            },
            Content::Sym(i) => match target(i) {
                Some(t) => {
                    let base = t.rsplit('/').next().unwrap().to_owned();
                    w.append_link(shown, &base, false).unwrap();
                    (Vec::new(), Some(t))
                }
                None => {
                    w.append_link(shown, "nothing.jpg", false).unwrap();
                    (Vec::new(), Some(String::new()))
                }
            },
            Content::Dangling => {
                w.append_link(shown, "../gone/x.jpg", false).unwrap();
                (Vec::new(), Some(String::new()))
            }
        };
        written.push(Written {
            key: format!("{prefix}{key}"),
            field,
            path: format!("d/{key}.{field}"),
            link,
            bytes,
            start,
            header,
        });
    }
    let content_end = w.bytes_written();
    let mut bytes = w.finish().unwrap();
    if spec.no_end {
        bytes.truncate(content_end as usize);
    }

    // The model: links resolve to members earlier in the stream; a key is whole when its
    // members are consecutive and every link of it resolves.
    let mut by_path: HashMap<String, Vec<u8>> = HashMap::new();
    let mut resolved: Resolved = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut last_key: Option<&str> = None;
    let mut broken: BTreeSet<String> = BTreeSet::new();
    for m in &written {
        let data = match &m.link {
            None => Some(m.bytes.clone()),
            Some(t) => by_path.get(t).cloned(),
        };
        if let Some(d) = &data {
            by_path.insert(m.path.clone(), d.clone());
        }
        if last_key != Some(m.key.as_str()) {
            if order.contains(&m.key) {
                broken.insert(m.key.clone());
            } else {
                order.push(m.key.clone());
            }
        }
        last_key = Some(m.key.as_str());
        resolved
            .entry(m.key.clone())
            .or_default()
            .push((m.field.to_owned(), data));
    }
    let expected = order
        .iter()
        .map(|k| {
            let fields = &resolved[k];
            let whole = !broken.contains(k) && fields.iter().all(|(_, d)| d.is_some());
            let fields = whole.then(|| {
                fields
                    .iter()
                    .map(|(f, d)| (f.clone(), d.clone().unwrap_or_default()))
                    .collect()
            });
            (k.clone(), fields)
        })
        .collect();
    Shard {
        bytes,
        members: written,
        dirs,
        expected,
        resolved,
        grouped: broken.is_empty(),
        content_end,
    }
}

type Item = Result<ShardSample, ShardError>;

/// An item as `(key, fields)`: fields `None` for a failure (key `-` when unknown).
fn plain(item: &Item) -> Outcome {
    match item {
        Ok(s) => (s.key.clone(), Some(s.fields.clone())),
        Err(e) => (e.key.clone().unwrap_or_else(|| "-".into()), None),
    }
}

fn read(bytes: &[u8]) -> Vec<Item> {
    Samples::new(Cursor::new(bytes), 0, "p.tar").collect()
}

/// The properties of a read of `shard` cut at byte `cut`.
fn check_cut(shard: &Shard, cut: usize) -> Result<(), TestCaseError> {
    let got: Vec<_> = read(&shard.bytes[..cut]).iter().map(plain).collect();
    // Each key once (at most one failure whose key is not known).
    let keys: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
    let distinct: BTreeSet<&str> = keys.iter().copied().collect();
    prop_assert_eq!(distinct.len(), keys.len(), "cut {}: {:?}", cut, keys);
    for (key, fields) in &got {
        let Some(fields) = fields else { continue };
        // Delivered: the first members of the key, with their whole (resolved) bytes.
        let full = &shard.resolved[key];
        prop_assert!(fields.len() <= full.len(), "cut {}: {}", cut, key);
        for ((f, d), (wf, wd)) in fields.iter().zip(full) {
            prop_assert_eq!(f, wf, "cut {}: {}", cut, key);
            prop_assert_eq!(Some(d), wd.as_ref(), "cut {}: {} {}", cut, key, f);
        }
    }
    if shard.grouped {
        // Keys grouped: each key read whole before the cut, with the next key's header read,
        // is exactly as in the whole shard.
        let content_end = shard.content_end;
        for (i, (key, want)) in shard.expected.iter().enumerate() {
            let last = shard.members.iter().rposition(|m| &m.key == key).unwrap();
            let known = match shard.members.get(last + 1) {
                Some(next) => next.header + 512 <= cut as u64,
                None => cut as u64 >= content_end,
            };
            if known {
                let have = got.iter().find(|(k, _)| k == key);
                prop_assert_eq!(
                    have,
                    Some(&(key.clone(), want.clone())),
                    "cut {} key {}",
                    cut,
                    i
                );
            }
        }
        // A cut on an entry boundary after whole samples fails nothing.
        let starts = shard
            .members
            .iter()
            .map(|m| m.start)
            .chain(shard.dirs.iter().copied());
        let boundary = starts.chain([content_end]).any(|s| s == cut as u64);
        let between_keys = shard
            .members
            .windows(2)
            .any(|w| w[0].key != w[1].key && w[1].start == cut as u64);
        if boundary && between_keys && shard.dirs.is_empty() {
            let n = got.len();
            prop_assert_eq!(&got[..], &shard.expected[..n], "cut {}", cut);
        }
    }
    // `iter_tarfile`'s readers: the regular members whose data is whole, in order, byte-exact
    // (links skipped); then the end, or one `Truncated`.
    let part = &shard.bytes[..cut];
    let regular: Vec<&Written> = shard
        .members
        .iter()
        .filter(|m| m.link.is_none() && m.header + 512 + m.bytes.len() as u64 <= cut as u64)
        .collect();
    let mut in_memory = Vec::new();
    for r in tar::members(part) {
        match r {
            Ok(m) => in_memory.push((m.name.clone(), m.data(part).to_vec())),
            Err(e) => prop_assert_eq!(
                e.kind(),
                if cut == 0 {
                    tar::ErrorKind::Empty
                } else {
                    tar::ErrorKind::Truncated
                },
                "cut {}: {}",
                cut,
                e
            ),
        }
    }
    prop_assert_eq!(in_memory.len(), regular.len(), "cut {}", cut);
    for ((name, data), m) in in_memory.iter().zip(&regular) {
        prop_assert_eq!(name.trim_start_matches("./"), m.path.as_str());
        prop_assert_eq!(data, &m.bytes);
    }
    let streamed: Vec<_> = tar::TarReader::new(part).filter_map(Result::ok).collect();
    prop_assert_eq!(streamed, in_memory, "cut {}", cut);
    Ok(())
}

fn options(seed: u64) -> SamplerOptions {
    SamplerOptions {
        shuffle: true,
        seed,
        remainder: Remainder::Drop,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn every_sample_is_handed_on_once_whole_or_failed(spec in spec()) {
        let shard = build(&spec);
        let got: Vec<_> = read(&shard.bytes).iter().map(plain).collect();
        prop_assert_eq!(&got, &shard.expected);
        // Cut at every byte of the last three members (and the end-of-archive marker).
        let from = shard.members[shard.members.len().saturating_sub(3)].start as usize;
        for cut in from..=shard.bytes.len() {
            check_cut(&shard, cut)?;
        }
        // And a few cuts before them.
        for cut in (0..from).step_by(211) {
            check_cut(&shard, cut)?;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn shards_over_1_to_8_ranks_resume_after_any_item(
        specs in prop::collection::vec(spec(), 1..=4),
        world in 1u64..=8,
        buffer in prop::sample::select(vec![0usize, 3]),
        seed in any::<u64>(),
        at in any::<Index>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let shards: Vec<Shard> = specs.iter().map(build).collect();
        let uris: Vec<Uri> = shards
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let path = dir.path().join(format!("s-{i}.tar"));
                std::fs::write(&path, &s.bytes).unwrap();
                Uri::Local(path)
            })
            .collect();
        let mut dealt = BTreeSet::new();
        for rank in 0..world {
            let src = ShardSource::new(uris.clone(), DistInfo::new(rank, world).unwrap(), options(seed))
                .unwrap()
                .with_shuffle_buffer(buffer);
            let mine = src.epoch_shards(0);
            for s in &mine {
                // No shard read by two ranks.
                prop_assert!(dealt.insert(*s));
            }
            let mut it = src.epoch(0);
            let items: Vec<Item> = it.by_ref().collect();
            let failed = items.iter().filter(|i| i.is_err()).count() as u64;
            prop_assert_eq!(it.failures(), failed);
            // Exactly the expected items of this rank's shards (in shard order without a buffer).
            let mut want: Vec<_> = mine.iter().flat_map(|&s| shards[s].expected.clone()).collect();
            let mut have: Vec<_> = items.iter().map(plain).collect();
            if buffer > 0 {
                want.sort();
                have.sort();
            }
            prop_assert_eq!(&have, &want, "rank {} of {}", rank, world);
            // A state after any item resumes with exactly the rest.
            let k = at.index(items.len() + 1);
            let mut it = src.epoch(0);
            it.by_ref().take(k).for_each(drop);
            let json = serde_json::to_string(&it.state()).unwrap();
            let state: ShardState = serde_json::from_str(&json).unwrap();
            let mut resumed = src.resume(&state).unwrap();
            let rest: Vec<_> = resumed.by_ref().map(|i| plain(&i)).collect();
            let all: Vec<_> = items.iter().map(plain).collect();
            prop_assert_eq!(&rest[..], &all[k..], "rank {} of {}, resumed after {}", rank, world, k);
            prop_assert_eq!(resumed.failures(), failed);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Corrupt bytes anywhere (headers, sizes, checksums, link names): never a panic, each
    /// key at most once, and whatever is delivered holds only bytes of the shard.
    #[test]
    fn corrupt_shards_never_panic_nor_hand_on_a_key_twice(
        spec in spec(),
        flips in prop::collection::vec((any::<Index>(), any::<u8>()), 1..6),
    ) {
        let shard = build(&spec);
        let mut bytes = shard.bytes.clone();
        for (at, value) in &flips {
            let i = at.index(bytes.len());
            bytes[i] = *value;
        }
        let got: Vec<_> = read(&bytes).iter().map(plain).collect();
        let keys: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
        let distinct: BTreeSet<&str> = keys.iter().copied().collect();
        prop_assert_eq!(distinct.len(), keys.len(), "{:?}", keys);
        for (_, fields) in &got {
            for (_, data) in fields.iter().flatten() {
                prop_assert!(data.len() <= bytes.len());
            }
        }
        // The readers of `iter_tarfile` too.
        let _ = tar::members(&bytes).count();
        let _ = tar::TarReader::new(bytes.as_slice()).count();
    }
}
