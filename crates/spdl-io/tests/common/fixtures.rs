//! The `.npy` header (format versions 1 and 2, C order), shared by the image and media test
//! helpers: each widens the body to the sample type it compares with.

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
