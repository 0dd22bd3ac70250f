//! LayerNorm as one autodiff node: forward [`LayerNormBackend::layer_norm_native`], backward
//! [`LayerNormBackend::layer_norm_native_backward`].

use core::marker::PhantomData;

use burn_autodiff::{
    NodeId,
    checkpoint::{
        base::Checkpointer, retro_forward::RetroForward, state::BackwardStates,
        strategy::CheckpointStrategy,
    },
    grads::Gradients,
    ops::{Backward, Ops, OpsKind},
};
use burn_backend::{Backend, tensor::FloatTensor};

use super::AdInner;
use crate::ops::LayerNormBackend;

/// The backward of the native LayerNorm node. Its parents are `[x, gamma]` or
/// `[x, gamma, beta]`.
#[derive(Debug)]
pub(super) struct NativeLayerNormBackward;

/// What the backward needs from the forward: the checkpointed input and gamma (kept, or
/// recomputed under a checkpointing strategy), and the forward's statistics (two floats per
/// row, always kept).
#[derive(Clone, Debug)]
pub(super) struct NativeLayerNormState<B: Backend> {
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
pub(super) fn record<B, C, const N: usize>(
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
