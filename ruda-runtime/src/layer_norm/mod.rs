//! Native fused LayerNorm kernels (forward and backward) for every CubeCL runtime.
//!
//! LayerNorm normalizes over the last dimension `d` of its input; every leading dimension is a
//! batch of rows (`rows = product of the leading dims`, any rank >= 1):
//!
//! ```text
//! mean = sum(x) / d        rstd = 1 / sqrt(sum((x - mean)^2) / d + epsilon)
//! out  = (x - mean) * rstd * gamma + beta
//! ```
//!
//! - Forward returns `[out, mean, rstd]`; backward takes `x, gamma, dy, mean, rstd` and returns
//!   `[dx, dgamma, dbeta]`. The autotuned entry points, which the ruda runtimes' hooks call, are
//!   [`layer_norm_forward`] and [`layer_norm_backward`] (candidates and key in [`tune`]);
//!   [`layer_norm_forward_with`] and [`layer_norm_backward_with`] run a forced [`Strategy`].
//! - Element types F32, F16 and BF16 (where the device supports it), all tensors of one dtype;
//!   statistics are always F32, and all arithmetic is accumulated in f32.
//! - No cancellation, even for rows with a large mean and a small spread (mean 1e4, std 1e-2):
//!   statistics are formed on deviations from a per-row shift (an approximate mean: of the whole
//!   row for rows in registers, of the row's first 256-unit chunk for long rows, whose per-unit
//!   chunk statistics are then combined with Chan's parallel update from plain sums), and the
//!   output is `((x - shift) - correction) * rstd`, never `x - mean` through an f32 mean that
//!   cannot resolve the spread. The shift is rounded to a multiple of `2 ulp(mean|x|)`, so
//!   that `x - shift` is exact (or unbiased) and its rounding cannot bias the sums; the mean is then as
//!   accurate as a plain f32 sum of centred data (~1e-7 of the row's spread, also for
//!   d = 65536). See [`Variant`].
//! - The backward takes the saved f32 `mean` only as a shift: each row also sums `x - mean`
//!   and corrects by its mean, so that the gradients are those of the row's exact statistics
//!   (the f32 mean of a row with mean 1e4 is off by up to ~5e-4, a few percent of a 1e-2
//!   spread), at the cost of one more value in a reduction the row needs anyway.
//! - Any number of rows, including zero (empty outputs, nothing launched); `d >= 1`.
//! - Strided inputs (a transposed matrix, a stepped slice, a broadcast) are first copied to a
//!   contiguous layout by CubeCL's `into_contiguous` kernel; the row kernels always read
//!   contiguous, vectorized rows (`Vector<F, N>`, `N` up to the device's 16-byte loads where `d`
//!   and the buffers' alignment allow).
//! - `dgamma`/`dbeta` are two-stage: per-cube partial sums over the rows each cube visits,
//!   in an f32 scratch buffer, then a column reduction, itself cut into chunks of partial rows
//!   (a second, small launch sums the chunks) when there are many partials and few columns;
//!   no atomics, deterministic.
//! - Reductions use plane (warp/subgroup) operations where the device advertises them with a
//!   fixed plane size, and shared memory otherwise (Mesa's lavapipe, our CI device).
//! - Rows never mix: a NaN in one row stays in that row's `out`, `mean`, `rstd` and `dx`
//!   (`dgamma`/`dbeta` sum over rows, so they see it).
//!
//! Bad arguments panic before anything is launched, with a message naming the tensors and
//! their shapes.

// Host side of each pass: checks, plan, launch.
pub(crate) mod backward;
pub(crate) mod forward;
// The `#[cube]` kernels.
mod kernels;
// Launch shapes.
pub(crate) mod plan;
pub mod tune;
// Argument checks, before anything is queued or launched.
pub mod validate;

use burn_backend::DType;
use cubecl::client::ComputeClient;

use crate::autotune::settings;
use crate::tensor_buffer::TensorBuffer;
use validate::{check_backward, check_forward};

pub use plan::MAX_VECTORS_PER_UNIT;

/// Longest row, in vectors, for which autotuning tries [`Variant::UnitPerRow`] on a device with
/// plane operations. Beyond it a plane per row keeps every lane busy where one unit per row
/// leaves 31 of 32 idle.
pub const UNIT_PER_ROW_MAX_VECTORS_WITH_PLANES: usize = 8;

