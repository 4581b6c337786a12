//! FFmpeg filter graphs (libavfilter) over decoded frames: the
//! `filter_desc` of [`crate::video::VideoOptions`] and
//! [`crate::audio::AudioOptions`], as SPDL's `filter_desc=` and the ffmpeg
//! command line's `-vf` / `-af`.
//!
//! A graph is `buffer -> DESC -> buffersink` (`abuffer` / `abuffersink` for
//! audio), built from the first decoded frame's size and format. The scale
//! filters that libavfilter inserts to convert formats use `flags=bicubic`,
//! as the ffmpeg command line does, so the same string gives the same bytes.
//!
//! A graph runs on as many threads as the decoder (`VideoOptions::threads`,
//! one by default; audio graphs on one): a loader decodes many samples at
//! once, and with more than one thread FFmpeg 5.1's swscale leaks a whole
//! scaler (57 KB) each time a threaded `scale` fails to configure, e.g.
//! `scale=3:6632` (`context_init_threaded` does not free the slice context
//! whose init failed); see `tests/fixtures/fuzz/README.md`.

use std::ffi::{c_int, CString};
use std::ptr;

use ffmpeg_next::{self as ff, ffi};

use super::ff_err;
use crate::{Error, ErrorKind, Result};

/// One filter graph with one input and one output.
pub(crate) struct FilterGraph {
    graph: ff::filter::Graph,
    /// The `buffer` / `abuffer` context (owned by `graph`).
    src: *mut ffi::AVFilterContext,
    /// The `buffersink` / `abuffersink` context (owned by `graph`).
    sink: *mut ffi::AVFilterContext,
    desc: String,
    /// Where the input ends: the last frame's pts plus its duration, given to
    /// the source at the end (as the ffmpeg command line does), so that
    /// filters that add frames after the last (`tpad`) time them from there.
    end_pts: Option<i64>,
}

/// An invalid filter description: `InvalidArgument` naming it.
fn bad_desc(desc: &str, e: ff::Error) -> Error {
    ff_err(
        ErrorKind::InvalidArgument,
        &format!("invalid filter description {desc:?}"),
        e,
    )
}

impl FilterGraph {
    /// `buffer -> desc -> buffersink` for video frames like `frame`, whose
    /// timestamps are in `time_base`, run on `threads` threads (0: one per
    /// core, FFmpeg's choice).
    ///
    /// Errors: `InvalidArgument` when `desc` does not parse, names an unknown
    /// filter or cannot be configured for this input.
    pub(crate) fn video(
        desc: &str,
        frame: &ff::frame::Video,
        time_base: ff::Rational,
        threads: usize,
    ) -> Result<Self> {
        let sar = frame.aspect_ratio();
        let (sn, sd) = if sar.numerator() > 0 && sar.denominator() > 0 {
            (sar.numerator(), sar.denominator())
        } else {
            (1, 1)
        };
        let pix: ffi::AVPixelFormat = frame.format().into();
        let mut args = format!(
            "video_size={}x{}:pix_fmt={}:time_base={}/{}:pixel_aspect={sn}/{sd}",
            frame.width(),
            frame.height(),
            pix as c_int,
            time_base.numerator(),
            time_base.denominator().max(1),
        );
        // The frame rate, from the first frame's duration: filters that make
        // frames (`tpad`, `fps`) time them by it; without one their
        // timestamps are garbage.
        // SAFETY: reading a plain field of a valid frame.
        let duration = unsafe { (*frame.as_ptr()).pkt_duration };
        let (num, den) = (
            i64::from(time_base.numerator()),
            i64::from(time_base.denominator()),
        );
        let per = num
            .checked_mul(duration)
            .and_then(|p| i32::try_from(p).ok());
        if let (true, Some(per), Ok(den)) = (duration > 0 && num > 0, per, i32::try_from(den)) {
            if den > 0 {
                let r = ff::Rational::new(den, per).reduce();
                args.push_str(&format!(
                    ":frame_rate={}/{}",
                    r.numerator(),
                    r.denominator()
                ));
            }
        }
        Self::build(desc, "buffer", &args, "buffersink", threads)
    }

    /// `abuffer -> desc -> abuffersink` for audio frames like `frame`, whose
    /// timestamps are in `time_base`, on one thread (as the audio decoder).
    /// Errors as [`FilterGraph::video`].
    pub(crate) fn audio(
        desc: &str,
        frame: &ff::frame::Audio,
        time_base: ff::Rational,
    ) -> Result<Self> {
        let fmt: ffi::AVSampleFormat = frame.format().into();
        let layout = frame.channel_layout();
        let layout = if layout.is_empty() || layout.channels() != i32::from(frame.channels()) {
            ff::ChannelLayout::default(i32::from(frame.channels()))
        } else {
            layout
        };
        let args = format!(
            "time_base={}/{}:sample_rate={}:sample_fmt={}:channel_layout=0x{:x}",
            time_base.numerator(),
            time_base.denominator().max(1),
            frame.rate(),
            fmt as c_int,
            layout.bits(),
        );
        Self::build(desc, "abuffer", &args, "abuffersink", 1)
    }

