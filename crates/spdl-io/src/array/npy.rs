//! NumPy `.npy` files: the header parsed, the payload located (never copied).
//!
//! Format (versions 1.0, 2.0, 3.0): the magic `\x93NUMPY`, a version, a little-endian header
//! length (`u16` in 1.0, `u32` after), then a Python dict literal such as
//! `{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }` and the raw elements.
//! Spec: <https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html>.
//!
//! Supported element types are those with a fixed size that NumPy writes as a type string:
//! `b1`, `i1`..`i8`, `u1`..`u8`, `f2`..`f16`, `c8`..`c32`, `S<n>`, `U<n>`, `V<n>`, `M8[unit]`,
//! `m8[unit]`, in either byte order. Object arrays (pickled) and structured dtypes are
//! `Unsupported` errors.
//!
//! ```
//! use spdl_io::array::npy;
//!
//! # fn main() -> Result<(), spdl_io::Error> {
//! // What `numpy.save(f, numpy.array([1, 2], dtype="<u2"))` writes.
//! let mut file = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
//! let dict = "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }";
//! file.extend(format!("{dict:<117}\n").bytes());
//! file.extend([1, 0, 2, 0]);
//!
//! let array = npy::load_npy(&file)?;
//! assert_eq!(array.header.dtype.descr, "<u2");
//! assert_eq!(array.header.shape, [2]);
//! assert_eq!(array.header.data_offset, 128);
//! assert_eq!(array.data, [1, 0, 2, 0]);
//!
//! let err = npy::load_npy(&file[..129]).unwrap_err();
//! assert_eq!(err.kind(), spdl_io::ErrorKind::Truncated);
//! # Ok(())
//! # }
//! ```

use super::{corrupt, le_u16, le_u32, truncated, unsupported};
use crate::error::{Error, ErrorKind, Result};

/// The first six bytes of every `.npy` file.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Byte order of the elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// `<`
    Little,
    /// `>`
    Big,
    /// `|`: one-byte elements, strings and void, where order does not apply.
    NotApplicable,
}

/// The element type of an array.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DType {
    /// The type string as NumPy's `dtype.str` spells it, with an explicit byte order, e.g.
    /// `"<f8"`, `"|u1"`, `">i4"`, `"<U5"`, `"<M8[ns]"` (a native `=` is resolved).
    pub descr: String,
    /// NumPy's kind character: `b`, `i`, `u`, `f`, `c`, `S`, `U`, `V`, `M` or `m`.
    pub kind: char,
    /// Bytes per element (`4 * n` for `U<n>`).
    pub itemsize: usize,
    /// Byte order of multi-byte elements.
    pub byte_order: ByteOrder,
}

/// What an `.npy` header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyHeader {
    /// Format version `(major, minor)`: `(1, 0)`, `(2, 0)` or `(3, 0)`.
    pub version: (u8, u8),
    /// The element type.
    pub dtype: DType,
    /// The shape; empty for a 0-d array.
    pub shape: Vec<usize>,
    /// Whether the elements are in column-major (Fortran) order.
    pub fortran_order: bool,
    /// Offset of the first element from the start of the file, in bytes.
    pub data_offset: usize,
    /// Size of the payload in bytes: the product of `shape` times `dtype.itemsize`.
    pub nbytes: usize,
}

/// An array in place: its header and its payload, borrowed from the file's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyArray<'a> {
    /// The parsed header.
    pub header: NpyHeader,
    /// The elements, `header.nbytes` bytes (`data[header.data_offset..][..header.nbytes]`).
    pub data: &'a [u8],
}

