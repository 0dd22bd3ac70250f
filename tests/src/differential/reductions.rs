//! Reductions: sum, mean, prod, min/max (with indices), arg-reductions, cumulative ops, var.

use burn::tensor::backend::Backend;

use super::{CheckResult, Checker};

/// Every reduction over each dim of a `[3, 4, 9]` tensor.
pub fn float<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("a: [3, 4, 9] in [-2, 2); p: [3, 4, 9] in [0.5, 1.5)");
    let (a, na) = c.floats(7, [3, 4, 9]);
    let (p, np) = c.floats_in(8, [3, 4, 9], 0.5, 1.5);
    c.close("a.sum()", a.clone().sum(), na.clone().sum());
    c.close("a.mean()", a.clone().mean(), na.clone().mean());
    c.close("a.max()", a.clone().max(), na.clone().max());
    c.close("a.min()", a.clone().min(), na.clone().min());
    c.close("p.prod()", p.clone().prod(), np.clone().prod());
    for dim in 0..3 {
        c.close(
            &format!("a.sum_dim({dim})"),
            a.clone().sum_dim(dim),
            na.clone().sum_dim(dim),
        );
        c.close(
            &format!("a.mean_dim({dim})"),
            a.clone().mean_dim(dim),
            na.clone().mean_dim(dim),
        );
        c.close(
            &format!("p.prod_dim({dim})"),
            p.clone().prod_dim(dim),
            np.clone().prod_dim(dim),
        );
        c.close(
            &format!("a.max_dim({dim})"),
            a.clone().max_dim(dim),
            na.clone().max_dim(dim),
        );
        c.close(
            &format!("a.min_dim({dim})"),
            a.clone().min_dim(dim),
            na.clone().min_dim(dim),
        );
        c.same_int(
            &format!("a.argmax({dim})"),
            a.clone().argmax(dim),
            na.clone().argmax(dim),
        );
        c.same_int(
            &format!("a.argmin({dim})"),
            a.clone().argmin(dim),
            na.clone().argmin(dim),
        );
        c.close(
            &format!("a.cumsum({dim})"),
            a.clone().cumsum(dim),
            na.clone().cumsum(dim),
        );
        c.close(
            &format!("p.cumprod({dim})"),
            p.clone().cumprod(dim),
            np.clone().cumprod(dim),
        );
        c.close(
            &format!("a.cummax({dim})"),
            a.clone().cummax(dim),
            na.clone().cummax(dim),
        );
        c.close(
            &format!("a.cummin({dim})"),
            a.clone().cummin(dim),
            na.clone().cummin(dim),
        );
        c.close(
            &format!("a.var({dim})"),
            a.clone().var(dim),
            na.clone().var(dim),
        );
    }
    let (v, i) = a.clone().max_dim_with_indices(1);
    let (nv, ni) = na.clone().max_dim_with_indices(1);
    c.close("a.max_dim_with_indices(1) values", v, nv);
    c.same_int("a.max_dim_with_indices(1) indices", i, ni);
    let (v, i) = a.clone().min_dim_with_indices(2);
    let (nv, ni) = na.clone().min_dim_with_indices(2);
    c.close("a.min_dim_with_indices(2) values", v, nv);
    c.same_int("a.min_dim_with_indices(2) indices", i, ni);
    c.close(
        "a.max_abs_dim(2)",
        a.clone().max_abs_dim(2),
        na.clone().max_abs_dim(2),
    );
    c.finish()
}

/// Long rows (several workgroups per row) and a reduction over a permuted tensor.
///
/// Tolerance 1e-3 for the sums and means: 10 007 terms accumulate in a different order (tree on
/// the device, sequential on the CPU); the f32 rounding of either order is ~1e-5 relative to the
/// sum of absolute values, which the 1 + |want| denominator does not cover for a sum near 0.
pub fn long<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("a: [3, 10007] in [-2, 2); t: [37, 29, 5] in [-2, 2)");
    let (a, na) = c.floats(30, [3, 10007]);
    c.close_tol(
        "a.sum_dim(1)",
        a.clone().sum_dim(1),
        na.clone().sum_dim(1),
        1e-3,
    );
    c.close_tol(
        "a.mean_dim(1)",
        a.clone().mean_dim(1),
        na.clone().mean_dim(1),
        1e-4,
    );
    c.close_tol("a.sum()", a.clone().sum(), na.clone().sum(), 1e-3);
    c.close("a.max_dim(1)", a.clone().max_dim(1), na.clone().max_dim(1));
    c.same_int("a.argmin(1)", a.clone().argmin(1), na.clone().argmin(1));
    let (t, nt) = c.floats(31, [37, 29, 5]);
    c.close_tol(
        "t.permute([2, 0, 1]).sum_dim(1)",
        t.clone().permute([2, 0, 1]).sum_dim(1),
        nt.clone().permute([2, 0, 1]).sum_dim(1),
        1e-4,
    );
    c.same_int(
        "t.permute([2, 0, 1]).argmax(2)",
        t.clone().permute([2, 0, 1]).argmax(2),
        nt.clone().permute([2, 0, 1]).argmax(2),
    );
    c.close(
        "t.swap_dims(0, 1).var(1)",
        t.clone().swap_dims(0, 1).var(1),
        nt.clone().swap_dims(0, 1).var(1),
    );
    c.finish()
}
