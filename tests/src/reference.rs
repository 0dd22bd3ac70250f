//! LayerNorm on the host in f64: the reference every kernel check compares against.

/// Reference forward results, one `mean`/`rstd` per row.
#[derive(Clone, Debug)]
pub struct Forward {
    /// Normalized, scaled and shifted output, row-major `[rows, d]`.
    pub out: Vec<f64>,
    /// Mean of each row.
    pub mean: Vec<f64>,
    /// `1 / sqrt(biased variance + epsilon)` of each row.
    pub rstd: Vec<f64>,
}

/// Reference gradients.
#[derive(Clone, Debug)]
pub struct Backward {
    /// Gradient of the input, `[rows, d]`.
    pub dx: Vec<f64>,
    /// Gradient of gamma, `[d]`.
    pub dgamma: Vec<f64>,
    /// Gradient of beta (the column sums of `dy`), `[d]`.
    pub dbeta: Vec<f64>,
}

/// LayerNorm over rows of `d` values of `x` (row-major), two-pass in f64.
pub fn forward(x: &[f32], d: usize, gamma: &[f32], beta: Option<&[f32]>, epsilon: f64) -> Forward {
    let rows = x.len().checked_div(d).unwrap_or(0);
    let mut result = Forward {
        out: Vec::with_capacity(x.len()),
        mean: Vec::with_capacity(rows),
        rstd: Vec::with_capacity(rows),
    };
    for row in x.chunks(d) {
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / d as f64;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / d as f64;
        let rstd = 1.0 / (var + epsilon).sqrt();
        for (j, &v) in row.iter().enumerate() {
            let shift = beta.map_or(0.0, |b| b[j] as f64);
            result
                .out
                .push((v as f64 - mean) * rstd * gamma[j] as f64 + shift);
        }
        result.mean.push(mean);
        result.rstd.push(rstd);
    }
    result
}

/// Gradients of `sum(out * dy)` with respect to `x`, gamma and beta.
pub fn backward(x: &[f32], d: usize, gamma: &[f32], dy: &[f32], epsilon: f64) -> Backward {
    let stats = forward(x, d, gamma, None, epsilon);
    let mut result = Backward {
        dx: Vec::with_capacity(x.len()),
        dgamma: vec![0.0; d],
        dbeta: vec![0.0; d],
    };
    for (r, (row, dy_row)) in x.chunks(d).zip(dy.chunks(d)).enumerate() {
        let (mean, rstd) = (stats.mean[r], stats.rstd[r]);
        let xhat: Vec<f64> = row.iter().map(|&v| (v as f64 - mean) * rstd).collect();
        let g: Vec<f64> = dy_row
            .iter()
            .zip(gamma)
            .map(|(&a, &b)| a as f64 * b as f64)
            .collect();
        let mean_g = g.iter().sum::<f64>() / d as f64;
        let mean_gx = g.iter().zip(&xhat).map(|(a, b)| a * b).sum::<f64>() / d as f64;
        for j in 0..d {
            result.dx.push(rstd * (g[j] - mean_g - xhat[j] * mean_gx));
            result.dgamma[j] += dy_row[j] as f64 * xhat[j];
            result.dbeta[j] += dy_row[j] as f64;
        }
    }
    result
}

/// Largest absolute difference over the reference's largest magnitude; the absolute difference
/// when the reference is all zeros (e.g. `dx` for `d = 1`), and 0 for empty inputs.
///
/// A NaN in `got` where the reference has none gives NaN, which fails every `<=` comparison.
pub fn max_relative_error(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "compared tensors differ in length");
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let scale = if scale > 0.0 { scale } else { 1.0 };
    got.iter()
        .zip(want)
        .filter(|(g, w)| !(g.is_nan() && w.is_nan()))
        .map(|(&g, &w)| (g as f64 - w).abs() / scale)
        .fold(0.0, |m: f64, e| {
            if e.is_nan() || m.is_nan() {
                f64::NAN
            } else {
                m.max(e)
            }
        })
}