/// Parses the header of an `.npy` file and checks that the payload is all there (bytes past
/// it are ignored, as `numpy.load` does).
///
/// Errors: `UnknownFormat` (no `\x93NUMPY` magic), `Truncated` (header or payload cut short),
/// `Corrupt` (a header that is not a valid dict with exactly the keys `descr`,
/// `fortran_order`, `shape`; negative or overflowing dimensions), `Unsupported` (a version
/// other than 1.0/2.0/3.0, object or structured dtypes).
///
/// Mirrors the header reading of SPDL's `spdl.io.load_npy` and NumPy's
/// `numpy.lib.format.read_array_header_1_0` / `_2_0`.
pub fn parse_header(data: &[u8]) -> Result<NpyHeader> {
    if data.is_empty() {
        return Err(Error::new(ErrorKind::Empty, "no NPY data (0 bytes)"));
    }
    if data.len() < 8 || &data[..6] != MAGIC {
        if MAGIC.starts_with(&data[..data.len().min(6)]) {
            return Err(truncated(format!(
                "{} bytes end inside the NPY magic and version",
                data.len()
            )));
        }
        return Err(Error::new(
            ErrorKind::UnknownFormat,
            "not an NPY file (no \\x93NUMPY magic)",
        ));
    }
    let version = (data[6], data[7]);
    let (len_size, header_len) = match version {
        (1, 0) if data.len() >= 10 => (2, le_u16(data, 8) as usize),
        (2, 0) | (3, 0) if data.len() >= 12 => (4, le_u32(data, 8) as usize),
        (1, 0) | (2, 0) | (3, 0) => {
            return Err(truncated("the NPY header length is cut short"));
        }
        (major, minor) => {
            return Err(unsupported(format!(
                "NPY format version {major}.{minor} (1.0, 2.0 and 3.0 are supported)"
            )))
        }
    };
    let start = 8 + len_size;
    let data_offset = start + header_len;
    let Some(text) = data.get(start..data_offset) else {
        return Err(truncated(format!(
            "the NPY header of {header_len} bytes ends past the end of the data ({} bytes)",
            data.len()
        )));
    };
    let dict = match literal::parse(text)? {
        literal::Lit::Dict(items) => items,
        _ => return Err(corrupt("the NPY header is not a dict")),
    };
    let (mut descr, mut fortran_order, mut shape) = (None, None, None);
    for (key, value) in dict {
        match (key, value) {
            (literal::Lit::Str(k), v) if k == "descr" && descr.is_none() => descr = Some(v),
            (literal::Lit::Str(k), literal::Lit::Bool(b))
                if k == "fortran_order" && fortran_order.is_none() =>
            {
                fortran_order = Some(b)
            }
            (literal::Lit::Str(k), literal::Lit::Tuple(t)) if k == "shape" && shape.is_none() => {
                shape = Some(t)
            }
            (k, _) => {
                return Err(corrupt(format!(
                "unexpected NPY header key {k:?} (or a repeated key, or a value of the wrong type)"
            )))
            }
        }
    }
    let (Some(descr), Some(fortran_order), Some(shape)) = (descr, fortran_order, shape) else {
        return Err(corrupt(
            "the NPY header lacks one of 'descr', 'fortran_order', 'shape'",
        ));
    };
    let dtype = match descr {
        literal::Lit::Str(s) => parse_descr(&s)?,
        literal::Lit::List(_) => {
            return Err(unsupported(
                "structured (record) dtypes are not supported by the NPY fast path",
            ))
        }
        other => {
            return Err(corrupt(format!(
                "NPY 'descr' must be a string, got {other:?}"
            )))
        }
    };
    let shape = shape
        .into_iter()
        .map(|d| match d {
            literal::Lit::Int(n) if n >= 0 && n <= usize::MAX as i128 => Ok(n as usize),
            other => Err(corrupt(format!(
                "NPY shape entries must be non-negative integers, got {other:?}"
            ))),
        })
        .collect::<Result<Vec<usize>>>()?;
    let nbytes = shape
        .iter()
        .try_fold(dtype.itemsize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| {
            corrupt(format!(
                "shape {shape:?} of {} overflows the address space",
                dtype.descr
            ))
        })?;
    let available = data.len() - data_offset;
    if available < nbytes {
        return Err(truncated(format!(
            "the payload of shape {shape:?} {} needs {nbytes} bytes, only {available} present",
            dtype.descr
        )));
    }
    Ok(NpyHeader {
        version,
        dtype,
        shape,
        fortran_order,
        data_offset,
        nbytes,
    })
}

