//! burn-ruda as a Burn backend, on Mesa's CPU Vulkan driver (`WgpuDevice::Cpu`).
//!
//! - A differential suite: every op family on `Ruda<RudaWgpu>` against `NdArray` on the same
//!   random inputs, so that a delegation mistake (wrong op, wrong argument order) shows.
//! - LayerNorm: `burn::nn::LayerNorm` on `Ruda` equals `NdArray`; the native kernel runs once
//!   per call; a runtime without native LayerNorm takes Burn's composed one.
//! - Autodiff: `burn_ruda::Autodiff<Ruda>` gives the gradients of `burn::backend::Autodiff<NdArray>`
//!   with one native forward and one native backward per LayerNorm; Burn's own
//!   `Autodiff<Ruda>` (composed LayerNorm) trains the same way.

use burn::backend::NdArray;
use burn::backend::ndarray::NdArrayDevice;
use burn::module::{Module, Param};
use burn::nn::{LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::module::{
    adaptive_avg_pool2d, avg_pool2d, conv2d, embedding, interpolate, max_pool2d,
    max_pool2d_with_indices,
};
use burn::tensor::ops::{ConvOptions, InterpolateMode, InterpolateOptions};
use burn::tensor::{
    Bool, IndexingUpdateOp, Int, Tensor, TensorData, TensorPrimitive, Transaction, activation,
};
use burn_ruda::{Ruda, RudaWgpu, layer_norm::native_calls};
use cubecl::wgpu::WgpuDevice;
use ruda_suite::plain_runtime::PlainWgpu;
use serial_test::serial;

type R = Ruda<RudaWgpu>;
type N = NdArray;

fn rdev() -> WgpuDevice {
    WgpuDevice::Cpu
}

fn ndev() -> NdArrayDevice {
    NdArrayDevice::Cpu
}

/// Deterministic values uniform in `[lo, hi)` (xorshift; no global RNG state).
fn values(seed: u64, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            lo + (hi - lo) * ((s >> 40) as f32 / (1u64 << 24) as f32)
        })
        .collect()
}

/// The same random float tensor on both backends.
fn floats<const D: usize>(seed: u64, shape: [usize; D]) -> (Tensor<R, D>, Tensor<N, D>) {
    floats_in(seed, shape, -2.0, 2.0)
}

fn floats_in<const D: usize>(
    seed: u64,
    shape: [usize; D],
    lo: f32,
    hi: f32,
) -> (Tensor<R, D>, Tensor<N, D>) {
    let n = shape.iter().product();
    let data = TensorData::new(values(seed, n, lo, hi), shape);
    (
        Tensor::from_data(data.clone(), &rdev()),
        Tensor::from_data(data, &ndev()),
    )
}

/// The same random int tensor (values in `[0, bound)`) on both backends.
fn ints<const D: usize>(
    seed: u64,
    shape: [usize; D],
    bound: i64,
) -> (Tensor<R, D, Int>, Tensor<N, D, Int>) {
    let n = shape.iter().product();
    let v: Vec<i64> = values(seed, n, 0.0, bound as f32)
        .into_iter()
        .map(|x| (x as i64).min(bound - 1))
        .collect();
    let data = TensorData::new(v, shape);
    (
        Tensor::from_data(data.clone(), &rdev()),
        Tensor::from_data(data, &ndev()),
    )
}

fn f32s(data: TensorData) -> Vec<f32> {
    data.convert::<f32>().to_vec::<f32>().unwrap()
}

fn i64s(data: TensorData) -> Vec<i64> {
    data.convert::<i64>().to_vec::<i64>().unwrap()
}

fn assert_close_data(what: &str, a: TensorData, b: TensorData, tol: f32) {
    assert_eq!(a.shape, b.shape, "{what}: shapes differ");
    let (a, b) = (f32s(a), f32s(b));
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        let ok = (x - y).abs() <= tol * (1.0 + y.abs()) || (x.is_nan() && y.is_nan());
        assert!(ok, "{what}: element {i}: ruda {x} vs ndarray {y}");
    }
}

fn close<const D: usize>(what: &str, a: Tensor<R, D>, b: Tensor<N, D>) {
    assert_close_data(what, a.into_data(), b.into_data(), 1e-4);
}

fn close_tol<const D: usize>(what: &str, a: Tensor<R, D>, b: Tensor<N, D>, tol: f32) {
    assert_close_data(what, a.into_data(), b.into_data(), tol);
}

