//! Module ops: convolutions, transposed convolutions, pooling, interpolation, embedding,
//! attention, LayerNorm.
//!
//! Tolerance 1e-3 for the convolutions and attention: each output sums 9 to 60 products, in
//! a different order (im2col + tiled matmul, or direct) on the device than on the CPU; 1e-4
//! for the pools, interpolation and embedding (at most a few additions per output). On a
//! device that rounds matmul operands to TF32 the convolutions and attention also get the
//! rounding bound of [`Checker::close_products`]: the convolution of `|x|` by `|w|`, and for
//! attention the bound derived in [`attention_magnitude`].

use burn::tensor::backend::Backend;
use burn::tensor::module as m;
use burn::tensor::ops::{
    AttentionModuleOptions, ConvOptions, ConvTransposeOptions, InterpolateMode, InterpolateOptions,
    ModuleOps,
};
use burn::tensor::{ElementConversion, Tensor, TensorData, TensorPrimitive};

use super::{CheckResult, Checker, Reference};

/// conv1d and conv2d: strided, padded, dilated, grouped, with and without bias.
pub fn conv<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("x1: [2, 3, 11]; w1: [4, 3, 3]; x: [2, 3, 11, 10]; w: [4, 3, 3, 3]; bias: [4]");
    let (x1, nx1) = c.floats(40, [2, 3, 11]);
    let (w1, nw1) = c.floats(41, [4, 3, 3]);
    let (bias, nbias) = c.floats(25, [4]);
    for options in [
        ConvOptions::new([1], [0], [1], 1),
        ConvOptions::new([2], [1], [2], 1),
    ] {
        c.close_products(
            &format!("conv1d({options:?})"),
            m::conv1d(x1.clone(), w1.clone(), Some(bias.clone()), options.clone()),
            m::conv1d(
                nx1.clone(),
                nw1.clone(),
                Some(nbias.clone()),
                options.clone(),
            ),
            m::conv1d(nx1.clone().abs(), nw1.clone().abs(), None, options),
            1e-3,
        );
    }
    let (x, nx) = c.floats(23, [2, 3, 11, 10]);
    let (w, nw) = c.floats(24, [4, 3, 3, 3]);
    for options in [
        ConvOptions::new([2, 1], [1, 1], [1, 1], 1),
        ConvOptions::new([1, 2], [2, 0], [2, 1], 1),
    ] {
        c.close_products(
            &format!("conv2d({options:?})"),
            m::conv2d(x.clone(), w.clone(), Some(bias.clone()), options.clone()),
            m::conv2d(nx.clone(), nw.clone(), Some(nbias.clone()), options.clone()),
            m::conv2d(nx.clone().abs(), nw.clone().abs(), None, options),
            1e-3,
        );
    }
    c.inputs("x: [2, 3, 11, 10]; w: [6, 1, 3, 2] (3 groups)");
    let (wg, nwg) = c.floats(26, [6, 1, 3, 2]);
    let grouped = ConvOptions::new([1, 1], [0, 1], [1, 1], 3);
    c.close_products(
        "grouped conv2d, no bias",
        m::conv2d(x.clone(), wg, None, grouped.clone()),
        m::conv2d(nx.clone(), nwg.clone(), None, grouped.clone()),
        m::conv2d(nx.clone().abs(), nwg.abs(), None, grouped),
        1e-3,
    );
    c.finish()
}

