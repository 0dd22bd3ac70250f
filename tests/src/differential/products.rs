//! Matrix products in every layout a model makes, `linear` forward and backward, long chains of
//! products whose buffers are freed and reused, and products in f16 and bf16.
//!
//! On CUDA these run ruda's native products (cuBLAS, ordered with CubeCL's kernels by events):
//! a layout the planner gets wrong gives wrong numbers, and a missing ordering gives wrong
//! numbers that change from run to run. On wgpu they are Burn's matmul, which [`super::float`]
//! and the models of [`super::gradients`] already check; this family is not in
//! [`super::Family::ALL`] because on lavapipe each distinct matmul kernel costs ~10 s of shader
//! compilation (the GPU suite runs it).

use burn::module::Param;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{DType, Tensor, TensorData, module::linear};

use super::{CheckResult, Checker, Reference, ReferenceAutodiff, compare_floats_normwise};

/// Relative tolerance of f32 products beyond the TF32 bound of [`Checker::close_products`]
/// (different accumulation orders over up to 256 terms).
const TOL: f32 = 1e-3;

/// `a.matmul(b)` for the layouts of a transformer's forward and backward: plain, either side
/// transposed (`swap_dims` views), batched, broadcast on either side, `expand`ed (stride-0
/// batch), the `[batch, heads, seq, d]` view of `[batch, seq, heads, d]`, a sliced operand
/// (rows further apart than their length), and sizes that are no multiple of 4.
pub fn layouts<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("a: [37, 19]; b: [19, 23]; batched: [3, 4, 37, 19] x [3, 4, 19, 23]");
    let (a, na) = c.floats::<2>(40, [37, 19]);
    let (b, nb) = c.floats::<2>(41, [19, 23]);
    product(
        &mut c,
        "a x b",
        a.clone(),
        b.clone(),
        na.clone(),
        nb.clone(),
    );
    let (at, nat) = c.floats::<2>(42, [19, 37]);
    let (bt, nbt) = c.floats::<2>(43, [23, 19]);
    product(
        &mut c,
        "a^T x b (lhs a swap_dims view)",
        at.clone().transpose(),
        b.clone(),
        nat.clone().transpose(),
        nb.clone(),
    );
    product(
        &mut c,
        "a x b^T (rhs a swap_dims view)",
        a.clone(),
        bt.clone().transpose(),
        na.clone(),
        nbt.clone().transpose(),
    );
    product(
        &mut c,
        "a^T x b^T",
        at.transpose(),
        bt.transpose(),
        nat.transpose(),
        nbt.transpose(),
    );
    // Rows 40 apart, 19 long: a slice of a wider matrix.
    let (wide, nwide) = c.floats::<2>(44, [37, 40]);
    product(
        &mut c,
        "a[.., 3..22] x b (sliced lhs)",
        wide.slice([0..37, 3..22]),
        b.clone(),
        nwide.slice([0..37, 3..22]),
        nb.clone(),
    );

    let (x, nx) = c.floats::<4>(45, [3, 4, 37, 19]);
    let (y, ny) = c.floats::<4>(46, [3, 4, 19, 23]);
    product(
        &mut c,
        "batched x y",
        x.clone(),
        y.clone(),
        nx.clone(),
        ny.clone(),
    );
    let (shared, nshared) = c.floats::<4>(47, [1, 1, 19, 23]);
    product(
        &mut c,
        "batched x shared rhs [1, 1, 19, 23]",
        x.clone(),
        shared.clone(),
        nx.clone(),
        nshared.clone(),
    );
    let (row, nrow) = c.floats::<4>(48, [1, 1, 37, 19]);
    product(
        &mut c,
        "shared lhs [1, 1, 37, 19] x batched",
        row,
        y.clone(),
        nrow,
        ny.clone(),
    );
    product(
        &mut c,
        "batched x rhs expanded to [3, 4, 19, 23] (stride-0 batch)",
        x.clone(),
        shared.expand([3, 4, 19, 23]),
        nx.clone(),
        nshared.expand([3, 4, 19, 23]),
    );
    let (partial, npartial) = c.floats::<4>(49, [3, 1, 19, 23]);
    product(
        &mut c,
        "batched x rhs broadcast over heads [3, 1, 19, 23]",
        x.clone(),
        partial,
        nx.clone(),
        npartial,
    );

    // Multi-head attention: q, k, v are [batch, seq, heads, d] viewed as [batch, heads, seq, d].
    c.inputs("q, k, v: [2, 33, 4, 16] viewed as [2, 4, 33, 16]; attention weights [2, 4, 33, 33]");
    let heads = |c: &Checker<B>, seed| {
        let (t, nt) = c.floats::<4>(seed, [2, 33, 4, 16]);
        (t.swap_dims(1, 2), nt.swap_dims(1, 2))
    };
    let (q, nq) = heads(&c, 50);
    let (k, nk) = heads(&c, 51);
    let (v, nv) = heads(&c, 52);
    product(
        &mut c,
        "q x k^T",
        q.clone(),
        k.clone().swap_dims(2, 3),
        nq.clone(),
        nk.clone().swap_dims(2, 3),
    );
    let (w, nw) = c.floats::<4>(53, [2, 4, 33, 33]);
    product(
        &mut c,
        "weights x v",
        w.clone(),
        v.clone(),
        nw.clone(),
        nv.clone(),
    );
    product(
        &mut c,
        "weights^T x q (the backward's product)",
        w.swap_dims(2, 3),
        q,
        nw.swap_dims(2, 3),
        nq,
    );
    c.finish()
}

