//! The GELU kernels' correctness checks, generic over the runtime: the integration tests run
//! them on Mesa's lavapipe, the GPU suite on CUDA. Every result is compared with an f64
//! reference computed on the host from the values the device sees (rounded to the dtype): the
//! forward `x * (erf(x / sqrt(2)) + 1) / 2`, the backward `gelu'(x) * dy` with the derivative of
//! Burn's default `gelu_backward` (the tanh approximation's, Burn's constants).
//!
//! Covered: f32, f16 and bf16 (where the device has them), lengths that vectorize and odd
//! ones (scalar loads), more vectors than the grid's units (the loop), a transposed input and
//! gradient (copied to contiguous first), large magnitudes (no overflow of `x^3` in f32 math),
//! NaN and infinities, empty tensors, and the shape check.

use cubecl::prelude::*;
use ruda_runtime::TensorBuffer;
use ruda_runtime::gelu::{gelu_backward, gelu_forward};
use ruda_runtime::prelude::DType;

use crate::check_groups::{Check, panic_text, run_groups};
use crate::layer_norm_checks::{Rng, round_to, upload, upload_transposed};

/// GELU in f64.
pub fn reference_forward(x: f64) -> f64 {
    x * (libm::erf(x / std::f64::consts::SQRT_2) + 1.0) / 2.0
}

/// The derivative Burn's `gelu_backward` uses, in f64 (that of GELU's tanh approximation, with
/// Burn's constants).
pub fn reference_derivative(x: f64) -> f64 {
    let x3 = x * x * x;
    let tanh = (0.0356774 * x3 + 0.797885 * x).tanh();
    let inner2 = 0.0535161 * x3 + 0.398942 * x;
    tanh * 0.5 + (inner2 * (1.0 - tanh * tanh) + 0.5)
}

/// The error allowed for `dtype` by rounding the result once: `(relative, floor)`, relative to
/// the exact value, and the smallest normal value (results below it may be flushed or
/// subnormal: f16's spacing there is 2^-24).
fn rounding_tolerance(dtype: DType) -> (f64, f64) {
    match dtype {
        DType::F32 => (4e-7, f32::MIN_POSITIVE as f64),
        DType::F16 => (1e-3, 6e-8),
        _ => (8e-3, f32::MIN_POSITIVE as f64),
    }
}

/// The forward's absolute error allowed at `x` on top of rounding: an erf approximation of
/// absolute error 1.5e-7 (CubeCL's polyfill on wgpu) scaled by `|x| / 2`, plus f32 arithmetic.
fn forward_slack(x: f64) -> f64 {
    1e-7 * (1.0 + x.abs())
}

/// The derivative's absolute error allowed at `x` on top of rounding: as the forward's, plus the
/// cancellation in `1 - tanh^2` where tanh is near +-1 (a few f32 ulps, multiplied by
/// `|c3 x^3 + c4 x|`), inherent in the formula Burn's backends evaluate the same way.
fn derivative_slack(x: f64) -> f64 {
    let inner2 = 0.0535161 * x * x * x + 0.398942 * x;
    1e-7 * (1.0 + x.abs()) + 5e-7 * inner2.abs()
}

fn supports<Rt: Runtime>(client: &ComputeClient<Rt>, dtype: DType) -> bool {
    let storage: StorageType = dtype.into();
    client.properties().supports_type(storage)
}

/// Compares `got` with `exact * scale` element by element: an element passes when its error is
/// below `(slack + relative * |exact|) * |scale|` plus the dtype's floor; NaN must be NaN, an
/// infinity the same infinity.
fn compare(
    what: &str,
    dtype: DType,
    x: &[f64],
    got: &[f64],
    exact: &[f64],
    slack: &[f64],
    scale: &[f64],
) {
    assert_eq!(
        got.len(),
        exact.len(),
        "{what}: {} values, expected {}",
        got.len(),
        exact.len()
    );
    let (relative, floor) = rounding_tolerance(dtype);
    for (i, &g) in got.iter().enumerate() {
        let w = exact[i] * scale[i];
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= (slack[i] + relative * exact[i].abs()) * scale[i].abs() + floor
        };
        assert!(
            ok,
            "{what} ({dtype:?}): element {i} (x = {}) is {g}, expected {w}",
            x[i]
        );
    }
}

