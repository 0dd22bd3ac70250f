//! A line-oriented renderer for burn-train's `Learner`, and the per-epoch record it keeps.
//!
//! burn-train 0.21 shows progress with its terminal UI (feature `tui`, not enabled here) or,
//! without it, prints the debug form of every step. [`LineRenderer`] implements burn-train's
//! [`MetricsRenderer`] instead: a progress line every tenth of an epoch and a summary line per
//! epoch, readable in a terminal and in CI logs alike. It also keeps what it shows in a shared
//! [`TrainingLog`]: each epoch's mean metrics for both splits, its wall-clock time, and every
//! training step's loss, which the examples print and the tests assert on.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use burn::train::LearnerSummary;
use burn::train::metric::{MetricDefinition, MetricId, NumericEntry};
use burn::train::renderer::{
    EvaluationName, EvaluationProgress, MetricState, MetricsRenderer, MetricsRendererEvaluation,
    MetricsRendererTraining, ProgressType, TrainingProgress,
};

/// One finished epoch: means of the numeric metrics over the epoch (by metric name, e.g.
/// `"Loss"`, `"Accuracy"`), and the wall-clock seconds from the end of the previous epoch (or the
/// start of training) to the end of this epoch's validation.
#[derive(Clone, Debug, Default)]
pub struct EpochRecord {
    /// 1-based epoch number.
    pub epoch: usize,
    /// Training-split means.
    pub train: BTreeMap<String, f64>,
    /// Validation-split means.
    pub valid: BTreeMap<String, f64>,
    /// Seconds spent on the epoch, training and validation.
    pub seconds: f64,
    /// Steady-state seconds per training step: the time between the training steps after the
    /// first tenth of the epoch (compilation and autotuning happen there) and the last one,
    /// divided by their count. `None` with fewer than 10 steps.
    pub step_seconds: Option<f64>,
}

/// What a training run logged: finished epochs and the loss of every training step.
#[derive(Clone, Debug, Default)]
pub struct TrainingLog {
    /// Finished epochs, in order.
    pub epochs: Vec<EpochRecord>,
    /// The `"Loss"` metric of every training step, in order.
    pub step_losses: Vec<f64>,
    /// When the first training step reported its loss.
    pub first_step: Option<FirstStep>,
}

/// Time to the first training step: what compiling kernels and tuning them cost a user before
/// training starts (caches make it short, see the README's "Caches").
#[derive(Clone, Copy, Debug)]
pub struct FirstStep {
    /// Seconds from [`mark_process_start`] (the example's `main`) to the first step's loss.
    pub since_process_start: f64,
    /// Seconds from the Learner's start (its metrics registered) to the first step's loss.
    pub since_learner_start: f64,
}

static PROCESS_START: OnceLock<Instant> = OnceLock::new();

/// Records now as the start of the process, for [`FirstStep::since_process_start`]; the first
/// call wins. Without it, the renderer's creation counts as the start.
pub fn mark_process_start() {
    PROCESS_START.get_or_init(Instant::now);
}

impl TrainingLog {
    /// The last finished epoch.
    pub fn last(&self) -> Option<&EpochRecord> {
        self.epochs.last()
    }

    /// The mean loss of the first `n` training steps and of the last `n`: whether training
    /// lowered the loss, without one noisy step deciding.
    ///
    /// # Panics
    /// With fewer than `2 * n` steps logged.
    pub fn first_and_last_means(&self, n: usize) -> (f64, f64) {
        let losses = &self.step_losses;
        assert!(losses.len() >= 2 * n, "only {} steps logged", losses.len());
        let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
        (mean(&losses[..n]), mean(&losses[losses.len() - n..]))
    }
}

/// A [`TrainingLog`] shared between a renderer (which runs on burn-train's event thread) and
/// the code that reads it after training.
pub type SharedLog = Arc<Mutex<TrainingLog>>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Split {
    Train,
    Valid,
}

#[derive(Clone, Copy, Debug, Default)]
struct Mean {
    sum: f64,
    count: f64,
}

impl Mean {
    fn add(&mut self, entry: &NumericEntry) {
        let (value, count) = match entry {
            NumericEntry::Value(v) => (*v, 1.0),
            NumericEntry::Aggregated {
                aggregated_value,
                count,
            } => (*aggregated_value, *count as f64),
        };
        if value.is_finite() && count > 0.0 {
            self.sum += value * count;
            self.count += count;
        }
    }

    fn get(&self) -> f64 {
        self.sum / self.count
    }
}

