//! Argument checks, on shapes and dtypes alone ([`check_forward_args`], [`check_backward_args`])
//! so that a backend can run them on the caller's thread before anything is queued, plus the
//! device's support of the dtype; Burn-style messages that name the operation, the tensors and
//! their shapes.

use alloc::{format, string::String, vec::Vec};

use burn_backend::DType;
use cubecl::{client::ComputeClient, ir::StorageType};

use crate::tensor_buffer::TensorBuffer;

/// `[2, 3]` rather than the `Debug` form of a shape.
pub(crate) fn fmt_shape(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| format!("{d}")).collect();
    format!("[{}]", dims.join(", "))
}

/// The problem every LayerNorm call reduces to: `rows` rows of `d` contiguous elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Rows: the product of the leading dimensions.
    pub rows: usize,
    /// The normalized (last) dimension.
    pub d: usize,
}

/// A tensor as the checks see it: its shape and dtype.
pub type Arg<'a> = (&'a [usize], DType);

/// Whether the native kernels take `dtype` (F32, F16, BF16): backends run Burn's composed
/// LayerNorm for the others (F64 among them).
pub fn supports_dtype(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F16 | DType::BF16)
}

/// Rank and last dimension of `input`; returns the row decomposition.
fn check_input(op: &str, input: Arg<'_>) -> Problem {
    let (shape, _) = input;
    assert!(
        !shape.is_empty(),
        "{op}: input must have at least one dimension (the normalized one), got a scalar of shape []"
    );
    let d = shape[shape.len() - 1];
    assert!(
        d > 0,
        "{op}: the last dimension of input {} is empty; there is nothing to normalize over",
        fmt_shape(shape)
    );
    Problem {
        rows: shape[..shape.len() - 1].iter().product(),
        d,
    }
}

/// `param` (gamma or beta) must be `[d]` with the input's dtype.
fn check_param(op: &str, name: &str, param: Arg<'_>, input: Arg<'_>, d: usize) {
    assert!(
        param.0.len() == 1 && param.0[0] == d,
        "{op}: {name} must have shape [{d}] to match the last dimension of input {}, got {}",
        fmt_shape(input.0),
        fmt_shape(param.0)
    );
    check_dtype(op, name, param.1, input.1);
}

fn check_dtype(op: &str, name: &str, dtype: DType, input: DType) {
    assert!(
        dtype == input,
        "{op}: {name} has dtype {dtype:?} but input has dtype {input:?}; {name} and input must \
         share one dtype"
    );
}

/// The shape and dtype checks of the forward pass (not the dtype's support: see
/// [`supports_dtype`] and the device check of the entry points).
///
/// # Panics
/// When `input` is a scalar or has an empty last dimension, when gamma or beta is not `[d]` of
/// the input's dtype, or when `epsilon` is negative or not finite.
pub fn check_forward_args(
    input: Arg<'_>,
    weight: Arg<'_>,
    bias: Option<Arg<'_>>,
    epsilon: f64,
) -> Problem {
    const OP: &str = "LayerNorm";
    let problem = check_input(OP, input);
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

/// The shape and dtype checks of the backward pass.
///
/// # Panics
/// As [`check_forward_args`] for the input and gamma; when `grad` differs from the input in
/// shape or dtype; when `mean` or `rstd` is not F32 with one element per row.
pub fn check_backward_args(
    input: Arg<'_>,
    weight: Arg<'_>,
    grad: Arg<'_>,
    mean: Arg<'_>,
    rstd: Arg<'_>,
) -> Problem {
    const OP: &str = "LayerNorm backward";
    let problem = check_input(OP, input);
    check_param(OP, "gamma", weight, input, problem.d);
    assert!(
        grad.0 == input.0,
        "{OP}: grad (dy) must have the shape of input {}, got {}",
        fmt_shape(input.0),
        fmt_shape(grad.0)
    );
    check_dtype(OP, "grad (dy)", grad.1, input.1);
    for (name, stat) in [("mean", mean), ("rstd", rstd)] {
        let elements: usize = stat.0.iter().product();
        assert!(
            elements == problem.rows,
            "{OP}: {name} must have {} elements (one per row of input {}), got shape {}",
            problem.rows,
            fmt_shape(input.0),
            fmt_shape(stat.0)
        );
        assert!(
            stat.1 == DType::F32,
            "{OP}: {name} must have dtype F32 (as returned by the forward pass), got {:?}",
            stat.1
        );
    }
    problem
}

/// The input's dtype must be one the kernels take and the device supports.
fn check_kernel_dtype<R: cubecl::Runtime>(client: &ComputeClient<R>, op: &str, input: Arg<'_>) {
    assert!(
        supports_dtype(input.1),
        "{op}: input of shape {} has dtype {:?}; only F32, F16 and BF16 are supported",
        fmt_shape(input.0),
        input.1
    );
    let storage: StorageType = input.1.into();
    assert!(
        client.properties().supports_type(storage),
        "{op}: this device does not support dtype {:?} (input of shape {}); use F32 or F16 here",
        input.1,
        fmt_shape(input.0)
    );
}

fn arg(buffer: &TensorBuffer) -> Arg<'_> {
    (&buffer.shape, buffer.dtype)
}

/// Every check of [`crate::layer_norm::layer_norm_forward`], the device's included.
pub(crate) fn check_forward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    input: &TensorBuffer,
    weight: &TensorBuffer,
    bias: Option<&TensorBuffer>,
    epsilon: f64,
) -> Problem {
    let problem = check_forward_args(arg(input), arg(weight), bias.map(arg), epsilon);
    check_kernel_dtype(client, "LayerNorm", arg(input));
    problem
}

/// Every check of [`crate::layer_norm::layer_norm_backward`], the device's included.
pub(crate) fn check_backward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    input: &TensorBuffer,
    weight: &TensorBuffer,
    grad: &TensorBuffer,
    mean: &TensorBuffer,
    rstd: &TensorBuffer,
) -> Problem {
    let problem = check_backward_args(arg(input), arg(weight), arg(grad), arg(mean), arg(rstd));
    check_kernel_dtype(client, "LayerNorm backward", arg(input));
    problem
}
