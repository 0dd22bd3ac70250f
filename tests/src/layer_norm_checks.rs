//! The LayerNorm correctness checks, generic over the runtime: the integration tests run them on
//! Mesa's lavapipe, the GPU suite on CUDA and Vulkan. Each check panics with a message naming the
//! case and the error when a result is off; [`run_all`] runs every group and counts failures.
//!
//! Covered: every variant forced (and the automatic choice, and every autotune candidate on its
//! own: [`every_candidate`]), both reduction paths, f32/f16/bf16,
//! rows with mean 1e4 and std 1e-2, constant rows, d = 1, 3 and 65536, zero rows, a transposed
//! input, rank 1 and 3, with and without beta, NaN isolation, and a finite-difference check of
//! the backward. Every result is compared with the exact f64 [`reference`] computed from `x`.

use cubecl::prelude::*;
use cubecl::zspace::{Shape, Strides};
use ruda_runtime::TensorBuffer;
use ruda_runtime::layer_norm::tune::Candidate;
use ruda_runtime::layer_norm::{
    ColumnSums, Reduction, Strategy, Variant, layer_norm_backward_with, layer_norm_forward_with,
};
use ruda_runtime::prelude::DType;
use ruda_runtime::{layer_norm_backward, layer_norm_forward};

use crate::check_groups::{Check, run_groups};
use crate::reference;

/// The epsilon of every check.
pub const EPS: f64 = 1e-5;
/// Every variant, for loops over them.
pub const VARIANTS: [Variant; 4] = [
    Variant::PlanePerRow,
    Variant::CubePerRow,
    Variant::CubePerRowLooped,
    Variant::UnitPerRow,
];

fn check(name: &str, what: &str, got: &[f32], want: &[f64], tol: f64) {
    assert!(
        got.iter().all(|g| g.is_finite()),
        "{name}: non-finite value in {what}"
    );
    let err = reference::max_relative_error(got, want);
    assert!(
        err <= tol,
        "{name}: {what} relative error {err:.3e} > {tol:.0e}"
    );
}

// ---------------------------------------------------------------------------------------------
// Data

/// SplitMix64: small, seeded, good enough for test data.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(1e-300);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// What a row looks like.
#[derive(Clone, Copy)]
pub enum RowKind {
    /// mean 0.5, std 2.
    Normal,
    /// mean 1e4, std 1e-2: cancels in any one-pass `E[x^2] - E[x]^2`, or through an f32 mean.
    LargeMean,
    /// Every element equal: variance 0, `out = beta`.
    Constant,
}

/// Rows cycling through `kinds`, rounded to `dtype` (so the reference sees what the device sees).
pub fn rows_of(rng: &mut Rng, rows: usize, d: usize, kinds: &[RowKind], dtype: DType) -> Vec<f32> {
    let mut data = Vec::with_capacity(rows * d);
    for r in 0..rows {
        let kind = kinds[r % kinds.len()];
        let constant = rng.normal() as f32;
        for _ in 0..d {
            data.push(match kind {
                RowKind::Normal => (0.5 + 2.0 * rng.normal()) as f32,
                RowKind::LargeMean => (1e4 + 1e-2 * rng.normal()) as f32,
                RowKind::Constant => constant,
            });
        }
    }
    round_to(&data, dtype)
}

/// `n` normal values, rounded to `dtype`.
pub fn random(rng: &mut Rng, n: usize, mean: f64, std: f64, dtype: DType) -> Vec<f32> {
    let v: Vec<f32> = (0..n).map(|_| (mean + std * rng.normal()) as f32).collect();
    round_to(&v, dtype)
}

/// Rounds to what `dtype` stores.
pub fn round_to(values: &[f32], dtype: DType) -> Vec<f32> {
    match dtype {
        DType::F32 | DType::F64 => values.to_vec(),
        DType::F16 => values
            .iter()
            .map(|&v| half::f16::from_f32(v).to_f32())
            .collect(),
        DType::BF16 => values
            .iter()
            .map(|&v| half::bf16::from_f32(v).to_f32())
            .collect(),
        other => panic!("no rounding for {other:?}"),
    }
}

/// Uploads row-major values with `shape`.
pub fn upload<Rt: Runtime>(
    client: &ComputeClient<Rt>,
    values: &[f32],
    shape: &[usize],
    dtype: DType,
) -> TensorBuffer {
    TensorBuffer::from_f32s(client, values, Shape::from(shape.to_vec()), dtype)
}