/// Uploads `values` as `dtype` (f32, f16 or bf16), optionally stored transposed (`[rows, d]` as
/// `[d, rows]` with swapped strides); returns the buffer and the values the device holds.
fn upload_as<Rt: Runtime>(
    client: &ComputeClient<Rt>,
    values: &[f64],
    shape: &[usize],
    dtype: DType,
    transposed: bool,
) -> (TensorBuffer, Vec<f64>) {
    let narrow: Vec<f32> = values.iter().map(|&v| v as f32).collect();
    let rounded = round_to(&narrow, dtype);
    let seen = rounded.iter().map(|&v| v as f64).collect();
    let buffer = if transposed {
        let (rows, d) = (shape[0], shape[1]);
        upload_transposed(client, &rounded, rows, d, dtype)
    } else {
        upload(client, &rounded, shape, dtype)
    };
    (buffer, seen)
}

/// One forward and one backward of `shape` and `dtype` on `x` and `dy`, against the reference.
fn case<Rt: Runtime>(
    client: &ComputeClient<Rt>,
    name: &str,
    shape: &[usize],
    dtype: DType,
    transposed: bool,
    x: &[f64],
    dy: &[f64],
) {
    let (x_buffer, x_seen) = upload_as(client, x, shape, dtype, transposed);
    let (dy_buffer, dy_seen) = upload_as(client, dy, shape, dtype, transposed);
    let y = gelu_forward(client, x_buffer.clone());
    assert_eq!(y.shape.to_vec(), shape.to_vec(), "{name}: forward's shape");
    assert_eq!(y.dtype, dtype, "{name}: forward's dtype");
    let exact: Vec<f64> = x_seen.iter().map(|&v| reference_forward(v)).collect();
    let slack: Vec<f64> = x_seen.iter().map(|&v| forward_slack(v)).collect();
    let ones = vec![1.0; exact.len()];
    let got = y.to_f64s(client);
    compare(
        &format!("{name}: forward"),
        dtype,
        &x_seen,
        &got,
        &exact,
        &slack,
        &ones,
    );

    let dx = gelu_backward(client, x_buffer, dy_buffer);
    assert_eq!(
        dx.shape.to_vec(),
        shape.to_vec(),
        "{name}: backward's shape"
    );
    let exact: Vec<f64> = x_seen.iter().map(|&v| reference_derivative(v)).collect();
    let slack: Vec<f64> = x_seen.iter().map(|&v| derivative_slack(v)).collect();
    let got = dx.to_f64s(client);
    compare(
        &format!("{name}: backward"),
        dtype,
        &x_seen,
        &got,
        &exact,
        &slack,
        &dy_seen,
    );
}

/// `n` values in `[-range, range)` and `n` gradients, normal.
fn random(seed: u64, n: usize, range: f64) -> (Vec<f64>, Vec<f64>) {
    let mut rng = Rng(seed);
    let x = (0..n)
        .map(|_| (rng.uniform() * 2.0 - 1.0) * range)
        .collect();
    let dy = (0..n).map(|_| rng.normal()).collect();
    (x, dy)
}

/// Shapes that vectorize (multiples of 4 and 8), odd lengths (scalar loads), and a tensor of
/// more vectors than the grid holds units (65,535 cubes of 256: the units loop).
const SHAPES: &[&[usize]] = &[
    &[1],
    &[7],
    &[33, 256],
    &[3, 1001],
    &[2, 3, 4, 5],
    &[4, 3000],
];

/// Every dtype the device has, at every shape, on values in [-6, 6).
pub fn dtypes_and_shapes<Rt: Runtime>(client: &ComputeClient<Rt>) {
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        if !supports(client, dtype) {
            println!("note: {dtype:?} not supported by this device, skipped");
            continue;
        }
        for (k, &shape) in SHAPES.iter().enumerate() {
            let n = shape.iter().product();
            let (x, dy) = random(11 + k as u64, n, 6.0);
            case(
                client,
                &format!("gelu {shape:?}"),
                shape,
                dtype,
                false,
                &x,
                &dy,
            );
        }
    }
}

