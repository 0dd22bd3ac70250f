//! The softmax and log-softmax correctness checks, generic over the runtime: the integration
//! tests run them on Mesa's lavapipe, the GPU suite on CUDA. Every result is compared with the
//! f64 [`reference`] computed from `x` (the backward's from the exact `y`); each check panics
//! with a message naming the case when a result is off, and [`run_all`] runs every group and
//! counts failures.
//!
//! Covered: every variant forced, the automatic choice, every autotune candidate on its own,
//! both kinds, f32/f16/bf16, d = 1 to 50304 (a vocabulary), odd `d` (scalar loads), a transposed
//! input, rank 1 to 4, every dimension (the column kernels, and the move of a long `dim` last),
//! masked (`-inf`) elements, rows that are `-inf` everywhere (NaN), NaN isolation, large
//! offsets (no overflow), empty tensors.

use cubecl::prelude::*;
use cubecl::zspace::{Shape, Strides};
use ruda_runtime::TensorBuffer;
use ruda_runtime::prelude::DType;
use ruda_runtime::softmax::{
    Kind, Variant, softmax_backward, softmax_backward_with, softmax_forward, softmax_forward_with,
    tune::{CANDIDATES, Candidate},
};

use crate::check_groups::{Check, panic_text, run_groups};
use crate::layer_norm_checks::{Rng, round_to, upload};

/// Both kinds, for loops over them.
pub const KINDS: [Kind; 2] = [Kind::Softmax, Kind::LogSoftmax];
/// Every variant, for loops over them.
pub const VARIANTS: [Variant; 6] = [
    Variant::PlanePerRow,
    Variant::CubePerRow,
    Variant::CubePerRowStaged,
    Variant::CubePerRowPipelined,
    Variant::CubePerRowLooped,
    Variant::UnitPerRow,
];

// ---------------------------------------------------------------------------------------------
// Reference

/// `shape` around `dim`: `(outer, d, inner)`.
fn split(shape: &[usize], dim: usize) -> (usize, usize, usize) {
    (
        shape[..dim].iter().product(),
        shape[dim],
        shape[dim + 1..].iter().product(),
    )
}

/// Softmax or log-softmax of row-major `x` (of `shape`) over `dim`, in f64.
pub fn reference_forward(x: &[f32], shape: &[usize], dim: usize, kind: Kind) -> Vec<f64> {
    let (outer, d, inner) = split(shape, dim);
    let mut y = vec![0.0f64; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * d + j) * inner + i;
            let max = (0..d)
                .map(|j| x[at(j)] as f64)
                .fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = (0..d).map(|j| (x[at(j)] as f64 - max).exp()).sum();
            for j in 0..d {
                let shifted = x[at(j)] as f64 - max;
                y[at(j)] = match kind {
                    Kind::Softmax => shifted.exp() / sum,
                    Kind::LogSoftmax => shifted - sum.ln(),
                };
            }
        }
    }
    y
}

/// The input's gradient from the exact output `y` and the output's gradient `dy`, in f64.
pub fn reference_backward(
    y: &[f64],
    dy: &[f32],
    shape: &[usize],
    dim: usize,
    kind: Kind,
) -> Vec<f64> {
    let (outer, d, inner) = split(shape, dim);
    let mut dx = vec![0.0f64; y.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * d + j) * inner + i;
            let sum: f64 = (0..d)
                .map(|j| match kind {
                    Kind::Softmax => dy[at(j)] as f64 * y[at(j)],
                    Kind::LogSoftmax => dy[at(j)] as f64,
                })
                .sum();
            for j in 0..d {
                let (yj, gj) = (y[at(j)], dy[at(j)] as f64);
                dx[at(j)] = match kind {
                    Kind::Softmax => yj * (gj - sum),
                    Kind::LogSoftmax => gj - yj.exp() * sum,
                };
            }
        }
    }
    dx
}

/// Largest `|got - want|` over the largest finite `|want|`; equal values (infinities included)
/// and NaN against NaN match, anything else against a non-finite value is an infinite error.
pub fn max_error(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "compared tensors differ in length");
    let scale = want
        .iter()
        .filter(|w| w.is_finite())
        .fold(0.0f64, |m, v| m.max(v.abs()));
    let scale = if scale > 0.0 { scale } else { 1.0 };
    got.iter()
        .zip(want)
        .map(|(&g, &w)| {
            let g = g as f64;
            if g == w || (g.is_nan() && w.is_nan()) {
                0.0
            } else if !g.is_finite() || !w.is_finite() {
                f64::INFINITY
            } else {
                (g - w).abs() / scale
            }
        })
        .fold(0.0, f64::max)
}

