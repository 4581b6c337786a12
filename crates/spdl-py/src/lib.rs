//! Python bindings of spdl-rs: the extension module `spdl_rs._native`, wrapped by the pure
//! Python package `spdl_rs` (`python/spdl_rs`). Thin glue: the engine is `spdl-core`, the
//! decoders `spdl-io`, the listings `spdl-sources`.
//!
//! Architecture invariants:
//! - Rust work runs with the GIL released (`py.detach`); pipeline threads take the GIL only to
//!   run Python code (a Python source, op or async op) or to read a Python input of a native op.
//! - The module is declared free-threading-safe (`gil_used = false`): every class is `Sync`.
//! - After `fork()`, a pipeline built in the parent is unusable in the child and is never
//!   joined or locked there (`pthread_atfork` bumps a generation counter).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

use pyo3::prelude::*;

mod arrays;
mod buffer;
mod cache;
mod config;
mod cuda;
mod dlpack;
mod error;
mod gpu_decode;
mod io;
mod item;
mod media;
#[cfg(feature = "decode-ffmpeg")]
mod media_config;
#[cfg(feature = "decode-ffmpeg")]
mod media_decode;
#[cfg(feature = "decode-ffmpeg")]
mod media_demux;
#[cfg(feature = "decode-ffmpeg")]
mod media_encode;
#[cfg(feature = "decode-ffmpeg")]
mod media_frames;
#[cfg(feature = "decode-ffmpeg")]
mod media_graph;
#[cfg(feature = "decode-ffmpeg")]
mod media_props;
mod ops;
mod options;
mod pipeline;
mod plugin;
mod shards;
mod sources;
mod stats;
mod trace;

/// Times a pipeline thread took the GIL (for tests: native stages must not).
static GIL_ACQUIRED: AtomicU64 = AtomicU64::new(0);

/// Incremented in the child after every `fork()`.
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);

pub(crate) fn fork_generation() -> u64 {
    FORK_GENERATION.load(Ordering::Acquire)
}

extern "C" fn after_fork_in_child() {
    // Async-signal-safe: one atomic add.
    FORK_GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// Runs `f` with the GIL, counting the acquisition.
pub(crate) fn with_gil<T>(f: impl for<'py> FnOnce(Python<'py>) -> T) -> T {
    GIL_ACQUIRED.fetch_add(1, Ordering::Relaxed);
    Python::attach(f)
}

/// How many times pipeline threads have taken the GIL since the module was loaded (to check
/// that native stages never do).
#[pyfunction]
fn _gil_acquisitions() -> u64 {
    GIL_ACQUIRED.load(Ordering::Relaxed)
}

/// Sends the engine's log (stage failures, `report_stats_interval` tables) to stderr at
/// `level` (`"error"`, `"warn"`, `"info"`, `"debug"`, `"off"`, or a `tracing` filter such as
/// `"spdl_core=info"`); a later call replaces the level. Without it, failed items are still
/// counted, and `spdl_rs.pipeline` warns once per epoch with the count and the last errors.
/// Raises `RuntimeError` if another `tracing` subscriber was installed in this process.
#[pyfunction]
#[pyo3(signature = (level="info"))]
fn init_logging(level: &str) -> PyResult<()> {
    trace::set_log_filter(level)
}

