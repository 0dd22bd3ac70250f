//! Trains a CNN on MNIST with burn-train's `Learner` on a ruda device: an unchanged Burn model
//! under `burn_ruda::Autodiff<burn_ruda::Ruda<R>>`, or, for comparison (cargo feature
//! `burn-backends`), under Burn's own `Autodiff<Wgpu>` / `Autodiff<Cuda>`.
//!
//! ```text
//! cargo run --release -p mnist --example mnist -- --epochs 1
//! cargo run --release -p mnist --example mnist -- --data ~/mnist --epochs 3 --device cuda
//! cargo run --release -p mnist --example mnist --features burn-backends -- --backend burn-wgpu
//! cargo run --release -p mnist --example mnist -- --devices cuda:0,cuda:1 --batch-size 64
//! ```
//!
//! Without `--data` it trains on the 10,000 real digits shipped in `examples/mnist/data/` (8,000
//! for training, 2,000 for testing). `--help` lists every flag.

use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

use burn::data::dataset::Dataset;
use clap::Parser;
use example_common::app_log::AppLog;
use example_common::backend::{
    BackendJob, TrainingBackend, backend_type_name, check_available, run_on,
};
use example_common::cli::{DeviceArgs, device_list, positive};
use example_common::multi_device::BatchSplit;
use example_common::read_ahead::ReadPoint;
use example_common::training_log::format_metric;
use mnist::data::{MnistDataset, shipped_mnist_dir};
use mnist::idx::{MnistSplit, load_split};
use mnist::model::IMAGE_SIZE;
use mnist::training::{MnistTraining, evaluate, load_model, save_model, train};

/// Trains a CNN on MNIST with burn-train's Learner on a ruda device.
#[derive(Parser, Debug)]
#[command(name = "mnist")]
struct Cli {
    #[command(flatten)]
    devices: DeviceArgs,
    /// Passes over the training set
    #[arg(long, default_value_t = 1, value_parser = positive)]
    epochs: usize,
    /// Digits per step, over all devices
    #[arg(long, default_value_t = 32, value_parser = positive)]
    batch_size: usize,
    /// Adam's initial learning rate, decayed linearly to a tenth
    #[arg(long, default_value_t = 0.002)]
    lr: f64,
    /// Standard MNIST IDX files (train-images-idx3-ubyte[.gz], ...), e.g. the full 60,000/10,000
    /// set [default: the 8,000/2,000 digits in examples/mnist/data/]
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Train on the first N training digits only
    #[arg(long, value_name = "N")]
    train_limit: Option<usize>,
    /// Learner logs and the saved model [default: <temp>/burn-ruda-examples/mnist]
    #[arg(long, value_name = "DIR")]
    artifact_dir: Option<PathBuf>,
    /// Initialization, dropout and shuffling seed
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Threads preparing batches
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Where each step's output is read back for the metrics: when the loop asks for the next
    /// batch (after the optimizer step was queued), where the step ends (before it), or on
    /// burn-train's metrics thread as its own output types do (with fusion backends that read
    /// cuts the next step's kernels at random places)
    #[arg(long, value_enum, default_value_t = ReadPoint::NextBatch)]
    read_at: ReadPoint,
    /// Who writes burn-train's application log (experiment.log in the artifact directory):
    /// `static`, a filter decided once per call site, or `burn`, burn-train's own installer,
    /// whose filter every log call of every crate consults (slower steps; for comparison)
    #[arg(long, value_enum, default_value_t = AppLog::Static)]
    app_log: AppLog,
}

