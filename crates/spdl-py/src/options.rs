//! Keyword arguments to options: each Python entry point takes its domain's options as
//! `**options` and converts them here, in one place per domain (image, video, audio), into
//! spdl-io's options types, which validate them. A keyword nobody took is a `TypeError` naming
//! it. The Python side lists each domain's keywords once too (`spdl_rs/_options.py`).
//!
//! A leaf: it uses pyo3, spdl-io, spdl-sources and the error conversion.

use std::str::FromStr;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The keyword arguments of one call, taken one by one by name; [`Kwargs::finish`] rejects
/// what is left.
pub(crate) struct Kwargs<'py> {
    func: &'static str,
    left: Option<Bound<'py, PyDict>>,
}

/// An option value spdl-io rejected, as `ValueError` with its message (which lists the
/// accepted values).
pub(crate) fn value_err(e: spdl_io::Error) -> PyErr {
    PyValueError::new_err(e.message().to_string())
}

impl<'py> Kwargs<'py> {
    /// The keywords `kwargs` of a call to `func` (named in errors). The caller's dict is not
    /// changed.
    pub(crate) fn new(func: &'static str, kwargs: Option<&Bound<'py, PyDict>>) -> PyResult<Self> {
        Ok(Kwargs {
            func,
            left: kwargs.map(|d| d.copy()).transpose()?,
        })
    }

    /// Converts the keywords with `f`, then rejects any it did not take.
    pub(crate) fn parse<T>(
        func: &'static str,
        kwargs: Option<&Bound<'py, PyDict>>,
        f: impl FnOnce(&Self) -> PyResult<T>,
    ) -> PyResult<T> {
        let kw = Kwargs::new(func, kwargs)?;
        let out = f(&kw)?;
        kw.finish()?;
        Ok(out)
    }