/// A transposed input and gradient (copied to contiguous before the kernel).
pub fn strided<Rt: Runtime>(client: &ComputeClient<Rt>) {
    for dtype in [DType::F32, DType::BF16] {
        if !supports(client, dtype) {
            continue;
        }
        let (x, dy) = random(5, 48 * 20, 6.0);
        case(client, "gelu transposed", &[48, 20], dtype, true, &x, &dy);
    }
}

/// More vectors than the grid holds units: 65,535 cubes of 256 units cover 16,776,960 vectors,
/// so a tensor of 17,000,001 elements (odd: scalar loads; 68 MB in f32, within wgpu's buffer
/// limits) makes the first units loop twice.
pub fn long<Rt: Runtime>(client: &ComputeClient<Rt>) {
    let n = 17_000_001;
    let (x, dy) = random(17, n, 6.0);
    case(client, "gelu long", &[n], DType::F32, false, &x, &dy);
}

/// Large magnitudes (`x^3` overflows f16 but not the f32 math), signed zeros, NaN and
/// infinities: `gelu(+inf) = +inf`, `gelu(-inf)` and everything of a NaN is NaN (as Burn's
/// composed GELU gives), and the backward at +-inf is NaN (`inf * 0` in the derivative).
pub fn special_values<Rt: Runtime>(client: &ComputeClient<Rt>) {
    let x = [
        0.0,
        -0.0,
        1e-30,
        30.0,
        -30.0,
        1e4,
        -1e4,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    let dy = [1.0, -2.0, 0.5, 1.0, 1.0, 3.0, 3.0, 1.0, 1.0, 1.0];
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        if !supports(client, dtype) {
            continue;
        }
        // f16 tops out at 65504: 1e4 stays finite.
        case(
            client,
            "gelu special values",
            &[x.len()],
            dtype,
            false,
            &x,
            &dy,
        );
    }
}

/// Empty tensors: empty outputs, nothing launched.
pub fn empty<Rt: Runtime>(client: &ComputeClient<Rt>) {
    for shape in [&[0usize, 5][..], &[4, 0], &[0]] {
        let x = upload(client, &[], shape, DType::F32);
        let y = gelu_forward(client, x.clone());
        assert_eq!(y.shape.to_vec(), shape.to_vec());
        let grad = upload(client, &[], shape, DType::F32);
        let dx = gelu_backward(client, x, grad);
        assert_eq!(dx.num_elements(), 0);
    }
}

/// A gradient of another shape panics, naming the operation and both shapes.
pub fn shape_check<Rt: Runtime>(client: &ComputeClient<Rt>) {
    let x = upload(client, &[0.0; 6], &[2, 3], DType::F32);
    let grad = upload(client, &[0.0; 6], &[3, 2], DType::F32);
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        gelu_backward(client, x, grad);
    }))
    .expect_err("a gradient of another shape must panic");
    let text = panic_text(&panic);
    assert!(
        text.contains("gelu_backward: the gradient must have the input's shape and dtype")
            && text.contains("[2, 3]")
            && text.contains("[3, 2]"),
        "unexpected message: {text}"
    );
}

/// Runs every group on `client`, printing one line per group; returns the number that failed.
pub fn run_all<Rt: Runtime>(client: &ComputeClient<Rt>) -> usize {
    let groups: Vec<(&str, Check<Rt>)> = vec![
        ("gelu: dtypes and shapes", dtypes_and_shapes::<Rt>),
        ("gelu: strided input", strided::<Rt>),
        ("gelu: long tensor", long::<Rt>),
        ("gelu: special values", special_values::<Rt>),
        ("gelu: empty tensors", empty::<Rt>),
        ("gelu: shape check", shape_check::<Rt>),
    ];
    run_groups(client, &groups)
}
