//! Gradients under an autodiff backend `A` (e.g. `burn_ruda::Autodiff<Ruda<R>>`) against
//! `burn::backend::Autodiff<NdArray>`:
//!
//! - op by op: `sum(op(inputs) * r)` for a fixed random `r`, gradients of every input, for the
//!   float ops ([`ops`]) and the module ops ([`module_ops`]), so that a wrong backward (or a
//!   wrong delegation of one, e.g. `conv2d_x_backward`) is named. Matmul and attention are left
//!   to the models (their backward is matmuls, and on lavapipe each distinct matmul kernel costs
//!   ~10 s of shader compilation);
//! - whole models with identical weights: an MLP with LayerNorm ([`mlp`]), a small CNN
//!   ([`cnn`]) and `burn::nn::transformer::TransformerEncoder` ([`transformer`]). The model is
//!   built (seeded) on the reference and its record moved to `A` through bytes, so both start
//!   from the same parameters; the loss and the gradient of the input and of every parameter
//!   are compared.
//!
//! Gradients are compared relative to the size of the whole gradient tensor
//! ([`super::compare_floats_normwise`]: `|got - want| <= tol * (|want| + max |want|) + 1e-6`),
//! since gradients are often far below 1. Tolerances: 1e-4 for elementwise backwards; 1e-3
//! where the backward sums products (convolutions, LayerNorm) in a different order on the
//! device; 2e-3 for whole models, whose gradients go through several such sums and LayerNorm's
//! `1 / std` (the MLP training test uses the same bound). A 1% error in one parameter's
//! gradient fails them. On a device that rounds matmul operands to TF32
//! ([`super::MatmulPrecision`]) the convolution cases and the models are held to
//! [`super::MatmulPrecision::gradient_tol`] instead.

use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::attention::{
    MhaInput, MultiHeadAttention, MultiHeadAttentionConfig, generate_autoregressive_mask,
};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::transformer::{
    TransformerEncoder, TransformerEncoderConfig, TransformerEncoderInput,
};
use burn::nn::{LayerNorm, LayerNormConfig, Linear, LinearConfig, PaddingConfig2d};
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Record, Recorder};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::module::{
    adaptive_avg_pool1d, adaptive_avg_pool2d, avg_pool1d, avg_pool2d, conv_transpose1d,
    conv_transpose2d, conv1d, conv2d, embedding, interpolate, max_pool1d, max_pool2d,
};
use burn::tensor::ops::{ConvOptions, ConvTransposeOptions, InterpolateMode, InterpolateOptions};
use burn::tensor::{Bool, IndexingUpdateOp, Int, Tensor, TensorData, TensorPrimitive, activation};

use super::{
    CheckResult, Checker, MatmulPrecision, ReferenceAutodiff, catching, compare_floats_normwise,
    float_data, int_data,
};

type G = ReferenceAutodiff;

/// The absolute noise floor of an f32 gradient that is zero in exact arithmetic, e.g. that of
/// the key bias in attention (softmax ignores a constant added to a row of scores): ~1e-8 here.
const ATOL: f32 = 1e-6;

/// Named gradients (`None`: the backend gave no gradient).
type Grads = Vec<(String, Option<TensorData>)>;

/// Compares two lists of named gradients.
fn compare_grads<A: Backend>(c: &mut Checker<A, G>, what: &str, got: Grads, want: Grads, tol: f32) {
    compare_grads_with_floor(c, what, got, want, tol, ATOL);
}

/// [`compare_grads`] of a backward that runs matrix products: on a device that rounds their
/// operands to TF32 ([`MatmulPrecision::Tf32`]) the tolerance is
/// [`MatmulPrecision::gradient_tol`], and the absolute floor also grows to that fraction of the
/// largest gradient of the whole case: a gradient that is zero in exact arithmetic (the key
/// bias of attention: softmax ignores a constant added to a row of scores) is then the rounding
/// noise of products as large as the other gradients, ~3e-5 in the `TransformerEncoder` check
/// on an H200, where exact f32 leaves ~1e-8.
fn compare_product_grads<A: Backend>(
    c: &mut Checker<A, G>,
    what: &str,
    got: Grads,
    want: Grads,
    tol: f32,
) {
    let precision = c.matmul_precision();
    let floor = match precision {
        MatmulPrecision::F32 => ATOL,
        MatmulPrecision::Tf32 => {
            let largest = want
                .iter()
                .filter_map(|(_, w)| w.as_ref())
                .flat_map(super::f32s)
                .filter(|v| v.is_finite())
                .fold(0.0f32, |m, v| m.max(v.abs()));
            ATOL + precision.gradient_tol(tol) * largest
        }
    };
    compare_grads_with_floor(c, what, got, want, precision.gradient_tol(tol), floor);
}

