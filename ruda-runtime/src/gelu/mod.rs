//! Native GELU forward and backward: one element-wise kernel each.
//!
//! Burn 0.21 composes `ActivationOps::gelu` from five operations (`div_scalar`, `erf`,
//! `add_scalar`, `mul`, `div_scalar`) and `gelu_backward` from fifteen; its autodiff records
//! GELU as one node that calls the two. burn-fusion fuses each group into one kernel, yet
//! describes, matches and registers every operation on its own thread, which paces a bf16
//! transformer step (`docs/perf/host-launch.md`). These kernels compute the same expressions
//! as one operation each (off unless `RUDA_GELU=native`: [`ENV_GELU`]):
//!
//! ```text
//! forward:  y  = x * (erf(x / sqrt(2)) + 1) / 2
//! backward: dx = gelu'(x) * dy, gelu' the derivative of the tanh approximation, with the
//!           constants of Burn's default `gelu_backward` (what Burn's backends run)
//! ```
//!
//! in f32 for f32, f16 and bf16 tensors, rounded once when stored (f64 tensors take Burn's
//! composed GELU: [`supports_dtype`]).
//! Strided inputs are copied to contiguous ones first; the output is contiguous. Empty tensors
//! launch nothing. A NaN stays where it is; `x = -inf` gives NaN, as Burn's composed GELU does.

use burn_backend::DType;
use cubecl::{client::ComputeClient, ir::AddressType, prelude::*, server::Handle};

// The `#[cube]` kernels.
mod kernels;
// Argument checks, before anything is queued or launched.
mod validate;

use crate::layout::{address_type, array_arg, into_contiguous, vector_size};
use crate::tensor_buffer::TensorBuffer;
use kernels::{gelu_backward_kernel, gelu_forward_kernel};
pub use validate::{check_backward, check_forward, check_grad_matches, supports_dtype};

/// Units in a cube.
const CUBE_UNITS: usize = 256;
/// Most cubes launched: larger tensors loop over their vectors.
const MAX_CUBES: usize = 65_535;

/// Environment variable: `native` (or any word that is not an off word) makes the backends run
/// these kernels; unset, `burn` or an off word keeps Burn's composed GELU.
///
/// Off by default, as measured: on an H100 the transformer step was about 2% slower with them
/// (`docs/perf/host-launch.md`). burn-fusion handles 114 operations a step fewer, but Burn's
/// composed GELU fuses with its neighbours (the dropout after it, the dropout's backward before
/// its backward) into one element-wise kernel, while a native operation is a kernel of its own:
/// 6 to 12 more launches a step and one more pass over the feed-forward activations each.
pub const ENV_GELU: &str = "RUDA_GELU";

/// Whether the backends run the native kernels (`RUDA_GELU` set and not off, read once per
/// process).
pub fn native_enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| {
        std::env::var(ENV_GELU).is_ok_and(|value| {
            !value.trim().is_empty() && !crate::env::is_off(Some(&value), &["burn"])
        })
    })
}

/// How an element-wise kernel over `n` contiguous elements launches: one unit per vector, as
/// wide as the device and every buffer's alignment allow.
struct Grid {
    cubes: CubeCount,
    units: CubeDim,
    address: AddressType,
    vector: usize,
    /// Vectors in all.
    len: usize,
    /// The element type, then the f32 arithmetic.
    dtypes: [StorageType; 2],
}

impl Grid {
    fn new<R: cubecl::Runtime>(
        client: &ComputeClient<R>,
        n: usize,
        dtype: DType,
        handles: &[&Handle],
    ) -> Self {
        let vector = vector_size(client, n, dtype.size(), handles);
        let len = n / vector;
        Self {
            cubes: CubeCount::new_1d(len.div_ceil(CUBE_UNITS).clamp(1, MAX_CUBES) as u32),
            units: CubeDim::new_1d(CUBE_UNITS as u32),
            address: address_type(n),
            vector,
            len,
            dtypes: [dtype.into(), DType::F32.into()],
        }
    }
}

/// GELU of `x`: a contiguous tensor of `x`'s shape and dtype.
///
/// # Panics
/// When `x`'s dtype is not one [`supports_dtype`] takes.
pub fn gelu_forward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    x: TensorBuffer,
) -> TensorBuffer {
    check_forward(x.dtype);
    let n = x.num_elements();
    let y = TensorBuffer::empty(client, x.shape.clone(), x.dtype);
    if n == 0 {
        return y;
    }
    let x = into_contiguous(client, x);
    let grid = Grid::new(client, n, x.dtype, &[&x.handle, &y.handle]);

    // SAFETY: `x` and `y` are contiguous with `n` elements; the kernel reads and writes vectors
    // below `grid.len` only.
    unsafe {
        gelu_forward_kernel::launch_unchecked::<R>(
            client,
            grid.cubes,
            grid.units,
            grid.address,
            grid.vector,
            array_arg(&x, n),
            array_arg(&y, n),
            grid.len,
            grid.dtypes,
        );
    }
    y
}

/// The gradient of GELU's input from the input `x` and the output's gradient `grad`: a
/// contiguous tensor of `x`'s shape and dtype.
///
/// # Panics
/// When the shapes or dtypes of `x` and `grad` differ, or the dtype is not one
/// [`supports_dtype`] takes.
pub fn gelu_backward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    x: TensorBuffer,
    grad: TensorBuffer,
) -> TensorBuffer {
    check_backward((&x.shape, x.dtype), (&grad.shape, grad.dtype));
    let n = x.num_elements();
    let dx = TensorBuffer::empty(client, x.shape.clone(), x.dtype);
    if n == 0 {
        return dx;
    }
    let x = into_contiguous(client, x);
    let grad = into_contiguous(client, grad);
    let grid = Grid::new(client, n, x.dtype, &[&x.handle, &grad.handle, &dx.handle]);

    // SAFETY: `x`, `grad` and `dx` are contiguous with `n` elements; the kernel reads and
    // writes vectors below `grid.len` only.
    unsafe {
        gelu_backward_kernel::launch_unchecked::<R>(
            client,
            grid.cubes,
            grid.units,
            grid.address,
            grid.vector,
            array_arg(&x, n),
            array_arg(&grad, n),
            array_arg(&dx, n),
            grid.len,
            grid.dtypes,
        );
    }
    dx
}
