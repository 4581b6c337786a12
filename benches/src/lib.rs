//! Shared code of the spdl-rs benchmarks: what is measured lives here, so that the criterion
//! benches (`benches/`) and the summary tables (`examples/`) measure the same thing.

pub mod overhead;
