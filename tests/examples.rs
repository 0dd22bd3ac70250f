//! The examples' library code, on Mesa's CPU Vulkan driver (`WgpuDevice::Cpu`):
//!
//! - the IDX loader on good files (gzipped and raw) and on malformed ones (truncated, wrong magic
//!   number, labels and images of different counts), each a clear error;
//! - a few steps of each example's training loop (burn-train's `Learner` under
//!   `burn_ruda::Autodiff<Ruda<RudaWgpu>>`) on tiny settings: the loss goes down, and the trained
//!   models run (test accuracy, sampling, save and reload);
//! - the MNIST loop on two devices of the one lavapipe adapter through burn-train's multi-device
//!   strategy, learning as one device does at the same global batch.

use std::io::Write;
use std::path::{Path, PathBuf};

use burn::data::dataset::Dataset;
use burn_ruda::{Autodiff, Ruda, RudaWgpu};
use cubecl::wgpu::WgpuDevice;
use ruda_suite::char_lm::data::{CharWindows, split_tokens};
use ruda_suite::char_lm::generate::{generate, sample};
use ruda_suite::char_lm::text::{read_text, shipped_shakespeare};
use ruda_suite::char_lm::train::{CharLmTraining, PreparedText};
use ruda_suite::example_args::shipped_data_dir;
use ruda_suite::mnist::data::MnistDataset;
use ruda_suite::mnist::idx::{IdxError, MnistSplit, load_split, read_images, read_labels};
use ruda_suite::mnist::model::MnistModelConfig;
use ruda_suite::mnist::train::{MnistTraining, evaluate, load_model, save_model};
use ruda_suite::training_log::TrainingLog;
use serial_test::serial;

type B = Autodiff<Ruda<RudaWgpu>>;

fn device() -> WgpuDevice {
    WgpuDevice::Cpu
}

// ---------------------------------------------------------------------------------------------
// IDX files

fn idx_bytes(magic: u32, dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut out = magic.to_be_bytes().to_vec();
    for d in dims {
        out.extend(d.to_be_bytes());
    }
    out.extend(data);
    out
}

fn write(dir: &Path, name: &str, bytes: &[u8], gzip: bool) -> PathBuf {
    let path = dir.join(name);
    let file = std::fs::File::create(&path).unwrap();
    if gzip {
        let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
        gz.write_all(bytes).unwrap();
        gz.finish().unwrap();
    } else {
        let mut file = file;
        file.write_all(bytes).unwrap();
    }
    path
}

/// Three 2x3 images with pixel values 0..18 and labels 7, 0, 9.
fn three_images() -> (Vec<u8>, Vec<u8>) {
    let pixels: Vec<u8> = (0..18).collect();
    (
        idx_bytes(0x0803, &[3, 2, 3], &pixels),
        idx_bytes(0x0801, &[3], &[7, 0, 9]),
    )
}

#[test]
fn idx_reads_gzipped_and_raw_files() {
    let dir = tempfile::tempdir().unwrap();
    let (images, labels) = three_images();
    // Training split gzipped, test split raw (with the dotted names some mirrors use).
    write(dir.path(), "train-images-idx3-ubyte.gz", &images, true);
    write(dir.path(), "train-labels-idx1-ubyte.gz", &labels, true);
    write(dir.path(), "t10k-images.idx3-ubyte", &images, false);
    write(dir.path(), "t10k-labels.idx1-ubyte", &labels, false);
    for split in [MnistSplit::Train, MnistSplit::Test] {
        let set = load_split(dir.path(), split).unwrap();
        assert_eq!(
            (set.images.count, set.images.rows, set.images.cols),
            (3, 2, 3)
        );
        assert_eq!(set.labels, vec![7, 0, 9]);
        assert_eq!(set.images.image(1), &[6, 7, 8, 9, 10, 11]);
    }
    let item = MnistDataset::new(load_split(dir.path(), MnistSplit::Test).unwrap())
        .get(2)
        .unwrap();
    assert_eq!((item.label, item.rows, item.cols), (9, 2, 3));
    assert_eq!(item.pixels, (12..18).collect::<Vec<u8>>());
}