fn same_int<const D: usize>(what: &str, a: Tensor<R, D, Int>, b: Tensor<N, D, Int>) {
    let (a, b) = (a.into_data(), b.into_data());
    assert_eq!(a.shape, b.shape, "{what}: shapes differ");
    assert_eq!(i64s(a), i64s(b), "{what}");
}

fn same_bool<const D: usize>(what: &str, a: Tensor<R, D, Bool>, b: Tensor<N, D, Bool>) {
    same_int(what, a.int(), b.int());
}

#[test]
fn float_elementwise_ops_match_ndarray() {
    let (a, na) = floats(1, [3, 5, 7]);
    let (b, nb) = floats(2, [3, 5, 7]);
    let (p, np) = floats_in(3, [3, 5, 7], 0.1, 3.0);
    let (row, nrow) = floats(4, [1, 5, 1]);
    close("add", a.clone() + b.clone(), na.clone() + nb.clone());
    close("sub", a.clone() - b.clone(), na.clone() - nb.clone());
    close("mul", a.clone() * b.clone(), na.clone() * nb.clone());
    close("div", a.clone() / p.clone(), na.clone() / np.clone());
    close(
        "broadcast sub",
        a.clone() - row.clone(),
        na.clone() - nrow.clone(),
    );
    close("add_scalar", a.clone() + 1.5, na.clone() + 1.5);
    close("sub_scalar", a.clone() - 0.25, na.clone() - 0.25);
    close("mul_scalar", a.clone() * -3.0, na.clone() * -3.0);
    close("div_scalar", a.clone() / 4.0, na.clone() / 4.0);
    close("neg", -a.clone(), -na.clone());
    close("exp", a.clone().exp(), na.clone().exp());
    close("log", p.clone().log(), np.clone().log());
    close("log1p", p.clone().log1p(), np.clone().log1p());
    close("sqrt", p.clone().sqrt(), np.clone().sqrt());
    close("recip", p.clone().recip(), np.clone().recip());
    close("abs", a.clone().abs(), na.clone().abs());
    close("sin", a.clone().sin(), na.clone().sin());
    close("cos", a.clone().cos(), na.clone().cos());
    close("tanh", a.clone().tanh(), na.clone().tanh());
    close("erf", a.clone().erf(), na.clone().erf());
    close(
        "powf_scalar",
        p.clone().powf_scalar(1.7),
        np.clone().powf_scalar(1.7),
    );
    close(
        "powf",
        p.clone().powf(b.clone()),
        np.clone().powf(nb.clone()),
    );
    close(
        "powi_scalar",
        a.clone().powi_scalar(3),
        na.clone().powi_scalar(3),
    );
    close(
        "clamp",
        a.clone().clamp(-0.5, 0.7),
        na.clone().clamp(-0.5, 0.7),
    );
    close(
        "clamp_min",
        a.clone().clamp_min(0.1),
        na.clone().clamp_min(0.1),
    );
    close("floor", a.clone().floor(), na.clone().floor());
    close("ceil", a.clone().ceil(), na.clone().ceil());
    close(
        "round",
        (a.clone() * 3.0).round(),
        (na.clone() * 3.0).round(),
    );
    close(
        "remainder",
        a.clone().remainder(p.clone()),
        na.clone().remainder(np.clone()),
    );
    close(
        "atan2",
        a.clone().atan2(p.clone()),
        na.clone().atan2(np.clone()),
    );
    close("sign", a.clone().sign(), na.clone().sign());
    close(
        "max_pair",
        a.clone().max_pair(b.clone()),
        na.clone().max_pair(nb.clone()),
    );
    close(
        "cast to int and back",
        (a.clone() * 4.0).int().float(),
        (na * 4.0).int().float(),
    );
}

