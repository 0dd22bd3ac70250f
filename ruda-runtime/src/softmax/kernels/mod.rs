//! The `#[cube]` kernels: one source for every CubeCL runtime (CUDA, wgpu/Vulkan/Metal, ...).

// Dimension `dim` not the last: one unit per vector of columns.
pub(crate) mod columns;
// The last dimension, rows staged in shared memory, several rows a cube in a pipeline.
pub(crate) mod pipelined;
// The last dimension: a group of units per row (registers, or looped with optional staging).
pub(crate) mod rows;
// The last dimension, one unit per row (devices without plane operations).
pub(crate) mod unit;
