//! Int ops, comparisons, masks and bool ops.

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};

use super::{CheckResult, Checker, Reference};

/// Int arithmetic, reductions, comparisons, casts, layout and bitwise ops on `[4, 5]`.
pub fn int_ops<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("a: [4, 5] int in [0, 50); b: [4, 5] int in [0, 7)");
    let (a, na) = c.ints(9, [4, 5], 50);
    let (b, nb) = c.ints(10, [4, 5], 7);
    let b1 = b.clone() + 1;
    let nb1 = nb.clone() + 1;
    c.same_int("a + b", a.clone() + b.clone(), na.clone() + nb.clone());
    c.same_int("a - b", a.clone() - b.clone(), na.clone() - nb.clone());
    c.same_int("a * b", a.clone() * b.clone(), na.clone() * nb.clone());
    c.same_int(
        "a / (b + 1)",
        a.clone() / b1.clone(),
        na.clone() / nb1.clone(),
    );
    c.same_int(
        "a.remainder(b + 1)",
        a.clone().remainder(b1.clone()),
        na.clone().remainder(nb1.clone()),
    );
    c.same_int(
        "(a - 25).remainder(b + 1) (negative dividend)",
        (a.clone() - 25).remainder(b1.clone()),
        (na.clone() - 25).remainder(nb1.clone()),
    );
    c.same_int("a * 3", a.clone() * 3, na.clone() * 3);
    c.same_int("a / 3", a.clone() / 3, na.clone() / 3);
    c.same_int("a - 7", a.clone() - 7, na.clone() - 7);
    c.same_int("abs(-a)", (-a.clone()).abs(), (-na.clone()).abs());
    c.same_int(
        "sign(a - 25)",
        (a.clone() - 25).sign(),
        (na.clone() - 25).sign(),
    );
    c.same_int("a.sum_dim(1)", a.clone().sum_dim(1), na.clone().sum_dim(1));
    c.same_int("a.sum()", a.clone().sum(), na.clone().sum());
    c.same_int(
        "a.prod_dim(0) of b + 1",
        b1.clone().prod_dim(0),
        nb1.clone().prod_dim(0),
    );
    c.same_int("a.max_dim(0)", a.clone().max_dim(0), na.clone().max_dim(0));
    c.same_int("a.min_dim(1)", a.clone().min_dim(1), na.clone().min_dim(1));
    c.same_int("a.argmax(1)", a.clone().argmax(1), na.clone().argmax(1));
    c.same_int("a.argmin(0)", a.clone().argmin(0), na.clone().argmin(0));
    c.same_int("a.cumsum(0)", a.clone().cumsum(0), na.clone().cumsum(0));
    c.same_int(
        "a.clamp(5, 30)",
        a.clone().clamp(5, 30),
        na.clone().clamp(5, 30),
    );
    c.same_int(
        "a.powi_scalar(2)",
        a.clone().powi_scalar(2),
        na.clone().powi_scalar(2),
    );
    c.same_bool(
        "a > b",
        a.clone().greater(b.clone()),
        na.clone().greater(nb.clone()),
    );
    c.same_bool(
        "a <= 20",
        a.clone().lower_equal_elem(20),
        na.clone().lower_equal_elem(20),
    );
    c.same_bool("b == 3", b.clone().equal_elem(3), nb.clone().equal_elem(3));
    c.same_int(
        "a.mask_fill(b == 2, -1)",
        a.clone().mask_fill(b.clone().equal_elem(2), -1),
        na.clone().mask_fill(nb.clone().equal_elem(2), -1),
    );
    c.same_int(
        "a.mask_where(b > 3, b)",
        a.clone().mask_where(b.clone().greater_elem(3), b.clone()),
        na.clone()
            .mask_where(nb.clone().greater_elem(3), nb.clone()),
    );
    c.same_int(
        "arange(3..17)",
        Tensor::<B, 1, Int>::arange(3..17, device),
        Tensor::<Reference, 1, Int>::arange(3..17, c.reference_device()),
    );
    c.close(
        "a.float() / 7",
        a.clone().float() / 7.0,
        na.clone().float() / 7.0,
    );
    c.same_int(
        "a.swap_dims(0, 1)",
        a.clone().swap_dims(0, 1),
        na.clone().swap_dims(0, 1),
    );
    c.same_int(
        "a.reshape([2, 10]).slice([0..2, 3..9])",
        a.clone().reshape([2, 10]).slice([0..2, 3..9]),
        na.clone().reshape([2, 10]).slice([0..2, 3..9]),
    );
    c.same_int(
        "cat([a, b], 0)",
        Tensor::cat(vec![a.clone(), b.clone()], 0),
        Tensor::cat(vec![na.clone(), nb.clone()], 0),
    );
    c.same_int(
        "a.bitwise_and(b)",
        a.clone().bitwise_and(b.clone()),
        na.clone().bitwise_and(nb.clone()),
    );
    c.same_int(
        "a.bitwise_or(b)",
        a.clone().bitwise_or(b.clone()),
        na.clone().bitwise_or(nb.clone()),
    );
    c.same_int(
        "a.bitwise_xor(b)",
        a.clone().bitwise_xor(b.clone()),
        na.clone().bitwise_xor(nb.clone()),
    );
    c.same_int(
        "a.bitwise_left_shift(b mod 4)",
        a.clone().bitwise_left_shift(b.clone().remainder_scalar(4)),
        na.clone()
            .bitwise_left_shift(nb.clone().remainder_scalar(4)),
    );
    c.finish()
}

