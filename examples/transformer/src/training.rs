//! Training the character language model with burn-train's `Learner` on any autodiff backend.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use burn::data::dataloader::DataLoaderBuilder;
use burn::data::dataset::Dataset;
use burn::data::dataset::transform::{SamplerDataset, SamplerDatasetOptions};
use burn::lr_scheduler::linear::LinearLrSchedulerConfig;
use burn::prelude::*;
use burn::train::metric::{AccuracyMetric, LossMetric};
use burn::train::{Learner, SupervisedTraining};

use crate::data::{CharLmBatcher, CharWindows, split_tokens};
use crate::model::{CharLm, CharLmConfig};
use crate::tokenizer::{CharTokenizer, unigram_entropy};
use example_common::backend::TrainingBackend;
use example_common::deferred_read::ReadsAtNextBatch;
use example_common::multi_device::{BatchSplit, execution_strategy};
use example_common::training_log::{LineRenderer, TrainingLog};

/// How to train: sizes, schedule, data, where the artifacts go.
#[derive(Clone, Debug)]
pub struct CharLmTraining {
    /// Context length of the training windows, in characters.
    pub seq_len: usize,
    /// Width of the residual stream.
    pub d_model: usize,
    /// Attention heads per layer.
    pub n_heads: usize,
    /// Transformer layers.
    pub n_layers: usize,
    /// Width of the feed-forward layers.
    pub d_ff: usize,
    /// Dropout probability.
    pub dropout: f64,
    /// Epochs.
    pub epochs: usize,
    /// Windows per step, over all training devices (each device trains on an equal share).
    pub batch_size: usize,
    /// Adam's learning rate at the first step; it decays linearly to a tenth of that at the
    /// last step.
    pub learning_rate: f64,
    /// Training windows per epoch, drawn at random without replacement (all of them when
    /// `None`).
    pub items_per_epoch: Option<usize>,
    /// Validation windows (the first ones of the validation split; all when `None`).
    pub valid_items: Option<usize>,
    /// Fraction of the text, at its end, held out for validation.
    pub valid_fraction: f64,
    /// Seed of the backend's generator (initialization, dropout) and of the sampling.
    pub seed: u64,
    /// Threads preparing batches.
    pub num_workers: usize,
    /// Where the learner writes its logs.
    pub artifact_dir: PathBuf,
    /// Print nothing (tests).
    pub quiet: bool,
}

impl Default for CharLmTraining {
    fn default() -> Self {
        Self {
            seq_len: 64,
            d_model: 64,
            n_heads: 4,
            n_layers: 2,
            d_ff: 256,
            dropout: 0.1,
            epochs: 3,
            batch_size: 32,
            learning_rate: 3e-3,
            items_per_epoch: Some(1600),
            valid_items: Some(512),
            valid_fraction: 0.1,
            seed: 42,
            num_workers: 2,
            artifact_dir: example_common::default_artifact_dir("transformer"),
            quiet: false,
        }
    }
}

/// The text prepared for training: tokenizer, splits, and the unigram baseline.
#[derive(Clone, Debug)]
pub struct PreparedText {
    /// The characters of the whole text.
    pub tokenizer: CharTokenizer,
    /// The training split's tokens.
    pub train: Vec<u32>,
    /// The validation split's tokens.
    pub valid: Vec<u32>,
    /// Entropy of the training split's character frequencies, in nats per character.
    pub unigram_entropy: f64,
}

impl PreparedText {
    /// Tokenizes `text` and holds out its last `valid_fraction` for validation.
    pub fn new(text: &str, valid_fraction: f64) -> Self {
        let tokenizer = CharTokenizer::from_text(text);
        let tokens = tokenizer.encode(text);
        let (train, valid) = split_tokens(&tokens, valid_fraction);
        let unigram_entropy = unigram_entropy(&train);
        Self {
            tokenizer,
            train,
            valid,
            unigram_entropy,
        }
    }
}

/// A trained model (on the inference backend), its sizes, and what the learner logged.
pub struct CharLmTrained<B: Backend> {
    /// The model after the last epoch.
    pub model: CharLm<B>,
    /// Its sizes.
    pub config: CharLmConfig,
    /// Per-epoch metrics and per-step losses.
    pub log: TrainingLog,
}