/// Parses an `.npy` file and borrows its payload: no element is copied. Errors as
/// [`parse_header`].
///
/// Mirrors SPDL's `spdl.io.load_npy` (which then wraps the payload in a NumPy array).
pub fn load_npy(data: &[u8]) -> Result<NpyArray<'_>> {
    let header = parse_header(data)?;
    let payload = &data[header.data_offset..header.data_offset + header.nbytes];
    Ok(NpyArray {
        header,
        data: payload,
    })
}

/// Parses a NumPy type string such as `"<f8"`, `"|S5"`, `">M8[ms]"`.
fn parse_descr(s: &str) -> Result<DType> {
    let bad = || unsupported(format!("NPY dtype {s:?} is not supported"));
    let mut chars = s.chars();
    let (order, rest) = match s.chars().next() {
        Some(c @ ('<' | '>' | '|' | '=')) => {
            chars.next();
            (Some(c), chars.as_str())
        }
        _ => (None, s),
    };
    let mut rest_chars = rest.chars();
    let kind = rest_chars.next().ok_or_else(bad)?;
    if kind == 'O' {
        return Err(unsupported(
            "NPY object arrays (dtype 'O', pickled) are not supported",
        ));
    }
    let after_kind = rest_chars.as_str();
    let digits_end = after_kind
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(after_kind.len());
    let (digits, suffix) = after_kind.split_at(digits_end);
    let n: usize = digits.parse().map_err(|_| bad())?;
    let itemsize = match (kind, n, suffix) {
        ('b', 1, "") => 1,
        ('i' | 'u', 1 | 2 | 4 | 8, "") => n,
        ('f', 2 | 4 | 8 | 12 | 16, "") => n,
        ('c', 8 | 16 | 24 | 32, "") => n,
        ('S' | 'V', 1.., "") => n,
        ('U', 1.., "") => n.checked_mul(4).ok_or_else(bad)?,
        ('M' | 'm', 8, unit) if valid_time_unit(unit) => 8,
        _ => return Err(bad()),
    };
    let byte_order = match order {
        _ if itemsize == 1 || matches!(kind, 'S' | 'V') => ByteOrder::NotApplicable,
        Some('<') => ByteOrder::Little,
        Some('>') => ByteOrder::Big,
        // `=`, none, or `|` on a multi-byte type: native order.
        _ if cfg!(target_endian = "big") => ByteOrder::Big,
        _ => ByteOrder::Little,
    };
    let order_char = match byte_order {
        ByteOrder::Little => '<',
        ByteOrder::Big => '>',
        ByteOrder::NotApplicable => '|',
    };
    Ok(DType {
        descr: format!("{order_char}{kind}{digits}{suffix}"),
        kind,
        itemsize,
        byte_order,
    })
}

/// `""` or `"[unit]"` / `"[Nunit]"` with one of NumPy's datetime units.
fn valid_time_unit(s: &str) -> bool {
    if s.is_empty() {
        return true;
    }
    let Some(inner) = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) else {
        return false;
    };
    let unit = inner.trim_start_matches(|c: char| c.is_ascii_digit());
    matches!(
        unit,
        "Y" | "M" | "W" | "D" | "h" | "m" | "s" | "ms" | "us" | "μs" | "ns" | "ps" | "fs" | "as"
    )
}

/// The subset of Python literals an NPY header uses: dicts, tuples, lists, strings,
/// integers, booleans and `None`.
mod literal {
    use super::corrupt;
    use crate::error::Result;

    /// Nesting deeper than this is rejected (a header of `((((...` must not overflow the stack).
    const MAX_DEPTH: usize = 16;

    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(super) enum Lit {
        Str(String),
        Int(i128),
        Bool(bool),
        None,
        Tuple(Vec<Lit>),
        List(Vec<Lit>),
        Dict(Vec<(Lit, Lit)>),
    }

    /// Parses `text` (the whole header, trailing spaces and newline allowed).
    pub(super) fn parse(text: &[u8]) -> Result<Lit> {
        let mut p = Parser { s: text, i: 0 };
        let v = p.value(0)?;
        p.skip_ws();
        if p.i != p.s.len() {
            return Err(corrupt(format!(
                "unexpected text after the NPY header dict at byte {}",
                p.i
            )));
        }
        Ok(v)
    }

