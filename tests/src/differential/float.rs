//! Float ops: elementwise (binary, scalar, unary, broadcast, casts), strided inputs, matmul.

use burn::tensor::backend::Backend;

use super::{CheckResult, Checker};

/// Every float elementwise op on `[3, 5, 7]` inputs (no dim a multiple of 4).
pub fn elementwise<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("a, b: [3, 5, 7] in [-2, 2); p: [3, 5, 7] in [0.1, 3); row: [1, 5, 1]");
    let (a, na) = c.floats(1, [3, 5, 7]);
    let (b, nb) = c.floats(2, [3, 5, 7]);
    let (p, np) = c.floats_in(3, [3, 5, 7], 0.1, 3.0);
    let (row, nrow) = c.floats(4, [1, 5, 1]);
    c.close("a + b", a.clone() + b.clone(), na.clone() + nb.clone());
    c.close("a - b", a.clone() - b.clone(), na.clone() - nb.clone());
    c.close("a * b", a.clone() * b.clone(), na.clone() * nb.clone());
    c.close("a / p", a.clone() / p.clone(), na.clone() / np.clone());
    c.close(
        "a - row (broadcast)",
        a.clone() - row.clone(),
        na.clone() - nrow.clone(),
    );
    c.close(
        "row * b (broadcast lhs)",
        row.clone() * b.clone(),
        nrow.clone() * nb.clone(),
    );
    c.close("a + 1.5", a.clone() + 1.5, na.clone() + 1.5);
    c.close("a - 0.25", a.clone() - 0.25, na.clone() - 0.25);
    c.close("a * -3", a.clone() * -3.0, na.clone() * -3.0);
    c.close("a / 4", a.clone() / 4.0, na.clone() / 4.0);
    c.close("-a", -a.clone(), -na.clone());
    c.close("exp(a)", a.clone().exp(), na.clone().exp());
    c.close("log(p)", p.clone().log(), np.clone().log());
    c.close("log1p(p)", p.clone().log1p(), np.clone().log1p());
    c.close("sqrt(p)", p.clone().sqrt(), np.clone().sqrt());
    c.close("recip(p)", p.clone().recip(), np.clone().recip());
    c.close("abs(a)", a.clone().abs(), na.clone().abs());
    c.close("sin(a)", a.clone().sin(), na.clone().sin());
    c.close("cos(a)", a.clone().cos(), na.clone().cos());
    c.close(
        "tan(a / 2)",
        (a.clone() / 2.0).tan(),
        (na.clone() / 2.0).tan(),
    );
    c.close("tanh(a)", a.clone().tanh(), na.clone().tanh());
    c.close("sinh(a)", a.clone().sinh(), na.clone().sinh());
    c.close("cosh(a)", a.clone().cosh(), na.clone().cosh());
    c.close("atan(a)", a.clone().atan(), na.clone().atan());
    // 1e-3: Vulkan only requires asin to be as precise as `atan2(x, sqrt(1 - x^2))` (atan: 4096
    // ulp); lavapipe is ~4e-4 off near |x| = 0.93.
    c.close_tol(
        "asin(a / 2)",
        (a.clone() / 2.0).asin(),
        (na.clone() / 2.0).asin(),
        1e-3,
    );
    c.close("erf(a)", a.clone().erf(), na.clone().erf());
    c.close(
        "powf_scalar(p, 1.7)",
        p.clone().powf_scalar(1.7),
        np.clone().powf_scalar(1.7),
    );
    c.close(
        "powf(p, b)",
        p.clone().powf(b.clone()),
        np.clone().powf(nb.clone()),
    );
    c.close(
        "powi_scalar(a, 3)",
        a.clone().powi_scalar(3),
        na.clone().powi_scalar(3),
    );
    c.close(
        "clamp(a, -0.5, 0.7)",
        a.clone().clamp(-0.5, 0.7),
        na.clone().clamp(-0.5, 0.7),
    );
    c.close(
        "clamp_min(a, 0.1)",
        a.clone().clamp_min(0.1),
        na.clone().clamp_min(0.1),
    );
    c.close(
        "clamp_max(a, -0.1)",
        a.clone().clamp_max(-0.1),
        na.clone().clamp_max(-0.1),
    );
    c.close("floor(a)", a.clone().floor(), na.clone().floor());
    c.close("ceil(a)", a.clone().ceil(), na.clone().ceil());
    c.close(
        "round(3a)",
        (a.clone() * 3.0).round(),
        (na.clone() * 3.0).round(),
    );
    c.close(
        "remainder(a, p)",
        a.clone().remainder(p.clone()),
        na.clone().remainder(np.clone()),
    );
    c.close(
        "atan2(a, p)",
        a.clone().atan2(p.clone()),
        na.clone().atan2(np.clone()),
    );
    c.close("sign(a)", a.clone().sign(), na.clone().sign());
    c.close(
        "max_pair(a, b)",
        a.clone().max_pair(b.clone()),
        na.clone().max_pair(nb.clone()),
    );
    c.close(
        "min_pair(a, b)",
        a.clone().min_pair(b.clone()),
        na.clone().min_pair(nb.clone()),
    );
    c.close(
        "int(4a).float() (cast to int and back)",
        (a.clone() * 4.0).int().float(),
        (na.clone() * 4.0).int().float(),
    );
    c.close(
        "zeros_like + ones_like + full_like",
        a.zeros_like() + b.ones_like() + p.full_like(0.5),
        na.zeros_like() + nb.ones_like() + np.full_like(0.5),
    );
    c.finish()
}