/// conv_transpose1d and conv_transpose2d: strided, padded, output-padded, dilated, grouped.
pub fn conv_transpose<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("x: [2, 4, 9]; w: [4, 3, 3]; bias: [3] or [6]");
    let (x, nx) = c.floats(42, [2, 4, 9]);
    let (w, nw) = c.floats(43, [4, 3, 3]);
    let (b3, nb3) = c.floats(44, [3]);
    let (b6, nb6) = c.floats(45, [6]);
    let options = ConvTransposeOptions::new([2], [1], [1], [1], 1);
    c.close_products(
        "conv_transpose1d(stride 2, padding 1, padding_out 1)",
        m::conv_transpose1d(x.clone(), w.clone(), Some(b3.clone()), options.clone()),
        m::conv_transpose1d(nx.clone(), nw.clone(), Some(nb3.clone()), options.clone()),
        m::conv_transpose1d(nx.clone().abs(), nw.clone().abs(), None, options),
        1e-3,
    );
    let options = ConvTransposeOptions::new([1], [2], [0], [2], 2);
    c.close_products(
        "conv_transpose1d(padding 2, dilation 2, 2 groups)",
        m::conv_transpose1d(x.clone(), w.clone(), Some(b6.clone()), options.clone()),
        m::conv_transpose1d(nx.clone(), nw.clone(), Some(nb6.clone()), options.clone()),
        m::conv_transpose1d(nx.clone().abs(), nw.clone().abs(), None, options),
        1e-3,
    );
    c.inputs("x: [2, 4, 5, 7]; w: [4, 3, 3, 2] or [4, 2, 3, 3] (2 groups); bias: [3]");
    let (x, nx) = c.floats(46, [2, 4, 5, 7]);
    let (w, nw) = c.floats(47, [4, 3, 3, 2]);
    let options = ConvTransposeOptions::new([2, 1], [1, 0], [1, 0], [1, 2], 1);
    c.close_products(
        "conv_transpose2d(stride [2, 1], padding [1, 0], padding_out [1, 0], dilation [1, 2])",
        m::conv_transpose2d(x.clone(), w, Some(b3), options.clone()),
        m::conv_transpose2d(nx.clone(), nw.clone(), Some(nb3), options.clone()),
        m::conv_transpose2d(nx.clone().abs(), nw.abs(), None, options),
        1e-3,
    );
    let (wg, nwg) = c.floats(48, [4, 2, 3, 3]);
    let options = ConvTransposeOptions::new([1, 2], [1, 1], [0, 1], [1, 1], 2);
    c.close_products(
        "conv_transpose2d(stride [1, 2], padding 1, padding_out [0, 1], 2 groups, no bias)",
        m::conv_transpose2d(x, wg, None, options.clone()),
        m::conv_transpose2d(nx.clone(), nwg.clone(), None, options.clone()),
        m::conv_transpose2d(nx.abs(), nwg.abs(), None, options),
        1e-3,
    );
    c.finish()
}

/// Max, average and adaptive average pooling, 1d and 2d, with indices, padding, dilation and
/// ceil mode.
pub fn pooling<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("x: [2, 3, 11, 10]; x1: [2, 3, 13]");
    let (x, nx) = c.floats(23, [2, 3, 11, 10]);
    c.close(
        "max_pool2d(k [3, 2], s [2, 2], p [1, 0])",
        m::max_pool2d(x.clone(), [3, 2], [2, 2], [1, 0], [1, 1], false),
        m::max_pool2d(nx.clone(), [3, 2], [2, 2], [1, 0], [1, 1], false),
    );
    c.close(
        "max_pool2d(k 3, s 2, p 1, dilation [2, 1], ceil)",
        m::max_pool2d(x.clone(), [3, 3], [2, 2], [1, 1], [2, 1], true),
        m::max_pool2d(nx.clone(), [3, 3], [2, 2], [1, 1], [2, 1], true),
    );
    let (v, i) = m::max_pool2d_with_indices(x.clone(), [2, 2], [2, 2], [0, 0], [1, 1], false);
    let (nv, ni) = m::max_pool2d_with_indices(nx.clone(), [2, 2], [2, 2], [0, 0], [1, 1], false);
    c.close("max_pool2d_with_indices(k 2, s 2) values", v, nv);
    c.same_int("max_pool2d_with_indices(k 2, s 2) indices", i, ni);
    c.close(
        "avg_pool2d(k 3, s [1, 2], p 1, count_include_pad)",
        m::avg_pool2d(x.clone(), [3, 3], [1, 2], [1, 1], true, false),
        m::avg_pool2d(nx.clone(), [3, 3], [1, 2], [1, 1], true, false),
    );
    c.close(
        "avg_pool2d(k [2, 3], s 2, p 1, exclude pad, ceil)",
        m::avg_pool2d(x.clone(), [2, 3], [2, 2], [1, 1], false, true),
        m::avg_pool2d(nx.clone(), [2, 3], [2, 2], [1, 1], false, true),
    );
    c.close(
        "adaptive_avg_pool2d([4, 3])",
        m::adaptive_avg_pool2d(x.clone(), [4, 3]),
        m::adaptive_avg_pool2d(nx.clone(), [4, 3]),
    );
    c.close(
        "adaptive_avg_pool2d([13, 7]) (upsampling)",
        m::adaptive_avg_pool2d(x.clone(), [13, 7]),
        m::adaptive_avg_pool2d(nx.clone(), [13, 7]),
    );
    let (x1, nx1) = c.floats(49, [2, 3, 13]);
    c.close(
        "max_pool1d(k 3, s 2, p 1)",
        m::max_pool1d(x1.clone(), 3, 2, 1, 1, false),
        m::max_pool1d(nx1.clone(), 3, 2, 1, 1, false),
    );
    let (v, i) = m::max_pool1d_with_indices(x1.clone(), 2, 1, 0, 2, false);
    let (nv, ni) = m::max_pool1d_with_indices(nx1.clone(), 2, 1, 0, 2, false);
    c.close("max_pool1d_with_indices(k 2, dilation 2) values", v, nv);
    c.same_int("max_pool1d_with_indices(k 2, dilation 2) indices", i, ni);
    c.close(
        "avg_pool1d(k 4, s 3, p 2)",
        m::avg_pool1d(x1.clone(), 4, 3, 2, true, false),
        m::avg_pool1d(nx1.clone(), 4, 3, 2, true, false),
    );
    c.close(
        "adaptive_avg_pool1d(5)",
        m::adaptive_avg_pool1d(x1.clone(), 5),
        m::adaptive_avg_pool1d(nx1.clone(), 5),
    );
    c.finish()
}

