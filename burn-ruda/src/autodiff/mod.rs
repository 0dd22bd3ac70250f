//! [`Autodiff`]: Burn's autodiff with LayerNorm, softmax and log-softmax recorded as one node
//! each, with a native backward, and linear layers whose backward is one operation.
//!
//! Burn 0.21's `Autodiff<B>` never calls `B::layer_norm`: its `ModuleOps` composes LayerNorm
//! from differentiable primitives (about ten nodes, ten forward kernels and more backward
//! ones), and it composes softmax and log-softmax the same way (five or more nodes each). This
//! decorator delegates every operation to `burn_autodiff::Autodiff<B, C>` (same tensors, same
//! [`Gradients`], same graph) from the same signature list as [`crate::Ruda`], except those,
//! which it records as single nodes ([`layer_norm`], [`softmax`]) whose forward and backward
//! are the backend's native kernels ([`NativeBackend`]). Where the native kernel does not apply
//! (another dtype, a backend without it), the operation is Burn's composed one.
//!
//! - [`layer_norm`]: memory-bound, as Burn marks its cheap elementwise ops: under
//!   `BalancedCheckpointing` its output is recomputed by one more native forward when a later
//!   backward needs it, instead of being kept.
//! - [`softmax`]: its output is its backward's state, so it is kept.
//! - [`linear`]: Burn's node with one backward operation ([`LinearBackend`]) instead of three.
//! - [`backward_with_grad`]: the backward pass from an output whose gradient is given.

pub mod backward_with_grad;
mod layer_norm;
mod linear;
mod softmax;

use core::fmt;
use core::marker::PhantomData;

use burn_autodiff::{
    checkpoint::strategy::{CheckpointStrategy, NoCheckpointing},
    grads::Gradients,
};
use burn_backend::{AutodiffBackend, BackendTypes, tensor::FloatTensor};

use crate::ops::{
    GivenGradOps, LayerNormBackend, LinearBackend, SoftmaxBackend,
    softmax::{self as native_softmax, Kind},
};
use crate::signatures::*;

/// What [`Autodiff`] needs of its inner backend: the native operations it records as one node
/// each, the single-operation linear backward, and the root of `backward_with_grad`'s node
/// ([`crate::Ruda`] has them all).
pub trait NativeBackend: LayerNormBackend + SoftmaxBackend + LinearBackend + GivenGradOps {}
impl<B: LayerNormBackend + SoftmaxBackend + LinearBackend + GivenGradOps> NativeBackend for B {}

/// Burn's autodiff over `B`, with LayerNorm forward and backward as native kernels.
///
/// A drop-in for `burn::backend::Autodiff<B, C>`: the same tensor primitives, the same
/// [`Gradients`], the same checkpointing strategies `C`. It requires `B` to be a
/// [`NativeBackend`] ([`crate::Ruda`] is one).
///
/// ```no_run
/// use burn_backend::{AutodiffBackend, Backend, TensorData, ops::{FloatTensorOps, ModuleOps}};
///
/// // Before: type B = burn::backend::Autodiff<burn::backend::Wgpu>;
/// type B = burn_ruda::Autodiff<burn_ruda::Ruda>;
///
/// let device = Default::default();
/// let x = B::float_from_data(TensorData::new(vec![1.0f32, 2.0, 4.0, 8.0], [2, 2]), &device);
/// let x = B::float_set_require_grad(x, true);
/// let gamma = B::float_from_data(TensorData::new(vec![1.0f32, 1.0], [2]), &device);
/// let y = B::layer_norm(x.clone(), gamma, None, 1e-5);
/// let grads = B::backward(B::float_sum(y));
/// let dx = B::grad(&x, &grads);
/// # let _ = dx;
/// ```
pub struct Autodiff<B, C = NoCheckpointing> {
    _marker: PhantomData<fn() -> (B, C)>,
}

/// The decorator `Autodiff<B, C>` delegates to.
type AdInner<B, C> = burn_autodiff::Autodiff<B, C>;

impl<B, C> Clone for Autodiff<B, C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B, C> Copy for Autodiff<B, C> {}

impl<B, C> Default for Autodiff<B, C> {
    fn default() -> Self {
        Self {
            _marker: PhantomData,
        }
    }
}

impl<B, C> fmt::Debug for Autodiff<B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("burn_ruda::Autodiff")
    }
}

