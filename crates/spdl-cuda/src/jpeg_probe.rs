//! Which JPEG files the GPU decoder leaves to the CPU: a header scan in pure Rust (no driver,
//! no nvJPEG), run before any device memory is allocated.
//!
//! nvJPEG's batched decode takes baseline and extended-sequential Huffman JPEGs with 1 or 3
//! components. Everything else goes to the CPU decoder (libjpeg-turbo), which the batch
//! loaders count as a fallback (`nvjpeg::NvjpegStats::cpu_fallbacks`, feature `decode-nvjpeg`):
//! progressive (SOF2), lossless (SOF3), hierarchical (SOF5-7), arithmetic coding (SOF9-15),
//! CMYK/YCCK (4 components), files over [`spdl_io::Limits`], and corrupt files (no SOI, no
//! frame header, truncated before the end-of-image marker). This is the routing DALI and
//! torchvision do after nvJPEG rejects a file, decided up front so that no device allocation
//! is made from a header that a broken or hostile file claims.

/// The frame header of a JPEG the GPU can decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JpegFrame {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// Components (1 gray, 3 YCbCr).
    pub components: u8,
}

/// Why a file goes to the CPU decoder instead of the GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuReason {
    /// Progressive DCT (SOF2).
    Progressive,
    /// Arithmetic coding (SOF9-SOF15).
    Arithmetic,
    /// Lossless (SOF3) or hierarchical (SOF5-SOF7) coding.
    Unsupported(&'static str),
    /// 4 components (Adobe CMYK/YCCK) or another count than 1 and 3.
    Components(u8),
    /// Over the size limits (the message names the claimed size).
    Limit(String),
    /// Not a complete JPEG (the message says what is missing).
    Corrupt(String),
}

impl std::fmt::Display for CpuReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CpuReason::Progressive => f.write_str("progressive JPEG (SOF2)"),
            CpuReason::Arithmetic => f.write_str("arithmetic-coded JPEG"),
            CpuReason::Unsupported(what) => write!(f, "{what} JPEG"),
            CpuReason::Components(4) => f.write_str("4 components (CMYK/YCCK)"),
            CpuReason::Components(n) => write!(f, "{n} components"),
            CpuReason::Limit(m) => f.write_str(m),
            CpuReason::Corrupt(m) => write!(f, "corrupt JPEG: {m}"),
        }
    }
}

