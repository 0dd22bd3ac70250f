//! The GELU `#[cube]` kernels: one unit per vector of elements, looping over the vectors past
//! the grid. Each unit reads its inputs once and writes its result once; the arithmetic runs in
//! the accumulator type `A` (f32) and is rounded once when stored.

use cubecl::prelude::*;

/// This unit's first vector, and the step to its next: the grid's size in units.
#[cube]
fn first_and_stride() -> (usize, usize) {
    let units = usize::cast_from(CUBE_DIM);
    (
        usize::cast_from(CUBE_POS) * units + usize::cast_from(UNIT_POS),
        usize::cast_from(CUBE_COUNT) * units,
    )
}

/// `y = x * (erf(x / sqrt(2)) + 1) / 2` over `len` vectors, Burn's composed GELU step by step.
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn gelu_forward_kernel<F: Float, A: Float, N: Size>(
    x: &Array<Vector<F, N>>,
    y: &mut Array<Vector<F, N>>,
    len: usize,
    #[define(F, A)] _dtypes: [StorageType; 2],
) {
    let (mut i, stride) = first_and_stride();
    while i < len {
        let v = Vector::<A, N>::cast_from(x[i]);
        let erf = Vector::erf(v / Vector::<A, N>::cast_from(core::f32::consts::SQRT_2));
        let one = Vector::<A, N>::from_int(1);
        let two = Vector::<A, N>::from_int(2);
        y[i] = Vector::cast_from(v * (erf + one) / two);
        i += stride;
    }
}

/// `dx = gelu'(x) * dy` over `len` vectors, with the derivative Burn's backends use (that of
/// GELU's tanh approximation, Burn's default `gelu_backward`):
///
/// ```text
/// gelu'(x) = tanh(c1 x^3 + c2 x) / 2 + (c3 x^3 + c4 x) (1 - tanh(c1 x^3 + c2 x)^2) + 1/2
/// ```
///
/// with Burn's constants, so that gradients match Burn's own backends.
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn gelu_backward_kernel<F: Float, A: Float, N: Size>(
    x: &Array<Vector<F, N>>,
    grad: &Array<Vector<F, N>>,
    dx: &mut Array<Vector<F, N>>,
    len: usize,
    #[define(F, A)] _dtypes: [StorageType; 2],
) {
    let (mut i, stride) = first_and_stride();
    while i < len {
        let v = Vector::<A, N>::cast_from(x[i]);
        let v3 = v * v * v;
        let inner1 = v3 * Vector::<A, N>::cast_from(0.0356774f32)
            + v * Vector::<A, N>::cast_from(0.797885f32);
        let inner2 = v3 * Vector::<A, N>::cast_from(0.0535161f32)
            + v * Vector::<A, N>::cast_from(0.398942f32);
        let tanh = Vector::tanh(inner1);
        let one = Vector::<A, N>::from_int(1);
        let half = Vector::<A, N>::cast_from(0.5f32);
        let sech2 = one - tanh * tanh;
        let derivative = tanh * half + (inner2 * sech2 + half);
        dx[i] = Vector::cast_from(derivative * Vector::<A, N>::cast_from(grad[i]));
        i += stride;
    }
}
