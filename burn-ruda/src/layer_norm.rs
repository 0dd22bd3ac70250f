//! Native LayerNorm as a backend capability: the [`LayerNormBackend`] trait (implemented by
//! [`crate::Ruda`] in `backend/layer_norm_ops.rs`), the launches on burn-cubecl tensors it is
//! built from, and counters that let tests prove the native path ran.
//!
//! On `Ruda` under the `fusion` feature the native forward and backward are *custom operations* of
//! Burn's fusion stream (`OperationIr::Custom`, as burn-vision's connected components): they
//! are queued in order with the surrounding operations, never force a flush, and run their
//! kernel when the stream executes (the fused operations before them are executed first).
//! Without `fusion` they launch directly on burn-cubecl's tensors.

use core::sync::atomic::{AtomicUsize, Ordering};

use burn_backend::{
    Backend, TensorMetadata,
    tensor::{Device, FloatTensor},
};
use burn_cubecl::{CubeRuntime, tensor::CubeTensor};
use ruda_runtime::TensorBuffer;

/// Number of native LayerNorm forward kernels launched by this process (a test hook: it lets a
/// test prove that the native path ran, and how many times).
///
/// It counts launches, not calls: under the `fusion` feature the kernel is launched when the
/// fusion stream executes, so read it after reading a result or after `Backend::sync`.
pub static NATIVE_FORWARD_CALLS: AtomicUsize = AtomicUsize::new(0);
/// Number of native LayerNorm backward kernels launched by this process (a test hook).
pub static NATIVE_BACKWARD_CALLS: AtomicUsize = AtomicUsize::new(0);

/// The current values of [`NATIVE_FORWARD_CALLS`] and [`NATIVE_BACKWARD_CALLS`].
pub fn native_calls() -> (usize, usize) {
    (
        NATIVE_FORWARD_CALLS.load(Ordering::SeqCst),
        NATIVE_BACKWARD_CALLS.load(Ordering::SeqCst),
    )
}

/// A backend that may run LayerNorm forward and backward as native kernels.
///
/// [`Ruda`] implements it through its runtime's hooks ([`ruda_runtime::Runtime::layer_norm`]
/// and [`ruda_runtime::Runtime::layer_norm_backward`]); [`crate::Autodiff`] uses it to record
/// LayerNorm as one autodiff node.
pub trait LayerNormBackend: Backend {
    /// Whether [`Self::layer_norm_native`] and [`Self::layer_norm_native_backward`] are
    /// available on `device`.
    fn has_native_layer_norm(device: &Device<Self>) -> bool;

    /// LayerNorm over the last dimension: `[out, mean, rstd]`, where `mean` and `rstd`
    /// (`1 / sqrt(var + epsilon)`) are F32 with the input's shape without its last dimension.
    ///
    /// # Panics
    /// When the backend has no native LayerNorm, or on invalid shapes.
    fn layer_norm_native(
        tensor: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: Option<FloatTensor<Self>>,
        epsilon: f64,
    ) -> [FloatTensor<Self>; 3];

    /// LayerNorm's output alone, for a forward no backward follows (inference, an untracked
    /// autodiff node, a recomputed one). The default is [`Self::layer_norm_native`]'s `out`;
    /// [`crate::Ruda`] under `fusion` queues an operation with that one output, the statistics
    /// staying temporaries of the kernel launch, so the fusion stream has no tensors for them
    /// to track and drop.
    ///
    /// # Panics
    /// When the backend has no native LayerNorm, or on invalid shapes.
    fn layer_norm_native_output(
        tensor: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: Option<FloatTensor<Self>>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        let [out, _mean, _rstd] = Self::layer_norm_native(tensor, gamma, beta, epsilon);
        out
    }

    /// LayerNorm gradients `[dx, dgamma, dbeta]` from the input, gamma, the output gradient,
    /// and the forward's `mean` and `rstd`.
    ///
    /// # Panics
    /// When the backend has no native LayerNorm, or on invalid shapes.
    fn layer_norm_native_backward(
        tensor: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        rstd: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3];
}

/// Whether the native LayerNorm of `B` takes `tensor`: the backend has one and the tensor has
/// at least one dimension with a non-empty last dimension (other shapes go to the composed
/// LayerNorm, which handles them).
pub(crate) fn native_applies<B: LayerNormBackend>(tensor: &FloatTensor<B>) -> bool {
    let shape = tensor.shape();
    let usable = shape.num_dims() >= 1 && shape[shape.num_dims() - 1] > 0;
    usable && B::has_native_layer_norm(&B::float_device(tensor))
}

/// The statistics' shape: the input's without its last dimension.
#[cfg(feature = "fusion")]
pub(crate) fn stats_shape(shape: &burn_backend::Shape) -> burn_backend::Shape {
    let dims: Vec<usize> = shape.iter().take(shape.num_dims() - 1).copied().collect();
    burn_backend::Shape::from(dims)
}

/// Native forward on burn-cubecl tensors.
pub(crate) fn cube_forward<R: ruda_runtime::Runtime + CubeRuntime>(
    tensor: CubeTensor<R>,
    gamma: CubeTensor<R>,
    beta: Option<CubeTensor<R>>,
    epsilon: f64,
) -> [CubeTensor<R>; 3] {
    let client = tensor.client.clone();
    let device = tensor.device.clone();
    let outputs = R::layer_norm(
        &client,
        TensorBuffer::from(tensor),
        TensorBuffer::from(gamma),
        beta.map(TensorBuffer::from),
        epsilon,
    );
    NATIVE_FORWARD_CALLS.fetch_add(1, Ordering::SeqCst);
    outputs.map(|buffer| buffer.into_cube_tensor(client.clone(), device.clone()))
}

/// Native backward on burn-cubecl tensors.
pub(crate) fn cube_backward<R: ruda_runtime::Runtime + CubeRuntime>(
    tensor: CubeTensor<R>,
    gamma: CubeTensor<R>,
    grad: CubeTensor<R>,
    mean: CubeTensor<R>,
    rstd: CubeTensor<R>,
) -> [CubeTensor<R>; 3] {
    let client = tensor.client.clone();
    let device = tensor.device.clone();
    let outputs = R::layer_norm_backward(
        &client,
        TensorBuffer::from(tensor),
        TensorBuffer::from(gamma),
        TensorBuffer::from(grad),
        TensorBuffer::from(mean),
        TensorBuffer::from(rstd),
    );
    NATIVE_BACKWARD_CALLS.fetch_add(1, Ordering::SeqCst);
    outputs.map(|buffer| buffer.into_cube_tensor(client.clone(), device.clone()))
}