/// SPDL's packet/frame-level media API (FFmpeg builds only; `spdl_rs.io` raises
/// `RuntimeError` for these names otherwise).
#[cfg(feature = "decode-ffmpeg")]
fn add_media_api(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<media_frames::VideoFrames>()?;
    m.add_class::<media_frames::AudioFrames>()?;
    m.add_class::<media_frames::ImageFrames>()?;
    m.add_function(wrap_pyfunction!(media_frames::convert_frames, m)?)?;
    m.add_function(wrap_pyfunction!(media_frames::convert_array, m)?)?;
    m.add_function(wrap_pyfunction!(
        media_frames::create_reference_video_frame,
        m
    )?)?;
    m.add_function(wrap_pyfunction!(
        media_frames::create_reference_audio_frame,
        m
    )?)?;
    m.add_function(wrap_pyfunction!(media_frames::_filter_images, m)?)?;
    m.add_class::<media_graph::FilterGraph>()?;
    m.add_class::<media_config::DemuxConfig>()?;
    m.add_function(wrap_pyfunction!(media_config::demux_config, m)?)?;
    m.add_class::<media_demux::VideoCodec>()?;
    m.add_class::<media_demux::AudioCodec>()?;
    m.add_class::<media_demux::ImageCodec>()?;
    m.add_class::<media_demux::VideoPackets>()?;
    m.add_class::<media_demux::AudioPackets>()?;
    m.add_class::<media_demux::ImagePackets>()?;
    m.add_class::<media_demux::Demuxer>()?;
    m.add_class::<media_demux::StreamingDemuxIter>()?;
    m.add_function(wrap_pyfunction!(media_demux::demux_video, m)?)?;
    m.add_function(wrap_pyfunction!(media_demux::demux_audio, m)?)?;
    m.add_function(wrap_pyfunction!(media_demux::demux_image, m)?)?;
    m.add_class::<media_demux::Bsf>()?;
    m.add_function(wrap_pyfunction!(media_demux::apply_bsf, m)?)?;
    m.add_class::<media_config::DecodeConfig>()?;
    m.add_function(wrap_pyfunction!(media_config::decode_config, m)?)?;
    m.add_function(wrap_pyfunction!(media_decode::decode_packets, m)?)?;
    m.add_function(wrap_pyfunction!(media_decode::sample_decode_video, m)?)?;
    m.add_class::<media_decode::Decoder>()?;
    m.add_class::<media_decode::VideoDecoder>()?;
    m.add_class::<media_decode::AudioDecoder>()?;
    m.add_class::<media_encode::VideoEncodeConfig>()?;
    m.add_class::<media_encode::AudioEncodeConfig>()?;
    m.add_function(wrap_pyfunction!(media_encode::video_encode_config, m)?)?;
    m.add_function(wrap_pyfunction!(media_encode::audio_encode_config, m)?)?;
    m.add_class::<media_encode::Encoder>()?;
    m.add_class::<media_encode::VideoEncoder>()?;
    m.add_class::<media_encode::AudioEncoder>()?;
    m.add_class::<media_encode::Muxer>()?;
    m.add_function(wrap_pyfunction!(media_encode::encode_image, m)?)?;
    Ok(())
}

