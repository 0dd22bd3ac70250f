//! The Ruda runtime layer.
//!
//! A ruda runtime is a [CubeCL runtime](cubecl::Runtime) that also implements [`Runtime`]: native
//! fused LayerNorm hooks and a driver fingerprint for persistent autotuning. This crate provides
//! the trait, the buffer type its hooks exchange ([`TensorBuffer`]), the two ruda runtimes
//! ([`RudaCuda`] and [`RudaWgpu`]), and one folder per native operation, each written once in
//! CubeCL for every runtime: [`layer_norm`], [`softmax`] (softmax and log-softmax), [`embedding`]
//! (the embedding table's gradient), [`gelu`]; plus native matrix products (cuBLAS on [`RudaCuda`],
//! [`matmul`]), device discovery ([`device`]), a sync that waits on CubeCL's device thread
//! ([`sync()`]), and persistent autotuning and compiled kernels, keyed by the driver fingerprint
//! ([`autotune`], [`compilation_cache`]).
//!
//! Everything a third party needs to write its own ruda runtime is re-exported here: the CubeCL
//! crate itself and its client, compiler, server and task types.

#![warn(missing_docs)]

extern crate alloc;

pub mod adam;
pub mod autotune;
pub mod compilation_cache;
pub mod device;
pub mod embedding;
pub mod env;
pub mod faults;
mod fingerprint;
pub mod gelu;
mod group_reduce;
pub mod hooks;
pub mod layer_norm;
mod layout;
pub mod matmul;
pub mod process;
pub mod runtime;
pub mod softmax;
mod sync;
pub mod tensor_buffer;
mod version;

pub use adam::adam_step;
pub use embedding::embedding_backward;
pub use fingerprint::{DriverFingerprint, fingerprint_hash};
pub use gelu::{gelu_backward, gelu_forward};
pub use hooks::Runtime;
pub use layer_norm::{layer_norm_backward, layer_norm_forward};
pub use softmax::{softmax_backward, softmax_forward};
pub use sync::sync;
pub use tensor_buffer::TensorBuffer;
pub use version::{CUBECL_VERSION, RUDA_RUNTIME_VERSION};

#[cfg(feature = "cuda")]
pub use runtime::cuda::RudaCuda;
#[cfg(feature = "wgpu")]
pub use runtime::wgpu::RudaWgpu;

/// burn-cubecl, whose `CubeTensor` converts to and from [`TensorBuffer`].
pub use burn_cubecl;
/// CubeCL, re-exported so that a runtime author depends on `ruda_runtime` alone.
pub use cubecl;

/// The CubeCL types a ruda runtime is made of.
pub mod prelude {
    pub use crate::{hooks::Runtime, tensor_buffer::TensorBuffer};
    pub use burn_backend::DType;
    pub use cubecl::{
        Compiler, CubeTask, Runtime as CubeRuntime,
        client::ComputeClient,
        device::{Device, DeviceId},
        ir::TargetProperties,
        server::{ComputeServer, Handle},
        zspace::{Shape, Strides},
    };
}