/// Interpolation in every mode, corners aligned or not, down and up.
pub fn interpolate<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("x: [2, 3, 11, 10]");
    let (x, nx) = c.floats(23, [2, 3, 11, 10]);
    for mode in [
        InterpolateMode::Nearest,
        InterpolateMode::Bilinear,
        InterpolateMode::Bicubic,
        InterpolateMode::Lanczos3,
    ] {
        for align_corners in [true, false] {
            for size in [[7, 15], [22, 5]] {
                let options =
                    InterpolateOptions::new(mode.clone()).with_align_corners(align_corners);
                c.close(
                    &format!("interpolate(to {size:?}, {mode:?}, align_corners {align_corners})"),
                    m::interpolate(x.clone(), size, options.clone()),
                    m::interpolate(nx.clone(), size, options),
                );
            }
        }
    }
    c.finish()
}

/// Embedding lookups with repeated ids, and the table's gradient.
pub fn embedding<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("table: [10, 6]; ids: [3, 4] int in [0, 10); table2: [50, 13]; ids2: [2, 7]");
    let (table, ntable) = c.floats(27, [10, 6]);
    let (ids, nids) = c.ints(28, [3, 4], 10);
    c.close(
        "embedding(table, ids)",
        m::embedding(table, ids),
        m::embedding(ntable, nids),
    );
    let (table, ntable) = c.floats(29, [50, 13]);
    let (ids, nids) = c.ints(30, [2, 7], 50);
    c.close(
        "embedding(table2, ids2)",
        m::embedding(table, ids),
        m::embedding(ntable, nids),
    );
    embedding_backward_cases(&mut c);
    c.finish()
}

