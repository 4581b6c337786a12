//! A user-described FFmpeg filter graph with its own inputs and outputs, as
//! SPDL's `FilterGraph`: the description names the `buffer` / `abuffer`
//! sources and `buffersink` / `abuffersink` sinks itself (e.g.
//! `"buffer=video_size=320x240:pix_fmt=yuv420p:time_base=1/25:pixel_aspect=1/1,hflip,buffersink"`),
//! frames go in with [`FilterGraph::add_frames`] and come out with
//! [`FilterGraph::get_frames`]. Several inputs or outputs are told apart by
//! their filter instance names (`buffer@in0`, `Parsed_buffersink_2`).
//!
//! (The loaders' `filter_desc` graphs, whose source is made from the first
//! decoded frame, are in the crate-private `ffmpeg::filter` module.)

use std::ffi::{c_int, CStr, CString};
use std::ptr;

use ffmpeg_next::{self as ff, ffi};

use super::frames::{owned_frame, Frames, MediaKind};
use super::{ff_err, init};
use crate::{Error, ErrorKind, Result};

/// One source or sink node: its instance name and context (owned by the graph).
struct Node {
    name: String,
    ctx: *mut ffi::AVFilterContext,
}

/// A configured filter graph. As SPDL's `spdl.io.FilterGraph`.
#[derive(derive_more::Debug)]
pub struct FilterGraph {
    #[debug(skip)]
    graph: ff::filter::Graph,
    #[debug(skip)]
    inputs: Vec<Node>,
    #[debug(skip)]
    outputs: Vec<Node>,
    /// The kind of the frames last added, so that pictures fed in as
    /// images come back as images.
    input_kind: MediaKind,
    desc: String,
}

// SAFETY: the graph and the contexts it owns are only used through `&mut self`
// (one thread at a time); libavfilter keeps no thread-local state for them.
unsafe impl Send for FilterGraph {}

