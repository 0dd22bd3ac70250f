//! Launch shapes: vector width, units per row, vectors per unit, staging, grid size.

use cubecl::{client::ComputeClient, prelude::*, server::Handle};

use super::Variant;
use crate::group_reduce::{MAX_GROUP_UNITS, shared_len, usable_plane_size};
use crate::layout::vector_size;

/// Most vectors a unit holds in the register variants (forward: the row; backward: `y` and
/// `dy`). Beyond it the row goes to the staged or looped variants.
pub const MAX_VECTORS_PER_UNIT: usize = 16;
/// Most units of a register variant's cube: each unit holds up to [`MAX_VECTORS_PER_UNIT`]
/// vectors, and a cube of 1024 such units would need more registers than an SM has (NVRTC
/// compiles without launch bounds).
const MAX_REGISTER_ROW_UNITS: usize = 256;
/// Most units of a looped or staged cube, which hold one chunk of vectors each (4, or 8 in the
/// staged backward): enough loads in flight to keep an SM's memory pipes busy when one staged
/// row fills its shared memory (a vocabulary of 50304 f32 logits takes 201 KiB of an H200's
/// 227), within the registers of an SM.
const MAX_LOOPED_ROW_UNITS: usize = 512;
/// Units an SM runs at once (2048 on NVIDIA GPUs since Volta): with the shared memory a
/// pipelined cube takes, it bounds how many fit on an SM.
const UNITS_PER_SM: usize = 2048;
/// Pipelined cubes launched where the device does not report its SM count (wgpu): a guess in
/// the range of one to two a multiprocessor on large GPUs. Fewer cubes than rows is what the
/// pipelined kernels are built for.
const PIPELINED_CUBES_WITHOUT_SM_COUNT: usize = 256;
/// Rows' units per cube for the plane-per-row variant (several rows a cube).
const PLANE_ROWS_UNITS: usize = 256;
/// Vectors per unit per chunk of the looped variant, the staged forward and the pipelined
/// variant: four loads in flight a unit and a tensor (the pipelined backward loads two or
/// three tensors a chunk: the next row's `dy` (softmax: and `y`), the written row's `y`).
const LOOP_CHUNK: usize = 4;
/// Vectors per unit per chunk of the staged backward: eight. A staged row of a vocabulary
/// fills the SM's shared memory, so its cube is alone there, and the backward's first pass
/// reads two tensors: with eight loads in flight a unit its kernel took 7% less time on an
/// H100 (softmax over 8192 x 50304, f32 and bf16), where the forward's took 1% (f32) to 17%
/// (bf16) more, so the forward keeps four.
const STAGED_BACKWARD_CHUNK: usize = 8;

/// Which pass a plan launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pass {
    /// `y` from `x`.
    Forward,
    /// `dx` from `y` and `dy`.
    Backward,
}

/// Units per cube of the unit-per-row and column kernels.
pub(crate) const UNIT_CUBE: usize = 64;
/// Loop iterations one invocation may run, over all its loops together, on Mesa's lavapipe,
/// less a margin (gallivm gives every invocation one loop counter and silently leaves whatever
/// loop is running after 65535 iterations; see the LayerNorm plan).
const UNIT_LOOP_BUDGET: usize = 65535 - 1024;

/// Everything a row launch needs, decided on the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub variant: Variant,
    /// Elements per vector (`N`); divides `d`.
    pub vector: usize,
    /// Vectors per row.
    pub d_vec: usize,
    /// Units per row (`CUBE_DIM_X`), a power of two; the unit-per-row variant: units a cube.
    pub group_size: usize,
    /// Rows per cube (`CUBE_DIM_Y`); 1 except for the plane-per-row variant.
    pub rows_per_cube: usize,
    /// Register variants: vectors held a unit. Looped and staged: vectors a unit a chunk.
    pub vectors_per_unit: usize,
    /// Staged and pipelined variants: the row's vectors, staged in shared memory; 0 otherwise.
    pub staged_len: usize,
    /// Plane size for plane reductions, 0 for the shared-memory path.
    pub plane_size: usize,
    /// Cubes launched (they loop over the work beyond).
    pub cubes: usize,
    /// Whether the vector was halved from the widest usable one (a tuning candidate).
    pub narrowed: bool,
}