fn main() {
    // SAFETY: first thing in `main`, no other thread runs yet.
    unsafe { example_common::start_process() };
    let cli = Cli::parse();
    example_common::read_ahead::set_read_point(cli.read_at);
    example_common::app_log::set_app_log(cli.app_log);
    if let Err(e) = run(cli) {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

fn run(cli: Cli) -> Result<(), Box<dyn Error>> {
    check_available(cli.devices.backend)?;
    let defaults = MnistTraining::default();
    let config = MnistTraining {
        epochs: cli.epochs,
        batch_size: cli.batch_size,
        learning_rate: cli.lr,
        seed: cli.seed,
        num_workers: cli.workers,
        artifact_dir: cli.artifact_dir.unwrap_or(defaults.artifact_dir.clone()),
        ..defaults
    };
    let data_dir = cli.data.unwrap_or_else(shipped_mnist_dir);
    let backend = cli.devices.backend;
    let devices = cli.devices.choose()?;
    BatchSplit::new(config.batch_size, devices.len())?;
    let train_set = MnistDataset::new(load_split(&data_dir, MnistSplit::Train)?);
    let train_set = train_set.take(cli.train_limit.unwrap_or(usize::MAX));
    let test_set = MnistDataset::new(load_split(&data_dir, MnistSplit::Test)?);
    for set in [&train_set, &test_set] {
        if set.image_size() != (IMAGE_SIZE, IMAGE_SIZE) {
            return Err(format!(
                "{}: images are {:?}, the model takes {IMAGE_SIZE}x{IMAGE_SIZE}",
                data_dir.display(),
                set.image_size()
            )
            .into());
        }
    }
    println!(
        "MNIST from {}: {} training and {} test digits",
        data_dir.display(),
        train_set.len(),
        test_set.len()
    );
    println!(
        "backend {} on {}; {} epoch(s), batch size {}, learning rate {}",
        backend_type_name(backend, &devices[0]),
        device_list(&devices),
        config.epochs,
        config.batch_size,
        config.learning_rate
    );
    run_on(
        backend,
        &devices,
        Job {
            train_set,
            test_set,
            config,
        },
    )
}

struct Job {
    train_set: MnistDataset,
    test_set: MnistDataset,
    config: MnistTraining,
}

impl BackendJob for Job {
    type Output = Result<(), Box<dyn Error>>;

    fn run<B: TrainingBackend>(self, devices: Vec<B::Device>) -> Self::Output {
        let Job {
            train_set,
            test_set,
            config,
        } = self;
        let start = Instant::now();
        let trained = train::<B>(&devices, train_set, test_set.clone(), &config);
        // The trained model lives on the first device.
        let device = devices[0].clone();
        let train_seconds = start.elapsed().as_secs_f64();

        let path = save_model(&trained.model, &config.artifact_dir)?;
        let reloaded = load_model::<B::InnerBackend>(&config.model, &path, &device)?;
        let (loss, accuracy) = evaluate(&reloaded, &test_set, config.batch_size, &device);

        println!();
        println!("epoch  seconds  train loss  train acc  test loss  test acc  ms/step");
        for e in &trained.log.epochs {
            let get = |m: &std::collections::BTreeMap<String, f64>, k: &str| {
                m.get(k).copied().unwrap_or(f64::NAN)
            };
            println!(
                "{:>5}  {:>7.1}  {:>10.4}  {:>8.2}%  {:>9.4}  {:>7.2}%  {:>7.2}",
                e.epoch,
                e.seconds,
                get(&e.train, "Loss"),
                get(&e.train, "Accuracy"),
                get(&e.valid, "Loss"),
                get(&e.valid, "Accuracy"),
                e.step_seconds.map_or(f64::NAN, |s| s * 1e3),
            );
        }
        let epochs = trained.log.epochs.len().max(1);
        println!(
            "time per epoch: {:.1} s (training and test pass; {:.1} s in all)",
            train_seconds / epochs as f64,
            train_seconds
        );
        println!("model saved to {}", path.display());
        println!(
            "test set ({} digits, saved model reloaded): {}  {}",
            test_set.len(),
            format_metric("Loss", loss),
            format_metric("Accuracy", accuracy)
        );
        Ok(())
    }
}
