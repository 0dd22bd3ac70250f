//! Launch shapes: vector width, units per row, registers per unit, reduction path, grid size.

use cubecl::{client::ComputeClient, features::Plane, prelude::*, server::Handle};

use crate::layout::vector_size;

use super::{
    ColumnSums, Reduction, SHARED_COLUMN_SUMS_MIN_ELEMENTS, Strategy, Variant,
    kernels::reduce::shared_len, validate::Problem,
};

/// Largest number of vectors a unit may hold in the register variants. A forced register
/// variant that would exceed it panics; the automatic choice moves on to the next variant
/// (plane per row, then cube per row, then looped).
pub const MAX_VECTORS_PER_UNIT: usize = 32;
/// Units per cube of the cube-per-row variants (and the rows-per-cube budget of plane-per-row).
const CUBE_UNITS: usize = 256;
/// Vectors per unit per chunk of the looped variants: four 16-byte loads in flight per unit.
const LOOP_CHUNK: usize = 4;
/// Units per cube of the unit-per-row variant: a few SIMD batches of a CPU adapter.
pub(crate) const UNIT_CUBE: usize = 64;
/// Upper bound on the f32 scratch of the backward column sums, per buffer, in elements (16 MiB).
const MAX_PARTIAL_ELEMS: usize = 1 << 22;
/// Loop iterations one invocation may run, over all its loops together, on Mesa's
/// llvmpipe/lavapipe: gallivm gives every shader invocation one loop counter, shared by every
/// loop of the shader, and silently breaks out of whatever loop is running once it has counted
/// 65535 iterations (`LP_MAX_TGSI_LOOP_ITERATIONS`). The unit-per-row kernels loop over whole
/// rows in one invocation (three passes of `d_vec` iterations in the forward pass), so a long
/// row would be cut short there: the statistics miss the end of the row and the output is
/// never written (d = 65536 with vectors of 2 elements, or d = 131072 with vectors of 4).
pub(crate) const LAVAPIPE_LOOP_ITERATIONS: usize = 65535;
/// The share of [`LAVAPIPE_LOOP_ITERATIONS`] the unit-per-row kernels plan for (a margin for
/// loops a compiler might add).
const UNIT_LOOP_BUDGET: usize = LAVAPIPE_LOOP_ITERATIONS - 1024;

/// The most loop iterations one invocation of a unit-per-row kernel runs: the forward kernel
/// (and the backward row kernel, which makes two passes instead of three) runs
/// `1 + 3 * d_vec` per row for each of the rows its unit visits; the backward column kernel runs
/// one iteration per row.
pub(crate) fn unit_loop_iterations(
    rows: usize,
    d_vec: usize,
    units_per_cube: usize,
    max_cubes: usize,
) -> usize {
    let cubes = rows.div_ceil(units_per_cube).min(max_cubes).max(1);
    let rows_per_unit = rows.div_ceil(cubes * units_per_cube);
    (rows_per_unit * (1 + 3 * d_vec)).max(rows)
}

/// Plane size usable by the kernels, 0 when the shared-memory path must be used: the device must
/// advertise plane operations with a fixed, power-of-two plane size.
pub(crate) fn usable_plane_size<R: cubecl::Runtime>(client: &ComputeClient<R>) -> usize {
    let props = client.properties();
    let hw = &props.hardware;
    if props.features.plane.contains(Plane::Ops)
        && hw.plane_size_min == hw.plane_size_max
        && hw.plane_size_max.is_power_of_two()
        && hw.plane_size_max as usize <= CUBE_UNITS
    {
        hw.plane_size_max as usize
    } else {
        0
    }
}

/// Everything a launch needs, decided on the host.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub variant: Variant,
    /// Elements per vector (`N`); divides `d`.
    pub vector: usize,
    /// Vectors per row.
    pub d_vec: usize,
    /// Units per row (`CUBE_DIM_X`), a power of two.
    pub group_size: usize,
    /// Rows per cube (`CUBE_DIM_Y`); 1 for the cube-per-row variants.
    pub rows_per_cube: usize,
    /// Register variants: vectors held per unit. Looped variant: vectors per unit per chunk.
    pub vectors_per_unit: usize,
    /// Plane size for plane reductions, 0 for the shared-memory path.
    pub plane_size: usize,
    /// Number of row tiles (`ceil(rows / rows_per_cube)`).
    pub tiles: usize,
    /// Whether the vector was halved from the widest usable one (a tuning candidate).
    pub narrowed: bool,
}

