//! FFmpeg filter strings on decoded images, as SPDL's `load_image(filter_desc=...)`: a
//! picture decoded by libjpeg-turbo or image-rs goes through `buffer -> DESC ->
//! format=rgb24|gray -> buffersink`, so SPDL's image filter strings (e.g. from
//! `get_video_filter_desc(scale_width=, scale_height=)`) work on spdl-rs's decoders.

use super::frames::Frames;
use super::graph::FilterGraph;
use crate::{Error, ErrorKind, Image, PixelData, Result};

/// `image` (8-bit, 1 or 3 channels, orientation already applied) through the filter string
/// `desc`, converted at the end to the input's layout (`rgb24` `[H, W, 3]` or `gray8`
/// `[H, W, 1]`). The filters see one frame with pts 0 in time base 1/1.
///
/// Errors: `InvalidArgument` naming the description when FFmpeg rejects it, or when it
/// produces no frame or several; `Unsupported` for 16-bit images or other channel counts.
pub fn filter_image(image: &Image, desc: &str) -> Result<Image> {
    let PixelData::U8(data) = &image.data else {
        return Err(Error::new(
            ErrorKind::Unsupported,
            "filter_desc works on 8-bit images only (this one is 16-bit)",
        ));
    };
    let (w, h, c) = (image.width, image.height, image.channels);
    let (fmt, shape) = match c {
        3 => ("rgb24", vec![1, h, w, 3]),
        1 => ("gray", vec![1, h, w, 1]),
        _ => {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!("filter_desc works on RGB or gray images, not {c} channels"),
            ))
        }
    };
    let frames = Frames::from_video_array(data, &shape, fmt, (1, 1), 0)?;
    let full = format!(
        "buffer=video_size={w}x{h}:pix_fmt={fmt}:time_base=1/1:pixel_aspect=1/1,{desc},format=pix_fmts={fmt},buffersink"
    );
    let mut g = FilterGraph::new(&full).map_err(|e| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("invalid filter description {desc:?}: {e}"),
        )
    })?;
    g.add_frames(&frames, None)?;
    g.flush()?;
    let out = g.get_frames(None)?.ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("filter description {desc:?} produced no image"),
        )
    })?;
    if out.len() != 1 {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "filter description {desc:?} produced {} images, not 1",
                out.len()
            ),
        ));
    }
    let a = out.to_array()?;
    let (oh, ow) = (out.height(), out.width());
    Image::from_u8(a.data, ow, oh, c)
        .ok_or_else(|| Error::new(ErrorKind::Corrupt, "filtered image has an unexpected size"))
}
