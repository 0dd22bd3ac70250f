//! Memory layout helpers shared by the native kernels: they read plain contiguous arrays,
//! vectorized as wide as the device, the sizes and the buffers' alignment allow.

use cubecl::{client::ComputeClient, ir::AddressType, prelude::*, server::Handle};

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

/// The widest vector the device likes for this element size that divides `d` and that every
/// buffer's start is aligned to.
pub(crate) fn vector_size<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    d: usize,
    elem_size: usize,
    handles: &[&Handle],
) -> usize {
    client
        .io_optimized_vector_sizes(elem_size)
        .filter(|&v| {
            d.is_multiple_of(v)
                && handles.iter().all(|h| {
                    h.offset_start
                        .unwrap_or(0)
                        .is_multiple_of((v * elem_size) as u64)
                })
        })
        .max()
        .unwrap_or(1)
}

/// Address width for buffers of at most `max_elems` elements.
pub(crate) fn address_type(max_elems: usize) -> AddressType {
    AddressType::from_len(max_elems)
}
