//! Trains a character-level transformer language model (Burn's `TransformerEncoder` under a
//! causal mask, so every layer runs LayerNorm) with burn-train's `Learner` on a ruda device, and
//! samples text from it.
//!
//! ```text
//! cargo run --release -p transformer --example transformer
//! cargo run --release -p transformer --example transformer -- --text my.txt.gz --epochs 10
//! cargo run --release -p transformer --example transformer --features burn-backends -- --backend burn-cuda
//! cargo run --release -p transformer --example transformer -- --device cuda --devices 2 --batch-size 64
//! ```
//!
//! Without `--text` it trains on the Shakespeare plays shipped in
//! `examples/transformer/data/shakespeare/plays.txt.gz` (public domain). `--help` lists every
//! flag.

use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

use burn::module::Module;
use clap::Parser;
use example_common::app_log::AppLog;
use example_common::backend::{
    BackendJob, ModelRecorder, TrainingBackend, backend_type_name, check_available, run_on,
};
use example_common::cli::{DeviceArgs, device_list, positive};
use example_common::multi_device::BatchSplit;
use example_common::read_ahead::ReadPoint;
use transformer::generate::generate;
use transformer::text::{read_text, shipped_shakespeare};
use transformer::training::{CharLmTraining, PreparedText, train};

/// Trains a character-level transformer language model with burn-train's Learner on a ruda
/// device, then samples text from it.
#[derive(Parser, Debug)]
#[command(name = "transformer")]
struct Cli {
    #[command(flatten)]
    devices: DeviceArgs,
    /// UTF-8 text, gzipped or plain [default: the shipped Shakespeare plays]
    #[arg(long, value_name = "FILE")]
    text: Option<PathBuf>,
    /// Epochs
    #[arg(long, default_value_t = 3, value_parser = positive)]
    epochs: usize,
    /// Training windows per epoch, drawn without replacement; 0: all
    #[arg(long, default_value_t = 1600)]
    items: usize,
    /// Validation windows; 0: all of the last 10% of the text
    #[arg(long, default_value_t = 512)]
    valid_items: usize,
    /// Windows per step, over all devices
    #[arg(long, default_value_t = 32, value_parser = positive)]
    batch_size: usize,
    /// Context length in characters
    #[arg(long, default_value_t = 64, value_parser = positive)]
    seq_len: usize,
    /// Model width
    #[arg(long, default_value_t = 64)]
    d_model: usize,
    /// Attention heads
    #[arg(long, default_value_t = 4)]
    heads: usize,
    /// Transformer layers
    #[arg(long, default_value_t = 2)]
    layers: usize,
    /// Feed-forward width [default: 4 x d-model]
    #[arg(long)]
    d_ff: Option<usize>,
    /// Dropout probability
    #[arg(long, default_value_t = 0.1)]
    dropout: f64,
    /// Adam's initial learning rate, decayed linearly to a tenth
    #[arg(long, default_value_t = 0.003)]
    lr: f64,
    /// Characters to generate after training
    #[arg(long, default_value_t = 300)]
    sample: usize,
    /// Start of the generated sample
    #[arg(long, default_value = "\n", hide_default_value = true)]
    prompt: String,
    /// Sampling temperature; 0: the most likely character
    #[arg(long, default_value_t = 0.8)]
    temperature: f64,
    /// Learner logs and the saved model [default: <temp>/burn-ruda-examples/transformer]
    #[arg(long, value_name = "DIR")]
    artifact_dir: Option<PathBuf>,
    /// Write every training step's loss (step,loss) to FILE, to compare loss curves (one device
    /// against several at the same global batch)
    #[arg(long, value_name = "FILE")]
    loss_csv: Option<PathBuf>,
    /// Initialization, dropout and sampling seed
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

struct Sampling {
    length: usize,
    prompt: String,
    temperature: f64,
}

fn run(cli: Cli) -> Result<(), Box<dyn Error>> {
    check_available(cli.devices.backend)?;
    if cli.heads == 0 || !cli.d_model.is_multiple_of(cli.heads) {
        return Err(format!(
            "--d-model {} must be a multiple of --heads {}",
            cli.d_model, cli.heads
        )
        .into());
    }
    let d = CharLmTraining::default();
    let nonzero = |n: usize| (n > 0).then_some(n);
    let config = CharLmTraining {
        epochs: cli.epochs,
        items_per_epoch: nonzero(cli.items),
        valid_items: nonzero(cli.valid_items),
        batch_size: cli.batch_size,
        seq_len: cli.seq_len,
        d_model: cli.d_model,
        n_heads: cli.heads,
        n_layers: cli.layers,
        d_ff: cli.d_ff.unwrap_or(4 * cli.d_model),
        dropout: cli.dropout,
        learning_rate: cli.lr,
        seed: cli.seed,
        num_workers: cli.workers,
        artifact_dir: cli.artifact_dir.unwrap_or(d.artifact_dir.clone()),
        ..d
    };
    let sampling = Sampling {
        length: cli.sample,
        prompt: cli.prompt.replace("\\n", "\n"),
        temperature: cli.temperature,
    };
    let text_path = cli.text.unwrap_or_else(shipped_shakespeare);
    let backend = cli.devices.backend;
    let devices = cli.devices.choose()?;
    BatchSplit::new(config.batch_size, devices.len())?;
    let text = read_text(&text_path)?;
    let prepared = PreparedText::new(&text, config.valid_fraction);
    println!(
        "text {}: {} characters, {} distinct; {} for training, {} held out for validation",
        text_path.display(),
        text.chars().count(),
        prepared.tokenizer.vocab_size(),
        prepared.train.len(),
        prepared.valid.len()
    );
    println!(
        "unigram entropy of the training split: {:.4} nats/char (the loss of a model that ignores \
context)",
        prepared.unigram_entropy
    );
    println!(
        "backend {} on {}; model: {} layers, d_model {}, {} heads, d_ff {}, context {}",
        backend_type_name(backend, &devices[0]),
        device_list(&devices),
        config.n_layers,
        config.d_model,
        config.n_heads,
        config.d_ff,
        config.seq_len
    );
    run_on(
        backend,
        &devices,
        Job {
            prepared,
            config,
            sampling,
            loss_csv: cli.loss_csv,
        },
    )
}

struct Job {
    prepared: PreparedText,
    config: CharLmTraining,
    sampling: Sampling,
    loss_csv: Option<PathBuf>,
}

impl BackendJob for Job {
    type Output = Result<(), Box<dyn Error>>;

