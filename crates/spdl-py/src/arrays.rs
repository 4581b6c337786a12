//! `spdl_rs.io.load_npy` / `load_npz` / `iter_tarfile` / `load_wav` / `parse_wav`: the Rust
//! half. Each function parses with the GIL released and returns where the payload lies; the
//! Python half (`spdl_rs/_array.py`, `_tar.py`, `_wav.py`) makes the NumPy view over the
//! caller's buffer, so that NumPy keeps the buffer alive and inherits its writability.
//! Also the items of the native stages `ops.load_npy` / `ops.load_wav` ([`ArrayOut`]).

use std::sync::Mutex;

use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use spdl_io::array::{npy, npz, tar, wav};

use crate::buffer::CpuBuffer;
use crate::error::{io_err, type_name};
use crate::lock;

/// A C-contiguous Python buffer (`bytes`, `bytearray`, `memoryview`, a NumPy array, ...),
/// read as bytes without the GIL.
///
/// Holding the export keeps the memory alive and stops a `bytearray` from being resized.
pub(crate) struct Bytes(PyUntypedBuffer);

impl Bytes {
    /// Raises `TypeError` for an object without the buffer protocol, `BufferError` for a
    /// non-contiguous one.
    pub(crate) fn new(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        let buf = PyUntypedBuffer::get(obj).map_err(|_| {
            PyTypeError::new_err(format!(
                "data must be bytes-like (bytes, bytearray, memoryview), got {}",
                type_name(obj)
            ))
        })?;
        if !buf.is_c_contiguous() {
            return Err(PyBufferError::new_err("data must be a C-contiguous buffer"));
        }
        Ok(Bytes(buf))
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        let len = self.0.len_bytes();
        if len == 0 {
            return &[];
        }
        // SAFETY: the export `self.0` keeps `len` bytes at `buf_ptr` alive and unmoved (a
        // resize of the exporter is refused while it is held). Another Python thread could
        // write a mutable exporter (bytearray) while we read it, as with any C extension
        // reading a buffer without the GIL; the parsers treat every byte as untrusted, so a
        // racing write can only change what is parsed.
        unsafe { std::slice::from_raw_parts(self.0.buf_ptr().cast::<u8>(), len) }
    }

    /// `parse` run on the bytes with the GIL released; its error as `ValueError`.
    fn parse<T: Send>(
        &self,
        py: Python<'_>,
        parse: impl FnOnce(&[u8]) -> Result<T, spdl_io::Error> + Send,
    ) -> PyResult<T> {
        py.detach(|| parse(self.as_slice())).map_err(io_err)
    }

    /// Address of the first byte (for `__array_interface__`).
    fn address(&self) -> usize {
        self.0.buf_ptr() as usize
    }
}

/// What the Python half needs to make an array: `(owner, typestr, shape, fortran_order,
/// address)`. `owner` is `None` when the elements are in the caller's buffer, at memory
/// address `address`; else a `CPUBuffer` holding them (inflated or converted), at offset
/// `address` from its `data_ptr`.
type ArrayInfo = (Option<CpuBuffer>, String, Vec<usize>, bool, usize);

fn npy_info(owner: Option<CpuBuffer>, h: &npy::NpyHeader, base: usize) -> ArrayInfo {
    (
        owner,
        h.dtype.descr.clone(),
        h.shape.clone(),
        h.fortran_order,
        base + h.data_offset,
    )
}

