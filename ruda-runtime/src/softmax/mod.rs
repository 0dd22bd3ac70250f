//! Native fused softmax and log-softmax (forward and backward) for every CubeCL runtime.
//!
//! Over dimension `dim` of a tensor of any rank >= 1:
//!
//! ```text
//! softmax:      y = exp(x - max) / sum(exp(x - max))     dx = y * (dy - sum(dy * y))
//! log-softmax:  y = (x - max) - ln(sum(exp(x - max)))    dx = dy - exp(y) * sum(dy)
//! ```
//!
//! One launch a pass, where Burn composes each from five or more (max, subtract, exp, sum,
//! divide, and as many again backward). The backward takes the forward's output `y`, not its
//! input: it is all the gradient needs.
//!
//! - Element types F32, F16 and BF16 (where the device supports it), input and output of one
//!   dtype; all arithmetic in f32.
//! - Numerics: shifted by the maximum, so no exponential overflows; elements that are `-inf`
//!   (masked positions) get exactly 0 (log-softmax `-inf`); a row that is `-inf` everywhere, or
//!   holds `+inf`, has no distribution and comes out NaN, as in PyTorch and Burn's composed
//!   softmax; a NaN makes its own row NaN and no other.
//! - The last dimension (`dim == rank - 1`, attention scores and logits) runs the row kernels
//!   ([`Variant`], autotuned per [`tune::SoftmaxKey`]); another dimension runs the column
//!   kernels, which read the softmax's elements `inner` apart without moving them (coalesced
//!   across adjacent columns), or, where a unit would loop past lavapipe's limit, moves `dim`
//!   last with one copy.
//! - Strided inputs are copied to a contiguous layout first (CubeCL's `into_contiguous`).
//! - Empty tensors return empty outputs with nothing launched.
//!
//! Bad arguments panic before anything is launched, with a message naming the operation and
//! the shapes ([`validate`]); backends run the same checks on the caller's thread before they
//! queue anything.

// Host side of each pass: route, plan, launch.
pub(crate) mod backward;
pub(crate) mod forward;
// The `#[cube]` kernels.
mod kernels;
// Moving `dim` last and back (the column kernels' fallback).
mod layout;
// Launch shapes.
pub(crate) mod plan;
pub mod tune;
// Argument checks, before anything is queued or launched.
pub mod validate;

use cubecl::client::ComputeClient;

use crate::autotune::settings;
use crate::tensor_buffer::TensorBuffer;

pub use plan::MAX_VECTORS_PER_UNIT;
pub use validate::{Problem, supports_dtype};

/// `RUDA_SOFTMAX`: `burn` (also `off`, `0`, `false`, `no`) makes the backends run Burn's
/// composed softmax and log-softmax instead of these kernels (to compare the two in one build);
/// anything else, or unset, runs the native kernels.
pub const ENV_SOFTMAX: &str = "RUDA_SOFTMAX";

/// Whether the backends run the native kernels (`RUDA_SOFTMAX`, read once per process).
pub fn native_enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| crate::env::switch_on(ENV_SOFTMAX, &["burn"]))
}

/// Softmax or log-softmax.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Kind {
    /// `exp(x - max) / sum(exp(x - max))`.
    Softmax,
    /// `(x - max) - ln(sum(exp(x - max)))`.
    LogSoftmax,
}

impl Kind {
    /// The operation's name in messages: `softmax` or `log_softmax`, as Burn names them.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Softmax => "softmax",
            Kind::LogSoftmax => "log_softmax",
        }
    }

    /// The backward pass's name in messages.
    pub const fn backward_name(self) -> &'static str {
        match self {
            Kind::Softmax => "softmax backward",
            Kind::LogSoftmax => "log_softmax backward",
        }
    }

    fn is_log(self) -> bool {
        self == Kind::LogSoftmax
    }
}

