//! Sums and maxima across the units that share one row: the reductions of ruda's row kernels
//! (LayerNorm, softmax).
//!
//! A *group* is the set of units of a cube with the same `UNIT_POS_Y`: `group_size` units along
//! x (`CUBE_DIM_X == group_size`). Every unit of the group gets the same total back, so that the
//! whole group can go on with the row's statistics without another broadcast.
//!
//! Two or three values are reduced per call, all in the same steps: a call costs the barriers of
//! one sum, whatever the number of values. Two implementations, picked at compile time by
//! `plane_size`:
//! - `plane_size > 0`: plane (warp/subgroup) sums. The host only passes a plane size when the
//!   device advertises `Plane::Ops` with a fixed plane size that divides `group_size`, so every
//!   plane lies inside one group. Groups larger than a plane combine the per-plane sums through a
//!   few shared-memory slots (two barriers per call; none when a group is one plane).
//! - `plane_size == 0`: a shared-memory tree, for devices without plane operations (Mesa's
//!   lavapipe, our CI device): `log2(group_size) + 2` barriers per call. Each group owns its own
//!   slots, so a NaN in one row can never reach another row's statistics.
//!
//! The sums may contain `sync_cube`, so they must be reached by every unit of the cube
//! (cube-uniform control flow); callers mask inactive rows instead of branching around them.
//! Every call ends with a barrier once the slots have been read, so consecutive calls may use the
//! same shared memory.

use cubecl::{client::ComputeClient, features::Plane, prelude::*};

/// Most units a group may have (and so the largest plane size the kernels use).
pub(crate) const MAX_GROUP_UNITS: usize = 256;

/// Plane size usable by the kernels, 0 when the shared-memory path must be used: the device must
/// advertise plane operations with a fixed, power-of-two plane size of at most
/// [`MAX_GROUP_UNITS`].
pub(crate) fn usable_plane_size<R: cubecl::Runtime>(client: &ComputeClient<R>) -> usize {
    let props = client.properties();
    let hw = &props.hardware;
    if props.features.plane.contains(Plane::Ops)
        && hw.plane_size_min == hw.plane_size_max
        && hw.plane_size_max.is_power_of_two()
        && hw.plane_size_max as usize <= MAX_GROUP_UNITS
    {
        hw.plane_size_max as usize
    } else {
        0
    }
}

/// Shared-memory slots needed per group and per value reduced.
pub(crate) fn slots_per_group(group_size: usize, plane_size: usize) -> usize {
    match group_size.checked_div(plane_size) {
        // Shared-memory tree: one slot per unit.
        None => group_size,
        // Plane sums: one slot per plane.
        Some(planes) => planes.max(1),
    }
}

/// Length of the shared memory that a cube of `rows_per_cube` groups needs to reduce up to
/// `values` values per call.
pub(crate) fn shared_len(
    rows_per_cube: usize,
    group_size: usize,
    plane_size: usize,
    values: usize,
) -> usize {
    rows_per_cube * values * slots_per_group(group_size, plane_size)
}

/// Sums one value over the group, returning `sum(a)` to every unit of the group.
///
/// `shared` must have [`shared_len`]`(rows_per_cube, group_size, plane_size, 1)` slots or more.
#[cube]
pub(crate) fn group_sum(
    a: f32,
    shared: &mut SharedMemory<f32>,
    #[comptime] group_size: usize,
    #[comptime] plane_size: usize,
) -> f32 {
    let (total, _, _) = group_sums(a, 0.0, 0.0, shared, group_size, plane_size, 1usize);
    total
}

/// Sums two values over the group, returning `(sum(a), sum(b))` to every unit of the group.
///
/// `shared` must have [`shared_len`]`(rows_per_cube, group_size, plane_size, 2)` slots or more.
#[cube]
pub(crate) fn group_sum2(
    a: f32,
    b: f32,
    shared: &mut SharedMemory<f32>,
    #[comptime] group_size: usize,
    #[comptime] plane_size: usize,
) -> (f32, f32) {
    let (total_a, total_b, _) = group_sums(a, b, 0.0, shared, group_size, plane_size, 2usize);
    (total_a, total_b)
}