/// `module::linear` (what `burn::nn::Linear` runs) on rank 1, 2, 3 and 4 inputs, with and
/// without bias, and on a transposed weight.
pub fn linear_forward<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("weight [19, 23], bias [23]; x [19], [37, 19], [5, 7, 19], [2, 3, 5, 19]");
    let (w, nw) = c.floats::<2>(60, [19, 23]);
    let (bias, nbias) = c.floats::<1>(61, [23]);
    let magnitude = |x: Tensor<Reference, 2>, w: Tensor<Reference, 2>| x.abs().matmul(w.abs());

    let (x, nx) = c.floats::<2>(62, [37, 19]);
    c.close_products(
        "linear [37, 19] with bias",
        linear(x.clone(), w.clone(), Some(bias.clone())),
        linear(nx.clone(), nw.clone(), Some(nbias.clone())),
        magnitude(nx.clone(), nw.clone()) + nbias.clone().abs().unsqueeze(),
        TOL,
    );
    c.close_products(
        "linear [37, 19] without bias",
        linear(x.clone(), w.clone(), None),
        linear(nx.clone(), nw.clone(), None),
        magnitude(nx.clone(), nw.clone()),
        TOL,
    );
    let (wt, nwt) = c.floats::<2>(63, [23, 19]);
    c.close_products(
        "linear [37, 19] with a transposed weight view",
        linear(x, wt.transpose(), None),
        linear(nx.clone(), nwt.clone().transpose(), None),
        magnitude(nx, nwt.transpose()),
        TOL,
    );

    let (x1, nx1) = c.floats::<1>(64, [19]);
    let want = linear(nx1.clone(), nw.clone(), Some(nbias.clone()));
    let mag: Tensor<Reference, 1> = magnitude(nx1.clone().unsqueeze(), nw.clone()).reshape([23]);
    c.close_products(
        "linear [19] with bias",
        linear(x1, w.clone(), Some(bias.clone())),
        want,
        mag + nbias.clone().abs(),
        TOL,
    );

    let (x3, nx3) = c.floats::<3>(65, [5, 7, 19]);
    let mag3 = magnitude(nx3.clone().reshape([35, 19]), nw.clone()).reshape([5, 7, 23]);
    c.close_products(
        "linear [5, 7, 19] with bias",
        linear(x3.clone(), w.clone(), Some(bias.clone())),
        linear(nx3.clone(), nw.clone(), Some(nbias.clone())),
        mag3 + nbias.clone().abs().reshape([1, 1, 23]),
        TOL,
    );
    // A [7, 5, 19] tensor seen as [5, 7, 19]: its rows do not follow one another.
    let (xs, nxs) = c.floats::<3>(66, [7, 5, 19]);
    let magswap =
        magnitude(nxs.clone().swap_dims(0, 1).reshape([35, 19]), nw.clone()).reshape([5, 7, 23]);
    c.close_products(
        "linear on a swap_dims(0, 1) view [5, 7, 19]",
        linear(xs.swap_dims(0, 1), w.clone(), None),
        linear(nxs.swap_dims(0, 1), nw.clone(), None),
        magswap,
        TOL,
    );
    let (x4, nx4) = c.floats::<4>(67, [2, 3, 5, 19]);
    let mag4 = magnitude(nx4.clone().reshape([30, 19]), nw.clone()).reshape([2, 3, 5, 23]);
    c.close_products(
        "linear [2, 3, 5, 19] with bias",
        linear(x4, w, Some(bias)),
        linear(nx4, nw, Some(nbias.clone())),
        mag4 + nbias.abs().reshape([1, 1, 1, 23]),
        TOL,
    );
    c.finish()
}

