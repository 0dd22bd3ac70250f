//! [`Autodiff`]: Burn's autodiff with LayerNorm recorded as one node with a native backward.
//!
//! Burn 0.21's `Autodiff<B>` never calls `B::layer_norm`: its `ModuleOps` composes LayerNorm
//! from differentiable primitives (about ten nodes, ten forward kernels and more backward
//! ones). This decorator delegates every operation to `burn_autodiff::Autodiff<B, C>` (same
//! tensors, same [`Gradients`], same graph) from the same signature list as [`crate::Ruda`],
//! except `layer_norm`, which it records as a single node whose forward is
//! [`LayerNormBackend::layer_norm_native`] and whose backward is
//! [`LayerNormBackend::layer_norm_native_backward`]. The node is memory-bound, as Burn marks
//! its cheap elementwise ops: under `BalancedCheckpointing` its output is recomputed by one more
//! native forward when a later backward needs it, instead of being kept. When the backend has no
//! native LayerNorm, `layer_norm` is Burn's composed one.

use core::fmt;
use core::marker::PhantomData;

use burn_autodiff::{
    NodeId,
    checkpoint::{
        base::Checkpointer,
        retro_forward::RetroForward,
        state::BackwardStates,
        strategy::{CheckpointStrategy, NoCheckpointing},
    },
    grads::Gradients,
    ops::{Backward, Ops, OpsKind},
};
use burn_backend::{AutodiffBackend, Backend, BackendTypes, ops::ModuleOps, tensor::FloatTensor};

use crate::layer_norm::{LayerNormBackend, native_applies};
use crate::signatures::*;

/// Burn's autodiff over `B`, with LayerNorm forward and backward as native kernels.
///
/// A drop-in for `burn::backend::Autodiff<B, C>`: the same tensor primitives, the same
/// [`Gradients`], the same checkpointing strategies `C`. It requires `B` to be a
/// [`LayerNormBackend`] ([`crate::Ruda`] is one).
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