/// Scans `data`'s markers up to the frame header and decides: the frame for the GPU, or why
/// the CPU decodes it. Checks `limits` on the claimed size (3 channels of u8, what the GPU
/// writes). Reads only the headers and the last bytes; never panics on any input.
pub fn classify(data: &[u8], limits: &spdl_io::Limits) -> Result<JpegFrame, CpuReason> {
    let corrupt = |m: &str| Err(CpuReason::Corrupt(m.to_string()));
    if data.len() < 2 || data[0] != 0xFF || data[1] != 0xD8 {
        return corrupt("no start-of-image marker");
    }
    let mut pos = 2;
    let frame = loop {
        // Markers may be padded with any number of 0xFF bytes.
        while pos < data.len() && data[pos] == 0xFF && data.get(pos + 1) == Some(&0xFF) {
            pos += 1;
        }
        if pos + 4 > data.len() {
            return corrupt("no frame header (SOF) before the end of the data");
        }
        if data[pos] != 0xFF {
            return corrupt(&format!("expected a marker at byte {pos}"));
        }
        let marker = data[pos + 1];
        let len = usize::from(u16::from_be_bytes([data[pos + 2], data[pos + 3]]));
        if len < 2 || pos + 2 + len > data.len() {
            return corrupt(&format!(
                "segment 0x{marker:02X} at byte {pos} is truncated"
            ));
        }
        let body = &data[pos + 4..pos + 2 + len];
        match marker {
            0xC0 | 0xC1 => break body,
            0xC2 => return Err(CpuReason::Progressive),
            0xC3 => return Err(CpuReason::Unsupported("lossless (SOF3)")),
            0xC5..=0xC7 => return Err(CpuReason::Unsupported("hierarchical (SOF5-7)")),
            0xC9..=0xCB | 0xCD..=0xCF => return Err(CpuReason::Arithmetic),
            0xDA => return corrupt("scan (SOS) before the frame header"),
            0xD9 => return corrupt("end of image before the frame header"),
            _ => pos += 2 + len,
        }
    };
    if frame.len() < 6 {
        return corrupt("frame header too short");
    }
    let height = usize::from(u16::from_be_bytes([frame[1], frame[2]]));
    let width = usize::from(u16::from_be_bytes([frame[3], frame[4]]));
    let components = frame[5];
    if width == 0 || height == 0 {
        // Height 0 (defined by a later DNL marker) is legal but nvJPEG does not take it.
        return corrupt(&format!("frame header claims {width}x{height}"));
    }
    if components != 1 && components != 3 {
        return Err(CpuReason::Components(components));
    }
    if let Err(e) = limits.check(width, height, 3, 1) {
        return Err(CpuReason::Limit(e.message().to_string()));
    }
    // A complete file ends with EOI (possibly followed by padding or trailing data): look for
    // it in the last 64 KiB.
    let tail = &data[data.len().saturating_sub(64 * 1024)..];
    if !tail.windows(2).any(|w| w == [0xFF, 0xD9]) {
        return corrupt("truncated (no end-of-image marker)");
    }
    Ok(JpegFrame {
        width,
        height,
        components,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of the repository: `hard/...` from spdl-io's fixtures, `photos/...` from
    /// `data/samples`.
    fn fixture(rel: &str) -> Vec<u8> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let p = match rel.strip_prefix("photos/") {
            Some(name) => root.join("data/samples").join(name),
            None => root.join("crates/spdl-io/tests/fixtures").join(rel),
        };
        std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// A minimal JPEG header: SOI, SOF`n` with the given size and components, EOI.
    fn header(sof: u8, w: u16, h: u16, comps: u8) -> Vec<u8> {
        let mut v = vec![0xFF, 0xD8, 0xFF, sof, 0x00, 8 + 3 * comps, 8];
        v.extend(h.to_be_bytes());
        v.extend(w.to_be_bytes());
        v.push(comps);
        for c in 0..comps {
            v.extend([c + 1, 0x11, 0]);
        }
        v.extend([0xFF, 0xD9]);
        v
    }

    #[test]
    fn crafted_headers() {
        let l = spdl_io::Limits::default();
        assert_eq!(
            classify(&header(0xC0, 640, 480, 3), &l),
            Ok(JpegFrame {
                width: 640,
                height: 480,
                components: 3
            })
        );
        assert_eq!(
            classify(&header(0xC2, 64, 64, 3), &l),
            Err(CpuReason::Progressive)
        );
        assert_eq!(
            classify(&header(0xC9, 64, 64, 3), &l),
            Err(CpuReason::Arithmetic)
        );
        assert_eq!(
            classify(&header(0xC0, 64, 64, 4), &l),
            Err(CpuReason::Components(4))
        );
        // 65535 x 65535 claimed by a 20-byte file: refused before any allocation.
        let bomb = classify(&header(0xC0, 65535, 65535, 3), &l).unwrap_err();
        assert!(bomb.to_string().contains("65535x65535"), "{bomb}");
        assert!(matches!(
            classify(b"not a jpeg", &l),
            Err(CpuReason::Corrupt(_))
        ));
        assert!(matches!(classify(&[], &l), Err(CpuReason::Corrupt(_))));
        let mut cut = header(0xC0, 64, 64, 3);
        cut.truncate(cut.len() - 2);
        assert!(matches!(classify(&cut, &l), Err(CpuReason::Corrupt(_))));
        // Every prefix of a header is handled without a panic.
        let full = header(0xC0, 64, 64, 3);
        for n in 0..full.len() {
            let _ = classify(&full[..n], &l);
        }
    }

    /// The decision on real files: the photos and the hard cases of the repository.
    #[test]
    fn real_files() {
        let l = spdl_io::Limits::default();
        let cases: &[(&str, Option<&str>)] = &[
            ("photos/opencv_baboon.jpg", None),
            ("photos/opencv_fruits.jpg", None),
            (
                "hard/01-cmyk-jpeg/cmyk_imagemagick.jpg",
                Some("4 components (CMYK/YCCK)"),
            ),
            (
                "hard/01-cmyk-jpeg/cmyk_pillow.jpg",
                Some("4 components (CMYK/YCCK)"),
            ),
            ("hard/02-truncated-jpeg-png/good.jpg", None),
            (
                "hard/02-truncated-jpeg-png/truncated_60pct.jpg",
                Some("corrupt JPEG: truncated (no end-of-image marker)"),
            ),
            (
                "hard/02-truncated-jpeg-png/truncated_no_eoi.jpg",
                Some("corrupt JPEG: truncated (no end-of-image marker)"),
            ),
            (
                "hard/04-decompression-bomb/jpeg_sof_65500x65500.jpg",
                Some("LIMIT"),
            ),
            (
                "hard/09-empty-and-non-image/empty.jpg",
                Some("corrupt JPEG: no start-of-image marker"),
            ),
            ("hard/09-empty-and-non-image/good_control.jpg", None),
            (
                "hard/09-empty-and-non-image/html_error_page.jpg",
                Some("corrupt JPEG: no start-of-image marker"),
            ),
            (
                "hard/09-empty-and-non-image/soi_only.jpg",
                Some("corrupt JPEG: no frame header (SOF) before the end of the data"),
            ),
            (
                "hard/10-arithmetic-jpeg/arith.jpg",
                Some("arithmetic-coded JPEG"),
            ),
            (
                "hard/10-arithmetic-jpeg/arith_progressive.jpg",
                Some("arithmetic-coded JPEG"),
            ),
            (
                "hard/12-progressive-jpeg/progressive.jpg",
                Some("progressive JPEG (SOF2)"),
            ),
        ];
        for (rel, want) in cases {
            let data = fixture(rel);
            let got = classify(&data, &l).map_err(|r| r.to_string());
            match want {
                None => assert!(got.is_ok(), "{rel}: {got:?}"),
                Some("LIMIT") => {
                    let e = got.unwrap_err();
                    assert!(
                        e.contains("65500x65500") && e.contains("exceeds"),
                        "{rel}: {e}"
                    );
                }
                Some(w) => assert_eq!(got.unwrap_err(), *w, "{rel}"),
            }
        }
    }

    /// Mutated real files (byte flips, truncations, inserted markers) never panic, and a frame
    /// accepted for the GPU always has a size and 1 or 3 components.
    #[test]
    fn mutations_never_panic() {
        let l = spdl_io::Limits::default();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for rel in [
            "photos/opencv_baboon.jpg",
            "hard/12-progressive-jpeg/progressive.jpg",
        ] {
            let orig = fixture(rel);
            for _ in 0..800 {
                let mut data = orig.clone();
                match next() % 3 {
                    0 => {
                        for _ in 0..1 + next() % 8 {
                            let i = (next() as usize) % data.len().min(2048);
                            data[i] = next() as u8;
                        }
                    }
                    1 => data.truncate((next() as usize) % data.len()),
                    _ => {
                        let i = (next() as usize) % data.len().min(512);
                        data.splice(i..i, [0xFF, 0xC0, 0xFF, 0xFF]);
                    }
                }
                if let Ok(f) = classify(&data, &l) {
                    assert!(
                        f.width > 0 && f.height > 0 && (f.components == 1 || f.components == 3)
                    );
                }
            }
        }
    }
}
