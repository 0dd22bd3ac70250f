//! A few steps of the example's training loop (burn-train's `Learner` under
//! `burn_ruda::Autodiff<Ruda<RudaWgpu>>`) on Mesa's CPU Vulkan driver, on tiny settings: the loss
//! goes down and the trained model classifies the test digits, also after a save and reload; and
//! the same loop on two devices of the one lavapipe adapter through burn-train's multi-device
//! strategy, learning as one device does at the same global batch.

use std::path::Path;

use burn_ruda::{Autodiff, Ruda, RudaWgpu};
use cubecl::wgpu::WgpuDevice;
use mnist::data::{MnistDataset, shipped_mnist_dir};
use mnist::idx::{MnistSplit, load_split};
use mnist::model::MnistModelConfig;
use mnist::training::{MnistTraining, evaluate, load_model, save_model, train};
use serial_test::serial;

type B = Autodiff<Ruda<RudaWgpu>>;

fn device() -> WgpuDevice {
    WgpuDevice::Cpu
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
    let dir = shipped_mnist_dir();
    let train_set = MnistDataset::new(load_split(&dir, MnistSplit::Train).unwrap()).take(640);
    let test_set = MnistDataset::new(load_split(&dir, MnistSplit::Test).unwrap()).take(128);
    let artifacts = tempfile::tempdir().unwrap();
    let config = small_mnist(artifacts.path(), 16);
    let trained = train::<B>(&[device()], train_set, test_set.clone(), &config);
    let log = &trained.log;
    assert_eq!(log.step_losses.len(), 40);
    let (first, last) = log.first_and_last_means(5);
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
fn mnist_trains_on_two_devices_like_on_one() {
    // `WgpuDevice::Cpu` and `WgpuDevice::DefaultDevice` are two Burn devices (two wgpu devices
    // and queues) on the one lavapipe adapter: burn-train forks the model to each, moves the
    // gradients between them and steps the optimizer on each parameter's device.
    let dir = shipped_mnist_dir();
    let train_set = MnistDataset::new(load_split(&dir, MnistSplit::Train).unwrap()).take(640);
    let test_set = MnistDataset::new(load_split(&dir, MnistSplit::Test).unwrap()).take(128);
    let devices = [WgpuDevice::Cpu, WgpuDevice::DefaultDevice];

    let artifacts = tempfile::tempdir().unwrap();
    let config = small_mnist(artifacts.path(), 16);
    let two = train::<B>(&devices, train_set.clone(), test_set.clone(), &config);
    let one = train::<B>(&devices[..1], train_set, test_set.clone(), &config);

    // 640 digits in global batches of 16 (8 per device): 40 steps, one logged loss per step on
    // either.
    assert_eq!(one.log.step_losses.len(), 40);
    assert_eq!(two.log.step_losses.len(), 40);
    let (first, last) = two.log.first_and_last_means(5);
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
    let (_, last_one) = one.log.first_and_last_means(5);
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