/// Parses an `.npy` file in `data`; see `spdl_rs.io.load_npy`.
#[pyfunction]
pub(crate) fn _parse_npy(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<ArrayInfo> {
    let bytes = Bytes::new(data)?;
    let header = bytes.parse(py, npy::parse_header)?;
    Ok(npy_info(None, &header, bytes.address()))
}

/// The member index of an `.npz` archive and the buffer it indexes (see
/// `spdl_rs.io.NpzFile`).
#[pyclass(frozen, module = "spdl_rs._native", name = "_NpzIndex")]
pub(crate) struct NpzIndex {
    data: Bytes,
    archive: npz::NpzArchive,
}

#[pymethods]
impl NpzIndex {
    /// Reads the ZIP central directory of `data` (GIL released). Raises `ValueError` for a
    /// malformed archive or when the deflated members declare more than
    /// `max_uncompressed_bytes` in all.
    #[new]
    fn new(py: Python<'_>, data: &Bound<'_, PyAny>, max_uncompressed_bytes: u64) -> PyResult<Self> {
        let data = Bytes::new(data)?;
        let archive = data.parse(py, |d| npz::NpzArchive::parse(d, max_uncompressed_bytes))?;
        Ok(NpzIndex { data, archive })
    }

    /// Member names in archive order (with their `.npy` suffix).
    fn names(&self) -> Vec<String> {
        self.archive
            .entries()
            .iter()
            .map(|e| e.name.clone())
            .collect()
    }

    /// The array info of member `key` (or `key + ".npy"`), `None` if there is none. A stored
    /// member stays in the archive buffer; a deflated one is inflated (GIL released) into a
    /// `CPUBuffer`. Raises `ValueError` naming the member for bad data.
    fn member(&self, py: Python<'_>, key: &str) -> PyResult<Option<ArrayInfo>> {
        let Some(entry) = self.archive.get(key) else {
            return Ok(None);
        };
        let data = &self.data;
        let (owned, header) = py
            .detach(|| {
                let m = self.archive.member(data.as_slice(), entry)?;
                let owned = match m.bytes {
                    std::borrow::Cow::Owned(v) => Some(v),
                    std::borrow::Cow::Borrowed(_) => None,
                };
                Ok::<_, spdl_io::Error>((owned, m.header))
            })
            .map_err(io_err)?;
        Ok(Some(match owned {
            Some(v) => {
                let n = v.len();
                let buf = CpuBuffer::from_u8(v, vec![n], entry.name.clone());
                npy_info(Some(buf), &header, 0)
            }
            None => npy_info(None, &header, data.address() + entry.offset as usize),
        }))
    }
}

/// Iterates over the regular files of a tar archive held in a buffer, as
/// `(name, offset, size)` (see `spdl_rs.io.iter_tarfile`).
#[pyclass(module = "spdl_rs._native", name = "_TarMembers")]
pub(crate) struct TarMembers {
    data: Bytes,
    cursor: Mutex<tar::TarCursor>,
}

#[pymethods]
impl TarMembers {
    #[new]
    fn new(data: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(TarMembers {
            data: Bytes::new(data)?,
            cursor: Mutex::new(tar::TarCursor::new()),
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next member; raises `ValueError` naming the member or header for bad data.
    ///
    /// Runs with the GIL held: a step reads one or a few 512-byte headers (microseconds), and
    /// giving the GIL up and taking it back per member cost more than that whenever other
    /// threads hold it (e.g. copying members out with `bytes()`), slowing every thread down.
    fn __next__(&self) -> PyResult<Option<(String, u64, u64)>> {
        let member = lock(&self.cursor)
            .next_member(self.data.as_slice())
            .map_err(io_err)?;
        Ok(member.map(|m| (m.name, m.offset, m.size)))
    }
}

/// Iterates over the regular files of a tar archive read from a file-like object's
/// `read(n)`, as `(name, bytes)` (see `spdl_rs.io.iter_tarfile`). Holds the GIL: every step
/// calls Python.
#[pyclass(module = "spdl_rs._native", name = "_TarStream")]
pub(crate) struct TarStream {
    file: Py<PyAny>,
    state: Mutex<StreamState>,
}

#[derive(Default)]
struct StreamState {
    decoder: tar::TarDecoder,
    /// Iteration is over (the end, or an error).
    done: bool,
    /// Some bytes were read (no bytes at all is `Empty`, not a missing end marker).
    started: bool,
}

impl TarStream {
    /// Reads exactly `n` bytes (calling `read` until it has them or gets `b""`).
    fn read<'py>(&self, py: Python<'py>, n: u64) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let mut parts = Vec::new();
        let mut got = 0u64;
        while got < n {
            let chunk = self.file.bind(py).call_method1("read", (n - got,))?;
            let chunk = chunk.cast_into::<PyBytes>().map_err(|e| {
                PyTypeError::new_err(format!(
                    "read() must return bytes, got {}",
                    type_name(e.into_inner().as_any())
                ))
            })?;
            let len = chunk.as_bytes().len() as u64;
            if len == 0 {
                break;
            }
            if len > n - got {
                return Err(io_err(spdl_io::Error::new(
                    spdl_io::ErrorKind::InvalidArgument,
                    format!("read({}) returned {len} bytes", n - got),
                )));
            }
            got += len;
            parts.push(chunk);
        }
        Ok(parts)
    }

    /// Reads exactly `n` bytes as one `bytes`, or raises a `Truncated` `ValueError` keyed by
    /// `key` (the member's name, or empty for an extended header).
    fn read_exact<'py>(&self, py: Python<'py>, n: u64, key: &str) -> PyResult<Bound<'py, PyBytes>> {
        let parts = self.read(py, n)?;
        let got: u64 = parts.iter().map(|p| p.as_bytes().len() as u64).sum();
        if got < n {
            return Err(io_err(
                spdl_io::Error::new(
                    spdl_io::ErrorKind::Truncated,
                    format!("the tar stream ends after {got} of {n} bytes"),
                )
                .with_key(key),
            ));
        }
        Ok(match parts.len() {
            1 => parts.into_iter().next().expect("one part"),
            _ => PyBytes::new(
                py,
                &parts
                    .iter()
                    .flat_map(|p| p.as_bytes())
                    .copied()
                    .collect::<Vec<u8>>(),
            ),
        })
    }

    fn skip(&self, py: Python<'_>, n: u64) -> PyResult<u64> {
        let mut left = n;
        while left > 0 {
            let step = left.min(1 << 20);
            let got: u64 = self
                .read(py, step)?
                .iter()
                .map(|p| p.as_bytes().len() as u64)
                .sum();
            left -= got;
            if got < step {
                break;
            }
        }
        Ok(n - left)
    }

    fn advance(
        &self,
        py: Python<'_>,
        state: &mut StreamState,
    ) -> PyResult<Option<(String, Py<PyBytes>)>> {
        loop {
            let parts = self.read(py, tar::BLOCK as u64)?;
            let block: Vec<u8> = parts.iter().flat_map(|p| p.as_bytes()).copied().collect();
            if block.is_empty() && !state.started {
                return Err(io_err(spdl_io::Error::new(
                    spdl_io::ErrorKind::Empty,
                    "no tar data (0 bytes)",
                )));
            }
            state.started = true;
            if block.len() < tar::BLOCK {
                // No end marker after a whole member (as `tarfile` reads it), or the marker
                // cut short: every member is whole.
                if !state.decoder.has_pending() && block.iter().all(|&b| b == 0) {
                    return Ok(None);
                }
                let e = spdl_io::Error::new(
                    spdl_io::ErrorKind::Truncated,
                    "the tar stream ends inside a header",
                );
                return Err(io_err(match state.decoder.partial_name(&block) {
                    Some(name) => e.with_key(&name),
                    None => e,
                }));
            }
            match state.decoder.header(&block).map_err(io_err)? {
                tar::Record::End => return Ok(None),
                tar::Record::File { name, size } => {
                    let data = self.read_exact(py, size, &name)?;
                    // The stream may end inside the last member's padding: the data is whole.
                    self.skip(py, tar::padded(size) - size)?;
                    return Ok(Some((name, data.unbind())));
                }
                tar::Record::Meta { size } => {
                    let data = self.read_exact(py, size, "")?;
                    state.decoder.meta(data.as_bytes()).map_err(io_err)?;
                    self.skip(py, tar::padded(size) - size)?;
                }
                // Links carry no data; SPDL 0.8.0's `iter_tarfile` skips them.
                tar::Record::Link { .. } => {}
                tar::Record::Skip { size } => {
                    if self.skip(py, size)? < size {
                        return Err(io_err(spdl_io::Error::new(
                            spdl_io::ErrorKind::Truncated,
                            "the tar stream ends inside an entry",
                        )));
                    }
                    self.skip(py, tar::padded(size) - size)?;
                }
            }
        }
    }
}