/// The table gradient (`ModuleOps::embedding_backward`, what Burn's autodiff calls) at shapes
/// that reach every path of a tiled kernel: several index tiles with a partial last one
/// (1200 and 300 tokens), several column blocks and vector widths (`d` = 6, 520, 1030), rows that
/// no index names (ids drawn below half the table), the training step's table (76 rows), and a
/// table above `ruda_runtime::embedding::NATIVE_MAX_ROWS` (5003 rows), which `Ruda` gives to
/// Burn's kernel.
fn embedding_backward_cases<B: Backend>(c: &mut Checker<B>) {
    for (seed, rows, d, ids_shape, bound) in [
        (31, 10, 6, [3, 4], 10),
        (33, 76, 520, [4, 300], 76),
        (35, 40, 1030, [3, 100], 20),
        (37, 5003, 8, [2, 150], 5003),
    ] {
        let (table, ntable) = c.floats::<2>(seed, [rows, d]);
        let (grad, ngrad) = c.floats::<3>(seed + 1, [ids_shape[0], ids_shape[1], d]);
        let (ids, nids) = c.ints::<2>(seed + 2, ids_shape, bound);
        let got = B::embedding_backward(
            table.into_primitive().tensor(),
            grad.into_primitive().tensor(),
            ids.into_primitive(),
        );
        let want = Reference::embedding_backward(
            ntable.into_primitive().tensor(),
            ngrad.into_primitive().tensor(),
            nids.into_primitive(),
        );
        c.close(
            &format!("embedding_backward(table [{rows}, {d}], ids {ids_shape:?} in [0, {bound}))"),
            Tensor::<B, 2>::from_primitive(TensorPrimitive::Float(got)),
            Tensor::<Reference, 2>::from_primitive(TensorPrimitive::Float(want)),
        );
    }
}

/// The magnitude for [`Checker::close_products`] of `attention(q, k, v, mask, bias, options)`
/// (computed on the reference): with TF32 operands (relative error `eps` per product) each
/// score `s = scale * q.k` is off by at most `delta = eps * m`, `m = scale * max(|q| |k|^T)`;
/// softmax turns a shift of at most `delta` per score into a relative change of each
/// probability of at most `e^(2 delta) - 1 <= 2 delta (1 + 2 delta)` (mask, bias and softcap
/// do not enlarge it), and the product by `v` adds `eps` of `P |v|` itself. So the output is off
/// by at most `eps * (1 + 2 m (1 + 2 eps m) (1 + eps)) * (P |v|)`, where `P |v|` is the
/// attention of `|v|` (attention is linear in `v`).
fn attention_magnitude<Ref: Backend>(
    q: Tensor<Ref, 4>,
    k: Tensor<Ref, 4>,
    v: Tensor<Ref, 4>,
    mask: Option<Tensor<Ref, 4, burn::tensor::Bool>>,
    bias: Option<Tensor<Ref, 4>>,
    options: AttentionModuleOptions,
) -> Tensor<Ref, 4> {
    let head_dim = q.dims()[3];
    let scale = options
        .scale
        .unwrap_or_else(|| 1.0 / (head_dim as f64).sqrt());
    let max_score: f32 = q
        .clone()
        .abs()
        .matmul(k.clone().abs().swap_dims(2, 3))
        .max()
        .into_scalar()
        .elem();
    let m = scale as f32 * max_score;
    let eps = 2e-3f32; // an upper bound of `MatmulPrecision::Tf32.product_error()` (~1.95e-3)
    let factor = 1.0 + 2.0 * m * (1.0 + 2.0 * eps * m) * (1.0 + eps);
    m::attention(q, k, v.abs(), mask, bias, options).mul_scalar(factor)
}