/// Sums three values over the group, returning `(sum(a), sum(b), sum(c))` to every unit of the
/// group.
///
/// `shared` must have [`shared_len`]`(rows_per_cube, group_size, plane_size, 3)` slots or more.
#[cube]
pub(crate) fn group_sum3(
    a: f32,
    b: f32,
    c: f32,
    shared: &mut SharedMemory<f32>,
    #[comptime] group_size: usize,
    #[comptime] plane_size: usize,
) -> (f32, f32, f32) {
    group_sums(a, b, c, shared, group_size, plane_size, 3usize)
}

/// The first `values` (2 or 3) of `(a, b, c)` summed over the group; the others come back
/// as 0.
///
/// Group `g` owns the slots `g * values * slots .. (g + 1) * values * slots`, value `i` the
/// `i`-th run of `slots` of them.
#[cube]
fn group_sums(
    a: f32,
    b: f32,
    c: f32,
    shared: &mut SharedMemory<f32>,
    #[comptime] group_size: usize,
    #[comptime] plane_size: usize,
    #[comptime] values: usize,
) -> (f32, f32, f32) {
    if comptime!(plane_size == 0) {
        tree_sums(a, b, c, shared, group_size, values)
    } else {
        plane_group_sums(a, b, c, shared, group_size, plane_size, values)
    }
}

/// Shared-memory tree over the group's `group_size` slots per value (a power of two).
#[cube]
fn tree_sums(
    a: f32,
    b: f32,
    c: f32,
    shared: &mut SharedMemory<f32>,
    #[comptime] group_size: usize,
    #[comptime] values: usize,
) -> (f32, f32, f32) {
    let lane = UNIT_POS_X as usize;
    let base = UNIT_POS_Y as usize * comptime!(values * group_size);
    let run_b = comptime!(group_size);
    let run_c = comptime!(2 * group_size);
    shared[base + lane] = a;
    if comptime!(values > 1) {
        shared[base + run_b + lane] = b;
    }
    if comptime!(values > 2) {
        shared[base + run_c + lane] = c;
    }
    sync_cube();
    // CUBE_DIM_X == group_size; a runtime, cube-uniform loop bound keeps every barrier in
    // uniform control flow.
    let mut stride = (CUBE_DIM_X / 2) as usize;
    while stride > 0 {
        if lane < stride {
            let i = base + lane;
            let other_a = shared[i + stride];
            shared[i] += other_a;
            if comptime!(values > 1) {
                let other_b = shared[i + run_b + stride];
                shared[i + run_b] += other_b;
            }
            if comptime!(values > 2) {
                let other_c = shared[i + run_c + stride];
                shared[i + run_c] += other_c;
            }
        }
        sync_cube();
        stride /= 2;
    }
    let total_a = shared[base];
    let mut total_b = 0.0f32;
    let mut total_c = 0.0f32;
    if comptime!(values > 1) {
        total_b = shared[base + run_b];
    }
    if comptime!(values > 2) {
        total_c = shared[base + run_c];
    }
    // Release the slots for the next call.
    sync_cube();
    (total_a, total_b, total_c)
}

