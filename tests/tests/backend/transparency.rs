//! Transparency of the native LayerNorm node, on Mesa's CPU Vulkan driver: Burn's own modules
//! (`burn::nn::LayerNorm`, `burn::nn::transformer::TransformerEncoder`), unchanged, run under
//! `burn_ruda::Autodiff<Ruda>` with exactly one native forward and one native backward kernel
//! per LayerNorm per step (counted by burn-ruda's test hook), and give the outputs and
//! gradients of Burn's composed LayerNorm (`burn::backend::Autodiff<Ruda>`, same weights).
//! Under `BalancedCheckpointing` the LayerNorm node is recomputed instead of kept, with the
//! same gradients.

use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::module::Module;
use burn::nn::transformer::{
    TransformerEncoder, TransformerEncoderConfig, TransformerEncoderInput,
};
use burn::nn::{LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Distribution, Tensor, TensorData};
use burn_ruda::{Ruda, RudaWgpu};
use cubecl::wgpu::WgpuDevice;
use ruda_tests::launches::layer_norm as native_calls;
use serial_test::serial;

type R = Ruda<RudaWgpu>;
/// The decorator under test.
type Native = burn_ruda::Autodiff<R>;
/// The decorator under test, recomputing memory-bound nodes.
type NativeBalanced = burn_ruda::Autodiff<R, BalancedCheckpointing>;
/// Burn's own autodiff: LayerNorm composed of about ten differentiable ops.
type Composed = burn::backend::Autodiff<R>;

fn device() -> WgpuDevice {
    WgpuDevice::Cpu
}

/// A tensor of deterministic values uniform in `[lo, hi)` (host-generated, so every backend
/// sees the same numbers).
fn uniform<B: Backend, const D: usize>(
    seed: u64,
    shape: [usize; D],
    lo: f32,
    hi: f32,
    device: &B::Device,
) -> Tensor<B, D> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let n = shape.iter().product();
    let values: Vec<f32> = (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            lo + (hi - lo) * ((state >> 40) as f32 / (1u64 << 24) as f32)
        })
        .collect();
    Tensor::from_data(TensorData::new(values, shape), device)
}

/// Moves a module's weights to another backend, bit for bit (and with the same parameter ids).
///
/// Freshly initialized parameters are lazy: a clone initializes its own random values. Tests
/// therefore load even the module under test from a record, so that its clones share values.
fn same_weights<A: Backend, B: Backend, M: Module<A>, N: Module<B>>(
    from: M,
    into: N,
    device: &B::Device,
) -> N {
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    let bytes = recorder
        .record(from.into_record(), ())
        .expect("record the weights");
    let record = recorder.load(bytes, device).expect("load the weights");
    into.load_record(record)
}

/// Native (forward, backward) kernel launches made by `run`, once every queued kernel ran.
fn count_native<T>(run: impl FnOnce() -> T) -> (T, (usize, usize)) {
    R::sync(&device()).expect("sync");
    let before = native_calls();
    let out = run();
    R::sync(&device()).expect("sync");
    let after = native_calls();
    (out, (after.0 - before.0, after.1 - before.1))
}

fn assert_close(what: &str, actual: TensorData, expected: TensorData, tol: f32) {
    let a = actual.to_vec::<f32>().expect("f32 data");
    let e = expected.to_vec::<f32>().expect("f32 data");
    assert_eq!(a.len(), e.len(), "{what}: lengths");
    let scale = e.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
    for (i, (x, y)) in a.iter().zip(&e).enumerate() {
        assert!(
            (x - y).abs() <= tol * scale,
            "{what}[{i}]: {x} vs {y} (scale {scale}, tolerance {tol})"
        );
    }
}

/// Output, dx, dgamma and dbeta of `burn::nn::LayerNorm` for `sum(layer(x) * w)`.
fn layer_norm_step<B: AutodiffBackend>(layer: &LayerNorm<B>, seed: u64) -> Vec<TensorData> {
    let device = device_of(layer);
    let x = uniform::<B, 3>(seed, [3, 5, 37], -3.0, 5.0, &device).require_grad();
    let w = uniform::<B, 3>(seed + 1, [3, 5, 37], -1.0, 1.0, &device);
    let y = layer.forward(x.clone());
    let grads = (y.clone() * w).sum().backward();
    vec![
        y.into_data(),
        x.grad(&grads).expect("dx").into_data(),
        layer.gamma.grad(&grads).expect("dgamma").into_data(),
        layer
            .beta
            .as_ref()
            .expect("beta")
            .grad(&grads)
            .expect("dbeta")
            .into_data(),
    ]
}

