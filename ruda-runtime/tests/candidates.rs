//! Every LayerNorm autotune candidate, run on its own (planned exactly as the tuner benchmarks
//! it), forward and backward against an exact f64 reference, on Mesa's lavapipe.
//!
//! The tuner keeps whichever candidate is fastest; it never looks at the results. So a candidate
//! that is off the reference would be chosen silently wherever it happens to be fast: each one
//! must be right on its own, at the shapes where the candidates differ most (long rows, where
//! one unit of `UnitPerRow` sums a whole row; the representative shape the tuner benchmarks at
//! d = 65536; odd `d`, where the half-width candidates cannot run).
//!
//! The root crate's `tests/layer_norm.rs` (`every_candidate`) runs the same candidates through
//! the shared checks, with rows of every kind and a transposed input.

use cubecl::wgpu::WgpuDevice;
use ruda_runtime::cubecl::{self, Runtime as _, client::ComputeClient, zspace::Shape};
use ruda_runtime::layer_norm::tune::{BACKWARD_CANDIDATES, CANDIDATES, Candidate, LayerNormKey};
use ruda_runtime::layer_norm::{ColumnSums, Variant};
use ruda_runtime::prelude::DType;
use ruda_runtime::{RudaWgpu, TensorBuffer};

type R = RudaWgpu;
const EPS: f64 = 1e-5;
/// Forward tolerance (relative to the largest reference value of the tensor), as the root
/// crate's checks: every candidate must be as accurate as an f32 kernel can be.
const TOL_FORWARD: f64 = 1e-5;
/// Backward tolerance, as the root crate's checks.
const TOL_BACKWARD: f64 = 1e-4;

fn client() -> ComputeClient<R> {
    R::client(&WgpuDevice::Cpu)
}

/// SplitMix64 with Box-Muller normals.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(1e-300);
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * self.uniform()).cos()
    }
    fn values(&mut self, n: usize, mean: f64, std: f64) -> Vec<f32> {
        (0..n)
            .map(|_| (mean + std * self.normal()) as f32)
            .collect()
    }
}

/// Rows cycling through mean 0.5 / std 2, mean 1e4 / std 1e-2 (cancels through any f32 mean)
/// and constant rows.
fn rows_of(rng: &mut Rng, rows: usize, d: usize) -> Vec<f32> {
    let mut x = Vec::with_capacity(rows * d);
    for r in 0..rows {
        let constant = rng.normal() as f32;
        for _ in 0..d {
            x.push(match r % 3 {
                0 => (0.5 + 2.0 * rng.normal()) as f32,
                1 => (1e4 + 1e-2 * rng.normal()) as f32,
                _ => constant,
            });
        }
    }
    x
}

struct Reference {
    out: Vec<f64>,
    mean: Vec<f64>,
    rstd: Vec<f64>,
    dx: Vec<f64>,
    dgamma: Vec<f64>,
    dbeta: Vec<f64>,
}

/// LayerNorm forward and backward in f64, from `x` alone.
fn reference(x: &[f32], d: usize, gamma: &[f32], beta: &[f32], dy: &[f32]) -> Reference {
    let rows = x.len() / d;
    let mut r = Reference {
        out: vec![0.0; rows * d],
        mean: vec![0.0; rows],
        rstd: vec![0.0; rows],
        dx: vec![0.0; rows * d],
        dgamma: vec![0.0; d],
        dbeta: vec![0.0; d],
    };
    for row in 0..rows {
        let xs = &x[row * d..(row + 1) * d];
        let mean = xs.iter().map(|&v| v as f64).sum::<f64>() / d as f64;
        let var = xs.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / d as f64;
        let rstd = 1.0 / (var + EPS).sqrt();
        r.mean[row] = mean;
        r.rstd[row] = rstd;
        let xhat: Vec<f64> = xs.iter().map(|&v| (v as f64 - mean) * rstd).collect();
        let g: Vec<f64> = (0..d)
            .map(|c| dy[row * d + c] as f64 * gamma[c] as f64)
            .collect();
        let mean_g = g.iter().sum::<f64>() / d as f64;
        let mean_gx = g.iter().zip(&xhat).map(|(a, b)| a * b).sum::<f64>() / d as f64;
        for c in 0..d {
            let i = row * d + c;
            r.out[i] = xhat[c] * gamma[c] as f64 + beta[c] as f64;
            r.dx[i] = rstd * (g[c] - mean_g - xhat[c] * mean_gx);
            r.dgamma[c] += dy[i] as f64 * xhat[c];
            r.dbeta[c] += dy[i] as f64;
        }
    }
    r
}

