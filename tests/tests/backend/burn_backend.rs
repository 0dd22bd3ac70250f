//! burn-ruda as a Burn backend, on Mesa's CPU Vulkan driver (`WgpuDevice::Cpu`).
//!
//! - The differential suite ([`ruda_tests::differential`]): every op family on `Ruda<RudaWgpu>`
//!   against `NdArray` on the same random inputs, and the gradients of op backwards, an MLP, a
//!   CNN and a `TransformerEncoder` under `burn_ruda::Autodiff<Ruda>` against
//!   `burn::backend::Autodiff<NdArray>`; one test per family, each listing every failed check.
//! - LayerNorm: `burn::nn::LayerNorm` on `Ruda` runs the native kernel once per call; a runtime
//!   without native LayerNorm takes Burn's composed one.
//! - Autodiff: `burn_ruda::Autodiff<Ruda>` runs one native forward and one native backward per
//!   LayerNorm and trains like `burn::backend::Autodiff<NdArray>`; Burn's own `Autodiff<Ruda>`
//!   (composed LayerNorm) trains the same way.
//!
//! The tests that run a native LayerNorm are `#[serial]`: the others read the process-global
//! native-call counters.

use burn::backend::NdArray;
use burn::backend::ndarray::NdArrayDevice;
use burn::module::{Module, Param};
use burn::nn::{LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Tensor, TensorData, TensorPrimitive, activation};
use burn_ruda::{BackwardWithGrad, Ruda, RudaWgpu, backward_with_grad};
use cubecl::wgpu::WgpuDevice;
use ruda_tests::differential::module_ops::layer_norm_of as layer_norm;
use ruda_tests::differential::{self, Family, compare_floats, values};
use ruda_tests::launches::layer_norm as native_calls;
use ruda_tests::plain_runtime::PlainWgpu;
use serial_test::serial;

type R = Ruda<RudaWgpu>;
type N = NdArray;
type RudaAd = burn_ruda::Autodiff<R>;
type BurnAdRuda = burn::backend::Autodiff<R>;
type BurnAdNd = burn::backend::Autodiff<N>;

fn rdev() -> WgpuDevice {
    WgpuDevice::Cpu
}

fn ndev() -> NdArrayDevice {
    NdArrayDevice::Cpu
}

/// The same random float tensor (uniform in `[-2, 2)`) on both backends.
fn floats<const D: usize>(seed: u64, shape: [usize; D]) -> (Tensor<R, D>, Tensor<N, D>) {
    let data = differential::float_data(seed, &shape, -2.0, 2.0);
    (
        Tensor::from_data(data.clone(), &rdev()),
        Tensor::from_data(data, &ndev()),
    )
}

fn f32s(data: TensorData) -> Vec<f32> {
    data.convert::<f32>().to_vec::<f32>().unwrap()
}

fn assert_close_data(what: &str, a: TensorData, b: TensorData, tol: f32) {
    if let Err(message) = compare_floats(&a, &b, tol) {
        panic!("{what}: {message}");
    }
}

// ---------------------------------------------------------------------------------------------
// The differential suite, one test per family

/// Runs every check of `family` on `Ruda<RudaWgpu>` (and `burn_ruda::Autodiff` over it); prints
/// one PASS/FAIL line per check and fails with every failure.
fn differential(family: Family) {
    let outcomes = differential::run_checks::<R, RudaAd>(&[family], &rdev(), &rdev());
    differential::assert_passed(&outcomes, &format!("{family:?}"));
}

#[test]
fn float_ops_match_ndarray() {
    differential(Family::Float);
}

#[test]
fn int_and_bool_ops_match_ndarray() {
    differential(Family::IntBool);
}

#[test]
fn reductions_match_ndarray() {
    differential(Family::Reductions);
}

#[test]
fn indexing_gather_scatter_slice_cat_match_ndarray() {
    differential(Family::Indexing);
}

#[test]
fn sorting_matches_ndarray() {
    differential(Family::Sorting);
}