fn device_of<B: Backend, M: Module<B>>(module: &M) -> B::Device {
    module.devices().into_iter().next().expect("a device")
}

#[test]
#[serial]
fn nn_layer_norm_runs_one_native_forward_and_backward_per_step() {
    let gamma_beta = |layer: LayerNorm<Native>| {
        // Non-trivial gamma and beta, so that their gradients and use are checked.
        let mut layer = layer;
        layer.gamma = layer
            .gamma
            .map(|g| g.clone() * 0.5 + g.random_like(Distribution::Uniform(0.0, 1.0)));
        layer.beta = layer
            .beta
            .map(|b| b.map(|b| b.random_like(Distribution::Uniform(-0.5, 0.5))));
        layer
    };
    // Weights go through a record, as a trained model's would: parameters stay trainable.
    let tweaked = gamma_beta(LayerNormConfig::new(37).init::<Native>(&device()));
    let native = same_weights(
        tweaked,
        LayerNormConfig::new(37).init::<Native>(&device()),
        &device(),
    );
    let composed = same_weights(
        native.clone(),
        LayerNormConfig::new(37).init::<Composed>(&device()),
        &device(),
    );

    for step in 0..2 {
        let (ours, calls) = count_native(|| layer_norm_step(&native, 10 + step));
        assert_eq!(
            calls,
            (1, 1),
            "step {step}: one native forward and one backward"
        );
        let (reference, calls) = count_native(|| layer_norm_step(&composed, 10 + step));
        assert_eq!(calls, (0, 0), "Burn's Autodiff composes LayerNorm");
        for (name, (a, e)) in ["y", "dx", "dgamma", "dbeta"]
            .into_iter()
            .zip(ours.into_iter().zip(reference))
        {
            assert_close(name, a, e, 1e-4);
        }
    }
}

/// A causal transformer encoder step: outputs, dx and the gradients of every LayerNorm and of
/// the first attention projection.
fn encoder_step<B: AutodiffBackend>(encoder: &TransformerEncoder<B>) -> Vec<(String, TensorData)> {
    let device = device_of(encoder);
    let (batch, seq, d_model) = (2, 5, 16);
    let x = uniform::<B, 3>(7, [batch, seq, d_model], -2.0, 2.0, &device).require_grad();
    let w = uniform::<B, 3>(8, [batch, seq, d_model], -1.0, 1.0, &device);
    let mask = burn::nn::attention::generate_autoregressive_mask::<B>(batch, seq, &device);
    let y = encoder.forward(TransformerEncoderInput::new(x.clone()).mask_attn(mask));
    let grads = (y.clone() * w).sum().backward();
    let mut out = vec![
        ("y".to_string(), y.into_data()),
        ("dx".to_string(), x.grad(&grads).expect("dx").into_data()),
    ];
    for (i, layer) in encoder.layers.iter().enumerate() {
        for (name, norm) in [("norm_1", &layer.norm_1), ("norm_2", &layer.norm_2)] {
            out.push((
                format!("layer {i} {name} dgamma"),
                norm.gamma.grad(&grads).expect("dgamma").into_data(),
            ));
            let beta = norm.beta.as_ref().expect("beta");
            out.push((
                format!("layer {i} {name} dbeta"),
                beta.grad(&grads).expect("dbeta").into_data(),
            ));
        }
        out.push((
            format!("layer {i} query weight"),
            layer
                .mha
                .query
                .weight
                .grad(&grads)
                .expect("dW_q")
                .into_data(),
        ));
    }
    out
}

#[test]
#[serial]
fn transformer_encoder_runs_one_native_layer_norm_per_norm_and_matches_composed() {
    for norm_first in [false, true] {
        let config = TransformerEncoderConfig::new(16, 32, 2, 2)
            .with_dropout(0.0)
            .with_norm_first(norm_first);
        let native = same_weights(
            config.init::<Native>(&device()),
            config.init::<Native>(&device()),
            &device(),
        );
        let composed = same_weights(
            native.clone(),
            config.init::<Composed>(&device()),
            &device(),
        );
        let norms = 2 * config.n_layers;

        let (ours, calls) = count_native(|| encoder_step(&native));
        assert_eq!(
            calls,
            (norms, norms),
            "norm_first {norm_first}: one native forward and backward per LayerNorm"
        );
        let (reference, calls) = count_native(|| encoder_step(&composed));
        assert_eq!(calls, (0, 0));
        for ((name, a), (_, e)) in ours.into_iter().zip(reference) {
            assert_close(&format!("norm_first {norm_first}: {name}"), a, e, 1e-3);
        }
    }
}