    fn run<B: TrainingBackend>(self, devices: Vec<B::Device>) -> Self::Output {
        let Job {
            prepared,
            config,
            sampling,
            loss_csv,
        } = self;
        let start = Instant::now();
        let trained = train::<B>(&devices, &prepared, &config)?;
        // The trained model lives on the first device.
        let device = devices[0].clone();
        let seconds = start.elapsed().as_secs_f64();

        let h = prepared.unigram_entropy;
        println!();
        println!(
            "epoch  seconds  train loss  train ppl  valid loss  valid ppl  unigram entropy  \
valid acc  ms/step"
        );
        for e in &trained.log.epochs {
            let get = |m: &std::collections::BTreeMap<String, f64>, k: &str| {
                m.get(k).copied().unwrap_or(f64::NAN)
            };
            let (train_loss, valid_loss) = (get(&e.train, "Loss"), get(&e.valid, "Loss"));
            println!(
                "{:>5}  {:>7.1}  {:>10.4}  {:>9.2}  {:>10.4}  {:>9.2}  {:>15.4}  {:>8.2}%  {:>7.2}",
                e.epoch,
                e.seconds,
                train_loss,
                train_loss.exp(),
                valid_loss,
                valid_loss.exp(),
                h,
                get(&e.valid, "Accuracy"),
                e.step_seconds.map_or(f64::NAN, |s| s * 1e3),
            );
        }
        let epochs = trained.log.epochs.len().max(1);
        println!(
            "time per epoch: {:.1} s ({:.1} s in all)",
            seconds / epochs as f64,
            seconds
        );
        if let Some(step) = trained.log.last().and_then(|e| e.step_seconds) {
            let tokens = (config.batch_size * config.seq_len) as f64;
            println!(
                "time per training step (last epoch, after its first tenth): {:.2} ms; {:.0} \
tokens/s on {} device(s)",
                step * 1e3,
                tokens / step,
                devices.len()
            );
        }
        if let Some([total, reads, batch, rest]) = example_common::deferred_read::median_phases_ms(
            &example_common::deferred_read::last_epoch_phases(),
        ) {
            println!(
                "training thread per step (medians, last epoch after its first tenth): {total:.2} \
ms: waiting for reads {reads:.2} ms, for batches {batch:.2} ms, queueing and bookkeeping \
{rest:.2} ms"
            );
        }
        let tuning = ruda_runtime::autotune::stats();
        if tuning.tuning_passes > 0 {
            println!(
                "ruda's LayerNorm autotuning in this process: {} keys tuned, {:.1} s",
                tuning.tuning_passes,
                tuning.tuning_micros as f64 * 1e-6
            );
        }
        if let Some(last) = trained.log.last()
            && let Some(&valid) = last.valid.get("Loss")
        {
            println!(
                "final validation loss {valid:.4} nats/char vs unigram entropy {h:.4}: {}",
                if valid < h {
                    "below, the model uses context"
                } else {
                    "not below yet; train longer (--epochs, --items)"
                }
            );
        }

        if let Some(path) = &loss_csv {
            let mut csv = String::from("step,loss\n");
            for (step, loss) in trained.log.step_losses.iter().enumerate() {
                csv.push_str(&format!("{},{loss}\n", step + 1));
            }
            std::fs::write(path, csv)
                .map_err(|e| format!("cannot write --loss-csv {}: {e}", path.display()))?;
            println!("step losses written to {}", path.display());
        }

        let path = config.artifact_dir.join("model");
        trained
            .model
            .clone()
            .save_file(&path, &ModelRecorder::new())?;
        println!("model saved to {}", path.with_extension("mpk").display());

        if sampling.length > 0 {
            let sample = generate(
                &trained.model,
                &prepared.tokenizer,
                &sampling.prompt,
                sampling.length,
                sampling.temperature,
                config.seed,
                &device,
            );
            println!(
                "\nsample (temperature {}):\n{}{}",
                sampling.temperature, sampling.prompt, sample
            );
        }
        Ok(())
    }
}
