//! A linear layer as one autodiff node whose backward is one operation,
//! [`LinearBackend::linear_backward`], instead of Burn's three (`linear_x_backward`,
//! `linear_weight_backward`, `linear_bias_backward`). The forward is the backend's `linear`.

use burn_autodiff::{
    NodeId,
    checkpoint::{base::Checkpointer, strategy::CheckpointStrategy},
    grads::Gradients,
    ops::{Backward, Ops, OpsKind},
};
use burn_backend::tensor::FloatTensor;

use super::AdInner;
use crate::ops::linear::{LinearBackend, Wanted};

/// The backward of a linear node; its parents are `[x, weight]` or `[x, weight, bias]`.
#[derive(Debug)]
pub(super) struct LinearBackward;

/// The forward's checkpointed tensors: the input when the weight wants a gradient, the weight
/// when the input does (as Burn's own node keeps them).
pub(super) type LinearState = (Option<NodeId>, Option<NodeId>);

impl LinearBackward {
    /// Runs the one backward operation and registers the gradient of every parent that wants one.
    fn run<B: LinearBackend, const N: usize>(
        ops: Ops<LinearState, N>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let grad = grads.consume::<B>(&ops.node);
        let (x_state, weight_state) = ops.state;
        let x = x_state.map(|id| checkpointer.retrieve_node_output::<FloatTensor<B>>(id));
        let weight = weight_state.map(|id| checkpointer.retrieve_node_output::<FloatTensor<B>>(id));
        let parents = ops.parents;
        let wanted = Wanted {
            x: parents[0].is_some(),
            weight: parents[1].is_some(),
            bias: N == 3 && parents[N - 1].is_some(),
        };
        let out = B::linear_backward(x, weight, grad, wanted);
        let gradients = [out.x, out.weight, out.bias];
        for (parent, gradient) in parents.into_iter().zip(gradients) {
            if let (Some(node), Some(gradient)) = (parent, gradient) {
                grads.register::<B>(node.id, gradient);
            }
        }
    }
}

impl<B: LinearBackend> Backward<B, 2> for LinearBackward {
    type State = LinearState;

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        Self::run::<B, 2>(ops, grads, checkpointer);
    }
}

impl<B: LinearBackend> Backward<B, 3> for LinearBackward {
    type State = LinearState;

    fn backward(
        self,
        ops: Ops<Self::State, 3>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        Self::run::<B, 3>(ops, grads, checkpointer);
    }
}

/// Records `x W (+ b)` as one compute-bound node (its output is kept, never recomputed). The
/// input is checkpointed when the weight is tracked and the weight when the input is, as Burn's
/// node does: each is needed only for the other's gradient.
pub(super) fn record<B, C, const N: usize>(
    parents: [FloatTensor<AdInner<B, C>>; N],
) -> FloatTensor<AdInner<B, C>>
where
    B: LinearBackend,
    C: CheckpointStrategy,
    LinearBackward: Backward<B, N, State = LinearState>,
{
    let nodes = parents.each_ref().map(|t| t.node.clone());
    let prep = LinearBackward
        .prepare::<C>(nodes)
        .compute_bound()
        .stateful();
    let mut parents = parents.into_iter();
    let x = parents.next().expect("linear: input");
    let weight = parents.next().expect("linear: weight");
    let bias = parents.next().map(|bias| bias.primitive);
    match prep {
        OpsKind::Tracked(mut prep) => {
            let x_state = weight.is_tracked().then(|| prep.checkpoint(&x));
            let weight_state = x.is_tracked().then(|| prep.checkpoint(&weight));
            let out = B::linear(x.primitive, weight.primitive, bias);
            prep.finish((x_state, weight_state), out)
        }
        OpsKind::UnTracked(prep) => prep.finish(B::linear(x.primitive, weight.primitive, bias)),
    }
}
