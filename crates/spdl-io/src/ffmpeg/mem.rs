//! Large output arrays.
//!
//! A converted clip is one array of tens or hundreds of MB (a 5 s 640x480 RGB clip: 138 MB).
//! glibc maps such a block fresh from the kernel on every call and unmaps it when it is freed,
//! so filling it costs one page fault per 4 KiB page (34,000 for that clip, most of the
//! conversion's time). Asking for transparent huge pages on the block (Linux, where the kernel
//! grants them on request, `madvise` mode, or always) makes that one fault per 2 MiB.

/// Blocks from this size on ask for huge pages.
const HUGE_FROM: usize = 8 << 20;

/// `n` zero bytes; a large block is backed by huge pages where the kernel allows.
pub(crate) fn zeroed_bytes(n: usize) -> Vec<u8> {
    if n < HUGE_FROM {
        return vec![0; n];
    }
    let mut v: Vec<u8> = Vec::with_capacity(n);
    advise_huge(v.as_mut_ptr(), n);
    v.resize(n, 0); // the first touch: huge pages where granted
    v
}

#[cfg(target_os = "linux")]
fn advise_huge(ptr: *mut u8, n: usize) {
    const HUGE: usize = 2 << 20;
    // Only whole huge pages inside the block.
    let start = (ptr as usize).next_multiple_of(HUGE);
    let end = (ptr as usize + n) / HUGE * HUGE;
    if end > start {
        // SAFETY: advice on a range of this process's own, unused allocation; a refusal
        // (THP off) changes nothing.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_ptr: *mut u8, _n: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_at_every_size() {
        for n in [0, 1, 4096, HUGE_FROM - 1, HUGE_FROM, HUGE_FROM + 12345] {
            let v = zeroed_bytes(n);
            assert_eq!(v.len(), n);
            assert!(v.iter().all(|&b| b == 0));
        }
    }
}