/// Most row elements one unit may hold in the backward pass of the register variants, for
/// autotuning. The backward holds `x` and `dy` for each of them and adds two partial column
/// sums, so it needs about four times the forward's registers: on an H200 (Nsight Compute;
/// `docs/perf/layer-norm.md`, History) the plane-per-row backward took
/// 104 registers a unit at 16 elements (d = 512), 195 at 32 (d = 1024) and 255 with spills at
/// 64 (d = 2048). Beyond it the tuner does not try the candidate; a forced strategy still runs.
/// (From [`SHARED_COLUMN_SUMS_MIN_ELEMENTS`] on the two partial sums move to shared memory where
/// they fit, which leaves `x` and `dy`; the bound has not been measured again beyond 32.)
pub const BACKWARD_MAX_ELEMENTS_PER_UNIT: usize = 32;

/// How a call picks its launch shape (crate-internal).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Choice {
    /// [`choose_variant`]; a register variant that cannot hold the row moves on to the next.
    Default,
    /// A forced strategy; panics when it cannot run the shape.
    Forced(Strategy),
    /// An autotune candidate: a variant, optionally with half the widest vector, and where the
    /// backward keeps its column sums. When `strict` (benchmarking a candidate), a candidate
    /// that cannot run the shape as asked is an error, raised before anything is launched;
    /// otherwise (running the chosen candidate on a shape of its bucket) it moves on like
    /// [`Choice::Default`] (column sums that do not fit in shared memory stay in registers).
    Candidate {
        /// The work layout.
        variant: Variant,
        /// Half the widest usable vector.
        narrow: bool,
        /// Where the backward keeps its column sums ([`ColumnSums::Registers`] or
        /// [`ColumnSums::SharedMemory`]).
        column_sums: ColumnSums,
        /// Refuse rather than move on.
        strict: bool,
    },
}

impl Choice {
    /// The strategy to plan with, whether it is forced, whether to narrow the vector.
    pub(crate) fn resolve(self, default: impl FnOnce() -> Variant) -> (Strategy, bool, bool) {
        match self {
            Choice::Default => (default().into(), false, false),
            Choice::Forced(strategy) => (strategy, true, false),
            Choice::Candidate {
                variant,
                narrow,
                column_sums,
                ..
            } => (
                Strategy::new(variant, Reduction::Auto).with_column_sums(column_sums),
                false,
                narrow,
            ),
        }
    }

    /// For a strict candidate: whether the plan is the candidate that was asked for, and worth
    /// benchmarking (every candidate compiles its kernels first: half a second each with
    /// NVRTC).
    pub(crate) fn check(self, plan: &plan::Plan) -> Result<(), String> {
        match self {
            Choice::Candidate {
                variant: Variant::UnitPerRow,
                strict: true,
                ..
            } if plan.plane_size > 0 && plan.d_vec > UNIT_PER_ROW_MAX_VECTORS_WITH_PLANES => {
                Err(format!(
                    "candidate UnitPerRow is not tried on a device with plane operations for rows \
                     of more than {UNIT_PER_ROW_MAX_VECTORS_WITH_PLANES} vectors ({} here): one \
                     unit per row leaves most lanes idle, and it never won there (H200 tuning \
                     runs)",
                    plan.d_vec
                ))
            }
            Choice::Candidate {
                variant,
                narrow,
                strict: true,
                ..
            } if plan.variant != variant || narrow != plan.narrowed => Err(format!(
                "candidate {variant:?} (narrow vector: {narrow}) cannot run this shape: the plan \
                 would be {:?} with vectors of {}",
                plan.variant, plan.vector
            )),
            _ => Ok(()),
        }
    }