    struct Parser<'a> {
        s: &'a [u8],
        i: usize,
    }

    impl Parser<'_> {
        fn skip_ws(&mut self) {
            while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
                self.i += 1;
            }
        }

        fn peek(&mut self) -> Option<u8> {
            self.skip_ws();
            self.s.get(self.i).copied()
        }

        fn err(&self, what: &str) -> crate::Error {
            corrupt(format!("invalid NPY header: {what} at byte {}", self.i))
        }

        fn value(&mut self, depth: usize) -> Result<Lit> {
            if depth > MAX_DEPTH {
                return Err(self.err("nesting too deep"));
            }
            match self.peek() {
                Some(b'{') => {
                    self.i += 1;
                    let mut items = Vec::new();
                    loop {
                        if self.peek() == Some(b'}') {
                            self.i += 1;
                            return Ok(Lit::Dict(items));
                        }
                        let k = self.value(depth + 1)?;
                        if self.peek() != Some(b':') {
                            return Err(self.err("expected ':'"));
                        }
                        self.i += 1;
                        let v = self.value(depth + 1)?;
                        items.push((k, v));
                        match self.peek() {
                            Some(b',') => self.i += 1,
                            Some(b'}') => {}
                            _ => return Err(self.err("expected ',' or '}'")),
                        }
                    }
                }
                Some(open @ (b'(' | b'[')) => {
                    let close = if open == b'(' { b')' } else { b']' };
                    self.i += 1;
                    let mut items = Vec::new();
                    let mut comma = false;
                    loop {
                        if self.peek() == Some(close) {
                            self.i += 1;
                            // `(3)` is an int in Python; `(3,)` a tuple.
                            return Ok(match (open, items.len(), comma) {
                                (b'(', 1, false) => items.pop().unwrap_or(Lit::None),
                                (b'(', _, _) => Lit::Tuple(items),
                                _ => Lit::List(items),
                            });
                        }
                        items.push(self.value(depth + 1)?);
                        match self.peek() {
                            Some(b',') => {
                                self.i += 1;
                                comma = true;
                            }
                            Some(c) if c == close => {}
                            _ => return Err(self.err("expected ',' or a closing bracket")),
                        }
                    }
                }
                Some(q @ (b'\'' | b'"')) => {
                    self.i += 1;
                    let start = self.i;
                    while self.i < self.s.len() && self.s[self.i] != q {
                        if self.s[self.i] == b'\\' {
                            return Err(self.err("escapes in strings are not supported"));
                        }
                        self.i += 1;
                    }
                    if self.i == self.s.len() {
                        return Err(self.err("unterminated string"));
                    }
                    let text = std::str::from_utf8(&self.s[start..self.i])
                        .map_err(|_| self.err("string is not UTF-8"))?
                        .to_owned();
                    self.i += 1;
                    Ok(Lit::Str(text))
                }
                Some(b'-' | b'0'..=b'9') => {
                    let start = self.i;
                    if self.s[self.i] == b'-' {
                        self.i += 1;
                    }
                    while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
                        self.i += 1;
                    }
                    let text = std::str::from_utf8(&self.s[start..self.i])
                        .map_err(|_| self.err("bad integer"))?;
                    let n: i128 = text.parse().map_err(|_| self.err("bad integer"))?;
                    // Python 2 wrote long integers as `3L`.
                    if self.s.get(self.i) == Some(&b'L') {
                        self.i += 1;
                    }
                    Ok(Lit::Int(n))
                }
                Some(_) => {
                    let rest = &self.s[self.i..];
                    for (word, lit) in [
                        (&b"True"[..], Lit::Bool(true)),
                        (b"False", Lit::Bool(false)),
                        (b"None", Lit::None),
                    ] {
                        if rest.starts_with(word) {
                            self.i += word.len();
                            return Ok(lit);
                        }
                    }
                    Err(self.err("unexpected character"))
                }
                None => Err(self.err("unexpected end")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An NPY 1.0 file as NumPy writes it (header padded to 64 bytes).
    fn npy(dict: &str, payload: &[u8]) -> Vec<u8> {
        let mut header = format!("{dict}\n");
        while (10 + header.len()) % 64 != 0 {
            header.insert(header.len() - 1, ' ');
        }
        let mut f = MAGIC.to_vec();
        f.extend([1, 0]);
        f.extend((header.len() as u16).to_le_bytes());
        f.extend(header.bytes());
        f.extend(payload);
        f
    }

    #[test]
    fn parses_what_numpy_writes() {
        let f = npy(
            "{'descr': '>i4', 'fortran_order': True, 'shape': (2, 1), }",
            &[0, 0, 0, 7, 0, 0, 1, 0, 99],
        );
        let a = load_npy(&f).unwrap();
        assert_eq!(a.header.dtype.descr, ">i4");
        assert_eq!(a.header.dtype.byte_order, ByteOrder::Big);
        assert_eq!(a.header.shape, [2, 1]);
        assert!(a.header.fortran_order);
        assert_eq!(a.header.data_offset, 128);
        assert_eq!(a.data, [0, 0, 0, 7, 0, 0, 1, 0]);
    }

    #[test]
    fn zero_d_and_empty_arrays() {
        let f = npy(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (), }",
            &[0; 8],
        );
        assert_eq!(load_npy(&f).unwrap().header.shape, Vec::<usize>::new());
        let f = npy(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 5), }",
            &[],
        );
        assert_eq!(load_npy(&f).unwrap().header.nbytes, 0);
    }

    #[test]
    fn descr_forms() {
        let d = |s| parse_descr(s).unwrap();
        assert_eq!(d("|b1").itemsize, 1);
        assert_eq!(d("<U5").itemsize, 20);
        assert_eq!(d("|S3").byte_order, ByteOrder::NotApplicable);
        assert_eq!(d("<M8[ns]").descr, "<M8[ns]");
        assert_eq!(d("<m8[10s]").itemsize, 8);
        assert_eq!(d("=f4").descr, "<f4");
        assert_eq!(d("<c16").itemsize, 16);
        for bad in [
            "<f3",
            "<i16",
            "|O",
            "<U0",
            "float64",
            "",
            "<M8[lightyears]",
            "<i4x",
        ] {
            assert_eq!(
                parse_descr(bad).unwrap_err().kind(),
                ErrorKind::Unsupported,
                "{bad}"
            );
        }
    }

    #[test]
    fn malformed_headers_are_named_errors() {
        let cases = [
            ("{'descr': '<f8', 'fortran_order': False}", ErrorKind::Corrupt),
            ("{'descr': '<f8', 'fortran_order': 0, 'shape': (1,)}", ErrorKind::Corrupt),
            ("{'descr': '<f8', 'fortran_order': False, 'shape': (-1,)}", ErrorKind::Corrupt),
            ("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), 'x': 1}", ErrorKind::Corrupt),
            ("{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (1,)}", ErrorKind::Unsupported),
            ("{'descr': '|O', 'fortran_order': False, 'shape': (1,)}", ErrorKind::Unsupported),
            ("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296)}", ErrorKind::Corrupt),
            ("[1, 2]", ErrorKind::Corrupt),
            ("{'descr': '<f8'", ErrorKind::Corrupt),
            ("((((((((((((((((((((((((1))))))))))))))))))))))))", ErrorKind::Corrupt),
        ];
        for (dict, kind) in cases {
            let err = load_npy(&npy(dict, &[0; 8])).unwrap_err();
            assert_eq!(err.kind(), kind, "{dict}: {err}");
        }
    }

    #[test]
    fn truncation_and_magic() {
        let f = npy(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",
            &[0; 16],
        );
        let err = load_npy(&f[..f.len() - 1]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Truncated);
        assert!(err.to_string().contains("needs 16 bytes, only 15"), "{err}");
        assert_eq!(load_npy(&f[..30]).unwrap_err().kind(), ErrorKind::Truncated);
        assert_eq!(load_npy(&f[..4]).unwrap_err().kind(), ErrorKind::Truncated);
        assert_eq!(load_npy(b"").unwrap_err().kind(), ErrorKind::Empty);
        assert_eq!(
            load_npy(b"PK\x03\x04 not npy").unwrap_err().kind(),
            ErrorKind::UnknownFormat
        );
        let mut v4 = f.clone();
        v4[6] = 4;
        assert_eq!(load_npy(&v4).unwrap_err().kind(), ErrorKind::Unsupported);
    }
}