impl Plan {
    /// The plan of `variant` for `rows` rows of `d` elements of `elem_size` bytes, read from
    /// `handles` in place; `narrow` halves the widest vector; `pass` sets the staged chunk. An
    /// error, before anything is launched, when the variant cannot run the shape (its row does
    /// not fit in registers or in shared memory, no narrower vector exists, or a unit would loop
    /// past lavapipe's limit).
    // Each argument is one fact of the launch, named at the one call site (`Choice::plan`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new<R: cubecl::Runtime>(
        client: &ComputeClient<R>,
        rows: usize,
        d: usize,
        elem_size: usize,
        handles: &[&Handle],
        variant: Variant,
        narrow: bool,
        pass: Pass,
    ) -> Result<Self, String> {
        let hw = &client.properties().hardware;
        let plane_size = usable_plane_size(client);
        let widest = vector_size(client, d, elem_size, handles);
        if narrow && widest == 1 {
            return Err(format!(
                "softmax {variant:?}: no vector narrower than 1 for rows of {d} elements"
            ));
        }
        let vector = if narrow { widest / 2 } else { widest };
        let d_vec = d / vector;
        let device_units = hw.max_units_per_cube as usize;
        // A group spans whole planes when plane reductions are used; a tree needs a power of
        // two.
        let row_group = |per_unit: usize, max: usize| {
            let max = max.min(device_units);
            d_vec
                .div_ceil(per_unit)
                .next_power_of_two()
                .clamp(plane_size.max(32).min(max), max)
        };
        let max_cubes = hw.max_cube_count.0 as usize;
        let mut plan = Plan {
            variant,
            vector,
            d_vec,
            group_size: 0,
            rows_per_cube: 1,
            vectors_per_unit: 0,
            staged_len: 0,
            plane_size,
            cubes: 0,
            narrowed: narrow,
        };
        let mut resident_cubes = rows;
        match variant {
            Variant::PlanePerRow => {
                // Without plane operations a group is a shared-memory tree: as few units as
                // the row needs, up to 32.
                let group = if plane_size > 0 {
                    plane_size
                } else {
                    d_vec.next_power_of_two().clamp(1, 32)
                };
                plan.group_size = group;
                plan.rows_per_cube = (PLANE_ROWS_UNITS.min(device_units) / group)
                    .clamp(1, rows.max(1).next_power_of_two());
                plan.vectors_per_unit = d_vec.div_ceil(group);
            }
            Variant::CubePerRow => {
                // About four vectors a unit.
                plan.group_size = row_group(4, MAX_REGISTER_ROW_UNITS);
                plan.vectors_per_unit = d_vec.div_ceil(plan.group_size);
            }
            Variant::CubePerRowStaged
            | Variant::CubePerRowPipelined
            | Variant::CubePerRowLooped => {
                let chunk = if variant == Variant::CubePerRowStaged && pass == Pass::Backward {
                    STAGED_BACKWARD_CHUNK
                } else {
                    LOOP_CHUNK
                };
                plan.group_size = row_group(chunk, MAX_LOOPED_ROW_UNITS);
                plan.vectors_per_unit = chunk;
                if variant != Variant::CubePerRowLooped {
                    plan.staged_len = d_vec;
                    let bytes = d_vec * vector * elem_size
                        + shared_len(1, plan.group_size, plane_size, 1) * 4;
                    if bytes > hw.max_shared_memory_size {
                        return Err(format!(
                            "softmax {variant:?}: a row of {d} elements takes {bytes} bytes of \
                             shared memory, more than this device's {}",
                            hw.max_shared_memory_size
                        ));
                    }
                    if variant == Variant::CubePerRowPipelined {
                        // About as many cubes as the device runs at once, each working through
                        // several rows.
                        let per_sm = (hw.max_shared_memory_size / bytes)
                            .clamp(1, (UNITS_PER_SM / plan.group_size).max(1));
                        resident_cubes = match hw.num_streaming_multiprocessors {
                            Some(sms) => sms as usize * per_sm,
                            // Without an SM count (wgpu, lavapipe among them): enough cubes
                            // that none loops past lavapipe's limit (a step loops over its
                            // chunks, and its reductions' trees take at most 32 iterations).
                            None => {
                                let chunks = d_vec.div_ceil(plan.group_size * chunk);
                                let steps_per_cube = UNIT_LOOP_BUDGET / (chunks + 32);
                                PIPELINED_CUBES_WITHOUT_SM_COUNT
                                    .max(rows.div_ceil(steps_per_cube.max(1)))
                            }
                        };
                    }
                }
            }
            Variant::UnitPerRow => {
                plan.group_size = UNIT_CUBE.min(device_units);
                let cubes = rows.div_ceil(plan.group_size).clamp(1, max_cubes);
                let rows_per_unit = rows.div_ceil(cubes * plan.group_size);
                let iterations = rows_per_unit * (3 * d_vec + 3);
                if iterations > UNIT_LOOP_BUDGET {
                    return Err(format!(
                        "softmax UnitPerRow: {rows} rows of {d} elements take {iterations} loop \
                         iterations a unit, more than the {UNIT_LOOP_BUDGET} lavapipe runs"
                    ));
                }
            }
        }
        if matches!(variant, Variant::PlanePerRow | Variant::CubePerRow)
            && plan.vectors_per_unit > MAX_VECTORS_PER_UNIT
        {
            return Err(format!(
                "softmax {variant:?}: a row of {d} elements is {d_vec} vectors of {vector}, more \
                 than {MAX_VECTORS_PER_UNIT} a unit over {} units",
                plan.group_size
            ));
        }
        let tiles = match variant {
            Variant::PlanePerRow => rows.div_ceil(plan.rows_per_cube),
            Variant::UnitPerRow => rows.div_ceil(plan.group_size),
            Variant::CubePerRowPipelined => rows.min(resident_cubes),
            _ => rows,
        };
        plan.cubes = tiles.clamp(1, max_cubes);
        Ok(plan)
    }

    pub(crate) fn cube_dim(&self) -> CubeDim {
        CubeDim::new_2d(self.group_size as u32, self.rows_per_cube as u32)
    }
}