    /// [`Choice::check`] for the backward pass, which also refuses, for a strict candidate, a
    /// register variant holding more than [`BACKWARD_MAX_ELEMENTS_PER_UNIT`] elements a unit,
    /// and column sums asked in shared memory that the plan keeps in registers (`shared_sums`,
    /// from [`plan::Plan::shared_column_sums`]: the slots do not fit in shared memory).
    pub(crate) fn check_backward(self, plan: &plan::Plan, shared_sums: bool) -> Result<(), String> {
        self.check(plan)?;
        let held = plan.vectors_per_unit * plan.vector;
        let registers = matches!(plan.variant, Variant::PlanePerRow | Variant::CubePerRow);
        match self {
            Choice::Candidate { strict: true, .. }
                if registers && held > BACKWARD_MAX_ELEMENTS_PER_UNIT =>
            {
                Err(format!(
                    "candidate {:?} is not tried in the backward pass with {held} elements a \
                     unit (at most {BACKWARD_MAX_ELEMENTS_PER_UNIT}): x, dy and two partial sums \
                     per element spill registers",
                    plan.variant
                ))
            }
            Choice::Candidate {
                strict: true,
                column_sums: ColumnSums::SharedMemory,
                ..
            } if !shared_sums => Err(format!(
                "candidate {:?} with its column sums in shared memory cannot run this shape: \
                 {} units a row, {} rows a cube and {held} elements a unit need more shared \
                 memory than this device has",
                plan.variant, plan.group_size, plan.rows_per_cube
            )),
            _ => Ok(()),
        }
    }
}

/// How the rows are spread over the device. Every variant computes the same result (up to f32
/// rounding); they differ in speed. The default choice is [`choose_variant`]; the `_with`
/// entry points force one (tests, benchmarks, autotuning).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// One plane-sized group of units per row (the plane size when plane operations are used,
    /// else 32 units), several rows per cube, the row held in registers. For short rows: no
    /// cube-wide barrier is needed with plane operations.
    PlanePerRow,
    /// One cube (32 to 256 units, about four vectors per unit) per row, the row held in
    /// registers: `x` is read once, the variance is an exact second pass over registers.
    /// Holds up to [`MAX_VECTORS_PER_UNIT`] vectors per unit. The backward pass gives a row the
    /// same units but fills cubes of up to 256 units with several rows, so that fewer partial
    /// column sums are written.
    CubePerRow,
    /// One cube of 256 units per row, looping over the row in chunks: any `d`. The forward pass
    /// reads `x` twice (statistics, then output; the shift is taken from the first chunk while
    /// it is in registers), the backward pass reads `x`/`dy` twice.
    CubePerRowLooped,
    /// One unit per row, no shared memory and no barrier: the unit reads its row three times
    /// (from cache after the first) in the forward pass, twice in the backward pass, and the
    /// backward's `dgamma`/`dbeta` come from a second kernel with one unit per column.
    /// For devices where barriers are expensive and plane operations missing, such as Mesa's
    /// lavapipe (Vulkan on the CPU); on a GPU it leaves most lanes idle. Bounded by lavapipe's
    /// loop limit (a shader invocation's loops together end silently after 65535 iterations):
    /// a unit may run at most about 64500 loop iterations, `1 + 3 * d / N` per row it visits
    /// (`N` the vector width) and, for the column sums, one per row; beyond that the launch
    /// moves on to [`Variant::CubePerRowLooped`] (a forced `UnitPerRow` panics), e.g. from
    /// d = 86016 with vectors of 4, or from 64512 rows.
    UnitPerRow,
}

/// How the units of a row combine their partial sums.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Reduction {
    /// Plane operations when the device has them with a fixed plane size, else shared memory.
    #[default]
    Auto,
    /// Plane operations; panics on a device without them.
    Plane,
    /// Shared memory, even where plane operations exist (to test that path on any device).
    SharedMemory,
}

/// Where the backward pass of the register variants ([`Variant::PlanePerRow`],
/// [`Variant::CubePerRow`]) keeps what a unit holds across the rows it visits: its columns'
/// partial `dgamma`/`dbeta` and `gamma`. The other variants, and the forward pass, ignore it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ColumnSums {
    /// Shared memory when a unit holds [`SHARED_COLUMN_SUMS_MIN_ELEMENTS`] elements of the row
    /// or more and the cube's slots fit in the device's shared memory; registers otherwise.
    /// The choice without tuning: the tuner times both places
    /// ([`tune::BACKWARD_CANDIDATES`]).
    #[default]
    Auto,
    /// Registers.
    Registers,
    /// Shared memory; a forced strategy panics before launching when the cube's slots do not
    /// fit in the device's shared memory (an autotune candidate skips the shape instead).
    SharedMemory,
}

