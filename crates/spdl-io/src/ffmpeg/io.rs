//! Custom FFmpeg I/O: an `AVIOContext` whose read/seek callbacks read a
//! borrowed byte slice or an open file, so bytes fetched over HTTP or from S3
//! are demuxed where they are, with no temporary file and no copy.

use std::ffi::{c_int, c_void};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::marker::PhantomData;
use std::ptr;
use std::sync::Arc;

use ffmpeg_next::ffi;

/// `AVERROR(EIO)`.
const AVERROR_EIO: c_int = -5;
/// `AVERROR(EINVAL)`.
const AVERROR_EINVAL: i64 = -22;

/// Where the bytes come from.
pub(crate) enum Reader<'a> {
    /// A borrowed in-memory buffer and the read position in it.
    Slice { data: &'a [u8], pos: u64 },
    /// An open file and its size in bytes.
    File { file: File, size: u64 },
    /// Shared in-memory bytes (a demuxer that outlives the caller's borrow).
    Shared { data: Arc<[u8]>, pos: u64 },
}

/// The callbacks' `opaque`: the reader plus what the callbacks observed, which
/// tells a truncated input (the demuxer wanted bytes past the end) from a
/// corrupt one.
pub(crate) struct IoState<'a> {
    reader: Reader<'a>,
    /// A seek or read asked for data beyond the end of the input.
    pub(crate) past_end: bool,
    /// The last I/O error of a file read, if any.
    pub(crate) io_error: Option<std::io::Error>,
    /// Reads that found no data left (the demuxer wanted bytes past the end).
    pub(crate) eof_reads: u64,
    /// Staging buffer for file reads.
    scratch: Vec<u8>,
}

impl IoState<'_> {
    fn size(&self) -> u64 {
        match &self.reader {
            Reader::Slice { data, .. } => data.len() as u64,
            Reader::Shared { data, .. } => data.len() as u64,
            Reader::File { size, .. } => *size,
        }
    }

    /// The next up to `len` bytes, `Ok(empty)` at the end. A slice is
    /// borrowed as is; a file is read into `scratch`.
    fn read(&mut self, len: usize) -> std::io::Result<&[u8]> {
        match &mut self.reader {
            Reader::Slice { data, pos } => Ok(slice_read(data, pos, len)),
            Reader::Shared { data, pos } => Ok(slice_read(data, pos, len)),
            Reader::File { file, .. } => {
                if self.scratch.len() < len {
                    self.scratch.resize(len, 0);
                }
                let n = file.read(&mut self.scratch[..len])?;
                Ok(&self.scratch[..n])
            }
        }
    }

    /// Moves to `pos` (already checked to be >= 0).
    fn seek(&mut self, pos: u64) -> std::io::Result<u64> {
        if pos > self.size() {
            self.past_end = true;
        }
        match &mut self.reader {
            Reader::Slice { pos: p, .. } | Reader::Shared { pos: p, .. } => {
                *p = pos;
                Ok(pos)
            }
            Reader::File { file, .. } => file.seek(SeekFrom::Start(pos)),
        }
    }

    fn position(&mut self) -> std::io::Result<u64> {
        match &mut self.reader {
            Reader::Slice { pos, .. } | Reader::Shared { pos, .. } => Ok(*pos),
            Reader::File { file, .. } => file.stream_position(),
        }
    }
}

/// The next up to `len` bytes of `data` from `pos`, advancing `pos`.
fn slice_read<'d>(data: &'d [u8], pos: &mut u64, len: usize) -> &'d [u8] {
    let start = usize::try_from(*pos).unwrap_or(usize::MAX).min(data.len());
    let n = len.min(data.len() - start);
    *pos += n as u64;
    &data[start..start + n]
}

/// `read_packet` callback.
///
/// # Safety
/// `opaque` must be the `IoState` pointer given to `avio_alloc_context` and
/// `buf` must point to at least `size` writable bytes (FFmpeg's contract).
unsafe extern "C" fn read_packet(opaque: *mut c_void, buf: *mut u8, size: c_int) -> c_int {
    if opaque.is_null() || buf.is_null() || size <= 0 {
        return ffi::AVERROR_EOF;
    }
    // SAFETY: `opaque` is the live `Box<IoState>` owned by the `AvioContext`
    // that owns this callback; FFmpeg calls the callbacks of one context from
    // the one thread driving it, never concurrently, so this is the only
    // reference.
    let state = unsafe { &mut *opaque.cast::<IoState<'_>>() };
    // `buf` may hold FFmpeg's live buffered window (it refills from the
    // start of its buffer), so it is written only with data actually read,
    // never cleared first: a read at the end must leave it intact.
    let got = state.read(size as usize).map(|data| {
        // SAFETY: FFmpeg hands a buffer of at least `size` writable bytes and
        // `data.len() <= size`; `data` is our slice or scratch buffer, which
        // never overlaps FFmpeg's buffer.
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), buf, data.len()) };
        data.len()
    });
    match got {
        Ok(0) => {
            state.eof_reads += 1;
            ffi::AVERROR_EOF
        }
        Ok(n) => n as c_int,
        Err(e) => {
            state.io_error = Some(e);
            AVERROR_EIO
        }
    }
}

