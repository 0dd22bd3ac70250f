//! The Adam `#[cube]` kernels: one unit per vector of elements, looping past the grid. Each
//! unit reads its parameter, gradient and moments once, updates them in the accumulator type
//! `A` (f32, f64 for f64 tensors) and writes each result once.

use cubecl::prelude::*;

/// One vector's parameter and new moments `(param, m', v')` in `A`, from the stored
/// parameter, gradient (plus `decay * param`: the weight decay) and moments.
#[cube]
#[allow(clippy::too_many_arguments)]
fn moments<F: Float, A: Float, N: Size>(
    param: Vector<F, N>,
    grad: Vector<F, N>,
    m: Vector<F, N>,
    v: Vector<F, N>,
    beta_1: f32,
    beta_2: f32,
    decay: f32,
) -> (Vector<A, N>, Vector<A, N>, Vector<A, N>) {
    let p = Vector::<A, N>::cast_from(param);
    let g = Vector::<A, N>::cast_from(grad) + Vector::<A, N>::cast_from(decay) * p;
    let b1 = Vector::<A, N>::cast_from(beta_1);
    let b2 = Vector::<A, N>::cast_from(beta_2);
    let one = Vector::<A, N>::from_int(1);
    let m1 = b1 * Vector::cast_from(m) + (one - b1) * g;
    let v1 = b2 * Vector::cast_from(v) + (one - b2) * g * g;
    (p, m1, v1)
}

/// The parameter after the step: `p - step * m' / (sqrt(second) + eps)`, `second` being `v'` or
/// AMSGrad's maximum.
#[cube]
fn descend<A: Float, N: Size>(
    p: Vector<A, N>,
    m1: Vector<A, N>,
    second: Vector<A, N>,
    step: f32,
    eps: f32,
) -> Vector<A, N> {
    let denom = Vector::sqrt(second) + Vector::<A, N>::cast_from(eps);
    p - Vector::<A, N>::cast_from(step) * m1 / denom
}

/// Adam without AMSGrad: `param`, `grad`, `m`, `v` in, `param_out`, `m_out`, `v_out` out.
/// `step` is `lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)`, `eps` is
/// `epsilon * sqrt(1 - beta_2^t)` (Burn's Adam applies its epsilon after the same bias
/// correction), `decay` the weight decay's penalty (0 for none).
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn adam_kernel<F: Float, A: Float, N: Size>(
    param: &Array<Vector<F, N>>,
    grad: &Array<Vector<F, N>>,
    m: &Array<Vector<F, N>>,
    v: &Array<Vector<F, N>>,
    param_out: &mut Array<Vector<F, N>>,
    m_out: &mut Array<Vector<F, N>>,
    v_out: &mut Array<Vector<F, N>>,
    len: usize,
    beta_1: f32,
    beta_2: f32,
    step: f32,
    eps: f32,
    decay: f32,
    #[define(F, A)] _dtypes: [StorageType; 2],
) {
    let mut i = ABSOLUTE_POS;
    let stride = CUBE_COUNT * usize::cast_from(CUBE_DIM);
    while i < len {
        let (p, m1, v1) = moments::<F, A, N>(param[i], grad[i], m[i], v[i], beta_1, beta_2, decay);
        param_out[i] = Vector::cast_from(descend::<A, N>(p, m1, v1, step, eps));
        m_out[i] = Vector::cast_from(m1);
        v_out[i] = Vector::cast_from(v1);
        i += stride;
    }
}

/// Adam with AMSGrad: as [`adam_kernel`], with the running maximum of the second moment `vmax`
/// in and out, which the denominator uses instead of `v'`.
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn adam_amsgrad_kernel<F: Float, A: Float, N: Size>(
    param: &Array<Vector<F, N>>,
    grad: &Array<Vector<F, N>>,
    m: &Array<Vector<F, N>>,
    v: &Array<Vector<F, N>>,
    vmax: &Array<Vector<F, N>>,
    param_out: &mut Array<Vector<F, N>>,
    m_out: &mut Array<Vector<F, N>>,
    v_out: &mut Array<Vector<F, N>>,
    vmax_out: &mut Array<Vector<F, N>>,
    len: usize,
    beta_1: f32,
    beta_2: f32,
    step: f32,
    eps: f32,
    decay: f32,
    #[define(F, A)] _dtypes: [StorageType; 2],
) {
    let mut i = ABSOLUTE_POS;
    let stride = CUBE_COUNT * usize::cast_from(CUBE_DIM);
    while i < len {
        let (p, m1, v1) = moments::<F, A, N>(param[i], grad[i], m[i], v[i], beta_1, beta_2, decay);
        // The maximum of the unrounded v' (as the plain kernel divides by the unrounded v'),
        // rounded once when stored.
        let new_max = max(Vector::<A, N>::cast_from(vmax[i]), v1);
        param_out[i] = Vector::cast_from(descend::<A, N>(p, m1, new_max, step, eps));
        m_out[i] = Vector::cast_from(m1);
        v_out[i] = Vector::cast_from(v1);
        vmax_out[i] = Vector::cast_from(new_max);
        i += stride;
    }
}
