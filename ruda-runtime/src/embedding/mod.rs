//! Native embedding backward: the gradient of an embedding table from its output's gradient.
//!
//! `embedding(weights [V, D], indices [...]) = weights[indices]` (one row per index), so row `v`
//! of the table's gradient is the sum of the output-gradient rows whose index is `v`:
//!
//! ```text
//! dweights[v, :] = sum over tokens t with indices[t] == v of grad[t, :]
//! ```
//!
//! Why ruda has its own: Burn's default (`ModuleOps::embedding_backward`, a `select_add` in
//! burn-cubecl) runs one unit per column, each walking every token in turn: `D` units for the
//! whole GPU (512 on the benchmarked transformer), 1.5 ms per call on an H200 for 8192 tokens and
//! 76 rows, two calls per training step (`docs/perf/embedding.md`).
//!
//! Here one cube owns one block of columns of one table row: it stages the indices in shared
//! memory a tile at a time, and each unit adds the gradient vectors of the matching tokens, in
//! token order. `V * ceil(D / block)` cubes in all. No atomics: the result is deterministic and
//! the additions happen in Burn's order (in f32, the same bits as Burn's kernel), accumulated in
//! f32 for f16/bf16 gradients (f64 for f64). The cost is one shared-memory comparison per token
//! and table row, plus one read of each gradient row: every cube scans all tokens, so the time
//! grows with the table's rows once their cubes no longer run at once. Measured on an H200 with
//! 8192 tokens (`docs/perf/embedding.md`): 76 rows, 0.41 ms against Burn's 1.70 ms; 1024 rows,
//! 0.85 ms against 1.81 ms; 50257 rows, 24 ms against 3.5 ms. So the backends use it only for
//! tables of at most [`NATIVE_MAX_ROWS`] rows ([`prefers_native`]) and Burn's kernel above.
//!
//! Indices outside `0..V` (negative included) match no row: they contribute nothing.
//! Bad shapes or dtypes panic before anything is launched.

use burn_backend::DType;
use cubecl::{client::ComputeClient, prelude::*};

// The `#[cube]` kernel.
mod kernels;
// Argument checks, before anything is queued or launched.
mod validate;

use crate::layout::{address_type, array_arg, into_contiguous, vector_size};
use crate::tensor_buffer::TensorBuffer;
use kernels::embedding_backward_kernel;
use validate::check;
pub use validate::check_shapes;

/// Most units in a cube: each unit holds one vector of columns, and the cube stages this many
/// indices per tile.
const MAX_BLOCK: usize = 256;
/// Fewest units in a cube (a warp on NVIDIA GPUs), so that short rows still fill whole planes.
const MIN_BLOCK: usize = 32;
/// Most cubes launched: larger problems loop over their (row, column block) items.
const MAX_CUBES: usize = 65_535;
/// Largest table the backends give this kernel: 1024 rows of up to 1024 columns are 1024 cubes of
/// 256 units, which an H200 (132 multiprocessors, 8 such cubes each) runs in one wave, so the
/// time stays that of one cube's scan; beyond a few waves Burn's kernel is faster.
pub const NATIVE_MAX_ROWS: usize = 1024;

/// Whether this kernel is the faster choice for a table of `num_rows` rows: at most
/// [`NATIVE_MAX_ROWS`] (character and byte vocabularies, position tables); Burn's kernel for
/// word-piece vocabularies.
pub fn prefers_native(num_rows: usize) -> bool {
    num_rows <= NATIVE_MAX_ROWS
}

/// Gradient of an embedding table with `num_rows` rows (the table's `V`): `grad` is the
/// output's gradient, of shape `indices.shape + [D]`; the result is `[num_rows, D]` in `grad`'s
/// dtype.
///
/// # Panics
/// When `grad` is not a float tensor, `indices` not an integer tensor, or their shapes do not
/// match as above.
pub fn embedding_backward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    num_rows: usize,
    grad: TensorBuffer,
    indices: TensorBuffer,
) -> TensorBuffer {
    let d = check(&grad, &indices);
    let tokens = indices.num_elements();
    let out = TensorBuffer::empty(client, [num_rows, d].into(), grad.dtype);
    if num_rows == 0 || d == 0 {
        return out;
    }

    let grad = into_contiguous(client, grad);
    let indices = into_contiguous(client, indices);
    let vector = vector_size(client, d, grad.dtype.size(), &[&grad.handle, &out.handle]);
    let d_vec = d / vector;
    let block = d_vec.next_power_of_two().clamp(MIN_BLOCK, MAX_BLOCK);
    let col_blocks = d_vec.div_ceil(block);
    let items = num_rows * col_blocks;
    let cubes = items.min(MAX_CUBES);
    let accumulator = match grad.dtype {
        DType::F64 => DType::F64,
        _ => DType::F32,
    };
    let dtypes: [StorageType; 3] = [grad.dtype.into(), indices.dtype.into(), accumulator.into()];

    // SAFETY: `grad` is contiguous with `tokens * d` elements, `indices` with `tokens`, `out`
    // with `num_rows * d`; the kernel reads `grad` below `tokens * d_vec` vectors, `indices`
    // below `tokens` and writes `out` below `num_rows * d_vec` vectors.
    unsafe {
        embedding_backward_kernel::launch_unchecked::<R>(
            client,
            CubeCount::new_1d(cubes as u32),
            CubeDim::new_1d(block as u32),
            address_type((tokens * d).max(num_rows * d)),
            vector,
            array_arg(&indices, tokens),
            array_arg(&grad, tokens * d),
            array_arg(&out, num_rows * d),
            tokens,
            d_vec,
            col_blocks,
            items,
            block,
            dtypes,
        );
    }
    out
}
