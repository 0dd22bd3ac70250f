//! Unit-per-row kernels: one unit owns a whole row of the last dimension, with no shared memory
//! and no barrier.
//!
//! Built for devices where a barrier is expensive and there are no plane operations (Mesa's
//! lavapipe, whose workgroups run as SIMD loops over their invocations): the unit re-reads its
//! row from cache instead. The forward pass makes three passes (maximum, sum, output), the
//! backward two (sum, output). The numerics are those of [`super::rows`].

use cubecl::prelude::*;

use super::rows::LOWEST;
use crate::group_reduce::{hmax, hsum};

/// Forward, one unit per row (cubes loop over the rows).
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn softmax_forward_unit<F: Float, N: Size>(
    x: &Array<Vector<F, N>>,
    out: &mut Array<Vector<F, N>>,
    rows: usize,
    d_vec: usize,
    #[comptime] log: bool,
    #[define(F)] _dtype: StorageType,
) {
    let stride = CUBE_COUNT * (CUBE_DIM_X as usize);
    let mut row = ABSOLUTE_POS;
    while row < rows {
        let base = row * d_vec;
        let mut row_max = Vector::<f32, N>::cast_from(f32::new(LOWEST));
        for j in 0..d_vec {
            row_max = max(row_max, Vector::<f32, N>::cast_from(x[base + j]));
        }
        let max_v = Vector::<f32, N>::cast_from(hmax(row_max));
        let mut sum = Vector::<f32, N>::from_int(0);
        for j in 0..d_vec {
            sum += Vector::exp(Vector::<f32, N>::cast_from(x[base + j]) - max_v);
        }
        let total = hsum(sum);
        if comptime!(log) {
            let ln_sum = Vector::<f32, N>::cast_from(f32::ln(total));
            for j in 0..d_vec {
                let value = Vector::<f32, N>::cast_from(x[base + j]);
                out[base + j] = Vector::cast_from((value - max_v) - ln_sum);
            }
        } else {
            let inverse = Vector::<f32, N>::cast_from(1.0 / total);
            for j in 0..d_vec {
                let value = Vector::<f32, N>::cast_from(x[base + j]);
                out[base + j] = Vector::cast_from(Vector::exp(value - max_v) * inverse);
            }
        }
        row += stride;
    }
}

/// Backward, one unit per row.
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn softmax_backward_unit<F: Float, N: Size>(
    y: &Array<Vector<F, N>>,
    dy: &Array<Vector<F, N>>,
    dx: &mut Array<Vector<F, N>>,
    rows: usize,
    d_vec: usize,
    #[comptime] log: bool,
    #[define(F)] _dtype: StorageType,
) {
    let stride = CUBE_COUNT * (CUBE_DIM_X as usize);
    let mut row = ABSOLUTE_POS;
    while row < rows {
        let base = row * d_vec;
        let mut sum = Vector::<f32, N>::from_int(0);
        for j in 0..d_vec {
            let g = Vector::<f32, N>::cast_from(dy[base + j]);
            if comptime!(log) {
                sum += g;
            } else {
                sum += g * Vector::<f32, N>::cast_from(y[base + j]);
            }
        }
        let total = Vector::<f32, N>::cast_from(hsum(sum));
        for j in 0..d_vec {
            let g = Vector::<f32, N>::cast_from(dy[base + j]);
            let y_j = Vector::<f32, N>::cast_from(y[base + j]);
            if comptime!(log) {
                dx[base + j] = Vector::cast_from(g - Vector::exp(y_j) * total);
            } else {
                dx[base + j] = Vector::cast_from(y_j * (g - total));
            }
        }
        row += stride;
    }
}