impl<B: NativeBackend, C: CheckpointStrategy> BackendTypes for Autodiff<B, C> {
    type Device = <AdInner<B, C> as BackendTypes>::Device;
    type FloatTensorPrimitive = <AdInner<B, C> as BackendTypes>::FloatTensorPrimitive;
    type FloatElem = <AdInner<B, C> as BackendTypes>::FloatElem;
    type IntTensorPrimitive = <AdInner<B, C> as BackendTypes>::IntTensorPrimitive;
    type IntElem = <AdInner<B, C> as BackendTypes>::IntElem;
    type BoolTensorPrimitive = <AdInner<B, C> as BackendTypes>::BoolTensorPrimitive;
    type BoolElem = <AdInner<B, C> as BackendTypes>::BoolElem;
    type QuantizedTensorPrimitive = <AdInner<B, C> as BackendTypes>::QuantizedTensorPrimitive;
}

// Every backend trait, from the same list as `Ruda`.
with_backend_signatures!(delegate_backend! {
    {
        impl [B, C] Autodiff<B, C> => AdInner<B, C>;
        where [B: NativeBackend, C: CheckpointStrategy];
        own OwnOps
    }
});

// `AutodiffBackend`, delegated the same way. With feature `distributed`, Burn's trait has three
// more methods (marking parameters for DDP's gradient all-reduce), and Burn's autodiff only
// implements it over a `DistributedBackend`.
macro_rules! delegate_autodiff_backend {
    ([$($bounds:tt)*] $($distributed:tt)*) => {
        delegate_backend! {
            {
                impl [B, C] Autodiff<B, C> => AdInner<B, C>;
                where [$($bounds)*];
                own OwnOps
            }
            backend AutodiffBackend [type InnerBackend = B; type Gradients = Gradients;] {
                fn backward(tensor: FloatTensor<Self>) -> Gradients;
                fn grad(tensor: &FloatTensor<Self>, grads: &Gradients) -> Option<FloatTensor<B>>;
                fn grad_remove(tensor: &FloatTensor<Self>, grads: &mut Gradients) -> Option<FloatTensor<B>>;
                fn grad_replace(tensor: &FloatTensor<Self>, grads: &mut Gradients, grad: FloatTensor<B>);
                fn inner(tensor: FloatTensor<Self>) -> FloatTensor<B>;
                fn int_inner(tensor: IntTensor<Self>) -> IntTensor<B>;
                fn bool_inner(tensor: BoolTensor<Self>) -> BoolTensor<B>;
                fn q_inner(tensor: QuantizedTensor<Self>) -> QuantizedTensor<B>;
                fn from_inner(tensor: FloatTensor<B>) -> FloatTensor<Self>;
                fn int_from_inner(tensor: IntTensor<B>) -> IntTensor<Self>;
                fn bool_from_inner(tensor: BoolTensor<B>) -> BoolTensor<Self>;
                fn q_from_inner(tensor: QuantizedTensor<B>) -> QuantizedTensor<Self>;
                $($distributed)*
            }
        }
    };
}

#[cfg(not(feature = "distributed"))]
delegate_autodiff_backend!([B: NativeBackend, C: CheckpointStrategy]);

#[cfg(feature = "distributed")]
delegate_autodiff_backend!(
    [B: NativeBackend + burn_backend::distributed::DistributedBackend, C: CheckpointStrategy]
    fn set_distributed_params(tensor: FloatTensor<Self>, param_id: burn_backend::distributed::DistributedParamId) -> FloatTensor<Self>;
    fn distributed_params(tensor: &FloatTensor<Self>) -> Option<burn_backend::distributed::DistributedParams>;
    fn is_distributed(tensor: &FloatTensor<Self>) -> bool;
);

impl<B: NativeBackend, C: CheckpointStrategy> OwnOps for Autodiff<B, C> {
    // Burn's autodiff syncs and reads through its inner backend: `Ruda`'s own, which report a
    // native operation's late failure.
    fn sync(device: &Device<Self>) -> Result<(), ExecutionError> {
        AdInner::<B, C>::sync(device)
    }

    fn float_into_data(
        tensor: FloatTensor<Self>,
    ) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send {
        AdInner::<B, C>::float_into_data(tensor)
    }

    fn int_into_data(
        tensor: IntTensor<Self>,
    ) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send {
        AdInner::<B, C>::int_into_data(tensor)
    }

    fn bool_into_data(
        tensor: BoolTensor<Self>,
    ) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send {
        AdInner::<B, C>::bool_into_data(tensor)
    }

    fn q_into_data(
        tensor: QuantizedTensor<Self>,
    ) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send {
        AdInner::<B, C>::q_into_data(tensor)
    }