/// [`compare_grads`] with the absolute floor `atol`.
fn compare_grads_with_floor<A: Backend>(
    c: &mut Checker<A, G>,
    what: &str,
    got: Grads,
    want: Grads,
    tol: f32,
    atol: f32,
) {
    if got.len() != want.len() {
        let names = |g: &Grads| g.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        c.fail(
            what,
            format!(
                "gradients of {:?}, reference {:?}",
                names(&got),
                names(&want)
            ),
        );
        return;
    }
    for ((name, g), (wname, w)) in got.into_iter().zip(want) {
        let op = format!("{what}: d/d{name}");
        if name != wname {
            c.fail(&op, format!("reference lists {wname} here"));
            continue;
        }
        match (g, w) {
            (Some(g), Some(w)) => c.record(&op, compare_floats_normwise(&g, &w, tol, atol)),
            (None, None) => {}
            (g, w) => c.fail(
                &op,
                format!(
                    "gradient {}, reference {}",
                    if g.is_some() { "present" } else { "missing" },
                    if w.is_some() { "present" } else { "missing" }
                ),
            ),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Op-level gradients

/// Gradient reader of one leaf tensor.
type GradOf<B> = Box<dyn Fn(&<B as AutodiffBackend>::Gradients) -> Option<TensorData>>;

/// The leaf tensors of one case, created on `B` from seeds, with their gradient readers.
struct Leaves<'a, B: AutodiffBackend> {
    device: &'a B::Device,
    seed: u64,
    readers: Vec<(String, GradOf<B>)>,
}

impl<'a, B: AutodiffBackend> Leaves<'a, B> {
    fn new(device: &'a B::Device) -> Self {
        Self {
            device,
            seed: 100,
            readers: Vec::new(),
        }
    }

    fn next_seed(&mut self) -> u64 {
        self.seed += 1;
        self.seed
    }

    /// A random leaf in `[lo, hi)` whose gradient is compared.
    fn leaf<const D: usize>(
        &mut self,
        name: &str,
        shape: [usize; D],
        lo: f32,
        hi: f32,
    ) -> Tensor<B, D> {
        let seed = self.next_seed();
        let t =
            Tensor::<B, D>::from_data(float_data(seed, &shape, lo, hi), self.device).require_grad();
        let reader = t.clone();
        self.readers.push((
            name.to_string(),
            Box::new(move |grads| reader.grad(grads).map(|g| g.into_data())),
        ));
        t
    }

    /// A random leaf in `[-2, 2)`.
    fn x<const D: usize>(&mut self, name: &str, shape: [usize; D]) -> Tensor<B, D> {
        self.leaf(name, shape, -2.0, 2.0)
    }

    /// A random constant (no gradient) in `[-1, 1)`.
    fn constant<const D: usize>(&mut self, shape: [usize; D]) -> Tensor<B, D> {
        let seed = self.next_seed();
        Tensor::from_data(float_data(seed, &shape, -1.0, 1.0), self.device)
    }

    /// Random ints in `[0, bound)`.
    fn ints<const D: usize>(&mut self, shape: [usize; D], bound: i64) -> Tensor<B, D, Int> {
        let seed = self.next_seed();
        Tensor::from_data(int_data(seed, &shape, bound), self.device)
    }

    /// A random mask, true with probability `p`.
    fn mask<const D: usize>(&mut self, shape: [usize; D], p: f32) -> Tensor<B, D, Bool> {
        let seed = self.next_seed();
        let n = shape.iter().product();
        let v: Vec<bool> = super::values(seed, n, 0.0, 1.0)
            .into_iter()
            .map(|u| u < p)
            .collect();
        Tensor::from_data(TensorData::new(v, shape.to_vec()), self.device)
    }

    /// `sum(out * r)` for a random constant `r`: every output element gets its own weight.
    fn loss<const D: usize>(&mut self, out: Tensor<B, D>) -> Tensor<B, 1> {
        let shape = out.dims();
        let r = self.constant(shape);
        (out * r).sum()
    }

    /// Runs the backward of `loss`; the gradient of every leaf, plus the loss itself.
    fn gradients(self, loss: Tensor<B, 1>) -> Grads {
        let value = loss.clone().into_data();
        let grads = loss.backward();
        let mut out = vec![("loss".to_string(), Some(value))];
        for (name, reader) in self.readers {
            out.push((name, reader(&grads)));
        }
        out
    }
}

/// The float op cases of [`ops`], with their tolerances.
const OP_CASES: &[(&str, f32)] = &[
    ("x * y", 1e-4),
    ("x / (|y| + 0.5)", 1e-4),
    ("x - y[:, 1..2, :] (broadcast)", 1e-4),
    ("exp(x)", 1e-4),
    ("x * log(|y| + 0.5)", 1e-4),
    ("sqrt(|x| + 0.1)", 1e-4),
    ("powf_scalar(|x| + 0.1, 1.5)", 1e-4),
    ("powf(|x| + 0.5, y)", 1e-4),
    ("recip(|x| + 0.5)", 1e-4),
    ("tanh(x)", 1e-4),
    ("sin(x) * cos(y)", 1e-4),
    ("erf(x)", 1e-4),
    ("abs(x)", 1e-4),
    ("clamp(x, -1, 1)", 1e-4),
    ("x.max_pair(y)", 1e-4),
    ("sigmoid(x)", 1e-4),
    ("relu(x)", 1e-4),
    ("gelu(x)", 1e-4),
    ("silu(x)", 1e-4),
    ("softmax(x, 2)", 1e-4),
    ("softmax(x, 0)", 1e-4),
    ("log_softmax(x, 1)", 1e-4),
    ("log_softmax(x, 2)", 1e-4),
    ("softmin(x, 1)", 1e-4),
    ("x.sum_dim(1)", 1e-4),
    ("x.mean_dim(2)", 1e-4),
    ("x.max_dim(2)", 1e-4),
    ("x.min_dim(0)", 1e-4),
    ("x.var(2)", 1e-4),
    ("x.cumsum(1)", 1e-4),
    ("x.gather(2, idx)", 1e-4),
    ("x.select(1, indices)", 1e-4),
    ("x.scatter(2, idx, y, Add)", 1e-4),
    ("x.slice([1..3, 0..5;2, 2..7])", 1e-4),
    ("x.slice_assign([0..2, 1..3, ..], y[..2, ..2, :])", 1e-4),
    ("cat([x, y], 1)", 1e-4),
    ("x.permute([2, 0, 1]) * y.permute([2, 0, 1])", 1e-4),
    ("x.flip([1]).reshape([5, 3, 7])", 1e-4),
    ("x[:, 0..1, :].expand([3, 5, 7]) * y", 1e-4),
    ("x.repeat_dim(1, 2)", 1e-4),
    ("x.mask_fill(m, 0.5)", 1e-4),
    ("x.mask_where(m, y)", 1e-4),
    ("x.sort(2)", 1e-4),
];

/// The output of float op case `name` on leaves `x, y: [3, 5, 7]`.
fn op_case<B: AutodiffBackend>(name: &str, l: &mut Leaves<B>) -> Tensor<B, 1> {
    let x = l.x("x", [3, 5, 7]);
    let y = l.x("y", [3, 5, 7]);
    let out: Tensor<B, 3> = match name {
        "x * y" => x * y,
        "x / (|y| + 0.5)" => x / (y.abs() + 0.5),
        "x - y[:, 1..2, :] (broadcast)" => x - y.slice([0..3, 1..2, 0..7]),
        "exp(x)" => x.exp(),
        "x * log(|y| + 0.5)" => (y.abs() + 0.5).log() * x,
        "sqrt(|x| + 0.1)" => (x.abs() + 0.1).sqrt(),
        "powf_scalar(|x| + 0.1, 1.5)" => (x.abs() + 0.1).powf_scalar(1.5),
        "powf(|x| + 0.5, y)" => (x.abs() + 0.5).powf(y),
        "recip(|x| + 0.5)" => (x.abs() + 0.5).recip(),
        "tanh(x)" => x.tanh(),
        "sin(x) * cos(y)" => x.sin() * y.cos(),
        "erf(x)" => x.erf(),
        "abs(x)" => x.abs(),
        "clamp(x, -1, 1)" => x.clamp(-1.0, 1.0),
        "x.max_pair(y)" => x.max_pair(y),
        "sigmoid(x)" => activation::sigmoid(x),
        "relu(x)" => activation::relu(x),
        "gelu(x)" => activation::gelu(x),
        "silu(x)" => activation::silu(x),
        "softmax(x, 2)" => activation::softmax(x, 2),
        "softmax(x, 0)" => activation::softmax(x, 0),
        "log_softmax(x, 1)" => activation::log_softmax(x, 1),
        "log_softmax(x, 2)" => activation::log_softmax(x, 2),
        "softmin(x, 1)" => activation::softmin(x, 1),
        "x.sum_dim(1)" => x.sum_dim(1),
        "x.mean_dim(2)" => x.mean_dim(2),
        "x.max_dim(2)" => x.max_dim(2),
        "x.min_dim(0)" => x.min_dim(0),
        "x.var(2)" => x.var(2),
        "x.cumsum(1)" => x.cumsum(1),
        "x.gather(2, idx)" => {
            let idx = l.ints([3, 5, 4], 7);
            x.gather(2, idx)
        }
        "x.select(1, indices)" => {
            let indices = l.ints([6], 5);
            x.select(1, indices)
        }
        "x.scatter(2, idx, y, Add)" => {
            let idx = l.ints([3, 5, 7], 7);
            x.scatter(2, idx, y, IndexingUpdateOp::Add)
        }
        "x.slice([1..3, 0..5;2, 2..7])" => x.slice(burn::tensor::s![1..3, 0..5;2, 2..7]),
        "x.slice_assign([0..2, 1..3, ..], y[..2, ..2, :])" => {
            x.slice_assign([0..2, 1..3, 0..7], y.slice([0..2, 0..2, 0..7]))
        }
        "cat([x, y], 1)" => Tensor::cat(vec![x, y], 1),
        "x.permute([2, 0, 1]) * y.permute([2, 0, 1])" => {
            x.permute([2, 0, 1]) * y.permute([2, 0, 1])
        }
        "x.flip([1]).reshape([5, 3, 7])" => x.flip([1]).reshape([5, 3, 7]),
        "x[:, 0..1, :].expand([3, 5, 7]) * y" => x.slice([0..3, 0..1, 0..7]).expand([3, 5, 7]) * y,
        "x.repeat_dim(1, 2)" => x.repeat_dim(1, 2),
        "x.mask_fill(m, 0.5)" => {
            let m = l.mask([3, 5, 7], 0.3);
            x.mask_fill(m, 0.5)
        }
        "x.mask_where(m, y)" => {
            let m = l.mask([3, 5, 7], 0.4);
            x.mask_where(m, y)
        }
        "x.sort(2)" => x.sort(2),
        other => panic!("no op case {other}"),
    };
    l.loss(out)
}

/// Gradients of float op case `name` on `B`.
fn op_grads<B: AutodiffBackend>(name: &str, device: &B::Device) -> Grads {
    let mut l = Leaves::<B>::new(device);
    let loss = op_case(name, &mut l);
    l.gradients(loss)
}

/// The backward of every float op in [`OP_CASES`], on `x, y: [3, 5, 7]`.
pub fn ops<A: AutodiffBackend>(device: &A::Device) -> CheckResult {
    let mut c = Checker::<A, G>::new(device);
    c.inputs("x, y: [3, 5, 7] in [-2, 2)");
    for &(name, tol) in OP_CASES {
        let result = catching(|| {
            let got = op_grads::<A>(name, device);
            let want = op_grads::<G>(name, &Default::default());
            Ok((got, want))
        });
        match result {
            Ok((got, want)) => compare_grads(&mut c, name, got, want, tol),
            Err(message) => c.fail(name, message),
        }
    }
    c.finish()
}

/// The module op cases of [`module_ops`], with their tolerances.
const MODULE_CASES: &[(&str, f32)] = &[
    (
        "conv1d(x [2, 3, 11], w [4, 3, 3], b, stride 2, padding 1)",
        1e-3,
    ),
    (
        "conv2d(x [2, 3, 11, 10], w [4, 3, 3, 3], b, stride [2, 1], padding 1)",
        1e-3,
    ),
    (
        "conv2d(x [2, 4, 9, 7], w [6, 2, 3, 2], 2 groups, dilation [1, 2])",
        1e-3,
    ),
    (
        "conv_transpose1d(x [2, 4, 9], w [4, 3, 3], b, stride 2, padding 1, padding_out 1)",
        1e-3,
    ),
    (
        "conv_transpose2d(x [2, 4, 5, 7], w [4, 3, 3, 2], b, stride [2, 1], dilation [1, 2])",
        1e-3,
    ),
    (
        "max_pool2d(x [2, 3, 11, 10], k [3, 2], s 2, p [1, 0])",
        1e-4,
    ),
    ("avg_pool2d(x [2, 3, 11, 10], k 3, s [1, 2], p 1)", 1e-4),
    ("adaptive_avg_pool2d(x [2, 3, 11, 10], [4, 3])", 1e-4),
    ("max_pool1d(x [2, 3, 13], k 3, s 2, p 1)", 1e-4),
    ("avg_pool1d(x [2, 3, 13], k 4, s 3, p 2)", 1e-4),
    ("adaptive_avg_pool1d(x [2, 3, 13], 5)", 1e-4),
    // Nearest only: burn-cubecl 0.21 has no bilinear, bicubic or lanczos3 backward (it
    // panics "... interpolation backward is not supported by JIT backend", on the device
    // thread, which leaves the device unusable for the rest of the process).
    ("interpolate(x [2, 3, 11, 10], [7, 15], Nearest)", 1e-4),
    ("embedding(table [10, 6], ids [3, 4])", 1e-4),
    ("layer_norm(x [3, 4, 37], gamma, beta)", 1e-3),
];

/// The output of module op case `name`.
fn module_case<B: AutodiffBackend>(name: &str, l: &mut Leaves<B>) -> Tensor<B, 1> {
    fn flat<B: Backend, const D: usize>(t: Tensor<B, D>) -> Tensor<B, 1> {
        let n = t.shape().num_elements();
        t.reshape([n])
    }
    let image = |l: &mut Leaves<B>| l.x("x", [2, 3, 11, 10]);
    let signal = |l: &mut Leaves<B>| l.x("x", [2, 3, 13]);
    let out = match &name[..name.find('(').unwrap_or(name.len())] {
        "conv1d" => {
            let x = l.x("x", [2, 3, 11]);
            let w = l.x("w", [4, 3, 3]);
            let b = l.x("b", [4]);
            flat(conv1d(x, w, Some(b), ConvOptions::new([2], [1], [1], 1)))
        }
        "conv2d" if name.contains("groups") => {
            let x = l.x("x", [2, 4, 9, 7]);
            let w = l.x("w", [6, 2, 3, 2]);
            flat(conv2d(
                x,
                w,
                None,
                ConvOptions::new([1, 1], [1, 1], [1, 2], 2),
            ))
        }
        "conv2d" => {
            let x = image(l);
            let w = l.x("w", [4, 3, 3, 3]);
            let b = l.x("b", [4]);
            flat(conv2d(
                x,
                w,
                Some(b),
                ConvOptions::new([2, 1], [1, 1], [1, 1], 1),
            ))
        }
        "conv_transpose1d" => {
            let x = l.x("x", [2, 4, 9]);
            let w = l.x("w", [4, 3, 3]);
            let b = l.x("b", [3]);
            let options = ConvTransposeOptions::new([2], [1], [1], [1], 1);
            flat(conv_transpose1d(x, w, Some(b), options))
        }
        "conv_transpose2d" => {
            let x = l.x("x", [2, 4, 5, 7]);
            let w = l.x("w", [4, 3, 3, 2]);
            let b = l.x("b", [3]);
            let options = ConvTransposeOptions::new([2, 1], [1, 0], [1, 0], [1, 2], 1);
            flat(conv_transpose2d(x, w, Some(b), options))
        }
        "max_pool2d" => flat(max_pool2d(image(l), [3, 2], [2, 2], [1, 0], [1, 1], false)),
        "avg_pool2d" => flat(avg_pool2d(image(l), [3, 3], [1, 2], [1, 1], true, false)),
        "adaptive_avg_pool2d" => flat(adaptive_avg_pool2d(image(l), [4, 3])),
        "max_pool1d" => flat(max_pool1d(signal(l), 3, 2, 1, 1, false)),
        "avg_pool1d" => flat(avg_pool1d(signal(l), 4, 3, 2, true, false)),
        "adaptive_avg_pool1d" => flat(adaptive_avg_pool1d(signal(l), 5)),
        "interpolate" => flat(interpolate(
            image(l),
            [7, 15],
            InterpolateOptions::new(InterpolateMode::Nearest),
        )),
        "embedding" => {
            let table = l.x("table", [10, 6]);
            let ids = l.ints([3, 4], 10);
            flat(embedding(table, ids))
        }
        "layer_norm" => {
            let x = l.leaf("x", [3, 4, 37], -3.0, 5.0);
            let gamma = l.leaf("gamma", [37], 0.5, 1.5);
            let beta = l.x("beta", [37]);
            flat(Tensor::<B, 3>::from_primitive(TensorPrimitive::Float(
                B::layer_norm(
                    x.into_primitive().tensor(),
                    gamma.into_primitive().tensor(),
                    Some(beta.into_primitive().tensor()),
                    1e-5,
                ),
            )))
        }
        other => panic!("no module op case {other}"),
    };
    l.loss(out)
}

/// Gradients of module op case `name` on `B`.
fn module_grads<B: AutodiffBackend>(name: &str, device: &B::Device) -> Grads {
    let mut l = Leaves::<B>::new(device);
    let loss = module_case(name, &mut l);
    l.gradients(loss)
}

/// The backward of every module op in [`MODULE_CASES`] (inputs, weights and biases).
pub fn module_ops<A: AutodiffBackend>(device: &A::Device) -> CheckResult {
    let mut c = Checker::<A, G>::new(device);
    for &(name, tol) in MODULE_CASES {
        let result = catching(|| {
            let got = module_grads::<A>(name, device);
            let want = module_grads::<G>(name, &Default::default());
            Ok((got, want))
        });
        match result {
            // The convolutions' backwards are matrix products (TF32 on some devices).
            Ok((got, want)) if name.starts_with("conv") => {
                compare_product_grads(&mut c, name, got, want, tol)
            }
            Ok((got, want)) => compare_grads(&mut c, name, got, want, tol),
            Err(message) => c.fail(name, message),
        }
    }
    c.finish()
}

// ---------------------------------------------------------------------------------------------
// Models

/// Collects the gradient of every float parameter, named by its path in the module.
struct ParamGrads<'a, B: AutodiffBackend> {
    grads: &'a B::Gradients,
    path: Vec<String>,
    out: Grads,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for ParamGrads<'_, B> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let grad = param.val().grad(self.grads).map(|g| g.into_data());
        self.out.push((self.path.join("."), grad));
    }
}

