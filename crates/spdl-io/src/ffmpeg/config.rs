//! Demuxer and decoder settings, as SPDL's `DemuxConfig` / `demux_config`
//! and `DecodeConfig` / `decode_config`.

use smart_default::SmartDefault;

/// How a container is opened. As SPDL's `demux_config(format=None,
/// format_options=None, buffer_size=8096)`.
#[derive(Debug, Clone, PartialEq, Eq, SmartDefault)]
pub struct DemuxConfig {
    /// Force this container format (`ffmpeg -demuxers` names, e.g.
    /// `"mp4"`, `"rawvideo"`), skipping probing; `None` probes.
    pub format: Option<String>,
    /// Demuxer options, as `ffmpeg -f FMT -OPTION VALUE -i` (e.g.
    /// `("video_size", "64x48")` for `rawvideo`). An option no demuxer
    /// takes is an `InvalidArgument` error.
    pub format_options: Vec<(String, String)>,
    /// Size in bytes of the I/O buffer FFmpeg reads through (default 32 KiB, FFmpeg's own;
    /// SPDL's 8096 is accepted as well).
    #[default(32 * 1024)]
    pub buffer_size: usize,
}

/// How packets are decoded. As SPDL's `decode_config(decoder=None,
/// decoder_options=None)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecodeConfig {
    /// Use this decoder (`ffmpeg -decoders` names, e.g. `"h264"`,
    /// `"libdav1d"`) instead of the codec's default one.
    pub decoder: Option<String>,
    /// Decoder options (e.g. `("threads", "4")`). An option the decoder
    /// does not take is an `InvalidArgument` error.
    pub decoder_options: Vec<(String, String)>,
}