/// Forward and backward tolerances of `dtype` (relative to the largest value) for softmaxes
/// of `d` elements. A row's sum is an f32 sum of `d` terms, some of them sequential within a
/// unit (a unit-per-row kernel adds a quarter of the row one term after another): its rounding
/// grows like `sqrt(d)`, so the f32 bounds do too beyond 256 elements.
fn tolerances(dtype: DType, d: usize) -> (f64, f64) {
    let growth = (d as f64 / 256.0).sqrt().max(1.0);
    match dtype {
        DType::F32 => (2e-6 * growth, 2e-5 * growth),
        DType::F16 => (2e-3, 1e-2),
        _ => (1e-2, 5e-2),
    }
}

// ---------------------------------------------------------------------------------------------
// One case

/// How a case picks its launch.
#[derive(Clone, Copy, Debug)]
pub enum Launch {
    /// The tuned entry points.
    Tuned,
    /// A forced variant.
    Forced(Variant),
    /// An autotune candidate, as the tuner benchmarks it.
    Candidate(Candidate),
}

/// One forward + backward comparison.
#[derive(Clone, Debug)]
pub struct Case {
    name: String,
    shape: Vec<usize>,
    dim: usize,
    dtype: DType,
    launch: Launch,
    /// Stored transposed (the last two dimensions swapped in memory).
    transposed: bool,
    /// Input values; random N(0, 3) when `None`.
    values: Option<Vec<f32>>,
}

impl Case {
    /// A case over the last dimension, f32, tuned launch.
    pub fn new(name: impl Into<String>, shape: &[usize]) -> Self {
        Case {
            name: name.into(),
            shape: shape.to_vec(),
            dim: shape.len() - 1,
            dtype: DType::F32,
            launch: Launch::Tuned,
            transposed: false,
            values: None,
        }
    }

    pub fn dim(mut self, dim: usize) -> Self {
        self.dim = dim;
        self
    }

    pub fn dtype(mut self, dtype: DType) -> Self {
        self.dtype = dtype;
        self
    }

    pub fn launch(mut self, launch: Launch) -> Self {
        self.launch = launch;
        self
    }

    pub fn transposed(mut self) -> Self {
        self.transposed = true;
        self
    }

    pub fn values(mut self, values: Vec<f32>) -> Self {
        self.values = Some(values);
        self
    }

    fn upload<Rt: Runtime>(&self, client: &ComputeClient<Rt>, values: &[f32]) -> TensorBuffer {
        if !self.transposed {
            return upload(client, values, &self.shape, self.dtype);
        }
        // Store with the last two dimensions swapped, then describe it with swapped strides.
        let rank = self.shape.len();
        let (rows, cols) = (self.shape[rank - 2], self.shape[rank - 1]);
        let batch = values.len() / (rows * cols).max(1);
        let mut stored = vec![0.0f32; values.len()];
        for b in 0..batch {
            for r in 0..rows {
                for c in 0..cols {
                    stored[b * rows * cols + c * rows + r] = values[b * rows * cols + r * cols + c];
                }
            }
        }
        let mut stored_shape = self.shape.clone();
        stored_shape.swap(rank - 2, rank - 1);
        let buffer = upload(client, &stored, &stored_shape, self.dtype);
        let mut strides = buffer.strides.to_vec();
        strides.swap(rank - 2, rank - 1);
        TensorBuffer::new(
            buffer.handle,
            Shape::from(self.shape.clone()),
            Strides::new(&strides),
            self.dtype,
        )
    }