impl FilterGraph {
    /// Parses and configures `desc` (`avfilter_graph_parse2` +
    /// `avfilter_graph_config`). Automatically inserted scalers use
    /// `flags=bicubic`, as the `ffmpeg` command line does.
    ///
    /// Errors: `InvalidArgument` naming the description when it does not
    /// parse, names an unknown filter, leaves a pad unconnected, has no
    /// `buffer`/`abuffer` source or no sink, or cannot be configured.
    pub fn new(desc: &str) -> Result<Self> {
        init();
        let bad = |why: String| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("invalid filter graph {desc:?}: {why}"),
            )
        };
        let c_desc = CString::new(short_channel_counts(desc))
            .map_err(|_| bad("contains a NUL byte".into()))?;
        let mut graph = ff::filter::Graph::new();
        // SAFETY: the graph pointer is only used below while `graph` lives.
        let g = unsafe { graph.as_mut_ptr() };
        let mut open_in: *mut ffi::AVFilterInOut = ptr::null_mut();
        let mut open_out: *mut ffi::AVFilterInOut = ptr::null_mut();
        // SAFETY: `g` is a valid graph; `scale_sws_opts` is owned (freed) by
        // it; parse2 fills the open in/out lists, freed right after.
        let ret = unsafe {
            (*g).scale_sws_opts = ffi::av_strdup(c"flags=bicubic".as_ptr());
            let r = ffi::avfilter_graph_parse2(g, c_desc.as_ptr(), &mut open_in, &mut open_out);
            let dangling = !open_in.is_null() || !open_out.is_null();
            ffi::avfilter_inout_free(&mut open_in);
            ffi::avfilter_inout_free(&mut open_out);
            if r >= 0 && dangling {
                -1
            } else {
                r
            }
        };
        if ret == -1 {
            return Err(bad(
                "a filter pad is left unconnected (end every chain in a buffersink/abuffersink)"
                    .into(),
            ));
        }
        if ret < 0 {
            return Err(ff_err(
                ErrorKind::InvalidArgument,
                &format!("invalid filter graph {desc:?}"),
                ff::Error::from(ret),
            ));
        }
        graph.validate().map_err(|e| {
            ff_err(
                ErrorKind::InvalidArgument,
                &format!("invalid filter graph {desc:?}"),
                e,
            )
        })?;
        let (mut inputs, mut outputs) = (Vec::new(), Vec::new());
        // SAFETY: `g` is configured; `filters[..nb_filters]` are its contexts,
        // each with a static `filter` and a NUL-terminated instance name.
        unsafe {
            for i in 0..(*g).nb_filters as usize {
                let ctx = *(*g).filters.add(i);
                let kind = CStr::from_ptr((*(*ctx).filter).name).to_bytes();
                let name = CStr::from_ptr((*ctx).name).to_string_lossy().into_owned();
                match kind {
                    b"buffer" | b"abuffer" => inputs.push(Node { name, ctx }),
                    b"buffersink" | b"abuffersink" => outputs.push(Node { name, ctx }),
                    _ => {}
                }
            }
        }
        if inputs.is_empty() {
            return Err(bad("no buffer/abuffer source (see get_buffer_desc)".into()));
        }
        if outputs.is_empty() {
            return Err(bad("no buffersink/abuffersink".into()));
        }
        Ok(FilterGraph {
            graph,
            inputs,
            outputs,
            input_kind: MediaKind::Video,
            desc: desc.to_owned(),
        })
    }

    /// The names of the source nodes (the `key`s of [`FilterGraph::add_frames`]).
    pub fn input_names(&self) -> Vec<&str> {
        self.inputs.iter().map(|n| n.name.as_str()).collect()
    }

    /// The names of the sink nodes (the `key`s of [`FilterGraph::get_frames`]).
    pub fn output_names(&self) -> Vec<&str> {
        self.outputs.iter().map(|n| n.name.as_str()).collect()
    }

    fn node<'n>(nodes: &'n [Node], key: Option<&str>, what: &str) -> Result<&'n Node> {
        match key {
            None if nodes.len() == 1 => Ok(&nodes[0]),
            None => Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "the graph has {} {what}s ({}): give key=",
                    nodes.len(),
                    nodes
                        .iter()
                        .map(|n| n.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
            Some(k) => nodes.iter().find(|n| n.name == k).ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "no {what} named {k:?} (the graph has {})",
                        nodes
                            .iter()
                            .map(|n| n.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            }),
        }
    }

    /// Sends `frames` into the source `key` (optional when there is one).
    /// Their pts must be in that source's `time_base`. The frames are
    /// referenced, not copied, and stay usable.
    ///
    /// Errors: `InvalidArgument` for an unknown or missing key, or frames
    /// the source rejects (another size/format than it was described with
    /// is converted by the graph; another media type is an error).
    pub fn add_frames(&mut self, frames: &Frames, key: Option<&str>) -> Result<()> {
        let node = Self::node(&self.inputs, key, "input")?;
        // SAFETY: the node's filter is static; reading its name.
        let audio_in =
            unsafe { CStr::from_ptr((*(*node.ctx).filter).name) }.to_bytes() == b"abuffer";
        if audio_in != (frames.kind() == MediaKind::Audio) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "{} frames cannot go into {} ({})",
                    frames.kind().name(),
                    node.name,
                    if audio_in { "abuffer" } else { "buffer" }
                ),
            ));
        }
        for f in frames.raw() {
            // SAFETY: `ctx` is a source of this graph; with KEEP_REF the frame
            // is referenced, not taken.
            let ret = unsafe {
                ffi::av_buffersrc_add_frame_flags(
                    node.ctx,
                    f.as_ptr().cast_mut(),
                    ffi::AV_BUFFERSRC_FLAG_KEEP_REF as c_int,
                )
            };
            if ret < 0 {
                return Err(ff_err(
                    ErrorKind::InvalidArgument,
                    &format!("filtering with {:?} (input {})", self.desc, node.name),
                    ff::Error::from(ret),
                ));
            }
        }
        self.input_kind = frames.kind();
        Ok(())
    }

    /// Marks the end of every input, so that filters holding frames back
    /// (`fps`, `reverse`, `tpad`, ...) release them to [`FilterGraph::get_frames`].
    ///
    /// Errors: `InvalidArgument` when a filter fails on the end of stream.
    pub fn flush(&mut self) -> Result<()> {
        for node in &self.inputs {
            // SAFETY: `ctx` is a source of this graph; a null frame marks the end.
            let ret = unsafe { ffi::av_buffersrc_add_frame_flags(node.ctx, ptr::null_mut(), 0) };
            if ret < 0 && ret != ffi::AVERROR_EOF {
                return Err(ff_err(
                    ErrorKind::InvalidArgument,
                    &format!("flushing {:?}", self.desc),
                    ff::Error::from(ret),
                ));
            }
        }
        Ok(())
    }

    /// Every frame ready at sink `key` (optional when there is one), or
    /// `None` when none is (more input needed, or all were taken).
    ///
    /// Errors: `InvalidArgument` for an unknown or missing key or a filter
    /// failure.
    pub fn get_frames(&mut self, key: Option<&str>) -> Result<Option<Frames>> {
        let node = Self::node(&self.outputs, key, "output")?;
        // SAFETY: `ctx` is a configured sink of this graph.
        let (media, tb) = unsafe {
            (
                ffi::av_buffersink_get_type(node.ctx),
                ff::Rational::from(ffi::av_buffersink_get_time_base(node.ctx)),
            )
        };
        let kind = match media {
            ffi::AVMediaType::AVMEDIA_TYPE_AUDIO => MediaKind::Audio,
            _ if self.input_kind == MediaKind::Image => MediaKind::Image,
            _ => MediaKind::Video,
        };
        let mut out = Vec::new();
        loop {
            // SAFETY: allocation; checked for null.
            let mut frame = unsafe { ffi::av_frame_alloc() };
            if frame.is_null() {
                return Err(Error::new(ErrorKind::LimitExceeded, "out of memory"));
            }
            // SAFETY: `ctx` is this graph's sink; `frame` is a blank frame.
            let ret = unsafe { ffi::av_buffersink_get_frame(node.ctx, frame) };
            if ret < 0 {
                // SAFETY: `frame` is ours and blank.
                unsafe { ffi::av_frame_free(&mut frame) };
                if ret == ffi::AVERROR_EOF || ret == ffi::AVERROR(ffi::EAGAIN) {
                    break;
                }
                return Err(ff_err(
                    ErrorKind::InvalidArgument,
                    &format!("filtering with {:?} (output {})", self.desc, node.name),
                    ff::Error::from(ret),
                ));
            }
            // SAFETY: `frame` now holds a filtered frame and is ours.
            out.push(unsafe { owned_frame(frame) });
        }
        Ok((!out.is_empty()).then(|| Frames::new(kind, out, tb)))
    }

    /// The configured graph as text (`avfilter_graph_dump`), as SPDL's `dump`.
    pub fn dump(&self) -> String {
        self.graph.dump()
    }
}