/// Forty layers of `x = tanh(x W_i + b_i) + x / 2`, `W_i` made on the device in the loop and
/// dropped after one use: every product reads buffers that kernels just wrote and writes into
/// memory that earlier products and kernels freed. An ordering mistake between the products and
/// CubeCL's kernels shows here as a result that differs from the reference (and between runs).
pub fn chain<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("x: [64, 96]; W_i: [96, 96] / 10, b_i: [96], 40 layers; run twice");
    let (mut x, mut nx) = c.floats::<2>(70, [64, 96]);
    let start = (x.clone(), nx.clone());
    for layer in 0..40u64 {
        let (w, nw) = c.floats::<2>(100 + layer, [96, 96]);
        let (b, nb) = c.floats::<1>(200 + layer, [96]);
        x = linear(x.clone(), w / 10.0, Some(b)).tanh() + x / 2.0;
        nx = linear(nx.clone(), nw / 10.0, Some(nb)).tanh() + nx / 2.0;
    }
    let first = x.into_data();
    // 40 layers of TF32 products drift further than one product: the tolerance of a chain.
    let tol = c.matmul_precision().gradient_tol(1e-3);
    c.close_data(
        "40 chained linear layers",
        first.clone(),
        nx.into_data(),
        tol,
    );
    let (mut again, _) = start;
    for layer in 0..40u64 {
        let (w, _) = c.floats::<2>(100 + layer, [96, 96]);
        let (b, _) = c.floats::<1>(200 + layer, [96]);
        again = linear(again.clone(), w / 10.0, Some(b)).tanh() + again / 2.0;
    }
    let second = again.into_data();
    if first != second {
        c.fail(
            "40 chained linear layers, second run",
            "differs from the first run on the same inputs (a race between products and kernels)",
        );
    }
    c.finish()
}

/// Products of f16 and bf16 tensors (cast on the device from f32): against the f32 product of
/// the same rounded values, within the rounding of the output (f32 accumulation).
pub fn half_precision<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("a: [3, 37, 64] x b: [3, 64, 29], and a x w [64, 29] (linear), cast to f16 / bf16");
    let (a, _) = c.floats::<3>(80, [3, 37, 64]);
    let (b, _) = c.floats::<3>(81, [3, 64, 29]);
    let (w, _) = c.floats::<2>(82, [64, 29]);
    let reference = *c.reference_device();
    for (dtype, name, unit) in [
        (DType::F16, "f16", 2f32.powi(-11)),
        (DType::BF16, "bf16", 2f32.powi(-8)),
    ] {
        let (ah, bh, wh) = (
            a.clone().cast(dtype),
            b.clone().cast(dtype),
            w.clone().cast(dtype),
        );
        // The reference: the rounded operands, multiplied in f32 on the CPU.
        let ra = Tensor::<Reference, 3>::from_data(to_f32(&ah), &reference);
        let rb = Tensor::<Reference, 3>::from_data(to_f32(&bh), &reference);
        let rw = Tensor::<Reference, 2>::from_data(to_f32(&wh), &reference);
        let got = ah.clone().matmul(bh).cast(DType::F32);
        let want = ra.clone().matmul(rb.clone());
        let magnitude = ra.clone().abs().matmul(rb.abs());
        // Output rounding (one unit of the format) plus f32 accumulation over 64 terms.
        c.record(
            &format!("{name} batched a x b"),
            super::compare_floats_bounded(
                &got.into_data(),
                &want.into_data(),
                1e-4,
                Some((&magnitude.into_data(), 2.0 * unit)),
            ),
        );
        let got = linear(ah, wh, None).cast(DType::F32);
        let want = linear(ra.clone(), rw.clone(), None);
        let magnitude = linear(ra.abs(), rw.abs(), None);
        c.record(
            &format!("{name} linear a x w"),
            super::compare_floats_bounded(
                &got.into_data(),
                &want.into_data(),
                1e-4,
                Some((&magnitude.into_data(), 2.0 * unit)),
            ),
        );
    }
    c.finish()
}