#[test]
fn comparisons_masks_and_bool_ops_match_ndarray() {
    let (a, na) = floats(5, [4, 6]);
    let (b, nb) = floats(6, [4, 6]);
    same_bool(
        "greater",
        a.clone().greater(b.clone()),
        na.clone().greater(nb.clone()),
    );
    same_bool(
        "lower_equal",
        a.clone().lower_equal(b.clone()),
        na.clone().lower_equal(nb.clone()),
    );
    same_bool(
        "greater_elem",
        a.clone().greater_elem(0.3),
        na.clone().greater_elem(0.3),
    );
    same_bool(
        "lower_elem",
        a.clone().lower_elem(-0.3),
        na.clone().lower_elem(-0.3),
    );
    same_bool(
        "equal",
        a.clone().equal(a.clone()),
        na.clone().equal(na.clone()),
    );
    same_bool(
        "is_nan",
        (a.clone() / 0.0 * 0.0).is_nan(),
        (na.clone() / 0.0 * 0.0).is_nan(),
    );
    let (m, nm) = (a.clone().greater(b.clone()), na.clone().greater(nb.clone()));
    let (k, nk) = (a.clone().lower_elem(0.0), na.clone().lower_elem(0.0));
    same_bool("bool_not", m.clone().bool_not(), nm.clone().bool_not());
    same_bool(
        "bool_and",
        m.clone().bool_and(k.clone()),
        nm.clone().bool_and(nk.clone()),
    );
    same_bool(
        "bool_or",
        m.clone().bool_or(k.clone()),
        nm.clone().bool_or(nk.clone()),
    );
    same_bool(
        "bool_xor",
        m.clone().bool_xor(k.clone()),
        nm.clone().bool_xor(nk.clone()),
    );
    same_bool("bool any_dim", m.clone().any_dim(1), nm.clone().any_dim(1));
    same_bool("bool all_dim", m.clone().all_dim(0), nm.clone().all_dim(0));
    same_bool(
        "float any",
        a.clone().greater_elem(1.9).any(),
        na.clone().greater_elem(1.9).any(),
    );
    close(
        "mask_where",
        a.clone().mask_where(m.clone(), b.clone()),
        na.clone().mask_where(nm.clone(), nb.clone()),
    );
    close(
        "mask_fill",
        a.clone().mask_fill(k.clone(), 9.0),
        na.clone().mask_fill(nk.clone(), 9.0),
    );
    same_int("argwhere", m.clone().argwhere(), nm.clone().argwhere());
    close("bool to float", m.float(), nm.float());
}

#[test]
fn reductions_match_ndarray() {
    let (a, na) = floats(7, [3, 4, 9]);
    let (p, np) = floats_in(8, [3, 4, 9], 0.5, 1.5);
    close("sum", a.clone().sum(), na.clone().sum());
    close("sum_dim", a.clone().sum_dim(2), na.clone().sum_dim(2));
    close("mean", a.clone().mean(), na.clone().mean());
    close("mean_dim", a.clone().mean_dim(1), na.clone().mean_dim(1));
    close("prod_dim", p.clone().prod_dim(2), np.clone().prod_dim(2));
    close("max", a.clone().max(), na.clone().max());
    close("min_dim", a.clone().min_dim(0), na.clone().min_dim(0));
    close("max_dim", a.clone().max_dim(2), na.clone().max_dim(2));
    same_int("argmax", a.clone().argmax(2), na.clone().argmax(2));
    same_int("argmin", a.clone().argmin(1), na.clone().argmin(1));
    let (v, i) = a.clone().max_dim_with_indices(1);
    let (nv, ni) = na.clone().max_dim_with_indices(1);
    close("max_dim_with_indices values", v, nv);
    same_int("max_dim_with_indices indices", i, ni);
    close("cumsum", a.clone().cumsum(2), na.clone().cumsum(2));
    close("cumprod", p.clone().cumprod(1), np.clone().cumprod(1));
    close("var", a.clone().var(2), na.clone().var(2));
}

