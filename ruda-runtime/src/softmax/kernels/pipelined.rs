//! Pipelined kernels ([`crate::softmax::Variant::CubePerRowPipelined`]): rows too long for
//! registers, each held in shared memory between the pass that reads it and the pass that
//! writes the result, so it is read from memory once, as in the staged kernels of
//! [`super::rows`], but with several rows a cube.
//!
//! A cube of `group_size` units works through its rows (`CUBE_POS`, then `+ CUBE_COUNT`) as a
//! pipeline: step `s` writes the result of the row loaded at step `s - 1` from shared memory
//! while it loads the next row into the same slots. Reads and writes so go out together on every
//! step, where a staged cube that reads its row, reduces, then writes it leaves the memory bus
//! idle in one direction at a time: such a row fills most of an SM's shared memory (a
//! vocabulary of 50304 f32 logits takes 201 KiB), so its cube is alone on its SM and nothing
//! else hides that. The host launches about as many cubes as fit on the device at once. On an
//! H100 this wins for f32 rows of a vocabulary in the forwards and log-softmax's backward, and
//! loses in bf16 (two staged cubes share an SM there) and in softmax's backward (below): the
//! tuner picks per key (docs/perf/softmax.md).
//!
//! What must hold:
//! - each unit reads back only the shared slots it wrote itself (`col` depends on the unit), so
//!   a slot is read for the row being written before the same unit overwrites it with the next
//!   row, and no barrier is needed between the two;
//! - whether a step writes or loads depends only on the cube, never on the unit, so the group
//!   reductions (which hold barriers) are reached by every unit of the cube;
//! - the numerics of [`super::rows`]: the maximum starts from [`LOWEST`], padding lanes never
//!   reach a sum, a NaN stays in its row (every row's statistics come from its own loads).

use cubecl::prelude::*;

use super::rows::LOWEST;
use crate::group_reduce::{group_max, group_sum, hmax, hsum, shared_len};

/// Rows of this cube: `CUBE_POS`, `CUBE_POS + CUBE_COUNT`, ... below `rows`.
#[cube]
fn rows_of_cube(rows: usize) -> usize {
    let mut count = 0usize;
    if CUBE_POS < rows {
        count = (rows - CUBE_POS).div_ceil(CUBE_COUNT);
    }
    count
}

/// Forward: a step writes `y` of the previous row from its staged `x` and stages the next row,
/// keeping per unit a running maximum `m` and the sum of `exp(x - m)` (rescaled when the maximum
/// grows: the online softmax); then one group reduction of the maxima and one of the sums give
/// the row's statistics for the next step's writes. Chunks of `chunk` vectors a unit: the
/// chunk's loads are issued before the previous row's stores, so they are in flight together.
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn softmax_forward_pipelined<F: Float, N: Size>(
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
    let mut staged = SharedMemory::<Vector<F, N>>::new(staged_len);
    let lowest = f32::new(LOWEST);
    let num_chunks = d_vec.div_ceil(group_size * chunk);
    let steps = rows_of_cube(rows) + 1;

    // The statistics of the row being written (set by the step that loaded it), kept as
    // scalars: vectors of them would hold `N` registers each for the whole loop.
    let mut row_max = lowest;
    let mut ln_total = 0.0f32;
    let mut inverse = 0.0f32;
    let mut load_base = CUBE_POS * d_vec;
    let mut write_base = 0usize;
    for step in 0..steps {
        let writing = step > 0;
        let loading = step + 1 < steps;
        let mut unit_max = lowest;
        let mut unit_sum = 0.0f32;
        for c in 0..num_chunks {
            let mut raws = Array::<Vector<F, N>>::new(chunk);
            if loading {
                #[unroll]
                for k in 0..chunk {
                    let col = (c * chunk + k) * group_size + lane;
                    if col < d_vec {
                        raws[k] = x[load_base + col];
                    }
                }
            }
            if writing {
                let max_v = Vector::<f32, N>::cast_from(row_max);
                #[unroll]
                for k in 0..chunk {
                    let col = (c * chunk + k) * group_size + lane;
                    if col < d_vec {
                        let value = Vector::<f32, N>::cast_from(staged[col]);
                        if comptime!(log) {
                            out[write_base + col] = Vector::cast_from(
                                (value - max_v) - Vector::<f32, N>::cast_from(ln_total),
                            );
                        } else {
                            out[write_base + col] = Vector::cast_from(
                                Vector::exp(value - max_v) * Vector::<f32, N>::cast_from(inverse),
                            );
                        }
                    }
                }
            }
            if loading {
                let mut chunk_max = Vector::<f32, N>::cast_from(lowest);
                #[unroll]
                for k in 0..chunk {
                    let col = (c * chunk + k) * group_size + lane;
                    if col < d_vec {
                        staged[col] = raws[k];
                        chunk_max = max(chunk_max, Vector::<f32, N>::cast_from(raws[k]));
                    }
                }
                let new_max = f32::max(unit_max, hmax(chunk_max));
                let new_max_v = Vector::<f32, N>::cast_from(new_max);
                let mut sum = Vector::<f32, N>::from_int(0);
                #[unroll]
                for k in 0..chunk {
                    let col = (c * chunk + k) * group_size + lane;
                    if col < d_vec {
                        sum += Vector::exp(Vector::<f32, N>::cast_from(raws[k]) - new_max_v);
                    }
                }
                unit_sum = unit_sum * f32::exp(unit_max - new_max) + hsum(sum);
                unit_max = new_max;
            }
        }
        if loading {
            row_max = group_max(unit_max, &mut shared, group_size, plane_size);
            let total = group_sum(
                unit_sum * f32::exp(unit_max - row_max),
                &mut shared,
                group_size,
                plane_size,
            );
            ln_total = f32::ln(total);
            inverse = 1.0 / total;
        }
        write_base = load_base;
        load_base += CUBE_COUNT * d_vec;
    }
}

