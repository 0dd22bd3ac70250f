//! The soak run: a small transformer trained for many steps through
//! `burn_ruda::Autodiff<Ruda<R>>` (native LayerNorm, softmax, embedding gradient; cuBLAS
//! products on CUDA), sampling every `every` steps the device memory CubeCL holds and the size
//! of the cache directory, so that a leak (memory or disk growing with the steps) shows as a
//! slope. The lavapipe test (`tests/tests/soak.rs`) runs a few hundred steps in CI; the GPU
//! suite (`gpu_suite --soak STEPS`) runs thousands on CUDA and prints the curve.
//!
//! Each step uploads a fresh random batch (the data loader's allocations), runs forward,
//! cross-entropy, backward and Adam, and drops everything but the model and the optimizer.

use std::path::Path;
use std::time::Instant;

use burn::module::{AutodiffModule, Module};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::transformer::{
    TransformerEncoder, TransformerEncoderConfig, TransformerEncoderInput,
};
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use burn_ruda::{Ruda, RudaRuntime};

/// The soak model's sizes and the run's length.
#[derive(Clone, Copy, Debug)]
pub struct SoakConfig {
    /// Training steps.
    pub steps: usize,
    /// A sample every this many steps (and one after the first step).
    pub every: usize,
    /// Steps before which growth is allowed (compilation, tuning, the memory pool's pages).
    pub warmup: usize,
    /// Vocabulary.
    pub vocab: usize,
    /// Width of the residual stream.
    pub d_model: usize,
    /// Encoder layers.
    pub layers: usize,
    /// Attention heads.
    pub heads: usize,
    /// Tokens per sequence.
    pub seq: usize,
    /// Sequences per step.
    pub batch: usize,
}

impl SoakConfig {
    /// A few hundred steps of a tiny model: lavapipe, in CI.
    pub const CI: SoakConfig = SoakConfig {
        steps: 240,
        every: 20,
        warmup: 60,
        vocab: 76,
        d_model: 32,
        layers: 2,
        heads: 4,
        seq: 16,
        batch: 4,
    };

    /// A GPU run's model: still small, so that ten thousand steps take minutes.
    pub fn gpu(steps: usize) -> SoakConfig {
        SoakConfig {
            steps,
            every: (steps / 50).max(1),
            warmup: (steps / 10).max(1),
            vocab: 76,
            d_model: 128,
            layers: 2,
            heads: 4,
            seq: 64,
            batch: 16,
        }
    }
}

/// One sample of the run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Steps done.
    pub step: usize,
    /// Bytes CubeCL's allocations hold (`MemoryUsage::bytes_in_use`).
    pub bytes_in_use: u64,
    /// Bytes CubeCL's memory pool has reserved on the device.
    pub bytes_reserved: u64,
    /// Bytes of every file under the cache root.
    pub cache_bytes: u64,
    /// Mean wall time of a step since the previous sample.
    pub ms_per_step: f64,
    /// The last step's loss.
    pub loss: f32,
}

impl Sample {
    /// The header of [`Sample::line`].
    pub const HEADER: &'static str =
        "step\tbytes_in_use\tbytes_reserved\tcache_bytes\tms_per_step\tloss";

    /// A tab-separated line.
    pub fn line(&self) -> String {
        format!(
            "{}\t{}\t{}\t{}\t{:.3}\t{:.4}",
            self.step,
            self.bytes_in_use,
            self.bytes_reserved,
            self.cache_bytes,
            self.ms_per_step,
            self.loss
        )
    }
}

/// The soak model: token and position embeddings, a pre-norm `TransformerEncoder` (dropout
/// 0.1), a final LayerNorm and a linear head.
#[derive(Module, Debug)]
struct SoakLm<B: Backend> {
    tokens: Embedding<B>,
    positions: Embedding<B>,
    encoder: TransformerEncoder<B>,
    norm: LayerNorm<B>,
    head: Linear<B>,
}

impl<B: Backend> SoakLm<B> {
    fn new(c: &SoakConfig, device: &B::Device) -> Self {
        SoakLm {
            tokens: EmbeddingConfig::new(c.vocab, c.d_model).init(device),
            positions: EmbeddingConfig::new(c.seq, c.d_model).init(device),
            encoder: TransformerEncoderConfig::new(c.d_model, 4 * c.d_model, c.heads, c.layers)
                .with_norm_first(true)
                .with_dropout(0.1)
                .init(device),
            norm: LayerNormConfig::new(c.d_model).init(device),
            head: LinearConfig::new(c.d_model, c.vocab).init(device),
        }
    }