/// A `[rows, d]` tensor stored transposed (`[d, rows]` row-major, strides `[1, rows]`).
pub fn upload_transposed<Rt: Runtime>(
    client: &ComputeClient<Rt>,
    values: &[f32],
    rows: usize,
    d: usize,
    dtype: DType,
) -> TensorBuffer {
    let mut stored = vec![0.0f32; rows * d];
    for r in 0..rows {
        for c in 0..d {
            stored[c * rows + r] = values[r * d + c];
        }
    }
    let buffer = upload(client, &stored, &[d, rows], dtype);
    TensorBuffer::new(
        buffer.handle,
        Shape::from(vec![rows, d]),
        Strides::new(&[1, rows]),
        dtype,
    )
}

// ---------------------------------------------------------------------------------------------
// One forward + backward case against the reference

pub struct Case {
    name: &'static str,
    shape: Vec<usize>,
    dtype: DType,
    beta: bool,
    transposed: bool,
    kinds: &'static [RowKind],
    strategy: Option<Strategy>,
    candidate: Option<Candidate>,
    seed: u64,
}

impl Case {
    pub fn new(name: &'static str, shape: &[usize]) -> Self {
        Case {
            name,
            shape: shape.to_vec(),
            dtype: DType::F32,
            beta: true,
            transposed: false,
            kinds: &[RowKind::Normal, RowKind::LargeMean, RowKind::Constant],
            strategy: None,
            candidate: None,
            seed: 7,
        }
    }
    pub fn dtype(mut self, dtype: DType) -> Self {
        self.dtype = dtype;
        self
    }
    pub fn no_beta(mut self) -> Self {
        self.beta = false;
        self
    }
    pub fn transposed(mut self) -> Self {
        self.transposed = true;
        self
    }
    pub fn kinds(mut self, kinds: &'static [RowKind]) -> Self {
        self.kinds = kinds;
        self
    }
    pub fn variant(mut self, strategy: impl Into<Strategy>) -> Self {
        self.strategy = Some(strategy.into());
        self
    }
    /// Runs one autotune candidate, planned as the tuner benchmarks it.
    pub fn candidate(mut self, candidate: Candidate) -> Self {
        self.candidate = Some(candidate);
        self
    }

    /// Runs the case; panics when a result is off.
    pub fn run<Rt: Runtime>(&self, client: &ComputeClient<Rt>) {
        if let Err(e) = self.try_run(client) {
            panic!("{}: {e}", self.name);
        }
    }