/// The loss, the input's gradient and every parameter's gradient.
fn model_grads<B: AutodiffBackend, M: Module<B>, const D: usize>(
    model: &M,
    x: Tensor<B, D>,
    loss: Tensor<B, 1>,
) -> Grads {
    let value = loss.clone().into_data();
    let grads = loss.backward();
    let mut visitor = ParamGrads::<B> {
        grads: &grads,
        path: Vec::new(),
        out: vec![
            ("loss".to_string(), Some(value)),
            ("input".to_string(), x.grad(&grads).map(|g| g.into_data())),
        ],
    };
    model.visit(&mut visitor);
    visitor.out
}

/// A module record as bytes.
fn to_bytes<R: Record<G>>(record: R) -> Vec<u8> {
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    Recorder::<G>::record(&recorder, record, ()).expect("record to bytes")
}

/// A module record of backend `B` from bytes.
fn from_bytes<B: Backend, R: Record<B>>(bytes: Vec<u8>, device: &B::Device) -> R {
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    Recorder::<B>::load(&recorder, bytes, device).expect("record from bytes")
}

/// Seeds the reference's RNG, so that the initial weights are the same at every run.
///
/// The model is initialised on the reference, saved to bytes and loaded from those bytes on both
/// backends (not cloned: Burn's parameters are initialised lazily, and a clone made before the
/// first use draws its own values).
fn seed_reference() {
    <G as Backend>::seed(&Default::default(), 0x5eed);
}

