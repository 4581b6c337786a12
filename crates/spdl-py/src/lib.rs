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
use std::sync::{Mutex, MutexGuard, Once};

use pyo3::prelude::*;

mod arrays;
mod buffer;
mod cache;
mod config;
mod cuda;
mod dlpack;
mod error;
#[cfg(feature = "cuda")]
mod gpu_decode;
mod io;
mod item;
mod media;
#[cfg(feature = "decode-ffmpeg")]
mod media_batch;
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
mod reserved;
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

/// Locks `m`; a poisoned lock (a panic while it was held) is taken as it is, so that one
/// failed call does not make every later one fail.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` with the GIL, counting the acquisition.
pub(crate) fn with_gil<T>(f: impl for<'py> FnOnce(Python<'py>) -> T) -> T {
    GIL_ACQUIRED.fetch_add(1, Ordering::Relaxed);
    Python::attach(f)
}

/// Adds the listed items to the module `m`, in order: `class path::Type;` (a `#[pyclass]`) or
/// `function path::function;` (a `#[pyfunction]`). In a function returning `PyResult`.
macro_rules! register {
    ($m:ident; $($kind:ident $item:path;)*) => {
        $(register!(@$kind $m $item);)*
    };
    (@class $m:ident $item:path) => {
        $m.add_class::<$item>()?;
    };
    (@function $m:ident $item:path) => {
        $m.add_function(wrap_pyfunction!($item, $m)?)?;
    };
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
    register!(m;
        class media_frames::VideoFrames;
        class media_frames::AudioFrames;
        class media_frames::ImageFrames;
        function media_frames::convert_frames;
        function media_frames::convert_array;
        function media_frames::create_reference_video_frame;
        function media_frames::create_reference_audio_frame;
        function media_frames::_filter_images;
        function media_batch::_load_images_ffmpeg;
        function media_batch::_load_media_spdl;
        class media_graph::FilterGraph;
        class media_config::DemuxConfig;
        function media_config::demux_config;
        class media_demux::VideoCodec;
        class media_demux::AudioCodec;
        class media_demux::ImageCodec;
        class media_demux::VideoPackets;
        class media_demux::AudioPackets;
        class media_demux::ImagePackets;
        class media_demux::Demuxer;
        class media_demux::StreamingDemuxIter;
        function media_demux::demux_video;
        function media_demux::demux_audio;
        function media_demux::demux_image;
        class media_demux::Bsf;
        function media_demux::apply_bsf;
        class media_config::DecodeConfig;
        function media_config::decode_config;
        function media_decode::decode_packets;
        function media_decode::sample_decode_video;
        class media_decode::Decoder;
        class media_decode::VideoDecoder;
        class media_decode::AudioDecoder;
        class media_encode::VideoEncodeConfig;
        class media_encode::AudioEncodeConfig;
        function media_encode::video_encode_config;
        function media_encode::audio_encode_config;
        class media_encode::Encoder;
        class media_encode::VideoEncoder;
        class media_encode::AudioEncoder;
        class media_encode::Muxer;
        function media_encode::encode_image;
    );
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
    register!(m;
        class buffer::CpuBuffer;
        class cuda::CudaBuffer;
        class cuda::ExportProbe;
        class config::CudaConfig;
        class config::CpuStorage;
        function config::cuda_config;
        function config::cpu_storage;
        function config::_copy_into_storage;
        function cuda::built_with_nvjpeg;
        function cuda::built_with_nvcodec;
        function cuda::nvjpeg_stats;
        function cuda::cuda_built;
        function cuda::cuda_available;
        function cuda::cuda_unavailable_reason;
        function cuda::export_probe;
        function ops::to_device;
        class ops::NativeOp;
        class sources::SampleList;
        function sources::sample_list_from_parts;
        class sources::Sampler;
        class pipeline::PyPipeline;
        class stats::PipelineStats;
        class stats::StageStats;
        class stats::QueueStats;
        class stats::TimeSummary;
        function io::load_image;
        function io::decode_image;
        function io::load_image_batch;
        function io::random_resized_crop;
        function io::decode_image_batch;
        function plugin::load_decoder_plugin;
        function ops::read_file;
        function ops::image;
        function ops::collate;
        function ops::image_batch;
        function ops::load_npy;
        function ops::load_wav;
        function sources::list_files;
        function sources::image_folder;
        function sources::merge_states;
        function pipeline::build_pipeline;
        class media::VideoFrames;
        class media::AudioFrames;
        function media::load_media;
        function media::ffmpeg_versions;
        function media::get_ffmpeg_versions;
        function media::get_ffmpeg_filters;
        function media::get_ffmpeg_log_level;
        function media::set_ffmpeg_log_level;
        function ops::media;
    );
    #[cfg(feature = "decode-ffmpeg")]
    add_media_api(m)?;
    register!(m;
        function arrays::_parse_npy;
        class arrays::NpzIndex;
        class arrays::TarMembers;
        class arrays::TarStream;
        class arrays::WavHeader;
        function arrays::parse_wav;
        function arrays::_load_wav;
        class cache::DecodedCache;
        function cache::build_decoded_cache;
        class shards::TarShards;
        class shards::TarShardIter;
        function _gil_acquisitions;
        function init_logging;
        class trace::TraceSlice;
        function trace::_trace_start;
        function trace::_trace_stop;
        function trace::_trace_begin;
        function trace::_trace_counter;
    );
    // The GPU entry points: spdl-cuda's with `cuda`, else each name raises saying how to
    // rebuild (`cuda::GPU_ONLY`).
    #[cfg(feature = "cuda")]
    register!(m;
        function cuda::transfer_buffer;
        function gpu_decode::nvjpeg_fallback_reason;
        function gpu_decode::_decode_image_nvjpeg;
        class gpu_decode::NvdecSpec;
        class gpu_decode::NvdecSession;
        function gpu_decode::_packets_annexb;
        function gpu_decode::_nv12_to_planar;
    );
    #[cfg(not(feature = "cuda"))]
    for name in cuda::GPU_ONLY {
        m.add(*name, wrap_pyfunction!(cuda::not_built, m)?)?;
    }
    Ok(())
}