/// A launch of the column kernels (`dim` not the last), decided on the host; `None` when a
/// unit would loop past lavapipe's limit (the caller then moves `dim` last).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ColumnsPlan {
    /// Elements per vector, along the inner columns; divides `inner`.
    pub vector: usize,
    /// Vectors of columns per block of `inner` columns.
    pub inner_vec: usize,
    /// Units' worth of work: `outer * inner_vec`.
    pub columns: usize,
    /// Units a cube.
    pub units: usize,
    /// Cubes launched.
    pub cubes: usize,
}

impl ColumnsPlan {
    pub(crate) fn new<R: cubecl::Runtime>(
        client: &ComputeClient<R>,
        outer: usize,
        d: usize,
        inner: usize,
        elem_size: usize,
        handles: &[&Handle],
    ) -> Option<Self> {
        let hw = &client.properties().hardware;
        let vector = vector_size(client, inner, elem_size, handles);
        let inner_vec = inner / vector;
        let columns = outer * inner_vec;
        let units = if usable_plane_size(client) > 0 {
            MAX_GROUP_UNITS
        } else {
            UNIT_CUBE
        }
        .min(hw.max_units_per_cube as usize);
        let cubes = columns
            .div_ceil(units)
            .clamp(1, hw.max_cube_count.0 as usize);
        let per_unit = columns.div_ceil(cubes * units);
        (per_unit * (3 * d + 3) <= UNIT_LOOP_BUDGET).then_some(ColumnsPlan {
            vector,
            inner_vec,
            columns,
            units,
            cubes,
        })
    }
}