    /// Runs the case; panics when a result is off, returns an error (having checked nothing)
    /// when a forced [`Candidate`] cannot run the shape, which the tuner then skips.
    pub fn try_run<Rt: Runtime>(&self, client: &ComputeClient<Rt>) -> Result<(), String> {
        let d = *self.shape.last().unwrap();
        let rows: usize = self.shape[..self.shape.len() - 1].iter().product();
        let dtype = self.dtype;
        let (tol_fwd, tol_bwd) = match dtype {
            DType::F32 => (1e-5, 1e-4),
            _ => (1e-2, 1e-2),
        };
        let name = self.name;
        let mut rng = Rng(self.seed);
        let x = rows_of(&mut rng, rows, d, self.kinds, dtype);
        let gamma = random(&mut rng, d, 1.0, 0.5, dtype);
        let beta = random(&mut rng, d, 0.0, 0.5, dtype);
        let dy = random(&mut rng, rows * d, 0.0, 1.0, dtype);

        let input = |client: &ComputeClient<Rt>| {
            if self.transposed {
                assert_eq!(self.shape.len(), 2);
                upload_transposed(client, &x, rows, d, dtype)
            } else {
                upload(client, &x, &self.shape, dtype)
            }
        };
        let gamma_buf = upload(client, &gamma, &[d], dtype);
        let beta_buf = self.beta.then(|| upload(client, &beta, &[d], dtype));
        let [out, mean, rstd] = match (self.strategy, self.candidate) {
            (_, Some(c)) => c.forward(client, input(client), gamma_buf.clone(), beta_buf, EPS)?,
            (Some(s), None) => {
                layer_norm_forward_with(client, input(client), gamma_buf.clone(), beta_buf, EPS, s)
            }
            (None, None) => {
                layer_norm_forward(client, input(client), gamma_buf.clone(), beta_buf, EPS)
            }
        };
        assert_eq!(out.shape.to_vec(), self.shape, "{name}: out shape");
        assert_eq!(out.dtype, dtype, "{name}: out dtype");
        assert_eq!(
            mean.shape.to_vec(),
            self.shape[..self.shape.len() - 1].to_vec(),
            "{name}: mean shape"
        );
        assert_eq!((mean.dtype, rstd.dtype), (DType::F32, DType::F32));

        let reference = reference::forward(&x, d, &gamma, self.beta.then_some(&beta[..]), EPS);
        let (got_out, got_mean, got_rstd) = (
            out.to_f32s(client),
            mean.to_f32s(client),
            rstd.to_f32s(client),
        );
        check(name, "out", &got_out, &reference.out, tol_fwd);
        check(name, "mean", &got_mean, &reference.mean, tol_fwd);
        check(name, "rstd", &got_rstd, &reference.rstd, tol_fwd);

        let dy_buf = upload(client, &dy, &self.shape, dtype);
        let [dx, dgamma, dbeta] = match (self.strategy, self.candidate) {
            (_, Some(c)) => c.backward(client, input(client), gamma_buf, dy_buf, mean, rstd)?,
            (Some(s), None) => {
                layer_norm_backward_with(client, input(client), gamma_buf, dy_buf, mean, rstd, s)
            }
            (None, None) => {
                layer_norm_backward(client, input(client), gamma_buf, dy_buf, mean, rstd)
            }
        };
        assert_eq!(dx.shape.to_vec(), self.shape, "{name}: dx shape");
        assert_eq!(dgamma.shape.to_vec(), vec![d], "{name}: dgamma shape");
        assert_eq!((dx.dtype, dgamma.dtype, dbeta.dtype), (dtype, dtype, dtype));
        // The exact gradient, from x itself: not from the kernel's rounded statistics.
        let reference = reference::backward(&x, d, &gamma, &dy, EPS);
        check(name, "dx", &dx.to_f32s(client), &reference.dx, tol_bwd);
        check(
            name,
            "dgamma",
            &dgamma.to_f32s(client),
            &reference.dgamma,
            tol_bwd,
        );
        check(
            name,
            "dbeta",
            &dbeta.to_f32s(client),
            &reference.dbeta,
            tol_bwd,
        );
        Ok(())
    }
}

/// Every variant forced, on vectorized, scalar and tiny rows, many rows, long rows.
pub fn every_variant_f32<Rt: Runtime>(client: &ComputeClient<Rt>) {
    for variant in VARIANTS {
        // Vectorized (d % 4 == 0), scalar (odd d), tiny rows; enough rows for several tiles.
        Case::new("d=64", &[21, 64]).variant(variant).run(client);
        Case::new("d=3", &[9, 3]).variant(variant).run(client);
        Case::new("d=1", &[5, 1])
            .variant(variant)
            .no_beta()
            .run(client);
    }
    // More row tiles than backward cubes: cubes loop over tiles, partials cover several rows.
    for variant in VARIANTS {
        Case::new("many rows", &[4200, 8])
            .variant(variant)
            .run(client);
    }
    // More row tiles than the grid may have cubes (65535 on wgpu): the forward cubes loop too.
    Case::new("more tiles than cubes", &[70000, 2])
        .variant(Variant::CubePerRow)
        .run(client);
    // Longer rows: several vectors per unit, several chunks for the looped variant.
    Case::new("d=1000 plane", &[6, 1000])
        .variant(Variant::PlanePerRow)
        .run(client);
    Case::new("d=2050 cube", &[4, 2050])
        .variant(Variant::CubePerRow)
        .run(client);
    Case::new("d=5000 looped", &[3, 5000])
        .variant(Variant::CubePerRowLooped)
        .no_beta()
        .run(client);
}

/// The shared-memory reduction forced on every variant (the fallback path on a GPU).
pub fn forced_shared_memory_reduction<Rt: Runtime>(client: &ComputeClient<Rt>) {
    // The same as the automatic choice on a device without plane operations; on a GPU this
    // exercises the fallback path.
    for variant in VARIANTS {
        Case::new("shared", &[6, 96])
            .variant(Strategy::new(variant, Reduction::SharedMemory))
            .run(client);
    }
}

