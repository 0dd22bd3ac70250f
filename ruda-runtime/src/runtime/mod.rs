//! The Ruda runtime trait, the buffer type of its hooks, and the ruda runtimes.

pub mod backend;
pub mod normalization;

#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "wgpu")]
pub mod wgpu;
