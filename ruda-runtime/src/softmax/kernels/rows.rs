//! Row kernels: softmax over the last dimension of a contiguous tensor, a group of units per
//! row.
//!
//! All buffers are contiguous and read as vectors of `N` elements (`N` divides `d`), so a row is
//! `d_vec = d / N` vectors; arithmetic is f32 whatever `F` is. A group is `group_size` units
//! along x (`CUBE_DIM_X`), `rows_per_cube` groups per cube along y; cubes loop over tiles of
//! rows (tile `CUBE_POS`, then `+ CUBE_COUNT`), a bound that is the same for every unit of a
//! cube, which keeps the barriers of the group reductions in uniform control flow.
//!
//! What must hold for every variant (the f64 checks test it):
//! - the exponentials are shifted by the row's maximum, so nothing overflows;
//! - elements that are `-inf` get exactly 0 (log-softmax: `-inf`); a row that is `-inf`
//!   everywhere has no distribution and comes out NaN, as in PyTorch and in Burn's composed
//!   softmax (the maximum starts from [`LOWEST`], not `-inf`, so `exp(-inf - LOWEST) = 0` makes
//!   the sum 0 and the quotient NaN, with no `inf - inf` needed);
//! - a NaN anywhere in a row makes the whole row NaN (it reaches the row's sum) and never
//!   another row: every group reduces over its own shared-memory slots.
//!
//! `log` (comptime) selects log-softmax: `out = (x - max) - ln(sum)`; backward
//! `dx = dy - exp(y) * sum(dy)`. Softmax: `out = exp(x - max) / sum`; backward
//! `dx = y * (dy - sum(dy * y))`.

use cubecl::prelude::*;

use crate::group_reduce::{group_max, group_sum, hmax, hsum, shared_len};

/// The lowest finite f32: the maximum's starting value and the value of padding lanes. Finite
/// so that WGSL can hold it as a constant and `x - LOWEST` is never `inf - inf`.
pub(crate) const LOWEST: f32 = -3.402_823_5e38;

/// Forward, row in registers: each unit holds `vectors_per_unit` vectors of its row (unit `u`
/// of a group holds vectors `u, u + group_size, ...`), so `x` is read once. The maximum is one
/// group reduction, the sum of exponentials (kept in registers) another.
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn softmax_forward_registers<F: Float, N: Size>(
    x: &Array<Vector<F, N>>,
    out: &mut Array<Vector<F, N>>,
    rows: usize,
    d_vec: usize,
    #[comptime] group_size: usize,
    #[comptime] rows_per_cube: usize,
    #[comptime] vectors_per_unit: usize,
    #[comptime] plane_size: usize,
    #[comptime] log: bool,
    #[define(F)] _dtype: StorageType,
) {
    let lane = UNIT_POS_X as usize;
    let group = UNIT_POS_Y as usize;
    let mut shared = SharedMemory::<f32>::new(comptime!(shared_len(
        rows_per_cube,
        group_size,
        plane_size,
        1
    )));
    let lowest = Vector::<f32, N>::cast_from(f32::new(LOWEST));

    let num_tiles = rows.div_ceil(rows_per_cube);
    let mut tile = CUBE_POS;
    while tile < num_tiles {
        let row = tile * rows_per_cube + group;
        let active = row < rows;
        let base = row * d_vec;

        // Every load first: several vectors per unit in flight.
        let mut values = Array::<Vector<f32, N>>::new(vectors_per_unit);
        let mut local_max = lowest;
        #[unroll]
        for k in 0..vectors_per_unit {
            let col = k * group_size + lane;
            let mut value = lowest;
            if active && col < d_vec {
                value = Vector::cast_from(x[base + col]);
            }
            values[k] = value;
            local_max = max(local_max, value);
        }
        let row_max = group_max(hmax(local_max), &mut shared, group_size, plane_size);
        let max_v = Vector::<f32, N>::cast_from(row_max);

        let mut sum = Vector::<f32, N>::from_int(0);
        #[unroll]
        for k in 0..vectors_per_unit {
            let col = k * group_size + lane;
            if col < d_vec {
                let e = Vector::exp(values[k] - max_v);
                sum += e;
                if comptime!(!log) {
                    values[k] = e;
                }
            }
        }
        let total = group_sum(hsum(sum), &mut shared, group_size, plane_size);

        if active {
            if comptime!(log) {
                let ln_sum = Vector::<f32, N>::cast_from(f32::ln(total));
                #[unroll]
                for k in 0..vectors_per_unit {
                    let col = k * group_size + lane;
                    if col < d_vec {
                        out[base + col] = Vector::cast_from((values[k] - max_v) - ln_sum);
                    }
                }
            } else {
                let inverse = Vector::<f32, N>::cast_from(1.0 / total);
                #[unroll]
                for k in 0..vectors_per_unit {
                    let col = k * group_size + lane;
                    if col < d_vec {
                        out[base + col] = Vector::cast_from(values[k] * inverse);
                    }
                }
            }
        }
        tile += CUBE_COUNT;
    }
}

