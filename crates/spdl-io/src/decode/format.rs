//! Format sniffing from magic bytes (never from the file extension).

use std::fmt;

/// An image container format, as recognised by [`sniff`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ImageFormat {
    /// JPEG (`FF D8`).
    Jpeg,
    /// PNG (`89 'PNG' 0D 0A 1A 0A`).
    Png,
    /// GIF (`GIF87a` / `GIF89a`).
    Gif,
    /// WebP (`RIFF....WEBP`).
    WebP,
    /// Windows bitmap (`BM`).
    Bmp,
    /// TIFF (`II*\0` or `MM\0*`).
    Tiff,
    /// A format read by a third-party decoder, by the name it gives (e.g. `"PNM"`).
    /// [`sniff`] never returns it: only a registered decoder knows such a format.
    Other(&'static str),
    /// None of the above.
    Unknown,
}

impl ImageFormat {
    /// Upper-case display name, e.g. `"JPEG"`.
    pub fn name(self) -> &'static str {
        match self {
            ImageFormat::Jpeg => "JPEG",
            ImageFormat::Png => "PNG",
            ImageFormat::Gif => "GIF",
            ImageFormat::WebP => "WebP",
            ImageFormat::Bmp => "BMP",
            ImageFormat::Tiff => "TIFF",
            ImageFormat::Other(name) => name,
            ImageFormat::Unknown => "unknown",
        }
    }

    /// The format a file extension usually means (case-insensitive), used
    /// only to word error messages ("content is WebP, not JPEG").
    pub fn from_extension(ext: &str) -> Option<Self> {
        Some(match ext.to_ascii_lowercase().as_str() {
            "jpg" | "jpeg" | "jpe" | "jfif" => ImageFormat::Jpeg,
            "png" => ImageFormat::Png,
            "gif" => ImageFormat::Gif,
            "webp" => ImageFormat::WebP,
            "bmp" => ImageFormat::Bmp,
            "tif" | "tiff" => ImageFormat::Tiff,
            _ => return None,
        })
    }
}

impl fmt::Display for ImageFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Identifies the format from the first bytes; [`ImageFormat::Unknown`] when
/// nothing matches (including empty input).
pub fn sniff(bytes: &[u8]) -> ImageFormat {
    if bytes.starts_with(&[0xFF, 0xD8]) {
        ImageFormat::Jpeg
    } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        ImageFormat::Png
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        ImageFormat::Gif
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
        ImageFormat::WebP
    } else if bytes.starts_with(b"BM") && bytes.len() >= 26 {
        ImageFormat::Bmp
    } else if bytes.starts_with(b"II*\0") || bytes.starts_with(b"MM\0*") {
        ImageFormat::Tiff
    } else {
        ImageFormat::Unknown
    }
}

/// A short description of unrecognised content for error messages:
/// `"looks like HTML/XML text"`, `"looks like text"` or the first bytes in hex.
pub(crate) fn describe_unknown(bytes: &[u8]) -> String {
    let head = &bytes[..bytes.len().min(8)];
    let trimmed = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .map(|i| &bytes[i..]);
    if trimmed.is_some_and(|t| t.starts_with(b"<")) {
        return "not a recognised image format (looks like HTML/XML text)".into();
    }
    let sample = &bytes[..bytes.len().min(64)];
    if sample
        .iter()
        .all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace())
    {
        return "not a recognised image format (looks like plain text)".into();
    }
    let hex: Vec<String> = head.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "not a recognised image format (first bytes: {})",
        hex.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_magic_bytes() {
        let cases: [(&[u8], ImageFormat); 7] = [
            (&[0xFF, 0xD8, 0xFF, 0xE0], ImageFormat::Jpeg),
            (b"\x89PNG\r\n\x1a\n....", ImageFormat::Png),
            (b"GIF89a", ImageFormat::Gif),
            (b"RIFF\0\0\0\0WEBPVP8L", ImageFormat::WebP),
            (b"II*\0", ImageFormat::Tiff),
            (b"", ImageFormat::Unknown),
            (b"RIFF\0\0\0\0WAVE", ImageFormat::Unknown),
        ];
        for (head, want) in cases {
            assert_eq!(sniff(head), want, "{head:?}");
        }
    }

    #[test]
    fn describes_html() {
        assert!(describe_unknown(b"  <!DOCTYPE html>").contains("HTML"));
        assert!(describe_unknown(b"hello").contains("text"));
        assert!(describe_unknown(&[0, 1, 2]).contains("00 01 02"));
    }
}
