//! `burn_ruda::optim::Adam` through Burn, on Mesa's CPU Vulkan driver: a small model trained
//! for a few steps under `burn_ruda::Autodiff<Ruda>` takes the same weights as Burn's own Adam
//! on NdArray from the same start (default options, weight decay with AMSGrad, gradient
//! clipping), with one native operation and one kernel a step for the six parameters (an
//! operation and a kernel a parameter through Burn's `OptimizerAdaptor`), and its optimizer
//! record loads into Burn's Adam and back (the same state records).

use burn::module::{AutodiffModule, Module};
use burn::nn::{LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::grad_clipping::GradientClippingConfig;
use burn::optim::{GradientsParams, Optimizer};
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Tensor, TensorData};
use burn_ruda::optim::AdamConfig;
use burn_ruda::{Ruda, RudaWgpu};
use cubecl::Runtime as _;
use cubecl::wgpu::WgpuDevice;
use serial_test::serial;

type Native = burn_ruda::Autodiff<Ruda<RudaWgpu>>;
type Reference = burn::backend::Autodiff<burn::backend::NdArray>;

/// Linear, LayerNorm, Linear: six parameters of three shapes.
#[derive(Module, Debug)]
struct Net<B: Backend> {
    first: Linear<B>,
    norm: LayerNorm<B>,
    second: Linear<B>,
}

impl<B: Backend> Net<B> {
    fn new(device: &B::Device) -> Self {
        Self {
            first: LinearConfig::new(8, 16).init(device),
            norm: LayerNormConfig::new(16).init(device),
            second: LinearConfig::new(16, 4).init(device),
        }
    }

    fn loss(&self, x: Tensor<B, 2>) -> Tensor<B, 1> {
        let y = self
            .second
            .forward(self.norm.forward(self.first.forward(x)));
        (y.clone() * y).mean()
    }
}

/// A deterministic `[rows, cols]` input in `[-1, 1)`.
fn input<B: Backend>(step: usize, device: &B::Device) -> Tensor<B, 2> {
    let values: Vec<f32> = (0..32 * 8)
        .map(|i| (((i * 37 + step * 11) % 101) as f32 / 50.5) - 1.0)
        .collect();
    Tensor::from_data(TensorData::new(values, [32, 8]), device)
}

/// The module's weights as a record's bytes, loadable on any backend.
fn weights<B: Backend>(net: Net<B>) -> Vec<u8> {
    BinBytesRecorder::<FullPrecisionSettings>::default()
        .record(net.into_record(), ())
        .expect("record the weights")
}

fn load<B: Backend>(bytes: Vec<u8>, device: &B::Device) -> Net<B> {
    let record = BinBytesRecorder::<FullPrecisionSettings>::default()
        .load(bytes, device)
        .expect("load the weights");
    Net::new(device).load_record(record)
}

/// `steps` optimizer steps of `net` with `optimizer`; the weights after each.
fn train<B: AutodiffBackend, O: Optimizer<Net<B>, B>>(
    mut net: Net<B>,
    optimizer: &mut O,
    steps: std::ops::Range<usize>,
) -> (Net<B>, Vec<Vec<TensorData>>) {
    let device = net.devices()[0].clone();
    let mut history = Vec::new();
    for step in steps {
        let grads = GradientsParams::from_grads(net.loss(input(step, &device)).backward(), &net);
        net = optimizer.step(1e-2, net, grads);
        history.push(params(&net));
    }
    (net, history)
}

fn params<B: AutodiffBackend>(net: &Net<B>) -> Vec<TensorData> {
    let net = net.valid();
    let mut out = vec![
        net.first.weight.val().into_data(),
        net.norm.gamma.val().into_data(),
        net.second.weight.val().into_data(),
    ];
    out.extend(net.first.bias.as_ref().map(|b| b.val().into_data()));
    out.extend(net.norm.beta.as_ref().map(|b| b.val().into_data()));
    out.extend(net.second.bias.as_ref().map(|b| b.val().into_data()));
    out
}

fn assert_same(what: &str, native: &[Vec<TensorData>], reference: &[Vec<TensorData>]) {
    assert_eq!(native.len(), reference.len(), "{what}: steps");
    for (step, (a, b)) in native.iter().zip(reference).enumerate() {
        for (p, (a, b)) in a.iter().zip(b).enumerate() {
            let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
            let scale = b.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                assert!(
                    (x - y).abs() <= 2e-4 * scale,
                    "{what}: step {step}, parameter {p}[{i}]: {x} vs Burn's {y}"
                );
            }
        }
    }
}

