//! Argument checks, run before anything is launched, with Burn-style messages that name the
//! tensors and their shapes.

use alloc::{format, string::String};

use burn_backend::DType;
use cubecl::{client::ComputeClient, ir::StorageType, zspace::Shape};

use crate::tensor_buffer::TensorBuffer;

/// `[2, 3]` rather than the `Debug` form of [`Shape`].
pub(crate) fn fmt_shape(shape: &Shape) -> String {
    let dims: alloc::vec::Vec<String> = shape.iter().map(|d| format!("{d}")).collect();
    format!("[{}]", dims.join(", "))
}

/// The problem every LayerNorm call reduces to: `rows` rows of `d` contiguous elements.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Problem {
    pub rows: usize,
    pub d: usize,
}

/// Rank, element type and device support of `input`; returns the row decomposition.
fn check_input<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    op: &str,
    input: &TensorBuffer,
) -> Problem {
    let rank = input.shape.num_dims();
    assert!(
        rank > 0,
        "{op}: input must have at least one dimension (the normalized one), got a scalar of shape []"
    );
    assert!(
        matches!(input.dtype, DType::F32 | DType::F16 | DType::BF16),
        "{op}: input of shape {} has dtype {:?}; only F32, F16 and BF16 are supported",
        fmt_shape(&input.shape),
        input.dtype
    );
    let storage: StorageType = input.dtype.into();
    assert!(
        client.properties().supports_type(storage),
        "{op}: this device does not support dtype {:?} (input of shape {}); use F32 or F16 here",
        input.dtype,
        fmt_shape(&input.shape)
    );
    let d = input.shape[rank - 1];
    assert!(
        d > 0,
        "{op}: the last dimension of input {} is empty; there is nothing to normalize over",
        fmt_shape(&input.shape)
    );
    let rows = input.shape.iter().take(rank - 1).product();
    Problem { rows, d }
}

/// `param` (gamma or beta) must be `[d]` with the input's dtype.
fn check_param(op: &str, name: &str, param: &TensorBuffer, input: &TensorBuffer, d: usize) {
    assert!(
        param.shape.num_dims() == 1 && param.shape[0] == d,
        "{op}: {name} must have shape [{d}] to match the last dimension of input {}, got {}",
        fmt_shape(&input.shape),
        fmt_shape(&param.shape)
    );
    check_dtype(op, name, param, input);
}

fn check_dtype(op: &str, name: &str, tensor: &TensorBuffer, input: &TensorBuffer) {
    assert!(
        tensor.dtype == input.dtype,
        "{op}: {name} has dtype {:?} but input has dtype {:?}; {name} and input must share one dtype",
        tensor.dtype,
        input.dtype
    );
}

/// Checks of [`crate::layer_norm_forward`].
pub(crate) fn check_forward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    input: &TensorBuffer,
    weight: &TensorBuffer,
    bias: Option<&TensorBuffer>,
    epsilon: f64,
) -> Problem {
    const OP: &str = "LayerNorm";
    let problem = check_input(client, OP, input);
    check_param(OP, "gamma", weight, input, problem.d);
    if let Some(bias) = bias {
        check_param(OP, "beta", bias, input, problem.d);
    }
    assert!(
        epsilon.is_finite() && epsilon >= 0.0,
        "{OP}: epsilon must be finite and non-negative, got {epsilon}"
    );
    problem
}

/// Checks of [`crate::layer_norm_backward`].
pub(crate) fn check_backward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    input: &TensorBuffer,
    weight: &TensorBuffer,
    grad: &TensorBuffer,
    mean: &TensorBuffer,
    rstd: &TensorBuffer,
) -> Problem {
    const OP: &str = "LayerNorm backward";
    let problem = check_input(client, OP, input);
    check_param(OP, "gamma", weight, input, problem.d);
    assert!(
        grad.shape == input.shape,
        "{OP}: grad (dy) must have the shape of input {}, got {}",
        fmt_shape(&input.shape),
        fmt_shape(&grad.shape)
    );
    check_dtype(OP, "grad (dy)", grad, input);
    for (name, stat) in [("mean", mean), ("rstd", rstd)] {
        assert!(
            stat.num_elements() == problem.rows,
            "{OP}: {name} must have {} elements (one per row of input {}), got shape {}",
            problem.rows,
            fmt_shape(&input.shape),
            fmt_shape(&stat.shape)
        );
        assert!(
            stat.dtype == DType::F32,
            "{OP}: {name} must have dtype F32 (as returned by the forward pass), got {:?}",
            stat.dtype
        );
    }
    problem
}
