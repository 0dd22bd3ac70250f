//! The embedding table's gradient ([`ruda_runtime::embedding`]: Burn's default walks every
//! token on one unit per column).
//!
//! [`crate::Ruda`] implements `ModuleOps::embedding_backward` with it on every runtime for
//! tables where it is the faster choice ([`ruda_runtime::embedding::prefers_native`]; Burn's
//! kernel for larger ones), through [`super::custom_op`]. Burn's autodiff calls it for the
//! gradient of `burn::nn::Embedding`, so it runs under `burn_ruda::Autodiff` and Burn's own
//! `Autodiff` alike.

use burn_backend::{Shape, TensorMetadata};
use burn_cubecl::tensor::CubeTensor;
use ruda_runtime::TensorBuffer;

use super::counters::{self, Kernel};
use super::{InnerBackend, NativeKernel, RudaRuntime, RudaTensor, custom_op};

/// Checks the shapes on the caller's thread; returns the table's shape `[V, D]`.
fn check_shapes(weights: &Shape, grad: &Shape, indices: &Shape) -> [usize; 2] {
    assert_eq!(
        weights.num_dims(),
        2,
        "Embedding backward: the weights must be a [num_embeddings, d_model] table, got shape \
         {weights:?}"
    );
    let d = ruda_runtime::embedding::check_shapes(grad, indices);
    assert_eq!(
        d, weights[1],
        "Embedding backward: the output gradient's last dimension must be the table's d_model, \
         got gradient {grad:?} and weights {weights:?}"
    );
    [weights[0], d]
}

/// The kernel: inputs `[grad, indices]`, output `[dweights]`. The table itself is not an input
/// (only its row count is needed), so the stream does not keep it alive.
struct BackwardKernel {
    rows: usize,
}

impl<R: RudaRuntime> NativeKernel<R> for BackwardKernel {
    fn name(&self) -> &'static str {
        "ruda_embedding_backward"
    }

    fn launch(&self, inputs: Vec<CubeTensor<R>>) -> Vec<CubeTensor<R>> {
        let [grad, indices]: [CubeTensor<R>; 2] = inputs
            .try_into()
            .unwrap_or_else(|_| unreachable!("embedding backward: queued with two inputs"));
        let (client, device) = (grad.client.clone(), grad.device.clone());
        let out = ruda_runtime::embedding_backward(
            &client,
            self.rows,
            TensorBuffer::from(grad),
            TensorBuffer::from(indices),
        );
        counters::record(Kernel::EmbeddingBackward);
        vec![out.into_cube_tensor(client, device)]
    }
}

/// `ModuleOps::embedding_backward`: `[weights.rows, D]` from the output gradient
/// (`indices.shape + [D]`); native for small tables, `In`'s (Burn's) for large ones.
pub(crate) fn embedding_backward<R: RudaRuntime, In: InnerBackend<R>>(
    weights: RudaTensor<R>,
    output_grad: RudaTensor<R>,
    indices: RudaTensor<R>,
) -> RudaTensor<R> {
    let [rows, d] = check_shapes(&weights.shape(), &output_grad.shape(), &indices.shape());
    if !ruda_runtime::embedding::prefers_native(rows) {
        return In::embedding_backward(weights, output_grad, indices);
    }
    let dtype = output_grad.dtype();
    let [out] = custom_op::run::<R, _, 1>(
        BackwardKernel { rows },
        vec![output_grad, indices],
        [(Shape::new([rows, d]), dtype)],
    );
    out
}
