//! The array and container targets: NPY, NPZ, tar and WAV parsers of `spdl_io::array`.

use spdl_io::array::npz::NpzArchive;
use spdl_io::array::{npy, tar, wav};

/// `npy`: header and payload checks; a parsed array's bytes must be inside the input and as
/// long as its shape and dtype say. Accepted: the array loaded.
pub fn npy(data: &[u8]) -> bool {
    let header = npy::parse_header(data);
    let Ok(array) = npy::load_npy(data) else {
        return false;
    };
    assert!(
        header.is_ok(),
        "load_npy accepted what parse_header refused"
    );
    assert_eq!(array.data.len(), array.header.nbytes);
    assert!(array.header.data_offset + array.header.nbytes <= data.len());
    true
}

/// `npz`: the ZIP directory (ZIP64 too), then every member, stored or deflated, under a 1 MiB
/// uncompressed limit checked before inflating. Accepted: the directory parsed.
pub fn npz(data: &[u8]) -> bool {
    let Ok(archive) = NpzArchive::parse(data, 1 << 20) else {
        return false;
    };
    for entry in archive.entries() {
        let _ = archive.member(data, entry);
    }
    true
}

/// `tar`: the in-memory walk (zero-copy offsets) and the streaming reader over the same bytes
/// must agree on every member they both yield. Accepted: at least one member was read.
pub fn tar(data: &[u8]) -> bool {
    let in_memory: Vec<(String, Vec<u8>)> = tar::members(data)
        .map_while(Result::ok)
        .map(|m| {
            let start = usize::try_from(m.offset).expect("an offset inside the input");
            let end = start + usize::try_from(m.size).expect("a size inside the input");
            assert!(end <= data.len(), "member {} runs past the input", m.name);
            (m.name, data[start..end].to_vec())
        })
        .collect();
    let streamed: Vec<(String, Vec<u8>)> =
        tar::TarReader::new(data).map_while(Result::ok).collect();
    let n = in_memory.len().min(streamed.len());
    assert_eq!(in_memory[..n], streamed[..n], "the two readers disagree");
    n > 0
}

/// `wav`: header chunks, then windows chosen by the first two input bytes (start `a / 16` s,
/// duration `b / 8` s); a window's bytes must be whole frames inside the input. Accepted: the
/// header parsed.
pub fn wav(input: &[u8]) -> bool {
    let (offset, duration, data) = match input {
        [a, b, rest @ ..] => (f64::from(*a) / 16.0, f64::from(*b) / 8.0, rest),
        _ => return false,
    };
    let Ok(header) = wav::parse_wav(data) else {
        return false;
    };
    for (o, d) in [
        (None, None),
        (Some(offset), Some(duration)),
        (Some(offset), None),
    ] {
        if let Ok(w) = wav::load_wav(data, o, d) {
            assert_eq!(w.bytes.len(), w.frames * header.block_align as usize);
            assert!(w.offset + w.bytes.len() <= data.len());
        }
    }
    true
}
