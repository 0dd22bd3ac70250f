//! Argument checks of the Adam update, before anything is queued or launched.

use burn_backend::DType;
use cubecl::zspace::Shape;

/// A tensor's shape and dtype.
pub type Layout<'a> = (&'a Shape, DType);

/// Checks one parameter's update: every tensor has the parameter's shape and dtype, a float
/// dtype the kernels take, and the step is counted from 1. The backends call it before
/// queueing the kernel, so that a bad call panics where it is made.
///
/// # Panics
/// On a parameter of another dtype than f64, f32, f16 or bf16, on a tensor whose shape or
/// dtype differs from the parameter's (the message names it), or on step 0.
pub fn check(
    param: Layout,
    grad: Layout,
    moment_1: Layout,
    moment_2: Layout,
    max_moment_2: Option<Layout>,
    time: usize,
) {
    let (shape, dtype) = param;
    assert!(
        supports_dtype(dtype),
        "Adam: the parameter must be an f64, f32, f16 or bf16 tensor, got {dtype:?}"
    );
    let named = [
        ("gradient", Some(grad)),
        ("first moment", Some(moment_1)),
        ("second moment", Some(moment_2)),
        ("second moment's maximum", max_moment_2),
    ];
    for (name, (other_shape, other_dtype)) in named
        .into_iter()
        .filter_map(|(name, layout)| layout.map(|l| (name, l)))
    {
        assert!(
            other_shape == shape && other_dtype == dtype,
            "Adam: the {name} must have the parameter's shape and dtype, got {other_shape:?} \
             {other_dtype:?} for a parameter of {shape:?} {dtype:?}"
        );
    }
    assert!(time >= 1, "Adam: steps are counted from 1, got step 0");
}

/// Whether the kernels take tensors of `dtype`.
pub fn supports_dtype(dtype: DType) -> bool {
    matches!(dtype, DType::F64 | DType::F32 | DType::F16 | DType::BF16)
}
