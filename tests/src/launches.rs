//! The native kernels' launch counts (`burn_ruda::ops::counters`), as the tests read them.
//! Under burn-fusion a kernel launches when the stream executes: read after a read-back or a
//! `Backend::sync`.

use burn_ruda::ops::counters::{Kernel, launches};

/// LayerNorm `(forward, backward)` launches so far.
pub fn layer_norm() -> (usize, usize) {
    (
        launches(Kernel::LayerNormForward),
        launches(Kernel::LayerNormBackward),
    )
}

/// Softmax and log-softmax `(forward, backward)` launches so far.
pub fn softmax() -> (usize, usize) {
    (
        launches(Kernel::SoftmaxForward),
        launches(Kernel::SoftmaxBackward),
    )
}

/// GELU `(forward, backward)` launches so far.
pub fn gelu() -> (usize, usize) {
    (
        launches(Kernel::GeluForward),
        launches(Kernel::GeluBackward),
    )
}

/// Native products so far.
pub fn matmul() -> usize {
    launches(Kernel::Matmul)
}

/// Native embedding-gradient launches so far.
pub fn embedding_backward() -> usize {
    launches(Kernel::EmbeddingBackward)
}

/// Linear backwards run as one operation so far.
pub fn linear_backward() -> usize {
    launches(Kernel::LinearBackward)
}

/// Launches of the native Adam kernel (each updates one or more parameters) so far.
pub fn adam() -> usize {
    launches(Kernel::Adam)
}

/// Operations of native Adam updates (`burn_ruda::optim::AdamOptimizer`: one per step and
/// device for a small model) so far.
pub fn adam_operations() -> usize {
    launches(Kernel::AdamOperation)
}
