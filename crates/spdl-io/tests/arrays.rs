//! The array/archive/WAV fast paths against files written by the reference implementations
//! (NumPy, zipfile, tarfile, GNU tar, wave, ffmpeg): `tests/fixtures/arrays`, made by its
//! `make_fixtures.py`, whose `manifest.json` says what each file must read back as.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};
use spdl_io::array::{npy, npz, tar, wav};
use spdl_io::ErrorKind;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/arrays")
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn manifest() -> Value {
    serde_json::from_slice(&read(&dir().join("manifest.json"))).expect("manifest.json")
}

fn sha(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

fn shape(v: &Value) -> Vec<usize> {
    v.as_array()
        .expect("shape")
        .iter()
        .map(|d| d.as_u64().expect("dim") as usize)
        .collect()
}

/// The header and payload match what NumPy said it wrote.
fn check_npy(name: &str, h: &npy::NpyHeader, payload: &[u8], want: &Value) {
    assert_eq!(h.dtype.descr, want["descr"].as_str().unwrap(), "{name}");
    assert_eq!(h.shape, shape(&want["shape"]), "{name}");
    assert_eq!(
        h.fortran_order,
        want["fortran_order"].as_bool().unwrap(),
        "{name}"
    );
    assert_eq!(sha(payload), want["sha256"].as_str().unwrap(), "{name}");
}

#[test]
fn npy_every_dtype_byte_order_and_layout_numpy_writes() {
    let m = manifest();
    let files = m["npy"].as_object().unwrap();
    assert!(files.len() >= 50, "{}", files.len());
    for (name, want) in files {
        let bytes = read(&dir().join("npy").join(name));
        let a = npy::load_npy(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        check_npy(name, &a.header, a.data, want);
        assert_eq!(a.data.len(), a.header.nbytes);
        // NumPy pads the header so that the payload is 64-byte aligned.
        assert_eq!(a.header.data_offset % 64, 0, "{name}");
    }
}

#[test]
fn npy_values_decode_by_hand() {
    // arange(12).reshape(3, 4) as little-endian f8, C and Fortran order.
    let c = read(&dir().join("npy/le_f8.npy"));
    let a = npy::load_npy(&c).unwrap();
    let v: Vec<f64> = a
        .data
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(v, (0..12).map(f64::from).collect::<Vec<_>>());

    let f = read(&dir().join("npy/le_i4_fortran.npy"));
    let a = npy::load_npy(&f).unwrap();
    assert!(a.header.fortran_order);
    let v: Vec<i32> = a
        .data
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    // Column-major: element (r, c) = 4r + c stored column by column.
    let want: Vec<i32> = (0..4)
        .flat_map(|c| (0..3).map(move |r| 4 * r + c))
        .collect();
    assert_eq!(v, want);

    let be = read(&dir().join("npy/le_u2_be.npy"));
    let a = npy::load_npy(&be).unwrap();
    assert_eq!(a.header.dtype.descr, ">u2");
    assert_eq!(&a.data[..6], [0, 0, 0, 1, 0, 2]);
    assert_eq!(
        npy::load_npy(&read(&dir().join("npy/v2_i4.npy")))
            .unwrap()
            .header
            .version,
        (2, 0)
    );
}

#[test]
fn npy_object_and_structured_are_unsupported() {
    for name in ["object.npy", "structured.npy"] {
        let err = npy::load_npy(&read(&dir().join("npy").join(name))).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported, "{name}: {err}");
    }
}

#[test]
fn npz_stored_and_deflated_members() {
    let m = manifest();
    for (name, members) in m["npz"].as_object().unwrap() {
        let bytes = read(&dir().join("npz").join(name));
        let archive = npz::NpzArchive::parse(&bytes, npz::DEFAULT_MAX_UNCOMPRESSED_BYTES)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let names: Vec<&str> = archive.entries().iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["x.npy", "y.npy", "img.npy", "be.npy"], "{name}");
        for (member, want) in members.as_object().unwrap() {
            let entry = archive.get(member).unwrap();
            let stem = member.strip_suffix(".npy").unwrap();
            assert_eq!(
                archive.get(stem),
                Some(entry),
                "{name}: lookup without .npy"
            );
            let got = archive.member(&bytes, entry).unwrap();
            let h = &got.header;
            check_npy(member, h, &got.bytes[h.data_offset..][..h.nbytes], want);
            let stored = name.starts_with("stored");
            assert_eq!(
                matches!(got.bytes, std::borrow::Cow::Borrowed(_)),
                stored,
                "{name}/{member}: stored members are borrowed, deflated ones owned"
            );
            assert_eq!(
                entry.compression,
                if stored {
                    npz::Compression::Stored
                } else {
                    npz::Compression::Deflated
                }
            );
        }
        assert!(archive.get("nope").is_none());
    }
}

