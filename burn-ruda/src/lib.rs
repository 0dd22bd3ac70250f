//! burn-ruda: the Burn backend for ruda devices.
//!
//! [`Ruda`] is a Burn backend: every tensor operation is Burn's own (burn-cubecl's kernels,
//! behind Burn's fusion engine when the `fusion` feature is on), except the native ones of
//! [`ops`]: LayerNorm, softmax and log-softmax (one fused kernel each, on every runtime), the
//! embedding table's gradient for tables of up to 1024 rows, and, on CUDA, matrix products and
//! linear layers, which run through cuBLAS. [`Autodiff`] is a drop-in for
//! `burn::backend::Autodiff` that also records LayerNorm, softmax and log-softmax as one node
//! each, with a native backward, and runs a linear layer's backward as one operation.
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
//! (`burn::nn::LayerNorm`, `burn::nn::transformer::*`, `burn::nn::loss::CrossEntropyLoss`) then
//! use the native kernels unchanged.
//!
//! # How it is built (layers, from the bottom)
//! - [`signatures`]: the one list of Burn 0.21's backend method signatures and the macros that
//!   generate the delegating implementations of [`Ruda`] and [`Autodiff`] from it, and the
//!   trait of the methods they implement themselves.
//! - [`ops`]: one file per native operation, each a capability trait where the decorator needs
//!   one, the kernel on burn-cubecl tensors, and `Ruda`'s implementation through one helper
//!   that launches it or queues it in burn-fusion's stream.
//! - [`fusion`] (feature `fusion`): [`fusion::RudaCube`], burn-cubecl's backend under a name
//!   of ours, so that burn-fusion runs it with the fusers ruda chooses ([`fusion::FuserSet`],
//!   `RUDA_FUSERS`).
//! - [`backend`]: [`Ruda`] itself, delegating to [`Inner`] and dispatching its own methods to
//!   [`ops`].
//! - [`autodiff`]: the decorator, recording the native operations as one node each, and
//!   [`backward_with_grad`], the backward pass from an output whose gradient is given
//!   (PyTorch's `y.backward(dy)`), under [`Autodiff`] and Burn's own autodiff alike.
//! - [`optim`]: Adam with one native update per parameter ([`optim::AdamConfig`]: Burn's
//!   options and state records), for Burn's `Learner` or any training loop.
//!
//! # Features
//! - `fusion` (default): delegate to `burn_fusion::Fusion<fusion::RudaCube<R>>`; the native
//!   kernels are custom operations of the fusion stream. Without it, `Ruda` delegates to
//!   `CubeBackend<R>` and launches them directly.
//! - `wgpu`, `cuda` (default): the runtimes [`RudaWgpu`] and [`RudaCuda`].
//! - `distributed`: Burn's collective operations (`DistributedBackend`) on [`Ruda`] and
//!   [`Autodiff`], for burn-train's DDP strategy (all-reduce through NCCL on CUDA). Off by
//!   default, as in Burn. burn-train's multi-device strategy needs no feature.
//! - `counters`: count the native kernels' launches ([`ops::counters`]), for tests.
//!
//! # Several devices
//! Tensors move between devices with Burn's `to_device`. Where the runtime has no
//! device-to-device transport (every wgpu backend), [`Ruda`] copies through the host instead of
//! Burn 0.21's transfer, which leaves the destination unwritten there ([`transfer`]).
//!
//! # Not done yet
//! - Every op not in [`ops`] (the other normalizations, convolutions, Burn's `attention` module
//!   op, which composes `float_matmul`) is Burn's.
//! - [`Autodiff`] requires a [`NativeBackend`] inner backend (any [`Ruda`]); for other
//!   backends use `burn::backend::Autodiff`.

#![warn(missing_docs)]

#[macro_use]
pub mod signatures;

pub mod autodiff;
pub mod backend;
#[cfg(feature = "distributed")]
pub mod distributed;
#[cfg(feature = "fusion")]
pub mod fusion;
pub mod ops;
pub mod optim;
pub mod rebind;
pub mod transfer;

pub use autodiff::backward_with_grad::{BackwardWithGrad, backward_with_grad};
pub use autodiff::{Autodiff, NativeBackend};
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub use backend::DefaultRuntime;
pub use backend::{Inner, Ruda};
pub use ops::{GivenGradOps, LayerNormBackend, RudaRuntime, SoftmaxBackend};

#[cfg(feature = "cuda")]
pub use ruda_runtime::RudaCuda;
#[cfg(feature = "wgpu")]
pub use ruda_runtime::RudaWgpu;
pub use ruda_runtime::device::{DeviceError, RudaDevice};
