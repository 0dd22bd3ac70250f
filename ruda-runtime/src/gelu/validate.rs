//! Argument checks of GELU, on shapes and dtypes alone so that a backend can run them on the
//! caller's thread before anything is queued.

use burn_backend::DType;

/// The dtypes the kernels take: f32, f16 and bf16 (the arithmetic in f32). Not f64: Vulkan's
/// `exp` (in erf and tanh) has no f64 form, so f64 tensors take Burn's composed GELU, as they
/// take Burn's softmax.
pub fn supports_dtype(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F16 | DType::BF16)
}

/// Checks the forward's input.
///
/// # Panics
/// When `dtype` is not a dtype the kernels take.
pub fn check_forward(dtype: DType) {
    assert!(
        supports_dtype(dtype),
        "gelu: the native kernel takes f32, f16 or bf16 tensors, got {dtype:?}"
    );
}

/// Checks that the output gradient `grad` has the shape and dtype of the forward's input `x`:
/// what a backend checks on the caller's thread before it chooses between the native kernel
/// and Burn's composed backward.
///
/// # Panics
/// When their shapes or dtypes differ.
pub fn check_grad_matches(x: (&[usize], DType), grad: (&[usize], DType)) {
    assert!(
        x.0 == grad.0 && x.1 == grad.1,
        "gelu_backward: the gradient must have the input's shape and dtype, got input {:?} {:?} \
         and gradient {:?} {:?}",
        x.0,
        x.1,
        grad.0,
        grad.1
    );
}

/// Checks the backward's input `x` and output gradient `grad`.
///
/// # Panics
/// When their shapes or dtypes differ, or the dtype is not one the kernels take.
pub fn check_backward(x: (&[usize], DType), grad: (&[usize], DType)) {
    check_grad_matches(x, grad);
    check_forward(x.1);
}