#[test]
fn npz_limit_is_checked_before_inflating() {
    let bytes = read(&dir().join("npz/deflated.npz"));
    let full = npz::NpzArchive::parse(&bytes, u64::MAX).unwrap();
    let total: u64 = full.entries().iter().map(|e| e.uncompressed_size).sum();
    assert!(npz::NpzArchive::parse(&bytes, total).is_ok());
    let err = npz::NpzArchive::parse(&bytes, total - 1).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LimitExceeded);
    assert!(err.to_string().contains("max_uncompressed_bytes"), "{err}");
    // Stored members do not count: they are never inflated.
    let stored = read(&dir().join("npz/stored.npz"));
    assert!(npz::NpzArchive::parse(&stored, 0).is_ok());
}

#[test]
fn npz_corruption_is_named() {
    let bytes = read(&dir().join("npz/deflated.npz"));
    let archive = npz::NpzArchive::parse(&bytes, u64::MAX).unwrap();
    let entry = archive.get("y").unwrap().clone();

    // A flipped byte inside the deflate stream: bad data or a CRC mismatch, never garbage.
    let mut bad = bytes.clone();
    bad[entry.offset as usize + entry.compressed_size as usize / 2] ^= 0x55;
    let err = archive.member(&bad, &entry).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Corrupt | ErrorKind::Truncated),
        "{err}"
    );
    assert_eq!(err.key(), "y.npy");

    // A lying declared size: the stream inflates to more, caught without a larger buffer.
    let mut small = entry.clone();
    small.uncompressed_size -= 1;
    let err = archive.member(&bytes, &small).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");

    // The archive cut short loses its directory.
    let err = npz::NpzArchive::parse(&bytes[..bytes.len() - 30], u64::MAX).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Truncated | ErrorKind::Corrupt),
        "{err}"
    );
    let err = npz::NpzArchive::parse(b"not a zip at all, just some text here", 1).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UnknownFormat);
}

#[test]
fn tar_members_match_tarfile_and_gnu_tar() {
    let m = manifest();
    let archives = m["tar"].as_object().unwrap();
    assert!(archives.len() >= 3);
    for (name, want) in archives {
        let bytes = read(&dir().join("tar").join(name));
        let want: Vec<(String, String, u64)> = want
            .as_array()
            .unwrap()
            .iter()
            .map(|w| {
                (
                    w[0].as_str().unwrap().to_owned(),
                    w[1].as_str().unwrap().to_owned(),
                    w[2].as_u64().unwrap(),
                )
            })
            .collect();
        let in_memory: Vec<(String, String, u64)> = tar::members(&bytes)
            .map(|r| {
                let m = r.unwrap_or_else(|e| panic!("{name}: {e}"));
                (m.name.clone(), sha(m.data(&bytes)), m.size)
            })
            .collect();
        assert_eq!(in_memory, want, "{name} (in memory)");
        let streamed: Vec<(String, String, u64)> = tar::TarReader::new(bytes.as_slice())
            .map(|r| {
                let (n, d) = r.unwrap_or_else(|e| panic!("{name}: {e}"));
                (n, sha(&d), d.len() as u64)
            })
            .collect();
        assert_eq!(streamed, want, "{name} (streamed)");
    }
}