/// Largest `|got - want|` over the largest `|want|`.
fn relative_error(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-30);
    got.iter()
        .zip(want)
        .map(|(&g, &w)| {
            if g.is_finite() {
                (g as f64 - w).abs() / scale
            } else {
                f64::INFINITY
            }
        })
        .fold(0.0, f64::max)
}

fn upload(client: &ComputeClient<R>, values: &[f32], shape: &[usize]) -> TensorBuffer {
    TensorBuffer::from_f32s(client, values, Shape::from(shape.to_vec()), DType::F32)
}

/// Runs `candidate` forward and backward on `rows x d`; `None` when it cannot run the shape
/// (the tuner skips it there), else the wrong results, one line each (empty when right).
fn check_candidate(
    client: &ComputeClient<R>,
    candidate: Candidate,
    rows: usize,
    d: usize,
) -> Option<Vec<String>> {
    let mut rng = Rng(7 + d as u64);
    let x = rows_of(&mut rng, rows, d);
    let gamma = rng.values(d, 1.0, 0.5);
    let beta = rng.values(d, 0.0, 0.5);
    let dy = rng.values(rows * d, 0.0, 1.0);
    let want = reference(&x, d, &gamma, &beta, &dy);

    let up = |v: &[f32], s: &[usize]| upload(client, v, s);
    let [out, mean, rstd] = candidate
        .forward(
            client,
            up(&x, &[rows, d]),
            up(&gamma, &[d]),
            Some(up(&beta, &[d])),
            EPS,
        )
        .ok()?;
    // The backward takes the candidate's own statistics, as a training step does. It may
    // refuse a shape the forward runs (a register variant with too many elements a unit): the
    // forward is still checked.
    let backward = candidate.backward(
        client,
        up(&x, &[rows, d]),
        up(&gamma, &[d]),
        up(&dy, &[rows, d]),
        mean.clone(),
        rstd.clone(),
    );
    let mut results = vec![
        ("out", out, &want.out, TOL_FORWARD),
        ("mean", mean, &want.mean, TOL_FORWARD),
        ("rstd", rstd, &want.rstd, TOL_FORWARD),
    ];
    match backward {
        Ok([dx, dgamma, dbeta]) => results.extend([
            ("dx", dx, &want.dx, TOL_BACKWARD),
            ("dgamma", dgamma, &want.dgamma, TOL_BACKWARD),
            ("dbeta", dbeta, &want.dbeta, TOL_BACKWARD),
        ]),
        Err(why) => println!(
            "{:>22} {rows:>4} x {d:<6} backward skipped: {why}",
            candidate.name()
        ),
    }
    let mut wrong = Vec::new();
    let mut line = format!("{:>22} {rows:>4} x {d:<6}", candidate.name());
    for (name, got, want, tol) in results {
        let got = got.to_f32s(client);
        let err = relative_error(&got, want);
        line.push_str(&format!(" {name} {err:.1e}"));
        if err.is_nan() || err > tol {
            // The worst element, to tell which row (and which of its kinds) is off.
            let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let (i, _) = got
                .iter()
                .zip(want.iter())
                .map(|(&g, &w)| (g as f64 - w).abs())
                .enumerate()
                .fold((0, -1.0), |b, (i, e)| if e > b.1 { (i, e) } else { b });
            let per_row = got.len() / rows.max(1);
            wrong.push(format!(
                "{} at {rows} x {d}: {name} relative error {err:.3e} > {tol:.0e} (worst: \
                 element {i}, row {}, got {}, want {}, scale {scale:.3e})",
                candidate.name(),
                i / per_row.max(1),
                got[i],
                want[i]
            ));
        }
    }
    println!("{line}");
    Some(wrong)
}