/// Elements of the row per unit from which [`ColumnSums::Auto`] keeps the backward's column
/// sums in shared memory. At 32 (f32 d = 8192 over 256 units, d = 1024 over a plane) the
/// register variants' backward took ~190 registers a unit on an H200 (Nsight Compute;
/// `docs/perf/layer-norm.md`, History): one cube per SM, so the
/// rows of a cube ran one after the other with nothing to cover their latency (a bf16 4096x8192
/// backward, half the bytes, took about as long as f32). The sums and `gamma` are half of those
/// registers.
pub const SHARED_COLUMN_SUMS_MIN_ELEMENTS: usize = 32;

/// A fully specified way to run the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Strategy {
    /// The work layout.
    pub variant: Variant,
    /// The reduction path.
    pub reduction: Reduction,
    /// Where the backward's column sums are kept (register variants only).
    pub column_sums: ColumnSums,
}

impl Strategy {
    /// `variant` with `reduction`, column sums chosen automatically.
    pub fn new(variant: Variant, reduction: Reduction) -> Self {
        Strategy {
            variant,
            reduction,
            column_sums: ColumnSums::Auto,
        }
    }

    /// The same strategy with the backward's column sums in `column_sums`.
    pub fn with_column_sums(self, column_sums: ColumnSums) -> Self {
        Strategy {
            column_sums,
            ..self
        }
    }
}

impl From<Variant> for Strategy {
    fn from(variant: Variant) -> Self {
        Strategy::new(variant, Reduction::Auto)
    }
}

/// The default variant for rows of `d` elements of `dtype`, `rows` rows, on a device with
/// (`has_plane`) or without usable plane operations.
///
/// The rule, on a device without usable plane operations: [`Variant::UnitPerRow`] when there
/// are at least 64 rows. Such devices are CPU adapters (Mesa's lavapipe: CubeCL does not give
/// plane operations to CPU adapters) or GPUs without subgroups, and on a CPU adapter a barrier
/// costs far more than re-reading a row from cache. With fewer rows, and on every device with
/// plane operations:
/// - [`Variant::PlanePerRow`] when `d <= 256`, or when `d <= 1024` and there are at least 1024
///   rows (enough rows to give every group of 32 units its own row and still fill the device;
///   with fewer rows a cube per row spreads the work wider). Without plane operations the bound
///   rises to `d <= 2048`: each shared-memory barrier is then shared by all the rows of a cube,
///   where a cube per row pays for it per row.
/// - [`Variant::CubePerRow`] up to `d <= 8192`: with 256 units that is at most 32 f32 values
///   of the row per unit, kept in registers, so `x` is read from memory exactly once.
/// - [`Variant::CubePerRowLooped`] beyond.
///
/// The rule assumes 16-byte vector loads; when `d` is odd (scalar loads) a register variant may
/// not hold the row in [`MAX_VECTORS_PER_UNIT`] vectors per unit, and the launch then moves on
/// to the next variant (plane per row, cube per row, looped); so does a [`Variant::UnitPerRow`]
/// launch whose rows are too long, or too many, for lavapipe's loop limit. A variant forced
/// through the `_with` entry points never moves; it panics instead.
///
/// `dtype` does not change the choice today: rows are held in registers as f32 whatever the
/// storage type, so the register budget per element is the same; it is part of the signature
/// (and of the autotune key) because the best crossover points do depend on it.
pub fn choose_variant(d: usize, rows: usize, dtype: DType, has_plane: bool) -> Variant {
    let _ = dtype;
    if !has_plane && rows >= 64 {
        return Variant::UnitPerRow;
    }
    let plane_row_max = if has_plane { 1024 } else { 2048 };
    if d <= 256 || (d <= plane_row_max && rows >= 1024) {
        Variant::PlanePerRow
    } else if d <= 8192 {
        Variant::CubePerRow
    } else {
        Variant::CubePerRowLooped
    }
}

/// [`layer_norm_forward`] with a forced [`Variant`] or [`Strategy`].
///
/// # Panics
/// As [`layer_norm_forward`]; also, before launching anything, if a register variant cannot
/// hold the row (more than [`MAX_VECTORS_PER_UNIT`] vectors per unit) or [`Reduction::Plane`]
/// is forced on a device without plane operations.
pub fn layer_norm_forward_with<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    input: TensorBuffer,
    weight: TensorBuffer,
    bias: Option<TensorBuffer>,
    epsilon: f64,
    strategy: impl Into<Strategy>,
) -> [TensorBuffer; 3] {
    let choice = Choice::Forced(strategy.into());
    forward::forward(client, input, weight, bias, epsilon, choice).expect("forced strategies panic")
}

