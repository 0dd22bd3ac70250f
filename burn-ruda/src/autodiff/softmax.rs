//! Softmax and log-softmax as one autodiff node each: forward
//! [`SoftmaxBackend::softmax_native`], backward [`SoftmaxBackend::softmax_native_backward`]
//! from the kept output. Burn's own autodiff records the composed softmax as five or more
//! nodes (`max_dim`, `sub`, `exp`, `sum_dim`, `div`), each with a backward of its own.

use burn_autodiff::{
    checkpoint::{base::Checkpointer, strategy::CheckpointStrategy},
    grads::Gradients,
    ops::{Backward, Ops, OpsKind},
};
use burn_backend::tensor::FloatTensor;

use super::AdInner;
use crate::ops::softmax::{Kind, SoftmaxBackend};

/// The backward of a softmax node. Its state is the forward's output `y`: the gradient needs
/// nothing else (PyTorch keeps the same), and it is the tensor the next node (the attention's
/// product with `V`, the loss's gather) keeps anyway.
#[derive(Debug)]
struct SoftmaxBackward {
    dim: usize,
    kind: Kind,
}

impl<B: SoftmaxBackend> Backward<B, 1> for SoftmaxBackward {
    type State = FloatTensor<B>;

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let grad = grads.consume::<B>(&ops.node);
        let [parent] = ops.parents;
        if let Some(parent) = parent {
            let dx = B::softmax_native_backward(ops.state, grad, self.dim, self.kind);
            grads.register::<B>(parent.id, dx);
        }
    }
}

/// Records the native softmax (or log-softmax) of `tensor` over `dim` as one node. Compute-
/// bound for checkpointing: its output is kept (it is the node's state), never recomputed.
pub(super) fn record_softmax<B: SoftmaxBackend, C: CheckpointStrategy>(
    tensor: FloatTensor<AdInner<B, C>>,
    dim: usize,
    kind: Kind,
) -> FloatTensor<AdInner<B, C>> {
    let prep = SoftmaxBackward { dim, kind }
        .prepare::<C>([tensor.node.clone()])
        .compute_bound()
        .stateful();
    match prep {
        OpsKind::Tracked(prep) => {
            let y = B::softmax_native(tensor.primitive, dim, kind);
            prep.finish(y.clone(), y)
        }
        OpsKind::UnTracked(prep) => prep.finish(B::softmax_native(tensor.primitive, dim, kind)),
    }
}
