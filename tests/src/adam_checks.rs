//! The Adam kernel's correctness checks, generic over the runtime: the integration tests run
//! them on Mesa's lavapipe, the GPU suite on CUDA. Every result is compared with an f64
//! reference of Burn's arithmetic computed from the stored (rounded) inputs; each check panics
//! with a message naming the case when a result is off, and [`run_all`] runs every group and
//! counts failures.
//!
//! Covered: f32/f16/bf16, lengths that vectorize and odd ones (scalar loads), a transposed
//! gradient, the first step (zero moments) and a later one, weight decay, AMSGrad, a step
//! count where the bias correction vanishes, a zero gradient, empty tensors; and f64 where the
//! device has it, at a tolerance only f64 arithmetic meets (the kernel accumulates f64 tensors
//! in f64); many parameters in one call, mixed or of one kind, cut into as many kernels as the
//! device's binding limit asks.

use cubecl::prelude::*;
use ruda_runtime::TensorBuffer;
use ruda_runtime::adam::{
    AdamParameter, AdamScalars, AdamUpdate, adam_step, adam_steps, parameters_per_kernel,
};
use ruda_runtime::prelude::DType;

use crate::check_groups::run_groups;
use crate::layer_norm_checks::{Rng, random, round_to, upload, upload_transposed};

/// The f64 reference of one step: `(param', m', v', vmax')` (module documentation of
/// `ruda_runtime::adam`). The bias-corrected step size and epsilon are computed in f32, as
/// Burn's Adam computes them for every dtype (`1 - beta_2^t` loses digits in f32 at small `t`:
/// about 1e-8 of a parameter); the rest in f64.
pub fn reference(
    s: AdamScalars,
    param: &[f32],
    grad: &[f32],
    m: &[f32],
    v: &[f32],
    vmax: Option<&[f32]>,
) -> [Vec<f64>; 4] {
    let (b1, b2) = (s.beta_1 as f64, s.beta_2 as f64);
    let t = s.time as i32;
    let correction_2 = (1.0f32 - s.beta_2.powi(t)).sqrt();
    let factor = correction_2 / (1.0f32 - s.beta_1.powi(t));
    let step = (s.lr * factor as f64) as f32 as f64;
    let eps = (s.epsilon * correction_2) as f64;
    let n = param.len();
    let mut out: [Vec<f64>; 4] = std::array::from_fn(|_| Vec::with_capacity(n));
    for i in 0..n {
        let p = param[i] as f64;
        let g = grad[i] as f64 + s.weight_decay as f64 * p;
        let m1 = b1 * m[i] as f64 + (1.0 - b1) * g;
        let v1 = b2 * v[i] as f64 + (1.0 - b2) * g * g;
        let max = vmax.map_or(v1, |vmax| (vmax[i] as f64).max(v1));
        out[0].push(p - step * m1 / (max.sqrt() + eps));
        out[1].push(m1);
        out[2].push(v1);
        out[3].push(max);
    }
    out
}

fn supports<Rt: Runtime>(client: &ComputeClient<Rt>, dtype: DType) -> bool {
    let storage: StorageType = dtype.into();
    client.properties().supports_type(storage)
}

/// The dtypes the device stores, of f32, f16 and bf16.
fn dtypes<Rt: Runtime>(client: &ComputeClient<Rt>) -> Vec<DType> {
    [DType::F32, DType::F16, DType::BF16]
        .into_iter()
        .filter(|&dtype| {
            let ok = supports(client, dtype);
            if !ok {
                println!("note: {dtype:?} not supported by this device, skipped");
            }
            ok
        })
        .collect()
}

/// Largest error of `got` against `want`, relative to the largest magnitude of `want` (the
/// tensor's scale: a moment's elements near zero are compared at that scale).
fn scaled_error(got: &[f64], want: &[f64]) -> f64 {
    let scale = want
        .iter()
        .fold(0.0f64, |acc, w| acc.max(w.abs()))
        .max(1e-30);
    got.iter()
        .zip(want)
        .map(|(&g, &w)| {
            if g.is_nan() || w.is_nan() {
                if g.is_nan() && w.is_nan() {
                    0.0
                } else {
                    f64::INFINITY
                }
            } else {
                (g - w).abs() / scale
            }
        })
        .fold(0.0, f64::max)
}

/// The tolerance of a result stored in `dtype` after f32 arithmetic: a few of its roundings.
/// f64: the reference computes the step size and epsilon as the kernel gets them, so only
/// the arithmetic differs: f64 arithmetic is off by about 1e-15, f32 by about 1e-7.
fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-9,
        DType::F16 => 4e-3,
        DType::BF16 => 2e-2,
        _ => 1e-5,
    }
}

