//! The ruda runtimes: CubeCL's CUDA and wgpu runtimes with the hooks of [`crate::Runtime`].

pub mod streams;

#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "wgpu")]
pub mod wgpu;