/// Every candidate at `shapes`; panics listing every wrong result. Returns, per shape, the
/// candidates that ran.
fn check_all(candidates: &[Candidate], shapes: &[(usize, usize)]) -> Vec<Vec<Candidate>> {
    let client = client();
    let mut wrong = Vec::new();
    let mut ran = Vec::new();
    for &(rows, d) in shapes {
        let mut ran_here = Vec::new();
        for &candidate in candidates {
            match check_candidate(&client, candidate, rows, d) {
                Some(w) => {
                    wrong.extend(w);
                    ran_here.push(candidate);
                }
                None => println!("{:>22} {rows:>4} x {d:<6} skipped", candidate.name()),
            }
        }
        ran.push(ran_here);
    }
    assert!(
        wrong.is_empty(),
        "{} result(s) off the reference:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    ran
}

#[test]
fn candidates_are_every_variant_at_both_widths() {
    assert_eq!(CANDIDATES.len(), 8);
    for variant in [
        Variant::PlanePerRow,
        Variant::CubePerRow,
        Variant::CubePerRowLooped,
        Variant::UnitPerRow,
    ] {
        for narrow in [false, true] {
            assert!(CANDIDATES.contains(&Candidate::new(variant, narrow)));
        }
    }
    // The backward's: the same, then the register variants at both widths with their column
    // sums in shared memory.
    assert_eq!(BACKWARD_CANDIDATES.len(), 12);
    assert_eq!(BACKWARD_CANDIDATES[..8], CANDIDATES);
    for variant in [Variant::PlanePerRow, Variant::CubePerRow] {
        for narrow in [false, true] {
            let shared = Candidate::new(variant, narrow).with_column_sums(ColumnSums::SharedMemory);
            assert!(BACKWARD_CANDIDATES[8..].contains(&shared));
        }
    }
}

/// Long rows: d = 65536 (the shape that exposed a wrong choice, at 3 rows, and the tuner's
/// representative shape of its key, 4 rows), and other long rows at both widths.
///
/// `UnitPerRow` with half-width vectors at d = 65536 needs 3 * 32768 loop iterations in one
/// unit, more than lavapipe runs (it silently ended the loops, leaving most of `out`
/// unwritten, which also made that candidate the fastest): it must now refuse the shape, so
/// that the tuner skips it, while every candidate that runs must match the reference.
#[test]
fn every_candidate_long_rows() {
    let client = client();
    let key = LayerNormKey::new(&client, 65536, 3, DType::F32);
    let (d, rows) = key.representative(&client);
    assert_eq!((rows, d), (4, 65536));
    let shapes = [
        (3, 65536),
        (rows, d),
        (2, 40000),
        (3, 32768),
        (3, 16384),
        (4, 8192),
        (2, 131072),
    ];
    let ran = check_all(&BACKWARD_CANDIDATES, &shapes);
    let unit = |narrow| Candidate::new(Variant::UnitPerRow, narrow);
    for (ran, (_, d)) in ran.iter().zip(shapes) {
        // The looped variant runs any row at both widths.
        for narrow in [false, true] {
            assert!(ran.contains(&Candidate::new(Variant::CubePerRowLooped, narrow)));
        }
        // One unit per row within the loop limit only (d / N * 3 + 1 <= 64511).
        assert_eq!(ran.contains(&unit(false)), d <= 86012, "d = {d}");
        assert_eq!(ran.contains(&unit(true)), d <= 43006, "d = {d}");
    }
}

/// Short and medium rows, many rows, odd `d` (scalars: the half-width candidates are skipped),
/// more rows than a unit may loop over on lavapipe (the column sums of `UnitPerRow`'s
/// backward run one loop iteration per row), and more partial column sums than one chunk of
/// the backward's column reduction takes in one launch (4096x3: scalars, so 16 units a column;
/// 512 partial rows on lavapipe, 32 a unit, more than 24: four chunks, then a second launch).
#[test]
fn every_candidate_short_rows() {
    let shapes = [
        (64, 768),
        (1024, 256),
        (21, 64),
        (9, 3),
        (5, 1),
        (37, 1031),
        (70000, 4),
        (4096, 3),
    ];
    let ran = check_all(&BACKWARD_CANDIDATES, &shapes);
    // All eight of the forward's run on vectorized rows that fit in registers.
    assert!(CANDIDATES.iter().all(|c| ran[0].contains(c)));
    // 21 x 64: a few KiB of column sums a cube, so all twelve run, shared sums included.
    assert_eq!(ran[2].len(), 12, "{:?}", ran[2]);
    // Odd d: no half-width vector.
    assert!(ran[5].iter().all(|c| !c.narrow));
    // 70000 rows: no unit-per-row candidate; the others run at both widths, and the register
    // variants also with shared sums.
    assert!(ran[6].iter().all(|c| c.variant != Variant::UnitPerRow));
    assert_eq!(ran[6].len(), 10, "{:?}", ran[6]);
}

/// The backward's register budget: a plane per row holds `d / 32` elements a unit whatever the
/// vector, so at d = 2048 (64 elements) the tuner's backward candidate is refused before
/// anything is launched while its forward runs, and at d = 1024 (32) both run; a forced
/// strategy still runs the backward at d = 2048 and matches the reference.
#[test]
fn backward_register_budget() {
    use ruda_runtime::layer_norm::{BACKWARD_MAX_ELEMENTS_PER_UNIT, layer_norm_backward_with};
    assert_eq!(BACKWARD_MAX_ELEMENTS_PER_UNIT, 32);
    let client = client();
    let plane = Candidate::new(Variant::PlanePerRow, false);
    let rows = 8;
    for (d, refused) in [(1024, false), (2048, true)] {
        let mut rng = Rng(11 + d as u64);
        let x = rows_of(&mut rng, rows, d);
        let gamma = rng.values(d, 1.0, 0.5);
        let dy = rng.values(rows * d, 0.0, 1.0);
        let up = |v: &[f32], s: &[usize]| upload(&client, v, s);
        let [_, mean, rstd] = plane
            .forward(&client, up(&x, &[rows, d]), up(&gamma, &[d]), None, EPS)
            .unwrap_or_else(|why| panic!("forward at d = {d}: {why}"));
        let backward = plane.backward(
            &client,
            up(&x, &[rows, d]),
            up(&gamma, &[d]),
            up(&dy, &[rows, d]),
            mean.clone(),
            rstd.clone(),
        );
        match backward {
            Ok(_) => assert!(
                !refused,
                "d = {d}: the backward candidate should be refused"
            ),
            Err(why) => {
                assert!(refused, "d = {d}: refused: {why}");
                assert!(why.contains("64 elements a unit"), "{why}");
            }
        }
        if refused {
            let [dx, ..] = layer_norm_backward_with(
                &client,
                up(&x, &[rows, d]),
                up(&gamma, &[d]),
                up(&dy, &[rows, d]),
                mean,
                rstd,
                Variant::PlanePerRow,
            );
            let want = reference(&x, d, &gamma, &vec![0.0; d], &dy);
            let err = relative_error(&dx.to_f32s(&client), &want.dx);
            assert!(
                err <= TOL_BACKWARD,
                "forced backward at d = {d}: dx error {err:.2e}"
            );
        }
    }
}