/// Scaled dot-product attention: plain, cross (seq_q != seq_k), masked, causal, and with
/// custom scale, softcap and additive bias.
pub fn attention<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    let plain = AttentionModuleOptions {
        scale: None,
        softcap: None,
        is_causal: false,
    };
    c.inputs("q, k, v: [2, 3, 5, 8]");
    let (q, nq) = c.floats(50, [2, 3, 5, 8]);
    let (k, nk) = c.floats(51, [2, 3, 5, 8]);
    let (v, nv) = c.floats(52, [2, 3, 5, 8]);
    c.close_products(
        "attention(q, k, v)",
        m::attention(q.clone(), k.clone(), v.clone(), None, None, plain),
        m::attention(nq.clone(), nk.clone(), nv.clone(), None, None, plain),
        attention_magnitude(nq.clone(), nk.clone(), nv.clone(), None, None, plain),
        1e-3,
    );
    let causal = AttentionModuleOptions {
        is_causal: true,
        ..plain
    };
    c.close_products(
        "attention(q, k, v, causal)",
        m::attention(q.clone(), k.clone(), v.clone(), None, None, causal),
        m::attention(nq.clone(), nk.clone(), nv.clone(), None, None, causal),
        attention_magnitude(nq.clone(), nk.clone(), nv.clone(), None, None, causal),
        1e-3,
    );
    c.inputs("q: [2, 3, 5, 6]; k: [2, 3, 7, 6]; v: [2, 3, 7, 6]; mask, bias: [2, 3, 5, 7]");
    let (q, nq) = c.floats(53, [2, 3, 5, 6]);
    let (k, nk) = c.floats(54, [2, 3, 7, 6]);
    let (v, nv) = c.floats(55, [2, 3, 7, 6]);
    c.close_products(
        "attention(q, k, v) (seq_q 5, seq_k 7, head_dim 6)",
        m::attention(q.clone(), k.clone(), v.clone(), None, None, plain),
        m::attention(nq.clone(), nk.clone(), nv.clone(), None, None, plain),
        attention_magnitude(nq.clone(), nk.clone(), nv.clone(), None, None, plain),
        1e-3,
    );
    // Mask about a third of the keys, never key 0 (a fully masked row is NaN or 0 depending
    // on the implementation).
    let mask: Vec<bool> = super::values(56, 2 * 3 * 5 * 7, 0.0, 1.0)
        .into_iter()
        .enumerate()
        .map(|(i, u)| i % 7 != 0 && u > 0.7)
        .collect();
    let (mask, nmask) = c.bools(TensorData::new(mask, [2, 3, 5, 7]));
    c.close_products(
        "attention(q, k, v, mask)",
        m::attention(
            q.clone(),
            k.clone(),
            v.clone(),
            Some(mask.clone()),
            None,
            plain,
        ),
        m::attention(
            nq.clone(),
            nk.clone(),
            nv.clone(),
            Some(nmask.clone()),
            None,
            plain,
        ),
        attention_magnitude(
            nq.clone(),
            nk.clone(),
            nv.clone(),
            Some(nmask.clone()),
            None,
            plain,
        ),
        1e-3,
    );
    let (bias, nbias) = c.floats(57, [2, 3, 5, 7]);
    let custom = AttentionModuleOptions {
        scale: Some(0.3),
        softcap: Some(5.0),
        is_causal: false,
    };
    c.close_products(
        "attention(q, k, v, mask, bias, scale 0.3, softcap 5)",
        m::attention(q, k, v, Some(mask), Some(bias), custom),
        m::attention(
            nq.clone(),
            nk.clone(),
            nv.clone(),
            Some(nmask.clone()),
            Some(nbias.clone()),
            custom,
        ),
        attention_magnitude(nq, nk, nv, Some(nmask), Some(nbias), custom),
        1e-3,
    );
    c.finish()
}

/// `B::layer_norm` on tensors (the backend op itself, not `burn::nn::LayerNorm`).
pub fn layer_norm_of<B: Backend, const D: usize>(
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

/// `B::layer_norm`: with and without beta, on a contiguous and on a permuted input, rows with
/// a large mean, d not a multiple of 4.
pub fn layer_norm<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("x: [2, 5, 48] in [7, 13); gamma, beta: [48]");
    let (x, nx) = c.floats_in(40, [2, 5, 48], 7.0, 13.0);
    let (g, ng) = c.floats(41, [48]);
    let (b, nb) = c.floats(42, [48]);
    c.close(
        "layer_norm(x, gamma, beta)",
        layer_norm_of(x, g, Some(b), 1e-5),
        layer_norm_of(nx, ng, Some(nb), 1e-5),
    );
    c.inputs("x: [6, 4, 33] permuted to [4, 33, 6]; gamma: [6]");
    let (x, nx) = c.floats(43, [6, 4, 33]);
    let (g, ng) = c.floats(44, [6]);
    c.close(
        "layer_norm(x.permute([1, 2, 0]), gamma, no beta)",
        layer_norm_of(x.permute([1, 2, 0]), g, None, 1e-5),
        layer_norm_of(nx.permute([1, 2, 0]), ng, None, 1e-5),
    );
    c.finish()
}
