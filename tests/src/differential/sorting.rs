//! Sorting: sort (both orders, every dim), sort_with_indices, argsort, top-k, int sort.

use burn::tensor::backend::Backend;

use super::{CheckResult, Checker};

/// Sorts of `[5, 33]` floats (distinct values, so the indices are unique) and `[4, 20]` ints.
pub fn sorting<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("a: [5, 33] in [-2, 2); n: [4, 20] int in [0, 100)");
    let (a, na) = c.floats(18, [5, 33]);
    c.close("a.sort(1)", a.clone().sort(1), na.clone().sort(1));
    c.close("a.sort(0)", a.clone().sort(0), na.clone().sort(0));
    c.close(
        "a.sort_descending(0)",
        a.clone().sort_descending(0),
        na.clone().sort_descending(0),
    );
    c.close(
        "a.sort_descending(1)",
        a.clone().sort_descending(1),
        na.clone().sort_descending(1),
    );
    let (v, i) = a.clone().sort_with_indices(1);
    let (nv, ni) = na.clone().sort_with_indices(1);
    c.close("a.sort_with_indices(1) values", v, nv);
    c.same_int("a.sort_with_indices(1) indices", i, ni);
    let (v, i) = a.clone().sort_descending_with_indices(0);
    let (nv, ni) = na.clone().sort_descending_with_indices(0);
    c.close("a.sort_descending_with_indices(0) values", v, nv);
    c.same_int("a.sort_descending_with_indices(0) indices", i, ni);
    c.same_int("a.argsort(0)", a.clone().argsort(0), na.clone().argsort(0));
    c.same_int("a.argsort(1)", a.clone().argsort(1), na.clone().argsort(1));
    c.close("a.topk(4, 1)", a.clone().topk(4, 1), na.clone().topk(4, 1));
    let (v, i) = a.clone().topk_with_indices(3, 0);
    let (nv, ni) = na.clone().topk_with_indices(3, 0);
    c.close("a.topk_with_indices(3, 0) values", v, nv);
    c.same_int("a.topk_with_indices(3, 0) indices", i, ni);
    c.close(
        "a.transpose().sort(0) (strided input)",
        a.clone().transpose().sort(0),
        na.clone().transpose().sort(0),
    );
    let (n, nn) = c.ints(19, [4, 20], 100);
    c.same_int("n.sort(1)", n.clone().sort(1), nn.clone().sort(1));
    c.same_int(
        "n.sort_descending(0)",
        n.clone().sort_descending(0),
        nn.clone().sort_descending(0),
    );
    c.same_int("n.topk(5, 1)", n.clone().topk(5, 1), nn.clone().topk(5, 1));
    c.finish()
}