/// A random input leaf on `B`.
fn input<B: Backend, const D: usize>(
    seed: u64,
    shape: [usize; D],
    device: &B::Device,
) -> Tensor<B, D> {
    Tensor::from_data(float_data(seed, &shape, -1.0, 1.0), device).require_grad()
}

/// A random target on `B`.
fn target<B: Backend, const D: usize>(
    seed: u64,
    shape: [usize; D],
    device: &B::Device,
) -> Tensor<B, D> {
    Tensor::from_data(float_data(seed, &shape, -1.0, 1.0), device)
}

/// Linear, LayerNorm, GELU, Linear, LayerNorm, ReLU, Linear.
#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    input: Linear<B>,
    norm: LayerNorm<B>,
    hidden: Linear<B>,
    norm_out: LayerNorm<B>,
    output: Linear<B>,
}

impl<B: Backend> Mlp<B> {
    /// 12 inputs, 32 hidden, 3 outputs (the shapes of the MLP training test of
    /// `tests/tests/backend/burn_backend.rs`, so that both share their matmul kernels).
    pub fn new(device: &B::Device) -> Self {
        Self {
            input: LinearConfig::new(12, 32).init(device),
            norm: LayerNormConfig::new(32).init(device),
            hidden: LinearConfig::new(32, 32).init(device),
            norm_out: LayerNormConfig::new(32).init(device),
            output: LinearConfig::new(32, 3).init(device),
        }
    }