#[test]
fn int_ops_match_ndarray() {
    let (a, na) = ints(9, [4, 5], 50);
    let (b, nb) = ints(10, [4, 5], 7);
    let b1 = b.clone() + 1;
    let nb1 = nb.clone() + 1;
    same_int("int add", a.clone() + b.clone(), na.clone() + nb.clone());
    same_int("int sub", a.clone() - b.clone(), na.clone() - nb.clone());
    same_int("int mul", a.clone() * b.clone(), na.clone() * nb.clone());
    same_int("int div", a.clone() / b1.clone(), na.clone() / nb1.clone());
    same_int(
        "int remainder",
        a.clone().remainder(b1.clone()),
        na.clone().remainder(nb1),
    );
    same_int("int mul_scalar", a.clone() * 3, na.clone() * 3);
    same_int("int neg abs", (-a.clone()).abs(), (-na.clone()).abs());
    same_int("int sum_dim", a.clone().sum_dim(1), na.clone().sum_dim(1));
    same_int("int max_dim", a.clone().max_dim(0), na.clone().max_dim(0));
    same_int("int argmax", a.clone().argmax(1), na.clone().argmax(1));
    same_int("int cumsum", a.clone().cumsum(0), na.clone().cumsum(0));
    same_int("int clamp", a.clone().clamp(5, 30), na.clone().clamp(5, 30));
    same_bool(
        "int greater",
        a.clone().greater(b.clone()),
        na.clone().greater(nb.clone()),
    );
    same_bool(
        "int equal_elem",
        b.clone().equal_elem(3),
        nb.clone().equal_elem(3),
    );
    same_int(
        "int mask_fill",
        a.clone().mask_fill(b.clone().equal_elem(2), -1),
        na.clone().mask_fill(nb.clone().equal_elem(2), -1),
    );
    same_int(
        "arange",
        Tensor::<R, 1, Int>::arange(3..17, &rdev()),
        Tensor::arange(3..17, &ndev()),
    );
    close(
        "int to float",
        a.clone().float() / 7.0,
        na.clone().float() / 7.0,
    );
    same_int(
        "int swap_dims",
        a.clone().swap_dims(0, 1),
        na.clone().swap_dims(0, 1),
    );
    same_int(
        "bitwise and",
        a.clone().bitwise_and(b.clone()),
        na.clone().bitwise_and(nb.clone()),
    );
}

#[test]
fn indexing_ops_match_ndarray() {
    let (a, na) = floats(11, [4, 6, 5]);
    let (b, nb) = floats(12, [4, 6, 5]);
    let (idx, nidx) = ints(13, [4, 6, 5], 6);
    close(
        "gather",
        a.clone().gather(1, idx.clone()),
        na.clone().gather(1, nidx.clone()),
    );
    close(
        "scatter add",
        a.clone()
            .scatter(1, idx.clone(), b.clone(), IndexingUpdateOp::Add),
        na.clone()
            .scatter(1, nidx.clone(), nb.clone(), IndexingUpdateOp::Add),
    );
    let (sel, nsel) = ints(14, [3], 4);
    close(
        "select",
        a.clone().select(0, sel.clone()),
        na.clone().select(0, nsel.clone()),
    );
    let (vals, nvals) = floats(15, [3, 6, 5]);
    close(
        "select_assign add",
        a.clone().select_assign(0, sel, vals, IndexingUpdateOp::Add),
        na.clone()
            .select_assign(0, nsel, nvals, IndexingUpdateOp::Add),
    );
    close(
        "slice",
        a.clone().slice([1..3, 2..6, 0..4]),
        na.clone().slice([1..3, 2..6, 0..4]),
    );
    let (patch, npatch) = floats(16, [2, 2, 5]);
    close(
        "slice_assign",
        a.clone().slice_assign([0..2, 3..5, 0..5], patch),
        na.clone().slice_assign([0..2, 3..5, 0..5], npatch),
    );
    close(
        "cat",
        Tensor::cat(vec![a.clone(), b.clone()], 1),
        Tensor::cat(vec![na.clone(), nb.clone()], 1),
    );
    close(
        "stack",
        Tensor::stack::<4>(vec![a.clone(), b.clone()], 2),
        Tensor::stack::<4>(vec![na.clone(), nb.clone()], 2),
    );
    close(
        "narrow",
        a.clone().narrow(2, 1, 3),
        na.clone().narrow(2, 1, 3),
    );
    close("flip", a.clone().flip([0, 2]), na.clone().flip([0, 2]));
    close(
        "permute",
        a.clone().permute([2, 0, 1]),
        na.clone().permute([2, 0, 1]),
    );
    close(
        "swap_dims",
        a.clone().swap_dims(0, 2),
        na.clone().swap_dims(0, 2),
    );
    close(
        "reshape",
        a.clone().reshape([8, 15]),
        na.clone().reshape([8, 15]),
    );
    close(
        "repeat_dim",
        a.clone().repeat_dim(1, 3),
        na.clone().repeat_dim(1, 3),
    );
    let (col, ncol) = floats(17, [4, 1, 5]);
    close("expand", col.expand([4, 6, 5]), ncol.expand([4, 6, 5]));
    close(
        "unsqueeze",
        a.clone().unsqueeze_dim::<4>(1),
        na.clone().unsqueeze_dim::<4>(1),
    );
    close("transpose", a.clone().transpose(), na.clone().transpose());
}

