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
//! Under [`crate::Autodiff`], [`crate::Ruda`] makes that element's buffer once per device and
//! ends Burn's seed with an operation burn-fusion executes
//! ([`GivenGradOps`](crate::ops::GivenGradOps)); under Burn's own autodiff the root is uploaded
//! on every call ([`upload_root`]).
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
use burn_backend::{AutodiffBackend, Backend, TensorMetadata, tensor::FloatTensor};
use burn_tensor::Tensor;

use super::{Autodiff, NativeBackend};
use crate::ops::given_grad::upload_root;

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
/// registers the given gradient (its state) as its parent's, and hands Burn's one-element seed,
/// its own gradient, to `release_seed`.
struct GivenGradBackward<B: Backend> {
    release_seed: fn(FloatTensor<B>),
}

impl<B: Backend> core::fmt::Debug for GivenGradBackward<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("GivenGradBackward")
    }
}

impl<B: Backend> Backward<B, 1> for GivenGradBackward<B> {
    type State = FloatTensor<B>;

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        (self.release_seed)(grads.consume::<B>(&ops.node));
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

/// Records the node with output `root` after `tensor` and runs Burn's backward pass from it.
fn backward_from_root<B: AutodiffInner, C: CheckpointStrategy>(
    tensor: FloatTensor<burn_autodiff::Autodiff<B, C>>,
    grad: FloatTensor<B>,
    root: FloatTensor<B>,
    release_seed: fn(FloatTensor<B>),
) -> Gradients {
    let prep = <GivenGradBackward<B> as Backward<B, 1>>::prepare::<C>(
        GivenGradBackward { release_seed },
        [tensor.node.clone()],
    )
    .compute_bound()
    .stateful();
    let root = match prep {
        OpsKind::Tracked(prep) => prep.finish(grad, root),
        // Nothing to differentiate: Burn's own backward of an untracked output.
        OpsKind::UnTracked(prep) => prep.finish(root),
    };
    burn_autodiff::Autodiff::<B, C>::backward(root)
}

impl<B: AutodiffInner, C: CheckpointStrategy> BackwardWithGrad for burn_autodiff::Autodiff<B, C> {
    fn backward_with_grad(tensor: FloatTensor<Self>, grad: FloatTensor<B>) -> Gradients {
        check_given_grad::<B>(&tensor.primitive, &grad);
        let root = upload_root::<B>(&B::float_device(&grad));
        backward_from_root::<B, C>(tensor, grad, root, drop)
    }
}

impl<B: NativeBackend + AutodiffInner, C: CheckpointStrategy> BackwardWithGrad for Autodiff<B, C> {
    fn backward_with_grad(tensor: FloatTensor<Self>, grad: FloatTensor<B>) -> Gradients {
        check_given_grad::<B>(&tensor.primitive, &grad);
        // Same tensors, same graph: the decorator's tensors are Burn's autodiff's.
        let root = B::given_grad_root(&B::float_device(&grad));
        backward_from_root::<B, C>(tensor, grad, root, B::release_given_grad_seed)
    }
}
