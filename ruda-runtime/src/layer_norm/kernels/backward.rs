//! Backward kernels.
//!
//! With `xhat = (x - mean) * rstd` and `wdy = gamma * dy`, per row of length `d`:
//! `dx = rstd * (wdy - xhat * sum(wdy * xhat) / d - sum(wdy) / d)`;
//! and per column: `dgamma = sum over rows of dy * xhat`, `dbeta = sum over rows of dy`.
//!
//! The saved `mean` is an f32 and, for a row with a large mean and a small spread (mean 1e4,
//! std 1e-2), its rounding (up to half an ulp, ~5e-4) is a few percent of the spread: `x - mean`
//! through it is off by a common offset. So the saved mean is only used as a shift: each row
//! also sums the deviations `dev = x - mean` (exact where it matters: `x` and `mean` are close),
//! and `c = sum(dev) / d`, the distance from the saved mean to the row's true mean, corrects
//! them: `xhat = (dev - c) * rstd`. The sum `sum(wdy * xhat)` is formed in the same reduction as
//! the others, from `sum(wdy * dev)`, as `rstd * (sum(wdy * dev) - c * sum(wdy))`; `c` is a
//! fraction of the spread, so nothing cancels. One reduction of three values per row, no extra
//! memory traffic.
//!
//! The column sums are two-stage (the approach of Apex's and Triton's LayerNorm): each group of
//! units accumulates the rows it visits into its own *partial* row of an f32 scratch buffer
//! (`[num_partials, d]`), then [`reduce_partials`] sums the partials per column (in two
//! launches, through one f32 row per chunk of partial rows, when there are many). No atomics,
//! and the result does not depend on scheduling.

use cubecl::prelude::*;

use crate::group_reduce::{group_sum3, hsum, shared_len};

