//! What burn-train's `Learner` adds to the transformer's training step, one piece at a time
//! (issue 17's breakdown): the bare step (forward, backward, Adam, one device sync, as the
//! benchmarks' `transformer_step`), then that step with each piece of burn-train's single-device
//! loop added on its own, then burn-train's own loop. Every piece runs in this one process, on one
//! device, so the differences are side by side.
//!
//! ```text
//! cargo run --release -p transformer --example learner_overhead -- --device cuda
//! cargo run --release -p transformer --example learner_overhead -- --device cpu --layers 2 --d-model 64 --seq-len 64 --steps 20
//! ```
//!
//! The pieces (`--pieces`, in that order by default):
//! - `bare`: one fixed batch; the model moves through Adam's step; a device sync ends the step.
//! - `clone`: Adam steps a clone of the model while the original is still held, as
//!   `Learner::optimizer_step` does (`self.model = self.model().optimize(..)`).
//! - `read`: the step's output (logits, loss, targets) read back in one transaction after Adam's
//!   step was queued, instead of the sync: what the examples' default read point does.
//! - `loader`: batches from burn's `DataLoader` (worker threads uploading them) instead of one.
//! - `learner`: burn-train's `Learner` methods (`lr_step`, `train_step`, `optimizer_step`) over the
//!   loader, outputs read at the next batch: everything in burn-train's single-device loop but
//!   its event processing (metrics thread, renderer).
//! - `training`: `SupervisedTraining::launch`, the whole of the transformer example's training,
//!   with the example's own figure (`transformer::training::train`), and each thread's share of
//!   a core over a window while it runs (`--profile-after`, `--profile-window`). The text has
//!   3305 windows: more than 103 steps of 32 end on a partial batch, whose new shapes compile
//!   kernels inside the timed steps.
//!
//! Each piece prints its median time per step, after `--warmup` steps, and its ratio to `bare`,
//! then the CPU time per timed step of each kind of thread (`example_common::thread_cpu`: the
//! training thread, burn-fusion's and CubeCL's device-service threads, the driver's, the rest),
//! which says which stage of a host-bound step sets its pace.

use std::error::Error;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::Dataset;
use burn::data::dataset::transform::{SamplerDataset, SamplerDatasetOptions};
use burn::optim::{GradientsParams, Optimizer};
use burn::tensor::Transaction;
use burn::tensor::backend::AutodiffBackend;
use burn::train::{ItemLazy, Learner};
use clap::Parser;
use example_common::app_log::AppLog;
use example_common::backend::{BackendJob, TrainingBackend, backend_type_name, run_on};
use example_common::cli::{DeviceArgs, positive};
use example_common::deferred_read::ReadsAtNextBatch;
use example_common::thread_cpu::{CpuByRole, ROLES, ThreadCpu};
use transformer::data::{CharLmBatch, CharLmBatcher, CharLmItem, CharWindows};
use transformer::model::{CharLm, CharLmConfig};
use transformer::text::{read_text, shipped_shakespeare};
use transformer::training::{CharLmTraining, PreparedText, train};

/// A piece of burn-train's training loop, added to the bare step on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Piece {
    /// One fixed batch, the model moved through Adam, a device sync per step.
    Bare,
    /// Adam steps a clone while the original is held (`Learner::optimizer_step`).
    Clone,
    /// The output read back after Adam's step was queued, instead of the sync.
    Read,
    /// Batches from burn's DataLoader instead of one fixed batch.
    Loader,
    /// burn-train's `Learner` methods over the loader, outputs read at the next batch.
    Learner,
    /// `SupervisedTraining::launch`: the transformer example's whole training.
    Training,
}

