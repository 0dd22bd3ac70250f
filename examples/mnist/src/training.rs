//! Training the MNIST classifier with burn-train's `Learner` on any autodiff backend, saving it
//! with a Burn recorder, and measuring test accuracy.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use burn::data::dataloader::DataLoaderBuilder;
use burn::data::dataset::Dataset;
use burn::lr_scheduler::linear::LinearLrSchedulerConfig;
use burn::prelude::*;
use burn::record::RecorderError;
use burn::train::metric::{AccuracyMetric, LossMetric};
use burn::train::{Learner, SupervisedTraining};

use crate::data::{MnistBatcher, MnistDataset};
use crate::model::{MnistModel, MnistModelConfig};
use example_common::backend::{ModelRecorder, TrainingBackend};
use example_common::deferred_read::ReadsAtNextBatch;
use example_common::multi_device::{BatchSplit, execution_strategy};
use example_common::training_log::{LineRenderer, TrainingLog};

/// How to train: sizes, schedule, where the artifacts go.
#[derive(Clone, Debug)]
pub struct MnistTraining {
    /// The model's sizes.
    pub model: MnistModelConfig,
    /// Passes over the training set.
    pub epochs: usize,
    /// Digits per step, over all training devices (each device trains on an equal share).
    pub batch_size: usize,
    /// Adam's learning rate at the first step; it decays linearly to a tenth of that at the
    /// last step.
    pub learning_rate: f64,
    /// Seed of the backend's generator (initialization, dropout) and of the shuffling.
    pub seed: u64,
    /// Threads preparing batches.
    pub num_workers: usize,
    /// Where the learner writes its logs and the trained model is saved.
    pub artifact_dir: PathBuf,
    /// Print nothing (tests).
    pub quiet: bool,
}

impl Default for MnistTraining {
    fn default() -> Self {
        Self {
            model: MnistModelConfig::new(),
            epochs: 1,
            batch_size: 32,
            learning_rate: 2e-3,
            seed: 42,
            num_workers: 2,
            artifact_dir: example_common::default_artifact_dir("mnist"),
            quiet: false,
        }
    }
}

/// A trained model (on the inference backend) and what the learner logged.
pub struct MnistTrained<B: Backend> {
    /// The model after the last epoch.
    pub model: MnistModel<B>,
    /// Per-epoch metrics and per-step losses.
    pub log: TrainingLog,
}

/// Trains on `train`, validating on `valid` after each epoch, with burn-train's `Learner`
/// (metrics: loss and accuracy) on `devices`: one device, or several sharing each step's batch
/// through burn-train's multi-device strategy ([`example_common::multi_device`]). The model is
/// initialized, validated and returned on the first device.
///
/// Panics if `devices` is empty or the batch size is not a multiple of the number of devices
/// (check with [`BatchSplit::new`] first).
pub fn train<B: TrainingBackend>(
    devices: &[B::Device],
    train: MnistDataset,
    valid: MnistDataset,
    config: &MnistTraining,
) -> MnistTrained<B::InnerBackend> {
    let strategy = execution_strategy::<B>(devices);
    let device = strategy.main_device().clone();
    let split = BatchSplit::new(config.batch_size, devices.len()).unwrap_or_else(|e| panic!("{e}"));
    for device in devices {
        B::seed(device, config.seed);
    }
    std::fs::create_dir_all(&config.artifact_dir).ok();
    // Old metric logs would leak into the learner's summary.
    for split in ["train", "valid"] {
        std::fs::remove_dir_all(config.artifact_dir.join(split)).ok();
    }

    // burn-train gives each device a contiguous share of the training set, batched by this
    // loader's batch size. With one device the steps' outputs are read back when the loop asks
    // for its next batch (`example_common::deferred_read`).
    let loader_train = DataLoaderBuilder::<B, _, _>::new(MnistBatcher)
        .batch_size(split.per_device)
        .shuffle(config.seed)
        .num_workers(config.num_workers)
        .set_device(device.clone())
        .build(train.clone());
    let loader_train = ReadsAtNextBatch::wrap(loader_train);
    let loader_valid = DataLoaderBuilder::<B::InnerBackend, _, _>::new(MnistBatcher)
        .batch_size(config.batch_size)
        .num_workers(config.num_workers)
        .set_device(device.clone())
        .build(valid);

    let steps = config.epochs * train.len().div_ceil(config.batch_size);
    let lr = LinearLrSchedulerConfig::new(
        config.learning_rate,
        config.learning_rate / 10.0,
        steps.max(1),
    )
    .init()
    .expect("valid learning rate schedule");

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

    let model = config.model.init::<B>(&device);
    let result = training.launch(Learner::new(model, B::adam(), lr));
    let log = log.lock().unwrap().clone();
    MnistTrained {
        model: result.model,
        log,
    }
}

/// Mean cross-entropy and accuracy (percent) of `model` on `data`.
pub fn evaluate<B: Backend>(
    model: &MnistModel<B>,
    data: &MnistDataset,
    batch_size: usize,
    device: &B::Device,
) -> (f64, f64) {
    use burn::data::dataloader::batcher::Batcher;
    let mut loss_sum = 0.0;
    let mut correct = 0usize;
    let n = data.len();
    for start in (0..n).step_by(batch_size.max(1)) {
        let items = (start..(start + batch_size).min(n))
            .filter_map(|i| data.get(i))
            .collect::<Vec<_>>();
        let count = items.len();
        let batch = Batcher::<B, _, _>::batch(&MnistBatcher, items, device);
        let out = model.forward_classification(batch);
        let predicted = out.output.argmax(1).squeeze_dim::<1>(1);
        let hits = predicted
            .equal(out.targets)
            .int()
            .sum()
            .into_scalar()
            .elem::<i64>();
        correct += hits as usize;
        loss_sum += out.loss.into_scalar().elem::<f64>() * count as f64;
    }
    (loss_sum / n as f64, 100.0 * correct as f64 / n as f64)
}

/// Saves `model` as `<dir>/model.mpk`; returns that path.
pub fn save_model<B: Backend>(model: &MnistModel<B>, dir: &Path) -> Result<PathBuf, RecorderError> {
    let path = dir.join("model");
    model.clone().save_file(&path, &ModelRecorder::new())?;
    Ok(path.with_extension("mpk"))
}

/// Loads a model saved by [`save_model`] into a fresh model of `config`'s sizes.
pub fn load_model<B: Backend>(
    config: &MnistModelConfig,
    path: &Path,
    device: &B::Device,
) -> Result<MnistModel<B>, RecorderError> {
    config
        .init::<B>(device)
        .load_file(path, &ModelRecorder::new(), device)
}
