//! Trains a character-level transformer language model (Burn's `TransformerEncoder` under a
//! causal mask, so every layer runs LayerNorm) with burn-train's `Learner` on a ruda device, and
//! samples text from it.
//!
//! ```text
//! cargo run --release --example transformer
//! cargo run --release --example transformer -- --text my.txt.gz --epochs 10 --device cuda
//! cargo run --release --example transformer -- --backend burn-wgpu --device cpu
//! cargo run --release --example transformer -- --device cuda --devices 2 --batch-size 64
//! ```
//!
//! Without `--text` it trains on the Shakespeare plays shipped in
//! `data/shakespeare/plays.txt.gz` (public domain). Run with `--help` for every flag.

use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

use burn::module::Module;
use burn::tensor::backend::AutodiffBackend;
use ruda_suite::char_lm::generate::generate;
use ruda_suite::char_lm::text::{read_text, shipped_shakespeare};
use ruda_suite::char_lm::train::{CharLmTraining, PreparedText, train};
use ruda_suite::example_args::{
    Args, BackendChoice, BackendJob, ModelRecorder, backend_type_name, choose_devices, device_list,
    run_on,
};
use ruda_suite::multi_device::BatchSplit;

const USAGE: &str = "\
Trains a character-level transformer language model with burn-train's Learner on a ruda device.

Usage: cargo run --release --example transformer -- [flags]

  --backend ruda|burn-wgpu|burn-cuda
                     ruda: burn_ruda::Autodiff<burn_ruda::Ruda<RudaCuda|RudaWgpu>> (default);
                     burn-wgpu / burn-cuda: Burn's Autodiff<Wgpu> / Autodiff<Cuda>
  --device auto|cuda|wgpu|cpu
                     auto: ruda's best device (RUDA_DEVICE, else CUDA, else a wgpu GPU, else
                     the wgpu CPU adapter); cpu: the wgpu CPU adapter (Mesa's lavapipe); any
                     RUDA_DEVICE form works too. Default: auto
  --devices N|LIST   data-parallel training with burn-train's multi-device strategy: N devices
                     of --device's kind starting at it (--device cuda --devices 2), or a list
                     (cuda:0,cuda:1). The batch size is the global batch, split evenly
  --text FILE        UTF-8 text, gzipped or plain (default: data/shakespeare/plays.txt.gz)
  --epochs N         epochs (default 3)
  --items N          training windows per epoch, drawn without replacement; 0: all (default 1600)
  --valid-items N    validation windows; 0: all of the last 10% of the text (default 512)
  --batch-size N     windows per step, over all devices (default 32)
  --seq-len N        context length in characters (default 64)
  --d-model N        model width (default 64)
  --heads N          attention heads (default 4)
  --layers N         transformer layers (default 2)
  --d-ff N           feed-forward width (default 4 x d-model)
  --dropout X        dropout probability (default 0.1)
  --lr X             Adam's initial learning rate, decayed linearly to a tenth (default 0.003)
  --sample N         characters to generate after training (default 300)
  --prompt TEXT      start of the generated sample (default: a newline)
  --temperature X    sampling temperature; 0: most likely character (default 0.8)
  --artifact-dir DIR learner logs and the saved model (default: <temp>/burn-ruda-examples/transformer)
  --loss-csv FILE    write every training step's loss (step,loss) to FILE, to compare loss
                     curves (one device against several at the same global batch)
  --seed N           initialization, dropout and sampling seed (default 42)
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

struct Sampling {
    length: usize,
    prompt: String,
    temperature: f64,
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
    let text_path = args.get_or::<PathBuf>("text", shipped_shakespeare())?;
    let d = CharLmTraining::default();
    let d_model = args.get_or("d-model", d.d_model)?;
    let nonzero = |n: usize| (n > 0).then_some(n);
    let config = CharLmTraining {
        epochs: args.get_or("epochs", d.epochs)?,
        items_per_epoch: nonzero(args.get_or("items", d.items_per_epoch.unwrap_or(0))?),
        valid_items: nonzero(args.get_or("valid-items", d.valid_items.unwrap_or(0))?),
        batch_size: args.get_or("batch-size", d.batch_size)?,
        seq_len: args.get_or("seq-len", d.seq_len)?,
        d_model,
        n_heads: args.get_or("heads", d.n_heads)?,
        n_layers: args.get_or("layers", d.n_layers)?,
        d_ff: args.get_or("d-ff", 4 * d_model)?,
        dropout: args.get_or("dropout", d.dropout)?,
        learning_rate: args.get_or("lr", d.learning_rate)?,
        seed: args.get_or("seed", d.seed)?,
        num_workers: args.get_or("workers", d.num_workers)?,
        artifact_dir: args.get_or("artifact-dir", d.artifact_dir.clone())?,
        ..d
    };
    let loss_csv = args.get::<PathBuf>("loss-csv")?;
    let sampling = Sampling {
        length: args.get_or("sample", 300)?,
        prompt: args.get_or("prompt", "\n".to_string())?,
        temperature: args.get_or("temperature", 0.8)?,
    };
    args.finish().map_err(|e| format!("{e}\n\n{USAGE}"))?;
    if config.epochs == 0 || config.batch_size == 0 || config.seq_len == 0 {
        return Err("--epochs, --batch-size and --seq-len must be at least 1".into());
    }
    if config.n_heads == 0 || !config.d_model.is_multiple_of(config.n_heads) {
        return Err(format!(
            "--d-model {} must be a multiple of --heads {}",
            config.d_model, config.n_heads
        )
        .into());
    }

    let devices = choose_devices(backend, device.as_deref(), devices.as_deref())?;
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
            loss_csv,
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

    fn run<B: AutodiffBackend>(self, devices: Vec<B::Device>) -> Self::Output {
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