    /// `[batch, 12] -> [batch, 3]`.
    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let h = activation::gelu(self.norm.forward(self.input.forward(x)));
        let h = activation::relu(self.norm_out.forward(self.hidden.forward(h)));
        self.output.forward(h)
    }
}

fn mlp_grads<B: AutodiffBackend>(model: &Mlp<B>, device: &B::Device) -> Grads {
    let x = input::<B, 2>(70, [16, 12], device);
    let diff = model.forward(x.clone()) - target::<B, 2>(71, [16, 3], device);
    let loss = (diff.clone() * diff).mean();
    model_grads(model, x, loss)
}

/// The MLP (with LayerNorm) on a `[16, 12]` batch, MSE loss.
pub fn mlp<A: AutodiffBackend>(device: &A::Device) -> CheckResult {
    let mut c = Checker::<A, G>::new(device);
    c.inputs(
        "x: [16, 12]; Linear 12-32, LayerNorm, GELU, Linear 32-32, LayerNorm, ReLU, Linear 32-3",
    );
    seed_reference();
    let bytes = to_bytes(Mlp::<G>::new(c.reference_device()).into_record());
    let reference = Mlp::<G>::new(c.reference_device())
        .load_record(from_bytes(bytes.clone(), c.reference_device()));
    let model = Mlp::<A>::new(device).load_record(from_bytes(bytes, device));
    let got = mlp_grads(&model, device);
    let want = mlp_grads(&reference, c.reference_device());
    compare_product_grads(&mut c, "MLP", got, want, 2e-3);
    c.finish()
}

