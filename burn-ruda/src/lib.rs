//! burn-ruda: the Burn backend for ruda devices.
//!
//! [`Ruda`] is a Burn backend: every tensor operation is Burn's own (burn-cubecl's kernels,
//! behind Burn's fusion engine when the `fusion` feature is on), except LayerNorm, the ruda
//! runtime's native fused kernel, the embedding table's gradient for tables of up to 1024
//! rows, a native kernel that replaces Burn's serial one ([`embedding`]), and, on CUDA, matrix
//! products and linear layers, which run through cuBLAS ([`matmul`]). [`Autodiff`] is a drop-in
//! for `burn::backend::Autodiff` that also runs the LayerNorm *backward* as one native kernel.
//!
//! ```text
//! // Before                                  // After
//! type B = Autodiff<burn::backend::Wgpu>;    type B = burn_ruda::Autodiff<burn_ruda::Ruda>;
//! ```
//!
//! ```no_run
//! use burn_backend::{Backend, TensorData, ops::{FloatTensorOps, ModuleOps}};
//!
//! type B = burn_ruda::Autodiff<burn_ruda::Ruda>;
//! let device = Default::default();
//! let x = B::float_from_data(TensorData::new(vec![1.0f32, 2.0, 4.0], [1, 3]), &device);
//! let gamma = B::float_from_data(TensorData::new(vec![1.0f32; 3], [3]), &device);
//! let y = B::layer_norm(x, gamma, None, 1e-5);
//! # let _ = y;
//! ```
//!
//! With `burn` itself, the same swap is one type alias: models generic over `B: Backend`
//! (`burn::nn::LayerNorm`, `burn::nn::transformer::*`) then use the native kernels unchanged.
//!
//! # How it is built
//! - [`signatures`]: the one list of Burn 0.21's backend method signatures and the macros that
//!   generate the delegating implementations of [`Ruda`] and [`Autodiff`] from it.
//! - [`embedding`]: the native embedding backward, used by Burn's autodiff for the gradient of
//!   `burn::nn::Embedding` (under [`Autodiff`] and Burn's own `Autodiff` alike).
//! - [`layer_norm`]: the native LayerNorm as a custom operation of the fusion stream, and the
//!   [`LayerNormBackend`] trait the autodiff decorator uses.
//! - [`matmul`]: `float_matmul` and `ModuleOps::linear` and its three gradients as native
//!   products where the runtime has them (cuBLAS on [`RudaCuda`]), Burn's elsewhere.
//! - [`autodiff`]: the decorator, recording LayerNorm as one autodiff node (memory-bound: under
//!   Burn's `BalancedCheckpointing` its output is recomputed by one more native forward).
//! - [`backward_with_grad`]: the backward pass from an output whose gradient is given
//!   (PyTorch's `y.backward(dy)`), under [`Autodiff`] and Burn's own autodiff alike.
//!
//! # Features
//! - `fusion` (default): delegate to `burn_fusion::Fusion<CubeBackend<R>>`; the native
//!   LayerNorm kernels are custom operations of the fusion stream. Without it, `Ruda`
//!   delegates to `CubeBackend<R>` and launches them directly.
//! - `wgpu`, `cuda` (default): the runtimes [`RudaWgpu`] and [`RudaCuda`].
//! - `distributed`: Burn's collective operations (`DistributedBackend`) on [`Ruda`] and
//!   [`Autodiff`], for burn-train's DDP strategy (all-reduce through NCCL on CUDA). Off by
//!   default, as in Burn. burn-train's multi-device strategy needs no feature.
//!
//! # Several devices
//! Tensors move between devices with Burn's `to_device`. Where the runtime has no
//! device-to-device transport (every wgpu backend), [`Ruda`] copies through the host instead of
//! Burn 0.21's transfer, which leaves the destination unwritten there ([`transfer`]).
//!
//! # Not done yet
//! - Only `layer_norm`, `embedding_backward`, and on CUDA `float_matmul` and the `linear` ops are
//!   native; every other op (including the other normalizations, convolutions and Burn's
//!   `attention` module op, which composes `float_matmul`) is Burn's.
//! - [`Autodiff`] requires a [`LayerNormBackend`] inner backend (any [`Ruda`]); for other
//!   backends use `burn::backend::Autodiff`.

#![warn(missing_docs)]

#[macro_use]
pub mod signatures;

pub mod autodiff;
pub mod backend;
pub mod backward_with_grad;
#[cfg(feature = "distributed")]
pub mod distributed;
pub mod embedding;
pub mod layer_norm;
pub mod matmul;
pub mod rebind;
pub mod transfer;

pub use autodiff::Autodiff;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub use backend::DefaultRuntime;
pub use backend::{Inner, Ruda};
pub use backward_with_grad::{BackwardWithGrad, GivenGradOps, backward_with_grad};
pub use layer_norm::LayerNormBackend;

#[cfg(feature = "cuda")]
pub use ruda_runtime::RudaCuda;
#[cfg(feature = "wgpu")]
pub use ruda_runtime::RudaWgpu;
pub use ruda_runtime::device::{DeviceError, RudaDevice};
