//! Bit-stream filters (libavcodec's `AVBSFContext`) over [`Packets`], as
//! SPDL's `BSF` and `apply_bsf`: e.g. `"h264_mp4toannexb"` rewrites MP4's
//! length-prefixed H.264 into Annex B start codes, `"null"` passes packets
//! through. The description may carry options (`"filter_units=remove_types=6"`).

use std::ffi::CString;
use std::ptr;

use ffmpeg_next::codec::packet::Mut as _;
use ffmpeg_next::{self as ff, codec, ffi};

use super::packets::{Codec, Packets};
use super::{ff_err, init};
use crate::{Error, ErrorKind, Result};

/// A bit-stream filter set up for one codec. As SPDL's `BSF`.
#[derive(derive_more::Debug)]
pub struct Bsf {
    #[debug(skip)]
    ctx: *mut ffi::AVBSFContext,
    out_codec: Codec,
    key: String,
    desc: String,
}

// SAFETY: the context is owned here and only used through `&mut self`.
unsafe impl Send for Bsf {}

impl Drop for Bsf {
    fn drop(&mut self) {
        // SAFETY: `ctx` was allocated by av_bsf_list_parse_str / init and is
        // freed once.
        unsafe { ffi::av_bsf_free(&mut self.ctx) };
    }
}

impl Bsf {
    /// The filter chain `desc` (`av_bsf_list_parse_str` syntax, e.g.
    /// `"h264_mp4toannexb"` or `"h264_mp4toannexb,dump_extra"`) for packets
    /// of `codec`.
    ///
    /// Errors: `InvalidArgument` naming `desc` when it does not parse, names
    /// an unknown filter or does not support the codec.
    pub fn new(codec: &Codec, desc: &str) -> Result<Self> {
        init();
        let bad = |e: ff::Error| {
            ff_err(
                ErrorKind::InvalidArgument,
                &format!("invalid bit-stream filter {desc:?}"),
                e,
            )
        };
        let c = CString::new(desc).map_err(|_| {
            Error::new(
                ErrorKind::InvalidArgument,
                "bit-stream filter has a NUL byte",
            )
        })?;
        let mut ctx: *mut ffi::AVBSFContext = ptr::null_mut();
        // SAFETY: a valid C string; `ctx` receives an allocated context.
        let r = unsafe { ffi::av_bsf_list_parse_str(c.as_ptr(), &mut ctx) };
        if r < 0 || ctx.is_null() {
            return Err(bad(ff::Error::from(r.min(-1))));
        }
        let mut me = Bsf {
            ctx,
            out_codec: codec.clone(),
            key: String::new(),
            desc: desc.to_owned(),
        };
        // SAFETY: `ctx` is a fresh context; its par_in is allocated by it;
        // the codec parameters are copied in, and the input time base set,
        // before av_bsf_init as the API asks.
        let r = unsafe {
            let r = ffi::avcodec_parameters_copy((*ctx).par_in, codec.params.0.as_ptr());
            if r < 0 {
                r
            } else {
                (*ctx).time_base_in = codec.time_base.into();
                ffi::av_bsf_init(ctx)
            }
        };
        if r < 0 {
            return Err(bad(ff::Error::from(r)));
        }
        // SAFETY: after init, par_out and time_base_out describe the output.
        let (params, tb) = unsafe {
            let mut p = codec::Parameters::new();
            ffi::avcodec_parameters_copy(p.as_mut_ptr(), (*ctx).par_out);
            (p, ff::Rational::from((*ctx).time_base_out))
        };
        let fr = ff::Rational::new(codec.frame_rate().0, codec.frame_rate().1);
        me.out_codec = Codec::new(codec.kind(), params, tb, fr, codec.rotation());
        Ok(me)
    }

    /// The codec of the filtered packets.
    pub fn codec(&self) -> &Codec {
        &self.out_codec
    }

    /// Filters `packets`; with `flush`, also ends the stream and drains what
    /// the filter held back. `None` when no packet came out (SPDL returns
    /// `None` then too).
    ///
    /// Errors: `InvalidArgument` / `Corrupt` from the filter, naming it.
    pub fn filter(&mut self, packets: &Packets, flush: bool) -> Result<Packets> {
        // SAFETY: reading the codec ids of the filter's input parameters and of
        // the packets' (both valid for as long as their owners).
        let (want, got) = unsafe {
            (
                (*(*self.ctx).par_in).codec_id,
                (*packets.codec.params.0.as_ptr()).codec_id,
            )
        };
        if want != got {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "bit-stream filter {:?} was made for {} packets, not {}",
                    self.desc,
                    codec::Id::from(want).name(),
                    packets.codec.name()
                ),
            ));
        }
        self.key = packets.key.clone();
        let mut out = Vec::new();
        for p in &packets.packets {
            let mut p = p.clone();
            // SAFETY: `ctx` is initialized; send takes the packet's reference
            // (leaving `p` blank, freed on drop).
            let r = unsafe { ffi::av_bsf_send_packet(self.ctx, p.as_mut_ptr()) };
            if r < 0 {
                return Err(self.error(r));
            }
            self.drain(&mut out)?;
        }
        if flush {
            // SAFETY: a null packet signals the end of the stream.
            let r = unsafe { ffi::av_bsf_send_packet(self.ctx, ptr::null_mut()) };
            if r < 0 && r != ffi::AVERROR_EOF {
                return Err(self.error(r));
            }
            self.drain(&mut out)?;
        }
        Ok(Packets {
            key: packets.key.clone(),
            codec: self.out_codec.clone(),
            packets: out,
            window: packets.window,
            stream_index: packets.stream_index,
            codec_attached: packets.codec_attached,
            memory: None,
        })
    }

    /// Ends the stream and returns what the filter still held.
    pub fn flush(&mut self) -> Result<Packets> {
        let empty = Packets {
            key: self.key.clone(),
            codec: self.out_codec.clone(),
            packets: Vec::new(),
            window: None,
            stream_index: 0,
            codec_attached: true,
            memory: None,
        };
        self.filter(&empty, true)
    }

    fn drain(&mut self, out: &mut Vec<ff::Packet>) -> Result<()> {
        loop {
            let mut p = ff::Packet::empty();
            // SAFETY: `ctx` is initialized; `p` is a blank packet to fill.
            let r = unsafe { ffi::av_bsf_receive_packet(self.ctx, p.as_mut_ptr()) };
            if r == ffi::AVERROR(ffi::EAGAIN) || r == ffi::AVERROR_EOF {
                return Ok(());
            }
            if r < 0 {
                return Err(self.error(r));
            }
            out.push(p);
        }
    }

    fn error(&self, r: i32) -> Error {
        ff_err(
            ErrorKind::Corrupt,
            &format!("bit-stream filter {:?}", self.desc),
            ff::Error::from(r),
        )
        .with_key(&self.key)
    }
}

/// Runs `packets` through the bit-stream filter `desc` to the end. As
/// SPDL's `apply_bsf`. Errors as [`Bsf::new`] and [`Bsf::filter`].
pub fn apply_bsf(packets: &Packets, desc: &str) -> Result<Packets> {
    let mut f = Bsf::new(packets.codec(), desc).map_err(|e| e.with_key(&packets.key))?;
    f.filter(packets, true)
}