/// Times the transformer's training step bare and with each piece of burn-train's loop added.
#[derive(Parser, Debug)]
#[command(name = "learner_overhead")]
struct Cli {
    #[command(flatten)]
    devices: DeviceArgs,
    /// UTF-8 text, gzipped or plain [default: the shipped Shakespeare plays]
    #[arg(long, value_name = "FILE")]
    text: Option<PathBuf>,
    /// The pieces to time, in order
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Piece::Bare, Piece::Clone, Piece::Read, Piece::Loader, Piece::Learner, Piece::Training, Piece::Bare])]
    pieces: Vec<Piece>,
    /// Timed steps per piece
    #[arg(long, default_value_t = 60, value_parser = positive)]
    steps: usize,
    /// Untimed steps before them (compilation, tuning)
    #[arg(long, default_value_t = 10)]
    warmup: usize,
    /// Also print the median of every N timed steps, in order: whether a long run drifts
    #[arg(long, value_name = "N", value_parser = positive)]
    blocks: Option<usize>,
    /// Windows per step
    #[arg(long, default_value_t = 32, value_parser = positive)]
    batch_size: usize,
    /// Context length in characters
    #[arg(long, default_value_t = 256, value_parser = positive)]
    seq_len: usize,
    /// Model width
    #[arg(long, default_value_t = 512, value_parser = positive)]
    d_model: usize,
    /// Attention heads
    #[arg(long, default_value_t = 8, value_parser = positive)]
    heads: usize,
    /// Transformer layers
    #[arg(long, default_value_t = 6, value_parser = positive)]
    layers: usize,
    /// Threads preparing batches (`loader`, `learner`, `training`)
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// `training` as the transformer example runs it: burn-train's application log file and
    /// the progress lines (else without them, as the tests train)
    #[arg(long)]
    log: bool,
    /// With `--log`: who writes the application log (`static`: the examples' default; `burn`:
    /// burn-train's own installer)
    #[arg(long, value_enum, default_value_t = AppLog::Static)]
    app_log: AppLog,
    /// `training`: seconds after its start at which a window of thread CPU times opens (its
    /// threads end with it, so they are read while it runs); long enough to pass the first steps
    #[arg(long, default_value_t = 15.0)]
    profile_after: f64,
    /// `training`: the window's length in seconds (the training must outlast it: give it steps)
    #[arg(long, default_value_t = 10.0)]
    profile_window: f64,
}

fn main() -> Result<(), Box<dyn Error>> {
    let cli = Cli::parse();
    example_common::app_log::set_app_log(cli.app_log);
    let devices = cli.devices.choose()?;
    // Every piece but `training` runs on one device; a multi-device `training` would not be
    // comparable with them.
    if devices.len() > 1 {
        return Err(format!(
            "learner_overhead measures burn-train's single-device loop, but --devices names {}              devices ({:?}); give one device (the transformer example trains on several)",
            devices.len(),
            devices
        )
        .into());
    }
    let device = devices[0].clone();
    let text = read_text(cli.text.unwrap_or_else(shipped_shakespeare))?;
    let prepared = PreparedText::new(&text, 0.1);
    let config = CharLmTraining {
        seq_len: cli.seq_len,
        d_model: cli.d_model,
        n_heads: cli.heads,
        n_layers: cli.layers,
        d_ff: 4 * cli.d_model,
        epochs: 1,
        batch_size: cli.batch_size,
        items_per_epoch: Some((cli.warmup + cli.steps) * cli.batch_size),
        valid_items: Some(cli.batch_size),
        num_workers: cli.workers,
        artifact_dir: std::env::temp_dir().join(format!("learner-overhead-{}", std::process::id())),
        quiet: !cli.log,
        ..CharLmTraining::default()
    };
    let windows = CharWindows::new(prepared.train.clone(), config.seq_len);
    if windows.len() < config.batch_size {
        return Err(format!(
            "the text has {} windows of {} characters, fewer than a batch of {}",
            windows.len(),
            config.seq_len + 1,
            config.batch_size
        )
        .into());
    }
    println!(
        "backend {} on {device}; {} layers, d_model {}, {} heads, context {}, batch {}; {} steps \
after {} of warm-up per piece",
        backend_type_name(cli.devices.backend, &device),
        config.n_layers,
        config.d_model,
        config.n_heads,
        config.seq_len,
        config.batch_size,
        cli.steps,
        cli.warmup
    );
    let job = Job {
        pieces: cli.pieces,
        steps: cli.steps,
        warmup: cli.warmup,
        blocks: cli.blocks,
        profile_after: cli.profile_after,
        profile_window: cli.profile_window,
        prepared,
        windows,
        config,
    };
    run_on(cli.devices.backend, &devices, job)
}

struct Job {
    pieces: Vec<Piece>,
    steps: usize,
    warmup: usize,
    blocks: Option<usize>,
    profile_after: f64,
    profile_window: f64,
    prepared: PreparedText,
    windows: CharWindows,
    config: CharLmTraining,
}

/// Adam's learning rate in the pieces that do not schedule it (the time of a step does not
/// depend on it).
const LEARNING_RATE: f64 = 1e-4;