#[test]
fn sorting_matches_ndarray() {
    let (a, na) = floats(18, [5, 33]);
    close("sort", a.clone().sort(1), na.clone().sort(1));
    close(
        "sort_descending",
        a.clone().sort_descending(0),
        na.clone().sort_descending(0),
    );
    let (v, i) = a.clone().sort_with_indices(1);
    let (nv, ni) = na.clone().sort_with_indices(1);
    close("sort_with_indices values", v, nv);
    same_int("sort_with_indices indices", i, ni);
    same_int("argsort", a.clone().argsort(0), na.clone().argsort(0));
    close("topk", a.clone().topk(4, 1), na.clone().topk(4, 1));
    let (n, nn) = ints(19, [4, 20], 100);
    same_int("int sort", n.sort(1), nn.sort(1));
}

#[test]
fn matmul_matches_ndarray() {
    let (a, na) = floats(20, [2, 3, 17, 9]);
    let (b, nb) = floats(21, [2, 3, 9, 13]);
    close_tol(
        "batched matmul",
        a.clone().matmul(b),
        na.clone().matmul(nb),
        1e-3,
    );
    let (c, nc) = floats(22, [1, 3, 13, 9]);
    close_tol(
        "broadcast matmul with transpose",
        a.matmul(c.transpose()),
        na.matmul(nc.transpose()),
        1e-3,
    );
}

#[test]
fn conv_pool_interpolate_embedding_match_ndarray() {
    let (x, nx) = floats(23, [2, 3, 11, 10]);
    let (w, nw) = floats(24, [4, 3, 3, 3]);
    let (bias, nbias) = floats(25, [4]);
    let options = ConvOptions::new([2, 1], [1, 1], [1, 1], 1);
    close_tol(
        "conv2d",
        conv2d(x.clone(), w, Some(bias), options.clone()),
        conv2d(nx.clone(), nw, Some(nbias), options),
        1e-3,
    );
    let (wg, nwg) = floats(26, [6, 1, 3, 2]);
    let grouped = ConvOptions::new([1, 1], [0, 1], [1, 1], 3);
    close_tol(
        "grouped conv2d",
        conv2d(x.clone(), wg, None, grouped.clone()),
        conv2d(nx.clone(), nwg, None, grouped),
        1e-3,
    );
    close(
        "max_pool2d",
        max_pool2d(x.clone(), [3, 2], [2, 2], [1, 0], [1, 1], false),
        max_pool2d(nx.clone(), [3, 2], [2, 2], [1, 0], [1, 1], false),
    );
    let (v, i) = max_pool2d_with_indices(x.clone(), [2, 2], [2, 2], [0, 0], [1, 1], false);
    let (nv, ni) = max_pool2d_with_indices(nx.clone(), [2, 2], [2, 2], [0, 0], [1, 1], false);
    close("max_pool2d_with_indices values", v, nv);
    same_int("max_pool2d_with_indices indices", i, ni);
    close(
        "avg_pool2d",
        avg_pool2d(x.clone(), [3, 3], [1, 2], [1, 1], true, false),
        avg_pool2d(nx.clone(), [3, 3], [1, 2], [1, 1], true, false),
    );
    close(
        "adaptive_avg_pool2d",
        adaptive_avg_pool2d(x.clone(), [4, 3]),
        adaptive_avg_pool2d(nx.clone(), [4, 3]),
    );
    for mode in [InterpolateMode::Nearest, InterpolateMode::Bilinear] {
        close(
            "interpolate",
            interpolate(x.clone(), [7, 15], InterpolateOptions::new(mode.clone())),
            interpolate(nx.clone(), [7, 15], InterpolateOptions::new(mode)),
        );
    }
    let (table, ntable) = floats(27, [10, 6]);
    let (ids, nids) = ints(28, [3, 4], 10);
    close("embedding", embedding(table, ids), embedding(ntable, nids));
}