/// [`layer_norm_backward`] with a forced [`Variant`] or [`Strategy`].
///
/// # Panics
/// As [`layer_norm_backward`] and [`layer_norm_forward_with`].
pub fn layer_norm_backward_with<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    input: TensorBuffer,
    weight: TensorBuffer,
    grad: TensorBuffer,
    mean: TensorBuffer,
    rstd: TensorBuffer,
    strategy: impl Into<Strategy>,
) -> [TensorBuffer; 3] {
    let choice = Choice::Forced(strategy.into());
    backward::backward(client, input, weight, grad, mean, rstd, choice)
        .expect("forced strategies panic")
}

/// LayerNorm forward over the last dimension of `input`.
///
/// The variant and vector width are autotuned per (d bucket, vector width, rows bucket, dtype)
/// ([`tune::LayerNormKey`]): cached on disk under the device's driver fingerprint for the ruda
/// runtimes, in memory for the process when there is none ([`crate::autotune`]);
/// `RUDA_AUTOTUNE=off`, and a CPU adapter unless `RUDA_AUTOTUNE=on`, run [`choose_variant`]
/// instead.
///
/// Returns `[out, mean, rstd]`: `out` has the input's dtype and shape (contiguous); `mean` and
/// `rstd` are F32 with the input's shape without its last dimension (one value per row), `rstd`
/// being `1 / sqrt(var + epsilon)` with the biased variance.
///
/// `weight` (gamma) and `bias` (beta) must have shape `[d]` and the input's dtype.
///
/// # Panics
/// Before launching anything, if `input` is a scalar (rank 0) or has an empty last dimension,
/// if gamma or beta has the wrong shape or dtype, if the dtype is not F32/F16/BF16 or not
/// supported by the device, or if `epsilon` is negative or not finite.
pub fn layer_norm_forward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    input: TensorBuffer,
    weight: TensorBuffer,
    bias: Option<TensorBuffer>,
    epsilon: f64,
) -> [TensorBuffer; 3] {
    let problem = check_forward(client, &input, &weight, bias.as_ref(), epsilon);
    if problem.rows == 0 || !settings::tunes(client) {
        return forward::forward(client, input, weight, bias, epsilon, Choice::Default)
            .expect("the default choice always runs");
    }
    tune::forward(client, input, weight, bias, epsilon)
}

/// LayerNorm backward: the gradients of `out = layer_norm(input, weight, bias)` given the
/// upstream gradient `grad` (dy) and the forward's `mean` and `rstd`.
///
/// Autotuned like [`layer_norm_forward`] (its own tuner and cache).
///
/// Returns `[dx, dgamma, dbeta]`: `dx` has the input's dtype and shape (contiguous); `dgamma`
/// and `dbeta` have the weight's dtype and shape `[d]`. `dbeta` is the sum of `dy` over the
/// rows; it does not depend on beta, so it is returned whether or not the forward had a beta,
/// and callers without one may drop it. With zero rows, `dgamma` and `dbeta` are zeros.
///
/// `grad` must have the input's shape and dtype; `mean` and `rstd` must be F32 with one element
/// per row (any shape, e.g. the forward's `[..]` or a keep-dim `[.., 1]`). `rstd` is used as
/// given; `mean` only as a close approximation of the row's mean: the kernel corrects it by the
/// mean of `x - mean` over the row, so `xhat = ((x - mean) - mean(x - mean)) * rstd` is centred
/// on the exact mean of `x` even where the f32 `mean` cannot resolve the row's spread (mean 1e4,
/// std 1e-2). With the forward's statistics the gradients therefore match the exact f64
/// gradient computed from `x` alone (to ~1e-7 relative in f32).
///
/// # Panics
/// Before launching anything, on any mismatch above, or as [`layer_norm_forward`] for the
/// input and weight.
pub fn layer_norm_backward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    input: TensorBuffer,
    weight: TensorBuffer,
    grad: TensorBuffer,
    mean: TensorBuffer,
    rstd: TensorBuffer,
) -> [TensorBuffer; 3] {
    let problem = check_backward(client, &input, &weight, &grad, &mean, &rstd);
    if problem.rows == 0 || !settings::tunes(client) {
        return backward::backward(client, input, weight, grad, mean, rstd, Choice::Default)
            .expect("the default choice always runs");
    }
    tune::backward(client, input, weight, grad, mean, rstd)
}
