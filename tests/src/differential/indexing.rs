//! Indexing: gather, scatter, select, slice (with steps), slice_assign, cat, stack, and the
//! layout ops (narrow, flip, permute, reshape, repeat, expand, transpose, chunk).

use burn::tensor::backend::Backend;
use burn::tensor::{IndexingUpdateOp, Tensor, s};

use super::{CheckResult, Checker};

/// Gather and scatter along every dim, select and select_assign, on `[4, 6, 5]`.
pub fn gather_scatter_select<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("a, b: [4, 6, 5] in [-2, 2); idx: [4, 6, 5] int in [0, dim size)");
    let (a, na) = c.floats(11, [4, 6, 5]);
    let (b, nb) = c.floats(12, [4, 6, 5]);
    for (dim, size) in [(0, 4), (1, 6), (2, 5)] {
        let (idx, nidx) = c.ints(13 + dim as u64, [4, 6, 5], size);
        c.close(
            &format!("a.gather({dim}, idx)"),
            a.clone().gather(dim, idx.clone()),
            na.clone().gather(dim, nidx.clone()),
        );
        // Duplicate indices: the Add updates must all land.
        c.close(
            &format!("a.scatter({dim}, idx, b, Add)"),
            a.clone()
                .scatter(dim, idx.clone(), b.clone(), IndexingUpdateOp::Add),
            na.clone()
                .scatter(dim, nidx.clone(), nb.clone(), IndexingUpdateOp::Add),
        );
    }
    let (idx, nidx) = c.ints(20, [4, 3, 5], 6);
    c.close(
        "a.gather(1, idx [4, 3, 5])",
        a.clone().gather(1, idx.clone()),
        na.clone().gather(1, nidx.clone()),
    );
    let (small, nsmall) = c.floats(21, [4, 3, 5]);
    c.close(
        "a.scatter(1, idx [4, 3, 5], values [4, 3, 5], Add)",
        a.clone()
            .scatter(1, idx.clone(), small.clone(), IndexingUpdateOp::Add),
        na.clone()
            .scatter(1, nidx.clone(), nsmall.clone(), IndexingUpdateOp::Add),
    );
    let (ia, nia) = c.ints(22, [4, 6, 5], 100);
    let (gi, ngi) = c.ints(23, [4, 6, 2], 5);
    c.same_int(
        "int gather(2, idx [4, 6, 2])",
        ia.clone().gather(2, gi.clone()),
        nia.clone().gather(2, ngi.clone()),
    );
    let (sel, nsel) = c.ints(24, [3], 4);
    c.close(
        "a.select(0, [3] indices)",
        a.clone().select(0, sel.clone()),
        na.clone().select(0, nsel.clone()),
    );
    let (sel2, nsel2) = c.ints(25, [7], 5);
    c.close(
        "a.select(2, [7] indices with repeats)",
        a.clone().select(2, sel2.clone()),
        na.clone().select(2, nsel2.clone()),
    );
    let (vals, nvals) = c.floats(26, [3, 6, 5]);
    c.close(
        "a.select_assign(0, [3] indices, [3, 6, 5], Add)",
        a.clone()
            .select_assign(0, sel.clone(), vals, IndexingUpdateOp::Add),
        na.clone()
            .select_assign(0, nsel.clone(), nvals, IndexingUpdateOp::Add),
    );
    c.same_int(
        "int select(1, [3] indices)",
        ia.clone().select(1, sel.clone()),
        nia.clone().select(1, nsel.clone()),
    );
    c.finish()
}

