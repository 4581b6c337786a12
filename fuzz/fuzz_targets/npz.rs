//! The NPZ reader (`spdl_io::array::npz`): the ZIP directory (ZIP64 too), then every member,
//! stored or deflated, under a 1 MiB uncompressed limit checked before inflating.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spdl_io::array::npz::NpzArchive;

fuzz_target!(|data: &[u8]| {
    let Ok(archive) = NpzArchive::parse(data, 1 << 20) else {
        return;
    };
    for entry in archive.entries() {
        let _ = archive.member(data, entry);
    }
});
