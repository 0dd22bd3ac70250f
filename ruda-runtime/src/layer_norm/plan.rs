//! Launch shapes: vector width, units per row, registers per unit, reduction path, grid size.

use cubecl::{client::ComputeClient, prelude::*, server::Handle};

use crate::layout::vector_size;

use super::{
    ColumnSums, Reduction, SHARED_COLUMN_SUMS_MIN_ELEMENTS, Strategy, Variant, validate::Problem,
};
use crate::group_reduce::{shared_len, usable_plane_size};

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
    /// writes a partial row of `dgamma`/`dbeta` that must then be summed. `shared_sums`: the
    /// kernel keeps its column sums in shared memory (see [`Self::shared_column_sums`]).
    ///
    /// Where shared memory bounds the cubes an SM holds to one or two, the grid is exactly one
    /// wave of them; elsewhere, several waves of the cubes the SM's units allow (registers,
    /// not known on the host, may allow fewer, and a wave and a fraction leaves the fraction
    /// running on part of the device: 792 cubes where 528 fit, Nsight Compute on an H200;
    /// `docs/perf/layer-norm.md`, History).
    pub(crate) fn backward_cubes<R: cubecl::Runtime>(
        &self,
        client: &ComputeClient<R>,
        shared_sums: bool,
    ) -> usize {
        let hw = &client.properties().hardware;
        let units_per_cube = self.group_size * self.rows_per_cube;
        let shared_bytes = if shared_sums {
            self.shared_column_sums_bytes()
        } else {
            0
        };
        let resident = match hw.num_streaming_multiprocessors {
            Some(sms) => {
                let per_sm = shared_bound_cubes_per_sm(
                    units_per_cube,
                    shared_bytes,
                    hw.max_shared_memory_size,
                )
                .unwrap_or((UNITS_PER_SM / units_per_cube).max(1));
                sms as usize * per_sm
            }
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

/// Units an SM holds at once (NVIDIA: 2048 threads).
const UNITS_PER_SM: usize = 2048;
/// The most cubes an SM holds for which shared memory alone sizes the backward grid.
const SHARED_BOUND_CUBES: usize = 2;

/// The cubes of `units` units, each taking `shared_bytes` of shared memory, that one SM holds,
/// where shared memory bounds them to at most [`SHARED_BOUND_CUBES`]; `None` elsewhere.
/// `max_shared` is the most one cube may ask for, about an SM's whole shared memory on CUDA
/// (227 of 228 KiB on an H200).
///
/// Within that bound nothing else bounds them tighter: two cubes of 256 units leave each unit
/// 128 registers, and the backward kernel with its sums in shared memory takes at most 99 (32
/// elements a unit; Nsight Compute's count of NVRTC's code on an H200). This is what the
/// column sums of long rows take: f32 d = 8192 over 256 units, 96 KiB a cube, two an SM.
/// Sized by units alone, that grid was 512 cubes (the scratch bound) in two waves, writing and
/// summing twice the partial rows (34 MB at 4096x8192, `reduce_partials` 12.5 us).
pub(crate) fn shared_bound_cubes_per_sm(
    units: usize,
    shared_bytes: usize,
    max_shared: usize,
) -> Option<usize> {
    let by_units = UNITS_PER_SM / units.max(1);
    let by_shared = max_shared.checked_div(shared_bytes)?;
    (by_shared <= SHARED_BOUND_CUBES && by_shared < by_units).then_some(by_shared.max(1))
}

#[cfg(test)]
mod tests {
    use super::shared_bound_cubes_per_sm;

    /// An H200's `max_shared_memory_size` (opt-in, per cube).
    const H200_SHARED: usize = 232_448;

    #[test]
    fn long_rows_with_shared_sums_are_bound_by_shared_memory() {
        // f32 d = 8192 over 256 units: gamma and two sums of 8192 f32, plus reduction slots.
        let bytes = 3 * 8192 * 4 + 3 * 8 * 4;
        assert_eq!(shared_bound_cubes_per_sm(256, bytes, H200_SHARED), Some(2));
        assert_eq!(
            shared_bound_cubes_per_sm(256, 3 * bytes / 2, H200_SHARED),
            Some(1)
        );
        // More than the device allows a cube: one (the plan refuses to launch it anyway).
        assert_eq!(
            shared_bound_cubes_per_sm(256, H200_SHARED + 1, H200_SHARED),
            Some(1)
        );
    }

    #[test]
    fn elsewhere_units_size_the_grid() {
        // d = 4096 (48 KiB, four cubes) and d = 1024 with four rows a cube (36 KiB, six).
        assert_eq!(
            shared_bound_cubes_per_sm(256, 3 * 4096 * 4 + 96, H200_SHARED),
            None
        );
        assert_eq!(
            shared_bound_cubes_per_sm(256, 9 * 1024 * 4 + 96, H200_SHARED),
            None
        );
        // Sums in registers: no shared memory to speak of.
        assert_eq!(shared_bound_cubes_per_sm(256, 0, H200_SHARED), None);
        // Cubes of 1024 units: two an SM by units already.
        assert_eq!(
            shared_bound_cubes_per_sm(1024, 3 * 8192 * 4, H200_SHARED),
            None
        );
    }
}
