//! The differential test suite: every Burn op family on a backend under test against Burn's CPU
//! reference backend, `burn::backend::NdArray`, on the same seeded random inputs; and the
//! gradients of a small MLP, CNN and `TransformerEncoder` under an autodiff backend against
//! `burn::backend::Autodiff<NdArray>` with identical weights.
//!
//! The checks are generic over the backend, so the integration tests run them on
//! `Ruda<RudaWgpu>` on Mesa's lavapipe and the GPU suite on CUDA:
//!
//! ```no_run
//! use burn_ruda::{Ruda, RudaWgpu};
//! type B = Ruda<RudaWgpu>;
//! type A = burn_ruda::Autodiff<B>;
//! let device = cubecl::wgpu::WgpuDevice::Cpu;
//! let outcomes = ruda_tests::differential::run_all::<B, A>(&device, &device);
//! let failed = ruda_tests::differential::report(&outcomes); // PASS/FAIL lines

//! assert_eq!(failed, 0);
//! ```
//!
//! A check never panics on a mismatch: it compares every op of its group, collects every
//! mismatch (op, inputs and their shapes, output shape, worst element) and returns them as one
//! `Err(String)`, one line per mismatch. A panic inside an op (an unsupported op, a kernel
//! error) is caught by [`run_checks`] and reported as a failure of that check (of that case,
//! in the gradient checks). Beware: a panic on the *device thread* (inside a kernel launch
//! behind the fusion stream) leaves that device unusable for the rest of the process, so every
//! later check on it then fails with `CallError`; the first failure is the one to read.
//!
//! Tolerances: `|got - want| <= tol * (1 + |want|)` per element. `1e-4` for f32 elementwise
//! ops; looser values are justified where they are used (accumulation order of long sums,
//! gradients through several layers). Integer and boolean results must be equal.
//!
//! Matrix products (matmul, convolution, attention) may legitimately run in TF32 on the device:
//! CubeCL's matmul stages f32 operands as TF32 on tensor-core GPUs (as PyTorch does for
//! convolutions by default). [`MatmulPrecision::of`] measures whether the device does, and
//! [`Checker::close_products`] then adds the rounding error analysis' bound for products of
//! rounded operands, `eps * magnitude`, where `magnitude` is the same product on the absolute
//! values of the inputs (computed by the reference) and `eps` is 0 for exact f32 products.

pub mod activations;
pub mod float;
pub mod gradients;
pub mod indexing;
pub mod int_bool;
pub mod module_ops;
pub mod products;
pub mod quantization;
pub mod reductions;
pub mod sorting;
pub mod transactions;

use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use burn::backend::NdArray;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Bool, Int, Tensor, TensorData};

/// The CPU reference backend.
pub type Reference = NdArray;
/// The reference of the gradient checks.
pub type ReferenceAutodiff = burn::backend::Autodiff<NdArray>;

/// What every check returns: `Err` lists every mismatch, one per line.
pub type CheckResult = Result<(), String>;

/// The op families of the issue, one `#[test]` each in `tests/tests/backend/burn_backend.rs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Float elementwise ops, strided inputs, matmul.
    Float,
    /// Int ops; comparisons, masks and bool ops.
    IntBool,
    /// Sums, means, products, min/max, arg-reductions, cumulative ops, variance.
    Reductions,
    /// Gather, scatter, select, slice, cat, stack and the layout ops.
    Indexing,
    /// Sort, argsort, top-k.
    Sorting,
    /// Convolutions, transposed convolutions, pooling, interpolation, embedding, attention,
    /// LayerNorm.
    ModuleOps,
    /// The activation functions.
    Activations,
    /// Quantize/dequantize round trips.
    Quantization,
    /// Reads of several tensors of every kind in one transaction.
    Transactions,
    /// Gradients of op-level expressions and of an MLP, a CNN and a `TransformerEncoder`.
    Gradients,
    /// Matrix products in every layout, `linear` forward and backward, chains, f16 and bf16
    /// ([`products`]). Not in [`Family::ALL`]: the GPU suite runs it (see [`products`] why).
    Products,
}