#[test]
fn activations_match_ndarray() {
    let (a, na) = floats(29, [6, 10]);
    close(
        "relu",
        activation::relu(a.clone()),
        activation::relu(na.clone()),
    );
    close(
        "gelu",
        activation::gelu(a.clone()),
        activation::gelu(na.clone()),
    );
    close(
        "sigmoid",
        activation::sigmoid(a.clone()),
        activation::sigmoid(na.clone()),
    );
    close(
        "silu",
        activation::silu(a.clone()),
        activation::silu(na.clone()),
    );
    close(
        "leaky_relu",
        activation::leaky_relu(a.clone(), 0.1),
        activation::leaky_relu(na.clone(), 0.1),
    );
    close(
        "hard_sigmoid",
        activation::hard_sigmoid(a.clone(), 0.2, 0.5),
        activation::hard_sigmoid(na.clone(), 0.2, 0.5),
    );
    close(
        "softmax",
        activation::softmax(a.clone(), 1),
        activation::softmax(na.clone(), 1),
    );
    close(
        "log_softmax",
        activation::log_softmax(a.clone(), 0),
        activation::log_softmax(na.clone(), 0),
    );
}

#[test]
fn transaction_reads_every_kind_in_order() {
    let (a, na) = floats(30, [3, 4]);
    let (i, ni) = ints(31, [5], 9);
    let (m, nm) = (a.clone().greater_elem(0.0), na.clone().greater_elem(0.0));
    let ruda = Transaction::default()
        .register(a.clone() * 2.0)
        .register(i.clone())
        .register(m)
        .register(a.sum_dim(0))
        .execute();
    let reference = Transaction::default()
        .register(na.clone() * 2.0)
        .register(ni)
        .register(nm)
        .register(na.sum_dim(0))
        .execute();
    assert_eq!(ruda.len(), 4);
    let mut pairs = ruda.into_iter().zip(reference);
    let (r, n) = pairs.next().unwrap();
    assert_close_data("transaction float", r, n, 1e-5);
    let (r, n) = pairs.next().unwrap();
    assert_eq!(i64s(r), i64s(n), "transaction int");
    let (r, n) = pairs.next().unwrap();
    assert_eq!(
        r.convert::<u8>().to_vec::<u8>().unwrap(),
        n.convert::<u8>().to_vec::<u8>().unwrap(),
        "transaction bool"
    );
    let (r, n) = pairs.next().unwrap();
    assert_close_data("transaction reduced float", r, n, 1e-5);
}

// ---------------------------------------------------------------------------------------------
// LayerNorm

/// `B::layer_norm` on tensors.
fn layer_norm<B: Backend, const D: usize>(
    x: Tensor<B, D>,
    gamma: Tensor<B, 1>,
    beta: Option<Tensor<B, 1>>,
    epsilon: f64,
) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(B::layer_norm(
        x.into_primitive().tensor(),
        gamma.into_primitive().tensor(),
        beta.map(|b| b.into_primitive().tensor()),
        epsilon,
    )))
}

/// A `burn::nn::LayerNorm` with the given parameters.
fn layer_norm_module<B: Backend>(
    d: usize,
    gamma: Tensor<B, 1>,
    beta: Tensor<B, 1>,
    device: &B::Device,
) -> LayerNorm<B> {
    let mut module = LayerNormConfig::new(d).init::<B>(device);
    module.gamma = Param::from_tensor(gamma);
    module.beta = Some(Param::from_tensor(beta));
    module
}

#[test]
#[serial]
fn nn_layer_norm_forward_matches_ndarray_with_one_native_kernel() {
    let d = 48;
    let (x, nx) = floats(40, [2, 5, d]);
    let x = x * 3.0 + 10.0;
    let nx = nx * 3.0 + 10.0;
    let (g, ng) = floats(41, [d]);
    let (b, nb) = floats(42, [d]);
    let ruda = layer_norm_module(d, g, b, &rdev());
    let reference = layer_norm_module(d, ng, nb, &ndev());
    let before = native_calls();
    let out = ruda.forward(x).into_data();
    let after = native_calls();
    assert_close_data(
        "nn::LayerNorm",
        out,
        reference.forward(nx).into_data(),
        1e-4,
    );
    assert_eq!(after.0 - before.0, 1, "one native forward per LayerNorm");
    assert_eq!(after.1, before.1, "no backward in a forward pass");
}

#[test]
#[serial]
fn layer_norm_without_beta_and_on_strided_input_matches_ndarray() {
    let (x, nx) = floats(43, [6, 4, 33]);
    let (g, ng) = floats(44, [6]);
    // A permuted (non-contiguous) input, no beta.
    let x = x.permute([1, 2, 0]);
    let nx = nx.permute([1, 2, 0]);
    close(
        "layer_norm strided, no beta",
        layer_norm(x, g, None, 1e-5),
        layer_norm(nx, ng, None, 1e-5),
    );
}