/// Backward: a step writes `dx` of the previous row from its staged `dy` and its `y`, and
/// stages the next row's `dy` while summing `dy * y` (log-softmax: `dy`) over it; one group
/// reduction a row. Softmax reads `y` twice (its sum needs `y` too, and two rows do not fit in
/// shared memory), the second time a step after the first, when L2 may no longer hold it: the
/// staged kernel, which reads it again right after, can then be faster, and the tuner times
/// both.
#[cube(launch_unchecked, address_type = "dynamic")]
pub(crate) fn softmax_backward_pipelined<F: Float, N: Size>(
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
    let mut staged = SharedMemory::<Vector<F, N>>::new(staged_len);
    let num_chunks = d_vec.div_ceil(group_size * chunk);
    let steps = rows_of_cube(rows) + 1;

    // `sum(dy * y)` (log-softmax: `sum(dy)`) of the row being written, a scalar (as the
    // forward's statistics).
    let mut total = 0.0f32;
    let mut load_base = CUBE_POS * d_vec;
    let mut write_base = 0usize;
    for step in 0..steps {
        let writing = step > 0;
        let loading = step + 1 < steps;
        let mut sum = Vector::<f32, N>::from_int(0);
        for c in 0..num_chunks {
            // Every load of the chunk first: the next row's `dy` (and `y`), this row's `y`.
            let mut written_ys = Array::<Vector<F, N>>::new(chunk);
            let mut grads = Array::<Vector<F, N>>::new(chunk);
            let mut loaded_ys = Array::<Vector<F, N>>::new(chunk);
            #[unroll]
            for k in 0..chunk {
                let col = (c * chunk + k) * group_size + lane;
                if col < d_vec {
                    if loading {
                        grads[k] = dy[load_base + col];
                        if comptime!(!log) {
                            loaded_ys[k] = y[load_base + col];
                        }
                    }
                    if writing {
                        written_ys[k] = y[write_base + col];
                    }
                }
            }
            if writing {
                let total_v = Vector::<f32, N>::cast_from(total);
                #[unroll]
                for k in 0..chunk {
                    let col = (c * chunk + k) * group_size + lane;
                    if col < d_vec {
                        let g = Vector::<f32, N>::cast_from(staged[col]);
                        let y_k = Vector::<f32, N>::cast_from(written_ys[k]);
                        if comptime!(log) {
                            dx[write_base + col] =
                                Vector::cast_from(g - Vector::exp(y_k) * total_v);
                        } else {
                            dx[write_base + col] = Vector::cast_from(y_k * (g - total_v));
                        }
                    }
                }
            }
            if loading {
                #[unroll]
                for k in 0..chunk {
                    let col = (c * chunk + k) * group_size + lane;
                    if col < d_vec {
                        staged[col] = grads[k];
                        let g = Vector::<f32, N>::cast_from(grads[k]);
                        if comptime!(log) {
                            sum += g;
                        } else {
                            sum += g * Vector::<f32, N>::cast_from(loaded_ys[k]);
                        }
                    }
                }
            }
        }
        if loading {
            total = group_sum(hsum(sum), &mut shared, group_size, plane_size);
        }
        write_base = load_base;
        load_base += CUBE_COUNT * d_vec;
    }
}