#[test]
fn idx_rejects_truncated_files() {
    let dir = tempfile::tempdir().unwrap();
    let (images, _) = three_images();
    // Data cut short, gzipped: the gzip stream is fine, the IDX content is not.
    let path = write(dir.path(), "short.gz", &images[..images.len() - 5], true);
    let err = read_images(&path).unwrap_err();
    assert!(matches!(
        err,
        IdxError::Truncated {
            expected: 34,
            found: 29,
            ..
        }
    ));
    let message = err.to_string();
    assert!(message.contains("short.gz"), "{message}");
    assert!(
        message.contains("truncated IDX file: its header announces 34 bytes, it has 29"),
        "{message}"
    );
    // Cut inside the header.
    let path = write(dir.path(), "header", &images[..6], false);
    let message = read_images(&path).unwrap_err().to_string();
    assert!(
        message.contains("announces 16 bytes, it has 6"),
        "{message}"
    );
    // A gzip stream cut short is an I/O error naming the file.
    let full = write(dir.path(), "full.gz", &images, true);
    let gz = std::fs::read(&full).unwrap();
    let path = write(dir.path(), "cut.gz", &gz[..gz.len() / 2], false);
    let message = read_images(&path).unwrap_err().to_string();
    assert!(message.starts_with("cannot read IDX file"), "{message}");
    assert!(message.contains("cut.gz"), "{message}");
}

#[test]
fn idx_rejects_wrong_magic_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let (images, labels) = three_images();
    // A label file where an image file is expected, and the other way round.
    let path = write(dir.path(), "labels", &labels, false);
    let err = read_images(&path).unwrap_err();
    assert!(matches!(
        err,
        IdxError::BadMagic {
            found: 0x0801,
            expected: 0x0803,
            ..
        }
    ));
    let message = err.to_string();
    assert!(
        message.contains("wrong magic number 0x00000801, expected 0x00000803"),
        "{message}"
    );
    assert!(message.contains("MNIST image file"), "{message}");
    let path = write(dir.path(), "images", &images, false);
    let message = read_labels(&path).unwrap_err().to_string();
    assert!(
        message.contains("wrong magic number 0x00000803, expected 0x00000801"),
        "{message}"
    );
    // Not an IDX file at all.
    let path = write(dir.path(), "text.gz", b"hello, world", true);
    let message = read_labels(&path).unwrap_err().to_string();
    assert!(
        message.contains("wrong magic number 0x68656c6c"),
        "{message}"
    );
}

#[test]
fn idx_rejects_mismatched_counts_and_bad_labels() {
    let dir = tempfile::tempdir().unwrap();
    let (images, _) = three_images();
    write(dir.path(), "train-images-idx3-ubyte", &images, false);
    write(
        dir.path(),
        "train-labels-idx1-ubyte",
        &idx_bytes(0x0801, &[2], &[1, 2]),
        false,
    );
    let message = load_split(dir.path(), MnistSplit::Train)
        .unwrap_err()
        .to_string();
    assert!(
        message.starts_with("label and image counts differ"),
        "{message}"
    );
    assert!(
        message.contains("train-labels-idx1-ubyte has 2 labels"),
        "{message}"
    );
    assert!(
        message.contains("train-images-idx3-ubyte has 3 images"),
        "{message}"
    );

    let path = write(dir.path(), "bad", &idx_bytes(0x0801, &[2], &[3, 10]), false);
    let message = read_labels(&path).unwrap_err().to_string();
    assert!(message.contains("label 1 is 10, not a digit"), "{message}");

    let path = write(dir.path(), "long", &idx_bytes(0x0801, &[1], &[3, 4]), false);
    let message = read_labels(&path).unwrap_err().to_string();
    assert!(message.contains("longer than its header says"), "{message}");

    let message = load_split(dir.path(), MnistSplit::Test)
        .unwrap_err()
        .to_string();
    assert!(message.contains("no MNIST file in"), "{message}");
    assert!(message.contains("t10k-images-idx3-ubyte.gz"), "{message}");
}