/// Row held in registers, same layout as the forward `forward_registers` (groups of `group_size`
/// units, `rows_per_cube` groups per cube, `vectors_per_unit` vectors per unit).
///
/// A unit always owns the same columns, so it keeps its columns' `dgamma`/`dbeta` over all the
/// rows it visits; at the end the cube writes them once, to partial row `CUBE_POS`. Every
/// partial row is written, even by a cube that visited no row (zeros), so the scratch needs no
/// initialisation.
///
/// Where those sums and `gamma` live is `shared_sums`: in registers (`false`), or in shared
/// memory (`true`), each unit in its own slots, `gamma` once per cube. Registers are fastest
/// while a unit holds a few elements of the row; at 32 (d = 8192 over 256 units) the sums and
/// `gamma` take half of a unit's ~190 registers, one cube fits on an SM, and its rows run one
/// after the other with nothing to cover each row's load and reduction latency. In shared memory
/// they free those registers, so that two or three cubes share an SM.
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
    #[comptime] shared_sums: bool,
    #[define(F)] _dtype: StorageType,
) {
    let lane = UNIT_POS_X as usize;
    let group = UNIT_POS_Y as usize;
    let inv_d = 1.0f32 / (d_vec * N::value()) as f32;
    let mut shared = SharedMemory::<f32>::new(comptime!(shared_len(
        rows_per_cube,
        group_size,
        plane_size,
        3
    )));
    let row_vectors = comptime!(group_size * vectors_per_unit);
    // One slot each where the sums stay in registers (unused).
    let mut held_gamma =
        SharedMemory::<Vector<f32, N>>::new(comptime!(if shared_sums { row_vectors } else { 1 }));
    let mut sums_gamma = SharedMemory::<Vector<f32, N>>::new(comptime!(if shared_sums {
        rows_per_cube * row_vectors
    } else {
        1
    }));
    let mut sums_beta = SharedMemory::<Vector<f32, N>>::new(comptime!(if shared_sums {
        rows_per_cube * row_vectors
    } else {
        1
    }));

    // gamma is the same for every row a unit visits: load it once (zero past the row end).
    let mut gammas = Array::<Vector<f32, N>>::new(vectors_per_unit);
    let mut acc_gamma = Array::<Vector<f32, N>>::new(vectors_per_unit);
    let mut acc_beta = Array::<Vector<f32, N>>::new(vectors_per_unit);
    if comptime!(shared_sums) {
        // Slot `k * group_size + lane` of `held_gamma` is column vector `k * group_size + lane`;
        // slot `(group * vectors_per_unit + k) * group_size + lane` of the sums is this unit's.
        let mut slot = (UNIT_POS_Y * CUBE_DIM_X + UNIT_POS_X) as usize;
        while slot < row_vectors {
            let mut g = Vector::<f32, N>::from_int(0);
            if slot < d_vec {
                g = Vector::cast_from(gamma[slot]);
            }
            held_gamma[slot] = g;
            slot += (CUBE_DIM_X * CUBE_DIM_Y) as usize;
        }
        #[unroll]
        for k in 0..vectors_per_unit {
            let own = (group * vectors_per_unit + k) * group_size + lane;
            sums_gamma[own] = Vector::from_int(0);
            sums_beta[own] = Vector::from_int(0);
        }
        sync_cube();
    } else {
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

        let mut devs = Array::<Vector<f32, N>>::new(vectors_per_unit);
        let mut grads = Array::<Vector<f32, N>>::new(vectors_per_unit);
        #[unroll]
        for k in 0..vectors_per_unit {
            let col = k * group_size + lane;
            let mut dev = Vector::<f32, N>::from_int(0);
            let mut gv = Vector::<f32, N>::from_int(0);
            if active && col < d_vec {
                dev = Vector::<f32, N>::cast_from(x[base + col]) - mean_v;
                gv = Vector::cast_from(dy[base + col]);
            }
            devs[k] = dev;
            grads[k] = gv;
        }
        let mut sum_wdy_dev = 0.0f32;
        let mut sum_wdy = 0.0f32;
        let mut sum_dev = 0.0f32;
        #[unroll]
        for k in 0..vectors_per_unit {
            let g = if comptime!(shared_sums) {
                held_gamma[k * group_size + lane]
            } else {
                gammas[k]
            };
            let wdy = grads[k] * g;
            sum_wdy_dev += hsum(wdy * devs[k]);
            sum_wdy += hsum(wdy);
            sum_dev += hsum(devs[k]);
        }
        let (total_wdy_dev, total_wdy, total_dev) = group_sum3(
            sum_wdy_dev,
            sum_wdy,
            sum_dev,
            &mut shared,
            group_size,
            plane_size,
        );
        // The saved mean's distance to the row's mean, and sum(wdy * xhat) with it.
        let correction = total_dev * inv_d;
        let correction_v = Vector::<f32, N>::cast_from(correction);
        let c1 =
            Vector::<f32, N>::cast_from((total_wdy_dev - correction * total_wdy) * rstd * inv_d);
        let c2 = Vector::<f32, N>::cast_from(total_wdy * inv_d);

        if active {
            #[unroll]
            for k in 0..vectors_per_unit {
                let col = k * group_size + lane;
                if col < d_vec {
                    let xhat = (devs[k] - correction_v) * rstd_v;
                    if comptime!(shared_sums) {
                        let g = held_gamma[col];
                        let grad = (grads[k] * g - (xhat * c1 + c2)) * rstd_v;
                        dx[base + col] = Vector::cast_from(grad);
                        let own = (group * vectors_per_unit + k) * group_size + lane;
                        sums_gamma[own] += grads[k] * xhat;
                        sums_beta[own] += grads[k];
                    } else {
                        let grad = (grads[k] * gammas[k] - (xhat * c1 + c2)) * rstd_v;
                        dx[base + col] = Vector::cast_from(grad);
                        acc_gamma[k] += grads[k] * xhat;
                        acc_beta[k] += grads[k];
                    }
                }
            }
        }
        tile += CUBE_COUNT;
    }

    // One partial row per cube: the groups of a cube hold the same columns, so they are added
    // through shared memory first (once per launch, not per row), which keeps the final
    // reduction `rows_per_cube` times smaller.
    let partial = CUBE_POS * d_vec;
    if comptime!(shared_sums) {
        // Each unit's slots; the groups of a cube (same columns) added by group 0.
        if comptime!(rows_per_cube > 1) {
            sync_cube();
        }
        if group == 0 {
            #[unroll]
            for k in 0..vectors_per_unit {
                let col = k * group_size + lane;
                if col < d_vec {
                    let mut sum_gamma = sums_gamma[k * group_size + lane];
                    let mut sum_beta = sums_beta[k * group_size + lane];
                    #[unroll]
                    for r in 1..rows_per_cube {
                        let slot = (r * vectors_per_unit + k) * group_size + lane;
                        sum_gamma += sums_gamma[slot];
                        sum_beta += sums_beta[slot];
                    }
                    dgamma_partial[partial + col] = sum_gamma;
                    dbeta_partial[partial + col] = sum_beta;
                }
            }
        }
    } else if comptime!(rows_per_cube == 1) {
        #[unroll]
        for k in 0..vectors_per_unit {
            let col = k * group_size + lane;
            if col < d_vec {
                dgamma_partial[partial + col] = acc_gamma[k];
                dbeta_partial[partial + col] = acc_beta[k];
            }
        }
    } else {
        let mut shared_gamma =
            SharedMemory::<Vector<f32, N>>::new(comptime!(rows_per_cube * group_size));
        let mut shared_beta =
            SharedMemory::<Vector<f32, N>>::new(comptime!(rows_per_cube * group_size));
        #[unroll]
        for k in 0..vectors_per_unit {
            shared_gamma[group * group_size + lane] = acc_gamma[k];
            shared_beta[group * group_size + lane] = acc_beta[k];
            sync_cube();
            let col = k * group_size + lane;
            if group == 0 && col < d_vec {
                let mut sum_gamma = acc_gamma[k];
                let mut sum_beta = acc_beta[k];
                #[unroll]
                for r in 1..rows_per_cube {
                    sum_gamma += shared_gamma[r * group_size + lane];
                    sum_beta += shared_beta[r * group_size + lane];
                }
                dgamma_partial[partial + col] = sum_gamma;
                dbeta_partial[partial + col] = sum_beta;
            }
            sync_cube();
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
    let mut shared = SharedMemory::<f32>::new(comptime!(shared_len(1, group_size, plane_size, 3)));
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

        // Pass 1: the three row sums.
        let mut sum_wdy_dev = 0.0f32;
        let mut sum_wdy = 0.0f32;
        let mut sum_dev = 0.0f32;
        for c in 0..num_chunks {
            let mut devs = Array::<Vector<f32, N>>::new(chunk);
            let mut wdys = Array::<Vector<f32, N>>::new(chunk);
            #[unroll]
            for k in 0..chunk {
                let col = (c * chunk + k) * group_size + lane;
                let mut dev = Vector::<f32, N>::from_int(0);
                let mut wdy = Vector::<f32, N>::from_int(0);
                if col < d_vec {
                    dev = Vector::<f32, N>::cast_from(x[base + col]) - mean_v;
                    wdy = Vector::<f32, N>::cast_from(dy[base + col])
                        * Vector::<f32, N>::cast_from(gamma[col]);
                }
                devs[k] = dev;
                wdys[k] = wdy;
            }
            #[unroll]
            for k in 0..chunk {
                sum_wdy_dev += hsum(wdys[k] * devs[k]);
                sum_wdy += hsum(wdys[k]);
                sum_dev += hsum(devs[k]);
            }
        }
        let (total_wdy_dev, total_wdy, total_dev) = group_sum3(
            sum_wdy_dev,
            sum_wdy,
            sum_dev,
            &mut shared,
            group_size,
            plane_size,
        );
        // The saved mean's distance to the row's mean, and sum(wdy * xhat) with it.
        let correction = total_dev * inv_d;
        let correction_v = Vector::<f32, N>::cast_from(correction);
        let c1 =
            Vector::<f32, N>::cast_from((total_wdy_dev - correction * total_wdy) * rstd * inv_d);
        let c2 = Vector::<f32, N>::cast_from(total_wdy * inv_d);

        // Pass 2: dx, and this cube's partial column sums, with the corrected xhat.
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
                    let xhat = ((xs[k] - mean_v) - correction_v) * rstd_v;
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

/// `out[k, j] = sum of dgamma_partial[p, j]` over the partial rows `p` of chunk `k`
/// (`k * partials_per_chunk ..`, `partials_per_chunk` of them, fewer in the last chunk), and the
/// same for `dbeta`, cast to `F`. Chunk `k` is `CUBE_POS_Y`: with one chunk the outputs are
/// `dgamma`/`dbeta` themselves; with several, the host launches it twice, first into an f32
/// scratch of one row per chunk (many cubes, so that the partials are read at the device's
/// bandwidth, not that of the few cubes a narrow `d` gives), then over that scratch.
///
/// `CubeDim (columns, splits)`: unit `(c, s)` sums the partials `s, s + splits, ...` of its
/// chunk for column vector `CUBE_POS_X * columns + c` (consecutive units read consecutive
/// columns; a few columns per cube and many splits, so that even a narrow `d` spreads over many
/// units), then the `splits` subtotals are added by a shared-memory tree (a fixed order:
/// deterministic).
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn reduce_partials<F: Float, N: Size>(
    dgamma_partial: &Array<Vector<f32, N>>,
    dbeta_partial: &Array<Vector<f32, N>>,
    dgamma: &mut Array<Vector<F, N>>,
    dbeta: &mut Array<Vector<F, N>>,
    num_partials: usize,
    partials_per_chunk: usize,
    d_vec: usize,
    #[comptime] columns: usize,
    #[comptime] splits: usize,
    #[define(F)] _dtype: StorageType,
) {
    let lane = UNIT_POS_X as usize;
    let split = UNIT_POS_Y as usize;
    let col = CUBE_POS_X as usize * columns + lane;
    let chunk = CUBE_POS_Y as usize;
    let first = chunk * partials_per_chunk;
    let end = num_partials.min(first + partials_per_chunk);
    let mut shared_gamma = SharedMemory::<Vector<f32, N>>::new(comptime!(columns * splits));
    let mut shared_beta = SharedMemory::<Vector<f32, N>>::new(comptime!(columns * splits));

    let mut sum_gamma = Vector::<f32, N>::from_int(0);
    let mut sum_beta = Vector::<f32, N>::from_int(0);
    if col < d_vec {
        // Four partials per step: several loads in flight per unit.
        let mut p = first + split;
        while p + 3 * splits < end {
            let g0 = dgamma_partial[p * d_vec + col];
            let g1 = dgamma_partial[(p + splits) * d_vec + col];
            let g2 = dgamma_partial[(p + 2 * splits) * d_vec + col];
            let g3 = dgamma_partial[(p + 3 * splits) * d_vec + col];
            let b0 = dbeta_partial[p * d_vec + col];
            let b1 = dbeta_partial[(p + splits) * d_vec + col];
            let b2 = dbeta_partial[(p + 2 * splits) * d_vec + col];
            let b3 = dbeta_partial[(p + 3 * splits) * d_vec + col];
            sum_gamma += (g0 + g1) + (g2 + g3);
            sum_beta += (b0 + b1) + (b2 + b3);
            p += 4 * splits;
        }
        while p < end {
            sum_gamma += dgamma_partial[p * d_vec + col];
            sum_beta += dbeta_partial[p * d_vec + col];
            p += splits;
        }
    }
    shared_gamma[split * columns + lane] = sum_gamma;
    shared_beta[split * columns + lane] = sum_beta;
    sync_cube();

    // Tree over the splits (a power of two, CUBE_DIM_Y == splits: a cube-uniform loop bound).
    let mut stride = (CUBE_DIM_Y / 2) as usize;
    while stride > 0 {
        if split < stride {
            let other_gamma = shared_gamma[(split + stride) * columns + lane];
            let other_beta = shared_beta[(split + stride) * columns + lane];
            shared_gamma[split * columns + lane] += other_gamma;
            shared_beta[split * columns + lane] += other_beta;
        }
        sync_cube();
        stride /= 2;
    }

    if split == 0 && col < d_vec {
        dgamma[chunk * d_vec + col] = Vector::cast_from(shared_gamma[lane]);
        dbeta[chunk * d_vec + col] = Vector::cast_from(shared_beta[lane]);
    }
}