/// How the rows of the last-dimension path are spread over the device. Every variant computes
/// the same result (up to f32 rounding); they differ in speed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// One plane (or, without plane operations, up to 32 units) per row, several rows a cube,
    /// the row held in registers (up to [`MAX_VECTORS_PER_UNIT`] vectors a unit): one read.
    /// Short rows (attention scores).
    PlanePerRow,
    /// One cube of up to 256 units per row, about four vectors a unit, in registers: one read.
    CubePerRow,
    /// One cube per row, looping over the row in chunks; the row (forward: `x`; backward:
    /// `dy`) is staged in shared memory on the first pass, so it is read from memory once.
    /// Where the row fits in the device's shared memory (an H200 takes 227 KiB a cube: a
    /// vocabulary of 50304 f32 logits).
    CubePerRowStaged,
    /// The staged layout with about as many cubes as the device runs at once, each working
    /// through several rows as a pipeline: a step writes the result of the row staged by the
    /// step before while it loads the next row into the same shared memory, so reads and writes
    /// go out together, where a staged cube alone on its SM alternates between them. Same
    /// rows as [`Variant::CubePerRowStaged`].
    CubePerRowPipelined,
    /// One cube per row, looping over the row in chunks and reading it twice: any length.
    CubePerRowLooped,
    /// One unit per row, no shared memory and no barrier (three light passes over the row):
    /// for devices without plane operations, where a barrier costs more than a re-read from
    /// cache (Mesa's lavapipe). Bounded by lavapipe's loop limit.
    UnitPerRow,
}

impl Variant {
    /// The variant an unforced launch moves on to when this one cannot run a shape.
    fn next(self) -> Option<Variant> {
        match self {
            Variant::PlanePerRow => Some(Variant::CubePerRow),
            Variant::CubePerRow => Some(Variant::CubePerRowStaged),
            Variant::CubePerRowStaged | Variant::CubePerRowPipelined | Variant::UnitPerRow => {
                Some(Variant::CubePerRowLooped)
            }
            Variant::CubePerRowLooped => None,
        }
    }
}

/// The default variant for `rows` rows of `d` elements, on a device with (`has_plane`) or
/// without usable plane operations (the choice without tuning, `RUDA_AUTOTUNE=off`):
/// [`Variant::UnitPerRow`] without plane operations from 64 rows; else
/// [`Variant::PlanePerRow`] up to `d = 1024`, [`Variant::CubePerRow`] up to `d = 16384`,
/// [`Variant::CubePerRowStaged`] beyond. A launch moves on (register variants to the staged
/// one, the staged and unit variants to the looped one) when its variant cannot run the shape.
pub fn choose_variant(d: usize, rows: usize, has_plane: bool) -> Variant {
    if !has_plane && rows >= 64 {
        Variant::UnitPerRow
    } else if d <= 1024 {
        Variant::PlanePerRow
    } else if d <= 16384 {
        Variant::CubePerRow
    } else {
        Variant::CubePerRowStaged
    }
}

/// How a call picks its launch shape (crate-internal).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Choice {
    /// [`choose_variant`], moving on where it cannot run.
    Default,
    /// A forced variant; panics when it cannot run the shape.
    Forced(Variant),
    /// An autotune candidate. `strict` (benchmarking it): an error, before anything is
    /// launched, when it cannot run the shape as asked; otherwise (running the chosen candidate
    /// on a shape of its key) it moves on like [`Choice::Default`].
    Candidate {
        /// The variant.
        variant: Variant,
        /// Half the widest vector.
        narrow: bool,
        /// Refuse rather than move on.
        strict: bool,
    },
}

impl Choice {
    /// The plan for `rows` rows of `d` elements.
    pub(crate) fn plan<R: cubecl::Runtime>(
        self,
        client: &ComputeClient<R>,
        rows: usize,
        d: usize,
        elem_size: usize,
        handles: &[&cubecl::server::Handle],
        pass: plan::Pass,
    ) -> Result<plan::Plan, String> {
        let has_plane = crate::group_reduce::usable_plane_size(client) > 0;
        let (mut variant, narrow) = match self {
            Choice::Default => (choose_variant(d, rows, has_plane), false),
            Choice::Forced(variant) => (variant, false),
            Choice::Candidate {
                variant, narrow, ..
            } => (variant, narrow),
        };
        let mut narrow = narrow;
        loop {
            match plan::Plan::new(client, rows, d, elem_size, handles, variant, narrow, pass) {
                Ok(plan) => return Ok(plan),
                Err(why) => match self {
                    Choice::Forced(_) => panic!("{why}"),
                    Choice::Candidate { strict: true, .. } => return Err(why),
                    _ => {
                        narrow = false;
                        variant = variant.next().expect("the looped variant runs any row");
                    }
                },
            }
        }
    }
}