/// The reductions `client`'s device can run: shared memory, and planes where it has them.
fn reductions<Rt: Runtime>(client: &ComputeClient<Rt>) -> Vec<Reduction> {
    let mut reductions = vec![Reduction::SharedMemory];
    if client
        .properties()
        .features
        .plane
        .contains(cubecl::features::Plane::Ops)
    {
        reductions.push(Reduction::Plane);
    }
    reductions
}

/// The backward's column sums of the register variants forced into registers and into shared
/// memory, with both reductions where the device has planes: one vector a unit and several
/// (with lanes past the row end), one row tile and many (cubes that loop, several groups a
/// cube). Shapes small enough for the 16 KiB of shared memory every Vulkan device has.
pub fn column_sums_both_ways<Rt: Runtime>(client: &ComputeClient<Rt>) {
    for reduction in reductions(client) {
        for variant in [Variant::PlanePerRow, Variant::CubePerRow] {
            for sums in [ColumnSums::Registers, ColumnSums::SharedMemory] {
                let s = Strategy::new(variant, reduction).with_column_sums(sums);
                Case::new("column sums d=96", &[6, 96])
                    .variant(s)
                    .run(client);
                Case::new("column sums d=200", &[3, 200])
                    .variant(s)
                    .run(client);
                Case::new("column sums many rows", &[4200, 8])
                    .variant(s)
                    .no_beta()
                    .run(client);
            }
        }
    }
}

/// The default rule on rank 1 and 3, transposed input, d = 65536, odd d.
pub fn automatic_choice_shapes<Rt: Runtime>(client: &ComputeClient<Rt>) {
    Case::new("rank 3", &[2, 3, 40]).run(client);
    Case::new("rank 3 no beta", &[3, 2, 24])
        .no_beta()
        .run(client);
    Case::new("rank 1", &[48])
        .kinds(&[RowKind::LargeMean])
        .run(client);
    Case::new("transposed", &[12, 40]).transposed().run(client);
    Case::new("transposed looped", &[8, 36])
        .transposed()
        .variant(Variant::CubePerRowLooped)
        .run(client);
    Case::new("d=65536", &[3, 65536]).run(client);
    // Odd d is read as scalars: the row would need more registers than a plane-per-row unit
    // may hold, so the automatic choice moves on to a cube per row (a forced one panics).
    Case::new("odd d, many rows", &[1024, 1031])
        .kinds(&[RowKind::Normal, RowKind::LargeMean])
        .run(client);
}

/// Every one of `candidates` (autotune candidates, planned as the tuner benchmarks them) on
/// each of `shapes` (f32, rows of every kind), forward and backward against the reference. A
/// candidate that cannot run a shape (the tuner skips it there) is listed, not failed; every
/// wrong result is collected, and the check panics with all of them. Returns, per shape, the
/// names of the candidates that ran.
pub fn every_candidate<Rt: Runtime>(
    client: &ComputeClient<Rt>,
    candidates: &[Candidate],
    shapes: &[&[usize]],
) -> Vec<Vec<String>> {
    let mut failures = Vec::new();
    let mut ran = Vec::new();
    for &shape in shapes {
        let mut ran_here = Vec::new();
        for &candidate in candidates {
            let case = Case::new("candidate", shape).candidate(candidate);
            let result =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| case.try_run(client)));
            let what = format!("{} at {shape:?}", candidate.name());
            match result {
                Ok(Ok(())) => ran_here.push(candidate.name()),
                Ok(Err(why)) => println!("note: {what} skipped: {why}"),
                Err(panic) => {
                    let message = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    println!("FAIL {what}: {message}");
                    failures.push(format!("{what}: {message}"));
                }
            }
        }
        ran.push(ran_here);
    }
    assert!(
        failures.is_empty(),
        "{} candidate run(s) off the reference:\n{}",
        failures.len(),
        failures.join("\n")
    );
    ran
}

