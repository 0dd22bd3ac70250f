//! The unit-per-row kernels: one unit owns a whole row, so no unit ever waits for another.
//!
//! Built for devices where a barrier is expensive and there are no plane operations: on Mesa's
//! lavapipe (Vulkan on the CPU) a workgroup runs as SIMD loops over its invocations, and every
//! `sync_cube` splits the shader into coroutines that are switched per SIMD batch. These kernels
//! have no shared memory and no barrier at all: the row's statistics are sums that one unit
//! forms alone, re-reading its row from cache. Three light passes over a row beat two passes
//! with a dozen barriers there; on a GPU they would leave most lanes idle, which is why the
//! default rule only picks them where plane operations are missing.
//!
//! Accuracy is that of the other variants: the statistics are taken on deviations from a shift
//! (the mean of the row's first vector, then the first-pass mean), so rows with a large mean and
//! a small spread are exact, and the backward re-centres on the row's true mean instead of
//! trusting the rounded f32 `mean`.

use cubecl::prelude::*;

use crate::group_reduce::hsum;

/// Forward, one unit per row (`rows` units, cubes looping over the rows).
///
/// Pass 1: mean of `x - s0` (`s0` the mean of the row's first vector) gives `m0`, an f32 value
/// within rounding of the mean. Pass 2: the sum and the sum of squares of `x - m0`, exact
/// deviations with no common offset, give the correction and the variance. Pass 3: the output.
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn forward_unit<F: Float, N: Size>(
    x: &Array<Vector<F, N>>,
    gamma: &Array<Vector<F, N>>,
    beta: &Array<Vector<F, N>>,
    out: &mut Array<Vector<F, N>>,
    mean_out: &mut Array<f32>,
    rstd_out: &mut Array<f32>,
    rows: usize,
    d_vec: usize,
    epsilon: f32,
    #[comptime] has_beta: bool,
    #[define(F)] _dtype: StorageType,
) {
    let width = N::value();
    let d = (d_vec * width) as f32;
    let stride = CUBE_COUNT * (CUBE_DIM_X as usize);
    let mut row = ABSOLUTE_POS;
    while row < rows {
        let base = row * d_vec;

        let first = Vector::<f32, N>::cast_from(x[base]);
        let s0 = hsum(first) / (width as f32);
        let s0_v = Vector::<f32, N>::cast_from(s0);
        let mut sum = Vector::<f32, N>::from_int(0);
        for j in 0..d_vec {
            sum += Vector::<f32, N>::cast_from(x[base + j]) - s0_v;
        }
        let m0 = s0 + hsum(sum) / d;
        let m0_v = Vector::<f32, N>::cast_from(m0);

        let mut sum_dev = Vector::<f32, N>::from_int(0);
        let mut sum_sq = Vector::<f32, N>::from_int(0);
        for j in 0..d_vec {
            let dev = Vector::<f32, N>::cast_from(x[base + j]) - m0_v;
            sum_dev += dev;
            sum_sq += dev * dev;
        }
        let correction = hsum(sum_dev) / d;
        let var = f32::max(hsum(sum_sq) / d - correction * correction, 0.0);
        let rstd = (var + epsilon).inverse_sqrt();
        mean_out[row] = m0 + correction;
        rstd_out[row] = rstd;

        let correction_v = Vector::<f32, N>::cast_from(correction);
        let rstd_v = Vector::<f32, N>::cast_from(rstd);
        for j in 0..d_vec {
            let xhat = ((Vector::<f32, N>::cast_from(x[base + j]) - m0_v) - correction_v) * rstd_v;
            let mut y = xhat * Vector::<f32, N>::cast_from(gamma[j]);
            if comptime!(has_beta) {
                y += Vector::<f32, N>::cast_from(beta[j]);
            }
            out[base + j] = Vector::cast_from(y);
        }
        row += stride;
    }
}

