//! Image decoding, transforms and batch collation for spdl-rs (CPU).
//!
//! The data flow is decode -> transform -> batch:
//!
//! - [`decode`]: a [`Registry`] picks a [`Decoder`] by magic bytes (never by
//!   file extension). Decoders probe the header first ([`ImageInfo`]), check
//!   [`Limits`] before allocating, then decode into a caller buffer as
//!   `[H, W, C]`. Built-ins: libjpeg-turbo (feature `decode-turbojpeg`) and
//!   image-rs in pure Rust, one feature per format (`decode-png`, `decode-jpeg-rs`,
//!   `decode-gif`, `decode-webp`, `decode-bmp`, `decode-tiff`; `decode-image` is all six).
//! - [`transform`]: resize, ImageNet-eval resize + center crop, seeded random
//!   resized crop + flip, normalization to `f32` `[C, H, W]`.
//! - [`ImageLoader`]: what a pipeline stage calls per sample; plans the crop
//!   from the header and decodes only that region when the decoder can.
//! - [`batch`]: [`collate`] into one `[N, H, W, C]` u8 buffer or
//!   [`collate_normalized`] into `[N, C, H, W]` f32; the same into a pool buffer
//!   ([`HostBatch`]: [`collate_into`], [`load_batch_pooled`], which decodes each sample
//!   straight into its row); one [`BatchHeader`] (shape, dtype, keys, labels) for every batch.
//! - [`dlpack`]: the DLPack layouts and [`dlpack::TensorExport`], beside [`DType`]: how a
//!   host (or, in spdl-cuda, a device) batch is shared zero-copy.
//!
//! - [`array`](mod@array): NumPy `.npy`/`.npz`, tar and WAV read in place (zero-copy views).
//! - [`cache`]: the decoded cache: images decoded and resized once into a memory-mapped file,
//!   served with random crop, flip and normalization at read time.
//!
//! Every error is an [`Error`] naming the sample and the reason, e.g.
//! `"truncated: photos/a.jpg: premature end of JPEG file (no EOI marker)"`;
//! nothing panics on bad input.
//!
//! ```
//! use spdl_io::{collate, ImageLoader, SampleContext, Transform};
//!
//! # fn main() -> Result<(), spdl_io::Error> {
//! // A 4x2 RGB PNG (red | green halves), inline so the example is self-contained.
//! let png: &[u8] = &[
//!     0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
//!     0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x02, 0x08, 0x02, 0x00, 0x00, 0x00, 0xf0, 0xca, 0xea,
//!     0x34, 0x00, 0x00, 0x00, 0x13, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0xf8, 0xcf, 0xc0, 0x00,
//!     0x44, 0x0c, 0xff, 0x91, 0x10, 0x84, 0x02, 0x00, 0x6b, 0xae, 0x07, 0xf9, 0xed, 0xdc, 0x39, 0x16,
//!     0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
//! ];
//! let loader = ImageLoader::new(Transform::Resize { width: 2, height: 2, filter: Default::default() });
//! let ctx = SampleContext { key: "tiny.png", index: 0, epoch: 0 };
//! let img = loader.load(png, &ctx)?;
//! assert_eq!(img.shape(), [2, 2, 3]);
//!
//! let batch = collate(vec![img.clone(), img])?;
//! assert_eq!(batch.shape, [2, 2, 2, 3]);
//!
//! let err = loader.load(b"<html>503</html>", &ctx).unwrap_err();
//! assert_eq!(err.kind(), spdl_io::ErrorKind::UnknownFormat);
//! assert!(err.to_string().starts_with("unknown format: tiny.png"));
//! # Ok(())
//! # }
//! ```

pub mod array;
#[cfg(feature = "decode-ffmpeg")]
pub mod audio;
pub mod batch;
mod batch_loader;
pub mod cache;
pub mod decode;
pub mod dlpack;
mod dtype;
mod error;
#[cfg(feature = "decode-ffmpeg")]
pub mod ffmpeg;
mod loader;
mod options;
pub mod transform;
#[cfg(feature = "decode-ffmpeg")]
pub mod video;

pub use batch::{
    collate, collate_into, collate_normalized, collate_normalized_into, drop_failed_rows,
    BatchData, BatchHeader, BatchItem, HostBatch, ImageBatch,
};
pub use batch_loader::{
    batch_layout, batch_threads, load_batch, load_batch_into, load_batch_pooled, BatchRows,
    BatchSample, LoadedBatch, MAX_BATCH_BYTES_PER_LIMIT,
};
pub use decode::{
    crop, sniff, ColorMode, DecodeOptions, Decoder, Image, ImageFormat, ImageInfo, Limits,
    Orientation, OutputShape, PixelData, Region, Registry, Scaled,
};
pub use dtype::DType;
pub use error::{Error, ErrorKind, Result};
pub use loader::{key_from_path, ImageLoader, FINE_SCALE_HEADROOM};
pub use options::{ImageOptions, TransformKind};
pub use transform::{Filter, Normalize, RandomResizedCrop, SampleContext, Transform};

#[cfg(feature = "decode-ffmpeg")]
pub use audio::{load_audio, Audio, AudioOptions};
#[cfg(feature = "decode-ffmpeg")]
pub use ffmpeg::{
    ffmpeg_filters, ffmpeg_library_versions, ffmpeg_log_level, ffmpeg_versions,
    set_ffmpeg_log_level, MediaSource,
};
#[cfg(feature = "decode-ffmpeg")]
pub use video::{load_video, load_video_clip, FrameSelection, Video, VideoOptions};