/// `desc` with each `channel_layout=N channels` written `channel_layout=Nc`:
/// how FFmpeg describes a layout of unspecified order (`"1 channels"`, what
/// SPDL's `get_abuffer_desc` writes for a mono WAV) is parsed back only by
/// newer FFmpeg releases; every release parses `Nc`.
fn short_channel_counts(desc: &str) -> String {
    const KEY: &str = "channel_layout=";
    let mut out = String::with_capacity(desc.len());
    let mut rest = desc;
    while let Some(at) = rest.find(KEY) {
        let (head, tail) = rest.split_at(at + KEY.len());
        out.push_str(head);
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        match tail[digits..].strip_prefix(" channels") {
            Some(after) if digits > 0 => {
                out.push_str(&tail[..digits]);
                out.push('c');
                rest = after;
            }
            _ => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::short_channel_counts;

    #[test]
    fn channel_counts_are_written_short() {
        assert_eq!(
            short_channel_counts("abuffer=sample_rate=8000:channel_layout=1 channels,anull"),
            "abuffer=sample_rate=8000:channel_layout=1c,anull"
        );
        assert_eq!(
            short_channel_counts("abuffer=channel_layout=stereo,anull"),
            "abuffer=channel_layout=stereo,anull"
        );
        assert_eq!(
            short_channel_counts("a=channel_layout=12 channels;b=channel_layout=3 channels"),
            "a=channel_layout=12c;b=channel_layout=3c"
        );
    }
}
