//! Argument checks of the embedding backward, before anything is queued or launched.

use crate::tensor_buffer::TensorBuffer;

/// Checks the shapes and dtypes; returns `D`.
pub(crate) fn check(grad: &TensorBuffer, indices: &TensorBuffer) -> usize {
    assert!(
        grad.dtype.is_float(),
        "Embedding backward: the output gradient must be a float tensor, got {:?}",
        grad.dtype
    );
    assert!(
        indices.dtype.is_int() || indices.dtype.is_uint(),
        "Embedding backward: the indices must be an integer tensor, got {:?}",
        indices.dtype
    );
    check_shapes(&grad.shape, &indices.shape)
}

/// Checks that the output gradient's shape is the indices' shape plus one last dimension, the
/// embedding size `D`, and returns `D`. The backends call it before queueing the kernel, so
/// that a bad call panics where it is made.
///
/// # Panics
/// When the shapes do not match so.
pub fn check_shapes(grad: &[usize], indices: &[usize]) -> usize {
    let rank = grad.len();
    assert!(
        rank >= 1 && indices.len() == rank - 1 && grad[..rank - 1] == indices[..],
        "Embedding backward: the output gradient's shape must be the indices' shape plus the \
         embedding size, got gradient {grad:?} and indices {indices:?}"
    );
    grad[rank - 1]
}