/// Trains the same start with `config` on ruda and with Burn's `burn_config` on NdArray.
fn compare(what: &str, config: AdamConfig, burn_config: burn::optim::AdamConfig) {
    let start = weights(Net::<Reference>::new(&Default::default()));
    let device = WgpuDevice::Cpu;
    let before = (
        ruda_tests::launches::adam(),
        ruda_tests::launches::adam_operations(),
    );
    let per_kernel = ruda_runtime::adam::parameters_per_kernel(
        RudaWgpu::client(&device).properties().hardware.max_bindings,
        config.amsgrad,
    );
    let mut native_optim = config.init::<Native, Net<Native>>();
    let (_, native) = train(
        load::<Native>(start.clone(), &device),
        &mut native_optim,
        0..3,
    );
    assert_eq!(
        (
            ruda_tests::launches::adam() - before.0,
            ruda_tests::launches::adam_operations() - before.1
        ),
        (3 * 6usize.div_ceil(per_kernel), 3),
        "{what}: one operation a step, its six parameters (one dtype, vectorized alike) \
         {per_kernel} a kernel"
    );
    let mut burn_optim = burn_config.init::<Reference, Net<Reference>>();
    let (_, reference) = train(
        load::<Reference>(start, &Default::default()),
        &mut burn_optim,
        0..3,
    );
    assert_same(what, &native, &reference);
}

#[test]
#[serial]
fn adam_matches_burns_adam() {
    compare(
        "default options",
        AdamConfig::new(),
        burn::optim::AdamConfig::new(),
    );
}

/// `burn_ruda::optim::Adam` as a `SimpleOptimizer` in Burn's `OptimizerAdaptor`: one operation
/// a parameter, the same weights as Burn's Adam, and a record the step-at-once optimizer loads.
#[test]
#[serial]
fn adam_one_parameter_at_a_time_matches_burns() {
    let start = weights(Net::<Reference>::new(&Default::default()));
    let device = WgpuDevice::Cpu;
    let config = AdamConfig::new()
        .with_amsgrad(true)
        .with_weight_decay(Some(WeightDecayConfig::new(0.05)));
    let before = (
        ruda_tests::launches::adam(),
        ruda_tests::launches::adam_operations(),
    );
    let mut each = OptimizerAdaptor::<_, Net<Native>, Native>::from(config.build());
    let (net, mut native) = train(load::<Native>(start.clone(), &device), &mut each, 0..2);
    assert_eq!(
        (
            ruda_tests::launches::adam() - before.0,
            ruda_tests::launches::adam_operations() - before.1
        ),
        (6 * 2, 6 * 2),
        "one operation a parameter and step"
    );
    // Its record, of the same type, carries the step-at-once optimizer on.
    let mut at_once = config
        .init::<Native, Net<Native>>()
        .load_record(each.to_record());
    native.extend(train(net, &mut at_once, 2..3).1);

    let mut burn_optim = burn::optim::AdamConfig::new()
        .with_amsgrad(true)
        .with_weight_decay(Some(WeightDecayConfig::new(0.05)))
        .init::<Reference, Net<Reference>>();
    let (_, reference) = train(
        load::<Reference>(start, &Default::default()),
        &mut burn_optim,
        0..3,
    );
    assert_same("one parameter at a time", &native, &reference);
}

#[test]
#[serial]
fn adam_with_weight_decay_and_amsgrad_matches_burns() {
    compare(
        "weight decay and AMSGrad",
        AdamConfig::new()
            .with_amsgrad(true)
            .with_beta_2(0.99)
            .with_weight_decay(Some(WeightDecayConfig::new(0.05))),
        burn::optim::AdamConfig::new()
            .with_amsgrad(true)
            .with_beta_2(0.99)
            .with_weight_decay(Some(WeightDecayConfig::new(0.05))),
    );
}

#[test]
#[serial]
fn adam_with_gradient_clipping_matches_burns() {
    compare(
        "gradient clipping",
        AdamConfig::new().with_grad_clipping(Some(GradientClippingConfig::Norm(0.05))),
        burn::optim::AdamConfig::new().with_grad_clipping(Some(GradientClippingConfig::Norm(0.05))),
    );
}