#[test]
fn shipped_mnist_has_8000_training_and_2000_test_digits() {
    let dir = shipped_data_dir().join("mnist");
    let train = load_split(&dir, MnistSplit::Train).unwrap();
    let test = load_split(&dir, MnistSplit::Test).unwrap();
    assert_eq!((train.len(), test.len()), (8000, 2000));
    assert_eq!((train.images.rows, train.images.cols), (28, 28));
    for set in [&train, &test] {
        let mut counts = [0usize; 10];
        set.labels.iter().for_each(|&l| counts[l as usize] += 1);
        assert!(counts.iter().all(|&c| c > set.len() / 20), "{counts:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Training loops

/// Mean of the first and of the last `n` step losses.
fn first_and_last(log: &TrainingLog, n: usize) -> (f64, f64) {
    let losses = &log.step_losses;
    assert!(losses.len() >= 2 * n, "only {} steps logged", losses.len());
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
    (mean(&losses[..n]), mean(&losses[losses.len() - n..]))
}

/// The MNIST settings of the training tests: tiny, deterministic (no dropout, no workers).
fn small_mnist(artifacts: &Path, batch_size: usize) -> MnistTraining {
    MnistTraining {
        model: MnistModelConfig::new()
            .with_channels([4, 8, 8])
            .with_hidden(32)
            .with_dropout(0.0),
        epochs: 1,
        batch_size,
        learning_rate: 3e-3,
        num_workers: 0,
        artifact_dir: artifacts.to_path_buf(),
        quiet: true,
        ..MnistTraining::default()
    }
}

#[test]
#[serial]
fn mnist_training_lowers_the_loss() {
    let dir = shipped_data_dir().join("mnist");
    let train_set = MnistDataset::new(load_split(&dir, MnistSplit::Train).unwrap()).take(640);
    let test_set = MnistDataset::new(load_split(&dir, MnistSplit::Test).unwrap()).take(128);
    let artifacts = tempfile::tempdir().unwrap();
    let config = small_mnist(artifacts.path(), 16);
    let trained =
        ruda_suite::mnist::train::train::<B>(&[device()], train_set, test_set.clone(), &config);
    let log = &trained.log;
    assert_eq!(log.step_losses.len(), 40);
    let (first, last) = first_and_last(log, 5);
    assert!(last < first * 0.8, "loss went from {first} to {last}");
    let epoch = log.last().unwrap();
    assert_eq!(epoch.epoch, 1);
    assert!(epoch.valid["Loss"].is_finite() && epoch.valid["Accuracy"] > 10.0);

    // The saved model reloads and classifies the test digits as the trained one does.
    let path = save_model(&trained.model, artifacts.path()).unwrap();
    let reloaded = load_model::<Ruda<RudaWgpu>>(&config.model, &path, &device()).unwrap();
    let (loss, accuracy) = evaluate(&reloaded, &test_set, 16, &device());
    let (loss0, accuracy0) = evaluate(&trained.model, &test_set, 16, &device());
    assert!((loss - loss0).abs() < 1e-5 && accuracy == accuracy0);
    assert!(
        (loss - epoch.valid["Loss"]).abs() < 0.05,
        "{loss} vs {:?}",
        epoch.valid
    );
}

#[test]
#[serial]
fn transformer_training_lowers_the_loss() {
    let text = read_text(shipped_shakespeare()).unwrap();
    let prepared = PreparedText::new(&text[..60_000], 0.1);
    assert!(prepared.unigram_entropy > 2.5 && prepared.unigram_entropy < 4.0);
    let artifacts = tempfile::tempdir().unwrap();
    let config = CharLmTraining {
        seq_len: 32,
        d_model: 32,
        n_heads: 2,
        n_layers: 1,
        d_ff: 64,
        dropout: 0.0,
        epochs: 1,
        batch_size: 16,
        learning_rate: 5e-3,
        items_per_epoch: Some(16 * 30),
        valid_items: Some(32),
        num_workers: 0,
        artifact_dir: artifacts.path().to_path_buf(),
        quiet: true,
        ..CharLmTraining::default()
    };
    let trained = ruda_suite::char_lm::train::train::<B>(&[device()], &prepared, &config).unwrap();
    let log = &trained.log;
    assert_eq!(log.step_losses.len(), 30);
    let (first, last) = first_and_last(log, 5);
    let vocab = prepared.tokenizer.vocab_size() as f64;
    assert!((first - vocab.ln()).abs() < 0.5, "first loss {first}");
    assert!(last < first - 0.8, "loss went from {first} to {last}");
    assert!(log.last().unwrap().valid["Loss"] < vocab.ln());

    let sample = generate(
        &trained.model,
        &prepared.tokenizer,
        "KING",
        40,
        0.8,
        1,
        &device(),
    );
    assert_eq!(sample.chars().count(), 40);
}

#[test]
fn char_windows_and_sampling() {
    let windows = CharWindows::new((0..10).collect(), 3);
    assert_eq!(windows.len(), 3);
    assert_eq!(windows.get(1).unwrap().tokens, vec![3, 4, 5, 6]);
    assert!(windows.get(3).is_none());
    let (train, valid) = split_tokens(&(0..10).collect::<Vec<u32>>(), 0.2);
    assert_eq!((train.len(), valid), (8, vec![8, 9]));
    assert_eq!(sample(&[0.0, 5.0, 1.0], 0.0, 0.3), 1);
    assert_eq!(sample(&[0.0, 5.0, 1.0], 1.0, 0.0), 0);
    assert_eq!(sample(&[0.0, 5.0, 1.0], 1.0, 0.9999), 2);
}

#[test]
#[serial]
fn mnist_trains_on_two_devices_like_on_one() {
    // `WgpuDevice::Cpu` and `WgpuDevice::DefaultDevice` are two Burn devices (two wgpu devices
    // and queues) on the one lavapipe adapter: burn-train forks the model to each, moves the
    // gradients between them and steps the optimizer on each parameter's device.
    let dir = shipped_data_dir().join("mnist");
    let train_set = MnistDataset::new(load_split(&dir, MnistSplit::Train).unwrap()).take(640);
    let test_set = MnistDataset::new(load_split(&dir, MnistSplit::Test).unwrap()).take(128);
    let devices = [WgpuDevice::Cpu, WgpuDevice::DefaultDevice];

    let artifacts = tempfile::tempdir().unwrap();
    let config = small_mnist(artifacts.path(), 16);
    let two = ruda_suite::mnist::train::train::<B>(
        &devices,
        train_set.clone(),
        test_set.clone(),
        &config,
    );
    let one =
        ruda_suite::mnist::train::train::<B>(&devices[..1], train_set, test_set.clone(), &config);

    // 640 digits in global batches of 16 (8 per device): 40 steps, one logged loss per step on
    // either.
    assert_eq!(one.log.step_losses.len(), 40);
    assert_eq!(two.log.step_losses.len(), 40);
    let (first, last) = first_and_last(&two.log, 5);
    assert!(
        last < first * 0.8,
        "two devices: loss went from {first} to {last}"
    );
    assert!(
        two.log.step_losses.iter().all(|l| l.is_finite()),
        "{:?}",
        two.log.step_losses
    );
    // Same global batch, same initialization: the two curves end close (Burn adds the
    // devices' gradients; Adam normalizes that scale away).
    let (_, last_one) = first_and_last(&one.log, 5);
    assert!(
        (last - last_one).abs() < 0.35 * last_one.max(0.2),
        "final losses: two devices {last}, one device {last_one}"
    );
    // The trained model (on the first device) classifies the test digits.
    let (loss, accuracy) = evaluate(&two.model, &test_set, 16, &devices[0]);
    assert!(
        loss.is_finite() && accuracy > 20.0,
        "test loss {loss}, accuracy {accuracy}%"
    );
}
