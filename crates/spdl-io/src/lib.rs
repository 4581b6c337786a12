//! spdl-io