/// One check case: a parameter of `len` elements (`[rows, cols]` when `transposed_grad`).
pub struct Case {
    name: &'static str,
    rows: usize,
    cols: usize,
    dtype: DType,
    scalars: AdamScalars,
    amsgrad: bool,
    first_step: bool,
    transposed_grad: bool,
    zero_grad: bool,
}

impl Case {
    pub fn new(name: &'static str, rows: usize, cols: usize) -> Self {
        Self {
            name,
            rows,
            cols,
            dtype: DType::F32,
            scalars: AdamScalars {
                lr: 1e-2,
                beta_1: 0.9,
                beta_2: 0.999,
                epsilon: 1e-5,
                weight_decay: 0.0,
                time: 4,
            },
            amsgrad: false,
            first_step: false,
            transposed_grad: false,
            zero_grad: false,
        }
    }
    pub fn dtype(mut self, dtype: DType) -> Self {
        self.dtype = dtype;
        self
    }
    pub fn amsgrad(mut self) -> Self {
        self.amsgrad = true;
        self
    }
    pub fn first_step(mut self) -> Self {
        self.first_step = true;
        self.scalars.time = 1;
        self
    }
    pub fn time(mut self, time: usize) -> Self {
        self.scalars.time = time;
        self
    }
    pub fn weight_decay(mut self, penalty: f32) -> Self {
        self.scalars.weight_decay = penalty;
        self
    }
    pub fn transposed_grad(mut self) -> Self {
        self.transposed_grad = true;
        self
    }
    pub fn zero_grad(mut self) -> Self {
        self.zero_grad = true;
        self
    }

    /// Uploads the case's tensors: the kernel's input and what to expect of its update.
    fn prepare<Rt: Runtime>(&self, client: &ComputeClient<Rt>) -> (AdamParameter, Expected) {
        let (n, dtype) = (self.rows * self.cols, self.dtype);
        let shape = [self.rows, self.cols];
        let mut rng = Rng(0x5eed ^ n as u64);
        let param = random(&mut rng, n, 0.1, 1.0, dtype);
        let grad = if self.zero_grad {
            vec![0.0; n]
        } else {
            random(&mut rng, n, 0.0, 0.5, dtype)
        };
        let (m, v) = if self.first_step {
            (vec![0.0; n], vec![0.0; n])
        } else {
            let m = random(&mut rng, n, 0.0, 0.05, dtype);
            let v: Vec<f32> = random(&mut rng, n, 0.0, 0.02, DType::F32)
                .iter()
                .map(|x| x * x)
                .collect();
            (m, round_to(&v, dtype))
        };
        // AMSGrad's maximum: above the new second moment for some elements, below for others.
        let vmax: Option<Vec<f32>> = self.amsgrad.then(|| {
            let scaled: Vec<f32> = v
                .iter()
                .enumerate()
                .map(|(i, x)| if i % 2 == 0 { x * 3.0 } else { x * 0.5 })
                .collect();
            round_to(&scaled, dtype)
        });

        let grad_buffer = if self.transposed_grad {
            upload_transposed(client, &grad, self.rows, self.cols, dtype)
        } else {
            upload(client, &grad, &shape, dtype)
        };
        let input = AdamParameter {
            scalars: self.scalars,
            param: upload(client, &param, &shape, dtype),
            grad: grad_buffer,
            moment_1: upload(client, &m, &shape, dtype),
            moment_2: upload(client, &v, &shape, dtype),
            max_moment_2: vmax.as_ref().map(|x| upload(client, x, &shape, dtype)),
        };
        let want = reference(self.scalars, &param, &grad, &m, &v, vmax.as_deref());
        let unmoved = (self.zero_grad && self.first_step && self.scalars.weight_decay == 0.0)
            .then_some(param);
        (input, Expected { want, unmoved })
    }