    /// Runs the case: `Err` when an autotune candidate cannot run the shape (nothing launched);
    /// panics when a result is off.
    pub fn try_run<Rt: Runtime>(
        &self,
        client: &ComputeClient<Rt>,
        kind: Kind,
    ) -> Result<(), String> {
        let n: usize = self.shape.iter().product();
        let mut rng = Rng(0x5eed ^ n as u64 ^ ((self.dim as u64) << 40));
        let x = match &self.values {
            Some(values) => round_to(values, self.dtype),
            None => round_to(
                &(0..n)
                    .map(|_| (3.0 * rng.normal()) as f32)
                    .collect::<Vec<_>>(),
                self.dtype,
            ),
        };
        let dy = round_to(
            &(0..n).map(|_| rng.normal() as f32).collect::<Vec<_>>(),
            self.dtype,
        );
        let input = self.upload(client, &x);
        let y = match self.launch {
            Launch::Tuned => softmax_forward(client, input, self.dim, kind),
            Launch::Forced(variant) => softmax_forward_with(client, input, self.dim, kind, variant),
            Launch::Candidate(candidate) => candidate.forward(client, input, kind)?,
        };
        let y_host = y.to_f32s(client);
        let want_y = reference_forward(&x, &self.shape, self.dim, kind);
        let grad = upload(client, &dy, &self.shape, self.dtype);
        let dx = match self.launch {
            Launch::Tuned => softmax_backward(client, y, grad, self.dim, kind),
            Launch::Forced(variant) => {
                softmax_backward_with(client, y, grad, self.dim, kind, variant)
            }
            Launch::Candidate(candidate) => candidate.backward(client, y, grad, kind)?,
        };
        let dx_host = dx.to_f32s(client);
        let want_dx = reference_backward(&want_y, &dy, &self.shape, self.dim, kind);
        let (tol_y, tol_dx) = tolerances(self.dtype, self.shape[self.dim]);
        let what = format!(
            "{} {} {:?} dim {} {:?} {:?}{}",
            self.name,
            kind.name(),
            self.shape,
            self.dim,
            self.dtype,
            self.launch,
            if self.transposed { " transposed" } else { "" }
        );
        let err = max_error(&y_host, &want_y);
        assert!(err <= tol_y, "{what}: output error {err:.3e} > {tol_y:.0e}");
        let err = max_error(&dx_host, &want_dx);
        assert!(
            err <= tol_dx,
            "{what}: gradient error {err:.3e} > {tol_dx:.0e}"
        );
        Ok(())
    }

    /// [`Case::try_run`] for both kinds; a candidate that cannot run is an error here.
    pub fn run<Rt: Runtime>(&self, client: &ComputeClient<Rt>) {
        for kind in KINDS {
            if let Err(why) = self.try_run(client, kind) {
                panic!("{}: {why}", self.name);
            }
        }
    }
}

fn supports<Rt: Runtime>(client: &ComputeClient<Rt>, dtype: DType) -> bool {
    let storage: StorageType = dtype.into();
    client.properties().supports_type(storage)
}

// ---------------------------------------------------------------------------------------------
// Groups

/// Shapes every variant must run (or move on from, unforced). 300 rows: more than the pipelined
/// variant launches cubes where the device does not report its SM count (wgpu, lavapipe), so
/// its cubes work through two rows or one, unevenly.
const ROW_SHAPES: &[&[usize]] = &[
    &[5, 1],
    &[7, 3],
    &[64, 76],
    &[33, 256],
    &[9, 1000],
    &[3, 4099],
    &[300, 520],
];

/// Every variant forced, both kinds, at the shapes it can run (a forced variant that cannot
/// run a shape must panic before launching: checked too).
pub fn every_variant<Rt: Runtime>(client: &ComputeClient<Rt>) {
    for variant in VARIANTS {
        for &shape in ROW_SHAPES {
            let case = Case::new("forced", shape).launch(Launch::Forced(variant));
            let result =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| case.run(client)));
            if let Err(panic) = result {
                let message = panic_text(&panic);
                // Only a refusal before launching is allowed, never a wrong result.
                assert!(
                    message.contains(&format!("softmax {variant:?}:")),
                    "{variant:?} at {shape:?}: {message}"
                );
            }
        }
    }
}

/// The automatic choice at rows of every length the tuner meets, a transposed input, rank 1
/// and 4 (attention scores).
pub fn automatic_choice<Rt: Runtime>(client: &ComputeClient<Rt>) {
    for &shape in ROW_SHAPES {
        Case::new("tuned", shape).run(client);
    }
    Case::new("rank 1", &[300]).run(client);
    Case::new("attention scores", &[2, 4, 16, 16]).run(client);
    Case::new("transposed", &[2, 24, 40])
        .transposed()
        .run(client);
    Case::new("vocabulary", &[4, 50304]).run(client);
    Case::new("odd and long", &[2, 20011]).run(client);
}

