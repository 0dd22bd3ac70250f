//! Forward kernels: `out = (x - mean) * rstd * gamma + beta`, plus per-row `mean` and `rstd`.
//!
//! All buffers are contiguous; `x`, `out`, `gamma`, `beta` are read as vectors of `N` elements
//! (`N` divides `d`), so a row is `d_vec = d / N` vectors. Statistics are accumulated in f32
//! whatever `F` is.

use cubecl::prelude::*;

use crate::group_reduce::{group_sum2, hsum, shared_len};

/// Row held in registers: a group of `group_size` units per row, `rows_per_cube` groups per
/// cube (`CubeDim (group_size, rows_per_cube)`), each unit holding `vectors_per_unit` vectors of
/// its row. Serves both the plane-per-row variant (`group_size` = plane size) and the
/// cube-per-row variant (`rows_per_cube` = 1, `group_size` up to 256).
///
/// Two passes over the registers: an approximate mean first (rounded by [`snap_shift`], from
/// the same reduction as the row's mean absolute value), then the sum and the sum of squares of
/// the deviations from it (the corrected two-pass algorithm), so rows with a large mean and a
/// small spread (mean 1e4, std 1e-2) lose nothing: deviations are formed exactly, and the output
/// is computed as `((x - shift) - correction) * rstd`, never through an f32 mean that cannot
/// resolve the spread. Two reductions of two values per row. Unit `u` of a group holds the
/// vectors `u, u + group_size, u + 2 * group_size, ...` of its row: consecutive units read
/// consecutive vectors, and all of a unit's loads are issued before the first reduction.
///
/// Cubes loop over tiles of `rows_per_cube` rows (tile `CUBE_POS`, then `+ CUBE_COUNT`), so any
/// number of rows fits in a bounded grid. Rows past the end of the last tile are computed on
/// zeros and never stored; the loop bound is the same for every unit of a cube, which keeps the
/// barriers of [`group_sum2`] in uniform control flow.
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
    let mut shared = SharedMemory::<f32>::new(comptime!(shared_len(
        rows_per_cube,
        group_size,
        plane_size,
        2
    )));

    let num_tiles = rows.div_ceil(rows_per_cube);
    let mut tile = CUBE_POS;
    while tile < num_tiles {
        let row = tile * rows_per_cube + group;
        let active = row < rows;
        let base = row * d_vec;

        // Issue every load of the row first: several vectors per unit in flight.
        let mut values = Array::<Vector<f32, N>>::new(vectors_per_unit);
        let mut sum = 0.0f32;
        let mut sum_abs = 0.0f32;
        #[unroll]
        for k in 0..vectors_per_unit {
            let col = k * group_size + lane;
            let mut value = Vector::<f32, N>::from_int(0);
            if active && col < d_vec {
                value = Vector::cast_from(x[base + col]);
            }
            values[k] = value;
            sum += hsum(value);
            sum_abs += hsum(Vector::abs(value));
        }
        // A first, approximate mean, snapped to a grid: the shift of the second pass.
        let (total, total_abs) = group_sum2(sum, sum_abs, &mut shared, group_size, plane_size);
        let shift = snap_shift(total / d, total_abs / d);

        // Second pass over registers, around the shift: the deviations are small, so their sum
        // and sum of squares carry no cancellation; the exact mean is `shift + correction`.
        let shift_v = Vector::<f32, N>::cast_from(shift);
        let mut sum_dev = 0.0f32;
        let mut sum_sq = 0.0f32;
        #[unroll]
        for k in 0..vectors_per_unit {
            let col = k * group_size + lane;
            if col < d_vec {
                let dev = values[k] - shift_v;
                sum_dev += hsum(dev);
                sum_sq += hsum(dev * dev);
            }
        }
        let (total_dev, total_sq) =
            group_sum2(sum_dev, sum_sq, &mut shared, group_size, plane_size);
        let correction = total_dev / d;
        let var = f32::max(total_sq / d - correction * correction, 0.0);
        let rstd = (var + epsilon).inverse_sqrt();

        if active {
            if lane == 0 {
                mean_out[row] = shift + correction;
                rstd_out[row] = rstd;
            }
            let correction_v = Vector::<f32, N>::cast_from(correction);
            let rstd_v = Vector::<f32, N>::cast_from(rstd);
            #[unroll]
            for k in 0..vectors_per_unit {
                let col = k * group_size + lane;
                if col < d_vec {
                    let xhat = ((values[k] - shift_v) - correction_v) * rstd_v;
                    let mut y = xhat * Vector::cast_from(gamma[col]);
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
/// Two reads of `x` per row: a statistics pass and an output pass. Everything is computed on
/// `y = x - s`, with the shift `s` the mean of the row's first span (the first chunk of every
/// unit, `group_size * chunk` vectors), reduced over the cube while that chunk is in registers:
/// no extra read. For rows with a large mean and a small spread, `x - s` is exact, and neither
/// the mean nor the output goes through an f32 value that cannot resolve the spread; and since
/// `s` is close to the row's mean, the deviations carry no common offset either, so their sums
/// are as accurate as a plain sum of centred data (a shift far from the mean, e.g. one element
/// of the row, would put an error of order `eps * |s - mean|` into the mean).
///
/// Per unit, a count `n_u`, the plain sum `S_u` of `y` and a sum of squared deviations `m2_u`
/// are kept; each chunk's own `m2` is computed exactly from registers around the chunk's mean
/// and merged with Chan's parallel update (from the sums, no running mean), so no sum of
/// squares is ever formed around a distant point. The units are then combined in one
/// reduction of two values, `S = sum(S_u)` and `T = sum(m2_u + S_u^2 / n_u)`, and
/// `M2 = T - S^2 / d` (the parallel-variance decomposition expanded around the shift). The
/// subtraction cancels only as much as `mean(y)^2` exceeds the variance: with the shift the
/// mean of the first span, `mean(y)^2 <= var * (1 - f) / f` for a first span of a fraction `f`
/// of the row (about `var / 4096` for random data), so at most ~`eps / f` relative (1e-6 at
/// d = 65536, and only for a row whose first span is far from the rest).
///
/// Two reductions per row in all: the shift, then the statistics.
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
    let mut shared = SharedMemory::<f32>::new(comptime!(shared_len(1, group_size, plane_size, 2)));
    let span = group_size * chunk;
    let num_chunks = d_vec.div_ceil(span);
    // Elements of the first span: the sample the shift is the mean of.
    let mut first_len = d_vec;
    if span < d_vec {
        first_len = span;
    }
    let first_count = (first_len * width) as f32;

    let mut row = CUBE_POS;
    while row < rows {
        let base = row * d_vec;

        // Statistics pass.
        let mut shift = 0.0f32;
        let mut shift_v = Vector::<f32, N>::from_int(0);
        let mut count = 0.0f32;
        let mut sum = 0.0f32;
        let mut unit_m2 = 0.0f32;
        for c in 0..num_chunks {
            let mut values = Array::<Vector<f32, N>>::new(chunk);
            let mut valid = 0u32;
            #[unroll]
            for k in 0..chunk {
                let col = (c * chunk + k) * group_size + lane;
                let mut value = Vector::<f32, N>::from_int(0);
                if col < d_vec {
                    value = Vector::<f32, N>::cast_from(x[base + col]);
                    valid += 1;
                }
                values[k] = value;
            }
            // `c` is the same for every unit: the barriers of the sum stay in uniform control
            // flow.
            if c == 0 {
                let mut first_sum = 0.0f32;
                let mut first_abs = 0.0f32;
                #[unroll]
                for k in 0..chunk {
                    first_sum += hsum(values[k]);
                    first_abs += hsum(Vector::abs(values[k]));
                }
                let (total, total_abs) =
                    group_sum2(first_sum, first_abs, &mut shared, group_size, plane_size);
                shift = snap_shift(total / first_count, total_abs / first_count);
                shift_v = Vector::<f32, N>::cast_from(shift);
            }
            if valid > 0 {
                let mut chunk_sum = 0.0f32;
                #[unroll]
                for k in 0..chunk {
                    let col = (c * chunk + k) * group_size + lane;
                    if col < d_vec {
                        let y = values[k] - shift_v;
                        values[k] = y;
                        chunk_sum += hsum(y);
                    }
                }
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
                // Chan's update, from the sums (no running mean to drift).
                let new_count = count + chunk_count;
                if count > 0.0 {
                    let delta = chunk_mean - sum / count;
                    unit_m2 += delta * delta * (count * chunk_count / new_count);
                }
                unit_m2 += chunk_m2;
                count = new_count;
                sum += chunk_sum;
            }
        }
        // The mean of y and M2 in one reduction: M2 = sum_u (m2_u + S_u^2 / n_u) - S^2 / d
        // (a unit that saw no element has count 0 and sum 0: it adds 0).
        let (total, total_m2) = group_sum2(
            sum,
            unit_m2 + sum * (sum / f32::max(count, 1.0)),
            &mut shared,
            group_size,
            plane_size,
        );
        let correction = total / d;
        let m2 = f32::max(total_m2 - total * correction, 0.0);
        let rstd = (m2 / d + epsilon).inverse_sqrt();

        if lane == 0 {
            mean_out[row] = shift + correction;
            rstd_out[row] = rstd;
        }

        // Output pass.
        let correction_v = Vector::<f32, N>::cast_from(correction);
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
                    let xhat = ((values[k] - shift_v) - correction_v) * rstd_v;
                    let mut y = xhat * Vector::cast_from(gamma[col]);
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

/// The shift of a row: its approximate mean `mean`, rounded towards zero to a multiple of
/// `q = 2 ulp(mav)`, with `mav` the row's (approximate) mean absolute value.
///
/// Why: `x - shift` rounds, for every `x` of a binade above the shift's, by the bits of `shift`
/// below `ulp(x)`, always in the same direction: a bias of up to half an ulp of `x` per element
/// that does not average out. For centred data (mean 0.01, std 1.7) that alone puts an error of
/// ~2e-8 into the mean, 2e-6 of it. On the grid of `q`, `x - shift` is exact for every `x` with
/// `|x| < 2 mav` (when it is representable: for `|x|` at least about `|shift|`), a tie rounded
/// to even (no bias) for `|x| < 4 mav`, and only the rare `|x| >= 4 mav` round with a bias.
///
/// The rounding moves the shift by less than `q`, about `2.4e-7 mav`: for a row with mean 1e4
/// and std 1e-2, 0.2 std, close enough that the deviations from it carry no cancellation.
///
/// A row of tiny values (`mav < 2^-104`) keeps the unrounded mean; NaN and infinity pass
/// through (the row's results are then NaN, as they would be anyway).
#[cube]
fn snap_shift(mean: f32, mav: f32) -> f32 {
    // Biased exponent `e` of mav: ulp(mav) = 2^(e - 127 - 23), q = 2^(e - 149).
    let exponent = (u32::reinterpret(mav) >> 23u32) & 0xffu32;
    let mut shift = mean;
    if exponent > 22u32 {
        // q and 1 / q built from their bits: exact powers of two, so the scaling, the
        // truncation and the scaling back are exact.
        let q = f32::reinterpret((exponent - 22u32) << 23u32);
        let inv_q = f32::reinterpret((276u32 - exponent) << 23u32);
        shift = f32::trunc(mean * inv_q) * q;
    }
    shift
}