/// Elementwise ops on non-contiguous inputs: permuted, sliced, transposed, expanded.
pub fn strided<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("a: [6, 5, 7]; b: [7, 5, 6]; col: [6, 1, 1]");
    let (a, na) = c.floats(5, [6, 5, 7]);
    let (b, nb) = c.floats(6, [7, 5, 6]);
    let (col, ncol) = c.floats(7, [6, 1, 1]);
    c.close(
        "a + b.permute([2, 1, 0])",
        a.clone() + b.clone().permute([2, 1, 0]),
        na.clone() + nb.clone().permute([2, 1, 0]),
    );
    c.close(
        "exp(a.slice([1..5, 0..5, 2..7]))",
        a.clone().slice([1..5, 0..5, 2..7]).exp(),
        na.clone().slice([1..5, 0..5, 2..7]).exp(),
    );
    c.close(
        "a.swap_dims(0, 2) * b",
        a.clone().swap_dims(0, 2) * b.clone(),
        na.clone().swap_dims(0, 2) * nb.clone(),
    );
    c.close(
        "col.expand([6, 5, 7]) - a",
        col.clone().expand([6, 5, 7]) - a.clone(),
        ncol.clone().expand([6, 5, 7]) - na.clone(),
    );
    c.close(
        "tanh(a.permute([1, 2, 0])).sum_dim(2)",
        a.clone().permute([1, 2, 0]).tanh().sum_dim(2),
        na.clone().permute([1, 2, 0]).tanh().sum_dim(2),
    );
    c.close(
        "a.flip([1]).mask_where(a > 0, b.permute)",
        a.clone()
            .flip([1])
            .mask_where(a.clone().greater_elem(0.0), b.clone().permute([2, 1, 0])),
        na.clone()
            .flip([1])
            .mask_where(na.clone().greater_elem(0.0), nb.clone().permute([2, 1, 0])),
    );
    c.finish()
}

/// Batched, broadcast and transposed matmul.
///
/// Tolerance 1e-3: sums of 9 products accumulate in a different order (and tile size) on the
/// device than on the CPU; plus the TF32 rounding bound where the device rounds operands
/// ([`Checker::close_products`], magnitude `|a|.matmul(|b|)`).
///
/// Two cases only: on lavapipe every distinct matmul kernel (layout, vector width, tile size,
/// fused ops) costs ~10 s of shader compilation; the models of [`super::gradients`] run more.
pub fn matmul<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("a: [2, 3, 17, 9]; b: [2, 3, 9, 13]; c: [1, 3, 13, 9]");
    let (a, na) = c.floats(20, [2, 3, 17, 9]);
    let (b, nb) = c.floats(21, [2, 3, 9, 13]);
    c.close_products(
        "batched a.matmul(b)",
        a.clone().matmul(b),
        na.clone().matmul(nb.clone()),
        na.clone().abs().matmul(nb.abs()),
        1e-3,
    );
    let (t, nt) = c.floats(22, [1, 3, 13, 9]);
    c.close_products(
        "broadcast a.matmul(c.transpose())",
        a.clone().matmul(t.transpose()),
        na.clone().matmul(nt.clone().transpose()),
        na.abs().matmul(nt.abs().transpose()),
        1e-3,
    );
    c.finish()
}