/// conv2d (padded), ReLU, max-pool, conv2d, GELU, avg-pool, Linear.
#[derive(Module, Debug)]
pub struct Cnn<B: Backend> {
    conv1: Conv2d<B>,
    conv2: Conv2d<B>,
    linear: Linear<B>,
}

impl<B: Backend> Cnn<B> {
    /// 3 input channels, 3 outputs, for `[batch, 3, 11, 10]` images.
    pub fn new(device: &B::Device) -> Self {
        Self {
            conv1: Conv2dConfig::new([3, 6], [3, 3])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(device),
            conv2: Conv2dConfig::new([6, 8], [3, 3]).init(device),
            linear: LinearConfig::new(8 * 2 * 2, 3).init(device),
        }
    }

    /// `[batch, 3, 11, 10] -> [batch, 3]`.
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 2> {
        // conv1 and ReLU: [b, 6, 11, 10]; max-pool: [b, 6, 5, 5]
        let h = activation::relu(self.conv1.forward(x));
        let h = max_pool2d(h, [2, 2], [2, 2], [0, 0], [1, 1], false);
        // conv2 and GELU: [b, 8, 3, 3]; avg-pool: [b, 8, 2, 2]
        let h = activation::gelu(self.conv2.forward(h));
        let h = avg_pool2d(h, [2, 2], [1, 1], [0, 0], true, false);
        let [b, ..] = h.dims();
        self.linear.forward(h.reshape([b, 8 * 2 * 2]))
    }
}

