//! Sums across the units that share one row.
//!
//! A *group* is the set of units of a cube with the same `UNIT_POS_Y`: `group_size` units along
//! x (`CUBE_DIM_X == group_size`). Every unit of the group gets the same total back, so that the
//! whole group can go on with the row's statistics without another broadcast.
//!
//! Two implementations, picked at compile time by `plane_size`:
//! - `plane_size > 0`: plane (warp/subgroup) sums. The host only passes a plane size when the
//!   device advertises `Plane::Ops` with a fixed plane size that divides `group_size`, so every
//!   plane lies inside one group. Groups larger than a plane combine the per-plane sums through a
//!   few shared-memory slots.
//! - `plane_size == 0`: a shared-memory tree, for devices without plane operations (Mesa's
//!   lavapipe, our CI device). Each group owns its own slots, so a NaN in one row can never reach
//!   another row's statistics.
//!
//! Every function here contains `sync_cube`, so it must be reached by every unit of the cube
//! (cube-uniform control flow); callers mask inactive rows instead of branching around it.

use cubecl::prelude::*;

/// Shared-memory slots needed per group by [`group_sum2`].
pub(crate) fn slots_per_group(group_size: usize, plane_size: usize) -> usize {
    if plane_size == 0 {
        group_size
    } else {
        (group_size / plane_size).max(1)
    }
}

/// Sums two values over the group, returning `(sum(a), sum(b))` to every unit of the group.
///
/// Reducing two values in one call halves the barriers of the shared-memory path (the forward
/// kernels reduce one value at a time because the second depends on the first; the backward
/// kernels need two independent sums per row).
///
/// `shared_a` and `shared_b` must have `rows_per_cube * slots_per_group` slots.
#[cube]
pub(crate) fn group_sum2(
    a: f32,
    b: f32,
    shared_a: &mut SharedMemory<f32>,
    shared_b: &mut SharedMemory<f32>,
    #[comptime] group_size: usize,
    #[comptime] plane_size: usize,
) -> (f32, f32) {
    if comptime!(plane_size == 0) {
        (
            tree_sum(a, shared_a, group_size, false),
            tree_sum(b, shared_b, group_size, true),
        )
    } else {
        (
            plane_group_sum(a, shared_a, group_size, plane_size, false),
            plane_group_sum(b, shared_b, group_size, plane_size, true),
        )
    }
}

/// Sums one value over the group, returning the total to every unit of the group.
///
/// `shared` must have `rows_per_cube * slots_per_group` slots.
#[cube]
pub(crate) fn group_sum(
    value: f32,
    shared: &mut SharedMemory<f32>,
    #[comptime] group_size: usize,
    #[comptime] plane_size: usize,
) -> f32 {
    if comptime!(plane_size == 0) {
        tree_sum(value, shared, group_size, true)
    } else {
        plane_group_sum(value, shared, group_size, plane_size, true)
    }
}

/// Shared-memory tree over the group's `group_size` slots (a power of two).
///
/// `release`: end with a barrier so that the slots may be overwritten by the next call. Two
/// back-to-back calls on different buffers only need it on the second one.
#[cube]
fn tree_sum(
    value: f32,
    shared: &mut SharedMemory<f32>,
    #[comptime] group_size: usize,
    #[comptime] release: bool,
) -> f32 {
    let lane = UNIT_POS_X as usize;
    let base = UNIT_POS_Y as usize * group_size;
    shared[base + lane] = value;
    sync_cube();
    // CUBE_DIM_X == group_size; a runtime, cube-uniform loop bound keeps every barrier in
    // uniform control flow.
    let mut stride = (CUBE_DIM_X / 2) as usize;
    while stride > 0 {
        if lane < stride {
            let other = shared[base + lane + stride];
            shared[base + lane] += other;
        }
        sync_cube();
        stride /= 2;
    }
    let total = shared[base];
    if comptime!(release) {
        sync_cube();
    }
    total
}

/// Plane sum, then, for groups wider than a plane, one shared slot per plane.
#[cube]
fn plane_group_sum(
    value: f32,
    shared: &mut SharedMemory<f32>,
    #[comptime] group_size: usize,
    #[comptime] plane_size: usize,
    #[comptime] release: bool,
) -> f32 {
    let plane_total = plane_sum(value);
    if comptime!(group_size > plane_size) {
        let lane = UNIT_POS_X as usize;
        let planes = comptime!(group_size / plane_size);
        let base = UNIT_POS_Y as usize * planes;
        if lane % plane_size == 0 {
            shared[base + lane / plane_size] = plane_total;
        }
        sync_cube();
        let mut total = 0.0f32;
        #[unroll]
        for p in 0..planes {
            total += shared[base + p];
        }
        if comptime!(release) {
            sync_cube();
        }
        total
    } else {
        plane_total
    }
}

/// Sum of the lanes of a vector.
#[cube]
pub(crate) fn hsum<N: Size>(value: Vector<f32, N>) -> f32 {
    f32::cast_from(value.vector_sum())
}
