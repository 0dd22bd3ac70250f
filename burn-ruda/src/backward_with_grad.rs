//! [`backward_with_grad`]: the backward pass from an output whose gradient is given, PyTorch's
//! `y.backward(dy)`.
//!
//! Burn 0.21's `Tensor::backward` seeds the output's gradient with ones of the output's shape:
//! for a non-scalar output that is one more full-size tensor, filled on every call (at
//! 16384x8192 f32, 512 MB written, 118 us on an H200). Where the output's gradient comes from
//! elsewhere (a pipeline stage, a loss computed outside the graph, a benchmark that times one
//! layer as a training loop sees it, with its upstream gradient given), `backward_with_grad(y,
//! dy)` starts the pass from `dy` itself. It records one node after `y` whose output is a single
//! element and whose backward hands `dy` to `y`, so the seed Burn fills is that one element.
//!
//! Burn's autodiff has no such entry point, and its `Gradients` container and node API
//! (`burn_autodiff::ops`) are public, so this is a small node of ours, like the LayerNorm node
//! of [`crate::autodiff`]. It works for `burn::backend::Autodiff<B>` over any backend and for
//! [`crate::Autodiff`].

use burn_autodiff::{
    checkpoint::{base::Checkpointer, strategy::CheckpointStrategy},
    grads::Gradients,
    ops::{Backward, Ops, OpsKind},
};
use burn_backend::{AutodiffBackend, Backend, TensorData, TensorMetadata, tensor::FloatTensor};
use burn_tensor::Tensor;

use crate::autodiff::Autodiff;
use crate::layer_norm::LayerNormBackend;

/// Autodiff backends whose backward pass can start from an output with a given gradient.
pub trait BackwardWithGrad: AutodiffBackend {
    /// The gradients of every tracked tensor `tensor` depends on, when `tensor`'s own gradient
    /// is `grad`: what `(tensor * grad).sum().backward()` computes, without that product and
    /// sum, and without the full-size seed of `tensor.backward()`.
    ///
    /// # Panics
    /// If `grad`'s shape or dtype differs from `tensor`'s.
    fn backward_with_grad(
        tensor: FloatTensor<Self>,
        grad: FloatTensor<Self::InnerBackend>,
    ) -> Self::Gradients;
}

/// The backward pass from `tensor` with its gradient `grad`; see [`BackwardWithGrad`].
///
/// ```no_run
/// use burn_tensor::{Distribution, Tensor};
/// use burn_ruda::backward_with_grad;
///
/// type B = burn_ruda::Autodiff<burn_ruda::Ruda>;
/// let device = Default::default();
/// let x = Tensor::<B, 2>::random([4, 8], Distribution::Default, &device).require_grad();
/// let y = x.clone().exp();
/// // dy: the gradient of y, from wherever the loss was computed.
/// let dy = Tensor::random([4, 8], Distribution::Default, &device);
/// let grads = backward_with_grad(y, dy);
/// let dx = x.grad(&grads).expect("x is tracked");
/// # let _ = dx;
/// ```
///
/// # Panics
/// If `grad`'s shape or dtype differs from `tensor`'s.
pub fn backward_with_grad<B: BackwardWithGrad, const D: usize>(
    tensor: Tensor<B, D>,
    grad: Tensor<B::InnerBackend, D>,
) -> B::Gradients {
    B::backward_with_grad(
        tensor.into_primitive().tensor(),
        grad.into_primitive().tensor(),
    )
}

/// The backends Burn's autodiff differentiates over: every backend, or with feature
/// `distributed` (where Burn's `AutodiffBackend` requires it) every `DistributedBackend`.
#[cfg(not(feature = "distributed"))]
pub trait AutodiffInner: Backend {}
#[cfg(not(feature = "distributed"))]
impl<B: Backend> AutodiffInner for B {}

/// The backends Burn's autodiff differentiates over: every backend, or with feature
/// `distributed` (where Burn's `AutodiffBackend` requires it) every `DistributedBackend`.
#[cfg(feature = "distributed")]
pub trait AutodiffInner: burn_backend::distributed::DistributedBackend {}
#[cfg(feature = "distributed")]
impl<B: burn_backend::distributed::DistributedBackend> AutodiffInner for B {}

/// The backward of the one-element node [`backward_with_grad`] records after the tensor: it
/// registers the given gradient (its state) as its parent's.
#[derive(Debug)]
struct GivenGradBackward;

impl<B: Backend> Backward<B, 1> for GivenGradBackward {
    type State = FloatTensor<B>;

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        // The node's own gradient is Burn's one-element seed; the parent's is the given one.
        drop(grads.consume::<B>(&ops.node));
        let [parent] = ops.parents;
        if let Some(parent) = parent {
            grads.register::<B>(parent.id, ops.state);
        }
    }
}

/// Panics in Burn's style when `grad` cannot be `tensor`'s gradient.
fn check_given_grad<B: Backend>(tensor: &FloatTensor<B>, grad: &FloatTensor<B>) {
    let (shape, grad_shape) = (tensor.shape(), grad.shape());
    assert!(
        shape == grad_shape,
        "Backward with grad: the gradient's shape {grad_shape:?} must be the tensor's {shape:?}"
    );
    let (dtype, grad_dtype) = (tensor.dtype(), grad.dtype());
    assert!(
        dtype == grad_dtype,
        "Backward with grad: the gradient's dtype {grad_dtype:?} must be the tensor's {dtype:?}"
    );
}

impl<B: AutodiffInner, C: CheckpointStrategy> BackwardWithGrad for burn_autodiff::Autodiff<B, C> {
    fn backward_with_grad(tensor: FloatTensor<Self>, grad: FloatTensor<B>) -> Gradients {
        check_given_grad::<B>(&tensor.primitive, &grad);
        // The root's value is never read: uploaded, not computed. A computed one (`float_zeros`)
        // is an operation whose output no executed operation reads, and burn-fusion keeps such
        // operations pending across the native LayerNorm's custom operations until a sync,
        // merging them again at every registration: back to back, 20 calls cost 3.7 ms each
        // on an H200 instead of about 0.1 ms. One root made once and cloned did the same
        // (0.6-1.2 ms a call), most likely because Burn's one-element seed, then the only dead
        // operation, stays pending the same way. The upload costs host time instead: back to
        // back on an H200, where the host paces the calls (16384x256, 4096x768), 2-4x the time
        // of `y.backward()`; where the device paces them (d >= 2048) the saved seed shows and
        // the upload does not.
        let root = B::float_from_data(TensorData::new(vec![0.0f32], [1]), &B::float_device(&grad));
        let prep = <GivenGradBackward as Backward<B, 1>>::prepare::<C>(
            GivenGradBackward,
            [tensor.node.clone()],
        )
        .compute_bound()
        .stateful();
        let root = match prep {
            OpsKind::Tracked(prep) => prep.finish(grad, root),
            // Nothing to differentiate: Burn's own backward of an untracked output.
            OpsKind::UnTracked(prep) => prep.finish(root),
        };
        Self::backward(root)
    }
}

impl<B: LayerNormBackend + AutodiffInner, C: CheckpointStrategy> BackwardWithGrad
    for Autodiff<B, C>
{
    fn backward_with_grad(tensor: FloatTensor<Self>, grad: FloatTensor<B>) -> Gradients {
        // Same tensors, same graph: the decorator's tensors are Burn's autodiff's.
        burn_autodiff::Autodiff::<B, C>::backward_with_grad(tensor, grad)
    }
}