/// Backward, row in registers: `y` (the forward's output) and `dy` are read once each, one
/// group reduction per row.
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn softmax_backward_registers<F: Float, N: Size>(
    y: &Array<Vector<F, N>>,
    dy: &Array<Vector<F, N>>,
    dx: &mut Array<Vector<F, N>>,
    rows: usize,
    d_vec: usize,
    #[comptime] group_size: usize,
    #[comptime] rows_per_cube: usize,
    #[comptime] vectors_per_unit: usize,
    #[comptime] plane_size: usize,
    #[comptime] log: bool,
    #[define(F)] _dtype: StorageType,
) {
    let lane = UNIT_POS_X as usize;
    let group = UNIT_POS_Y as usize;
    let mut shared = SharedMemory::<f32>::new(comptime!(shared_len(
        rows_per_cube,
        group_size,
        plane_size,
        1
    )));
    let zero = Vector::<f32, N>::from_int(0);

    let num_tiles = rows.div_ceil(rows_per_cube);
    let mut tile = CUBE_POS;
    while tile < num_tiles {
        let row = tile * rows_per_cube + group;
        let active = row < rows;
        let base = row * d_vec;

        let mut ys = Array::<Vector<f32, N>>::new(vectors_per_unit);
        let mut grads = Array::<Vector<f32, N>>::new(vectors_per_unit);
        let mut sum = zero;
        #[unroll]
        for k in 0..vectors_per_unit {
            let col = k * group_size + lane;
            let mut y_k = zero;
            let mut g_k = zero;
            if active && col < d_vec {
                y_k = Vector::cast_from(y[base + col]);
                g_k = Vector::cast_from(dy[base + col]);
            }
            ys[k] = y_k;
            grads[k] = g_k;
            if comptime!(log) {
                sum += g_k;
            } else {
                sum += g_k * y_k;
            }
        }
        let total =
            Vector::<f32, N>::cast_from(group_sum(hsum(sum), &mut shared, group_size, plane_size));

        if active {
            #[unroll]
            for k in 0..vectors_per_unit {
                let col = k * group_size + lane;
                if col < d_vec {
                    if comptime!(log) {
                        dx[base + col] = Vector::cast_from(grads[k] - Vector::exp(ys[k]) * total);
                    } else {
                        dx[base + col] = Vector::cast_from(ys[k] * (grads[k] - total));
                    }
                }
            }
        }
        tile += CUBE_COUNT;
    }
}

/// Forward for rows too long for registers: one cube of `group_size` units per row (cubes loop
/// over rows), the row visited in chunks of `chunk` vectors per unit.
///
/// Pass 1 keeps, per unit, a running maximum `m` and the sum `s` of `exp(x - m)` (rescaled by
/// `exp(m_old - m_new)` when the maximum grows, the online softmax), then one group reduction
/// of the maxima and one of the rescaled sums. Pass 2 writes the output.
///
/// `staged_len > 0` (comptime, `d_vec`): pass 1 also copies the row into shared memory, and
/// pass 2 reads it from there, so `x` is read from memory once (the row must fit in the
/// device's shared memory: the plan checks it). Each unit reads back only the vectors it
/// staged itself, so staging needs no barrier. With `staged_len == 0` pass 2 reads `x` again,
/// last chunk first ([`reverse_chunk`]).
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn softmax_forward_looped<F: Float, N: Size>(
    x: &Array<Vector<F, N>>,
    out: &mut Array<Vector<F, N>>,
    rows: usize,
    d_vec: usize,
    #[comptime] group_size: usize,
    #[comptime] chunk: usize,
    #[comptime] staged_len: usize,
    #[comptime] plane_size: usize,
    #[comptime] log: bool,
    #[define(F)] _dtype: StorageType,
) {
    let lane = UNIT_POS_X as usize;
    let mut shared = SharedMemory::<f32>::new(comptime!(shared_len(1, group_size, plane_size, 1)));
    let mut staged = SharedMemory::<Vector<F, N>>::new(comptime!(staged_len.max(1)));
    let lowest = f32::new(LOWEST);
    let span = group_size * chunk;
    let num_chunks = d_vec.div_ceil(span);

    let mut row = CUBE_POS;
    while row < rows {
        let base = row * d_vec;

        let mut unit_max = lowest;
        let mut unit_sum = 0.0f32;
        for c in 0..num_chunks {
            let mut values = Array::<Vector<f32, N>>::new(chunk);
            let mut chunk_max = Vector::<f32, N>::cast_from(lowest);
            #[unroll]
            for k in 0..chunk {
                let col = (c * chunk + k) * group_size + lane;
                let mut value = Vector::<f32, N>::cast_from(lowest);
                if col < d_vec {
                    let raw = x[base + col];
                    if comptime!(staged_len > 0) {
                        staged[col] = raw;
                    }
                    value = Vector::cast_from(raw);
                }
                values[k] = value;
                chunk_max = max(chunk_max, value);
            }
            let new_max = f32::max(unit_max, hmax(chunk_max));
            let new_max_v = Vector::<f32, N>::cast_from(new_max);
            let mut sum = Vector::<f32, N>::from_int(0);
            #[unroll]
            for k in 0..chunk {
                let col = (c * chunk + k) * group_size + lane;
                if col < d_vec {
                    sum += Vector::exp(values[k] - new_max_v);
                }
            }
            unit_sum = unit_sum * f32::exp(unit_max - new_max) + hsum(sum);
            unit_max = new_max;
        }
        let row_max = group_max(unit_max, &mut shared, group_size, plane_size);
        let total = group_sum(
            unit_sum * f32::exp(unit_max - row_max),
            &mut shared,
            group_size,
            plane_size,
        );

        let max_v = Vector::<f32, N>::cast_from(row_max);
        let ln_sum = Vector::<f32, N>::cast_from(f32::ln(total));
        let inverse = Vector::<f32, N>::cast_from(1.0 / total);
        // Last chunk first: see `reverse_chunk`.
        for pass_2 in 0..num_chunks {
            let c = reverse_chunk(pass_2, num_chunks);
            #[unroll]
            for k in 0..chunk {
                let col = (c * chunk + k) * group_size + lane;
                if col < d_vec {
                    let value = if comptime!(staged_len > 0) {
                        Vector::<f32, N>::cast_from(staged[col])
                    } else {
                        Vector::<f32, N>::cast_from(x[base + col])
                    };
                    if comptime!(log) {
                        out[base + col] = Vector::cast_from((value - max_v) - ln_sum);
                    } else {
                        out[base + col] = Vector::cast_from(Vector::exp(value - max_v) * inverse);
                    }
                }
            }
        }
        row += CUBE_COUNT;
    }
}