impl Family {
    /// Every family, in the order [`run_all`] runs them.
    pub const ALL: [Family; 10] = [
        Family::Float,
        Family::IntBool,
        Family::Reductions,
        Family::Indexing,
        Family::Sorting,
        Family::ModuleOps,
        Family::Activations,
        Family::Quantization,
        Family::Transactions,
        Family::Gradients,
    ];
}

/// A check, given the device of the backend under test and that of the autodiff backend (used
/// by the gradient checks only).
type CheckFn<D, DA> = fn(&D, &DA) -> CheckResult;

/// A check and its name.
type NamedCheck<D, DA> = (&'static str, CheckFn<D, DA>);

/// Every check of `family`, by name.
fn checks_of<B: Backend, A: AutodiffBackend>(
    family: Family,
) -> Vec<NamedCheck<B::Device, A::Device>> {
    match family {
        Family::Float => vec![
            ("float elementwise", |d, _| float::elementwise::<B>(d)),
            ("float strided inputs", |d, _| float::strided::<B>(d)),
            ("matmul", |d, _| float::matmul::<B>(d)),
        ],
        Family::IntBool => vec![
            ("int ops", |d, _| int_bool::int_ops::<B>(d)),
            ("comparisons, masks, bool ops", |d, _| {
                int_bool::comparisons_and_bool::<B>(d)
            }),
        ],
        Family::Reductions => vec![
            ("float reductions", |d, _| reductions::float::<B>(d)),
            ("long reductions", |d, _| reductions::long::<B>(d)),
        ],
        Family::Indexing => vec![
            ("gather, scatter, select", |d, _| {
                indexing::gather_scatter_select::<B>(d)
            }),
            ("slice, cat, stack", |d, _| indexing::slice_cat::<B>(d)),
            ("layout ops", |d, _| indexing::layout::<B>(d)),
        ],
        Family::Sorting => vec![("sorting", |d, _| sorting::sorting::<B>(d))],
        Family::ModuleOps => vec![
            ("conv1d, conv2d", |d, _| module_ops::conv::<B>(d)),
            ("conv_transpose1d, conv_transpose2d", |d, _| {
                module_ops::conv_transpose::<B>(d)
            }),
            ("pooling", |d, _| module_ops::pooling::<B>(d)),
            ("interpolate", |d, _| module_ops::interpolate::<B>(d)),
            ("embedding", |d, _| module_ops::embedding::<B>(d)),
            ("attention", |d, _| module_ops::attention::<B>(d)),
            ("layer_norm", |d, _| module_ops::layer_norm::<B>(d)),
        ],
        Family::Activations => vec![("activations", |d, _| activations::activations::<B>(d))],
        Family::Quantization => vec![
            ("quantize/dequantize per tensor", |d, _| {
                quantization::per_tensor::<B>(d)
            }),
            ("quantize/dequantize per block", |d, _| {
                quantization::per_block::<B>(d)
            }),
        ],
        Family::Transactions => vec![("transaction", |d, _| transactions::transaction::<B>(d))],
        Family::Gradients => vec![
            ("gradients of ops", |_, a| gradients::ops::<A>(a)),
            ("gradients of module ops", |_, a| {
                gradients::module_ops::<A>(a)
            }),
            ("gradients of an MLP", |_, a| gradients::mlp::<A>(a)),
            ("gradients of a CNN", |_, a| gradients::cnn::<A>(a)),
            ("gradients of a TransformerEncoder", |_, a| {
                gradients::transformer::<A>(a)
            }),
            (
                "gradients of MultiHeadAttention and CrossEntropyLoss",
                |_, a| gradients::attention_loss::<A>(a),
            ),
        ],
        Family::Products => vec![
            ("matmul layouts", |d, _| products::layouts::<B>(d)),
            ("linear forward", |d, _| products::linear_forward::<B>(d)),
            ("chained products", |d, _| products::chain::<B>(d)),
            ("f16 and bf16 products", |d, _| {
                products::half_precision::<B>(d)
            }),
            ("gradients of linear layers", |_, a| {
                products::linear_gradients::<A>(a)
            }),
        ],
    }
}

/// The outcome of one check.
#[derive(Debug)]
pub struct Outcome {
    /// The check's name.
    pub name: &'static str,
    /// `Err` lists every mismatch, one per line.
    pub result: CheckResult,
    /// How long it ran (kernel compilation and autotuning included).
    pub elapsed: Duration,
}

/// The message of a caught panic.
fn panic_message(panic: Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Runs `f`, turning a panic into `Err("panicked: ...")`.
fn catching<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|panic| Err(format!("panicked: {}", panic_message(panic))))
}

