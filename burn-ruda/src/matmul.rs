//! Native matrix products on burn-cubecl tensors ([`ruda_runtime::matmul`]: cuBLAS on
//! [`crate::RudaCuda`]), and a counter that lets tests prove the native path ran.
//!
//! [`crate::Ruda`] takes over `float_matmul` and the four `linear` methods of Burn's
//! `ModuleOps` (which `burn::nn::Linear` and Burn's autodiff call): where the runtime has a native
//! product ([`ruda_runtime::Runtime::has_native_matmul`]) and the dtype has one
//! ([`ruda_runtime::matmul::supports_dtype`]), each is one product of the right shape, queued in
//! Burn's fusion stream as a custom operation (`backend/matmul_ops.rs`); a linear layer over
//! `[batch, seq, d_in]` is one `[batch * seq, d_in] x [d_in, d_out]` product, its weight gradient
//! one `[d_in, batch * seq] x [batch * seq, d_out]` product instead of a batched product and a
//! sum. Elsewhere (wgpu, another dtype, a product with an empty dimension or an operand broadcast
//! over only some batch dimensions) the operation is Burn's own.

use core::sync::atomic::{AtomicUsize, Ordering};

use burn_backend::DType;
use burn_cubecl::{CubeRuntime, kernel::into_contiguous, tensor::CubeTensor};
use ruda_runtime::TensorBuffer;
use ruda_runtime::matmul::{GemmUnsupported, output_shape, plan, supports_dtype};

/// Number of native products run by this process (a test hook). Under the `fusion` feature a
/// product runs when the fusion stream executes: read it after reading a result or after
/// `Backend::sync`.
pub static NATIVE_MATMUL_CALLS: AtomicUsize = AtomicUsize::new(0);

/// The current value of [`NATIVE_MATMUL_CALLS`].
pub fn native_matmul_calls() -> usize {
    NATIVE_MATMUL_CALLS.load(Ordering::SeqCst)
}

/// Whether `lhs x rhs` (shapes and dtypes, as known before the fusion stream runs) is a native
/// product on `device`. What only the strides decide is settled at execution ([`cube_matmul`]).
pub(crate) fn native_applies<R: ruda_runtime::Runtime + CubeRuntime>(
    device: &R::Device,
    lhs: (&[usize], DType),
    rhs: (&[usize], DType),
) -> bool {
    lhs.1 == rhs.1
        && supports_dtype(lhs.1)
        && output_shape(lhs.0, rhs.0).is_ok()
        && R::has_native_matmul(&R::client(device))
}

/// The shape of a native product's output (see [`native_applies`]).
pub(crate) fn product_shape(lhs: &[usize], rhs: &[usize]) -> Vec<usize> {
    output_shape(lhs, rhs).expect("ruda matmul: checked by native_applies")
}

/// The native product of two burn-cubecl tensors. An operand whose strides no GEMM operand
/// describes (the `[batch, heads, seq, d]` view that multi-head attention makes of
/// `[batch, seq, heads, d]`) is copied row-major first by burn-cubecl's `into_contiguous`.
pub(crate) fn cube_matmul<R: ruda_runtime::Runtime + CubeRuntime>(
    mut lhs: CubeTensor<R>,
    mut rhs: CubeTensor<R>,
) -> CubeTensor<R> {
    let client = lhs.client.clone();
    let device = lhs.device.clone();
    // At most one copy per operand: a row-major tensor always has a plan.
    for _ in 0..3 {
        let planned = plan(
            lhs.meta.shape(),
            lhs.meta.strides(),
            rhs.meta.shape(),
            rhs.meta.strides(),
        );
        match planned {
            Ok(_) => {
                let out = R::matmul(&client, TensorBuffer::from(lhs), TensorBuffer::from(rhs));
                NATIVE_MATMUL_CALLS.fetch_add(1, Ordering::SeqCst);
                return out.into_cube_tensor(client, device);
            }
            Err(GemmUnsupported::LhsLayout) => lhs = into_contiguous(lhs),
            Err(GemmUnsupported::RhsLayout) => rhs = into_contiguous(rhs),
            Err(why) => panic!(
                "ruda matmul: shapes {:?} x {:?} were queued as a native product but have {why}",
                lhs.meta.shape(),
                rhs.meta.shape()
            ),
        }
    }
    unreachable!("ruda matmul: row-major copies of both operands have a GEMM plan")
}