/// Every backward autotune candidate (the forward's are its first eight) on rows the tuner
/// meets on a GPU: long rows (looped and unit-per-row candidates), d = 8192 and d = 1024 at 32
/// elements a unit (where the column sums fit in shared memory on a GPU with 99 KiB of it, and
/// are skipped elsewhere), short rows, odd d, many rows. Each that runs must match the
/// reference forward and backward, and every candidate must run somewhere.
pub fn every_autotune_candidate<Rt: Runtime>(client: &ComputeClient<Rt>) {
    use ruda_runtime::layer_norm::tune::BACKWARD_CANDIDATES;
    let shapes: &[&[usize]] = &[
        &[3, 65536],
        &[2, 40000],
        &[24, 8192],
        &[64, 1024],
        &[64, 768],
        &[2, 3, 40],
        &[37, 1031],
        &[3000, 16],
    ];
    let ran = every_candidate(client, &BACKWARD_CANDIDATES, shapes);
    for candidate in &BACKWARD_CANDIDATES {
        assert!(
            ran.iter().any(|names| names.contains(&candidate.name())),
            "candidate {} ran at none of {shapes:?}",
            candidate.name()
        );
    }
}

/// f16 (and bf16 where supported) in every variant, within 1e-2.
pub fn half_precision<Rt: Runtime>(client: &ComputeClient<Rt>) {
    let kinds: &[RowKind] = &[RowKind::Normal, RowKind::Constant];
    for variant in VARIANTS {
        Case::new("f16", &[10, 72])
            .dtype(DType::F16)
            .kinds(kinds)
            .variant(variant)
            .run(client);
    }
    Case::new("f16 auto", &[3, 5, 40])
        .dtype(DType::F16)
        .kinds(kinds)
        .run(client);
    let bf16: StorageType = DType::BF16.into();
    if client.properties().supports_type(bf16) {
        for variant in VARIANTS {
            Case::new("bf16", &[7, 48])
                .dtype(DType::BF16)
                .kinds(kinds)
                .variant(variant)
                .run(client);
        }
    } else {
        println!("note: this device does not support BF16; the BF16 cases are skipped");
    }
}

/// Zero rows: empty outputs, zero dgamma/dbeta, nothing launched.
pub fn zero_rows<Rt: Runtime>(client: &ComputeClient<Rt>) {
    let shape = [0usize, 16];
    let x = upload(client, &[], &shape, DType::F32);
    let gamma = upload(client, &[1.0; 16], &[16], DType::F32);
    let [out, mean, rstd] = layer_norm_forward(client, x.clone(), gamma.clone(), None, EPS);
    assert_eq!(out.shape.to_vec(), vec![0, 16]);
    assert_eq!(mean.shape.to_vec(), vec![0]);
    assert!(out.to_f32s(client).is_empty() && rstd.to_f32s(client).is_empty());
    let dy = upload(client, &[], &shape, DType::F32);
    let [dx, dgamma, dbeta] = layer_norm_backward(client, x, gamma, dy, mean, rstd);
    assert_eq!(dx.shape.to_vec(), vec![0, 16]);
    // Sums over no rows.
    assert_eq!(dgamma.to_f32s(client), vec![0.0; 16]);
    assert_eq!(dbeta.to_f32s(client), vec![0.0; 16]);
}

/// A NaN in one row stays in that row, in every variant.
pub fn nan_stays_in_its_row<Rt: Runtime>(client: &ComputeClient<Rt>) {
    for variant in VARIANTS {
        check_nan_isolation(client, variant.into());
    }
}

