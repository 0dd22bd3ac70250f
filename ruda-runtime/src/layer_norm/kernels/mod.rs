//! The `#[cube]` kernels: one source for every CubeCL runtime (CUDA, wgpu/Vulkan/Metal, ...).

pub(crate) mod backward;
pub(crate) mod forward;
pub(crate) mod unit;