#[derive(Module, Debug)]
struct Block<B: Backend> {
    input: Linear<B>,
    norm: LayerNorm<B>,
    output: Linear<B>,
}

impl<B: Backend> Block<B> {
    fn new(device: &B::Device) -> Self {
        Self {
            input: LinearConfig::new(24, 40).init(device),
            norm: LayerNormConfig::new(40).init(device),
            output: LinearConfig::new(40, 8).init(device),
        }
    }

    /// Linear -> LayerNorm -> Linear: the second matmul's backward needs the LayerNorm output,
    /// which `BalancedCheckpointing` recomputes (one more native forward) instead of keeping.
    fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        self.output
            .forward(self.norm.forward(self.input.forward(x)))
    }
}

fn block_grads<B: AutodiffBackend>(block: &Block<B>) -> Vec<TensorData> {
    let device = device_of(block);
    let x = uniform::<B, 2>(3, [6, 24], -2.0, 2.0, &device);
    let y = block.forward(x);
    let grads = (y.clone() * y).sum().backward();
    vec![
        block.input.weight.grad(&grads).expect("dW_in").into_data(),
        block.norm.gamma.grad(&grads).expect("dgamma").into_data(),
        block
            .output
            .weight
            .grad(&grads)
            .expect("dW_out")
            .into_data(),
    ]
}

#[test]
#[serial]
fn balanced_checkpointing_recomputes_the_layer_norm_node() {
    let kept = same_weights(
        Block::<Native>::new(&device()),
        Block::<Native>::new(&device()),
        &device(),
    );
    let balanced = same_weights(
        kept.clone(),
        Block::<NativeBalanced>::new(&device()),
        &device(),
    );

    let (reference, calls) = count_native(|| block_grads(&kept));
    assert_eq!(calls, (1, 1), "NoCheckpointing keeps the output");
    let (ours, calls) = count_native(|| block_grads(&balanced));
    assert_eq!(
        calls,
        (2, 1),
        "BalancedCheckpointing recomputes the LayerNorm output for the next matmul's backward"
    );
    for (name, (a, e)) in ["dW_in", "dgamma", "dW_out"]
        .into_iter()
        .zip(ours.into_iter().zip(reference))
    {
        assert_close(name, a, e, 1e-5);
    }
}

#[test]
#[serial]
fn runtime_without_native_layer_norm_falls_back_under_both_decorators() {
    type Plain = Ruda<ruda_tests::plain_runtime::PlainWgpu>;
    let native = LayerNormConfig::new(37).init::<Native>(&device());
    let (reference, _) = count_native(|| layer_norm_step(&native, 21));

    let ours = same_weights(
        native.clone(),
        LayerNormConfig::new(37).init::<burn_ruda::Autodiff<Plain>>(&device()),
        &device(),
    );
    let (fallback, calls) = count_native(|| layer_norm_step(&ours, 21));
    assert_eq!(
        calls,
        (0, 0),
        "burn_ruda::Autodiff: composed on a plain runtime"
    );
    for (name, (a, e)) in ["y", "dx", "dgamma", "dbeta"]
        .into_iter()
        .zip(fallback.into_iter().zip(reference.iter().cloned()))
    {
        assert_close(&format!("burn_ruda::Autodiff fallback {name}"), a, e, 1e-4);
    }

    let burns = same_weights(
        native,
        LayerNormConfig::new(37).init::<burn::backend::Autodiff<Plain>>(&device()),
        &device(),
    );
    let (fallback, calls) = count_native(|| layer_norm_step(&burns, 21));
    assert_eq!(
        calls,
        (0, 0),
        "burn::backend::Autodiff: composed on a plain runtime"
    );
    for (name, (a, e)) in ["y", "dx", "dgamma", "dbeta"]
        .into_iter()
        .zip(fallback.into_iter().zip(reference))
    {
        assert_close(&format!("burn Autodiff fallback {name}"), a, e, 1e-4);
    }
}
