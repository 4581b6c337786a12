//! spdl-core: the pipeline engine.