/// Plane sums, then, for groups wider than a plane, one shared slot per plane and value.
#[cube]
fn plane_group_sums(
    a: f32,
    b: f32,
    c: f32,
    shared: &mut SharedMemory<f32>,
    #[comptime] group_size: usize,
    #[comptime] plane_size: usize,
    #[comptime] values: usize,
) -> (f32, f32, f32) {
    let mut total_a = plane_sum(a);
    let mut total_b = 0.0f32;
    let mut total_c = 0.0f32;
    if comptime!(values > 1) {
        total_b = plane_sum(b);
    }
    if comptime!(values > 2) {
        total_c = plane_sum(c);
    }
    if comptime!(group_size > plane_size) {
        let lane = UNIT_POS_X as usize;
        let planes = comptime!(group_size / plane_size);
        let base = UNIT_POS_Y as usize * comptime!(values * planes);
        let run_b = comptime!(planes);
        let run_c = comptime!(2 * planes);
        // Planes tile the x axis (group_size is a multiple of the plane size).
        if UNIT_POS_PLANE == 0 {
            let slot = base + lane / plane_size;
            shared[slot] = total_a;
            if comptime!(values > 1) {
                shared[slot + run_b] = total_b;
            }
            if comptime!(values > 2) {
                shared[slot + run_c] = total_c;
            }
        }
        sync_cube();
        total_a = 0.0;
        total_b = 0.0;
        total_c = 0.0;
        #[unroll]
        for p in 0..planes {
            total_a += shared[base + p];
            if comptime!(values > 1) {
                total_b += shared[base + run_b + p];
            }
            if comptime!(values > 2) {
                total_c += shared[base + run_c + p];
            }
        }
        // Release the slots for the next call.
        sync_cube();
    }
    (total_a, total_b, total_c)
}

/// Sum of the lanes of a vector.
#[cube]
pub(crate) fn hsum<N: Size>(value: Vector<f32, N>) -> f32 {
    f32::cast_from(value.vector_sum())
}

/// The maximum of `a` over the group, returned to every unit of the group. NaN is ignored as
/// `f32::max` ignores it (the callers carry a NaN through their sums instead).
///
/// `shared` must have [`shared_len`]`(rows_per_cube, group_size, plane_size, 1)` slots or more.
/// Same rules as the sums: cube-uniform control flow, a barrier before returning.
#[cube]
pub(crate) fn group_max(
    a: f32,
    shared: &mut SharedMemory<f32>,
    #[comptime] group_size: usize,
    #[comptime] plane_size: usize,
) -> f32 {
    if comptime!(plane_size == 0) {
        tree_max(a, shared, group_size)
    } else {
        plane_group_max(a, shared, group_size, plane_size)
    }
}

/// Shared-memory tree over the group's `group_size` slots.
#[cube]
fn tree_max(a: f32, shared: &mut SharedMemory<f32>, #[comptime] group_size: usize) -> f32 {
    let lane = UNIT_POS_X as usize;
    let base = UNIT_POS_Y as usize * group_size;
    shared[base + lane] = a;
    sync_cube();
    let mut stride = (CUBE_DIM_X / 2) as usize;
    while stride > 0 {
        if lane < stride {
            let i = base + lane;
            let other = shared[i + stride];
            shared[i] = f32::max(shared[i], other);
        }
        sync_cube();
        stride /= 2;
    }
    let total = shared[base];
    // Release the slots for the next call.
    sync_cube();
    total
}

/// Plane maxima, then, for groups wider than a plane, one shared slot per plane.
#[cube]
fn plane_group_max(
    a: f32,
    shared: &mut SharedMemory<f32>,
    #[comptime] group_size: usize,
    #[comptime] plane_size: usize,
) -> f32 {
    let mut total = plane_max(a);
    if comptime!(group_size > plane_size) {
        let lane = UNIT_POS_X as usize;
        let planes = comptime!(group_size / plane_size);
        let base = UNIT_POS_Y as usize * planes;
        if UNIT_POS_PLANE == 0 {
            shared[base + lane / plane_size] = total;
        }
        sync_cube();
        total = shared[base];
        #[unroll]
        for p in 1..planes {
            total = f32::max(total, shared[base + p]);
        }
        // Release the slots for the next call.
        sync_cube();
    }
    total
}

/// Largest lane of a vector (NaN ignored as by `f32::max`).
#[cube]
pub(crate) fn hmax<N: Size>(value: Vector<f32, N>) -> f32 {
    let mut out = value[0];
    #[unroll]
    for i in 1..N::value() {
        out = f32::max(out, value[i]);
    }
    out
}