/// A burn-train [`MetricsRenderer`] printing one line per tenth of an epoch and one per epoch
/// (see the [module docs](self)).
pub struct LineRenderer {
    log: SharedLog,
    quiet: bool,
    names: HashMap<MetricId, String>,
    /// Metric updates of the item being processed, applied when its progress arrives.
    pending: Vec<(Split, String, NumericEntry)>,
    means: HashMap<(Split, String), Mean>,
    epoch: usize,
    epochs_total: usize,
    epoch_start: Instant,
    start: Instant,
    printed_tenth: Option<usize>,
    /// When each training step of the current epoch reported its loss.
    step_times: Vec<Instant>,
    /// Training items burn-train reports per optimizer step: one per device (see
    /// [`LineRenderer::with_devices`]).
    items_per_step: usize,
    /// Losses of the current step's items reported so far.
    step_items: Vec<f64>,
    /// The start [`FirstStep::since_process_start`] counts from.
    process_start: Instant,
}

impl LineRenderer {
    /// A renderer writing to `log`; with `quiet` it prints nothing (tests).
    pub fn new(log: SharedLog, quiet: bool) -> Self {
        Self {
            log,
            quiet,
            names: HashMap::new(),
            pending: Vec::new(),
            means: HashMap::new(),
            epoch: 0,
            epochs_total: 0,
            epoch_start: Instant::now(),
            start: Instant::now(),
            printed_tenth: None,
            step_times: Vec::new(),
            items_per_step: 1,
            step_items: Vec::new(),
            process_start: *PROCESS_START.get().unwrap_or(&Instant::now()),
        }
    }

    /// Training on `devices` devices: burn-train's multi-device strategy reports one item per
    /// device and step; the log then keeps one loss (their mean: the devices' batches are equal)
    /// and one time per optimizer step, so step times and loss curves compare with one device's.
    pub fn with_devices(mut self, devices: usize) -> Self {
        self.items_per_step = devices.max(1);
        self
    }

    fn update(&mut self, split: Split, state: MetricState) {
        if let MetricState::Numeric(entry, numeric) = state
            && let Some(name) = self.names.get(&entry.metric_id)
        {
            self.pending.push((split, name.clone(), numeric));
        }
    }

    fn means_line(&self, split: Split) -> String {
        let mut parts: Vec<(String, f64)> = self
            .means
            .iter()
            .filter(|((s, _), m)| *s == split && m.count > 0.0)
            .map(|((_, name), m)| (name.clone(), m.get()))
            .collect();
        parts.sort_by(|a, b| a.0.cmp(&b.0).reverse()); // "Loss" before "Accuracy"
        parts
            .iter()
            .map(|(name, v)| format_metric(name, *v))
            .collect::<Vec<_>>()
            .join("  ")
    }

    fn render(&mut self, split: Split, item: TrainingProgress) {
        let epoch = item.global_progress.items_processed;
        if split == Split::Train && epoch != self.epoch {
            // A new epoch begins: the previous one, if any, ended without a validation pass.
            if self.epoch != 0 && self.means.keys().any(|(s, _)| *s == Split::Train) {
                self.finish_epoch();
            }
            self.epoch = epoch;
            self.epochs_total = item.global_progress.items_total;
            self.printed_tenth = None;
        }
        for (s, name, entry) in std::mem::take(&mut self.pending) {
            if s == Split::Train && name == "Loss" {
                let mut m = Mean::default();
                m.add(&entry);
                self.step_items.push(m.get());
                if self.step_items.len() == self.items_per_step {
                    let loss = self.step_items.drain(..).sum::<f64>() / self.items_per_step as f64;
                    let mut log = self.log.lock().unwrap();
                    log.step_losses.push(loss);
                    if log.first_step.is_none() {
                        let first = FirstStep {
                            since_process_start: self.process_start.elapsed().as_secs_f64(),
                            since_learner_start: self.start.elapsed().as_secs_f64(),
                        };
                        log.first_step = Some(first);
                        if !self.quiet {
                            println!(
                                "first training step done {:.1} s after the start ({:.1} s after \
the Learner started)",
                                first.since_process_start, first.since_learner_start
                            );
                        }
                    }
                    drop(log);
                    self.step_times.push(Instant::now());
                }
            }
            self.means.entry((s, name)).or_default().add(&entry);
        }
        let Some(progress) = item.progress else {
            return;
        };
        let total = progress.items_total.max(1);
        let done = progress.items_processed.min(total);
        let tenth = done * 10 / total;
        let label = match split {
            Split::Train => "train",
            Split::Valid => "valid",
        };
        if split == Split::Train && self.printed_tenth != Some(tenth) && !self.quiet {
            self.printed_tenth = Some(tenth);
            println!(
                "epoch {}/{} {label} {done:>6}/{total} items  {}  [{:.1} s]",
                self.epoch,
                self.epochs_total,
                self.means_line(split),
                self.epoch_start.elapsed().as_secs_f64()
            );
        }
        if split == Split::Valid && done == total {
            if !self.quiet {
                println!(
                    "epoch {}/{} {label} {done:>6}/{total} items  {}  [{:.1} s]",
                    self.epoch,
                    self.epochs_total,
                    self.means_line(split),
                    self.epoch_start.elapsed().as_secs_f64()
                );
            }
            self.finish_epoch();
        }
    }