/// Thread CPU times over `window` seconds that open `after` seconds from now, read on a thread
/// of their own while the training runs (burn-train's threads end with it): the share of one
/// core per role and the busiest threads by name. `None` if the training was `done` before the
/// window closed (its threads are gone, so the window would not see them).
fn profile_window(
    after: f64,
    window: f64,
    done: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Option<String>> {
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs_f64(after));
        let start = (ThreadCpu::snapshot().ok()?, Instant::now());
        std::thread::sleep(Duration::from_secs_f64(window));
        let end = ThreadCpu::snapshot().ok()?;
        if done.load(Ordering::Acquire) {
            return None;
        }
        let wall = start.1.elapsed();
        let roles = end.since(&start.0, wall);
        let share = |cpu: Duration| cpu.as_secs_f64() / wall.as_secs_f64() * 100.0;
        let mut report = format!(
            "  thread CPU over {:.1} s of training (share of one core):\n",
            wall.as_secs_f64()
        );
        for role in ROLES {
            let cpu = roles.per_step(role, 1);
            if !cpu.is_zero() {
                report.push_str(&format!("  {role:<10} {:>6.1}%\n", share(cpu)));
            }
        }
        for (name, tid, cpu) in end.busiest_since(&start.0, 8) {
            report.push_str(&format!(
                "    {name:<16} tid {tid:>7} {:>6.1}%\n",
                share(cpu)
            ));
        }
        Some(report)
    })
}

impl BackendJob for Job {
    type Output = Result<(), Box<dyn Error>>;

    fn run<B: TrainingBackend>(self, devices: Vec<B::Device>) -> Self::Output {
        let device = devices[0].clone();
        let mut bare = None;
        println!("piece     median ms/step  vs bare");
        let mut cpu = None;
        for &piece in &self.pieces {
            B::seed(&device, self.config.seed);
            let ms = match piece {
                Piece::Training => {
                    let done = Arc::new(AtomicBool::new(false));
                    let window =
                        profile_window(self.profile_after, self.profile_window, done.clone());
                    let trained = train::<B>(&devices, &self.prepared, &self.config);
                    done.store(true, Ordering::Release);
                    let trained = trained?;
                    match window.join().expect("the profiling thread does not panic") {
                        Some(report) => print!("{report}"),
                        None => println!(
                            "  (no thread CPU window: the training ended within {:.0} s; give it more --steps)",
                            self.profile_after + self.profile_window
                        ),
                    }
                    trained
                        .log
                        .last()
                        .and_then(|epoch| epoch.step_seconds)
                        .ok_or("the training logged no step time")?
                        * 1e3
                }
                _ => {
                    let (times, threads) = self.time_steps::<B>(piece, &device);
                    cpu = Some(threads);
                    if let Some(block) = self.blocks {
                        let medians: Vec<String> = times[self.warmup.min(times.len())..]
                            .chunks(block)
                            .map(|chunk| format!("{:.2}", median_ms(chunk, 0)))
                            .collect();
                        println!("  medians of {block} steps: {}", medians.join(" "));
                    }
                    median_ms(&times, self.warmup)
                }
            };
            let base = *bare.get_or_insert(ms);
            println!(
                "{:<9} {ms:>14.2}  {:>6.3}x",
                format!("{piece:?}").to_lowercase(),
                ms / base
            );
            if let Some(threads) = cpu.take() {
                match threads {
                    Ok(threads) => print!("{}", threads.table(self.steps)),
                    Err(err) => println!("  (thread CPU times not read: {err})"),
                }
            }
        }
        std::fs::remove_dir_all(&self.config.artifact_dir).ok();
        Ok(())
    }
}

impl Job {
    fn model<B: AutodiffBackend>(&self, device: &B::Device) -> CharLm<B> {
        CharLmConfig::new(self.prepared.tokenizer.vocab_size(), self.config.seq_len)
            .with_d_model(self.config.d_model)
            .with_n_heads(self.config.n_heads)
            .with_n_layers(self.config.n_layers)
            .with_d_ff(self.config.d_ff)
            .with_dropout(self.config.dropout)
            .init(device)
    }

    fn loader<B: AutodiffBackend>(
        &self,
        device: &B::Device,
    ) -> std::sync::Arc<dyn DataLoader<B, CharLmBatch<B>>> {
        let items = (self.warmup + self.steps) * self.config.batch_size;
        let dataset = SamplerDataset::new(
            self.windows.clone(),
            SamplerDatasetOptions::default()
                .with_replacement()
                .with_fixed_size(items)
                .with_seed(self.config.seed),
        );
        DataLoaderBuilder::<B, _, _>::new(CharLmBatcher)
            .batch_size(self.config.batch_size)
            .num_workers(self.config.num_workers)
            .set_device(device.clone())
            .build(dataset)
    }

