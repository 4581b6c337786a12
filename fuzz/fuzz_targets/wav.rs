//! The WAV parser (`spdl_io::array::wav`): header chunks, then windows chosen by the first
//! two input bytes; a window's bytes must be whole frames inside the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spdl_io::array::wav;

fuzz_target!(|input: &[u8]| {
    let (offset, duration, data) = match input {
        [a, b, rest @ ..] => (f64::from(*a) / 16.0, f64::from(*b) / 8.0, rest),
        _ => return,
    };
    let Ok(header) = wav::parse_wav(data) else {
        return;
    };
    for (o, d) in [(None, None), (Some(offset), Some(duration)), (Some(offset), None)] {
        if let Ok(w) = wav::load_wav(data, o, d) {
            assert_eq!(w.bytes.len(), w.frames * header.block_align as usize);
            assert!(w.offset + w.bytes.len() <= data.len());
        }
    }
});
