//! [`DType`]: the element type of every array and batch in the workspace (decoded frames,
//! image batches, host and device buffers), with its NumPy, buffer-protocol and array-interface
//! names. DLPack's own type codes are [`crate::dlpack::DLDataType`]'s.

/// Element type of an array or batch buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// 8-bit unsigned (images).
    U8,
    /// 16-bit unsigned, native endian (16-bit PNG/TIFF).
    U16,
    /// 32-bit float (normalized images, audio).
    F32,
    /// 16-bit signed, native endian (`s16` audio).
    I16,
    /// 32-bit signed, native endian (`s32` audio).
    I32,
    /// 64-bit signed, native endian (`s64` audio).
    I64,
    /// 64-bit float, native endian (`dbl` audio).
    F64,
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::U8 => 1,
            DType::U16 | DType::I16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }

    /// The NumPy dtype name: `"uint8"`, `"uint16"`, `"float32"`, `"int16"`, ...
    pub fn name(self) -> &'static str {
        match self {
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::F32 => "float32",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F64 => "float64",
        }
    }

    /// The `struct` module format of the Python buffer protocol (native byte order).
    pub fn format(self) -> &'static std::ffi::CStr {
        match self {
            DType::U8 => c"B",
            DType::U16 => c"H",
            DType::F32 => c"f",
            DType::I16 => c"h",
            DType::I32 => c"i",
            DType::I64 => c"q",
            DType::F64 => c"d",
        }
    }

    /// The NumPy type string of `__array_interface__` / `__cuda_array_interface__`
    /// (`"|u1"`, `"<u2"`, `"<f4"`, `"<i2"`, ... on little-endian hosts).
    pub fn typestr(self) -> &'static str {
        let (little, big) = match self {
            DType::U8 => return "|u1",
            DType::U16 => ("<u2", ">u2"),
            DType::F32 => ("<f4", ">f4"),
            DType::I16 => ("<i2", ">i2"),
            DType::I32 => ("<i4", ">i4"),
            DType::I64 => ("<i8", ">i8"),
            DType::F64 => ("<f8", ">f8"),
        };
        if cfg!(target_endian = "little") {
            little
        } else {
            big
        }
    }
}