#[test]
#[serial]
fn adam_records_move_between_ruda_and_burn() {
    // Two steps with ruda's Adam, then its record (moments, step counts) into Burn's Adam on
    // NdArray for a third step; and the same start with Burn's Adam throughout.
    let start = weights(Net::<Reference>::new(&Default::default()));
    let device = WgpuDevice::Cpu;
    let mut native_optim = AdamConfig::new().init::<Native, Net<Native>>();
    let (native_net, _) = train(
        load::<Native>(start.clone(), &device),
        &mut native_optim,
        0..2,
    );
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    let optim_bytes = recorder
        .record(native_optim.to_record(), ())
        .expect("record ruda's optimizer");
    let mut handed_over = burn::optim::AdamConfig::new()
        .init::<Reference, Net<Reference>>()
        .load_record(
            recorder
                .load(optim_bytes, &Default::default())
                .expect("Burn's Adam loads ruda's record"),
        );
    let (_, after_handover) = train(
        load::<Reference>(weights(native_net.valid()), &Default::default()),
        &mut handed_over,
        2..3,
    );

    let mut burn_optim = burn::optim::AdamConfig::new().init::<Reference, Net<Reference>>();
    let (burn_net, _) = train(
        load::<Reference>(start, &Default::default()),
        &mut burn_optim,
        0..2,
    );
    let (burn_net, third) = train(burn_net, &mut burn_optim, 2..3);
    assert_same("Burn's Adam from ruda's record", &after_handover, &third);

    // And back: Burn's record of three steps into ruda's Adam for a fourth, against Burn's
    // fourth.
    let burn_bytes = recorder
        .record(burn_optim.to_record(), ())
        .expect("record Burn's optimizer");
    let mut taken_over = AdamConfig::new().init::<Native, Net<Native>>().load_record(
        recorder
            .load(burn_bytes, &device)
            .expect("ruda's Adam loads Burn's record"),
    );
    let (_, native_fourth) = train(
        load::<Native>(weights(burn_net.clone()), &device),
        &mut taken_over,
        3..4,
    );
    let (_, burn_fourth) = train(burn_net, &mut burn_optim, 3..4);
    assert_same(
        "ruda's Adam from Burn's record",
        &native_fourth,
        &burn_fourth,
    );
}

/// Two AMSGrad steps, one without AMSGrad, one with it again, each optimizer rebuilt from the
/// last one's record: ruda's Adam and Burn's take the same weights at every step. Burn's Adam
/// keeps a saved AMSGrad maximum through steps without AMSGrad; the fourth step depends on it.
#[test]
#[serial]
fn adam_switching_amsgrad_off_and_on_matches_burns() {
    let start = weights(Net::<Reference>::new(&Default::default()));
    // A short second-moment memory, so that the maximum often differs from the moment.
    let native = train_switching_amsgrad::<Native, _>(start.clone(), &WgpuDevice::Cpu, |on| {
        AdamConfig::new()
            .with_beta_2(0.9)
            .with_amsgrad(on)
            .init::<Native, Net<Native>>()
    });
    let reference = train_switching_amsgrad::<Reference, _>(start, &Default::default(), |on| {
        burn::optim::AdamConfig::new()
            .with_beta_2(0.9)
            .with_amsgrad(on)
            .init::<Reference, Net<Reference>>()
    });
    assert_same("AMSGrad off and on again", &native, &reference);
}

/// Two steps of the optimizer `optimizer(true)` from the weights `start`, then one with
/// `optimizer(false)` and one with `optimizer(true)`, each loading the last one's record: the
/// weights after every step.
fn train_switching_amsgrad<B: AutodiffBackend, O: Optimizer<Net<B>, B>>(
    start: Vec<u8>,
    device: &B::Device,
    optimizer: impl Fn(bool) -> O,
) -> Vec<Vec<TensorData>> {
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    let mut optim = optimizer(true);
    let (mut net, mut history) = train(load::<B>(start, device), &mut optim, 0..2);
    for (step, amsgrad) in [(2, false), (3, true)] {
        let bytes =
            Recorder::<B>::record(&recorder, optim.to_record(), ()).expect("record the optimizer");
        let record = Recorder::<B>::load(&recorder, bytes, device).expect("reload its record");
        optim = optimizer(amsgrad).load_record(record);
        let (next, weights) = train(net, &mut optim, step..step + 1);
        net = next;
        history.extend(weights);
    }
    history
}