/// Softmax or log-softmax of `input` over `dim`: a fresh buffer of the input's shape and
/// dtype (contiguous, except where a long `dim` that is not the last was moved last: then a
/// strided view of a contiguous buffer).
///
/// The last-dimension path is autotuned per (d bucket, vector width, rows bucket, dtype)
/// ([`tune::SoftmaxKey`]), cached like LayerNorm's ([`crate::autotune`]); `RUDA_AUTOTUNE=off`,
/// and a CPU adapter unless `RUDA_AUTOTUNE=on`, run [`choose_variant`].
///
/// # Panics
/// Before launching anything, on a scalar input, `dim >= rank`, a dtype other than
/// F32/F16/BF16 or one the device does not support.
pub fn softmax_forward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    input: TensorBuffer,
    dim: usize,
    kind: Kind,
) -> TensorBuffer {
    let problem = validate::check_forward(kind, &input.shape, input.dtype, dim);
    validate::check_device(client, kind.name(), &input.shape, input.dtype);
    if problem.inner > 1 || problem.num_elements() == 0 || !settings::tunes(client) {
        return forward::forward(client, input, dim, kind, Choice::Default)
            .expect("the default choice always runs");
    }
    tune::forward(client, input, kind)
}

/// The gradient of [`softmax_forward`]'s input from its `output` and the output's gradient
/// `grad`: a fresh buffer of the output's shape and dtype (contiguous, or as the forward for a
/// long `dim` that is not the last). Autotuned like the forward pass (its own tuner).
///
/// # Panics
/// Before launching anything, as [`softmax_forward`], and when `grad`'s shape or dtype differs
/// from `output`'s.
pub fn softmax_backward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    output: TensorBuffer,
    grad: TensorBuffer,
    dim: usize,
    kind: Kind,
) -> TensorBuffer {
    let problem = validate::check_backward(
        kind,
        (&output.shape, output.dtype),
        (&grad.shape, grad.dtype),
        dim,
    );
    validate::check_device(client, kind.backward_name(), &output.shape, output.dtype);
    if problem.inner > 1 || problem.num_elements() == 0 || !settings::tunes(client) {
        return backward::backward(client, output, grad, dim, kind, Choice::Default)
            .expect("the default choice always runs");
    }
    tune::backward(client, output, grad, kind)
}

/// [`softmax_forward`] with a forced [`Variant`] for the last-dimension path (another `dim`
/// runs the column kernels whatever the variant).
///
/// # Panics
/// As [`softmax_forward`]; also, before launching anything, when the variant cannot run the
/// shape (a row too long for its registers or for shared memory, a unit looping past
/// lavapipe's limit).
pub fn softmax_forward_with<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    input: TensorBuffer,
    dim: usize,
    kind: Kind,
    variant: Variant,
) -> TensorBuffer {
    validate::check_forward(kind, &input.shape, input.dtype, dim);
    validate::check_device(client, kind.name(), &input.shape, input.dtype);
    forward::forward(client, input, dim, kind, Choice::Forced(variant))
        .expect("forced variants panic")
}

/// [`softmax_backward`] with a forced [`Variant`], as [`softmax_forward_with`].
///
/// # Panics
/// As [`softmax_backward`] and [`softmax_forward_with`].
pub fn softmax_backward_with<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    output: TensorBuffer,
    grad: TensorBuffer,
    dim: usize,
    kind: Kind,
    variant: Variant,
) -> TensorBuffer {
    validate::check_backward(
        kind,
        (&output.shape, output.dtype),
        (&grad.shape, grad.dtype),
        dim,
    );
    validate::check_device(client, kind.backward_name(), &output.shape, output.dtype);
    backward::backward(client, output, grad, dim, kind, Choice::Forced(variant))
        .expect("forced variants panic")
}