    fn build(
        desc: &str,
        src_name: &str,
        args: &str,
        sink_name: &str,
        threads: usize,
    ) -> Result<Self> {
        if desc.contains('\0') {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("invalid filter description {desc:?}: contains a NUL byte"),
            ));
        }
        let mut graph = ff::filter::Graph::new();
        let missing = |name: &str| {
            Error::new(
                ErrorKind::Unsupported,
                format!("this FFmpeg has no {name} filter"),
            )
        };
        let src_filter = ff::filter::find(src_name).ok_or_else(|| missing(src_name))?;
        let sink_filter = ff::filter::find(sink_name).ok_or_else(|| missing(sink_name))?;
        // SAFETY: the graph is valid; `scale_sws_opts` is owned by the graph
        // (freed with it) and set to a fresh av_strdup copy; `nb_threads` is
        // read when the graph is configured (0 lets FFmpeg pick).
        unsafe {
            let opts = CString::new("flags=bicubic").expect("no NUL");
            let g = graph.as_mut_ptr();
            (*g).scale_sws_opts = ffi::av_strdup(opts.as_ptr());
            (*g).nb_threads = c_int::try_from(threads).unwrap_or(c_int::MAX);
        }
        let mut src = graph
            .add(&src_filter, "in", args)
            .map_err(|e| ff_err(ErrorKind::Corrupt, "creating the filter input", e))?;
        let mut sink = graph
            .add(&sink_filter, "out", "")
            .map_err(|e| ff_err(ErrorKind::Corrupt, "creating the filter output", e))?;
        // SAFETY: both contexts belong to `graph`, which outlives the pointers
        // (they are stored next to it and only used through it).
        let (src, sink) = unsafe { (src.as_mut_ptr(), sink.as_mut_ptr()) };
        graph
            .output("in", 0)
            .and_then(|p| p.input("out", 0))
            .and_then(|p| p.parse(desc))
            .map_err(|e| bad_desc(desc, e))?;
        graph.validate().map_err(|e| bad_desc(desc, e))?;
        Ok(FilterGraph {
            graph,
            src,
            sink,
            desc: desc.to_owned(),
            end_pts: None,
        })
    }

    /// Sends `frame` into the graph (its buffers are referenced, not moved),
    /// or the end of the input when `None`.
    pub(crate) fn push(&mut self, frame: Option<&ff::Frame>) -> Result<()> {
        if let Some(f) = frame {
            // SAFETY: reading plain fields of a valid frame.
            let (pts, duration) = unsafe { ((*f.as_ptr()).pts, (*f.as_ptr()).pkt_duration) };
            self.end_pts = (pts != ffi::AV_NOPTS_VALUE && duration > 0)
                .then(|| pts.checked_add(duration))
                .flatten();
        }
        let ptr = frame.map_or(ptr::null_mut(), |f| {
            // SAFETY: only read by av_buffersrc_add_frame_flags with KEEP_REF.
            unsafe { f.as_ptr().cast_mut() }
        });
        // SAFETY: `src` is the graph's buffer source; with KEEP_REF the frame
        // is referenced, not taken; the end is marked with the input's end
        // time when known (av_buffersrc_close), else with a null frame.
        let ret = unsafe {
            match (frame, self.end_pts) {
                (None, Some(end)) => ffi::av_buffersrc_close(self.src, end, 0),
                _ => ffi::av_buffersrc_add_frame_flags(
                    self.src,
                    ptr,
                    ffi::AV_BUFFERSRC_FLAG_KEEP_REF as c_int,
                ),
            }
        };
        if ret < 0 {
            return Err(ff_err(
                ErrorKind::InvalidArgument,
                &format!("filtering with {:?}", self.desc),
                ff::Error::from(ret),
            ));
        }
        Ok(())
    }

    /// The next filtered frame into `out`: `Ok(false)` when none is ready
    /// (more input needed, or the end).
    pub(crate) fn pull(&mut self, out: &mut ff::Frame) -> Result<bool> {
        // SAFETY: `sink` is the graph's buffer sink; `out` is a valid frame.
        // av_buffersink_get_frame moves the next frame into `out` *without*
        // unreferencing what `out` held (av_frame_move_ref), so the previous
        // frame is released first: skipping this leaked every filtered frame and
        // its side data (found by the `filter_desc` fuzz target, LeakSanitizer).
        let ret = unsafe {
            ffi::av_frame_unref(out.as_mut_ptr());
            ffi::av_buffersink_get_frame(self.sink, out.as_mut_ptr())
        };
        match ret {
            r if r >= 0 => Ok(true),
            r if r == ffi::AVERROR_EOF || r == ffi::AVERROR(ffi::EAGAIN) => Ok(false),
            r => Err(ff_err(
                ErrorKind::InvalidArgument,
                &format!("filtering with {:?}", self.desc),
                ff::Error::from(r),
            )),
        }
    }

    /// The time base of the filtered frames' pts (e.g. `1/fps` after `fps`).
    pub(crate) fn time_base(&self) -> ff::Rational {
        // SAFETY: `sink` is a configured buffer sink of this graph.
        ff::Rational::from(unsafe { ffi::av_buffersink_get_time_base(self.sink) })
    }

    /// The output sample rate (audio graphs).
    pub(crate) fn sample_rate(&self) -> u32 {
        // SAFETY: `sink` is a configured buffer sink of this graph.
        let r = unsafe { ffi::av_buffersink_get_sample_rate(self.sink) };
        u32::try_from(r).unwrap_or(0)
    }

    /// The output channel count (audio graphs).
    pub(crate) fn channels(&self) -> usize {
        // SAFETY: `sink` is a configured buffer sink of this graph.
        let c = unsafe { ffi::av_buffersink_get_channels(self.sink) };
        usize::try_from(c).unwrap_or(0)
    }

    /// The graph as text (`avfilter_graph_dump`).
    #[allow(dead_code)] // for FilterGraph.dump in the Python API to come
    pub(crate) fn dump(&self) -> String {
        self.graph.dump()
    }
}