/// The chunk that pass 2 of the looped kernels visits at its step `step`: the last chunk first.
/// Pass 1 read the row front to back, so where pass 2 reads the row from memory again (the
/// looped variant; softmax's backward re-reads `y`), its first reads are of what L2 is
/// likeliest to still hold. Every chunk is still visited once, so the result is the same. On
/// an H100 the order made no measurable difference to the staged backward at 8192 x 50304
/// (docs/perf/softmax.md); the kernels were measured and checked with it.
#[cube]
fn reverse_chunk(step: usize, num_chunks: usize) -> usize {
    num_chunks - 1 - step
}

/// Backward for rows too long for registers, as [`softmax_forward_looped`]: pass 1 sums `dy * y`
/// (log-softmax: `dy`), one group reduction, pass 2 writes `dx`.
///
/// `staged_len > 0`: pass 1 copies `dy` into shared memory and pass 2 reads it from there.
/// Log-softmax then reads `y` and `dy` once each (pass 1 needs only `dy`); softmax reads `y`
/// twice (pass 2 walks the row backwards: [`reverse_chunk`]).
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn softmax_backward_looped<F: Float, N: Size>(
    y: &Array<Vector<F, N>>,
    dy: &Array<Vector<F, N>>,
    dx: &mut Array<Vector<F, N>>,
    rows: usize,
    d_vec: usize,
    #[comptime] group_size: usize,
    #[comptime] chunk: usize,
    #[comptime] staged_len: usize,
    #[comptime] plane_size: usize,
    #[comptime] log: bool,
    #[define(F)] _dtype: StorageType,
) {
    let lane = UNIT_POS_X as usize;
    let mut shared = SharedMemory::<f32>::new(comptime!(shared_len(1, group_size, plane_size, 1)));
    let mut staged = SharedMemory::<Vector<F, N>>::new(comptime!(staged_len.max(1)));
    let span = group_size * chunk;
    let num_chunks = d_vec.div_ceil(span);

    let mut row = CUBE_POS;
    while row < rows {
        let base = row * d_vec;

        let mut sum = Vector::<f32, N>::from_int(0);
        for c in 0..num_chunks {
            #[unroll]
            for k in 0..chunk {
                let col = (c * chunk + k) * group_size + lane;
                if col < d_vec {
                    let raw = dy[base + col];
                    if comptime!(staged_len > 0) {
                        staged[col] = raw;
                    }
                    let g = Vector::<f32, N>::cast_from(raw);
                    if comptime!(log) {
                        sum += g;
                    } else {
                        sum += g * Vector::<f32, N>::cast_from(y[base + col]);
                    }
                }
            }
        }
        let total =
            Vector::<f32, N>::cast_from(group_sum(hsum(sum), &mut shared, group_size, plane_size));

        // Last chunk first: see `reverse_chunk`.
        for pass_2 in 0..num_chunks {
            let c = reverse_chunk(pass_2, num_chunks);
            #[unroll]
            for k in 0..chunk {
                let col = (c * chunk + k) * group_size + lane;
                if col < d_vec {
                    let g = if comptime!(staged_len > 0) {
                        Vector::<f32, N>::cast_from(staged[col])
                    } else {
                        Vector::<f32, N>::cast_from(dy[base + col])
                    };
                    let y_k = Vector::<f32, N>::cast_from(y[base + col]);
                    if comptime!(log) {
                        dx[base + col] = Vector::cast_from(g - Vector::exp(y_k) * total);
                    } else {
                        dx[base + col] = Vector::cast_from(y_k * (g - total));
                    }
                }
            }
        }
        row += CUBE_COUNT;
    }
}
