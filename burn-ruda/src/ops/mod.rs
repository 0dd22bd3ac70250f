//! The native operations of [`crate::Ruda`], one file each, all built the same way: the
//! capability a backend offers (a trait, where the autodiff decorator needs one), the checks
//! run on the caller's thread, the launch on burn-cubecl tensors (a [`NativeKernel`]), and
//! [`custom_op::run`], which launches it or queues it in burn-fusion's stream.
//!
//! - [`layer_norm`]: LayerNorm forward and backward ([`LayerNormBackend`]).
//! - [`softmax`]: softmax and log-softmax forward and backward ([`SoftmaxBackend`]).
//! - [`matmul`]: `float_matmul` and the `linear` ops as native products (cuBLAS on CUDA).
//! - [`linear`]: a linear layer's backward as one operation ([`LinearBackend`]).
//! - [`embedding`]: the embedding table's gradient.
//! - `gelu`: GELU forward and backward (with `RUDA_GELU=native`).
//! - [`given_grad`]: the root and seed of `backward_with_grad`'s node ([`GivenGradOps`]).
//! - [`adam`]: one parameter's Adam update ([`AdamBackend`]), for [`crate::optim::Adam`].
//!
//! The autodiff nodes that record these ops as one node each are in [`crate::autodiff`], above
//! this layer.

pub mod adam;
pub mod counters;
pub(crate) mod custom_op;
pub mod embedding;
pub(crate) mod faults;
pub(crate) mod gelu;
pub mod given_grad;
pub mod layer_norm;
pub mod linear;
pub mod matmul;
mod ones;
pub mod softmax;

use burn_backend::Backend;
use burn_cubecl::CubeRuntime;

pub use adam::AdamBackend;
pub use given_grad::GivenGradOps;
pub use layer_norm::LayerNormBackend;
pub use linear::LinearBackend;
pub use softmax::SoftmaxBackend;

pub(crate) use custom_op::NativeKernel;

/// A runtime `Ruda` runs on: a ruda runtime that burn-cubecl can run (every bound `Ruda`'s
/// methods need, in one name).
pub trait RudaRuntime: ruda_runtime::Runtime + CubeRuntime {}
impl<R: ruda_runtime::Runtime + CubeRuntime> RudaRuntime for R {}

/// The tensor type of `Ruda` on runtime `R`, whatever its element types: burn-fusion's tensor
/// under the `fusion` feature, burn-cubecl's otherwise.
#[cfg(feature = "fusion")]
pub type RudaTensor<R> = burn_fusion::FusionTensor<crate::fusion::RudaFusionRuntime<R>>;
/// The tensor type of `Ruda` on runtime `R`, whatever its element types: burn-fusion's tensor
/// under the `fusion` feature, burn-cubecl's otherwise.
#[cfg(not(feature = "fusion"))]
pub type RudaTensor<R> = burn_cubecl::tensor::CubeTensor<R>;

/// A backend whose float and int tensors are `Ruda`'s on runtime `R`: [`crate::Inner`], which
/// the ops call for Burn's own version of an operation and for reshapes around a native one.
pub trait InnerBackend<R: RudaRuntime>:
    Backend<
        Device = R::CubeDevice,
        FloatTensorPrimitive = RudaTensor<R>,
        IntTensorPrimitive = RudaTensor<R>,
    >
{
}
impl<R: RudaRuntime, B> InnerBackend<R> for B where
    B: Backend<
            Device = R::CubeDevice,
            FloatTensorPrimitive = RudaTensor<R>,
            IntTensorPrimitive = RudaTensor<R>,
        >
{
}
