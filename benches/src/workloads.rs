//! The work every contender runs: LayerNorm at the kernel level and through Burn, a transformer
//! training step and an MNIST training step. [`prepare`] builds one synchronized call of a
//! workload on a contender, so that criterion and the GPU suite time exactly the same thing.

use burn::module::AutodiffModule;
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Distribution, Int, Tensor, bf16};
use ruda_runtime::Runtime;
use ruda_runtime::prelude::DType;
use std::sync::atomic::{AtomicBool, Ordering};

use burn_ruda::BackwardWithGrad;
use burn_ruda::ops::AdamBackend;

use crate::contenders::Contender;
use crate::layer_norm::{Case, EPSILON, Inputs, Pass, layer_norm_call};
use crate::timing::Call;
use mnist::data::MnistBatch;
use mnist::model::{IMAGE_SIZE, MnistModel, MnistModelConfig, NUM_CLASSES};
use transformer::data::CharLmBatch;
use transformer::model::{CharLm, CharLmConfig};

/// Sizes of the transformer training step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransformerSize {
    /// Pre-norm encoder layers.
    pub layers: usize,
    /// Width of the residual stream.
    pub d_model: usize,
    /// Attention heads.
    pub heads: usize,
    /// Characters per window.
    pub seq_len: usize,
    /// Windows per step.
    pub batch: usize,
    /// Vocabulary (the shipped Shakespeare text has 76 distinct characters).
    pub vocab: usize,
    /// Dropout probability in percent (the model's attention scores, residual paths and
    /// feed-forward layers): 10 is the example's 0.1, 0 removes dropout from the step.
    pub dropout_percent: u32,
}

impl TransformerSize {
    /// The benchmarked step (`docs/perf/training-step.md`): 6 layers, d_model 512, 8 heads,
    /// d_ff 2048, seq 256, batch 32, dropout 0.1 (the example's model).
    pub const DESIGN: TransformerSize = TransformerSize {
        layers: 6,
        d_model: 512,
        heads: 8,
        seq_len: 256,
        batch: 32,
        vocab: 76,
        dropout_percent: 10,
    };
    /// A step small enough for a CPU adapter in a CI smoke run.
    pub const QUICK: TransformerSize = TransformerSize {
        layers: 2,
        d_model: 64,
        heads: 4,
        seq_len: 32,
        batch: 4,
        vocab: 76,
        dropout_percent: 10,
    };

    /// Tokens per step.
    pub fn tokens(&self) -> usize {
        self.seq_len * self.batch
    }

    /// The same size with dropout `percent` %.
    pub fn with_dropout_percent(self, percent: u32) -> Self {
        Self {
            dropout_percent: percent,
            ..self
        }
    }

    /// The dropout probability.
    pub fn dropout(&self) -> f64 {
        f64::from(self.dropout_percent) / 100.0
    }
}

/// One unit of benchmarked work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// ruda's native LayerNorm kernels through the runtime, no Burn (f32; `dy = 1`): only for
    /// ruda's contenders. Burn's backends have no LayerNorm kernel; their LayerNorm is
    /// [`Workload::LayerNormBurn`].
    LayerNormKernel { rows: usize, d: usize, pass: Pass },
    /// `burn::nn::LayerNorm` (f32) on `[rows, d]` under the contender's autodiff backend:
    /// Burn's composed ops under `burn::backend::Autodiff`, the native node under
    /// `burn_ruda::Autodiff`.
    LayerNormBurn { rows: usize, d: usize, pass: Pass },
    /// One Adam step of the character-level transformer of `examples/transformer.rs` on a
    /// random batch: forward, loss, backward, optimizer update.
    TransformerStep(TransformerSize),
    /// One Adam step of the CNN of `examples/mnist.rs` on a random batch of `batch` digits.
    MnistStep { batch: usize },
}

