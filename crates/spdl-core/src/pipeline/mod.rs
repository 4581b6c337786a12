//! Building and running a pipeline: [`PipelineBuilder`] -> [`Pipeline`].

pub(crate) mod builder;
pub(crate) mod handle;

pub use builder::PipelineBuilder;
pub use handle::{EpochIter, EpochStream, Pipeline, PipelineState, StopHandle};