    /// Keyword `name`, or `None` when it was not given. `TypeError` naming the function and the
    /// keyword for a value of the wrong type.
    pub(crate) fn take<T: FromPyObjectOwned<'py>>(&self, name: &str) -> PyResult<Option<T>> {
        let Some(dict) = &self.left else {
            return Ok(None);
        };
        let Some(value) = dict.get_item(name)? else {
            return Ok(None);
        };
        dict.del_item(name)?;
        let extracted: PyResult<T> = value.extract::<T>().map_err(Into::into);
        match extracted {
            Ok(v) => Ok(Some(v)),
            Err(e) => Err(PyTypeError::new_err(format!(
                "{}() argument '{name}': {}",
                self.func,
                e.value(value.py())
            ))),
        }
    }

    /// An optional keyword: `None` given and not given are the same.
    pub(crate) fn opt<T: FromPyObjectOwned<'py>>(&self, name: &str) -> PyResult<Option<T>> {
        Ok(self.take::<Option<T>>(name)?.flatten())
    }

    /// Keyword `name` or `default`.
    pub(crate) fn or<T: FromPyObjectOwned<'py>>(&self, name: &str, default: T) -> PyResult<T> {
        Ok(self.take(name)?.unwrap_or(default))
    }

    /// A keyword given by name (`color="gray"`), parsed by spdl-io, or `default`; `ValueError`
    /// listing the accepted names.
    pub(crate) fn named<T: FromStr<Err = spdl_io::Error>>(
        &self,
        name: &str,
        default: T,
    ) -> PyResult<T> {
        match self.take::<String>(name)? {
            Some(s) => s.parse().map_err(value_err),
            None => Ok(default),
        }
    }

    /// `TypeError` naming every keyword that was not taken, as Python words it.
    pub(crate) fn finish(self) -> PyResult<()> {
        let Some(dict) = self.left else {
            return Ok(());
        };
        let names: Vec<String> = dict.keys().iter().map(|k| format!("'{k}'")).collect();
        match names.len() {
            0 => Ok(()),
            1 => Err(PyTypeError::new_err(format!(
                "{}() got an unexpected keyword argument {}",
                self.func, names[0]
            ))),
            _ => Err(PyTypeError::new_err(format!(
                "{}() got unexpected keyword arguments {}",
                self.func,
                names.join(", ")
            ))),
        }
    }

    /// The image keywords (`color`, `filter`, `lenient`, `transform`, `size`, `seed`) with the
    /// output size, as spdl-io's [`spdl_io::ImageOptions`].
    pub(crate) fn image(
        &self,
        width: Option<usize>,
        height: Option<usize>,
    ) -> PyResult<spdl_io::ImageOptions> {
        let d = spdl_io::ImageOptions::default();
        Ok(spdl_io::ImageOptions {
            width,
            height,
            color: self.named("color", d.color)?,
            filter: self.named("filter", d.filter)?,
            lenient: self.or("lenient", d.lenient)?,
            transform: self.named("transform", d.transform)?,
            size: self.opt("size")?,
            seed: self.or("seed", d.seed)?,
            ..d
        })
    }

    /// The rank and sampling keywords of `Sampler` and `TarShards`: `rank` / `world_size`
    /// (both `None`, the default: torchrun's `RANK` / `WORLD_SIZE`), `shuffle` (default
    /// `true`), `seed` (0) and `drop_last` (`false`: pad every rank to the same count).
    pub(crate) fn sampling(
        &self,
    ) -> PyResult<(spdl_sources::DistInfo, spdl_sources::SamplerOptions)> {
        let dist = match (self.opt::<u64>("rank")?, self.opt::<u64>("world_size")?) {
            (None, None) => spdl_sources::DistInfo::from_env(),
            (r, w) => spdl_sources::DistInfo::new(r.unwrap_or(0), w.unwrap_or(1)),
        }
        .map_err(crate::error::sources_err)?;
        let options = spdl_sources::SamplerOptions {
            shuffle: self.or("shuffle", true)?,
            seed: self.or("seed", 0)?,
            remainder: if self.or("drop_last", false)? {
                spdl_sources::Remainder::Drop
            } else {
                spdl_sources::Remainder::Pad
            },
        };
        Ok((dist, options))
    }

    /// [`Kwargs::image`]'s loader; `ValueError` for sizes that do not fit the transform.
    pub(crate) fn image_loader(
        &self,
        width: Option<usize>,
        height: Option<usize>,
    ) -> PyResult<spdl_io::ImageLoader> {
        self.image(width, height)?.loader().map_err(value_err)
    }
}

#[cfg(feature = "decode-ffmpeg")]
mod media {
    //! The video and audio keywords (feature `decode-ffmpeg`).

    use pyo3::exceptions::PyValueError;
    use pyo3::prelude::*;
    use spdl_io::audio::AudioOptions;
    use spdl_io::video::{ClipSampling, FrameSelection, VideoOptions};

    use super::Kwargs;

    fn check_window(window: Option<(f64, f64)>) -> PyResult<()> {
        match window {
            Some((start, end)) if start.is_nan() || end.is_nan() || start < 0.0 || end <= start => {
                Err(PyValueError::new_err(format!(
                    "timestamp must be (start, end) seconds with 0 <= start < end, got ({start}, {end})"
                )))
            }
            _ => Ok(()),
        }
    }

    /// The `demux_config=` / `decode_config=` objects (`None`: the defaults); `TypeError` for
    /// another type.
    fn configs(
        kw: &Kwargs<'_>,
    ) -> PyResult<(spdl_io::ffmpeg::DemuxConfig, spdl_io::ffmpeg::DecodeConfig)> {
        let demux: Option<Bound<'_, PyAny>> = kw.opt("demux_config")?;
        let decode: Option<Bound<'_, PyAny>> = kw.opt("decode_config")?;
        Ok((
            crate::media_config::demux_config_of(demux.as_ref())?,
            crate::media_config::decode_config_of(decode.as_ref())?,
        ))
    }