    fn loss(&self, tokens: Tensor<B, 2, Int>, targets: Tensor<B, 1, Int>) -> Tensor<B, 1> {
        let [batch, seq] = tokens.dims();
        let device = tokens.device();
        let positions = Tensor::<B, 1, Int>::arange(0..seq as i64, &device)
            .reshape([1, seq])
            .repeat_dim(0, batch);
        let x = self.tokens.forward(tokens) + self.positions.forward(positions);
        let mask = burn::nn::attention::generate_autoregressive_mask::<B>(batch, seq, &device);
        let x = self
            .encoder
            .forward(TransformerEncoderInput::new(x).mask_attn(mask));
        let logits = self.head.forward(self.norm.forward(x));
        let [b, s, v] = logits.dims();
        CrossEntropyLossConfig::new()
            .init(&device)
            .forward(logits.reshape([b * s, v]), targets)
    }
}

/// Bytes of every file under `dir` (0 if it does not exist).
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => dir_bytes(&entry.path()),
            Ok(meta) => meta.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Trains the soak model on `burn_ruda::Autodiff<Ruda<R>>` for `config.steps` steps and
/// returns the samples; `progress` is called with each one as it is taken.
pub fn run<R: RudaRuntime>(
    device: &R::Device,
    config: SoakConfig,
    mut progress: impl FnMut(&Sample),
) -> Vec<Sample> {
    type Ad<R> = burn_ruda::Autodiff<Ruda<R>>;
    let client = R::client(device);
    let cache_root = ruda_runtime::autotune::settings::cache_root();
    <Ad<R> as Backend>::seed(device, 0x50a4);
    let mut model = SoakLm::<Ad<R>>::new(&config, device);
    let mut optimizer = AdamConfig::new().init::<Ad<R>, SoakLm<Ad<R>>>();
    let mut rng = crate::layer_norm_checks::Rng(0x50a4);
    let mut samples = Vec::new();
    let mut since = Instant::now();
    let mut steps_since = 0;
    for step in 1..=config.steps {
        let n = config.batch * config.seq;
        let ids = |rng: &mut crate::layer_norm_checks::Rng| -> Vec<i64> {
            (0..n)
                .map(|_| (rng.next_u64() % config.vocab as u64) as i64)
                .collect()
        };
        let tokens = Tensor::<Ad<R>, 2, Int>::from_data(
            TensorData::new(ids(&mut rng), [config.batch, config.seq]),
            device,
        );
        let targets =
            Tensor::<Ad<R>, 1, Int>::from_data(TensorData::new(ids(&mut rng), [n]), device);
        let loss = model.loss(tokens, targets);
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optimizer.step(1e-3, model, grads);
        steps_since += 1;
        if step == 1 || step % config.every == 0 || step == config.steps {
            let loss: f32 = loss
                .into_data()
                .convert::<f32>()
                .to_vec::<f32>()
                .expect("the loss reads back")[0];
            <Ad<R> as Backend>::sync(device).expect("device sync");
            let usage = client.memory_usage().expect("CubeCL's memory usage");
            let sample = Sample {
                step,
                bytes_in_use: usage.bytes_in_use,
                bytes_reserved: usage.bytes_reserved,
                cache_bytes: dir_bytes(&cache_root),
                ms_per_step: since.elapsed().as_secs_f64() * 1e3 / steps_since as f64,
                loss,
            };
            progress(&sample);
            samples.push(sample);
            since = Instant::now();
            steps_since = 0;
        }
    }
    // The model is used to the end: its parameters stay alive through every sample.
    drop(model.valid());
    samples
}

/// Checks that nothing grows after `warmup` steps: the memory in use and reserved stay within
/// 10% (and 1 MiB) of their highest value at the end of the warm-up, and the cache directory
/// within 4 KiB of its size then. A bound, not a snapshot: allocations move between samples.
pub fn check_flat(samples: &[Sample], warmup: usize) -> Result<(), String> {
    let base = samples
        .iter()
        .filter(|s| s.step <= warmup)
        .fold(None::<Sample>, |acc, s| {
            Some(match acc {
                None => *s,
                Some(a) => Sample {
                    bytes_in_use: a.bytes_in_use.max(s.bytes_in_use),
                    bytes_reserved: a.bytes_reserved.max(s.bytes_reserved),
                    cache_bytes: a.cache_bytes.max(s.cache_bytes),
                    ..*s
                },
            })
        })
        .ok_or("no sample in the warm-up")?;
    let bound = |value: u64| value + value / 10 + (1 << 20);
    let mut problems = Vec::new();
    for s in samples.iter().filter(|s| s.step > warmup) {
        if s.bytes_in_use > bound(base.bytes_in_use) {
            problems.push(format!(
                "step {}: {} bytes in use, more than 110% of the warm-up's {}",
                s.step, s.bytes_in_use, base.bytes_in_use
            ));
        }
        if s.bytes_reserved > bound(base.bytes_reserved) {
            problems.push(format!(
                "step {}: {} bytes reserved, more than 110% of the warm-up's {}",
                s.step, s.bytes_reserved, base.bytes_reserved
            ));
        }
        if s.cache_bytes > base.cache_bytes + 4096 {
            problems.push(format!(
                "step {}: the cache directory holds {} bytes, {} more than after the warm-up",
                s.step,
                s.cache_bytes,
                s.cache_bytes - base.cache_bytes
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}