#[test]
#[serial]
fn runtime_without_native_layer_norm_uses_the_composed_one() {
    type P = Ruda<PlainWgpu>;
    let d = 20;
    let data = TensorData::new(values(45, 3 * d, -1.0, 1.0), [3, d]);
    let gamma = TensorData::new(values(46, d, 0.5, 1.5), [d]);
    let beta = TensorData::new(values(47, d, -0.5, 0.5), [d]);
    let plain = |data: TensorData| Tensor::<P, 1>::from_data(data, &rdev());
    let before = native_calls();
    let out = layer_norm(
        Tensor::<P, 2>::from_data(data.clone(), &rdev()),
        plain(gamma.clone()),
        Some(plain(beta.clone())),
        1e-5,
    )
    .into_data();
    assert_eq!(
        native_calls(),
        before,
        "no native kernel on a runtime without one"
    );
    let reference = layer_norm(
        Tensor::<N, 2>::from_data(data, &ndev()),
        Tensor::from_data(gamma, &ndev()),
        Some(Tensor::from_data(beta, &ndev())),
        1e-5,
    );
    assert_close_data("composed layer_norm", out, reference.into_data(), 1e-4);
}

// ---------------------------------------------------------------------------------------------
// Autodiff

type RudaAd = burn_ruda::Autodiff<R>;
type BurnAdRuda = burn::backend::Autodiff<R>;
type BurnAdNd = burn::backend::Autodiff<N>;

/// Gradients of `sum(layer_norm(x, gamma, beta) * w)` for x, gamma, beta.
fn layer_norm_grads<B: AutodiffBackend>(device: &B::Device, beta: bool) -> Vec<TensorData> {
    let d = 37;
    let t = |seed, shape: Vec<usize>, lo, hi| {
        let n = shape.iter().product();
        TensorData::new(values(seed, n, lo, hi), shape)
    };
    let x = Tensor::<B, 3>::from_data(t(50, vec![3, 4, d], -3.0, 5.0), device).require_grad();
    let gamma = Tensor::<B, 1>::from_data(t(51, vec![d], 0.5, 1.5), device).require_grad();
    let b = Tensor::<B, 1>::from_data(t(52, vec![d], -1.0, 1.0), device).require_grad();
    let w = Tensor::<B, 3>::from_data(t(53, vec![3, 4, d], -1.0, 1.0), device);
    let y = layer_norm(x.clone(), gamma.clone(), beta.then(|| b.clone()), 1e-5);
    let grads = (y * w).sum().backward();
    let mut out = vec![
        x.grad(&grads).unwrap().into_data(),
        gamma.grad(&grads).unwrap().into_data(),
    ];
    if beta {
        out.push(b.grad(&grads).unwrap().into_data());
    }
    out
}

#[test]
#[serial]
fn native_layer_norm_gradients_match_ndarray_with_one_node() {
    for beta in [true, false] {
        let before = native_calls();
        let ruda = layer_norm_grads::<RudaAd>(&rdev(), beta);
        let after = native_calls();
        assert_eq!(after.0 - before.0, 1, "one native forward");
        assert_eq!(after.1 - before.1, 1, "one native backward");
        let reference = layer_norm_grads::<BurnAdNd>(&ndev(), beta);
        assert_eq!(ruda.len(), reference.len());
        for (name, (r, n)) in ["dx", "dgamma", "dbeta"]
            .iter()
            .zip(ruda.into_iter().zip(reference))
        {
            assert_close_data(name, r, n, 1e-3);
        }
    }
}

#[derive(Module, Debug)]
struct Mlp<B: Backend> {
    input: Linear<B>,
    norm: LayerNorm<B>,
    hidden: Linear<B>,
    norm_out: LayerNorm<B>,
    output: Linear<B>,
}