#[pymodule(gil_used = false)]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    static AT_FORK: Once = Once::new();
    AT_FORK.call_once(|| {
        // SAFETY: registers a handler that only does an atomic add.
        unsafe {
            libc::pthread_atfork(None, None, Some(after_fork_in_child));
        }
    });
    // The crate's version (the workspace's), so Python and `spdl --version` always agree.
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<buffer::CpuBuffer>()?;
    m.add_class::<cuda::CudaBuffer>()?;
    m.add_class::<cuda::ExportProbe>()?;
    m.add_function(wrap_pyfunction!(cuda::transfer_buffer, m)?)?;
    m.add_class::<config::CudaConfig>()?;
    m.add_class::<config::CpuStorage>()?;
    m.add_function(wrap_pyfunction!(config::cuda_config, m)?)?;
    m.add_function(wrap_pyfunction!(config::cpu_storage, m)?)?;
    m.add_function(wrap_pyfunction!(config::_copy_into_storage, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_decode::built_with_nvjpeg, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_decode::built_with_nvcodec, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_decode::nvjpeg_fallback_reason, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_decode::nvjpeg_stats, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_decode::_decode_image_nvjpeg, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_decode::_nvdec_open, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_decode::_nvdec_decode, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_decode::_nvdec_session, m)?)?;
    m.add_class::<gpu_decode::NvdecSession>()?;
    m.add_function(wrap_pyfunction!(gpu_decode::_packets_annexb, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_decode::_nv12_to_planar, m)?)?;
    m.add_function(wrap_pyfunction!(cuda::cuda_built, m)?)?;
    m.add_function(wrap_pyfunction!(cuda::cuda_available, m)?)?;
    m.add_function(wrap_pyfunction!(cuda::cuda_unavailable_reason, m)?)?;
    m.add_function(wrap_pyfunction!(cuda::export_probe, m)?)?;
    m.add_function(wrap_pyfunction!(ops::to_device, m)?)?;
    m.add_class::<ops::NativeOp>()?;
    m.add_class::<sources::SampleList>()?;
    m.add_function(wrap_pyfunction!(sources::sample_list_from_parts, m)?)?;
    m.add_class::<sources::Sampler>()?;
    m.add_class::<pipeline::PyPipeline>()?;
    m.add_class::<stats::PipelineStats>()?;
    m.add_class::<stats::StageStats>()?;
    m.add_class::<stats::QueueStats>()?;
    m.add_class::<stats::TimeSummary>()?;
    m.add_function(wrap_pyfunction!(io::load_image, m)?)?;
    m.add_function(wrap_pyfunction!(io::decode_image, m)?)?;
    m.add_function(wrap_pyfunction!(io::load_image_batch, m)?)?;
    m.add_function(wrap_pyfunction!(io::random_resized_crop, m)?)?;
    m.add_function(wrap_pyfunction!(io::decode_image_batch, m)?)?;
    m.add_function(wrap_pyfunction!(plugin::load_decoder_plugin, m)?)?;
    m.add_function(wrap_pyfunction!(ops::read_file, m)?)?;
    m.add_function(wrap_pyfunction!(ops::image, m)?)?;
    m.add_function(wrap_pyfunction!(ops::collate, m)?)?;
    m.add_function(wrap_pyfunction!(ops::load_npy, m)?)?;
    m.add_function(wrap_pyfunction!(ops::load_wav, m)?)?;
    m.add_function(wrap_pyfunction!(sources::list_files, m)?)?;
    m.add_function(wrap_pyfunction!(sources::image_folder, m)?)?;
    m.add_function(wrap_pyfunction!(sources::merge_states, m)?)?;
    m.add_function(wrap_pyfunction!(pipeline::build_pipeline, m)?)?;
    m.add_class::<media::VideoFrames>()?;
    m.add_class::<media::AudioFrames>()?;
    m.add_function(wrap_pyfunction!(media::load_media, m)?)?;
    m.add_function(wrap_pyfunction!(media::ffmpeg_versions, m)?)?;
    m.add_function(wrap_pyfunction!(media::get_ffmpeg_versions, m)?)?;
    m.add_function(wrap_pyfunction!(media::get_ffmpeg_filters, m)?)?;
    m.add_function(wrap_pyfunction!(media::get_ffmpeg_log_level, m)?)?;
    m.add_function(wrap_pyfunction!(media::set_ffmpeg_log_level, m)?)?;
    m.add_function(wrap_pyfunction!(ops::media, m)?)?;
    #[cfg(feature = "decode-ffmpeg")]
    add_media_api(m)?;
    m.add_function(wrap_pyfunction!(arrays::_parse_npy, m)?)?;
    m.add_class::<arrays::NpzIndex>()?;
    m.add_class::<arrays::TarMembers>()?;
    m.add_class::<arrays::TarStream>()?;
    m.add_class::<arrays::WavHeader>()?;
    m.add_function(wrap_pyfunction!(arrays::parse_wav, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::_load_wav, m)?)?;
    m.add_class::<cache::DecodedCache>()?;
    m.add_function(wrap_pyfunction!(cache::build_decoded_cache, m)?)?;
    m.add_class::<shards::TarShards>()?;
    m.add_class::<shards::TarShardIter>()?;
    m.add_function(wrap_pyfunction!(_gil_acquisitions, m)?)?;
    m.add_function(wrap_pyfunction!(init_logging, m)?)?;
    m.add_class::<trace::TraceSlice>()?;
    m.add_function(wrap_pyfunction!(trace::_trace_start, m)?)?;
    m.add_function(wrap_pyfunction!(trace::_trace_stop, m)?)?;
    m.add_function(wrap_pyfunction!(trace::_trace_begin, m)?)?;
    m.add_function(wrap_pyfunction!(trace::_trace_counter, m)?)?;
    Ok(())
}