fn cnn_grads<B: AutodiffBackend>(model: &Cnn<B>, device: &B::Device) -> Grads {
    let x = input::<B, 4>(72, [16, 3, 11, 10], device);
    let diff = model.forward(x.clone()) - target::<B, 2>(73, [16, 3], device);
    let loss = (diff.clone() * diff).mean();
    model_grads(model, x, loss)
}

/// The CNN on a `[16, 3, 11, 10]` batch, MSE loss.
pub fn cnn<A: AutodiffBackend>(device: &A::Device) -> CheckResult {
    let mut c = Checker::<A, G>::new(device);
    c.inputs(
        "x: [16, 3, 11, 10]; conv 3-6 k3 p1, ReLU, max-pool 2, conv 6-8 k3, GELU, avg-pool 2 s1, \
         Linear 32-3",
    );
    seed_reference();
    let bytes = to_bytes(Cnn::<G>::new(c.reference_device()).into_record());
    let reference = Cnn::<G>::new(c.reference_device())
        .load_record(from_bytes(bytes.clone(), c.reference_device()));
    let model = Cnn::<A>::new(device).load_record(from_bytes(bytes, device));
    let got = cnn_grads(&model, device);
    let want = cnn_grads(&reference, c.reference_device());
    compare_product_grads(&mut c, "CNN", got, want, 2e-3);
    c.finish()
}

/// The encoder of the transformer check: d_model 16, 2 heads, 2 layers, d_ff 32, no dropout.
fn encoder<B: Backend>(device: &B::Device) -> TransformerEncoder<B> {
    TransformerEncoderConfig::new(16, 32, 2, 2)
        .with_dropout(0.0)
        .init(device)
}