    /// Checks `update` against the reference.
    fn check<Rt: Runtime>(
        &self,
        client: &ComputeClient<Rt>,
        update: &AdamUpdate,
        expected: &Expected,
    ) {
        let (shape, dtype, want) = ([self.rows, self.cols], self.dtype, &expected.want);
        let results: [(&str, Option<&TensorBuffer>, &[f64]); 4] = [
            ("parameter", Some(&update.param), &want[0]),
            ("first moment", Some(&update.moment_1), &want[1]),
            ("second moment", Some(&update.moment_2), &want[2]),
            (
                "second moment's maximum",
                update.max_moment_2.as_ref(),
                &want[3],
            ),
        ];
        assert_eq!(
            update.max_moment_2.is_some(),
            self.amsgrad,
            "{}: AMSGrad's maximum is returned exactly when given",
            self.name
        );
        for (what, got, want) in results {
            let Some(got) = got else { continue };
            assert_eq!(
                got.shape.to_vec(),
                shape.to_vec(),
                "{}: {what}'s shape",
                self.name
            );
            assert_eq!(got.dtype, dtype, "{}: {what}'s dtype", self.name);
            let got = got.to_f64s(client);
            let err = scaled_error(&got, want);
            let tol = tolerance(dtype);
            assert!(
                err <= tol,
                "{} ({dtype:?}, {}x{}): {what} error {err:.3e} > {tol:.0e}",
                self.name,
                self.rows,
                self.cols
            );
        }
        if let Some(param) = &expected.unmoved {
            let got = update.param.to_f32s(client);
            assert_eq!(
                &got, param,
                "{}: a zero first gradient moves nothing",
                self.name
            );
        }
    }

    /// Runs the case alone ([`adam_step`]) and checks it.
    pub fn run<Rt: Runtime>(&self, client: &ComputeClient<Rt>) {
        let (input, expected) = self.prepare(client);
        let update = adam_step(
            client,
            input.scalars,
            input.param,
            input.grad,
            input.moment_1,
            input.moment_2,
            input.max_moment_2,
        );
        self.check(client, &update, &expected);
    }
}

/// What a case's update must be: the reference `(param', m', v', vmax')`, and the parameter
/// itself when the step must leave it exactly as it was.
struct Expected {
    want: [Vec<f64>; 4],
    unmoved: Option<Vec<f32>>,
}

/// Runs `cases` as one call of [`adam_steps`], checks every update, and returns how many
/// kernels ran.
pub fn run_together<Rt: Runtime>(client: &ComputeClient<Rt>, cases: &[Case]) -> usize {
    let (inputs, expected): (Vec<_>, Vec<_>) = cases.iter().map(|c| c.prepare(client)).unzip();
    let steps = adam_steps(client, inputs);
    assert_eq!(steps.updates.len(), cases.len(), "one update a parameter");
    for ((case, update), expected) in cases.iter().zip(&steps.updates).zip(&expected) {
        case.check(client, update, expected);
    }
    steps.kernels
}

// ---------------------------------------------------------------------------------------------
// Groups

/// Every dtype at lengths that vectorize (4096, 1024x3) and odd ones (1, 7, 1027: scalar loads),
/// a first step and a later one.
pub fn lengths_and_dtypes<Rt: Runtime>(client: &ComputeClient<Rt>) {
    for dtype in dtypes(client) {
        for (rows, cols) in [(1, 1), (1, 7), (1, 1027), (64, 64), (1024, 3)] {
            Case::new("later step", rows, cols).dtype(dtype).run(client);
            Case::new("first step", rows, cols)
                .dtype(dtype)
                .first_step()
                .run(client);
        }
    }
}

/// Weight decay, AMSGrad (first and later steps), both, a transposed gradient, a step count
/// where the bias correction is 1 to f32 precision.
pub fn options<Rt: Runtime>(client: &ComputeClient<Rt>) {
    for dtype in dtypes(client) {
        Case::new("weight decay", 33, 31)
            .dtype(dtype)
            .weight_decay(0.05)
            .run(client);
        Case::new("amsgrad", 33, 31)
            .dtype(dtype)
            .amsgrad()
            .run(client);
        Case::new("amsgrad, first step", 33, 31)
            .dtype(dtype)
            .amsgrad()
            .first_step()
            .run(client);
        Case::new("amsgrad and weight decay", 8, 130)
            .dtype(dtype)
            .amsgrad()
            .weight_decay(0.01)
            .run(client);
        Case::new("transposed gradient", 33, 31)
            .dtype(dtype)
            .transposed_grad()
            .run(client);
        Case::new("step 100000", 16, 16)
            .dtype(dtype)
            .time(100_000)
            .run(client);
    }
}

/// A zero gradient on the first step leaves the parameter as it was (0 / (0 + eps)), with and
/// without AMSGrad; empty parameters give empty results.
pub fn edge_cases<Rt: Runtime>(client: &ComputeClient<Rt>) {
    Case::new("zero gradient", 4, 64)
        .first_step()
        .zero_grad()
        .run(client);
    Case::new("zero gradient, amsgrad", 4, 64)
        .first_step()
        .zero_grad()
        .amsgrad()
        .run(client);
    Case::new("empty", 0, 16).run(client);
    Case::new("empty, amsgrad", 3, 0).amsgrad().run(client);
}