/// The backward is the gradient of the forward (central differences in f64).
pub fn backward_matches_finite_differences<Rt: Runtime>(client: &ComputeClient<Rt>) {
    let (rows, d) = (3, 6);
    let mut rng = Rng(3);
    let x = random(&mut rng, rows * d, 0.3, 1.5, DType::F32);
    let gamma = random(&mut rng, d, 1.0, 0.5, DType::F32);
    let beta = random(&mut rng, d, 0.0, 0.5, DType::F32);
    let w = random(&mut rng, rows * d, 0.0, 1.0, DType::F32);
    let f64s = |v: &[f32]| v.iter().map(|&v| v as f64).collect::<Vec<f64>>();
    let (xd, gd, bd, wd) = (f64s(&x), f64s(&gamma), f64s(&beta), f64s(&w));

    // Central differences in f64.
    let h = 1e-5;
    let grad_of = |which: usize, len: usize| -> Vec<f64> {
        (0..len)
            .map(|i| {
                let mut args = [xd.clone(), gd.clone(), bd.clone()];
                args[which][i] += h;
                let up = loss(&args[0], &args[1], &args[2], &wd, d);
                args[which][i] -= 2.0 * h;
                let down = loss(&args[0], &args[1], &args[2], &wd, d);
                (up - down) / (2.0 * h)
            })
            .collect()
    };
    let (fd_dx, fd_dgamma, fd_dbeta) = (grad_of(0, rows * d), grad_of(1, d), grad_of(2, d));

    // A backward that forgets the mean and variance terms (dx = rstd * gamma * dy) must be
    // caught: check that it is far from the finite differences.
    let (gr, wr) = (&gd, &wd);
    let naive: Vec<f64> = x
        .chunks(d)
        .enumerate()
        .flat_map(|(r, row)| {
            let mean = row.iter().map(|&v| v as f64).sum::<f64>() / d as f64;
            let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / d as f64;
            let rstd = 1.0 / (var + EPS).sqrt();
            (0..d)
                .map(move |c| rstd * gr[c] * wr[r * d + c])
                .collect::<Vec<_>>()
        })
        .collect();
    let naive_f32: Vec<f32> = naive.iter().map(|&v| v as f32).collect();
    assert!(
        reference::max_relative_error(&naive_f32, &fd_dx) > 0.1,
        "the finite-difference check is not discriminating"
    );

    for variant in VARIANTS {
        let up = |v: &[f32], s: &[usize]| upload(client, v, s, DType::F32);
        let [_, mean, rstd] = layer_norm_forward_with(
            client,
            up(&x, &[rows, d]),
            up(&gamma, &[d]),
            Some(up(&beta, &[d])),
            EPS,
            variant,
        );
        let [dx, dgamma, dbeta] = layer_norm_backward_with(
            client,
            up(&x, &[rows, d]),
            up(&gamma, &[d]),
            up(&w, &[rows, d]),
            mean,
            rstd,
            variant,
        );
        let name = format!("{variant:?} vs finite differences");
        check(&name, "dx", &dx.to_f32s(client), &fd_dx, 1e-4);
        check(&name, "dgamma", &dgamma.to_f32s(client), &fd_dgamma, 1e-4);
        check(&name, "dbeta", &dbeta.to_f32s(client), &fd_dbeta, 1e-4);
    }
}

/// A NaN in one row leaves every other row's `out`, `mean`, `rstd` and `dx` intact.
pub fn check_nan_isolation<Rt: Runtime>(client: &ComputeClient<Rt>, strategy: Strategy) {
    let (rows, d) = (5, 40);
    let mut rng = Rng(11);
    let mut x = rows_of(&mut rng, rows, d, &[RowKind::Normal], DType::F32);
    x[2 * d + 7] = f32::NAN;
    let gamma = random(&mut rng, d, 1.0, 0.5, DType::F32);
    let beta = random(&mut rng, d, 0.0, 0.5, DType::F32);
    let dy = random(&mut rng, rows * d, 0.0, 1.0, DType::F32);
    let up = |v: &[f32], s: &[usize]| upload(client, v, s, DType::F32);

    let [out, mean, rstd] = layer_norm_forward_with(
        client,
        up(&x, &[rows, d]),
        up(&gamma, &[d]),
        Some(up(&beta, &[d])),
        EPS,
        strategy,
    );
    let [dx, _, _] = layer_norm_backward_with(
        client,
        up(&x, &[rows, d]),
        up(&gamma, &[d]),
        up(&dy, &[rows, d]),
        mean.clone(),
        rstd.clone(),
        strategy,
    );
    let (out, mean, rstd, dx) = (
        out.to_f32s(client),
        mean.to_f32s(client),
        rstd.to_f32s(client),
        dx.to_f32s(client),
    );
    let reference = reference::forward(&x, d, &gamma, Some(&beta), EPS);
    for r in 0..rows {
        let span = r * d..(r + 1) * d;
        if r == 2 {
            assert!(
                mean[r].is_nan(),
                "{strategy:?}: the NaN row's mean is {}",
                mean[r]
            );
            assert!(
                out[span.clone()].iter().all(|v| v.is_nan()),
                "{strategy:?}: NaN row out"
            );
            assert!(
                dx[span].iter().all(|v| v.is_nan()),
                "{strategy:?}: NaN row dx"
            );
            continue;
        }
        let name = format!("{strategy:?} row {r}");
        check(
            &name,
            "out",
            &out[span.clone()],
            &reference.out[span.clone()],
            1e-5,
        );
        check(&name, "mean", &mean[r..=r], &reference.mean[r..=r], 1e-5);
        check(&name, "rstd", &rstd[r..=r], &reference.rstd[r..=r], 1e-5);
        assert!(
            dx[span].iter().all(|v| v.is_finite()),
            "{name}: dx has a non-finite value"
        );
    }
}