impl Plan {
    pub(crate) fn new<R: cubecl::Runtime>(
        client: &ComputeClient<R>,
        problem: Problem,
        elem_size: usize,
        handles: &[&Handle],
        strategy: Strategy,
        forced: bool,
        narrow: bool,
    ) -> Self {
        let Problem { rows, d } = problem;
        let device_plane = usable_plane_size(client);
        let plane_size = match strategy.reduction {
            Reduction::Auto => device_plane,
            Reduction::SharedMemory => 0,
            Reduction::Plane => {
                assert!(
                    device_plane > 0,
                    "LayerNorm: Reduction::Plane was forced but this device does not advertise plane \
                     operations with a fixed plane size (features: {:?}, plane size {}..={})",
                    client.properties().features.plane,
                    client.properties().hardware.plane_size_min,
                    client.properties().hardware.plane_size_max,
                );
                device_plane
            }
        };
        let widest = vector_size(client, d, elem_size, handles);
        // A tuning candidate may ask for half the widest vector (more units per row).
        let narrowed = narrow && widest > 1;
        let vector = if narrowed { widest / 2 } else { widest };
        let d_vec = d / vector;
        let max_units = (client.properties().hardware.max_units_per_cube as usize).min(CUBE_UNITS);
        // A group spans whole planes when plane reductions are used.
        let min_group = plane_size.max(1);

        // The automatic choice moves on to the next variant when the row does not fit in
        // registers (e.g. an odd `d`, read as scalars); a forced variant panics instead.
        let mut variant = strategy.variant;
        let (group_size, rows_per_cube, vectors_per_unit) = loop {
            let shape = match variant {
                Variant::PlanePerRow => {
                    let group = if plane_size > 0 { plane_size } else { 32 };
                    let rows_per_cube =
                        (max_units / group).clamp(1, rows.max(1).next_power_of_two());
                    (group, rows_per_cube, d_vec.div_ceil(group))
                }
                Variant::CubePerRow => {
                    // About four vectors per unit, 256 units at most.
                    let group = d_vec
                        .div_ceil(4)
                        .next_power_of_two()
                        .clamp(min_group.max(32).min(max_units), max_units);
                    (group, 1, d_vec.div_ceil(group))
                }
                Variant::CubePerRowLooped => (max_units.max(min_group), 1, LOOP_CHUNK),
                // One unit per row: cubes of `UNIT_CUBE` rows; nothing held in registers.
                Variant::UnitPerRow => (UNIT_CUBE.min(max_units), 1, 0),
            };
            let fits = match variant {
                Variant::CubePerRowLooped => true,
                Variant::UnitPerRow => {
                    let max_cubes = client.properties().hardware.max_cube_count.0 as usize;
                    unit_loop_iterations(rows, d_vec, shape.0, max_cubes) <= UNIT_LOOP_BUDGET
                }
                _ => shape.2 <= MAX_VECTORS_PER_UNIT,
            };
            if fits {
                break shape;
            }
            if variant == Variant::UnitPerRow {
                assert!(
                    !forced,
                    "LayerNorm: variant UnitPerRow loops over whole rows in one unit and cannot \
                     run {rows} rows of d = {d} ({d_vec} vectors of {vector}) within \
                     {UNIT_LOOP_BUDGET} loop iterations per unit (lavapipe silently ends loops \
                     after {LAVAPIPE_LOOP_ITERATIONS}); use Variant::CubePerRowLooped"
                );
            }
            assert!(
                !forced,
                "LayerNorm: variant {variant:?} holds the row in registers and cannot fit d = {d} \
                 ({d_vec} vectors of {vector} over {} units, at most {MAX_VECTORS_PER_UNIT} \
                 vectors per unit); use Variant::CubePerRowLooped",
                shape.0
            );
            variant = match variant {
                Variant::PlanePerRow => Variant::CubePerRow,
                _ => Variant::CubePerRowLooped,
            };
        };
        Plan {
            variant,
            vector,
            d_vec,
            group_size,
            rows_per_cube,
            vectors_per_unit,
            plane_size,
            tiles: match variant {
                Variant::UnitPerRow => rows.div_ceil(group_size),
                _ => rows.div_ceil(rows_per_cube),
            },
            narrowed,
        }
    }