/// f64 parameters, where the device stores f64: the cases above at f64's tolerance, so an f32
/// accumulator would fail them.
pub fn double_precision<Rt: Runtime>(client: &ComputeClient<Rt>) {
    if !supports(client, DType::F64) {
        println!("note: F64 not supported by this device, skipped");
        return;
    }
    let f64 = DType::F64;
    for (rows, cols) in [(1, 7), (64, 64), (1024, 3)] {
        Case::new("f64, later step", rows, cols)
            .dtype(f64)
            .run(client);
        Case::new("f64, first step", rows, cols)
            .dtype(f64)
            .first_step()
            .run(client);
    }
    Case::new("f64, amsgrad and weight decay", 8, 130)
        .dtype(f64)
        .amsgrad()
        .weight_decay(0.01)
        .run(client);
    Case::new("f64, transposed gradient", 33, 31)
        .dtype(f64)
        .transposed_grad()
        .run(client);
}

/// Many parameters in one call: cases that differ in dtype, vector size (odd lengths load
/// scalars), AMSGrad, step count and weight decay, an empty one and a transposed gradient, each
/// right and launched with the others it can share a kernel with; more parameters of one kind
/// than a kernel takes, which cuts them into `ceil(count / per kernel)` kernels; and sizes that
/// share a launch's cubes unevenly, one large enough that its units loop.
pub fn many_parameters<Rt: Runtime>(client: &ComputeClient<Rt>) {
    let mut mixed = Vec::new();
    for dtype in dtypes(client) {
        mixed.push(Case::new("mixed: later step", 64, 64).dtype(dtype));
        mixed.push(Case::new("mixed: odd length", 1, 1027).dtype(dtype));
        mixed.push(
            Case::new("mixed: first step", 16, 8)
                .dtype(dtype)
                .first_step(),
        );
        mixed.push(Case::new("mixed: amsgrad", 33, 31).dtype(dtype).amsgrad());
        mixed.push(
            Case::new("mixed: amsgrad, weight decay", 8, 130)
                .dtype(dtype)
                .amsgrad()
                .weight_decay(0.01),
        );
        mixed.push(Case::new("mixed: empty", 0, 16).dtype(dtype));
        mixed.push(
            Case::new("mixed: transposed gradient", 32, 32)
                .dtype(dtype)
                .transposed_grad(),
        );
        mixed.push(Case::new("mixed: one more", 4, 4).dtype(dtype));
    }
    let kernels = run_together(client, &mixed);
    assert!(
        kernels < mixed.len(),
        "{} parameters, some of one kind, ran in {kernels} kernels: none shared a launch",
        mixed.len()
    );

    // One kind, more than a kernel takes: every length a multiple of 4 (one vector size).
    let per_kernel = parameters_per_kernel(client.properties().hardware.max_bindings, false);
    let count = per_kernel + per_kernel / 2 + 1;
    let uniform: Vec<Case> = (0..count)
        .map(|i| Case::new("uniform", 1 + i % 5, 4 * (1 + i % 7)))
        .collect();
    let kernels = run_together(client, &uniform);
    assert_eq!(
        kernels,
        count.div_ceil(per_kernel),
        "{count} parameters of one kind, {per_kernel} a kernel"
    );

    // Uneven sizes in one full launch; the largest has more vectors (4 elements) than its
    // share of the launch's cubes of 256 units (65535 / members), so its units loop.
    let share = 65_535 / per_kernel * 256 * 4;
    if share > 1 << 22 {
        println!("note: {per_kernel} parameters a kernel: no loop tested below 4M elements");
        return;
    }
    let mut uneven = vec![
        Case::new("uneven: large", 1, share + 4),
        Case::new("uneven: middle", 64, 256),
    ];
    uneven.extend((2..per_kernel).map(|i| Case::new("uneven: small", 1, 4 * i)));
    assert_eq!(
        run_together(client, &uneven),
        1,
        "one kernel's worth of one kind"
    );
}

/// Runs every group on `client`, printing one line per group; returns the number that failed.
pub fn run_all<Rt: Runtime>(client: &ComputeClient<Rt>) -> usize {
    run_groups(
        client,
        &[
            ("adam: lengths and dtypes", lengths_and_dtypes::<Rt>),
            ("adam: options", options::<Rt>),
            ("adam: edge cases", edge_cases::<Rt>),
            ("adam: f64", double_precision::<Rt>),
            ("adam: many parameters", many_parameters::<Rt>),
        ],
    )
}
