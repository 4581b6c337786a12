//! The tar readers (`spdl_io::array::tar`): the in-memory walk (zero-copy offsets) and the
//! streaming reader over the same bytes must agree on every member they both yield.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spdl_io::array::tar;

fuzz_target!(|data: &[u8]| {
    let in_memory: Vec<(String, Vec<u8>)> = tar::members(data)
        .map_while(Result::ok)
        .map(|m| {
            let start = usize::try_from(m.offset).expect("an offset inside the input");
            let end = start + usize::try_from(m.size).expect("a size inside the input");
            assert!(end <= data.len(), "member {} runs past the input", m.name);
            (m.name, data[start..end].to_vec())
        })
        .collect();
    let streamed: Vec<(String, Vec<u8>)> =
        tar::TarReader::new(data).map_while(Result::ok).collect();
    let n = in_memory.len().min(streamed.len());
    assert_eq!(in_memory[..n], streamed[..n], "the two readers disagree");
});
