//! Forward kernels: `out = (x - mean) * rstd * gamma + beta`, plus per-row `mean` and `rstd`.
//!
//! All buffers are contiguous; `x`, `out`, `gamma`, `beta` are read as vectors of `N` elements
//! (`N` divides `d`), so a row is `d_vec = d / N` vectors. Statistics are accumulated in f32
//! whatever `F` is.

use cubecl::prelude::*;

use super::reduce::{hsum, group_sum, slots_per_group};

/// Row held in registers: a group of `group_size` units per row, `rows_per_cube` groups per
/// cube (`CubeDim (group_size, rows_per_cube)`), each unit holding `vectors_per_unit` vectors of
/// its row. Serves both the plane-per-row variant (`group_size` = plane size) and the
/// cube-per-row variant (`rows_per_cube` = 1, `group_size` up to 256).
///
/// Two-pass variance over the registers: the mean first, then the sum of squared deviations,
/// so rows with a large mean and a small spread do not cancel. Unit `u` of a group holds the
/// vectors `u, u + group_size, u + 2 * group_size, ...` of its row: consecutive units read
/// consecutive vectors, and all of a unit's loads are issued before the first reduction.
///
/// Cubes loop over tiles of `rows_per_cube` rows (tile `CUBE_POS`, then `+ CUBE_COUNT`), so any
/// number of rows fits in a bounded grid. Rows past the end of the last tile are computed on
/// zeros and never stored; the loop bound is the same for every unit of a cube, which keeps the
/// barriers of [`group_sum`] in uniform control flow.
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn forward_registers<F: Float, N: Size>(
    x: &Array<Vector<F, N>>,
    gamma: &Array<Vector<F, N>>,
    beta: &Array<Vector<F, N>>,
    out: &mut Array<Vector<F, N>>,
    mean_out: &mut Array<f32>,
    rstd_out: &mut Array<f32>,
    rows: usize,
    d_vec: usize,
    epsilon: f32,
    #[comptime] group_size: usize,
    #[comptime] rows_per_cube: usize,
    #[comptime] vectors_per_unit: usize,
    #[comptime] plane_size: usize,
    #[comptime] has_beta: bool,
    #[define(F)] _dtype: StorageType,
) {
    let lane = UNIT_POS_X as usize;
    let group = UNIT_POS_Y as usize;
    let d = (d_vec * N::value()) as f32;
    let slots = comptime!(slots_per_group(group_size, plane_size));
    let mut shared = SharedMemory::<f32>::new(comptime!(rows_per_cube * slots));

    let num_tiles = rows.div_ceil(rows_per_cube);
    let mut tile = CUBE_POS;
    while tile < num_tiles {
        let row = tile * rows_per_cube + group;
        let active = row < rows;
        let base = row * d_vec;

        // Issue every load of the row first: several vectors per unit in flight.
        let mut values = Array::<Vector<f32, N>>::new(vectors_per_unit);
        let mut sum = 0.0f32;
        #[unroll]
        for k in 0..vectors_per_unit {
            let col = k * group_size + lane;
            let mut value = Vector::<f32, N>::from_int(0);
            if active && col < d_vec {
                value = Vector::cast_from(x[base + col]);
            }
            values[k] = value;
            sum += hsum(value);
        }
        let mean = group_sum(sum, &mut shared, group_size, plane_size) / d;

        let mean_v = Vector::<f32, N>::cast_from(mean);
        let mut squares = 0.0f32;
        #[unroll]
        for k in 0..vectors_per_unit {
            let col = k * group_size + lane;
            if col < d_vec {
                let dev = values[k] - mean_v;
                squares += hsum(dev * dev);
            }
        }
        let var = group_sum(squares, &mut shared, group_size, plane_size) / d;
        let rstd = (var + epsilon).inverse_sqrt();

        if active {
            if lane == 0 {
                mean_out[row] = mean;
                rstd_out[row] = rstd;
            }
            let rstd_v = Vector::<f32, N>::cast_from(rstd);
            #[unroll]
            for k in 0..vectors_per_unit {
                let col = k * group_size + lane;
                if col < d_vec {
                    let mut y = (values[k] - mean_v) * rstd_v * Vector::cast_from(gamma[col]);
                    if comptime!(has_beta) {
                        y += Vector::cast_from(beta[col]);
                    }
                    out[base + col] = Vector::cast_from(y);
                }
            }
        }
        tile += CUBE_COUNT;
    }
}