/// Every autotune candidate on its own, planned as the tuner benchmarks it; each must run
/// somewhere, and every run must match the reference.
pub fn every_autotune_candidate<Rt: Runtime>(client: &ComputeClient<Rt>) {
    let shapes: &[&[usize]] = &[
        &[64, 76],
        &[40, 256],
        &[6, 3000],
        &[3, 20000],
        &[2, 50304],
        &[65, 7],
    ];
    let mut ran = vec![false; CANDIDATES.len()];
    let mut failures = Vec::new();
    for &shape in shapes {
        for (index, &candidate) in CANDIDATES.iter().enumerate() {
            for kind in KINDS {
                let case = Case::new("candidate", shape).launch(Launch::Candidate(candidate));
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    case.try_run(client, kind)
                }));
                match result {
                    Ok(Ok(())) => ran[index] = true,
                    Ok(Err(_skipped)) => {}
                    Err(panic) => failures.push(format!(
                        "{} {} at {shape:?}: {}",
                        candidate.name(),
                        kind.name(),
                        panic_text(&panic)
                    )),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    for (candidate, ran) in CANDIDATES.iter().zip(ran) {
        assert!(
            ran,
            "candidate {} ran at none of {shapes:?}",
            candidate.name()
        );
    }
}

/// Every dimension of rank-3 and rank-4 tensors: the column kernels (adjacent columns a
/// vector where `inner` allows), and a long dimension that is not the last (moved last on a
/// device whose units would loop past lavapipe's limit).
pub fn other_dimensions<Rt: Runtime>(client: &ComputeClient<Rt>) {
    for dim in 0..3 {
        Case::new("rank 3", &[3, 5, 8]).dim(dim).run(client);
    }
    for dim in 0..4 {
        Case::new("rank 4", &[2, 3, 4, 6]).dim(dim).run(client);
    }
    Case::new("odd inner", &[4, 33, 3]).dim(1).run(client);
    Case::new("transposed, dim 1", &[2, 12, 20])
        .dim(1)
        .transposed()
        .run(client);
    Case::new("long dim, not last", &[2, 30000, 3])
        .dim(1)
        .run(client);
}

/// f16 and bf16 where the device has them, in the automatic choice and forced variants.
pub fn half_precision<Rt: Runtime>(client: &ComputeClient<Rt>) {
    for dtype in [DType::F16, DType::BF16] {
        if !supports(client, dtype) {
            println!("note: {dtype:?} not supported by this device, skipped");
            continue;
        }
        for &shape in &[&[33usize, 256][..], &[4, 3000], &[3, 50304]] {
            Case::new("half", shape).dtype(dtype).run(client);
        }
        Case::new("half, dim 0", &[40, 6])
            .dim(0)
            .dtype(dtype)
            .run(client);
        for variant in [
            Variant::CubePerRowStaged,
            Variant::CubePerRowPipelined,
            Variant::CubePerRowLooped,
        ] {
            Case::new("half forced", &[4, 3000])
                .dtype(dtype)
                .launch(Launch::Forced(variant))
                .run(client);
        }
    }
}

/// Masked elements (`-inf`) get 0 (log: `-inf`); a row of `-inf` everywhere and a row with
/// `+inf` are NaN; a NaN stays in its row; large offsets do not overflow. In every variant.
/// The six special rows repeat 64 times (384 rows): more rows than the pipelined variant
/// launches cubes on lavapipe, so a NaN row's statistics must not reach the row its cube loads
/// or writes in the same step.
pub fn special_values<Rt: Runtime>(client: &ComputeClient<Rt>) {
    const REPEATS: usize = 64;
    let d = 40;
    let block = 6;
    let rows = block * REPEATS;
    let mut x: Vec<f32> = (0..block * d)
        .map(|i| ((i * 37) % 23) as f32 * 0.25)
        .collect();
    // Row 0: a causal mask's upper part.
    for v in &mut x[d / 2..d] {
        *v = f32::NEG_INFINITY;
    }
    // Row 1: -inf everywhere.
    for v in &mut x[d..2 * d] {
        *v = f32::NEG_INFINITY;
    }
    // Row 2: one NaN.
    x[2 * d + 7] = f32::NAN;
    // Row 3: a large offset (exp(1e4) overflows unless shifted).
    for v in &mut x[3 * d..4 * d] {
        *v += 1e4;
    }
    // Row 4: +inf.
    x[4 * d + 3] = f32::INFINITY;
    // Row 5: masked with Burn's `min_float` (-1e4) rather than -inf.
    for v in &mut x[5 * d + 10..6 * d] {
        *v = -1e4;
    }
    let x = x.repeat(REPEATS);
    let mut launches: Vec<Launch> = VARIANTS.iter().map(|&v| Launch::Forced(v)).collect();
    launches.push(Launch::Tuned);
    for launch in launches {
        for kind in KINDS {
            let input = upload(client, &x, &[rows, d], DType::F32);
            let y = match launch {
                Launch::Forced(variant) => softmax_forward_with(client, input, 1, kind, variant),
                _ => softmax_forward(client, input, 1, kind),
            };
            let got = y.to_f32s(client);
            let want = reference_forward(&x, &[rows, d], 1, kind);
            let what = format!("{launch:?} {}", kind.name());
            // The reference gives the same special values: NaN rows 1, 2, 4 of every block;
            // zeros (-inf) in row 0's masked half.
            for first in (0..rows).step_by(block) {
                let row = |r: usize| &got[(first + r) * d..(first + r + 1) * d];
                assert!(
                    row(1).iter().all(|v| v.is_nan()),
                    "{what}: -inf row {:?}",
                    row(1)
                );
                assert!(
                    row(2).iter().all(|v| v.is_nan()),
                    "{what}: NaN row {:?}",
                    row(2)
                );
                assert!(
                    row(4).iter().all(|v| v.is_nan()),
                    "{what}: +inf row {:?}",
                    row(4)
                );
                for r in [0, 3, 5] {
                    assert!(
                        row(r).iter().all(|v| !v.is_nan()),
                        "{what}: row {} has NaN: {:?}",
                        first + r,
                        row(r)
                    );
                }
                let masked = if kind == Kind::Softmax {
                    0.0
                } else {
                    f32::NEG_INFINITY
                };
                assert!(
                    row(0)[d / 2..].iter().all(|&v| v == masked),
                    "{what}: masked {:?}",
                    row(0)
                );
            }
            let err = max_error(&got, &want);
            assert!(err <= 2e-6, "{what}: error {err:.3e}");
        }
    }
}

/// Empty tensors: empty outputs, nothing launched.
pub fn empty<Rt: Runtime>(client: &ComputeClient<Rt>) {
    for shape in [&[0usize, 5][..], &[4, 0], &[0]] {
        for kind in KINDS {
            let dim = shape.len() - 1;
            let input = upload(client, &[], shape, DType::F32);
            let y = softmax_forward(client, input, dim, kind);
            assert_eq!(y.shape.to_vec(), shape.to_vec());
            let grad = upload(client, &[], shape, DType::F32);
            let dx = softmax_backward(client, y, grad, dim, kind);
            assert_eq!(dx.num_elements(), 0);
        }
    }
}

/// Shapes of a transformer step on a GPU: attention scores and a vocabulary's logits.
pub fn gpu_shapes<Rt: Runtime>(client: &ComputeClient<Rt>) {
    Case::new("attention", &[32, 8, 256, 256]).run(client);
    Case::new("logits", &[8192, 76]).run(client);
    Case::new("vocabulary", &[8192, 50304]).run(client);
    // Several rows a cube on a GPU (the small shapes of the other groups fit in one wave).
    Case::new("vocabulary, pipelined", &[8192, 50304])
        .launch(Launch::Forced(Variant::CubePerRowPipelined))
        .run(client);
    if supports(client, DType::BF16) {
        Case::new("attention bf16", &[32, 8, 256, 256])
            .dtype(DType::BF16)
            .run(client);
        Case::new("vocabulary bf16", &[1024, 50304])
            .dtype(DType::BF16)
            .run(client);
        Case::new("vocabulary bf16, pipelined", &[1024, 50304])
            .dtype(DType::BF16)
            .launch(Launch::Forced(Variant::CubePerRowPipelined))
            .run(client);
    }
}

/// Runs every group on `client`, printing one line per group; returns the number that failed.
pub fn run_all<Rt: Runtime>(client: &ComputeClient<Rt>, include_gpu_shapes: bool) -> usize {
    let mut groups: Vec<(&str, Check<Rt>)> = vec![
        ("softmax: every variant", every_variant::<Rt>),
        ("softmax: automatic choice", automatic_choice::<Rt>),
        (
            "softmax: every autotune candidate",
            every_autotune_candidate::<Rt>,
        ),
        ("softmax: other dimensions", other_dimensions::<Rt>),
        ("softmax: half precision", half_precision::<Rt>),
        ("softmax: special values", special_values::<Rt>),
        ("softmax: empty tensors", empty::<Rt>),
    ];
    if include_gpu_shapes {
        groups.push(("softmax: GPU shapes", gpu_shapes::<Rt>));
    }
    run_groups(client, &groups)
}

/// Uploads row-major f32 values with `shape`.
pub fn upload_f32<Rt: Runtime>(
    client: &ComputeClient<Rt>,
    values: &[f32],
    shape: &[usize],
) -> TensorBuffer {
    upload(client, values, shape, DType::F32)
}