/// Serial: its LayerNorm check runs the native kernel.
#[test]
#[serial]
fn module_ops_match_ndarray() {
    differential(Family::ModuleOps);
}

/// Serial: its softmax checks run the native kernels.
#[test]
#[serial]
fn activations_match_ndarray() {
    differential(Family::Activations);
}

#[test]
fn quantize_dequantize_round_trips_match_ndarray() {
    differential(Family::Quantization);
}

#[test]
fn transactions_match_ndarray() {
    differential(Family::Transactions);
}

/// Serial: the MLP, the transformer, the attention with its loss, the LayerNorm and softmax
/// cases run the native kernels.
#[test]
#[serial]
fn gradients_match_autodiff_ndarray() {
    differential(Family::Gradients);
}

// ---------------------------------------------------------------------------------------------
// LayerNorm

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

/// Gradients of `sum(layer_norm(x, gamma, beta) * w)` for x, gamma, beta: through that product
/// and sum, or (`given`) as `backward_with_grad(y, w)`, the backward from `y` with gradient `w`.
fn layer_norm_grads<B: BackwardWithGrad>(
    device: &B::Device,
    beta: bool,
    given: bool,
) -> Vec<TensorData> {
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
    let grads = if given {
        backward_with_grad(y, w.inner())
    } else {
        (y * w).sum().backward()
    };
    let mut out = vec![
        x.grad(&grads).unwrap().into_data(),
        gamma.grad(&grads).unwrap().into_data(),
    ];
    if beta {
        out.push(b.grad(&grads).unwrap().into_data());
    }
    out
}

fn assert_grads_close(what: &str, ours: Vec<TensorData>, reference: Vec<TensorData>) {
    assert_eq!(ours.len(), reference.len(), "{what}");
    for (name, (r, n)) in ["dx", "dgamma", "dbeta"]
        .iter()
        .zip(ours.into_iter().zip(reference))
    {
        assert_close_data(&format!("{what}: {name}"), r, n, 1e-3);
    }
}

#[test]
#[serial]
fn native_layer_norm_gradients_match_ndarray_with_one_node() {
    for beta in [true, false] {
        let before = native_calls();
        let ruda = layer_norm_grads::<RudaAd>(&rdev(), beta, false);
        let after = native_calls();
        assert_eq!(after.0 - before.0, 1, "one native forward");
        assert_eq!(after.1 - before.1, 1, "one native backward");
        let reference = layer_norm_grads::<BurnAdNd>(&ndev(), beta, false);
        assert_grads_close("sum(y * w)", ruda, reference);
    }
}

#[test]
#[serial]
fn backward_with_grad_matches_the_product_and_sum() {
    for beta in [true, false] {
        let reference = layer_norm_grads::<BurnAdNd>(&ndev(), beta, false);
        // Burn's own autodiff over NdArray, Burn's composed LayerNorm.
        let burn = layer_norm_grads::<BurnAdNd>(&ndev(), beta, true);
        assert_grads_close(
            "Burn's autodiff, given y's gradient",
            burn,
            reference.clone(),
        );
        // burn-ruda's: still one native forward and one native backward.
        let before = native_calls();
        let ruda = layer_norm_grads::<RudaAd>(&rdev(), beta, true);
        let after = native_calls();
        assert_eq!(after.0 - before.0, 1, "one native forward");
        assert_eq!(after.1 - before.1, 1, "one native backward");
        assert_grads_close("burn-ruda's autodiff, given y's gradient", ruda, reference);
    }
}