fn transformer_grads<B: AutodiffBackend>(
    model: &TransformerEncoder<B>,
    device: &B::Device,
) -> Grads {
    let x = input::<B, 3>(74, [2, 5, 16], device);
    // The last two positions of the second sequence are padding.
    let pad = Tensor::<B, 2, Bool>::from_data(
        TensorData::new(
            vec![
                false, false, false, false, false, false, false, false, true, true,
            ],
            [2, 5],
        ),
        device,
    );
    let out = model.forward(TransformerEncoderInput::new(x.clone()).mask_pad(pad));
    let loss = (out * target::<B, 3>(75, [2, 5, 16], device)).sum();
    model_grads(model, x, loss)
}

/// `TransformerEncoder` (d_model 16, 2 heads, 2 layers) on a `[2, 5, 16]` batch with padding.
pub fn transformer<A: AutodiffBackend>(device: &A::Device) -> CheckResult {
    let mut c = Checker::<A, G>::new(device);
    c.inputs("x: [2, 5, 16], 2 padded positions; TransformerEncoder d_model 16, d_ff 32, 2 heads, 2 layers");
    seed_reference();
    let bytes = to_bytes(encoder::<G>(c.reference_device()).into_record());
    let reference = encoder::<G>(c.reference_device())
        .load_record(from_bytes(bytes.clone(), c.reference_device()));
    let model = encoder::<A>(device).load_record(from_bytes(bytes, device));
    let got = transformer_grads(&model, device);
    let want = transformer_grads(&reference, c.reference_device());
    compare_product_grads(&mut c, "TransformerEncoder", got, want, 2e-3);
    c.finish()
}

/// Burn's `MultiHeadAttention` under a causal mask (its softmax over the last dimension of the
/// scores), a linear head and `CrossEntropyLoss` (a log-softmax over the classes): the two
/// softmaxes of a transformer step.
#[derive(Module, Debug)]
pub struct AttentionLoss<B: Backend> {
    attention: MultiHeadAttention<B>,
    head: Linear<B>,
}

impl<B: Backend> AttentionLoss<B> {
    /// d_model 16, 2 heads, no dropout; 11 classes.
    pub fn new(device: &B::Device) -> Self {
        Self {
            attention: MultiHeadAttentionConfig::new(16, 2)
                .with_dropout(0.0)
                .init(device),
            head: LinearConfig::new(16, 11).init(device),
        }
    }

    /// The mean cross-entropy of `x [batch, seq, 16]` against `targets [batch * seq]`.
    pub fn loss(&self, x: Tensor<B, 3>, targets: Tensor<B, 1, Int>) -> Tensor<B, 1> {
        let [batch, seq, _] = x.dims();
        let mask = generate_autoregressive_mask::<B>(batch, seq, &x.device());
        let context = self
            .attention
            .forward(MhaInput::self_attn(x).mask_attn(mask))
            .context;
        let logits = self.head.forward(context).reshape([batch * seq, 11]);
        CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits, targets)
    }
}

fn attention_loss_grads<B: AutodiffBackend>(model: &AttentionLoss<B>, device: &B::Device) -> Grads {
    let x = input::<B, 3>(76, [2, 6, 16], device);
    let targets: Vec<i64> = (0..12).map(|i| (i * 7 + 3) % 11).collect();
    let targets = Tensor::<B, 1, Int>::from_data(TensorData::new(targets, [12]), device);
    let loss = model.loss(x.clone(), targets);
    model_grads(model, x, loss)
}

/// `MultiHeadAttention` with a causal mask and `CrossEntropyLoss` on a `[2, 6, 16]` batch: the
/// loss and the gradients of the input and of every parameter.
pub fn attention_loss<A: AutodiffBackend>(device: &A::Device) -> CheckResult {
    let mut c = Checker::<A, G>::new(device);
    c.inputs("x: [2, 6, 16]; MultiHeadAttention d_model 16, 2 heads, causal mask; Linear 16-11; CrossEntropyLoss");
    seed_reference();
    let bytes = to_bytes(AttentionLoss::<G>::new(c.reference_device()).into_record());
    let reference = AttentionLoss::<G>::new(c.reference_device())
        .load_record(from_bytes(bytes.clone(), c.reference_device()));
    let model = AttentionLoss::<A>::new(device).load_record(from_bytes(bytes, device));
    let got = attention_loss_grads(&model, device);
    let want = attention_loss_grads(&reference, c.reference_device());
    compare_product_grads(
        &mut c,
        "MultiHeadAttention + CrossEntropyLoss",
        got,
        want,
        2e-3,
    );
    c.finish()
}