/// Runs every check of `families`, catching panics; one [`Outcome`] per check, in order.
pub fn run_checks<B: Backend, A: AutodiffBackend>(
    families: &[Family],
    device: &B::Device,
    autodiff_device: &A::Device,
) -> Vec<Outcome> {
    run_checks_with::<B, A>(families, device, autodiff_device, |_| true)
}

/// [`run_checks`], calling `select` with each check's name before running it: the check runs
/// when it returns `true` (the GPU suite prints the name, so that a check that hangs is named,
/// and runs only the checks `--only` names).
pub fn run_checks_with<B: Backend, A: AutodiffBackend>(
    families: &[Family],
    device: &B::Device,
    autodiff_device: &A::Device,
    mut select: impl FnMut(&str) -> bool,
) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    for &family in families {
        for (name, check) in checks_of::<B, A>(family) {
            if !select(name) {
                continue;
            }
            let start = Instant::now();
            let result = catching(|| check(device, autodiff_device));
            outcomes.push(Outcome {
                name,
                result,
                elapsed: start.elapsed(),
            });
        }
    }
    outcomes
}

/// Runs every check of every family: `B` is the backend under test on `device`, `A` an
/// autodiff backend over it (e.g. `burn_ruda::Autodiff<B>`) on `autodiff_device`.
pub fn run_all<B: Backend, A: AutodiffBackend>(
    device: &B::Device,
    autodiff_device: &A::Device,
) -> Vec<Outcome> {
    run_checks::<B, A>(&Family::ALL, device, autodiff_device)
}

/// Prints one `PASS\tname (seconds)` or `FAIL\tname (seconds): message` line per check (the
/// format of the GPU suite; a multi-line message is indented); returns the number of failures.
pub fn report(outcomes: &[Outcome]) -> usize {
    let mut failed = 0;
    for outcome in outcomes {
        let (name, seconds) = (outcome.name, outcome.elapsed.as_secs_f64());
        match &outcome.result {
            Ok(()) => println!("PASS\t{name} ({seconds:.1} s)"),
            Err(message) => {
                failed += 1;
                println!(
                    "FAIL\t{name} ({seconds:.1} s): {}",
                    message.replace('\n', "\n\t")
                );
            }
        }
    }
    failed
}

/// [`report`]s the outcomes, then panics with every failed check's message when any failed
/// (`what` names the run in the panic).
pub fn assert_passed(outcomes: &[Outcome], what: &str) {
    let failed = report(outcomes);
    let failures: Vec<String> = outcomes
        .iter()
        .filter_map(|o| o.result.as_ref().err().map(|e| format!("{}:\n{e}", o.name)))
        .collect();
    assert_eq!(
        failed,
        0,
        "{failed} of {} {what} checks failed:\n{}",
        outcomes.len(),
        failures.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Data

/// Deterministic values uniform in `[lo, hi)` (xorshift; no global RNG state).
pub fn values(seed: u64, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            lo + (hi - lo) * ((s >> 40) as f32 / (1u64 << 24) as f32)
        })
        .collect()
}

/// Random floats in `[lo, hi)` with `shape`.
pub fn float_data(seed: u64, shape: &[usize], lo: f32, hi: f32) -> TensorData {
    let n = shape.iter().product();
    TensorData::new(values(seed, n, lo, hi), shape.to_vec())
}

