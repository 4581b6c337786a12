//! What SPDL's per-kind media classes share, written once: [`media_classes!`] declares the
//! video / audio / image classes over one value (`VideoCodec` / `AudioCodec` / `ImageCodec`
//! over a `Codec`, the packet and frame classes over `Arc<Packets>` / `Arc<Frames>`) with
//! their two conversions, and [`media_pymethods!`] gives each class the read-only properties
//! it names (`width`, `pix_fmt`, `time_base`, ...) from one definition per property.

/// Declares three frozen `spdl_rs.io` classes named `$video`, `$audio`, `$image` (each with
/// the doc comments written before its name), holding `inner: $field`, and two functions:
///
/// - `$to_py(py, value)`: `value` (anything `Into<$field>`, e.g. a `Packets` for an
///   `Arc<Packets>`) as a new object of the class of its media kind (`value.kind()`);
/// - `$of(obj)`: the `inner` of an object of any of the three classes (a clone: a `Codec`, or
///   the shared `Arc`); `TypeError` `"expected $video, $audio or $image, got <type>"` for
///   anything else.
macro_rules! media_classes {
    (
        $field:ty;
        $(#[$video_doc:meta])* $video:ident,
        $(#[$audio_doc:meta])* $audio:ident,
        $(#[$image_doc:meta])* $image:ident;
        $(#[$to_py_doc:meta])* $to_py:ident;
        $(#[$of_doc:meta])* $of:ident $(;)?
    ) => {
        $(#[$video_doc])*
        #[pyo3::pyclass(frozen, module = "spdl_rs.io")]
        pub(crate) struct $video {
            pub(crate) inner: $field,
        }

        $(#[$audio_doc])*
        #[pyo3::pyclass(frozen, module = "spdl_rs.io")]
        pub(crate) struct $audio {
            pub(crate) inner: $field,
        }

        $(#[$image_doc])*
        #[pyo3::pyclass(frozen, module = "spdl_rs.io")]
        pub(crate) struct $image {
            pub(crate) inner: $field,
        }

        $(#[$to_py_doc])*
        pub(crate) fn $to_py(
            py: pyo3::Python<'_>,
            value: impl Into<$field>,
        ) -> pyo3::PyResult<pyo3::Py<pyo3::PyAny>> {
            use spdl_io::ffmpeg::frames::MediaKind;
            let inner: $field = value.into();
            Ok(match inner.kind() {
                MediaKind::Video => pyo3::Py::new(py, $video { inner })?.into_any(),
                MediaKind::Audio => pyo3::Py::new(py, $audio { inner })?.into_any(),
                MediaKind::Image => pyo3::Py::new(py, $image { inner })?.into_any(),
            })
        }

        $(#[$of_doc])*
        pub(crate) fn $of(obj: &pyo3::Bound<'_, pyo3::PyAny>) -> pyo3::PyResult<$field> {
            if let Ok(v) = obj.cast::<$video>() {
                return Ok(v.get().inner.clone());
            }
            if let Ok(a) = obj.cast::<$audio>() {
                return Ok(a.get().inner.clone());
            }
            if let Ok(i) = obj.cast::<$image>() {
                return Ok(i.get().inner.clone());
            }
            Err(pyo3::exceptions::PyTypeError::new_err(format!(
                concat!(
                    "expected ",
                    stringify!($video),
                    ", ",
                    stringify!($audio),
                    " or ",
                    stringify!($image),
                    ", got {}"
                ),
                $crate::media_frames::type_name(obj)
            )))
        }
    };
}
pub(crate) use media_classes;

/// `#[pymethods] impl $ty { ... }` with the properties and methods named in `[...]`, then the
/// methods written out in `{ ... }`:
///
/// ```ignore
/// media_pymethods! {
///     impl VideoPackets, Codec from |p| p.inner.codec(), [pix_fmt, width, height, frame_rate] {
///         fn __repr__(&self) -> String { ... }
///     }
/// }
/// ```
///
/// The properties are read from a `Codec` or a `Frames` (the kind named after the class, which
/// picks the definition where they differ: `width` is `u32` for a codec and `usize` for
/// frames), which the closure gets from the object (the macro makes it the plain method
/// `src()` of `$ty`). Each name is one arm below: its doc comment, Python name, type and body.
macro_rules! media_pymethods {
    (
        impl $ty:ident, $kind:ident from |$obj:ident| $src:expr, [$($prop:ident),* $(,)?]
        { $($methods:tt)* }
    ) => {
        impl $ty {
            /// The value this class's properties are read from.
            fn src(&self) -> &$kind {
                let $obj = self;
                $src
            }
        }
        $crate::media_props::media_pymethods!(@next [$ty $kind [] [$($prop)*] { $($methods)* }]);
    };
    (@next [$ty:ident $kind:ident [$($done:tt)*] [] { $($methods:tt)* }]) => {
        #[pyo3::pymethods]
        impl $ty {
            $($done)*
            $($methods)*
        }
    };
    (@next [$ty:ident $kind:ident $done:tt [$prop:ident $($props:ident)*] $methods:tt]) => {
        $crate::media_props::media_pymethods!(@$prop $kind [$ty $kind $done [$($props)*] $methods]);
    };
    (@emit [$ty:ident $kind:ident [$($done:tt)*] $props:tt $methods:tt] $($item:tt)*) => {
        $crate::media_props::media_pymethods!(@next [$ty $kind [$($done)* $($item)*] $props $methods]);
    };

    // Codec, packets and frames.
    (@width Codec $s:tt) => { $crate::media_props::media_pymethods!(@emit $s
        /// Width in pixels (coded).
        #[getter]
        fn width(&self) -> u32 { self.src().width() }
    ); };
    (@width Frames $s:tt) => { $crate::media_props::media_pymethods!(@emit $s
        /// Width in pixels.
        #[getter]
        fn width(&self) -> usize { self.src().width() }
    ); };
    (@height Codec $s:tt) => { $crate::media_props::media_pymethods!(@emit $s
        /// Height in pixels (coded).
        #[getter]
        fn height(&self) -> u32 { self.src().height() }
    ); };
    (@height Frames $s:tt) => { $crate::media_props::media_pymethods!(@emit $s
        /// Height in pixels.
        #[getter]
        fn height(&self) -> usize { self.src().height() }
    ); };
    (@pix_fmt $kind:ident $s:tt) => { $crate::media_props::media_pymethods!(@emit $s
        /// Pixel format name, e.g. `"yuv420p"`, `"rgb24"`.
        #[getter]
        fn pix_fmt(&self) -> String { self.src().format_name() }
    ); };
    (@sample_fmt $kind:ident $s:tt) => { $crate::media_props::media_pymethods!(@emit $s
        /// Sample format name, e.g. `"fltp"`, `"s16"`.
        #[getter]
        fn sample_fmt(&self) -> String { self.src().format_name() }
    ); };
    (@sample_rate $kind:ident $s:tt) => { $crate::media_props::media_pymethods!(@emit $s
        /// Sample rate in Hz.
        #[getter]
        fn sample_rate(&self) -> u32 { self.src().sample_rate() }
    ); };
    (@num_channels $kind:ident $s:tt) => { $crate::media_props::media_pymethods!(@emit $s
        /// Number of audio channels.
        #[getter]
        fn num_channels(&self) -> usize { self.src().num_channels() }
    ); };
    (@time_base $kind:ident $s:tt) => { $crate::media_props::media_pymethods!(@emit $s
        /// Time base `(num, den)` of the stream (of `get_pts()` for frames).
        #[getter]
        fn time_base(&self) -> (i32, i32) { self.src().time_base() }
    ); };

    // Codec and packets only.
    (@name Codec $s:tt) => { $crate::media_props::media_pymethods!(@emit $s
        /// Codec name, e.g. `"h264"`, `"aac"`, `"png"`.
        #[getter]
        fn name(&self) -> String { self.src().name() }
    ); };
    (@frame_rate Codec $s:tt) => { $crate::media_props::media_pymethods!(@emit $s
        /// Average frame rate `(num, den)` from the header.
        #[getter]
        fn frame_rate(&self) -> (i32, i32) { self.src().frame_rate() }
    ); };
    (@sample_aspect_ratio Codec $s:tt) => { $crate::media_props::media_pymethods!(@emit $s
        /// Sample aspect ratio `(num, den)`.
        #[getter]
        fn sample_aspect_ratio(&self) -> (i32, i32) { self.src().sample_aspect_ratio() }
    ); };
    (@rotation Codec $s:tt) => { $crate::media_props::media_pymethods!(@emit $s
        /// Display rotation in degrees counterclockwise (0, 90, 180, 270); not applied.
        #[getter]
        fn rotation(&self) -> i32 { self.src().rotation() }
    ); };
    (@channel_layout Codec $s:tt) => { $crate::media_props::media_pymethods!(@emit $s
        /// Channel layout as FFmpeg names it (`"stereo"`, `"5.1"`).
        #[getter]
        fn channel_layout(&self) -> String { self.src().channel_layout() }
    ); };

    // Frames only.
    (@num_frames Frames $s:tt) => { $crate::media_props::media_pymethods!(@emit $s
        /// Number of frames (FFmpeg frames: for audio, each holds many samples).
        #[getter]
        fn num_frames(&self) -> usize { self.src().len() }
        fn __len__(&self) -> usize { self.src().len() }
    ); };
    (@num_planes Frames $s:tt) => { $crate::media_props::media_pymethods!(@emit $s
        /// Planes of the pixel format (3 for `yuv420p`, 1 for `rgb24`).
        #[getter]
        fn num_planes(&self) -> usize { self.src().num_planes() }
    ); };
    (@num_samples Frames $s:tt) => { $crate::media_props::media_pymethods!(@emit $s
        /// Samples per channel over all frames.
        #[getter]
        fn num_samples(&self) -> usize { self.src().num_samples() }
    ); };
    (@get_pts Frames $s:tt) => { $crate::media_props::media_pymethods!(@emit $s
        /// Presentation timestamps of the frames in `time_base` units.
        fn get_pts(&self) -> Vec<i64> { self.src().pts() }
        /// Presentation timestamps of the frames in seconds.
        fn get_timestamps(&self) -> Vec<f64> { self.src().timestamps() }
    ); };
    (@clone Frames $s:tt) => { $crate::media_props::media_pymethods!(@emit $s
        /// A copy sharing the frame data.
        fn clone(&self) -> pyo3::PyResult<Self> {
            let copy = self.src().try_clone().map_err($crate::error::io_err)?;
            Ok(Self { inner: std::sync::Arc::new(copy) })
        }
    ); };
}
pub(crate) use media_pymethods;
