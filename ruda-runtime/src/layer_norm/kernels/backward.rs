//! Backward kernels.
//!
//! With `xhat = (x - mean) * rstd` and `wdy = gamma * dy`, per row of length `d`:
//! `dx = rstd * (wdy - xhat * sum(wdy * xhat) / d - sum(wdy) / d)`;
//! and per column: `dgamma = sum over rows of dy * xhat`, `dbeta = sum over rows of dy`.
//!
//! The column sums are two-stage (the approach of Apex's and Triton's LayerNorm): each group of
//! units accumulates the rows it visits into its own *partial* row of an f32 scratch buffer
//! (`[num_partials, d]`), then [`reduce_partials`] sums the partials per column. No atomics, and
//! the result does not depend on scheduling.

use cubecl::prelude::*;

use super::reduce::{hsum, group_sum2, slots_per_group};

/// Row held in registers, same layout as the forward `forward_registers` (groups of `group_size`
/// units, `rows_per_cube` groups per cube, `vectors_per_unit` vectors per unit).
///
/// A unit always owns the same columns, so it keeps its columns' `dgamma`/`dbeta` in registers
/// over all the rows it visits and writes them once, to partial row
/// `CUBE_POS * rows_per_cube + UNIT_POS_Y`. Every partial row is written, even by a cube that
/// visited no row (zeros), so the scratch needs no initialisation.
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn backward_registers<F: Float, N: Size>(
    x: &Array<Vector<F, N>>,
    gamma: &Array<Vector<F, N>>,
    dy: &Array<Vector<F, N>>,
    mean_in: &Array<f32>,
    rstd_in: &Array<f32>,
    dx: &mut Array<Vector<F, N>>,
    dgamma_partial: &mut Array<Vector<f32, N>>,
    dbeta_partial: &mut Array<Vector<f32, N>>,
    rows: usize,
    d_vec: usize,
    #[comptime] group_size: usize,
    #[comptime] rows_per_cube: usize,
    #[comptime] vectors_per_unit: usize,
    #[comptime] plane_size: usize,
    #[define(F)] _dtype: StorageType,
) {
    let lane = UNIT_POS_X as usize;
    let group = UNIT_POS_Y as usize;
    let inv_d = 1.0f32 / (d_vec * N::value()) as f32;
    let slots = comptime!(rows_per_cube * slots_per_group(group_size, plane_size));
    let mut shared_a = SharedMemory::<f32>::new(slots);
    let mut shared_b = SharedMemory::<f32>::new(slots);

    // gamma is the same for every row a unit visits: load it once (zero past the row end).
    let mut gammas = Array::<Vector<f32, N>>::new(vectors_per_unit);
    let mut acc_gamma = Array::<Vector<f32, N>>::new(vectors_per_unit);
    let mut acc_beta = Array::<Vector<f32, N>>::new(vectors_per_unit);
    #[unroll]
    for k in 0..vectors_per_unit {
        let col = k * group_size + lane;
        let mut g = Vector::<f32, N>::from_int(0);
        if col < d_vec {
            g = Vector::cast_from(gamma[col]);
        }
        gammas[k] = g;
        acc_gamma[k] = Vector::from_int(0);
        acc_beta[k] = Vector::from_int(0);
    }

    let num_tiles = rows.div_ceil(rows_per_cube);
    let mut tile = CUBE_POS;
    while tile < num_tiles {
        let row = tile * rows_per_cube + group;
        let active = row < rows;
        let base = row * d_vec;
        // Rows past the end get rstd = 0 and dy = 0: they add exact zeros everywhere.
        let mut mean = 0.0f32;
        let mut rstd = 0.0f32;
        if active {
            mean = mean_in[row];
            rstd = rstd_in[row];
        }
        let mean_v = Vector::<f32, N>::cast_from(mean);
        let rstd_v = Vector::<f32, N>::cast_from(rstd);

        let mut xhats = Array::<Vector<f32, N>>::new(vectors_per_unit);
        let mut grads = Array::<Vector<f32, N>>::new(vectors_per_unit);
        #[unroll]
        for k in 0..vectors_per_unit {
            let col = k * group_size + lane;
            let mut xv = Vector::<f32, N>::from_int(0);
            let mut gv = Vector::<f32, N>::from_int(0);
            if active && col < d_vec {
                xv = Vector::cast_from(x[base + col]);
                gv = Vector::cast_from(dy[base + col]);
            }
            xhats[k] = (xv - mean_v) * rstd_v;
            grads[k] = gv;
        }
        let mut sum_wdy_xhat = 0.0f32;
        let mut sum_wdy = 0.0f32;
        #[unroll]
        for k in 0..vectors_per_unit {
            let col = k * group_size + lane;
            if col < d_vec {
                let wdy = grads[k] * gammas[k];
                sum_wdy_xhat += hsum(wdy * xhats[k]);
                sum_wdy += hsum(wdy);
                if active {
                    acc_gamma[k] += grads[k] * xhats[k];
                    acc_beta[k] += grads[k];
                }
            }
        }
        let (total_wdy_xhat, total_wdy) = group_sum2(
            sum_wdy_xhat,
            sum_wdy,
            &mut shared_a,
            &mut shared_b,
            group_size,
            plane_size,
        );
        let c1 = Vector::<f32, N>::cast_from(total_wdy_xhat * inv_d);
        let c2 = Vector::<f32, N>::cast_from(total_wdy * inv_d);

        if active {
            #[unroll]
            for k in 0..vectors_per_unit {
                let col = k * group_size + lane;
                if col < d_vec {
                    let grad = (grads[k] * gammas[k] - (xhats[k] * c1 + c2)) * rstd_v;
                    dx[base + col] = Vector::cast_from(grad);
                }
            }
        }
        tile += CUBE_COUNT;
    }

    let partial = (CUBE_POS * rows_per_cube + group) * d_vec;
    #[unroll]
    for k in 0..vectors_per_unit {
        let col = k * group_size + lane;
        if col < d_vec {
            dgamma_partial[partial + col] = acc_gamma[k];
            dbeta_partial[partial + col] = acc_beta[k];
        }
    }
}