/// Random ints in `[0, bound)` with `shape`.
pub fn int_data(seed: u64, shape: &[usize], bound: i64) -> TensorData {
    let n = shape.iter().product();
    let v: Vec<i64> = values(seed, n, 0.0, bound as f32)
        .into_iter()
        .map(|x| (x as i64).clamp(0, bound - 1))
        .collect();
    TensorData::new(v, shape.to_vec())
}

pub(crate) fn f32s(data: &TensorData) -> Vec<f32> {
    data.clone().convert::<f32>().to_vec::<f32>().unwrap()
}

fn i64s(data: &TensorData) -> Vec<i64> {
    data.clone().convert::<i64>().to_vec::<i64>().unwrap()
}

/// Row-major coordinates of flat index `i` in `shape`.
fn coordinates(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for (d, &n) in shape.iter().enumerate().rev() {
        if n > 0 {
            c[d] = i % n;
            i /= n;
        }
    }
    c
}

/// Compares float results: `|got - want| <= tol * (1 + |want|)`, NaN where the reference has
/// NaN, equal infinities. `Err` names the worst element and how many are off.
pub fn compare_floats(got: &TensorData, want: &TensorData, tol: f32) -> CheckResult {
    compare_floats_bounded(got, want, tol, None)
}

/// [`compare_floats`] with an extra allowance per element: `|got - want| <= tol * (1 + |want|)
/// + eps * magnitude`, for `Some((magnitude, eps))` (see [`Checker::close_products`]).
pub fn compare_floats_bounded(
    got: &TensorData,
    want: &TensorData,
    tol: f32,
    allowance: Option<(&TensorData, f32)>,
) -> CheckResult {
    if got.shape != want.shape {
        return Err(format!(
            "output shape {:?}, reference {:?}",
            got.shape.to_vec(),
            want.shape.to_vec()
        ));
    }
    let (g, w) = (f32s(got), f32s(want));
    let extra: Vec<f32> = match allowance {
        Some((magnitude, eps)) if eps > 0.0 => {
            let m = f32s(magnitude);
            if m.len() != w.len() {
                return Err(format!(
                    "magnitude shape {:?} differs from the output shape {:?}",
                    magnitude.shape.to_vec(),
                    want.shape.to_vec()
                ));
            }
            m.iter().map(|v| eps * v.abs()).collect()
        }
        _ => vec![0.0; w.len()],
    };
    let mut bad = 0;
    let mut worst: Option<(usize, f32)> = None;
    for (i, (&x, &y)) in g.iter().zip(&w).enumerate() {
        let bound = tol * (1.0 + y.abs()) + extra[i];
        let ok = (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= bound;
        if !ok {
            bad += 1;
            let excess = if x.is_finite() && y.is_finite() {
                (x - y).abs() / bound
            } else {
                f32::INFINITY
            };
            if worst.is_none_or(|(_, e)| excess > e) {
                worst = Some((i, excess));
            }
        }
    }
    let allowed = match allowance {
        Some((_, eps)) if eps > 0.0 => {
            format!("{tol:.0e} x (1 + |reference|) + {eps:.1e} x magnitude")
        }
        _ => format!("{tol:.0e}"),
    };
    match worst {
        None => Ok(()),
        Some((i, _)) => Err(format!(
            "{bad} of {} elements off by more than {allowed} (output shape {:?}); worst at {:?}: \
             got {}, reference {}",
            g.len(),
            got.shape.to_vec(),
            coordinates(i, &got.shape),
            g[i],
            w[i]
        )),
    }
}

/// How the device under test rounds the operands of f32 matrix products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatmulPrecision {
    /// Exact f32 products; only the order of accumulation differs from the reference.
    F32,
    /// Operands rounded to TF32 (10 explicit mantissa bits), as CubeCL's matmul does on
    /// tensor-core GPUs.
    Tf32,
}

