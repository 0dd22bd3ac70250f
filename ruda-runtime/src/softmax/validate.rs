//! Argument checks, on shapes and dtypes alone so that a backend can run them on the caller's
//! thread before anything is queued; Burn-style messages that name the operation, the
//! dimension and the shapes.

use alloc::{format, string::String, vec::Vec};

use burn_backend::DType;
use cubecl::{client::ComputeClient, ir::StorageType};

use super::Kind;

/// A softmax over dimension `dim` of a contiguous tensor, seen as `[outer, d, inner]`: `outer`
/// independent blocks, each `d` positions of `inner` adjacent columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Product of the dimensions before `dim`.
    pub outer: usize,
    /// The size of `dim`: the length of each softmax.
    pub d: usize,
    /// Product of the dimensions after `dim` (1 when `dim` is the last).
    pub inner: usize,
}

impl Problem {
    /// `outer * d * inner`.
    pub fn num_elements(&self) -> usize {
        self.outer * self.d * self.inner
    }

    /// Rows of the last-dimension path (`outer`, when `inner == 1`).
    pub fn rows(&self) -> usize {
        self.outer * self.inner
    }
}

/// `[2, 3]` rather than the `Debug` form of a shape.
fn fmt_shape(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| format!("{d}")).collect();
    format!("[{}]", dims.join(", "))
}

/// Whether the native kernels take `dtype` (F32, F16, BF16); the backends run Burn's composed
/// softmax for the others (F64 among them).
pub fn supports_dtype(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F16 | DType::BF16)
}

/// The rank and dimension checks alone: what a backend checks on the caller's thread before it
/// chooses between the native kernels and a composed softmax.
///
/// # Panics
/// On a scalar, or a dimension out of range.
pub fn check_dim(op: &str, shape: &[usize], dim: usize) -> Problem {
    assert!(
        !shape.is_empty(),
        "{op}: the input must have at least one dimension, got a scalar of shape []"
    );
    assert!(
        dim < shape.len(),
        "{op}: dimension {dim} is out of range for a tensor of rank {} (shape {})",
        shape.len(),
        fmt_shape(shape)
    );
    Problem {
        outer: shape[..dim].iter().product(),
        d: shape[dim],
        inner: shape[dim + 1..].iter().product(),
    }
}

fn check_dtype(op: &str, name: &str, shape: &[usize], dtype: DType) {
    assert!(
        supports_dtype(dtype),
        "{op}: {name} of shape {} has dtype {dtype:?}; the native kernels take F32, F16 and BF16",
        fmt_shape(shape)
    );
}

/// Checks of the forward pass over `dim` of a tensor of `shape` and `dtype`.
///
/// # Panics
/// On a scalar, a dimension out of range, or a dtype other than F32/F16/BF16.
pub fn check_forward(kind: Kind, shape: &[usize], dtype: DType, dim: usize) -> Problem {
    let op = kind.name();
    let problem = check_dim(op, shape, dim);
    check_dtype(op, "input", shape, dtype);
    problem
}

/// Checks of the backward pass: the forward's `output` and its gradient `grad` must have one
/// shape and one dtype.
///
/// # Panics
/// As [`check_forward`], and when the gradient's shape or dtype differs from the output's.
pub fn check_backward(
    kind: Kind,
    output: (&[usize], DType),
    grad: (&[usize], DType),
    dim: usize,
) -> Problem {
    let op = kind.backward_name();
    let problem = check_dim(op, output.0, dim);
    check_dtype(op, "output", output.0, output.1);
    assert!(
        output.0 == grad.0,
        "{op}: the gradient must have the shape of the output {}, got {}",
        fmt_shape(output.0),
        fmt_shape(grad.0)
    );
    assert!(
        output.1 == grad.1,
        "{op}: the gradient has dtype {:?} but the output has dtype {:?}; they must share one",
        grad.1,
        output.1
    );
    problem
}

/// The device must support the dtype (bf16 on a wgpu adapter without it, for example).
pub(crate) fn check_device<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    op: &str,
    shape: &[usize],
    dtype: DType,
) {
    let storage: StorageType = dtype.into();
    assert!(
        client.properties().supports_type(storage),
        "{op}: this device does not support dtype {dtype:?} (tensor of shape {}); use F32 or \
         F16 here",
        fmt_shape(shape)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn panic_message(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
        let err = std::panic::catch_unwind(f).expect_err("expected a panic");
        err.downcast_ref::<String>()
            .cloned()
            .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    }

    #[test]
    fn problems_around_the_dimension() {
        let p = check_forward(Kind::Softmax, &[2, 3, 4, 5], DType::F32, 1);
        assert_eq!(
            p,
            Problem {
                outer: 2,
                d: 3,
                inner: 20
            }
        );
        let p = check_forward(Kind::LogSoftmax, &[7, 9], DType::BF16, 1);
        assert_eq!(
            p,
            Problem {
                outer: 7,
                d: 9,
                inner: 1
            }
        );
        assert_eq!(p.rows(), 7);
        let p = check_forward(Kind::Softmax, &[0, 9], DType::F16, 0);
        assert_eq!(p.num_elements(), 0);
    }

    #[test]
    fn bad_arguments_name_the_operation_and_shapes() {
        let m = panic_message(|| {
            check_forward(Kind::Softmax, &[2, 3], DType::F32, 2);
        });
        assert!(
            m.contains(
                "softmax: dimension 2 is out of range for a tensor of rank 2 (shape [2, 3])"
            ),
            "{m}"
        );
        let m = panic_message(|| {
            check_forward(Kind::LogSoftmax, &[], DType::F32, 0);
        });
        assert!(
            m.contains("log_softmax: the input must have at least one dimension"),
            "{m}"
        );
        let m = panic_message(|| {
            check_forward(Kind::Softmax, &[4], DType::F64, 0);
        });
        assert!(m.contains("dtype F64"), "{m}");
        let m = panic_message(|| {
            check_backward(
                Kind::Softmax,
                (&[2, 3], DType::F32),
                (&[3, 2], DType::F32),
                1,
            );
        });
        assert!(m.contains("softmax backward: the gradient must have the shape of the output [2, 3], got [3, 2]"), "{m}");
        let m = panic_message(|| {
            check_backward(
                Kind::LogSoftmax,
                (&[2, 3], DType::F32),
                (&[2, 3], DType::F16),
                1,
            );
        });
        assert!(
            m.contains("log_softmax backward: the gradient has dtype F16"),
            "{m}"
        );
    }
}