impl<B: Backend> Mlp<B> {
    /// The same parameters on every backend (from fixed seeds).
    fn new(device: &B::Device) -> Self {
        let linear = |seed, d_in: usize, d_out: usize| {
            let mut l = LinearConfig::new(d_in, d_out).init::<B>(device);
            let scale = 1.0 / (d_in as f32).sqrt();
            l.weight = Param::from_data(
                TensorData::new(values(seed, d_in * d_out, -scale, scale), [d_in, d_out]),
                device,
            );
            l.bias = Some(Param::from_data(
                TensorData::new(values(seed + 1, d_out, -0.1, 0.1), [d_out]),
                device,
            ));
            l
        };
        let norm = |seed, d: usize| {
            layer_norm_module(
                d,
                Tensor::from_data(TensorData::new(values(seed, d, 0.8, 1.2), [d]), device),
                Tensor::from_data(TensorData::new(values(seed + 1, d, -0.1, 0.1), [d]), device),
                device,
            )
        };
        Self {
            input: linear(60, 12, 32),
            norm: norm(62, 32),
            hidden: linear(64, 32, 32),
            norm_out: norm(66, 32),
            output: linear(68, 32, 3),
        }
    }

    fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let h = activation::gelu(self.norm.forward(self.input.forward(x)));
        let h = activation::relu(self.norm_out.forward(self.hidden.forward(h)));
        self.output.forward(h)
    }
}

/// Trains the MLP for `steps` SGD steps on a fixed regression batch; returns the losses and
/// the gradients of the first step (input weight, first LayerNorm's gamma and beta).
fn train<B: AutodiffBackend>(device: &B::Device, steps: usize) -> (Vec<f32>, Vec<TensorData>) {
    let mut model = Mlp::<B>::new(device);
    let mut optim = SgdConfig::new().init();
    let x = Tensor::<B, 2>::from_data(
        TensorData::new(values(70, 16 * 12, -1.0, 1.0), [16, 12]),
        device,
    );
    let target = Tensor::<B, 2>::from_data(
        TensorData::new(values(71, 16 * 3, -1.0, 1.0), [16, 3]),
        device,
    );
    let mut losses = Vec::new();
    let mut first_grads = Vec::new();
    for step in 0..steps {
        let diff = model.forward(x.clone()) - target.clone();
        let loss = (diff.clone() * diff).mean();
        losses.push(f32s(loss.clone().into_data())[0]);
        let grads = loss.backward();
        if step == 0 {
            first_grads = vec![
                model.input.weight.val().grad(&grads).unwrap().into_data(),
                model.norm.gamma.val().grad(&grads).unwrap().into_data(),
                model
                    .norm
                    .beta
                    .as_ref()
                    .unwrap()
                    .val()
                    .grad(&grads)
                    .unwrap()
                    .into_data(),
            ];
        }
        let grads = GradientsParams::from_grads(grads, &model);
        model = optim.step(0.1, model, grads);
    }
    (losses, first_grads)
}

fn assert_training_matches(what: &str, (losses, grads): (Vec<f32>, Vec<TensorData>)) {
    let (ref_losses, ref_grads) = train::<BurnAdNd>(&ndev(), losses.len());
    for (i, (l, r)) in losses.iter().zip(&ref_losses).enumerate() {
        assert!(
            (l - r).abs() <= 1e-3 * (1.0 + r.abs()),
            "{what}: loss at step {i}: {l} vs {r}"
        );
    }
    assert!(
        losses.last() < losses.first(),
        "{what}: the loss must decrease: {losses:?}"
    );
    for (name, (g, r)) in ["dW_in", "dgamma", "dbeta"]
        .iter()
        .zip(grads.into_iter().zip(ref_grads))
    {
        assert_close_data(&format!("{what} {name}"), g, r, 2e-3);
    }
}

#[test]
#[serial]
fn mlp_with_layer_norm_trains_like_ndarray_under_ruda_autodiff() {
    let steps = 3;
    let before = native_calls();
    let result = train::<RudaAd>(&rdev(), steps);
    // Under fusion the kernels run when the stream executes: wait for all of them.
    <R as Backend>::sync(&rdev()).unwrap();
    let after = native_calls();
    // Two LayerNorms per step: one native forward and one native backward each.
    assert_eq!(after.0 - before.0, 2 * steps, "native forwards");
    assert_eq!(after.1 - before.1, 2 * steps, "native backwards");
    assert_training_matches("burn_ruda::Autodiff<Ruda>", result);
}

#[test]
#[serial]
fn burn_autodiff_over_ruda_trains_like_ndarray_with_composed_layer_norm() {
    let before = native_calls();
    let result = train::<BurnAdRuda>(&rdev(), 3);
    <R as Backend>::sync(&rdev()).unwrap();
    assert_eq!(
        native_calls(),
        before,
        "Burn's Autodiff composes LayerNorm: no native kernel"
    );
    assert_training_matches("burn::backend::Autodiff<Ruda>", result);
}