impl MatmulPrecision {
    /// Measures it on `device`: a `[.., m, k] x [.., k, n]` matmul of `1 + 2^-13` by ones sums
    /// to `k + k * 2^-13` in f32, but to `k` when the operands are rounded to TF32. Several
    /// shapes, because a library picks its kernel by shape (cuBLAS runs small products without
    /// tensor cores and larger ones in TF32): the shape of the matmul check, a product of the
    /// size of the other checks' products, and a larger one. Convolutions and attention use the
    /// same matmul engines.
    pub fn of<B: Backend>(device: &B::Device) -> Self {
        let rounds = |batch: [usize; 2], m: usize, k: usize, n: usize| {
            let a = Tensor::<B, 4>::full([batch[0], batch[1], m, k], 1.0 + 2f32.powi(-13), device);
            let b = Tensor::<B, 4>::ones([batch[0], batch[1], k, n], device);
            let got = f32s(&a.matmul(b).into_data());
            let exact = k as f32 * (1.0 + 2f32.powi(-13));
            got.iter()
                .any(|&v| (v - exact).abs() >= k as f32 * 2f32.powi(-15))
        };
        if rounds([2, 3], 17, 9, 13) || rounds([1, 1], 37, 19, 23) || rounds([1, 2], 128, 96, 128) {
            MatmulPrecision::Tf32
        } else {
            MatmulPrecision::F32
        }
    }

    /// The relative error of one product of two rounded operands: 0 for exact f32, else
    /// `(1 + u)^2 - 1` with `u = 2^-10` (TF32 conversion by truncation, the worse of rounding
    /// and truncation).
    pub fn product_error(self) -> f32 {
        match self {
            MatmulPrecision::F32 => 0.0,
            MatmulPrecision::Tf32 => {
                let u = 2f32.powi(-10);
                2.0 * u + u * u
            }
        }
    }

    /// The tolerance of a gradient check whose backward runs matrix products: `tol` for exact
    /// f32, at least `1e-2` of the gradient's size in TF32 (PyTorch's own tests allow TF32
    /// convolutions and matmuls 5e-3 to 5e-2): the gradients of whole models go through chains
    /// of products whose rounding a per-element bound cannot follow.
    pub fn gradient_tol(self, tol: f32) -> f32 {
        match self {
            MatmulPrecision::F32 => tol,
            MatmulPrecision::Tf32 => tol.max(1e-2),
        }
    }
}

