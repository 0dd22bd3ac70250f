//! Transactions: several tensors of every kind read in one go, in registration order.

use burn::tensor::Transaction;
use burn::tensor::backend::Backend;

use super::{CheckResult, Checker, bools, compare_floats, compare_ints};

/// A transaction of float, int, bool, reduced and strided tensors.
pub fn transaction<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("a: [3, 4, 5]; i: [7] int in [0, 9)");
    let (a, na) = c.floats(30, [3, 4, 5]);
    let (i, ni) = c.ints(31, [7], 9);
    let (m, nm) = (a.clone().greater_elem(0.0), na.clone().greater_elem(0.0));
    let got = Transaction::default()
        .register(a.clone() * 2.0)
        .register(i.clone() + 1)
        .register(m)
        .register(a.clone().sum_dim(0))
        .register(a.clone().permute([2, 0, 1]))
        .register(a.clone().argmax(1))
        .execute();
    let want = Transaction::default()
        .register(na.clone() * 2.0)
        .register(ni + 1)
        .register(nm)
        .register(na.clone().sum_dim(0))
        .register(na.clone().permute([2, 0, 1]))
        .register(na.clone().argmax(1))
        .execute();
    if got.len() != want.len() {
        c.fail(
            "transaction",
            format!("{} results, reference {}", got.len(), want.len()),
        );
        return c.finish();
    }
    let mut results = got.into_iter().zip(want);
    let mut next = || results.next().expect("as many results as registered");
    let (g, w) = next();
    c.record("transaction[0]: a * 2", compare_floats(&g, &w, 1e-5));
    let (g, w) = next();
    c.record("transaction[1]: i + 1", compare_ints(&g, &w));
    let (g, w) = next();
    c.record("transaction[2]: a > 0", compare_ints(&bools(g), &bools(w)));
    let (g, w) = next();
    c.record("transaction[3]: a.sum_dim(0)", compare_floats(&g, &w, 1e-5));
    let (g, w) = next();
    c.record(
        "transaction[4]: a.permute([2, 0, 1])",
        compare_floats(&g, &w, 0.0),
    );
    let (g, w) = next();
    c.record("transaction[5]: a.argmax(1)", compare_ints(&g, &w));
    c.finish()
}
