//! What the image and media test helpers share: fixture paths, file reads and the `.npy`
//! reader (format versions 1 and 2, C order); each helper widens the body to the sample type
//! it compares with.

use std::path::PathBuf;

/// `tests/fixtures/<rel>` of this crate.
pub(crate) fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// The file's bytes; panics naming the path.
pub(crate) fn read(path: &PathBuf) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The largest absolute difference between `a` and `b`, sample by sample (0 when both are
/// empty); panics if their lengths differ.
pub(crate) fn largest_diff<T: Copy + Into<i64>>(a: &[T], b: &[T]) -> i64 {
    assert_eq!(a.len(), b.len(), "sample counts differ");
    a.iter()
        .zip(b)
        .map(|(&x, &y)| (x.into() - y.into()).abs())
        .max()
        .unwrap_or(0)
}

/// A reference array: shape and samples widened to `T`.
#[derive(Debug)]
pub(crate) struct Npy<T> {
    pub(crate) shape: Vec<usize>,
    pub(crate) data: Vec<T>,
}

/// Reads the `.npy` file at `path` of dtype `|u1`, or `wide` (e.g. `<u2`) of `size`-byte
/// samples that `sample` reads; panics naming any other dtype and the file.
pub(crate) fn load<T: From<u8>>(
    path: &PathBuf,
    wide: &str,
    size: usize,
    sample: impl Fn(&[u8]) -> T,
) -> Npy<T> {
    let bytes = read(path);
    let (shape, descr, body) = parse(&bytes);
    let data = match descr.as_str() {
        "|u1" => body.iter().map(|&v| T::from(v)).collect(),
        d if d == wide => body.chunks_exact(size).map(sample).collect(),
        other => panic!("unsupported dtype {other} in {}", path.display()),
    };
    Npy { shape, data }
}

/// Shape, dtype descriptor (e.g. `|u1`, `<u2`, `<f4`) and the raw little-endian body.
pub(crate) fn parse(b: &[u8]) -> (Vec<usize>, String, &[u8]) {
    assert_eq!(&b[..6], b"\x93NUMPY");
    let (hlen, start) = if b[6] == 1 {
        (u16::from_le_bytes([b[8], b[9]]) as usize, 10)
    } else {
        (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12)
    };
    let header = std::str::from_utf8(&b[start..start + hlen]).unwrap();
    assert!(header.contains("'fortran_order': False"), "{header}");
    let field = |name: &str, close: char| {
        header
            .split(name)
            .nth(1)
            .and_then(|s| s.split(close).next())
            .unwrap_or_default()
    };
    let shape = field("'shape': (", ')')
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let descr = field("'descr': '", '\'').to_string();
    (shape, descr, &b[start + hlen..])
}