/// Row too long for registers: one cube of `group_size` units per row, looping over the row in
/// chunks of `chunk` vectors per unit; two reads of `x`, `dy` and `gamma` per row (sums, then
/// `dx`). The partial `dgamma`/`dbeta` of a cube (row `CUBE_POS` of the scratch) live in the
/// scratch itself: zeroed first, then read-modify-written by the unit that owns each column,
/// so no two units ever touch the same slot.
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn backward_looped<F: Float, N: Size>(
    x: &Array<Vector<F, N>>,
    gamma: &Array<Vector<F, N>>,
    dy: &Array<Vector<F, N>>,
    mean_in: &Array<f32>,
    rstd_in: &Array<f32>,
    dx: &mut Array<Vector<F, N>>,
    dgamma_partial: &mut Array<Vector<f32, N>>,
    dbeta_partial: &mut Array<Vector<f32, N>>,
    rows: usize,
    d_vec: usize,
    #[comptime] group_size: usize,
    #[comptime] chunk: usize,
    #[comptime] plane_size: usize,
    #[define(F)] _dtype: StorageType,
) {
    let lane = UNIT_POS_X as usize;
    let inv_d = 1.0f32 / (d_vec * N::value()) as f32;
    let slots = comptime!(slots_per_group(group_size, plane_size));
    let mut shared_a = SharedMemory::<f32>::new(slots);
    let mut shared_b = SharedMemory::<f32>::new(slots);
    let span = group_size * chunk;
    let num_chunks = d_vec.div_ceil(span);
    let partial = CUBE_POS * d_vec;

    let mut col = lane;
    while col < d_vec {
        dgamma_partial[partial + col] = Vector::from_int(0);
        dbeta_partial[partial + col] = Vector::from_int(0);
        col += group_size;
    }

    let mut row = CUBE_POS;
    while row < rows {
        let base = row * d_vec;
        let mean_v = Vector::<f32, N>::cast_from(mean_in[row]);
        let rstd = rstd_in[row];
        let rstd_v = Vector::<f32, N>::cast_from(rstd);

        // Pass 1: the two row sums.
        let mut sum_wdy_xhat = 0.0f32;
        let mut sum_wdy = 0.0f32;
        for c in 0..num_chunks {
            let mut xs = Array::<Vector<f32, N>>::new(chunk);
            let mut wdys = Array::<Vector<f32, N>>::new(chunk);
            #[unroll]
            for k in 0..chunk {
                let col = (c * chunk + k) * group_size + lane;
                let mut xv = Vector::<f32, N>::from_int(0);
                let mut wdy = Vector::<f32, N>::from_int(0);
                if col < d_vec {
                    xv = Vector::cast_from(x[base + col]);
                    wdy = Vector::<f32, N>::cast_from(dy[base + col])
                        * Vector::<f32, N>::cast_from(gamma[col]);
                }
                xs[k] = xv;
                wdys[k] = wdy;
            }
            #[unroll]
            for k in 0..chunk {
                let col = (c * chunk + k) * group_size + lane;
                if col < d_vec {
                    let xhat = (xs[k] - mean_v) * rstd_v;
                    sum_wdy_xhat += hsum(wdys[k] * xhat);
                    sum_wdy += hsum(wdys[k]);
                }
            }
        }
        let (total_wdy_xhat, total_wdy) = group_sum2(
            sum_wdy_xhat,
            sum_wdy,
            &mut shared_a,
            &mut shared_b,
            group_size,
            plane_size,
        );
        let c1 = Vector::<f32, N>::cast_from(total_wdy_xhat * inv_d);
        let c2 = Vector::<f32, N>::cast_from(total_wdy * inv_d);

        // Pass 2: dx, and this cube's partial column sums.
        for c in 0..num_chunks {
            let mut xs = Array::<Vector<f32, N>>::new(chunk);
            let mut grads = Array::<Vector<f32, N>>::new(chunk);
            let mut gammas = Array::<Vector<f32, N>>::new(chunk);
            #[unroll]
            for k in 0..chunk {
                let col = (c * chunk + k) * group_size + lane;
                if col < d_vec {
                    xs[k] = Vector::cast_from(x[base + col]);
                    grads[k] = Vector::cast_from(dy[base + col]);
                    gammas[k] = Vector::cast_from(gamma[col]);
                }
            }
            #[unroll]
            for k in 0..chunk {
                let col = (c * chunk + k) * group_size + lane;
                if col < d_vec {
                    let xhat = (xs[k] - mean_v) * rstd_v;
                    let grad = (grads[k] * gammas[k] - (xhat * c1 + c2)) * rstd_v;
                    dx[base + col] = Vector::cast_from(grad);
                    dgamma_partial[partial + col] += grads[k] * xhat;
                    dbeta_partial[partial + col] += grads[k];
                }
            }
        }
        row += CUBE_COUNT;
    }
}