fn to_f32<B: Backend, const D: usize>(t: &Tensor<B, D>) -> TensorData {
    t.clone().cast(DType::F32).into_data()
}

/// The gradients of `burn::nn::Linear` layers on rank-2 and rank-3 inputs (weight, bias and
/// input), against `Autodiff<NdArray>`: `linear_x_backward`, `linear_weight_backward` (the batch
/// folded into the product) and `linear_bias_backward`.
pub fn linear_gradients<A: AutodiffBackend>(device: &A::Device) -> CheckResult {
    let mut failures = Vec::new();
    let tol = super::MatmulPrecision::of::<A>(device).gradient_tol(1e-3);
    for shape in [vec![37, 19], vec![5, 7, 19], vec![2, 3, 5, 19]] {
        let data = super::float_data(90, &shape, -2.0, 2.0);
        let got = linear_grads::<A>(device, data.clone());
        let want = linear_grads::<ReferenceAutodiff>(&Default::default(), data);
        for ((name, g), (_, w)) in got.iter().zip(&want) {
            if let Err(e) = compare_floats_normwise(g, w, tol, 1e-6) {
                failures.push(format!("Linear 19-23 on x {shape:?}: d{name}: {e}"));
            }
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

/// `[("x", dx), ("weight", dW), ("bias", db)]` of `sum(Linear(x)^2) / 2` with seeded weights.
fn linear_grads<A: AutodiffBackend>(
    device: &A::Device,
    x: TensorData,
) -> Vec<(&'static str, TensorData)> {
    let mut layer: Linear<A> = LinearConfig::new(19, 23).init(device);
    layer.weight = Param::from_data(super::float_data(91, &[19, 23], -0.5, 0.5), device);
    layer.bias = Some(Param::from_data(
        super::float_data(92, &[23], -0.5, 0.5),
        device,
    ));
    match x.shape.len() {
        2 => grads_of::<A, 2>(&layer, x, device),
        3 => grads_of::<A, 3>(&layer, x, device),
        _ => grads_of::<A, 4>(&layer, x, device),
    }
}

fn grads_of<A: AutodiffBackend, const D: usize>(
    layer: &Linear<A>,
    x: TensorData,
    device: &A::Device,
) -> Vec<(&'static str, TensorData)> {
    let x = Tensor::<A, D>::from_data(x, device).require_grad();
    let y = layer.forward(x.clone());
    let grads = (y.clone() * y).sum().div_scalar(2.0).backward();
    let [weight, bias] = params(layer, &grads);
    vec![("x", x.grad(&grads).unwrap().into_data()), weight, bias]
}

fn params<A: AutodiffBackend>(
    layer: &Linear<A>,
    grads: &A::Gradients,
) -> [(&'static str, TensorData); 2] {
    let bias = layer.bias.as_ref().expect("the layer has a bias");
    [
        (
            "weight",
            layer.weight.val().grad(grads).unwrap().into_data(),
        ),
        ("bias", bias.val().grad(grads).unwrap().into_data()),
    ]
}

/// `a.matmul(b)` against the reference, with the TF32 bound where the device rounds operands.
fn product<B: Backend, const D: usize>(
    c: &mut Checker<B>,
    op: &str,
    a: Tensor<B, D>,
    b: Tensor<B, D>,
    na: Tensor<Reference, D>,
    nb: Tensor<Reference, D>,
) {
    let magnitude = na.clone().abs().matmul(nb.clone().abs());
    c.close_products(op, a.matmul(b), na.matmul(nb), magnitude, TOL);
}
