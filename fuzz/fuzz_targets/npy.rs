//! The NPY parser (`spdl_io::array::npy`): header and payload checks; a parsed array's bytes
//! must be inside the input and as long as its shape and dtype say.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spdl_io::array::npy;

fuzz_target!(|data: &[u8]| {
    let header = npy::parse_header(data);
    if let Ok(array) = npy::load_npy(data) {
        assert!(header.is_ok(), "load_npy accepted what parse_header refused");
        assert_eq!(array.data.len(), array.header.nbytes);
        assert!(array.header.data_offset + array.header.nbytes <= data.len());
    }
});