/// Compares float results relative to the size of the whole tensor:
/// `|got - want| <= tol * (|want| + max |want|) + atol` per element. For gradients, whose
/// magnitudes vary a lot (an MSE loss averages them down to ~1e-3), where `tol * (1 + |want|)`
/// would be an absolute bound that a 1% error in a small gradient passes; `atol` is the noise
/// floor of a gradient that is zero in exact arithmetic.
pub fn compare_floats_normwise(
    got: &TensorData,
    want: &TensorData,
    tol: f32,
    atol: f32,
) -> CheckResult {
    if got.shape != want.shape {
        return Err(format!(
            "output shape {:?}, reference {:?}",
            got.shape.to_vec(),
            want.shape.to_vec()
        ));
    }
    let (g, w) = (f32s(got), f32s(want));
    let scale = w
        .iter()
        .filter(|v| v.is_finite())
        .fold(0.0f32, |m, v| m.max(v.abs()));
    let mut bad = 0;
    let mut worst: Option<(usize, f32)> = None;
    for (i, (&x, &y)) in g.iter().zip(&w).enumerate() {
        let bound = tol * (y.abs() + scale) + atol;
        let ok = (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= bound;
        if !ok {
            bad += 1;
            let excess = if x.is_finite() && y.is_finite() {
                (x - y).abs() / bound.max(f32::MIN_POSITIVE)
            } else {
                f32::INFINITY
            };
            if worst.is_none_or(|(_, e)| excess > e) {
                worst = Some((i, excess));
            }
        }
    }
    match worst {
        None => Ok(()),
        Some((i, _)) => Err(format!(
            "{bad} of {} elements off by more than {tol:.0e} x (|reference| + {scale:.3e}, the \
             largest |reference|) + {atol:.0e} (output shape {:?}); worst at {:?}: got {}, \
             reference {}",
            g.len(),
            got.shape.to_vec(),
            coordinates(i, &got.shape),
            g[i],
            w[i]
        )),
    }
}

/// Compares int (or bool, as 0/1) results exactly.
pub fn compare_ints(got: &TensorData, want: &TensorData) -> CheckResult {
    if got.shape != want.shape {
        return Err(format!(
            "output shape {:?}, reference {:?}",
            got.shape.to_vec(),
            want.shape.to_vec()
        ));
    }
    let (g, w) = (i64s(got), i64s(want));
    let bad: Vec<usize> = (0..g.len()).filter(|&i| g[i] != w[i]).collect();
    match bad.first() {
        None => Ok(()),
        Some(&i) => Err(format!(
            "{} of {} elements differ (output shape {:?}); first at {:?}: got {}, reference {}",
            bad.len(),
            g.len(),
            got.shape.to_vec(),
            coordinates(i, &got.shape),
            g[i],
            w[i]
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// The checker

/// Builds the same inputs on the backend under test `B` and the reference `Ref`, compares
/// results, and collects every mismatch instead of stopping at the first.
pub struct Checker<'a, B: Backend, Ref: Backend = Reference> {
    device: &'a B::Device,
    reference: Ref::Device,
    inputs: String,
    failures: Vec<String>,
    matmul_precision: Option<MatmulPrecision>,
}

impl<'a, B: Backend, Ref: Backend> Checker<'a, B, Ref> {
    /// A checker of `B` on `device` against `Ref` on its default device.
    pub fn new(device: &'a B::Device) -> Self {
        Self {
            device,
            reference: Default::default(),
            inputs: String::new(),
            failures: Vec::new(),
            matmul_precision: None,
        }
    }

    /// The device under test.
    pub fn device(&self) -> &'a B::Device {
        self.device
    }

    /// The reference device.
    pub fn reference_device(&self) -> &Ref::Device {
        &self.reference
    }

    /// Describes the inputs of the ops that follow (named in every failure message).
    pub fn inputs(&mut self, description: impl Into<String>) {
        self.inputs = description.into();
    }

    /// The same tensor of `data` on both backends.
    pub fn pair<const D: usize>(&self, data: TensorData) -> (Tensor<B, D>, Tensor<Ref, D>) {
        (
            Tensor::from_data(data.clone(), self.device),
            Tensor::from_data(data, &self.reference),
        )
    }

    /// The same random float tensor (uniform in `[-2, 2)`) on both backends.
    pub fn floats<const D: usize>(
        &self,
        seed: u64,
        shape: [usize; D],
    ) -> (Tensor<B, D>, Tensor<Ref, D>) {
        self.floats_in(seed, shape, -2.0, 2.0)
    }

    /// The same random float tensor uniform in `[lo, hi)` on both backends.
    pub fn floats_in<const D: usize>(
        &self,
        seed: u64,
        shape: [usize; D],
        lo: f32,
        hi: f32,
    ) -> (Tensor<B, D>, Tensor<Ref, D>) {
        self.pair(float_data(seed, &shape, lo, hi))
    }

    /// The same random int tensor (values in `[0, bound)`) on both backends.
    pub fn ints<const D: usize>(
        &self,
        seed: u64,
        shape: [usize; D],
        bound: i64,
    ) -> (Tensor<B, D, Int>, Tensor<Ref, D, Int>) {
        let data = int_data(seed, &shape, bound);
        (
            Tensor::from_data(data.clone(), self.device),
            Tensor::from_data(data, &self.reference),
        )
    }

    /// The same bool tensor of `data` on both backends.
    pub fn bools<const D: usize>(
        &self,
        data: TensorData,
    ) -> (Tensor<B, D, Bool>, Tensor<Ref, D, Bool>) {
        (
            Tensor::from_data(data.clone(), self.device),
            Tensor::from_data(data, &self.reference),
        )
    }

    /// Records a failure of `op` (the current inputs are added to the message).
    pub fn fail(&mut self, op: &str, message: impl std::fmt::Display) {
        let mut line = op.to_string();
        if !self.inputs.is_empty() {
            let _ = write!(line, " [inputs {}]", self.inputs);
        }
        let _ = write!(line, ": {message}");
        self.failures.push(line);
    }

    /// Records the outcome of a data comparison of `op`.
    pub fn record(&mut self, op: &str, result: CheckResult) {
        if let Err(message) = result {
            self.fail(op, message);
        }
    }

    /// Float results equal to 1e-4 (f32 elementwise).
    pub fn close<const D: usize>(&mut self, op: &str, got: Tensor<B, D>, want: Tensor<Ref, D>) {
        self.close_tol(op, got, want, 1e-4);
    }

    /// Float results equal to `tol`.
    pub fn close_tol<const D: usize>(
        &mut self,
        op: &str,
        got: Tensor<B, D>,
        want: Tensor<Ref, D>,
        tol: f32,
    ) {
        self.close_data(op, got.into_data(), want.into_data(), tol);
    }

    /// How the device under test rounds f32 matmul operands (measured once per checker).
    pub fn matmul_precision(&mut self) -> MatmulPrecision {
        *self
            .matmul_precision
            .get_or_insert_with(|| MatmulPrecision::of::<B>(self.device))
    }

    /// Float results of a matrix product (matmul, convolution, attention): equal to `tol` plus,
    /// where the device rounds the operands, `product_error * magnitude` per element
    /// ([`MatmulPrecision`]). `magnitude` bounds the sum of the absolute terms of each output,
    /// e.g. `|a|.matmul(|b|)` for `a.matmul(b)`, computed on the reference.
    pub fn close_products<const D: usize>(
        &mut self,
        op: &str,
        got: Tensor<B, D>,
        want: Tensor<Ref, D>,
        magnitude: Tensor<Ref, D>,
        tol: f32,
    ) {
        let eps = self.matmul_precision().product_error();
        let magnitude = magnitude.into_data();
        let result = compare_floats_bounded(
            &got.into_data(),
            &want.into_data(),
            tol,
            Some((&magnitude, eps)),
        );
        self.record(op, result);
    }

    /// Float data equal to `tol`.
    pub fn close_data(&mut self, op: &str, got: TensorData, want: TensorData, tol: f32) {
        let result = compare_floats(&got, &want, tol);
        self.record(op, result);
    }

    /// Int results equal.
    pub fn same_int<const D: usize>(
        &mut self,
        op: &str,
        got: Tensor<B, D, Int>,
        want: Tensor<Ref, D, Int>,
    ) {
        let result = compare_ints(&got.into_data(), &want.into_data());
        self.record(op, result);
    }

    /// Bool results equal.
    pub fn same_bool<const D: usize>(
        &mut self,
        op: &str,
        got: Tensor<B, D, Bool>,
        want: Tensor<Ref, D, Bool>,
    ) {
        let result = compare_ints(&bools(got.into_data()), &bools(want.into_data()));
        self.record(op, result);
    }

    /// `Ok` when nothing failed, else every failure, one per line.
    pub fn finish(self) -> CheckResult {
        if self.failures.is_empty() {
            Ok(())
        } else {
            Err(self.failures.join("\n"))
        }
    }
}

/// Bool data as 0/1 ints, whatever the backend stores.
pub fn bools(data: TensorData) -> TensorData {
    let shape = data.shape.clone();
    let values: Vec<i64> = match data.clone().to_vec::<bool>() {
        Ok(v) => v.into_iter().map(i64::from).collect(),
        Err(_) => i64s(&data).into_iter().map(|v| i64::from(v != 0)).collect(),
    };
    TensorData::new(values, shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(v: &[f32], shape: &[usize]) -> TensorData {
        TensorData::new(v.to_vec(), shape.to_vec())
    }

    #[test]
    fn compare_floats_fails_above_the_tolerance_and_names_the_element() {
        let want = data(&[1.0, -2.0, 0.5, 3.0, f32::NAN, 0.0], &[2, 3]);
        assert!(compare_floats(&want, &want, 1e-4).is_ok());
        let close = data(&[1.0 + 1e-5, -2.0, 0.5, 3.0, f32::NAN, 0.0], &[2, 3]);
        assert!(compare_floats(&close, &want, 1e-4).is_ok());
        let off = data(&[1.0, -2.0, 0.5, 3.0 + 1e-3, f32::NAN, 0.0], &[2, 3]);
        let err = compare_floats(&off, &want, 1e-4).unwrap_err();
        assert!(err.contains("1 of 6") && err.contains("[1, 0]"), "{err}");
        let nan = data(&[1.0, -2.0, 0.5, 3.0, 1.0, 0.0], &[2, 3]);
        assert!(compare_floats(&nan, &want, 1e-4).is_err());
        let reshaped = data(&[1.0, -2.0, 0.5, 3.0, f32::NAN, 0.0], &[3, 2]);
        assert!(compare_floats(&reshaped, &want, 1e-4).is_err());
    }

    #[test]
    fn compare_floats_normwise_catches_a_one_percent_error_in_small_values() {
        let want = data(&[0.02, -0.01, 0.005, 1e-9], &[4]);
        let scaled = data(&[0.0202, -0.0101, 0.00505, 1e-9], &[4]);
        // An absolute bound of 2e-3 misses it; the bound relative to the largest value does not.
        assert!(compare_floats(&scaled, &want, 2e-3).is_ok());
        assert!(compare_floats_normwise(&scaled, &want, 2e-3, 1e-6).is_err());
        let noisy = data(&[0.02, -0.01, 0.005, 3e-8], &[4]);
        assert!(compare_floats_normwise(&noisy, &want, 2e-3, 1e-6).is_ok());
    }

    #[test]
    fn compare_floats_bounded_allows_the_tf32_rounding_of_products_and_no_more() {
        // A sum of products that cancels: reference 0.01, absolute terms summing to 4.
        let want = data(&[0.01, 2.0], &[2]);
        let magnitude = data(&[4.0, 2.0], &[2]);
        let eps = MatmulPrecision::Tf32.product_error();
        let rounded = data(&[0.01 + 3.0 * eps, 2.0 + eps], &[2]);
        assert!(compare_floats(&rounded, &want, 1e-3).is_err());
        assert!(compare_floats_bounded(&rounded, &want, 1e-3, Some((&magnitude, eps))).is_ok());
        // An error beyond the bound (a wrong element) still fails and names the element.
        let wrong = data(&[0.01 + 6.0 * eps, 2.0], &[2]);
        let err = compare_floats_bounded(&wrong, &want, 1e-3, Some((&magnitude, eps)));
        assert!(err.unwrap_err().contains("[0]"));
        // Exact f32 products get no allowance.
        assert_eq!(MatmulPrecision::F32.product_error(), 0.0);
        let exact = MatmulPrecision::F32.product_error();
        assert!(compare_floats_bounded(&rounded, &want, 1e-3, Some((&magnitude, exact))).is_err());
    }

    #[test]
    fn the_reference_multiplies_in_f32() {
        assert_eq!(
            MatmulPrecision::of::<Reference>(&Default::default()),
            MatmulPrecision::F32
        );
    }

    #[test]
    fn compare_ints_is_exact() {
        let want = TensorData::new(vec![1i64, 2, 3], [3]);
        assert!(compare_ints(&want, &want).is_ok());
        let got = TensorData::new(vec![1i64, 2, 4], [3]);
        assert!(compare_ints(&got, &want).unwrap_err().contains("[2]"));
    }

    #[test]
    fn checker_collects_every_failure() {
        let device = Default::default();
        let mut c = Checker::<Reference>::new(&device);
        c.inputs("a: [3]");
        let (a, na) = c.floats(1, [3]);
        c.close("a + 1", a.clone() + 1.0, na.clone() + 1.0);
        c.close("a (wrong)", a.clone() + 1.0, na.clone());
        c.close("a * 2 (wrong)", a * 2.0, na * 3.0);
        let err = c.finish().unwrap_err();
        assert_eq!(err.lines().count(), 2, "{err}");
        assert!(err.contains("a (wrong) [inputs a: [3]]"), "{err}");
    }
}