    impl Kwargs<'_> {
        /// The video output keywords (`width`, `height`, `pixel_format`, `filter`,
        /// `num_threads`, `apply_rotation`) and `demux_config` / `decode_config`, all frames.
        pub(crate) fn video_output(&self) -> PyResult<VideoOptions> {
            let width: Option<u32> = self.opt("width")?;
            let height: Option<u32> = self.opt("height")?;
            if width == Some(0) || height == Some(0) {
                return Err(PyValueError::new_err(format!(
                    "width and height must be at least 1, got width={width:?}, height={height:?}"
                )));
            }
            let mut o = VideoOptions {
                width,
                height,
                ..VideoOptions::default()
            };
            o.pixel_format = self.named("pixel_format", o.pixel_format)?;
            o.filter = self.named("filter", o.filter)?;
            o.threads = self.or("num_threads", o.threads)?;
            o.apply_rotation = self.or("apply_rotation", o.apply_rotation)?;
            (o.demux, o.decode) = configs(self)?;
            Ok(o)
        }

        /// [`Kwargs::video_output`] with the frame selection (`timestamp` or the keywords
        /// `indices`, `step`, `played_at`; at most one) and `filter_desc`.
        pub(crate) fn video(&self, timestamp: Option<(f64, f64)>) -> PyResult<VideoOptions> {
            let indices: Option<Vec<i64>> = self.opt("indices")?;
            let step: Option<usize> = self.opt("step")?;
            let played_at: Option<Vec<f64>> = self.opt("played_at")?;
            let given = [
                timestamp.is_some(),
                indices.is_some(),
                step.is_some(),
                played_at.is_some(),
            ];
            if given.iter().filter(|g| **g).count() > 1 {
                return Err(PyValueError::new_err(
                    "give at most one of timestamp, indices, step, played_at",
                ));
            }
            check_window(timestamp)?;
            let selection = if let Some((start, end)) = timestamp {
                FrameSelection::Window { start, end }
            } else if let Some(i) = indices {
                let picked: Option<Vec<usize>> =
                    i.iter().map(|&x| usize::try_from(x).ok()).collect();
                FrameSelection::Indices(picked.ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "indices count decoded frames from 0 and must be >= 0, got {i:?}"
                    ))
                })?)
            } else if let Some(k) = step {
                if k == 0 {
                    return Err(PyValueError::new_err("step must be at least 1"));
                }
                FrameSelection::Step(k)
            } else if let Some(t) = played_at {
                FrameSelection::PlayedAt(t)
            } else {
                FrameSelection::All
            };
            Ok(VideoOptions {
                selection,
                filter_desc: self.opt("filter_desc")?,
                ..self.video_output()?
            })
        }

        /// The clip keywords (`stride`, default 1) with the clip count and length;
        /// `ValueError` for a zero.
        pub(crate) fn clips(
            &self,
            num_clips: usize,
            frames_per_clip: usize,
        ) -> PyResult<ClipSampling> {
            let stride = self.or("stride", 1usize)?;
            if num_clips == 0 || frames_per_clip == 0 || stride == 0 {
                return Err(PyValueError::new_err(format!(
                    "num_clips, frames_per_clip and stride must be at least 1, got {num_clips}, {frames_per_clip}, {stride}"
                )));
            }
            Ok(ClipSampling {
                num_clips,
                frames_per_clip,
                stride,
            })
        }

        /// The audio keywords (`sample_rate`, `num_channels`, `filter_desc`, `demux_config`,
        /// `decode_config`) with the time window.
        pub(crate) fn audio(&self, timestamp: Option<(f64, f64)>) -> PyResult<AudioOptions> {
            let sample_rate: Option<u32> = self.opt("sample_rate")?;
            let channels: Option<u16> = self.opt("num_channels")?;
            if sample_rate == Some(0) || channels == Some(0) {
                return Err(PyValueError::new_err(format!(
                    "sample_rate and num_channels must be at least 1, got {sample_rate:?}, {channels:?}"
                )));
            }
            check_window(timestamp)?;
            let (demux, decode) = configs(self)?;
            Ok(AudioOptions {
                sample_rate,
                channels,
                window: timestamp,
                filter_desc: self.opt("filter_desc")?,
                demux,
                decode,
                ..Default::default()
            })
        }
    }
}