/// Trains on `text.train`, validating on `text.valid` after each epoch, with burn-train's
/// `Learner` (metrics: loss and accuracy; perplexity is `exp(loss)`) on `devices`: one device,
/// or several sharing each step's batch through burn-train's multi-device strategy
/// ([`example_common::multi_device`]). The model is initialized, validated and returned on the first
/// device.
///
/// Fails if the batch size is not a multiple of the number of devices; panics if `devices` is
/// empty.
pub fn train<B: TrainingBackend>(
    devices: &[B::Device],
    text: &PreparedText,
    config: &CharLmTraining,
) -> Result<CharLmTrained<B::InnerBackend>, String> {
    let split = BatchSplit::new(config.batch_size, devices.len()).map_err(|e| e.to_string())?;
    let strategy = execution_strategy::<B>(devices);
    let device = strategy.main_device().clone();
    for device in devices {
        B::seed(device, config.seed);
    }
    std::fs::create_dir_all(&config.artifact_dir).ok();
    for split in ["train", "valid"] {
        std::fs::remove_dir_all(config.artifact_dir.join(split)).ok();
    }

    let windows = CharWindows::new(text.train.clone(), config.seq_len);
    let items = config
        .items_per_epoch
        .unwrap_or(windows.len())
        .min(windows.len());
    let mut valid_tokens = text.valid.clone();
    if let Some(n) = config.valid_items {
        valid_tokens.truncate(n * config.seq_len + 1);
    }
    let valid = CharWindows::new(valid_tokens, config.seq_len);
    if items == 0 || valid.is_empty() {
        return Err(format!(
            "the text is too short: {} training and {} validation windows of {} characters",
            windows.len(),
            valid.len(),
            config.seq_len + 1
        ));
    }
    let train_set = SamplerDataset::new(
        windows,
        SamplerDatasetOptions::default()
            .without_replacement()
            .with_fixed_size(items)
            .with_seed(config.seed),
    );

    // burn-train gives each device a contiguous share of the training set, batched by this
    // loader's batch size. With one device the steps' outputs are read back when the loop asks
    // for its next batch (`example_common::deferred_read`).
    let loader_train = DataLoaderBuilder::<B, _, _>::new(CharLmBatcher)
        .batch_size(split.per_device)
        .num_workers(config.num_workers)
        .set_device(device.clone())
        .build(train_set);
    let loader_train = ReadsAtNextBatch::wrap(loader_train);
    let loader_valid = DataLoaderBuilder::<B::InnerBackend, _, _>::new(CharLmBatcher)
        .batch_size(config.batch_size)
        .num_workers(config.num_workers)
        .set_device(device.clone())
        .build(valid);

    let steps = config.epochs * items.div_ceil(config.batch_size);
    let lr = LinearLrSchedulerConfig::new(
        config.learning_rate,
        config.learning_rate / 10.0,
        steps.max(1),
    )
    .init()?;

    let model_config = CharLmConfig::new(text.tokenizer.vocab_size(), config.seq_len)
        .with_d_model(config.d_model)
        .with_n_heads(config.n_heads)
        .with_n_layers(config.n_layers)
        .with_d_ff(config.d_ff)
        .with_dropout(config.dropout);

    let log = Arc::new(Mutex::new(TrainingLog::default()));
    let mut training = SupervisedTraining::new(&config.artifact_dir, loader_train, loader_valid)
        .with_training_strategy(strategy.into())
        .metrics((AccuracyMetric::new(), LossMetric::new()))
        .num_epochs(config.epochs)
        .renderer(LineRenderer::new(log.clone(), config.quiet).with_devices(devices.len()));
    if config.quiet {
        training = training.with_application_logger(None);
    } else {
        // burn-train's default installer keeps every log call site of every crate live
        // (`example_common::app_log`): 5-10 ms a transformer step on an H100.
        let log_file = config.artifact_dir.join("experiment.log");
        training = training
            .with_application_logger(example_common::app_log::installer(log_file))
            .summary();
    }

    let model = model_config.init::<B>(&device);
    let result = training.launch(Learner::new(model, B::adam(), lr));
    let log = log.lock().unwrap().clone();
    Ok(CharLmTrained {
        model: result.model,
        config: model_config,
        log,
    })
}