impl Workload {
    /// The benchmark group: `layer_norm_kernel`, `layer_norm_burn`, `transformer_step` or
    /// `mnist_step`.
    pub fn group(&self) -> &'static str {
        match self {
            Workload::LayerNormKernel { .. } => "layer_norm_kernel",
            Workload::LayerNormBurn { .. } => "layer_norm_burn",
            Workload::TransformerStep(_) => "transformer_step",
            Workload::MnistStep { .. } => "mnist_step",
        }
    }

    /// The case within the group, e.g. `16384x1024/fwdbwd`, `L6-d512-h8-s256-b32`, `b32`.
    pub fn case(&self) -> String {
        match self {
            Workload::LayerNormKernel { rows, d, pass }
            | Workload::LayerNormBurn { rows, d, pass } => {
                format!("{rows}x{d}/{}", pass.name())
            }
            Workload::TransformerStep(s) => {
                let base = format!(
                    "L{}-d{}-h{}-s{}-b{}",
                    s.layers, s.d_model, s.heads, s.seq_len, s.batch
                );
                // The example's dropout (0.1) keeps the name earlier results used.
                match s.dropout_percent {
                    10 => base,
                    p => format!("{base}-dropout{}", f64::from(p) / 100.0),
                }
            }
            Workload::MnistStep { batch } => format!("b{batch}"),
        }
    }

    /// Whether `contender` runs this workload (the kernel level is ruda's alone; the bf16
    /// contenders run the transformer step only).
    pub fn applies_to(&self, contender: &Contender) -> bool {
        match self {
            _ if contender.is_bf16() => matches!(self, Workload::TransformerStep(_)),
            Workload::LayerNormKernel { .. } => contender.is_ruda(),
            _ => true,
        }
    }

    /// Work per call, in the unit of [`Workload::throughput_unit`]: bytes moved for LayerNorm
    /// (f32; all the LayerNorm calls of a back-to-back sample), tokens for the transformer,
    /// images for MNIST.
    pub fn work_per_call(&self) -> u64 {
        match self {
            Workload::LayerNormKernel { rows, d, pass }
            | Workload::LayerNormBurn { rows, d, pass } => {
                (rows * d * pass.elements_moved() * pass.calls() * 4) as u64
            }
            Workload::TransformerStep(s) => s.tokens() as u64,
            Workload::MnistStep { batch } => *batch as u64,
        }
    }

    /// The unit of the throughput column: `GB/s` (effective bandwidth), `tokens/s`, `images/s`.
    pub fn throughput_unit(&self) -> &'static str {
        match self {
            Workload::LayerNormKernel { .. } | Workload::LayerNormBurn { .. } => "GB/s",
            Workload::TransformerStep(_) => "tokens/s",
            Workload::MnistStep { .. } => "images/s",
        }
    }

    /// Throughput of a call that took `us` microseconds.
    pub fn throughput(&self, us: f64) -> f64 {
        let per_second = self.work_per_call() as f64 / (us * 1e-6);
        match self {
            Workload::LayerNormKernel { .. } | Workload::LayerNormBurn { .. } => per_second / 1e9,
            _ => per_second,
        }
    }
}

/// Builds `workload` on `contender` (model, optimizer, inputs; nothing is run yet) and returns
/// its call; `None` when the workload does not apply ([`Workload::applies_to`]).
pub fn prepare(contender: &Contender, workload: Workload) -> Option<Call> {
    use burn::backend::{Autodiff as BurnAutodiff, NdArray, Wgpu};
    if !workload.applies_to(contender) {
        return None;
    }
    Some(match contender {
        #[cfg(feature = "cuda")]
        Contender::RudaCuda => match workload {
            Workload::LayerNormKernel { rows, d, pass } => {
                native_layer_norm::<ruda_runtime::RudaCuda>(Default::default(), rows, d, pass)
            }
            _ => autodiff_call::<
                burn_ruda::Autodiff<burn_ruda::Ruda<ruda_runtime::RudaCuda>>,
                RudaAdams,
            >(Default::default(), workload),
        },
        #[cfg(feature = "cuda")]
        Contender::RudaCudaComposed => autodiff_call::<
            BurnAutodiff<burn_ruda::Ruda<ruda_runtime::RudaCuda>>,
            BurnAdams,
        >(Default::default(), workload),
        #[cfg(feature = "cuda")]
        Contender::RudaCudaBf16 => bf16_step::<
            burn_ruda::Autodiff<burn_ruda::Ruda<ruda_runtime::RudaCuda, bf16>>,
            RudaAdams,
        >(Default::default(), workload),
        #[cfg(not(feature = "cuda"))]
        Contender::RudaCuda | Contender::RudaCudaComposed | Contender::RudaCudaBf16 => {
            panic!("{}: built without the `cuda` feature", contender.name())
        }
        Contender::BurnCudaBf16 => bf16_step::<BurnAutodiff<burn::backend::Cuda<bf16>>, BurnAdams>(
            Default::default(),
            workload,
        ),
        Contender::BurnCuda => autodiff_call::<BurnAutodiff<burn::backend::Cuda>, BurnAdams>(
            Default::default(),
            workload,
        ),
        Contender::RudaWgpu(device) => match workload {
            Workload::LayerNormKernel { rows, d, pass } => {
                native_layer_norm::<ruda_runtime::RudaWgpu>(device.clone(), rows, d, pass)
            }
            _ => autodiff_call::<
                burn_ruda::Autodiff<burn_ruda::Ruda<ruda_runtime::RudaWgpu>>,
                RudaAdams,
            >(device.clone(), workload),
        },
        Contender::BurnWgpu(device) => {
            autodiff_call::<BurnAutodiff<Wgpu>, BurnAdams>(device.clone(), workload)
        }
        Contender::NdArray => {
            autodiff_call::<BurnAutodiff<NdArray>, BurnAdams>(Default::default(), workload)
        }
    })
}