impl<B: LayerNormBackend, C: CheckpointStrategy> BackendTypes for Autodiff<B, C> {
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
        where [B: LayerNormBackend, C: CheckpointStrategy];
        own AutodiffOwnOps
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
                own AutodiffOwnOps
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
delegate_autodiff_backend!([B: LayerNormBackend, C: CheckpointStrategy]);

#[cfg(feature = "distributed")]
delegate_autodiff_backend!(
    [B: LayerNormBackend + burn_backend::distributed::DistributedBackend, C: CheckpointStrategy]
    fn set_distributed_params(tensor: FloatTensor<Self>, param_id: burn_backend::distributed::DistributedParamId) -> FloatTensor<Self>;
    fn distributed_params(tensor: &FloatTensor<Self>) -> Option<burn_backend::distributed::DistributedParams>;
    fn is_distributed(tensor: &FloatTensor<Self>) -> bool;
);

/// The methods of the signature list the decorator implements itself (`#[own]` in the list).
trait AutodiffOwnOps: Backend {
    fn sync(device: &Device<Self>) -> Result<(), ExecutionError>;
    fn layer_norm(
        tensor: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: Option<FloatTensor<Self>>,
        epsilon: f64,
    ) -> FloatTensor<Self>;
    fn embedding_backward(
        weights: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        indices: IntTensor<Self>,
    ) -> FloatTensor<Self>;
    fn float_matmul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    fn linear(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
    ) -> FloatTensor<Self>;
    fn linear_x_backward(
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> FloatTensor<Self>;
    fn linear_weight_backward(
        x: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> FloatTensor<Self>;
    fn linear_bias_backward(output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
    fn float_to_device(tensor: FloatTensor<Self>, device: &Device<Self>) -> FloatTensor<Self>;
    fn int_to_device(tensor: IntTensor<Self>, device: &Device<Self>) -> IntTensor<Self>;
    fn bool_to_device(tensor: BoolTensor<Self>, device: &Device<Self>) -> BoolTensor<Self>;
    fn q_to_device(tensor: QuantizedTensor<Self>, device: &Device<Self>) -> QuantizedTensor<Self>;
}

/// The backward of the native LayerNorm node. Its parents are `[x, gamma]` or
/// `[x, gamma, beta]`.
#[derive(Debug)]
struct NativeLayerNormBackward;

/// What the backward needs from the forward: the checkpointed input and gamma (kept, or
/// recomputed under a checkpointing strategy), and the forward's statistics (two floats per
/// row, always kept).
#[derive(Clone, Debug)]
struct NativeLayerNormState<B: Backend> {
    tensor: NodeId,
    gamma: NodeId,
    mean: FloatTensor<B>,
    rstd: FloatTensor<B>,
}

impl NativeLayerNormBackward {
    /// Runs the native backward once and registers the gradient of every parent that wants one.
    fn run<B: LayerNormBackend, const N: usize>(
        ops: Ops<NativeLayerNormState<B>, N>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let grad = grads.consume::<B>(&ops.node);
        let state = ops.state;
        let tensor = checkpointer.retrieve_node_output(state.tensor);
        let gamma = checkpointer.retrieve_node_output(state.gamma);
        let outputs = B::layer_norm_native_backward(tensor, gamma, grad, state.mean, state.rstd);
        // Parents are [x, gamma, beta?]; outputs are [dx, dgamma, dbeta].
        for (parent, gradient) in ops.parents.into_iter().zip(outputs) {
            if let Some(node) = parent {
                grads.register::<B>(node.id, gradient);
            }
        }
    }
}

impl<B: LayerNormBackend> Backward<B, 2> for NativeLayerNormBackward {
    type State = NativeLayerNormState<B>;

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        Self::run::<B, 2>(ops, grads, checkpointer);
    }
}

impl<B: LayerNormBackend> Backward<B, 3> for NativeLayerNormBackward {
    type State = NativeLayerNormState<B>;

    fn backward(
        self,
        ops: Ops<Self::State, 3>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        Self::run::<B, 3>(ops, grads, checkpointer);
    }
}

/// Recomputes the LayerNorm output from its parents `[x, gamma, beta?]` when a checkpointing
/// strategy (`BalancedCheckpointing`) did not keep it and a later node's backward needs it.
#[derive(Debug)]
struct RetroNativeLayerNorm<B> {
    parents: Vec<NodeId>,
    epsilon: f64,
    _backend: PhantomData<fn() -> B>,
}

impl<B: LayerNormBackend> RetroForward for RetroNativeLayerNorm<B> {
    fn forward(&self, states: &mut BackwardStates, out_node: NodeId) {
        let mut inputs = self
            .parents
            .iter()
            .map(|id| states.get_state::<FloatTensor<B>>(id));
        let tensor = inputs.next().expect("LayerNorm: input");
        let gamma = inputs.next().expect("LayerNorm: gamma");
        let beta = inputs.next();
        let out = B::layer_norm_native_output(tensor, gamma, beta, self.epsilon);
        states.save(out_node, out);
    }
}

/// Records the native LayerNorm as one memory-bound node whose parents are `[x, gamma]` or
/// `[x, gamma, beta]`. Under `NoCheckpointing` its output is kept; under `BalancedCheckpointing`
/// it is recomputed by [`RetroNativeLayerNorm`] when a later backward needs it (one more native
/// forward, one activation less in memory). x and gamma are checkpointed for its backward, the
/// forward's statistics (two floats per row) are kept.
fn record_native_layer_norm<B, C, const N: usize>(
    parents: [FloatTensor<AdInner<B, C>>; N],
    epsilon: f64,
) -> FloatTensor<AdInner<B, C>>
where
    B: LayerNormBackend,
    C: CheckpointStrategy,
    NativeLayerNormBackward: Backward<B, N, State = NativeLayerNormState<B>>,
{
    let nodes = parents.each_ref().map(|t| t.node.clone());
    let retro = RetroNativeLayerNorm::<B> {
        parents: parents.iter().map(|t| t.node.id).collect(),
        epsilon,
        _backend: PhantomData,
    };
    let prep = NativeLayerNormBackward
        .prepare::<C>(nodes)
        .memory_bound()
        .retro_forward(retro)
        .parents(parents.iter())
        .stateful();
    let mut parents = parents.into_iter();
    let tensor = parents.next().expect("LayerNorm: input");
    let gamma = parents.next().expect("LayerNorm: gamma");
    let beta = parents.next().map(|beta| beta.primitive);
    match prep {
        OpsKind::Tracked(mut prep) => {
            let tensor_id = prep.checkpoint(&tensor);
            let gamma_id = prep.checkpoint(&gamma);
            let [out, mean, rstd] =
                B::layer_norm_native(tensor.primitive, gamma.primitive, beta, epsilon);
            let state = NativeLayerNormState {
                tensor: tensor_id,
                gamma: gamma_id,
                mean,
                rstd,
            };
            prep.finish(state, out)
        }
        OpsKind::UnTracked(prep) => {
            let out = B::layer_norm_native_output(tensor.primitive, gamma.primitive, beta, epsilon);
            prep.finish(out)
        }
    }
}

impl<B: LayerNormBackend, C: CheckpointStrategy> AutodiffOwnOps for Autodiff<B, C> {
    // Burn's autodiff syncs its inner backend: `Ruda`'s own sync.
    fn sync(device: &Device<Self>) -> Result<(), ExecutionError> {
        AdInner::<B, C>::sync(device)
    }

    fn layer_norm(
        tensor: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: Option<FloatTensor<Self>>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        if !native_applies::<B>(&tensor.primitive) {
            // Burn's composed LayerNorm, differentiated op by op.
            return <AdInner<B, C> as ModuleOps<AdInner<B, C>>>::layer_norm(
                tensor, gamma, beta, epsilon,
            );
        }
        match beta {
            Some(beta) => record_native_layer_norm::<B, C, 3>([tensor, gamma, beta], epsilon),
            None => record_native_layer_norm::<B, C, 2>([tensor, gamma], epsilon),
        }
    }

    // Burn's autodiff runs the inner backend's (a `Ruda`: the native kernel).
    fn embedding_backward(
        weights: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        indices: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        AdInner::<B, C>::embedding_backward(weights, output_grad, indices)
    }

    // Burn's autodiff records products and linear layers and runs the inner backend's methods,
    // forward and backward (a `Ruda`: native products where the runtime has them).
    fn float_matmul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        AdInner::<B, C>::float_matmul(lhs, rhs)
    }

    fn linear(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
    ) -> FloatTensor<Self> {
        AdInner::<B, C>::linear(x, weight, bias)
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
