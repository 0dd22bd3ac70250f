//! Moving the softmax dimension last and back: the fallback of the column kernels when a unit
//! would loop past lavapipe's limit (a long softmax over a dimension that is not the last).

use alloc::vec::Vec;

use cubecl::zspace::{Shape, Strides};

use crate::tensor_buffer::{TensorBuffer, contiguous_strides};

/// The axes of a rank-`rank` tensor with `dim` moved last.
fn moved_last(rank: usize, dim: usize) -> Vec<usize> {
    (0..rank).filter(|&a| a != dim).chain([dim]).collect()
}

/// A view of `buffer` with `dim` moved last (no copy: permuted shape and strides).
pub(crate) fn move_last(buffer: TensorBuffer, dim: usize) -> TensorBuffer {
    let axes = moved_last(buffer.shape.num_dims(), dim);
    let shape: Vec<usize> = axes.iter().map(|&a| buffer.shape[a]).collect();
    let strides: Vec<usize> = axes.iter().map(|&a| buffer.strides[a]).collect();
    TensorBuffer::new(
        buffer.handle,
        Shape::from(shape),
        Strides::new(&strides),
        buffer.dtype,
    )
}

/// The inverse of [`move_last`] for a contiguous `buffer` of the moved shape: a view with the
/// original axis order (strided, no copy).
pub(crate) fn move_back(buffer: TensorBuffer, dim: usize) -> TensorBuffer {
    let rank = buffer.shape.num_dims();
    let axes = moved_last(rank, dim);
    let moved_strides = contiguous_strides(&buffer.shape);
    let mut shape = alloc::vec![0; rank];
    let mut strides = alloc::vec![0; rank];
    for (position, &axis) in axes.iter().enumerate() {
        shape[axis] = buffer.shape[position];
        strides[axis] = moved_strides[position];
    }
    TensorBuffer::new(
        buffer.handle,
        Shape::from(shape),
        Strides::new(&strides),
        buffer.dtype,
    )
}

#[cfg(test)]
mod tests {
    use super::moved_last;

    #[test]
    fn axes_with_dim_last() {
        assert_eq!(moved_last(4, 1), [0, 2, 3, 1]);
        assert_eq!(moved_last(2, 1), [0, 1]);
        assert_eq!(moved_last(3, 0), [1, 2, 0]);
    }
}
