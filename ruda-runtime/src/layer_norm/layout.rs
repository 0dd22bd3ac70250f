//! Memory layout helpers: the kernels read plain contiguous arrays.

use cubecl::{client::ComputeClient, prelude::*};

use crate::tensor_buffer::TensorBuffer;

/// Whether [`into_contiguous`] copies `buffer`.
pub(crate) fn needs_copy(buffer: &TensorBuffer) -> bool {
    !buffer.is_contiguous() && buffer.num_elements() > 0
}

/// `buffer` itself when it is already row-major without gaps, else a contiguous copy.
///
/// Strided inputs (a transposed matrix, a slice with a step, a broadcast) are copied once by
/// CubeCL's standard `into_contiguous` kernel rather than read with strides in every LayerNorm
/// kernel: the row kernels then always get coalesced, vectorized rows, and the copy costs one
/// extra read and write of the tensor only for the layouts that need it.
pub(crate) fn into_contiguous<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    buffer: TensorBuffer,
) -> TensorBuffer {
    if !needs_copy(&buffer) {
        return buffer;
    }
    let dtype: StorageType = buffer.dtype.into();
    let handle = buffer.into_tensor_handle::<R>();
    TensorBuffer::from(cubecl::std::tensor::into_contiguous(
        client,
        handle.binding(),
        dtype,
    ))
}

/// The buffer as a kernel array of `len` scalar elements.
pub(crate) fn array_arg<R: cubecl::Runtime>(buffer: &TensorBuffer, len: usize) -> ArrayArg<R> {
    // SAFETY: callers pass the number of elements the buffer holds.
    unsafe { ArrayArg::from_raw_parts(buffer.handle.clone(), len) }
}
