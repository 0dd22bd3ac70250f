//! Native embedding backward on burn-cubecl tensors ([`ruda_runtime::embedding`]: Burn's
//! default walks every token on one unit per column), and a counter that lets tests prove the
//! native path ran.
//!
//! [`crate::Ruda`] implements `ModuleOps::embedding_backward` with it on every runtime for tables
//! where it is the faster choice ([`ruda_runtime::embedding::prefers_native`]; Burn's kernel
//! for larger ones): under the `fusion` feature as a custom operation of Burn's fusion stream
//! (`backend/embedding_ops.rs`), without it by a direct launch. Burn's autodiff calls it for the gradient of
//! `burn::nn::Embedding`, so it runs under `burn_ruda::Autodiff` and Burn's own `Autodiff` alike.

use core::sync::atomic::{AtomicUsize, Ordering};

use burn_cubecl::{CubeRuntime, tensor::CubeTensor};
use ruda_runtime::TensorBuffer;

/// Number of native embedding-backward kernels launched by this process (a test hook). Under the
/// `fusion` feature the kernel is launched when the fusion stream executes: read it after
/// reading a result or after `Backend::sync`.
pub static NATIVE_EMBEDDING_BACKWARD_CALLS: AtomicUsize = AtomicUsize::new(0);

/// The current value of [`NATIVE_EMBEDDING_BACKWARD_CALLS`].
pub fn native_embedding_backward_calls() -> usize {
    NATIVE_EMBEDDING_BACKWARD_CALLS.load(Ordering::SeqCst)
}

/// The gradient `[num_rows, D]` of an embedding table from the output's gradient `grad`
/// (`indices.shape + [D]`).
pub(crate) fn cube_embedding_backward<R: CubeRuntime>(
    num_rows: usize,
    grad: CubeTensor<R>,
    indices: CubeTensor<R>,
) -> CubeTensor<R> {
    let client = grad.client.clone();
    let device = grad.device.clone();
    let out = ruda_runtime::embedding_backward(
        &client,
        num_rows,
        TensorBuffer::from(grad),
        TensorBuffer::from(indices),
    );
    NATIVE_EMBEDDING_BACKWARD_CALLS.fetch_add(1, Ordering::SeqCst);
    out.into_cube_tensor(client, device)
}