/// `loss = sum(out * w)` in f64, the function the kernel's backward differentiates with dy = w.
fn loss(x: &[f64], gamma: &[f64], beta: &[f64], w: &[f64], d: usize) -> f64 {
    let mut total = 0.0;
    for (r, row) in x.chunks(d).enumerate() {
        let mean = row.iter().sum::<f64>() / d as f64;
        let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / d as f64;
        let rstd = 1.0 / (var + EPS).sqrt();
        for c in 0..d {
            total += ((row[c] - mean) * rstd * gamma[c] + beta[c]) * w[r * d + c];
        }
    }
    total
}

/// Larger shapes and both reductions where the device has plane operations: the GPU suite's
/// extra cases (too slow for lavapipe).
pub fn gpu_shapes<Rt: Runtime>(client: &ComputeClient<Rt>) {
    for reduction in reductions(client) {
        let s = |variant| Strategy::new(variant, reduction);
        for variant in VARIANTS {
            Case::new("d=768", &[37, 768])
                .variant(s(variant))
                .run(client);
            Case::new("d=1", &[5, 1])
                .variant(s(variant))
                .no_beta()
                .run(client);
            check_nan_isolation(client, s(variant));
        }
        Case::new("d=4096", &[9, 4096])
            .variant(s(Variant::CubePerRow))
            .run(client);
        Case::new("d=8192 f16", &[5, 8192])
            .dtype(DType::F16)
            .kinds(&[RowKind::Normal])
            .variant(s(Variant::CubePerRow))
            .run(client);
        // 32 elements a unit: the column sums in shared memory under the automatic rule where
        // they fit, and forced both ways (d = 1024 over a plane, 8192 over a cube). They take
        // up to 96 KiB: forced into shared memory only on a device with that much (CUDA on an
        // A100, H100 or H200; not NVIDIA's Vulkan driver, with 48 KiB).
        let mut column_sums = vec![ColumnSums::Auto, ColumnSums::Registers];
        if client.properties().hardware.max_shared_memory_size >= 99 * 1024 {
            column_sums.push(ColumnSums::SharedMemory);
        }
        for sums in column_sums {
            Case::new("d=8192 f32", &[40, 8192])
                .kinds(&[RowKind::Normal])
                .variant(s(Variant::CubePerRow).with_column_sums(sums))
                .run(client);
            Case::new("d=1024 f32", &[300, 1024])
                .variant(s(Variant::PlanePerRow).with_column_sums(sums))
                .run(client);
        }
        Case::new("d=65536", &[8, 65536])
            .variant(s(Variant::CubePerRowLooped))
            .run(client);
    }
    Case::new("many rows", &[5000, 256]).run(client);
    Case::new("16384x1024", &[16384, 1024]).run(client);
}

/// Runs every group on `client`, printing one line per group; returns the number that failed.
pub fn run_all<Rt: Runtime>(client: &ComputeClient<Rt>, include_gpu_shapes: bool) -> usize {
    let mut groups: Vec<(&str, Check<Rt>)> = vec![
        ("every variant, f32", every_variant_f32::<Rt>),
        (
            "forced shared-memory reduction",
            forced_shared_memory_reduction::<Rt>,
        ),
        ("automatic choice, shapes", automatic_choice_shapes::<Rt>),
        (
            "column sums in registers and shared memory",
            column_sums_both_ways::<Rt>,
        ),
        ("every autotune candidate", every_autotune_candidate::<Rt>),
        ("half precision", half_precision::<Rt>),
        ("zero rows", zero_rows::<Rt>),
        ("NaN stays in its row", nan_stays_in_its_row::<Rt>),
        (
            "backward = finite differences",
            backward_matches_finite_differences::<Rt>,
        ),
    ];
    if include_gpu_shapes {
        groups.push(("GPU shapes, both reductions", gpu_shapes::<Rt>));
    }
    run_groups(client, &groups)
}
