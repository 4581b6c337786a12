//! What SPDL's per-kind media classes share, written once: [`media_classes!`] declares the
//! video / audio / image classes over one value (`VideoCodec` / `AudioCodec` / `ImageCodec`
//! over a `Codec`, the packet and frame classes over `Arc<Packets>` / `Arc<Frames>`) with
//! their two conversions, and [`media_pymethods!`] gives each class the read-only properties
//! it names (`width`, `pix_fmt`, `time_base`, ...) from one definition per property.

/// Declares three frozen, weak-referenceable (as SPDL's) `spdl_rs.io` classes named `$video`, `$audio`, `$image` (each with
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
        $(#[$of_doc:meta])* $of:ident
        $(; $(#[$take_doc:meta])* $take:ident)? $(;)?
    ) => {
        $crate::media_props::media_classes!(@class $field; $(#[$video_doc])* $video);
        $crate::media_props::media_classes!(@class $field; $(#[$audio_doc])* $audio);
        $crate::media_props::media_classes!(@class $field; $(#[$image_doc])* $image);

        $(#[$to_py_doc])*
        pub(crate) fn $to_py(
            py: pyo3::Python<'_>,
            value: impl Into<$field>,
        ) -> pyo3::PyResult<pyo3::Py<pyo3::PyAny>> {
            use spdl_io::ffmpeg::frames::MediaKind;
            let inner: $field = value.into();
            Ok(match inner.kind() {
                MediaKind::Video => pyo3::Py::new(py, $video { inner, consumed: Default::default() })?.into_any(),
                MediaKind::Audio => pyo3::Py::new(py, $audio { inner, consumed: Default::default() })?.into_any(),
                MediaKind::Image => pyo3::Py::new(py, $image { inner, consumed: Default::default() })?.into_any(),
            })
        }

        $(#[$of_doc])*
        pub(crate) fn $of(obj: &pyo3::Bound<'_, pyo3::PyAny>) -> pyo3::PyResult<$field> {
            $crate::media_props::media_classes!(@get obj, false, $video, $audio, $image);
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
                $crate::error::type_name(obj)
            )))
        }

        $(
            $(#[$take_doc])*
            pub(crate) fn $take(obj: &pyo3::Bound<'_, pyo3::PyAny>) -> pyo3::PyResult<$field> {
                $crate::media_props::media_classes!(@get obj, true, $video, $audio, $image);
                $of(obj)
            }
        )?
    };
    // One of the three classes.
    (@class $field:ty; $(#[$doc:meta])* $class:ident) => {
        $(#[$doc])*
        #[pyo3::pyclass(frozen, weakref, module = "spdl_rs.io")]
        pub(crate) struct $class {
            pub(crate) inner: $field,
            /// Set once a call took the value (see `media_classes!`'s `$take`).
            pub(crate) consumed: std::sync::atomic::AtomicBool,
        }
    };
    // The value of `$obj` when it is one of the classes (`TypeError` once consumed), marking
    // it consumed when `$take`.
    (@get $obj:ident, $take:expr, $($class:ident),*) => {
        $(
            if let Ok(c) = $obj.cast::<$class>() {
                let c = c.get();
                $crate::media_props::check_live(stringify!($class), &c.consumed, $take)?;
                return Ok(c.inner.clone());
            }
        )*
    };
}
pub(crate) use media_classes;

/// `TypeError` when `consumed` is set, as SPDL's objects after a call took them
/// (`decode_packets(packets)`, `convert_frames(frames)`, ...: SPDL moves them into the call);
/// with `take`, sets it.
pub(crate) fn check_live(
    class: &str,
    consumed: &std::sync::atomic::AtomicBool,
    take: bool,
) -> pyo3::PyResult<()> {
    use std::sync::atomic::Ordering;
    let was = if take {
        consumed.swap(true, Ordering::AcqRel)
    } else {
        consumed.load(Ordering::Acquire)
    };
    if was {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "this {class} was consumed by an earlier call (decode_packets, convert_frames, \
             apply_bsf, BSF.filter, a Decoder or an Encoder take their input, as in SPDL); \
             clone() it before that call to use it twice"
        )));
    }
    Ok(())
}

/// `#[pymethods] impl $ty { ... }` with the properties and methods named in `[...]`, a
/// `__repr__` showing the properties named after `repr` (when given: `$ty(width=640,
/// pix_fmt="yuv420p")`, see [`repr`]), then the methods written out in `{ ... }`:
///
/// ```ignore
/// media_pymethods! {
///     impl VideoCodec, Codec from |c| &c.inner, [name, width, height, pix_fmt, time_base]
///     repr [name, width, height] {
///         fn extra(&self) -> u32 { ... }
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
        $(repr [$($field:ident),* $(,)?])?
        { $($methods:tt)* }
    ) => {
        impl $ty {
            /// The value this class's properties are read from.
            fn src(&self) -> &$kind {
                let $obj = self;
                $src
            }
        }
        $crate::media_props::media_pymethods!(@next [$ty $kind [] [$($prop)*] {
            $(
                fn __repr__(&self) -> String {
                    $crate::media_props::repr(
                        stringify!($ty),
                        &[$((stringify!($field), &self.$field())),*],
                    )
                }
            )?
            $($methods)*
        }]);
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

    (@get $s:tt $doc:literal $name:ident: $ret:ty = $method:ident) => {
        $crate::media_props::media_pymethods!(@emit $s
            #[doc = $doc]
            #[getter]
            fn $name(&self) -> $ret {
                self.src().$method()
            }
        );
    };

    // The properties: `(@<name> <kind> $s) => <doc>, <name>: <type> = <method of the source>`.
    // Codec, packets and frames:
    (@width Codec $s:tt) => { $crate::media_props::media_pymethods!(@get $s "Width in pixels (coded)." width: u32 = width); };
    (@width Frames $s:tt) => { $crate::media_props::media_pymethods!(@get $s "Width in pixels." width: usize = width); };
    (@height Codec $s:tt) => { $crate::media_props::media_pymethods!(@get $s "Height in pixels (coded)." height: u32 = height); };
    (@height Frames $s:tt) => { $crate::media_props::media_pymethods!(@get $s "Height in pixels." height: usize = height); };
    (@pix_fmt $k:ident $s:tt) => { $crate::media_props::media_pymethods!(@get $s "Pixel format name, e.g. `\"yuv420p\"`, `\"rgb24\"`." pix_fmt: String = format_name); };
    (@sample_fmt $k:ident $s:tt) => { $crate::media_props::media_pymethods!(@get $s "Sample format name, e.g. `\"fltp\"`, `\"s16\"`." sample_fmt: String = format_name); };
    (@sample_rate $k:ident $s:tt) => { $crate::media_props::media_pymethods!(@get $s "Sample rate in Hz." sample_rate: u32 = sample_rate); };
    (@num_channels $k:ident $s:tt) => { $crate::media_props::media_pymethods!(@get $s "Number of audio channels." num_channels: usize = num_channels); };
    (@time_base $k:ident $s:tt) => { $crate::media_props::media_pymethods!(@get $s "Time base `(num, den)` of the stream (of `get_pts()` for frames)." time_base: (i32, i32) = time_base); };
    // Codec and packets:
    (@name Codec $s:tt) => { $crate::media_props::media_pymethods!(@get $s "Codec name, e.g. `\"h264\"`, `\"aac\"`, `\"png\"`." name: String = name); };
    (@frame_rate Codec $s:tt) => { $crate::media_props::media_pymethods!(@get $s "Average frame rate `(num, den)` from the header." frame_rate: (i32, i32) = frame_rate); };
    (@sample_aspect_ratio Codec $s:tt) => { $crate::media_props::media_pymethods!(@get $s "Sample aspect ratio `(num, den)`." sample_aspect_ratio: (i32, i32) = sample_aspect_ratio); };
    (@rotation Codec $s:tt) => { $crate::media_props::media_pymethods!(@get $s "Display rotation in degrees counterclockwise (0, 90, 180, 270); not applied." rotation: i32 = rotation); };
    (@channel_layout Codec $s:tt) => { $crate::media_props::media_pymethods!(@get $s "Channel layout as FFmpeg names it (`\"stereo\"`, `\"5.1\"`)." channel_layout: String = channel_layout); };
    // Frames:
    (@num_planes Frames $s:tt) => { $crate::media_props::media_pymethods!(@get $s "Planes of the pixel format (3 for `yuv420p`, 1 for `rgb24`)." num_planes: usize = num_planes); };
    (@num_samples Frames $s:tt) => { $crate::media_props::media_pymethods!(@get $s "Samples per channel over all frames." num_samples: usize = num_samples); };

    // Frames only, the methods:
    (@num_frames Frames $s:tt) => { $crate::media_props::media_pymethods!(@emit $s
        /// Number of frames (FFmpeg frames: for audio, each holds many samples).
        #[getter]
        fn num_frames(&self) -> usize { self.src().len() }
        fn __len__(&self) -> usize { self.src().len() }
    ); };
    (@get_pts Frames $s:tt) => { $crate::media_props::media_pymethods!(@emit $s
        /// Presentation timestamps of the frames in `time_base` units.
        fn get_pts(&self) -> Vec<i64> { self.src().pts() }
        /// Presentation timestamps of the frames in seconds.
        fn get_timestamps(&self) -> Vec<f64> { self.src().timestamps() }
    ); };
    (@clone Frames [$ty:ident $($s:tt)*]) => { $crate::media_props::media_pymethods!(@emit [$ty $($s)*]
        /// A copy sharing the frame data. `TypeError` once the frames were consumed.
        fn clone(&self) -> pyo3::PyResult<Self> {
            $crate::media_props::check_live(stringify!($ty), &self.consumed, false)?;
            let copy = self.src().try_clone().map_err($crate::error::io_err)?;
            Ok(Self { inner: std::sync::Arc::new(copy), consumed: Default::default() })
        }
    ); };
}
pub(crate) use media_pymethods;

/// `class(name=value, ...)` with each value's `Debug` form (numbers as they are, strings
/// quoted, `(num, den)` pairs): the `__repr__` of the media classes.
pub(crate) fn repr(class: &str, fields: &[(&str, &dyn std::fmt::Debug)]) -> String {
    let fields: Vec<String> = fields
        .iter()
        .map(|(name, value)| format!("{name}={value:?}"))
        .collect();
    format!("{class}({})", fields.join(", "))
}