/// `seek` callback: `whence` is `SEEK_SET`/`SEEK_CUR`/`SEEK_END`, or
/// `AVSEEK_SIZE` to ask for the total size.
///
/// # Safety
/// `opaque` must be the `IoState` pointer given to `avio_alloc_context`.
unsafe extern "C" fn seek(opaque: *mut c_void, offset: i64, whence: c_int) -> i64 {
    if opaque.is_null() {
        return AVERROR_EINVAL;
    }
    // SAFETY: as in `read_packet`: the live, exclusively used `IoState`.
    let state = unsafe { &mut *opaque.cast::<IoState<'_>>() };
    let size = state.size();
    if whence & ffi::AVSEEK_SIZE as c_int != 0 {
        return i64::try_from(size).unwrap_or(i64::MAX);
    }
    let base = match whence & !(ffi::AVSEEK_FORCE as c_int) {
        0 => 0i64,
        1 => match state.position() {
            Ok(p) => i64::try_from(p).unwrap_or(i64::MAX),
            Err(_) => return AVERROR_EINVAL,
        },
        2 => i64::try_from(size).unwrap_or(i64::MAX),
        _ => return AVERROR_EINVAL,
    };
    let Some(target) = base.checked_add(offset).filter(|t| *t >= 0) else {
        return AVERROR_EINVAL;
    };
    match state.seek(target as u64) {
        Ok(p) => i64::try_from(p).unwrap_or(i64::MAX),
        Err(e) => {
            state.io_error = Some(e);
            i64::from(AVERROR_EIO)
        }
    }
}

/// An owned read-only `AVIOContext` over a [`Reader`]; frees the context, its
/// buffer and the reader state on drop.
///
/// Must outlive the `AVFormatContext` that uses it (demuxers' `read_close`
/// may still touch it): [`super::Demuxer`] declares its format context first
/// so that it is dropped first.
pub(crate) struct AvioContext<'a> {
    ctx: *mut ffi::AVIOContext,
    state: *mut IoState<'a>,
    _data: PhantomData<&'a [u8]>,
}

impl<'a> AvioContext<'a> {
    /// Allocates the context with an I/O buffer of `buffer_size` bytes
    /// (32 KiB, FFmpeg's default, unless a `DemuxConfig` says otherwise; at
    /// least 1); `None` when FFmpeg is out of memory.
    pub(crate) fn with_buffer_size(reader: Reader<'a>, buffer_size: usize) -> Option<Self> {
        let buffer_size = buffer_size.clamp(1, i32::MAX as usize);
        let state = Box::into_raw(Box::new(IoState {
            reader,
            past_end: false,
            io_error: None,
            eof_reads: 0,
            scratch: Vec::new(),
        }));
        // SAFETY: plain allocation; checked for null below.
        let buffer = unsafe { ffi::av_malloc(buffer_size) }.cast::<u8>();
        if buffer.is_null() {
            // SAFETY: `state` came from `Box::into_raw` just above, used nowhere else.
            drop(unsafe { Box::from_raw(state) });
            return None;
        }
        // SAFETY: `buffer` is an `av_malloc`ed block of `buffer_size` bytes
        // whose ownership passes to the context; `state` stays valid until
        // `Drop` (after the context is freed); the callbacks match FFmpeg's
        // `read_packet`/`seek` signatures; write_flag 0 = read only.
        let ctx = unsafe {
            ffi::avio_alloc_context(
                buffer,
                buffer_size as c_int,
                0,
                state.cast(),
                Some(read_packet),
                None,
                Some(seek),
            )
        };
        if ctx.is_null() {
            // SAFETY: the buffer was not taken over; `state` is ours alone.
            unsafe {
                ffi::av_free(buffer.cast());
                drop(Box::from_raw(state));
            }
            return None;
        }
        Some(AvioContext {
            ctx,
            state,
            _data: PhantomData,
        })
    }

    /// The raw context, to install as `AVFormatContext.pb`.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut ffi::AVIOContext {
        self.ctx
    }

    /// What the callbacks observed so far.
    pub(crate) fn state(&self) -> &IoState<'a> {
        // SAFETY: `state` is valid until drop; FFmpeg only calls the callbacks
        // while the caller drives the format context, which needs `&mut` access
        // to the owning `Demuxer`, so no callback runs during this borrow.
        unsafe { &*self.state }
    }
}

impl<'a> AvioContext<'a> {
    /// What the callbacks observed so far, to reset.
    pub(crate) fn state_mut(&mut self) -> &mut IoState<'a> {
        // SAFETY: as in `state`; `&mut self` also excludes other borrows.
        unsafe { &mut *self.state }
    }
}

impl Drop for AvioContext<'_> {
    fn drop(&mut self) {
        // SAFETY: `ctx` was allocated by `avio_alloc_context` and the format
        // context using it has been closed (field order in `Demuxer`). FFmpeg
        // may have replaced the buffer, so the current `buffer` field is freed.
        // `state` came from `Box::into_raw` and no callback can run any more.
        unsafe {
            ffi::av_freep(ptr::addr_of_mut!((*self.ctx).buffer).cast());
            ffi::avio_context_free(&mut self.ctx);
            drop(Box::from_raw(self.state));
        }
    }
}

// SAFETY: the context, its buffer and the state are heap allocations tied to
// no thread; a borrowed slice (`&[u8]`) and a `File` are both `Send`.
unsafe impl Send for AvioContext<'_> {}
