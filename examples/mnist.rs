//! Trains a CNN on MNIST with burn-train's `Learner` on a ruda device: an unchanged Burn model
//! under `burn_ruda::Autodiff<burn_ruda::Ruda<R>>`, or, for comparison, under Burn's own
//! `Autodiff<Wgpu>` / `Autodiff<Cuda>`.
//!
//! ```text
//! cargo run --release --example mnist -- --epochs 1
//! cargo run --release --example mnist -- --data ~/mnist --epochs 3 --device cuda
//! cargo run --release --example mnist -- --backend burn-wgpu --device cpu
//! cargo run --release --example mnist -- --devices cuda:0,cuda:1 --batch-size 64
//! ```
//!
//! Without `--data` it trains on the 10,000 real digits shipped in `data/mnist/` (8,000 for
//! training, 2,000 for testing). Run with `--help` for every flag.

use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

use burn::data::dataset::Dataset;
use burn::tensor::backend::AutodiffBackend;
use ruda_suite::example_args::{
    Args, BackendChoice, BackendJob, backend_type_name, choose_devices, device_list, run_on,
    shipped_data_dir,
};
use ruda_suite::mnist::data::MnistDataset;
use ruda_suite::mnist::idx::{MnistSplit, load_split};
use ruda_suite::mnist::model::IMAGE_SIZE;
use ruda_suite::mnist::train::{MnistTraining, evaluate, load_model, save_model, train};
use ruda_suite::multi_device::BatchSplit;
use ruda_suite::training_log::format_metric;

const USAGE: &str = "\
Trains a CNN on MNIST with burn-train's Learner on a ruda device.

Usage: cargo run --release --example mnist -- [flags]

  --backend ruda|burn-wgpu|burn-cuda
                     ruda: burn_ruda::Autodiff<burn_ruda::Ruda<RudaCuda|RudaWgpu>> (default);
                     burn-wgpu / burn-cuda: Burn's Autodiff<Wgpu> / Autodiff<Cuda>
  --device auto|cuda|wgpu|cpu
                     auto: ruda's best device (RUDA_DEVICE, else CUDA, else a wgpu GPU, else
                     the wgpu CPU adapter); cpu: the wgpu CPU adapter (Mesa's lavapipe); any
                     RUDA_DEVICE form works too (cuda:1, wgpu:discrete:0). Default: auto
  --devices N|LIST   data-parallel training with burn-train's multi-device strategy: N devices
                     of --device's kind starting at it (--device cuda --devices 2), or a list
                     (cuda:0,cuda:1). The batch size is the global batch, split evenly
  --epochs N         passes over the training set (default 1)
  --batch-size N     digits per step, over all devices (default 32)
  --lr X             Adam's initial learning rate, decayed linearly to a tenth (default 0.002)
  --data DIR         standard MNIST IDX files (train-images-idx3-ubyte[.gz], ...), e.g. the full
                     60,000/10,000 set; default: the 8,000/2,000 digits in data/mnist/
  --train-limit N    train on the first N training digits only
  --artifact-dir DIR learner logs and the saved model (default: <temp>/burn-ruda-examples/mnist)
  --seed N           initialization, dropout and shuffling seed (default 42)
  --workers N        threads preparing batches (default 2)
";

fn main() {
    ruda_suite::training_log::mark_process_start();
    // SAFETY: first thing in `main`, no other thread runs yet.
    unsafe { ruda_runtime::process::prepare() };
    if let Err(e) = main_inner() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

fn main_inner() -> Result<(), Box<dyn Error>> {
    let mut args = Args::from_env().map_err(|e| format!("{e}\n\n{USAGE}"))?;
    if args.flag("help")? {
        print!("{USAGE}");
        return Ok(());
    }
    let backend = args.get_or("backend", BackendChoice::Ruda)?;
    let device = args.get::<String>("device")?;
    let devices = args.get::<String>("devices")?;
    let defaults = MnistTraining::default();
    let config = MnistTraining {
        epochs: args.get_or("epochs", defaults.epochs)?,
        batch_size: args.get_or("batch-size", defaults.batch_size)?,
        learning_rate: args.get_or("lr", defaults.learning_rate)?,
        seed: args.get_or("seed", defaults.seed)?,
        num_workers: args.get_or("workers", defaults.num_workers)?,
        artifact_dir: args.get_or("artifact-dir", defaults.artifact_dir.clone())?,
        ..defaults
    };
    let data_dir = args.get_or::<PathBuf>("data", shipped_data_dir().join("mnist"))?;
    let train_limit = args.get::<usize>("train-limit")?;
    args.finish().map_err(|e| format!("{e}\n\n{USAGE}"))?;
    if config.epochs == 0 || config.batch_size == 0 {
        return Err("--epochs and --batch-size must be at least 1".into());
    }

    let devices = choose_devices(backend, device.as_deref(), devices.as_deref())?;
    BatchSplit::new(config.batch_size, devices.len())?;
    let train_set = MnistDataset::new(load_split(&data_dir, MnistSplit::Train)?);
    let train_set = train_set.take(train_limit.unwrap_or(usize::MAX));
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

    fn run<B: AutodiffBackend>(self, devices: Vec<B::Device>) -> Self::Output {
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