    fn tr_execute(
        transaction: TransactionPrimitive<Self>,
    ) -> impl Future<Output = Result<TransactionPrimitiveData, ExecutionError>> + Send {
        AdInner::<B, C>::tr_execute(crate::rebind::Rebind::rebind(transaction))
    }

    fn layer_norm(
        tensor: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: Option<FloatTensor<Self>>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        crate::ops::layer_norm::check_args::<B>(
            &tensor.primitive,
            &gamma.primitive,
            beta.as_ref().map(|beta| &beta.primitive),
            epsilon,
        );
        if !crate::ops::layer_norm::native_applies::<B>(&tensor.primitive) {
            // Burn's composed LayerNorm, differentiated op by op.
            return <AdInner<B, C> as ModuleOps<AdInner<B, C>>>::layer_norm(
                tensor, gamma, beta, epsilon,
            );
        }
        match beta {
            Some(beta) => layer_norm::record::<B, C, 3>([tensor, gamma, beta], epsilon),
            None => layer_norm::record::<B, C, 2>([tensor, gamma], epsilon),
        }
    }

    fn softmax(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        if native_softmax::native_applies::<B>(&tensor.primitive, dim, Kind::Softmax) {
            softmax::record_softmax::<B, C>(tensor, dim, Kind::Softmax)
        } else {
            AdInner::<B, C>::softmax(tensor, dim)
        }
    }

    fn log_softmax(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        if native_softmax::native_applies::<B>(&tensor.primitive, dim, Kind::LogSoftmax) {
            softmax::record_softmax::<B, C>(tensor, dim, Kind::LogSoftmax)
        } else {
            AdInner::<B, C>::log_softmax(tensor, dim)
        }
    }

    // Burn's default: the softmax of `-tensor`, here the native node.
    fn softmin(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        <Self as OwnOps>::softmax(AdInner::<B, C>::float_neg(tensor), dim)
    }

    // Burn's autodiff records GELU as one node that runs the inner backend's `gelu` and
    // `gelu_backward` (a `Ruda`: the native kernels).
    fn gelu(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        AdInner::<B, C>::gelu(tensor)
    }

    fn gelu_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        AdInner::<B, C>::gelu_backward(x, grad)
    }

    // Burn's autodiff runs the inner backend's (a `Ruda`: the native kernel).
    fn embedding_backward(
        weights: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        indices: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        AdInner::<B, C>::embedding_backward(weights, output_grad, indices)
    }

    // Burn's autodiff records products and runs the inner backend's methods, forward and
    // backward (a `Ruda`: native products where the runtime has them).
    fn float_matmul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        AdInner::<B, C>::float_matmul(lhs, rhs)
    }

    // One node whose backward is one operation ([`linear`]); Burn's node under `RUDA_LINEAR=burn`.
    fn linear(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
    ) -> FloatTensor<Self> {
        if !crate::ops::linear::native_enabled() {
            return AdInner::<B, C>::linear(x, weight, bias);
        }
        match bias {
            Some(bias) => linear::record::<B, C, 3>([x, weight, bias]),
            None => linear::record::<B, C, 2>([x, weight]),
        }
    }

    fn linear_x_backward(
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        AdInner::<B, C>::linear_x_backward(weight, output_grad)
    }

    fn linear_weight_backward(
        x: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        AdInner::<B, C>::linear_weight_backward(x, output_grad)
    }

    fn linear_bias_backward(output_grad: FloatTensor<Self>) -> FloatTensor<Self> {
        AdInner::<B, C>::linear_bias_backward(output_grad)
    }

    // Burn's autodiff moves the primitive with the inner backend's method (a `Ruda`: through
    // the host where the runtime needs it) and records the move for the backward.
    fn float_to_device(tensor: FloatTensor<Self>, device: &Device<Self>) -> FloatTensor<Self> {
        AdInner::<B, C>::float_to_device(tensor, device)
    }

    fn int_to_device(tensor: IntTensor<Self>, device: &Device<Self>) -> IntTensor<Self> {
        AdInner::<B, C>::int_to_device(tensor, device)
    }

    fn bool_to_device(tensor: BoolTensor<Self>, device: &Device<Self>) -> BoolTensor<Self> {
        AdInner::<B, C>::bool_to_device(tensor, device)
    }

    fn q_to_device(tensor: QuantizedTensor<Self>, device: &Device<Self>) -> QuantizedTensor<Self> {
        AdInner::<B, C>::q_to_device(tensor, device)
    }
}