/// Backward `dx`, one unit per row; also writes each row's exact centre (`mean + c`, where `c`
/// is the mean of `x - mean` in f32: the part of the true mean that the f32 `mean` rounded away)
/// for [`backward_unit_columns`].
///
/// With `g = dy * gamma`, `xhat = (x - centre) * rstd`:
/// `dx = rstd * (g - mean(g) - xhat * mean(g * xhat))`. Pass 1 forms `sum(x - mean)`, `sum(g)`
/// and `sum(g * (x - mean))`; `sum(g * xhat)` follows as `rstd * (sum(g * (x - mean)) - c *
/// sum(g))`. Pass 2 writes `dx`.
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn backward_unit_rows<F: Float, N: Size>(
    x: &Array<Vector<F, N>>,
    gamma: &Array<Vector<F, N>>,
    dy: &Array<Vector<F, N>>,
    mean: &Array<f32>,
    rstd: &Array<f32>,
    dx: &mut Array<Vector<F, N>>,
    centre_out: &mut Array<f32>,
    rows: usize,
    d_vec: usize,
    #[define(F)] _dtype: StorageType,
) {
    let d = (d_vec * N::value()) as f32;
    let stride = CUBE_COUNT * (CUBE_DIM_X as usize);
    let mut row = ABSOLUTE_POS;
    while row < rows {
        let base = row * d_vec;
        let mean_v = Vector::<f32, N>::cast_from(mean[row]);
        let r = rstd[row];

        let mut sum_dev = Vector::<f32, N>::from_int(0);
        let mut sum_g = Vector::<f32, N>::from_int(0);
        let mut sum_g_dev = Vector::<f32, N>::from_int(0);
        for j in 0..d_vec {
            let dev = Vector::<f32, N>::cast_from(x[base + j]) - mean_v;
            let g =
                Vector::<f32, N>::cast_from(dy[base + j]) * Vector::<f32, N>::cast_from(gamma[j]);
            sum_dev += dev;
            sum_g += g;
            sum_g_dev += g * dev;
        }
        let c = hsum(sum_dev) / d;
        let total_g = hsum(sum_g);
        let mean_g = total_g / d;
        let mean_g_xhat = r * (hsum(sum_g_dev) - c * total_g) / d;
        centre_out[row] = c;

        let c_v = Vector::<f32, N>::cast_from(c);
        let r_v = Vector::<f32, N>::cast_from(r);
        let mean_g_v = Vector::<f32, N>::cast_from(mean_g);
        let mean_g_xhat_v = Vector::<f32, N>::cast_from(mean_g_xhat);
        for j in 0..d_vec {
            let xhat = ((Vector::<f32, N>::cast_from(x[base + j]) - mean_v) - c_v) * r_v;
            let g =
                Vector::<f32, N>::cast_from(dy[base + j]) * Vector::<f32, N>::cast_from(gamma[j]);
            dx[base + j] = Vector::cast_from(r_v * (g - mean_g_v - xhat * mean_g_xhat_v));
        }
        row += stride;
    }
}

/// Backward `dgamma`/`dbeta`, one unit per column vector (`ceil(d_vec / CUBE_DIM_X)` cubes):
/// unit `j` sums `dy * xhat` and `dy` of column `j` over every row and writes the result.
/// Consecutive units read consecutive columns, so every row is read contiguously, and no
/// partial sums need a second reduction (with its barriers). The parallelism is the number of
/// column vectors: plenty for a CPU adapter's few cores, which is what this variant is for.
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn backward_unit_columns<F: Float, N: Size>(
    x: &Array<Vector<F, N>>,
    dy: &Array<Vector<F, N>>,
    mean: &Array<f32>,
    rstd: &Array<f32>,
    centre: &Array<f32>,
    dgamma: &mut Array<Vector<F, N>>,
    dbeta: &mut Array<Vector<F, N>>,
    rows: usize,
    d_vec: usize,
    #[define(F)] _dtype: StorageType,
) {
    let col = ABSOLUTE_POS;
    if col < d_vec {
        let mut acc_gamma = Vector::<f32, N>::from_int(0);
        let mut acc_beta = Vector::<f32, N>::from_int(0);
        for row in 0..rows {
            let mean_v = Vector::<f32, N>::cast_from(mean[row]);
            let c_v = Vector::<f32, N>::cast_from(centre[row]);
            let r_v = Vector::<f32, N>::cast_from(rstd[row]);
            let xhat = ((Vector::<f32, N>::cast_from(x[row * d_vec + col]) - mean_v) - c_v) * r_v;
            let g = Vector::<f32, N>::cast_from(dy[row * d_vec + col]);
            acc_gamma += g * xhat;
            acc_beta += g;
        }
        dgamma[col] = Vector::cast_from(acc_gamma);
        dbeta[col] = Vector::cast_from(acc_beta);
    }
}