/// Row too long for registers: one cube of `group_size` units per row, looping over the row in
/// chunks of `chunk` vectors per unit (`CubeDim (group_size, 1)`), any `d`.
///
/// Two reads of `x` per row: a statistics pass and an output pass. The statistics pass keeps, per
/// unit, a count, a mean and a sum of squared deviations (`m2`); each chunk's own mean and `m2` are
/// computed exactly from registers and merged with Chan's parallel update, so no sum of squares is
/// ever formed around zero. The units are then combined with two group sums: the mean from the
/// plain sums, and `M2 = sum(m2_u + n_u * (mean_u - mean)^2)`, the exact parallel-variance
/// decomposition, which does not cancel either.
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn forward_looped<F: Float, N: Size>(
    x: &Array<Vector<F, N>>,
    gamma: &Array<Vector<F, N>>,
    beta: &Array<Vector<F, N>>,
    out: &mut Array<Vector<F, N>>,
    mean_out: &mut Array<f32>,
    rstd_out: &mut Array<f32>,
    rows: usize,
    d_vec: usize,
    epsilon: f32,
    #[comptime] group_size: usize,
    #[comptime] chunk: usize,
    #[comptime] plane_size: usize,
    #[comptime] has_beta: bool,
    #[define(F)] _dtype: StorageType,
) {
    let lane = UNIT_POS_X as usize;
    let width = N::value();
    let d = (d_vec * width) as f32;
    let slots = comptime!(slots_per_group(group_size, plane_size));
    let mut shared = SharedMemory::<f32>::new(slots);
    let span = group_size * chunk;
    let num_chunks = d_vec.div_ceil(span);

    let mut row = CUBE_POS;
    while row < rows {
        let base = row * d_vec;

        // Statistics pass.
        let mut count = 0.0f32;
        let mut unit_mean = 0.0f32;
        let mut unit_m2 = 0.0f32;
        let mut sum = 0.0f32;
        for c in 0..num_chunks {
            let mut values = Array::<Vector<f32, N>>::new(chunk);
            let mut valid = 0u32;
            let mut chunk_sum = 0.0f32;
            #[unroll]
            for k in 0..chunk {
                let col = (c * chunk + k) * group_size + lane;
                let mut value = Vector::<f32, N>::from_int(0);
                if col < d_vec {
                    value = Vector::cast_from(x[base + col]);
                    valid += 1;
                }
                values[k] = value;
                chunk_sum += hsum(value);
            }
            if valid > 0 {
                let chunk_count = (valid * width as u32) as f32;
                let chunk_mean = chunk_sum / chunk_count;
                let chunk_mean_v = Vector::<f32, N>::cast_from(chunk_mean);
                let mut chunk_m2 = 0.0f32;
                #[unroll]
                for k in 0..chunk {
                    let col = (c * chunk + k) * group_size + lane;
                    if col < d_vec {
                        let dev = values[k] - chunk_mean_v;
                        chunk_m2 += hsum(dev * dev);
                    }
                }
                let new_count = count + chunk_count;
                let delta = chunk_mean - unit_mean;
                unit_mean += delta * (chunk_count / new_count);
                unit_m2 += chunk_m2 + delta * delta * (count * chunk_count / new_count);
                count = new_count;
                sum += chunk_sum;
            }
        }
        let mean = group_sum(sum, &mut shared, group_size, plane_size) / d;
        let shift = unit_mean - mean;
        // Units that saw no element have count 0 and contribute nothing.
        let m2 = group_sum(
            unit_m2 + count * shift * shift,
            &mut shared,
            group_size,
            plane_size,
        );
        let rstd = (m2 / d + epsilon).inverse_sqrt();

        if lane == 0 {
            mean_out[row] = mean;
            rstd_out[row] = rstd;
        }

        // Output pass.
        let mean_v = Vector::<f32, N>::cast_from(mean);
        let rstd_v = Vector::<f32, N>::cast_from(rstd);
        for c in 0..num_chunks {
            let mut values = Array::<Vector<f32, N>>::new(chunk);
            #[unroll]
            for k in 0..chunk {
                let col = (c * chunk + k) * group_size + lane;
                if col < d_vec {
                    values[k] = Vector::cast_from(x[base + col]);
                }
            }
            #[unroll]
            for k in 0..chunk {
                let col = (c * chunk + k) * group_size + lane;
                if col < d_vec {
                    let mut y = (values[k] - mean_v) * rstd_v * Vector::cast_from(gamma[col]);
                    if comptime!(has_beta) {
                        y += Vector::cast_from(beta[col]);
                    }
                    out[base + col] = Vector::cast_from(y);
                }
            }
        }
        row += CUBE_COUNT;
    }
}
