//! A few steps of the example's training loop (burn-train's `Learner` under
//! `burn_ruda::Autodiff<Ruda<RudaWgpu>>`) on Mesa's CPU Vulkan driver, on tiny settings: the loss
//! goes down and the trained model samples text; and the data windows and sampling rule.

use burn::data::dataset::Dataset;
use burn_ruda::{Autodiff, Ruda, RudaWgpu};
use cubecl::wgpu::WgpuDevice;
use serial_test::serial;
use transformer::data::{CharWindows, split_tokens};
use transformer::generate::{generate, sample};
use transformer::text::{read_text, shipped_shakespeare};
use transformer::training::{CharLmTraining, PreparedText, train};

type B = Autodiff<Ruda<RudaWgpu>>;

fn device() -> WgpuDevice {
    WgpuDevice::Cpu
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
    let trained = train::<B>(&[device()], &prepared, &config).unwrap();
    let log = &trained.log;
    assert_eq!(log.step_losses.len(), 30);
    let (first, last) = log.first_and_last_means(5);
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