/// ruda's default (autotuned) LayerNorm kernels on runtime `R`: forward, or forward then
/// backward with `dy = 1`, then a device sync.
fn native_layer_norm<R: Runtime>(device: R::Device, rows: usize, d: usize, pass: Pass) -> Call {
    let client = R::client(&device);
    let case = Case {
        rows,
        d,
        dtype: DType::F32,
    };
    let Inputs { x, gamma, beta, dy } = Inputs::new(&client, case);
    Box::new(move || {
        for _ in 0..pass.calls() {
            let [out, mean, rstd] = R::layer_norm(
                &client,
                x.clone(),
                gamma.clone(),
                Some(beta.clone()),
                EPSILON,
            );
            drop(out);
            if pass != Pass::Forward {
                let grads = R::layer_norm_backward(
                    &client,
                    x.clone(),
                    gamma.clone(),
                    dy.clone(),
                    mean,
                    rstd,
                );
                drop(grads);
            }
        }
        cubecl::future::block_on(client.sync()).expect("device sync failed");
    })
}

/// A workload through Burn under the autodiff backend `B`.
fn autodiff_call<B: BackwardWithGrad, A: Adams<B>>(device: B::Device, workload: Workload) -> Call {
    B::seed(&device, 42);
    match workload {
        Workload::LayerNormBurn { rows, d, pass } => layer_norm_call::<B>(device, rows, d, pass),
        Workload::TransformerStep(size) => transformer_step::<B, A>(device, size),
        Workload::MnistStep { batch } => mnist_step::<B, A>(device, batch),
        Workload::LayerNormKernel { .. } => {
            unreachable!("the kernel-level workload runs on ruda's runtimes, not through Burn")
        }
    }
}

/// The transformer step of a bf16 contender (the only workload they run: see
/// [`Workload::applies_to`]), without instantiating the other workloads for bf16.
fn bf16_step<B: AutodiffBackend, A: Adams<B>>(device: B::Device, workload: Workload) -> Call {
    B::seed(&device, 42);
    match workload {
        Workload::TransformerStep(size) => transformer_step::<B, A>(device, size),
        other => unreachable!("bf16 contenders run the transformer step only, not {other:?}"),
    }
}

/// Adam's learning rate in the step benchmarks (small: the benchmarks take many steps on one
/// random batch, and the time of a step does not depend on it).
const STEP_LEARNING_RATE: f64 = 1e-4;

fn transformer_step<B: AutodiffBackend, A: Adams<B>>(
    device: B::Device,
    size: TransformerSize,
) -> Call {
    let model = CharLmConfig::new(size.vocab, size.seq_len)
        .with_d_model(size.d_model)
        .with_n_heads(size.heads)
        .with_n_layers(size.layers)
        .with_d_ff(4 * size.d_model)
        .with_dropout(size.dropout())
        .init::<B>(&device);
    let tokens = || {
        Tensor::<B, 2, Int>::random(
            [size.batch, size.seq_len],
            Distribution::Uniform(0.0, size.vocab as f64),
            &device,
        )
    };
    let batch = CharLmBatch {
        inputs: tokens(),
        targets: tokens(),
    };
    adam_step(device, model, A::optimizer(), move |m: &CharLm<B>| {
        m.forward_loss(batch.clone()).loss
    })
}

fn mnist_step<B: AutodiffBackend, A: Adams<B>>(device: B::Device, batch_size: usize) -> Call {
    let model = MnistModelConfig::new().init::<B>(&device);
    let batch = MnistBatch {
        images: Tensor::<B, 3>::random(
            [batch_size, IMAGE_SIZE, IMAGE_SIZE],
            Distribution::Normal(0.0, 1.0),
            &device,
        ),
        targets: Tensor::<B, 1, Int>::random(
            [batch_size],
            Distribution::Uniform(0.0, NUM_CLASSES as f64),
            &device,
        ),
    };
    adam_step(device, model, A::optimizer(), move |m: &MnistModel<B>| {
        m.forward_classification(batch.clone()).loss
    })
}

/// Whether each step of [`Workload::TransformerStep`] and [`Workload::MnistStep`] ends with a
/// device sync (the default, `docs/perf/README.md`'s method: a step's time is its latency).
/// Off, steps queue back to back and the caller syncs by turning it on for the last step of a
/// window: the step's time when the host runs ahead, as in a training loop that does not read
/// every loss at once.
static SYNC_EVERY_STEP: AtomicBool = AtomicBool::new(true);

