//! Column kernels: softmax over a dimension that is not the last, without moving it.
//!
//! A contiguous tensor is `[outer, d, inner]` around the dimension `dim` (of size `d`); the
//! elements of one softmax are `inner` apart. One unit owns one vector of `N` adjacent columns
//! (`N` divides `inner`): it walks the `d` positions of its columns, and the units of a cube
//! read adjacent columns, so every load is coalesced. Three passes forward (maximum, sum,
//! output), two backward (sum, output), each lane of the vector an independent softmax. The
//! numerics are those of [`super::rows`].

use cubecl::prelude::*;

use super::rows::LOWEST;

/// Forward: `columns = outer * inner_vec` units' worth of work, cubes looping over it.
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn softmax_forward_columns<F: Float, N: Size>(
    x: &Array<Vector<F, N>>,
    out: &mut Array<Vector<F, N>>,
    columns: usize,
    d: usize,
    inner_vec: usize,
    #[comptime] log: bool,
    #[define(F)] _dtype: StorageType,
) {
    let stride = CUBE_COUNT * (CUBE_DIM_X as usize);
    let mut column = ABSOLUTE_POS;
    while column < columns {
        let outer = column / inner_vec;
        let base = outer * d * inner_vec + column % inner_vec;
        let mut column_max = Vector::<f32, N>::cast_from(f32::new(LOWEST));
        for j in 0..d {
            column_max = max(
                column_max,
                Vector::<f32, N>::cast_from(x[base + j * inner_vec]),
            );
        }
        let mut sum = Vector::<f32, N>::from_int(0);
        for j in 0..d {
            sum += Vector::exp(Vector::<f32, N>::cast_from(x[base + j * inner_vec]) - column_max);
        }
        if comptime!(log) {
            let ln_sum = Vector::ln(sum);
            for j in 0..d {
                let value = Vector::<f32, N>::cast_from(x[base + j * inner_vec]);
                out[base + j * inner_vec] = Vector::cast_from((value - column_max) - ln_sum);
            }
        } else {
            let inverse = Vector::<f32, N>::from_int(1) / sum;
            for j in 0..d {
                let value = Vector::<f32, N>::cast_from(x[base + j * inner_vec]);
                out[base + j * inner_vec] =
                    Vector::cast_from(Vector::exp(value - column_max) * inverse);
            }
        }
        column += stride;
    }
}

/// Backward, as [`softmax_forward_columns`].
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn softmax_backward_columns<F: Float, N: Size>(
    y: &Array<Vector<F, N>>,
    dy: &Array<Vector<F, N>>,
    dx: &mut Array<Vector<F, N>>,
    columns: usize,
    d: usize,
    inner_vec: usize,
    #[comptime] log: bool,
    #[define(F)] _dtype: StorageType,
) {
    let stride = CUBE_COUNT * (CUBE_DIM_X as usize);
    let mut column = ABSOLUTE_POS;
    while column < columns {
        let outer = column / inner_vec;
        let base = outer * d * inner_vec + column % inner_vec;
        let mut sum = Vector::<f32, N>::from_int(0);
        for j in 0..d {
            let g = Vector::<f32, N>::cast_from(dy[base + j * inner_vec]);
            if comptime!(log) {
                sum += g;
            } else {
                sum += g * Vector::<f32, N>::cast_from(y[base + j * inner_vec]);
            }
        }
        for j in 0..d {
            let index = base + j * inner_vec;
            let g = Vector::<f32, N>::cast_from(dy[index]);
            let y_j = Vector::<f32, N>::cast_from(y[index]);
            if comptime!(log) {
                dx[index] = Vector::cast_from(g - Vector::exp(y_j) * sum);
            } else {
                dx[index] = Vector::cast_from(y_j * (g - sum));
            }
        }
        column += stride;
    }
}