    /// The backward pass's cube per row: as many rows per cube as fill [`CUBE_UNITS`] units,
    /// so that each cube's partial `dgamma`/`dbeta` row sums several rows. The backward grid
    /// is bounded by resident units, not tiles, so a cube of 64 units a row left four times
    /// as many partial rows to write and read again (4224 rows of 16 KiB at 16384x1024 on an
    /// H200: 34 MB each for dgamma and dbeta, beside 201 MB of x, dy and dx; calls P-R). The
    /// forward pass writes no partials and keeps one row per cube.
    pub(crate) fn with_full_cubes<R: cubecl::Runtime>(mut self, client: &ComputeClient<R>) -> Self {
        if self.variant == Variant::CubePerRow {
            let max_units =
                (client.properties().hardware.max_units_per_cube as usize).min(CUBE_UNITS);
            let rows = self.tiles * self.rows_per_cube;
            self.rows_per_cube =
                (max_units / self.group_size).clamp(1, rows.max(1).next_power_of_two());
            self.tiles = rows.div_ceil(self.rows_per_cube);
        }
        self
    }

    /// Bytes of shared memory the backward register kernel takes with its column sums and
    /// `gamma` in shared memory: `gamma` once, two sums per group, each `group_size *
    /// vectors_per_unit` f32 vectors, beside the row reduction's slots.
    fn shared_column_sums_bytes(&self) -> usize {
        let row = self.group_size * self.vectors_per_unit * self.vector;
        let reduction = shared_len(self.rows_per_cube, self.group_size, self.plane_size, 3);
        ((1 + 2 * self.rows_per_cube) * row + reduction) * core::mem::size_of::<f32>()
    }

    /// Whether the backward register kernel keeps its column sums in shared memory
    /// ([`ColumnSums`]); always `false` for the variants without per-unit sums. Asked for
    /// shared memory where the slots do not fit, an unforced plan (an autotune candidate) keeps
    /// them in registers.
    ///
    /// # Panics
    /// When [`ColumnSums::SharedMemory`] is `forced` and the slots do not fit in the device's
    /// shared memory.
    pub(crate) fn shared_column_sums<R: cubecl::Runtime>(
        &self,
        client: &ComputeClient<R>,
        column_sums: ColumnSums,
        forced: bool,
    ) -> bool {
        if !matches!(self.variant, Variant::PlanePerRow | Variant::CubePerRow) {
            return false;
        }
        let bytes = self.shared_column_sums_bytes();
        let max = client.properties().hardware.max_shared_memory_size;
        match column_sums {
            ColumnSums::Registers => false,
            ColumnSums::SharedMemory if !forced => bytes <= max,
            ColumnSums::SharedMemory => {
                assert!(
                    bytes <= max,
                    "LayerNorm: ColumnSums::SharedMemory was forced but {:?} with {} units a row, \
                     {} rows a cube and {} vectors of {} a unit needs {bytes} bytes of shared \
                     memory, more than this device's {max}",
                    self.variant,
                    self.group_size,
                    self.rows_per_cube,
                    self.vectors_per_unit,
                    self.vector,
                );
                true
            }
            ColumnSums::Auto => {
                self.vectors_per_unit * self.vector >= SHARED_COLUMN_SUMS_MIN_ELEMENTS
                    && bytes <= max
            }
        }
    }

    pub(crate) fn cube_dim(&self) -> CubeDim {
        CubeDim::new_2d(self.group_size as u32, self.rows_per_cube as u32)
    }

    /// Forward grid: one cube per tile, up to the device's limit (cubes then loop over tiles).
    pub(crate) fn forward_cubes<R: cubecl::Runtime>(&self, client: &ComputeClient<R>) -> usize {
        let max = client.properties().hardware.max_cube_count.0 as usize;
        self.tiles.min(max).max(1)
    }

    /// Backward grid: enough cubes to fill the device, not one per tile, since each cube also
    /// writes a partial row of `dgamma`/`dbeta` that must then be summed.
    pub(crate) fn backward_cubes<R: cubecl::Runtime>(&self, client: &ComputeClient<R>) -> usize {
        let hw = &client.properties().hardware;
        let units_per_cube = self.group_size * self.rows_per_cube;
        let resident = match hw.num_streaming_multiprocessors {
            // About 2048 resident units per SM.
            Some(sms) => sms as usize * (2048 / units_per_cube).max(1),
            // Unknown (wgpu): a few cubes per SM of a large GPU.
            None => 512,
        };
        // Bound the scratch, but keep at least one cube per SM (long rows, few of them).
        let by_scratch = (MAX_PARTIAL_ELEMS / (self.d_vec * self.vector))
            .max(hw.num_streaming_multiprocessors.unwrap_or(1) as usize);
        self.tiles
            .min(resident)
            .min(by_scratch)
            .min(hw.max_cube_count.0 as usize)
            .max(1)
    }
}
