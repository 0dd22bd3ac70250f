//! The Adam `#[cube]` kernel: the updates of several parameters in one launch. Each parameter
//! owns a range of cubes; a cube finds its parameter, then its units loop over that parameter's
//! vectors. Each unit reads a parameter's element, gradient and moments once, updates them in
//! the accumulator type `A` (f32, f64 for f64 tensors) and writes each result once.
//!
//! The parameters' arrays come as sequences, which a kernel indexes at compile time only: the
//! body is unrolled once per parameter, and a cube runs the one copy whose cube range holds it
//! (a branch uniform over the cube, so no unit waits on another's parameter).

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

/// Adam over the parameters of the sequences (all of one dtype and vector size): parameter `k`
/// has `param[k]`, `grad[k]`, `m[k]`, `v[k]` in and `param_out[k]`, `m_out[k]`, `v_out[k]`
/// out, `lens[k]` vectors each, and the cubes `first_cube[k]..first_cube[k + 1]`. With
/// `amsgrad`, `vmax[k]` in and `vmax_out[k]` out hold the running maximum of the second moment,
/// which the denominator uses instead of `v'`; without it both sequences are empty.
///
/// `step` is `lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)`, `eps` is `epsilon * sqrt(1 - beta_2^t)`
/// (Burn's Adam applies its epsilon after the same bias correction), `decay` the weight decay's
/// penalty (0 for none): the same for every parameter of the launch.
#[cube(launch_unchecked, address_type = "dynamic")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn adam_kernel<F: Float, A: Float, N: Size>(
    param: &Sequence<Array<Vector<F, N>>>,
    grad: &Sequence<Array<Vector<F, N>>>,
    m: &Sequence<Array<Vector<F, N>>>,
    v: &Sequence<Array<Vector<F, N>>>,
    vmax: &Sequence<Array<Vector<F, N>>>,
    param_out: &mut Sequence<Array<Vector<F, N>>>,
    m_out: &mut Sequence<Array<Vector<F, N>>>,
    v_out: &mut Sequence<Array<Vector<F, N>>>,
    vmax_out: &mut Sequence<Array<Vector<F, N>>>,
    lens: Sequence<usize>,
    first_cube: Sequence<usize>,
    beta_1: f32,
    beta_2: f32,
    step: f32,
    eps: f32,
    decay: f32,
    #[comptime] amsgrad: bool,
    #[define(F, A)] _dtypes: [StorageType; 2],
) {
    let count = comptime![lens.len()];
    let cube = CUBE_POS;
    #[unroll]
    for k in 0..count {
        let first = *first_cube.index(k);
        let end = *first_cube.index(comptime![k + 1]);
        if cube >= first && cube < end {
            let len = *lens.index(k);
            let (param, grad, m, v) = (param.index(k), grad.index(k), m.index(k), v.index(k));
            let (param_out, m_out, v_out) = (
                param_out.index_mut(k),
                m_out.index_mut(k),
                v_out.index_mut(k),
            );
            let mut i = (cube - first) * usize::cast_from(CUBE_DIM) + usize::cast_from(UNIT_POS);
            let stride = (end - first) * usize::cast_from(CUBE_DIM);
            while i < len {
                let (p, m1, v1) =
                    moments::<F, A, N>(param[i], grad[i], m[i], v[i], beta_1, beta_2, decay);
                if amsgrad {
                    // The maximum of the unrounded v' (as the plain update divides by the
                    // unrounded v'), rounded once when stored.
                    let vmax_out = vmax_out.index_mut(k);
                    let new_max = max(Vector::<A, N>::cast_from(vmax.index(k)[i]), v1);
                    param_out[i] = Vector::cast_from(descend::<A, N>(p, m1, new_max, step, eps));
                    vmax_out[i] = Vector::cast_from(new_max);
                } else {
                    param_out[i] = Vector::cast_from(descend::<A, N>(p, m1, v1, step, eps));
                }
                m_out[i] = Vector::cast_from(m1);
                v_out[i] = Vector::cast_from(v1);
                i += stride;
            }
        }
    }
}