/// Float comparisons, masks, bool logic and bool reductions on `[4, 6]`.
pub fn comparisons_and_bool<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("a, b: [4, 6] in [-2, 2)");
    let (a, na) = c.floats(5, [4, 6]);
    let (b, nb) = c.floats(6, [4, 6]);
    c.same_bool(
        "a > b",
        a.clone().greater(b.clone()),
        na.clone().greater(nb.clone()),
    );
    c.same_bool(
        "a >= b",
        a.clone().greater_equal(b.clone()),
        na.clone().greater_equal(nb.clone()),
    );
    c.same_bool(
        "a < b",
        a.clone().lower(b.clone()),
        na.clone().lower(nb.clone()),
    );
    c.same_bool(
        "a <= b",
        a.clone().lower_equal(b.clone()),
        na.clone().lower_equal(nb.clone()),
    );
    c.same_bool(
        "a > 0.3",
        a.clone().greater_elem(0.3),
        na.clone().greater_elem(0.3),
    );
    c.same_bool(
        "a < -0.3",
        a.clone().lower_elem(-0.3),
        na.clone().lower_elem(-0.3),
    );
    c.same_bool(
        "a == a",
        a.clone().equal(a.clone()),
        na.clone().equal(na.clone()),
    );
    c.same_bool(
        "a != b",
        a.clone().not_equal(b.clone()),
        na.clone().not_equal(nb.clone()),
    );
    c.same_bool(
        "is_nan(a / 0 * 0)",
        (a.clone() / 0.0 * 0.0).is_nan(),
        (na.clone() / 0.0 * 0.0).is_nan(),
    );
    c.same_bool(
        "is_inf(a / 0)",
        (a.clone() / 0.0).is_inf(),
        (na.clone() / 0.0).is_inf(),
    );
    let (m, nm) = (a.clone().greater(b.clone()), na.clone().greater(nb.clone()));
    let (k, nk) = (a.clone().lower_elem(0.0), na.clone().lower_elem(0.0));
    c.same_bool("!m", m.clone().bool_not(), nm.clone().bool_not());
    c.same_bool(
        "m & k",
        m.clone().bool_and(k.clone()),
        nm.clone().bool_and(nk.clone()),
    );
    c.same_bool(
        "m | k",
        m.clone().bool_or(k.clone()),
        nm.clone().bool_or(nk.clone()),
    );
    c.same_bool(
        "m ^ k",
        m.clone().bool_xor(k.clone()),
        nm.clone().bool_xor(nk.clone()),
    );
    c.same_bool(
        "m == k",
        m.clone().equal(k.clone()),
        nm.clone().equal(nk.clone()),
    );
    c.same_bool("m.any_dim(1)", m.clone().any_dim(1), nm.clone().any_dim(1));
    c.same_bool("m.all_dim(0)", m.clone().all_dim(0), nm.clone().all_dim(0));
    c.same_bool("m.any()", m.clone().any(), nm.clone().any());
    c.same_bool("m.all()", m.clone().all(), nm.clone().all());
    c.same_bool(
        "(a > 1.9).any()",
        a.clone().greater_elem(1.9).any(),
        na.clone().greater_elem(1.9).any(),
    );
    c.same_bool(
        "m.swap_dims(0, 1).slice([1..5, 0..3])",
        m.clone().swap_dims(0, 1).slice([1..5, 0..3]),
        nm.clone().swap_dims(0, 1).slice([1..5, 0..3]),
    );
    c.same_bool(
        "cat([m, k], 1)",
        Tensor::cat(vec![m.clone(), k.clone()], 1),
        Tensor::cat(vec![nm.clone(), nk.clone()], 1),
    );
    c.close(
        "a.mask_where(m, b)",
        a.clone().mask_where(m.clone(), b.clone()),
        na.clone().mask_where(nm.clone(), nb.clone()),
    );
    c.close(
        "a.mask_fill(k, 9)",
        a.clone().mask_fill(k.clone(), 9.0),
        na.clone().mask_fill(nk.clone(), 9.0),
    );
    c.same_int("m.argwhere()", m.clone().argwhere(), nm.clone().argwhere());
    c.close("m.float()", m.clone().float(), nm.clone().float());
    c.same_int("k.int()", k.int(), nk.int());
    c.finish()
}
