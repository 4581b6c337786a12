//! Where samples come from in spdl-rs: the *source* step of source -> fetch -> decode -> batch.
//!
//! - [`SampleList`] / [`Sample`]: a dataset as an ordered list of paths or URIs with optional
//!   labels.
//! - [`Uri`]: a plain path, `file://`, `http(s)://` or `s3://bucket/key`, parsed byte-exact.
//! - [`Fetcher`]: a sample's bytes from any [`Uri`] for an async fetch stage, with retries
//!   ([`RetryPolicy`]: exponential backoff, jitter, `Retry-After`), per-request and stall
//!   timeouts, length and HTML checks; [`Fetcher::list`] lists an S3 prefix or reads a
//!   manifest of URIs. Remote backends are built on Apache OpenDAL behind features
//!   `source-http` and `source-s3` (off by default); defaults are in [`fetch`].
//! - [`concurrency`]: how many requests a fetch stage keeps in flight: fixed, or adaptive (from
//!   64, grown while the completion rate rises, as the latency asks).
//! - Local sources (feature `source-local`, on by default): [`walk_dir`] (a folder, recursively,
//!   filtered by [`Extensions`], in a byte order identical on every machine), [`read_list_file`]
//!   (one path per line), [`ImageFolder`] (torchvision's class-folder layout), and
//!   [`read_file`] / [`read_file_async`].
//! - [`Sampler`]: which indices a rank reads in an epoch, mirroring torch's
//!   `DistributedSampler` (strided shards by [`DistInfo`], equal counts, drop or marked padding),
//!   with a small resumable [`SamplerState`] (torchdata `StatefulDataLoader`) and resumption
//!   under a changed world size ([`merge_states`], [`Sampler::resume`]; Mosaic Streaming's
//!   elastic resumption).
//! - [`shards`] (feature `source-local`): tar shards in the WebDataset layout from local disk,
//!   HTTP(S) or S3 (with `source-http` / `source-s3`), with a seeded shuffle buffer,
//!   dealt to ranks shard by shard and cut into samples by key.
//! - [`Error`]: the one error type, with an [`ErrorKind`] and the path it concerns.
//!
//! File names are kept byte-exact everywhere: no Unicode normalisation, no trimming, no
//! percent-decoding, non-UTF-8 names included on Unix.
//!
//! # Example
//! List a folder, then read the share of rank 0 of 2:
//! ```
//! # #[cfg(feature = "source-local")] {
//! use spdl_sources::{read_file, walk_dir, DistInfo, Extensions, Sampler, SamplerOptions};
//!
//! let root = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/17-unicode-and-space-filenames");
//! let dataset = walk_dir(root, &Extensions::images())?;
//! assert_eq!(dataset.len(), 11); // `no_extension` is filtered out
//!
//! let mut sampler = Sampler::new(dataset.len_u64(), DistInfo::new(0, 2)?, SamplerOptions::default())?;
//! sampler.set_epoch(0);
//! assert_eq!(sampler.num_samples(), 6); // 11 samples over 2 ranks, padded to 12
//! for item in sampler.iter() {
//!     let sample = dataset.get(item.index)?;
//!     let bytes = read_file(&sample.path)?;
//!     assert!(bytes.starts_with(b"\x89PNG"));
//!     sampler.mark_delivered(item.position)?; // once the training step has consumed it
//! }
//! let checkpoint = serde_json::to_string(&sampler.state())?;
//! # assert!(checkpoint.contains("\"delivered\":6"));
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[cfg(feature = "fetch")]
mod backend;
pub mod concurrency;
mod dist;
mod error;
#[cfg(feature = "fetch")]
pub mod fetch;
mod list;
#[cfg(feature = "source-local")]
pub mod local;
#[cfg(feature = "fetch")]
mod options;
pub mod retry;
pub mod sampler;
#[cfg(feature = "source-local")]
pub mod shards;
pub mod uri;

pub use bytes::Bytes;
pub use dist::DistInfo;
pub use error::{Error, ErrorKind, Result};
#[cfg(feature = "fetch")]
pub use fetch::{Capability, FetchOptions, Fetcher, S3Options, Secret};
pub use list::{parse_manifest, Sample, SampleList};
#[cfg(feature = "source-local")]
pub use local::{
    parse_list, read_file, read_file_async, read_list_file, walk_dir, walk_dir_with, Extensions,
    ImageFolder, WalkOptions, MAX_STREAM_BYTES,
};
pub use retry::RetryPolicy;
pub use sampler::{
    merge_states, EpochProgress, Remainder, Reshard, SampledIndex, Sampler, SamplerIter,
    SamplerOptions, SamplerState,
};
pub use uri::Uri;