/// `dgamma[j] = sum_p dgamma_partial[p, j]` and the same for `dbeta`, cast to the weight type.
///
/// `CubeDim (columns, splits)`: unit `(c, s)` sums the partials `s, s + splits, ...` of column
/// vector `CUBE_POS * columns + c` (consecutive units read consecutive columns), then the
/// `splits` subtotals are added through shared memory in a fixed order.
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn reduce_partials<F: Float, N: Size>(
    dgamma_partial: &Array<Vector<f32, N>>,
    dbeta_partial: &Array<Vector<f32, N>>,
    dgamma: &mut Array<Vector<F, N>>,
    dbeta: &mut Array<Vector<F, N>>,
    num_partials: usize,
    d_vec: usize,
    #[comptime] columns: usize,
    #[comptime] splits: usize,
    #[define(F)] _dtype: StorageType,
) {
    let lane = UNIT_POS_X as usize;
    let split = UNIT_POS_Y as usize;
    let col = CUBE_POS * columns + lane;
    let mut shared_gamma = SharedMemory::<Vector<f32, N>>::new(comptime!(columns * splits));
    let mut shared_beta = SharedMemory::<Vector<f32, N>>::new(comptime!(columns * splits));

    let mut sum_gamma = Vector::<f32, N>::from_int(0);
    let mut sum_beta = Vector::<f32, N>::from_int(0);
    if col < d_vec {
        let mut p = split;
        while p < num_partials {
            sum_gamma += dgamma_partial[p * d_vec + col];
            sum_beta += dbeta_partial[p * d_vec + col];
            p += splits;
        }
    }
    shared_gamma[split * columns + lane] = sum_gamma;
    shared_beta[split * columns + lane] = sum_beta;
    sync_cube();

    if split == 0 && col < d_vec {
        let mut total_gamma = Vector::<f32, N>::from_int(0);
        let mut total_beta = Vector::<f32, N>::from_int(0);
        #[unroll]
        for s in 0..splits {
            total_gamma += shared_gamma[s * columns + lane];
            total_beta += shared_beta[s * columns + lane];
        }
        dgamma[col] = Vector::cast_from(total_gamma);
        dbeta[col] = Vector::cast_from(total_beta);
    }
}