#[pymethods]
impl TarStream {
    #[new]
    fn new(file: Py<PyAny>) -> Self {
        TarStream {
            file,
            state: Mutex::new(StreamState::default()),
        }
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next `(name, bytes)`; raises `ValueError` for bad or truncated data, and whatever
    /// `read` raises.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<(String, Py<PyBytes>)>> {
        let mut state = lock(&self.state);
        if state.done {
            return Ok(None);
        }
        let result = self.advance(py, &mut state);
        if !matches!(result, Ok(Some(_))) {
            state.done = true;
        }
        result
    }
}

/// WAV file header information (what `spdl_rs.io.parse_wav` returns).
///
/// Mirrors SPDL's `spdl.io.WAVHeader`.
#[pyclass(frozen, get_all, module = "spdl_rs.io", name = "WAVHeader")]
pub(crate) struct WavHeader {
    /// Audio format code as stored (1 = PCM, 3 = IEEE float, 0xFFFE = extensible).
    audio_format: u16,
    /// Number of audio channels.
    num_channels: u16,
    /// Sample rate in Hz.
    sample_rate: u32,
    /// Byte rate (sample_rate * num_channels * bits_per_sample / 8), as stored.
    byte_rate: u32,
    /// Block alignment (num_channels * bits_per_sample / 8).
    block_align: u16,
    /// Bits per sample.
    bits_per_sample: u16,
    /// Size of the audio data in bytes, as declared by the `data` chunk.
    data_size: u32,
}

impl From<wav::WavHeader> for WavHeader {
    fn from(h: wav::WavHeader) -> Self {
        WavHeader {
            audio_format: h.audio_format,
            num_channels: h.num_channels,
            sample_rate: h.sample_rate,
            byte_rate: h.byte_rate,
            block_align: h.block_align,
            bits_per_sample: h.bits_per_sample,
            data_size: h.data_size,
        }
    }
}