/// Slices (with steps, negative steps), slice_assign, slice_fill, cat and stack.
pub fn slice_cat<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("a, b: [4, 6, 5] in [-2, 2); patch: [2, 2, 5]; c: [4, 3, 5]");
    let (a, na) = c.floats(11, [4, 6, 5]);
    let (b, nb) = c.floats(12, [4, 6, 5]);
    c.close(
        "a.slice([1..3, 2..6, 0..4])",
        a.clone().slice([1..3, 2..6, 0..4]),
        na.clone().slice([1..3, 2..6, 0..4]),
    );
    c.close(
        "a.slice(s![.., 0..6;2, 1..])",
        a.clone().slice(s![.., 0..6;2, 1..]),
        na.clone().slice(s![.., 0..6;2, 1..]),
    );
    c.close(
        "a.slice(s![..;-1, 1..5, ..;-2])",
        a.clone().slice(s![..;-1, 1..5, ..;-2]),
        na.clone().slice(s![..;-1, 1..5, ..;-2]),
    );
    let (patch, npatch) = c.floats(16, [2, 2, 5]);
    c.close(
        "a.slice_assign([0..2, 3..5, 0..5], patch)",
        a.clone().slice_assign([0..2, 3..5, 0..5], patch.clone()),
        na.clone().slice_assign([0..2, 3..5, 0..5], npatch.clone()),
    );
    c.close(
        "a.slice_assign(s![1..4;2, 0..6;3, ..], patch)",
        a.clone().slice_assign(s![1..4;2, 0..6;3, ..], patch),
        na.clone().slice_assign(s![1..4;2, 0..6;3, ..], npatch),
    );
    c.close(
        "a.slice_fill([1..3, 0..6, 2..3], -7)",
        a.clone().slice_fill([1..3, 0..6, 2..3], -7.0),
        na.clone().slice_fill([1..3, 0..6, 2..3], -7.0),
    );
    let (t, nt) = c.floats(17, [4, 3, 5]);
    c.close(
        "cat([a, b], 1)",
        Tensor::cat(vec![a.clone(), b.clone()], 1),
        Tensor::cat(vec![na.clone(), nb.clone()], 1),
    );
    c.close(
        "cat([a, c, b], 1) (unequal sizes)",
        Tensor::cat(vec![a.clone(), t.clone(), b.clone()], 1),
        Tensor::cat(vec![na.clone(), nt.clone(), nb.clone()], 1),
    );
    c.close(
        "cat([a, b], 2)",
        Tensor::cat(vec![a.clone(), b.clone()], 2),
        Tensor::cat(vec![na.clone(), nb.clone()], 2),
    );
    c.close(
        "stack([a, b], 2)",
        Tensor::stack::<4>(vec![a.clone(), b.clone()], 2),
        Tensor::stack::<4>(vec![na.clone(), nb.clone()], 2),
    );
    c.close(
        "stack([a, b], 0)",
        Tensor::stack::<4>(vec![a.clone(), b.clone()], 0),
        Tensor::stack::<4>(vec![na.clone(), nb.clone()], 0),
    );
    c.finish()
}

/// Layout ops: narrow, flip, permute, swap_dims, reshape, repeat, expand, unsqueeze,
/// transpose, chunk, split, and ops after them (so that a wrong stride shows).
pub fn layout<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("a: [4, 6, 5] in [-2, 2); col: [4, 1, 5]");
    let (a, na) = c.floats(11, [4, 6, 5]);
    c.close(
        "a.narrow(2, 1, 3)",
        a.clone().narrow(2, 1, 3),
        na.clone().narrow(2, 1, 3),
    );
    c.close(
        "a.flip([0, 2])",
        a.clone().flip([0, 2]),
        na.clone().flip([0, 2]),
    );
    c.close(
        "a.permute([2, 0, 1])",
        a.clone().permute([2, 0, 1]),
        na.clone().permute([2, 0, 1]),
    );
    c.close(
        "a.permute([2, 0, 1]) + 1 (materialised)",
        a.clone().permute([2, 0, 1]) + 1.0,
        na.clone().permute([2, 0, 1]) + 1.0,
    );
    c.close(
        "a.swap_dims(0, 2)",
        a.clone().swap_dims(0, 2),
        na.clone().swap_dims(0, 2),
    );
    c.close(
        "a.reshape([8, 15])",
        a.clone().reshape([8, 15]),
        na.clone().reshape([8, 15]),
    );
    c.close(
        "a.swap_dims(1, 2).reshape([4, 30]) (reshape of a strided tensor)",
        a.clone().swap_dims(1, 2).reshape([4, 30]),
        na.clone().swap_dims(1, 2).reshape([4, 30]),
    );
    c.close(
        "a.repeat_dim(1, 3)",
        a.clone().repeat_dim(1, 3),
        na.clone().repeat_dim(1, 3),
    );
    c.close(
        "a.repeat([2, 1, 3])",
        a.clone().repeat(&[2, 1, 3]),
        na.clone().repeat(&[2, 1, 3]),
    );
    let (col, ncol) = c.floats(17, [4, 1, 5]);
    c.close(
        "col.expand([4, 6, 5])",
        col.clone().expand([4, 6, 5]),
        ncol.clone().expand([4, 6, 5]),
    );
    c.close(
        "a.unsqueeze_dim(1)",
        a.clone().unsqueeze_dim::<4>(1),
        na.clone().unsqueeze_dim::<4>(1),
    );
    c.close(
        "a.transpose()",
        a.clone().transpose(),
        na.clone().transpose(),
    );
    let chunks = a.clone().chunk(3, 1);
    let nchunks = na.clone().chunk(3, 1);
    if chunks.len() != nchunks.len() {
        c.fail(
            "a.chunk(3, 1)",
            format!("{} chunks, reference {}", chunks.len(), nchunks.len()),
        );
    }
    for (i, (x, y)) in chunks.into_iter().zip(nchunks).enumerate() {
        c.close(&format!("a.chunk(3, 1)[{i}]"), x, y);
    }
    let parts = a.clone().split_with_sizes(vec![1, 3, 1], 2);
    let nparts = na.clone().split_with_sizes(vec![1, 3, 1], 2);
    for (i, (x, y)) in parts.into_iter().zip(nparts).enumerate() {
        c.close(&format!("a.split_with_sizes([1, 3, 1], 2)[{i}]"), x, y);
    }
    c.finish()
}