    fn finish_epoch(&mut self) {
        let mut record = EpochRecord {
            epoch: self.epoch,
            seconds: self.epoch_start.elapsed().as_secs_f64(),
            step_seconds: steady_step_seconds(&self.step_times),
            ..Default::default()
        };
        self.step_times.clear();
        self.step_items.clear();
        for ((split, name), mean) in self.means.drain() {
            if mean.count > 0.0 {
                match split {
                    Split::Train => record.train.insert(name, mean.get()),
                    Split::Valid => record.valid.insert(name, mean.get()),
                };
            }
        }
        self.epoch_start = Instant::now();
        self.log.lock().unwrap().epochs.push(record);
    }
}

/// Seconds per step from the step after the first tenth to the last (see
/// [`EpochRecord::step_seconds`]).
fn steady_step_seconds(times: &[Instant]) -> Option<f64> {
    if times.len() < 10 {
        return None;
    }
    let first = times.len() / 10;
    let last = times.len() - 1;
    let span = times[last].duration_since(times[first]).as_secs_f64();
    Some(span / (last - first) as f64)
}

/// `Loss 0.1234`, `Accuracy 97.50%`: how the examples print a metric's value.
pub fn format_metric(name: &str, value: f64) -> String {
    if name == "Accuracy" {
        format!("{name} {value:.2}%")
    } else {
        format!("{name} {value:.4}")
    }
}

impl MetricsRendererTraining for LineRenderer {
    fn update_train(&mut self, state: MetricState) {
        self.update(Split::Train, state);
    }

    fn update_valid(&mut self, state: MetricState) {
        self.update(Split::Valid, state);
    }

    fn render_train(&mut self, item: TrainingProgress, _indicators: Vec<ProgressType>) {
        self.render(Split::Train, item);
    }

    fn render_valid(&mut self, item: TrainingProgress, _indicators: Vec<ProgressType>) {
        self.render(Split::Valid, item);
    }

    fn on_train_end(
        &mut self,
        summary: Option<LearnerSummary>,
    ) -> Result<(), Box<dyn core::error::Error>> {
        if self.means.values().any(|m| m.count > 0.0) {
            self.finish_epoch();
        }
        if !self.quiet {
            println!(
                "training done in {:.1} s",
                self.start.elapsed().as_secs_f64()
            );
            if let Some(summary) = summary {
                println!("{summary}");
            }
        }
        Ok(())
    }
}

impl MetricsRendererEvaluation for LineRenderer {
    fn update_test(&mut self, _name: EvaluationName, _state: MetricState) {}

    fn render_test(&mut self, _item: EvaluationProgress, _indicators: Vec<ProgressType>) {}
}

/// Seconds between two lines of [`first_step_progress`].
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// While the first training step is being prepared (its kernels compiled and tuned for this
/// device: a minute on a CPU-only machine with empty caches), a line every [`PROGRESS_EVERY`]
/// saying so, with the number of kernel shapes tuned so far (the tuning results stored under
/// the cache root meanwhile: CubeCL's tuners' and ruda's), until the first step reports its
/// loss to `log`. A thread of its own: the training thread is busy inside that step.
fn first_step_progress(log: SharedLog, start: Instant) {
    let root = ruda_runtime::autotune::settings::cache_root();
    let stored_before = ruda_runtime::autotune::stored_results();
    let spawned = std::thread::Builder::new()
        .name("first-step-progress".into())
        .spawn(move || {
            loop {
                std::thread::sleep(PROGRESS_EVERY);
                let done = log.lock().map_or(true, |log| log.first_step.is_some());
                if done {
                    return;
                }
                let tuned = ruda_runtime::autotune::stored_results().saturating_sub(stored_before);
                println!(
                    "preparing the first training step, {:.0} s: compiling the kernels it needs \
                     on this device and tuning them, {tuned} kernel shapes tuned so far (the \
                     tuning results are kept under {} for the next run)",
                    start.elapsed().as_secs_f64(),
                    root.display()
                );
            }
        });
    if let Err(err) = spawned {
        eprintln!("first-step progress: {err}");
    }
}

impl MetricsRenderer for LineRenderer {
    fn manual_close(&mut self) {}

    fn register_metric(&mut self, definition: MetricDefinition) {
        if self.names.is_empty() {
            // The learner registers its metrics once, just before the first step.
            self.start = Instant::now();
            self.epoch_start = self.start;
            if !self.quiet {
                first_step_progress(self.log.clone(), self.process_start);
            }
        }
        self.names.insert(definition.metric_id, definition.name);
    }
}