#[pymethods]
impl WavHeader {
    fn __repr__(&self) -> String {
        format!(
            "WAVHeader(audio_format={}, num_channels={}, sample_rate={}, byte_rate={}, block_align={}, bits_per_sample={}, data_size={})",
            self.audio_format, self.num_channels, self.sample_rate, self.byte_rate, self.block_align, self.bits_per_sample, self.data_size
        )
    }
}

/// Parses the header of WAV `data` (GIL released). Raises `ValueError` if it is invalid.
///
/// Mirrors SPDL's `spdl.io.parse_wav`.
#[pyfunction]
pub(crate) fn parse_wav(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<WavHeader> {
    let bytes = Bytes::new(data)?;
    Ok(bytes.parse(py, wav::parse_wav)?.into())
}

/// The samples of WAV `data` in a time window: `(typestr, [frames, channels], offset of the
/// samples in data, converted)`; 24-bit samples are converted to left-justified `int32`
/// (`converted`, offset 0).
type WavSamples = (&'static str, Vec<usize>, usize, Option<Vec<u8>>);

fn wav_samples(
    data: &[u8],
    time_offset_seconds: Option<f64>,
    duration_seconds: Option<f64>,
) -> Result<WavSamples, spdl_io::Error> {
    let s = wav::load_wav(data, time_offset_seconds, duration_seconds)?;
    let shape = vec![s.frames, s.header.num_channels as usize];
    Ok(match s.header.sample_format.typestr() {
        Some(t) => (t, shape, s.offset, None),
        None => {
            let v: Vec<u8> = s
                .to_i32()
                .unwrap_or_default()
                .into_iter()
                .flat_map(i32::to_le_bytes)
                .collect();
            ("<i4", shape, 0, Some(v))
        }
    })
}

/// The samples of WAV `data` in a time window; see `spdl_rs.io.load_wav`.
#[pyfunction]
#[pyo3(signature = (data, time_offset_seconds=None, duration_seconds=None))]
pub(crate) fn _load_wav(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    time_offset_seconds: Option<f64>,
    duration_seconds: Option<f64>,
) -> PyResult<ArrayInfo> {
    let bytes = Bytes::new(data)?;
    let (typestr, shape, offset, converted) = bytes.parse(py, |d| {
        wav_samples(d, time_offset_seconds, duration_seconds)
    })?;
    let owner = converted.map(|v| {
        let n = v.len();
        CpuBuffer::from_u8(v, vec![n], "<wav>".to_owned())
    });
    let address = if owner.is_some() {
        0
    } else {
        bytes.address() + offset
    };
    Ok((owner, typestr.to_owned(), shape, false, address))
}

/// An array parsed in a native stage (`ops.load_npy`, `ops.load_wav`): the file's bytes (or
/// the converted samples), which become the array's memory, and where the elements are.
pub(crate) struct ArrayOut {
    key: String,
    data: Vec<u8>,
    typestr: String,
    shape: Vec<usize>,
    fortran: bool,
    offset: usize,
}

impl ArrayOut {
    /// The NumPy array (made by `spdl_rs._array._make_array` over a `CPUBuffer` that owns the
    /// bytes: no copy unless misaligned).
    pub(crate) fn into_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let n = self.data.len();
        let owner = CpuBuffer::from_u8(self.data, vec![n], self.key);
        let info: ArrayInfo = (
            Some(owner),
            self.typestr,
            self.shape,
            self.fortran,
            self.offset,
        );
        let make = py.import("spdl_rs._array")?.getattr("_make_array")?;
        Ok(make.call1((py.None(), info, false))?.unbind())
    }
}

impl ArrayOut {
    /// `ops.load_npy`: the `.npy` file `data` (named `key` in errors) as an array over its
    /// own bytes.
    pub(crate) fn npy(key: String, data: Vec<u8>) -> Result<Self, spdl_io::Error> {
        let h = npy::parse_header(&data).map_err(|e| e.with_key(&key))?;
        Ok(ArrayOut {
            typestr: h.dtype.descr,
            shape: h.shape,
            fortran: h.fortran_order,
            offset: h.data_offset,
            key,
            data,
        })
    }

    /// `ops.load_wav`: the WAV file `data` as `[frames, channels]` (24-bit converted to
    /// left-justified `int32`), the window in seconds.
    pub(crate) fn wav(
        key: String,
        data: Vec<u8>,
        time_offset_seconds: Option<f64>,
        duration_seconds: Option<f64>,
    ) -> Result<Self, spdl_io::Error> {
        let (typestr, shape, offset, converted) =
            wav_samples(&data, time_offset_seconds, duration_seconds)
                .map_err(|e| e.with_key(&key))?;
        Ok(ArrayOut {
            key,
            data: converted.unwrap_or(data),
            typestr: typestr.to_owned(),
            shape,
            fortran: false,
            offset,
        })
    }
}