#[test]
fn tar_truncation_anywhere_is_named_after_a_byte_exact_prefix() {
    let bytes = read(&dir().join("tar/python_pax.tar"));
    let all: Vec<tar::TarMember> = tar::members(&bytes).map(Result::unwrap).collect();
    let last = all.last().unwrap();
    // Where the end-of-archive marker starts: the first zero block after the last member
    // (a symlink header follows it in this archive).
    let end_marker = (last.offset + tar::padded(last.size)..)
        .step_by(tar::BLOCK)
        .find(|&at| bytes[at as usize..][..tar::BLOCK].iter().all(|&b| b == 0))
        .unwrap();
    for cut in (0..bytes.len()).step_by(61) {
        let part = &bytes[..cut];
        let mut got = Vec::new();
        let mut error = None;
        for r in tar::members(part) {
            match r {
                Ok(m) => got.push(m),
                Err(e) => error = Some(e),
            }
        }
        // Whatever is yielded is a prefix of the real members, byte-exact.
        assert_eq!(got[..], all[..got.len()], "cut at {cut}");
        // A cut ends cleanly after the start of the end marker, and where a header would
        // start after a whole member (no end marker, as `tarfile` reads it); elsewhere it is
        // named, after every member whose data is whole.
        // (Cuts fall every 61 bytes: none on a block boundary but 0 in this archive.)
        let clean = cut as u64 > end_marker
            || all.iter().any(|m| {
                (m.offset + m.size..=m.offset + tar::padded(m.size)).contains(&(cut as u64))
            });
        let whole = all
            .iter()
            .filter(|m| m.offset + m.size <= cut as u64)
            .count();
        assert_eq!(got.len(), whole, "cut at {cut}");
        match error {
            None => assert!(clean, "cut at {cut} ended silently"),
            Some(e) => {
                assert!(!clean, "cut at {cut}: {e}");
                let want = if cut == 0 {
                    tar::ErrorKind::Empty
                } else {
                    tar::ErrorKind::Truncated
                };
                assert_eq!(e.kind(), want, "cut at {cut}: {e}");
            }
        }
        // The streaming reader agrees.
        let streamed: Vec<_> = tar::TarReader::new(part).collect();
        let ok = streamed.iter().filter(|r| r.is_ok()).count();
        assert_eq!(ok, got.len(), "cut at {cut}");
        assert_eq!(streamed.len() > ok, !clean, "cut at {cut}");
    }
}

#[test]
fn wav_matches_what_wave_and_ffmpeg_wrote() {
    let m = manifest();
    for (name, want) in m["wav"].as_object().unwrap() {
        let bytes = read(&dir().join("wav").join(name));
        let h = wav::parse_wav(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            h.sample_rate as u64,
            want["rate"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            h.bits_per_sample as u64,
            want["bits"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            h.audio_format as u64,
            want["format"].as_u64().unwrap(),
            "{name}"
        );
        let s = wav::load_wav(&bytes, None, None).unwrap();
        let want_shape = shape(&want["shape"]);
        assert_eq!(
            [s.frames, h.num_channels as usize],
            want_shape[..],
            "{name}"
        );
        if let Some(digest) = want["sha256"].as_str() {
            let got = match s.to_i32() {
                Some(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                None => s.bytes.to_vec(),
            };
            assert_eq!(sha(&got), digest, "{name}");
            let typestr = s.header.sample_format.typestr().unwrap_or("<i4");
            assert_eq!(typestr, want["typestr"].as_str().unwrap(), "{name}");
        }
        // A window: 0.01 s at 8 kHz from 0.02 s = frames 160..240.
        let w = wav::load_wav(&bytes, Some(0.02), Some(0.01)).unwrap();
        assert_eq!(w.frames, 80, "{name}");
        let frame = h.block_align as usize;
        assert_eq!(w.bytes, &s.bytes[160 * frame..240 * frame], "{name}");
    }
}