    /// The wall-clock time of every step of `piece` (warm-up included), step start to step
    /// start, and the CPU time of each kind of thread over the steps after the warm-up.
    fn time_steps<B: TrainingBackend>(
        &self,
        piece: Piece,
        device: &B::Device,
    ) -> (Vec<Duration>, std::io::Result<CpuByRole>) {
        let total = self.warmup + self.steps;
        let fixed: CharLmBatch<B> = {
            let items: Vec<CharLmItem> = (0..self.config.batch_size)
                .map(|i| self.windows.get(i).expect("checked: a batch of windows"))
                .collect();
            CharLmBatcher.batch(items, device)
        };
        let mut times = Vec::with_capacity(total);
        let mut start = Instant::now();
        // Thread CPU times once the warm-up steps are done (all of them if there are none).
        let mut timed_from = (self.warmup == 0).then(|| (ThreadCpu::snapshot(), Instant::now()));
        let warmup = self.warmup;
        let mut lap = |times: &mut Vec<Duration>| {
            let now = Instant::now();
            times.push(now - start);
            start = now;
            if times.len() == warmup {
                timed_from = Some((ThreadCpu::snapshot(), Instant::now()));
            }
        };
        match piece {
            Piece::Bare | Piece::Clone | Piece::Read | Piece::Loader => {
                let mut model = Some(self.model::<B>(device));
                let mut optim = B::adam::<CharLm<B>>();
                // Only `loader` starts the loader's workers: they upload batches ahead.
                let loader = (piece == Piece::Loader).then(|| self.loader::<B>(device));
                let mut batches = loader.as_ref().map(|loader| loader.iter());
                for _ in 0..total {
                    let batch = match &mut batches {
                        Some(batches) => batches.next().expect("the loader has a batch per step"),
                        None => fixed.clone(),
                    };
                    let current = model
                        .take()
                        .expect("the model is put back after every step");
                    let output = current.forward_loss(batch);
                    let grads = GradientsParams::from_grads(output.loss.backward(), &current);
                    model = Some(if piece == Piece::Clone {
                        // The original stays alive until the step is queued, as in the Learner.
                        let stepped = optim.step(LEARNING_RATE, current.clone(), grads);
                        drop(current);
                        stepped
                    } else {
                        optim.step(LEARNING_RATE, current, grads)
                    });
                    if piece == Piece::Read {
                        Transaction::default()
                            .register(output.logits)
                            .register(output.loss)
                            .register(output.targets)
                            .execute();
                    } else {
                        drop(output);
                        B::sync(device).expect("device sync failed");
                    }
                    lap(&mut times);
                }
            }
            Piece::Learner => {
                let mut learner = Learner::new(self.model::<B>(device), B::adam(), LEARNING_RATE);
                let loader = ReadsAtNextBatch::wrap(self.loader::<B>(device));
                let mut batches = loader.iter();
                // A step's read runs when the next batch is asked for, so each output is synced
                // after that.
                let mut previous = None;
                for batch in batches.by_ref() {
                    if let Some(output) = previous.take() {
                        ItemLazy::sync(output);
                        lap(&mut times);
                    }
                    learner.lr_step();
                    let output = learner.train_step(batch);
                    learner.optimizer_step(output.grads);
                    previous = Some(output.item);
                }
                drop(batches);
                if let Some(output) = previous {
                    ItemLazy::sync(output);
                    lap(&mut times);
                }
            }
            Piece::Training => unreachable!("timed by its own log"),
        }
        let threads = match timed_from {
            Some((Ok(before), from)) => {
                ThreadCpu::snapshot().map(|after| after.since(&before, from.elapsed()))
            }
            Some((Err(err), _)) => Err(err),
            None => Err(std::io::Error::other("no step ran after the warm-up")),
        };
        (times, threads)
    }
}

fn median_ms(times: &[Duration], warmup: usize) -> f64 {
    let mut kept: Vec<f64> = times
        .iter()
        .skip(warmup)
        .map(|t| t.as_secs_f64() * 1e3)
        .collect();
    assert!(!kept.is_empty(), "no timed steps");
    kept.sort_by(f64::total_cmp);
    kept[kept.len() / 2]
}
