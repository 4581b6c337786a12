//! spdl-sources