/// Several `backward_with_grad` calls queued before any read, as a training loop queues them:
/// each gets its own gradients, though `Ruda` hands every call's root out of one buffer.
#[test]
#[serial]
fn backward_with_grad_calls_queued_together_each_get_their_gradients() {
    let device = rdev();
    let data = |seed, lo, hi| TensorData::new(values(seed, 12, lo, hi), [3, 4]);
    let queued: Vec<_> = (0..3)
        .map(|i| {
            let x = Tensor::<RudaAd, 2>::from_data(data(60 + i, -2.0, 2.0), &device).require_grad();
            let dy = Tensor::<R, 2>::from_data(data(70 + i, -1.0, 1.0), &device);
            // d(exp(x))/dx = exp(x).
            let expected = x.clone().inner().exp() * dy.clone();
            let grads = backward_with_grad(x.clone().exp(), dy);
            (x.grad(&grads).expect("x is tracked"), expected)
        })
        .collect();
    for (i, (dx, expected)) in queued.into_iter().enumerate() {
        assert_close_data(
            &format!("call {i}: dx"),
            dx.into_data(),
            expected.into_data(),
            1e-4,
        );
    }
}

/// `backward_with_grad` from several threads at once, each its own burn-fusion stream: `Ruda`
/// registers the shared root on whichever stream asks first, and the others use it without
/// waiting on that stream or losing their gradients.
#[test]
#[serial]
fn backward_with_grad_from_several_threads_each_get_their_gradients() {
    let threads: Vec<_> = (0..3u64)
        .map(|t| {
            std::thread::spawn(move || {
                let device = rdev();
                for i in 0..4 {
                    let seed = 100 + 10 * t + i;
                    let data = |seed, lo, hi| TensorData::new(values(seed, 20, lo, hi), [4, 5]);
                    let x = Tensor::<RudaAd, 2>::from_data(data(seed, -2.0, 2.0), &device)
                        .require_grad();
                    let dy = Tensor::<R, 2>::from_data(data(seed + 5, -1.0, 1.0), &device);
                    // d(x^2)/dx = 2x.
                    let expected = x.clone().inner() * dy.clone() * 2.0;
                    let grads = backward_with_grad(x.clone().powf_scalar(2.0), dy);
                    let dx = x.grad(&grads).expect("x is tracked");
                    assert_close_data(
                        &format!("thread {t}, call {i}: dx"),
                        dx.into_data(),
                        expected.into_data(),
                        1e-4,
                    );
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a thread's backward_with_grad failed");
    }
}

#[test]
#[should_panic(
    expected = "Backward with grad: the gradient's shape Shape { dims: [2, 4] } must be the tensor's Shape { dims: [2, 3] }"
)]
fn backward_with_grad_of_another_shape_panics() {
    let x = Tensor::<RudaAd, 2>::ones([2, 3], &rdev()).require_grad();
    let dy = Tensor::<R, 2>::ones([2, 4], &rdev());
    let _ = backward_with_grad(x.exp(), dy);
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

// ---------------------------------------------------------------------------------------------
// Embedding backward: native on every runtime

/// `burn::nn::Embedding`'s gradient under both autodiffs over `Ruda` runs the native kernel
/// once per backward, and gives the same bits as Burn's own kernel (`select_add` on the same
/// device, through `Inner`): both add the rows of each table row in token order, in f32. Tables
/// above the native kernel's limit go to Burn's kernel.
#[test]
#[serial]
fn embedding_gradient_runs_the_native_kernel_with_burns_bits() {
    use burn::nn::EmbeddingConfig;
    use burn::tensor::Int;
    use burn::tensor::ops::ModuleOps;
    use ruda_tests::differential::int_data;
    use ruda_tests::launches::embedding_backward as native_embedding_backward_calls;

    fn table_grad<B: AutodiffBackend>(device: &B::Device, ids: TensorData) -> TensorData {
        let embedding = EmbeddingConfig::new(30, 20).init::<B>(device);
        let ids = Tensor::<B, 2, Int>::from_data(ids, device);
        let grads = embedding.forward(ids).powf_scalar(2.0).sum().backward();
        embedding
            .weight
            .grad(&grads)
            .expect("the table has a gradient")
            .into_data()
    }

    let ids = int_data(51, &[4, 300], 30);
    for run in ["burn_ruda::Autodiff", "burn::backend::Autodiff"] {
        let before = native_embedding_backward_calls();
        let grad = match run {
            "burn_ruda::Autodiff" => table_grad::<RudaAd>(&rdev(), ids.clone()),
            _ => table_grad::<BurnAdRuda>(&rdev(), ids.clone()),
        };
        assert_eq!(
            native_embedding_backward_calls() - before,
            1,
            "{run}: native launches"
        );
        assert!(
            f32s(grad).iter().any(|v| *v != 0.0),
            "{run}: gradient is zero"
        );
    }

    // A table above the native kernel's limit goes to Burn's kernel (module_ops_match_ndarray
    // checks its values).
    let rows = ruda_runtime::embedding::NATIVE_MAX_ROWS + 1;
    let before = native_embedding_backward_calls();
    let (table, _) = floats::<2>(56, [rows, 4]);
    let (grad, _) = floats::<3>(57, [1, 8, 4]);
    let big_ids = Tensor::<R, 2, Int>::from_data(int_data(58, &[1, 8], rows as i64), &rdev());
    let out = R::embedding_backward(
        table.into_primitive().tensor(),
        grad.into_primitive().tensor(),
        big_ids.into_primitive(),
    );
    let _ = Tensor::<R, 2>::from_primitive(TensorPrimitive::Float(out)).into_data();
    assert_eq!(
        native_embedding_backward_calls(),
        before,
        "large table: native launches"
    );

    type Burns = burn_ruda::Inner<RudaWgpu, f32, i32, u32>;
    let (table, _) = floats::<2>(52, [30, 20]);
    let (grad, _) = floats::<3>(53, [4, 300, 20]);
    let ids = Tensor::<R, 2, Int>::from_data(ids, &rdev());
    let native = R::embedding_backward(
        table.clone().into_primitive().tensor(),
        grad.clone().into_primitive().tensor(),
        ids.clone().into_primitive(),
    );
    let burns = Burns::embedding_backward(
        table.into_primitive().tensor(),
        grad.into_primitive().tensor(),
        ids.into_primitive(),
    );
    let native = f32s(Tensor::<R, 2>::from_primitive(TensorPrimitive::Float(native)).into_data());
    let burns = f32s(Tensor::<Burns, 2>::from_primitive(TensorPrimitive::Float(burns)).into_data());
    assert_eq!(native, burns, "native and Burn's embedding backward differ");
}

#[test]
#[should_panic(
    expected = "Embedding backward: the output gradient's shape must be the indices' shape plus the embedding size"
)]
fn embedding_backward_with_mismatched_shapes_panics() {
    use burn::tensor::Int;
    use burn::tensor::ops::ModuleOps;
    let (table, _) = floats::<2>(54, [5, 4]);
    let (grad, _) = floats::<3>(55, [2, 3, 4]);
    let ids = Tensor::<R, 2, Int>::zeros([3, 2], &rdev());
    let out = R::embedding_backward(
        table.into_primitive().tensor(),
        grad.into_primitive().tensor(),
        ids.into_primitive(),
    );
    let _ = Tensor::<R, 2>::from_primitive(TensorPrimitive::Float(out)).into_data();
}

// ---------------------------------------------------------------------------------------------
// Moving tensors between two wgpu devices

/// A second Burn device on the same lavapipe adapter: CubeCL gives each `WgpuDevice` id its own
/// wgpu device and queue, so `Cpu` and `DefaultDevice` are two devices (on a machine with a GPU,
/// `DefaultDevice` is that GPU: still a different device).
fn rdev2() -> WgpuDevice {
    WgpuDevice::DefaultDevice
}

#[test]
fn tensors_move_between_two_wgpu_devices_with_their_values() {
    let (x, _) = floats::<2>(31, [3, 5]);
    let expected = f32s(x.to_data());
    let moved = x.clone().to_device(&rdev2());
    assert_eq!(moved.device(), rdev2());
    // Computing on the destination reads the moved buffer there.
    let doubled = moved.clone() * 2.0;
    assert_eq!(
        f32s(doubled.to_data()),
        expected.iter().map(|v| v * 2.0).collect::<Vec<_>>()
    );
    assert_eq!(f32s(moved.clone().to_device(&rdev()).to_data()), expected);

    let ints = Tensor::<R, 1, burn::tensor::Int>::arange(0..7, &rdev());
    let ints_moved = ints.to_device(&rdev2()) + 1;
    assert_eq!(
        ints_moved
            .to_data()
            .convert::<i64>()
            .to_vec::<i64>()
            .unwrap(),
        (1..8).collect::<Vec<i64>>()
    );
    let mask = moved.greater_elem(0.0);
    let mask_back = mask.clone().to_device(&rdev());
    assert_eq!(mask_back.device(), rdev());
    assert_eq!(mask_back.to_data(), mask.to_data());

    // Gradients flow back across the move: d/dx sum(2 * to_device(x)) = 2 on the source device.
    let x = Tensor::<RudaAd, 2>::from_data(x.to_data(), &rdev()).require_grad();
    let y = (x.clone().to_device(&rdev2()) * 2.0).sum();
    let grads = y.backward();
    let grad = x.grad(&grads).expect("x has a gradient");
    assert_eq!(grad.device(), rdev());
    assert_eq!(f32s(grad.to_data()), vec![2.0; 15]);
}

// ---------------------------------------------------------------------------------------------
// Softmax

/// Burn's attention (softmax over the scores) and cross-entropy (log-softmax over the logits)
/// under `burn_ruda::Autodiff`: one native forward and one native backward each, and the loss
/// and gradients of Burn's own autodiff over NdArray (the differential suite's attention check
/// compares every parameter's gradient; this one counts the kernels). Serial: reads the
/// native-launch counters.
#[test]
#[serial]
fn attention_and_cross_entropy_run_one_native_softmax_node_each() {
    use ruda_tests::differential::gradients::AttentionLoss;
    use ruda_tests::launches::softmax as softmax_calls;

    fn run<B: AutodiffBackend>(device: &B::Device, record: Vec<u8>) -> (TensorData, TensorData) {
        use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
        let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
        let model = AttentionLoss::<B>::new(device)
            .load_record(Recorder::<B>::load(&recorder, record, device).expect("record"));
        let data = differential::float_data(77, &[2, 6, 16], -1.0, 1.0);
        let x = Tensor::<B, 3>::from_data(data, device).require_grad();
        let targets: Vec<i64> = (0..12).map(|i| (i * 5 + 1) % 11).collect();
        let targets =
            Tensor::<B, 1, burn::tensor::Int>::from_data(TensorData::new(targets, [12]), device);
        let loss = model.loss(x.clone(), targets);
        let value = loss.clone().into_data();
        let grads = loss.backward();
        (value, x.grad(&grads).expect("x has a gradient").into_data())
    }

    use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
    <BurnAdNd as Backend>::seed(&ndev(), 7);
    let record = Recorder::<BurnAdNd>::record(
        &BinBytesRecorder::<FullPrecisionSettings>::default(),
        AttentionLoss::<BurnAdNd>::new(&ndev()).into_record(),
        (),
    )
    .expect("record to bytes");
    let before = softmax_calls();
    let (loss, dx) = run::<RudaAd>(&rdev(), record.clone());
    let after = softmax_calls();
    let (want_loss, want_dx) = run::<BurnAdNd>(&ndev(), record);
    assert_close_data("loss", loss, want_loss, 1e-4);
    assert_close_data("input gradient", dx, want_dx, 1e-3);
    assert_eq!(
        after.0 - before.0,
        2,
        "one native forward for the scores, one for the logits"
    );
    assert_eq!(after.1 - before.1, 2, "one native backward each");
}

/// Softmax and log-softmax over every dimension on plain `Ruda` (no autodiff): the native
/// forward kernel, against NdArray.
#[test]
#[serial]
fn softmax_on_ruda_runs_the_native_kernel_over_every_dimension() {
    use ruda_tests::launches::softmax as softmax_calls;
    let (x, nx) = floats(48, [3, 4, 5]);
    for dim in 0..3 {
        let before = softmax_calls();
        let got = activation::softmax(x.clone(), dim).into_data();
        let got_log = activation::log_softmax(x.clone(), dim).into_data();
        assert_eq!(
            softmax_calls().0 - before.0,
            2,
            "dim {dim}: two native forwards"
        );
        assert_close_data(
            "softmax",
            got,
            activation::softmax(nx.clone(), dim).into_data(),
            1e-5,
        );
        assert_close_data(
            "log_softmax",
            got_log,
            activation::log_softmax(nx.clone(), dim).into_data(),
            1e-5,
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Linear

/// `burn::nn::Linear` under `burn_ruda::Autodiff`: for every combination of parents that want a
/// gradient (input, weight, bias; with and without a bias; rank-2 and rank-3 inputs) the
/// backward is one operation, and the gradients are those of Burn's autodiff over NdArray.
/// Serial: reads the native-launch counters.
#[test]
#[serial]
fn linear_backward_is_one_operation_for_every_combination_of_parents() {
    use ruda_tests::launches::linear_backward as linear_backward_calls;

    /// `[dx, dW, db]` of `sum(Linear(x)^2) / 2`, `None` where the parent wants none.
    fn grads<B: AutodiffBackend, const D: usize>(
        device: &B::Device,
        x: TensorData,
        (x_grad, weight_grad, bias): (bool, bool, Option<bool>),
    ) -> [Option<TensorData>; 3] {
        let mut layer: Linear<B> = LinearConfig::new(6, 5)
            .with_bias(bias.is_some())
            .init(device);
        layer.weight = Param::from_data(differential::float_data(3, &[6, 5], -0.5, 0.5), device)
            .set_require_grad(weight_grad);
        layer.bias = bias.map(|tracked| {
            Param::from_data(differential::float_data(4, &[5], -0.5, 0.5), device)
                .set_require_grad(tracked)
        });
        let x = Tensor::<B, D>::from_data(x, device);
        let x = if x_grad { x.require_grad() } else { x };
        let y = layer.forward(x.clone());
        let grads = (y.clone() * y).sum().div_scalar(2.0).backward();
        [
            x.grad(&grads).map(|g| g.into_data()),
            layer.weight.val().grad(&grads).map(|g| g.into_data()),
            layer
                .bias
                .as_ref()
                .and_then(|b| b.val().grad(&grads))
                .map(|g| g.into_data()),
        ]
    }

    fn check<const D: usize>(shape: [usize; D], parents: (bool, bool, Option<bool>)) {
        let x = differential::float_data(2, &shape, -2.0, 2.0);
        let before = linear_backward_calls();
        let got = grads::<RudaAd, D>(&rdev(), x.clone(), parents);
        let ran = linear_backward_calls() - before;
        let want = grads::<BurnAdNd, D>(&ndev(), x, parents);
        assert_eq!(ran, 1, "{shape:?} {parents:?}: one backward operation");
        for (name, (got, want)) in ["dx", "dW", "db"]
            .into_iter()
            .zip(got.into_iter().zip(want))
        {
            match (got, want) {
                (Some(got), Some(want)) => {
                    assert_close_data(&format!("{shape:?} {parents:?} {name}"), got, want, 1e-4)
                }
                (None, None) => {}
                (got, want) => panic!(
                    "{shape:?} {parents:?} {name}: ruda {}, Burn {}",
                    got.is_some(),
                    want.is_some()
                ),
            }
        }
    }

    for x_grad in [true, false] {
        for weight_grad in [true, false] {
            for bias in [None, Some(true), Some(false)] {
                if !x_grad && !weight_grad && bias != Some(true) {
                    continue; // nothing to differentiate
                }
                check([7, 6], (x_grad, weight_grad, bias));
                check([2, 3, 6], (x_grad, weight_grad, bias));
            }
        }
    }
}
