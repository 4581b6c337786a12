//! A process-wide pool for the planes of decoded video frames.
//!
//! FFmpeg keeps a buffer pool per decoder context, and each `decode_packets` / `load_video`
//! call opens a context of its own: every call allocated its frames afresh (a 5 s 640x480 clip:
//! 150 frames, 69 MB), and glibc hands such blocks back to the kernel when they are freed, so
//! the next call paid a page fault per 4 KiB again (about 26,000 per call, half the decode
//! time on the shared cores). Video decoders here take their planes from this pool instead:
//! FFmpeg's default `get_buffer2` still lays the frame out (line sizes, alignment, padding),
//! then each plane's buffer is swapped for a block of the same size from the pool; a block
//! comes back when the last reference to the frame's plane goes, and is kept for the next
//! frame up to [`KEEP_BYTES`] in all (the sizes freed most recently win).
//!
//! The pool never blocks: when another thread holds it (or held it across a `fork`), a block
//! is allocated or freed as FFmpeg would.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::Mutex;

use ffmpeg_next::ffi;

/// At most this many bytes of free blocks are kept.
const KEEP_BYTES: usize = 256 << 20;

/// Free blocks by size; `usize` addresses (`av_malloc`ed, owned by the pool).
struct Pool {
    free: HashMap<usize, Vec<usize>>,
    kept: usize,
}

static POOL: Mutex<Option<Pool>> = Mutex::new(None);

/// A block of `size` bytes: a kept one, or a new one (null if allocation failed).
fn take(size: usize) -> *mut u8 {
    if let Ok(mut guard) = POOL.try_lock() {
        if let Some(pool) = guard.as_mut() {
            if let Some(addr) = pool.free.get_mut(&size).and_then(Vec::pop) {
                pool.kept -= size;
                return addr as *mut u8;
            }
        }
    }
    // SAFETY: plain allocation; FFmpeg's own pools use av_malloc (its alignment).
    unsafe { ffi::av_malloc(size).cast() }
}

/// The free callback of a pooled plane: keeps the block (`opaque` is its size) if there is
/// room, making room by freeing blocks of other sizes; frees it otherwise.
unsafe extern "C" fn give_back(opaque: *mut c_void, data: *mut u8) {
    let size = opaque as usize;
    if let Ok(mut guard) = POOL.try_lock() {
        let pool = guard.get_or_insert_with(|| Pool {
            free: HashMap::new(),
            kept: 0,
        });
        if size <= KEEP_BYTES {
            while pool.kept + size > KEEP_BYTES {
                let Some(other) = pool.free.keys().copied().find(|&s| s != size) else {
                    break;
                };
                let blocks = pool.free.remove(&other).unwrap_or_default();
                pool.kept -= other * blocks.len();
                for addr in blocks {
                    // SAFETY: a block this pool kept, referenced by nothing.
                    unsafe { ffi::av_free(addr as *mut c_void) };
                }
            }
            if pool.kept + size <= KEEP_BYTES {
                pool.free.entry(size).or_default().push(data as usize);
                pool.kept += size;
                return;
            }
        }
    }
    // SAFETY: the block `take` allocated, referenced by nothing now.
    unsafe { ffi::av_free(data.cast()) };
}

/// `get_buffer2` for video decoders: FFmpeg's default layout, the planes from the pool.
///
/// # Safety
/// Called by FFmpeg with its codec context and a blank frame (any decoder thread).
pub(crate) unsafe extern "C" fn get_buffer2(
    ctx: *mut ffi::AVCodecContext,
    frame: *mut ffi::AVFrame,
    flags: c_int,
) -> c_int {
    // SAFETY: as FFmpeg calls us; the default fills `frame` or fails.
    let ret = unsafe { ffi::avcodec_default_get_buffer2(ctx, frame, flags) };
    // SAFETY: `frame` is the filled frame; only planes laid out one per buffer, each at the
    // start of its buffer (the default video layout), are swapped; hardware frames are not.
    unsafe {
        if ret < 0 || !(*frame).hw_frames_ctx.is_null() {
            return ret;
        }
        for i in 0..(*frame).buf.len() {
            let buf = (*frame).buf[i];
            if buf.is_null() || (*frame).data[i] != (*buf).data {
                continue;
            }
            let size = (*buf).size;
            let block = take(size);
            if block.is_null() {
                continue; // keep FFmpeg's
            }
            let pooled =
                ffi::av_buffer_create(block, size, Some(give_back), size as *mut c_void, 0);
            if pooled.is_null() {
                ffi::av_free(block.cast());
                continue;
            }
            (*frame).data[i] = (*pooled).data;
            ffi::av_buffer_unref(&mut (*frame).buf[i]);
            (*frame).buf[i] = pooled;
        }
    }
    ret
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block given back serves the next block of its size; a block over the limit is freed.
    /// (Other tests decode meanwhile: a busy pool allocates instead, so reuse is looked for a
    /// few times.)
    #[test]
    fn blocks_come_back_for_the_next_frame() {
        let size = (1 << 20) + 4093; // a size no frame here has
        let reused = (0..20).any(|_| {
            let a = take(size);
            assert!(!a.is_null());
            // SAFETY: a block `take` gave, no longer used.
            unsafe { give_back(size as *mut c_void, a) };
            take(size) == a
        });
        assert!(reused);
        let huge = KEEP_BYTES + 1;
        let h = take(huge);
        assert!(!h.is_null());
        // SAFETY: as above; too big to keep, so freed.
        unsafe { give_back(huge as *mut c_void, h) };
        let kept = POOL.lock().unwrap().as_ref().map_or(0, |p| p.kept);
        assert!(kept <= KEEP_BYTES);
    }
}