/// Sets whether the training-step calls end with a device sync ([`SYNC_EVERY_STEP`]).
pub fn set_sync_every_step(sync: bool) {
    SYNC_EVERY_STEP.store(sync, Ordering::SeqCst);
}

/// One optimizer step of a training-step workload: `(learning rate, module, gradients)` to
/// the updated module.
type OptimizerStep<M> = Box<dyn FnMut(f64, M, GradientsParams) -> M>;

/// Which Adam the training steps of ruda's contenders run (`RUDA_BENCH_ADAM`): ruda's
/// (`burn_ruda::optim::AdamOptimizer`, one native operation a step; the default), ruda's
/// update one parameter at a time (`burn_ruda::optim::Adam` in Burn's `OptimizerAdaptor`, one
/// native operation a parameter) or Burn's (`burn::optim::Adam`, about a dozen tensor
/// operations a parameter). Burn's contenders and `ruda-cuda-composed` always run Burn's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdamChoice {
    /// `burn_ruda::optim::AdamOptimizer` (`ruda`).
    Ruda,
    /// `burn_ruda::optim::Adam` in `OptimizerAdaptor` (`ruda-each`).
    RudaEach,
    /// `burn::optim::Adam` (`burn`).
    Burn,
}

impl AdamChoice {
    /// The choice `RUDA_BENCH_ADAM` makes for ruda's contenders.
    ///
    /// # Panics
    /// When it is set to anything but `ruda`, `ruda-each` or `burn`.
    pub fn for_ruda() -> Self {
        match std::env::var("RUDA_BENCH_ADAM").as_deref() {
            Err(_) | Ok("ruda") => AdamChoice::Ruda,
            Ok("ruda-each") => AdamChoice::RudaEach,
            Ok("burn") => AdamChoice::Burn,
            Ok(other) => panic!("RUDA_BENCH_ADAM: `ruda`, `ruda-each` or `burn`, got {other:?}"),
        }
    }

    /// `ruda`, `ruda-each` or `burn`, as the step's report names it.
    pub fn name(self) -> &'static str {
        match self {
            AdamChoice::Ruda => "ruda",
            AdamChoice::RudaEach => "ruda-each",
            AdamChoice::Burn => "burn",
        }
    }
}

/// The Adam a contender's training steps run on backend `B`.
trait Adams<B: AutodiffBackend> {
    fn optimizer<M: AutodiffModule<B> + 'static>() -> OptimizerStep<M>;
}

/// Burn's Adam, on any backend.
struct BurnAdams;

impl<B: AutodiffBackend> Adams<B> for BurnAdams {
    fn optimizer<M: AutodiffModule<B> + 'static>() -> OptimizerStep<M> {
        let mut optimizer = AdamConfig::new().init::<B, M>();
        Box::new(move |lr, module, grads| optimizer.step(lr, module, grads))
    }
}

/// [`AdamChoice::for_ruda`], on a backend whose inner backend has the native update.
struct RudaAdams;

impl<B: AutodiffBackend> Adams<B> for RudaAdams
where
    B::InnerBackend: AdamBackend,
{
    fn optimizer<M: AutodiffModule<B> + 'static>() -> OptimizerStep<M> {
        match AdamChoice::for_ruda() {
            AdamChoice::Burn => <BurnAdams as Adams<B>>::optimizer(),
            AdamChoice::Ruda => {
                let mut optimizer = burn_ruda::optim::AdamConfig::new().init::<B, M>();
                Box::new(move |lr, module, grads| optimizer.step(lr, module, grads))
            }
            AdamChoice::RudaEach => {
                let mut optimizer =
                    OptimizerAdaptor::<_, M, B>::from(burn_ruda::optim::AdamConfig::new().build());
                Box::new(move |lr, module, grads| optimizer.step(lr, module, grads))
            }
        }
    }
}

/// One step of `model` with `optimizer` on the loss `loss` computes, then a device sync (unless
/// [`set_sync_every_step`] turned it off).
fn adam_step<B: AutodiffBackend, M: AutodiffModule<B> + 'static>(
    device: B::Device,
    model: M,
    mut optimizer: OptimizerStep<M>,
    loss: impl Fn(&M) -> Tensor<B, 1> + 'static,
) -> Call {
    let mut model = Some(model);
    Box::new(move || {
        let current = model
            .take()
            .expect("the model is put back after every step");
        let grads = GradientsParams::from_grads(loss(&current).backward(), &current);
        model = Some(optimizer(STEP_LEARNING_RATE, current, grads));
        if SYNC_EVERY_STEP.load(Ordering::SeqCst) {
            B::sync(&device).expect("device sync failed");
        }
    })
}
