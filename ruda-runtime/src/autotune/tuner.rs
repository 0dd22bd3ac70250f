//! What every ruda tuner shares: running a `TunableSet` through CubeCL's persistent tuner or,
//! without a fingerprint, through an in-process one; the process's counters; the record of the
//! candidates chosen; the synthetic inputs candidates are benchmarked on.
//!
//! An op's `tune/` module owns its key, its candidates and its `TunableSet`s, and calls
//! [`execute`] with them (see `layer_norm/tune/` and `softmax/tune/`).

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use burn_backend::DType;
use cubecl::{
    benchmark::{BenchmarkComputations, BenchmarkDurations},
    client::ComputeClient,
    tune::{AutotuneKey, AutotuneOutput, LocalTuner, Tunable, TunableSet, tune_benchmark},
    zspace::Shape,
};

use super::{cache_files, identity, settings};
use crate::tensor_buffer::TensorBuffer;

/// The cache id recorded for results kept in memory (a device without a fingerprint).
pub const IN_PROCESS_ID: &str = "in-process";

/// Counters of this process, over every ruda tuner, for tests and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AutotuneStats {
    /// Keys tuned (one per cache miss).
    pub tuning_passes: u64,
    /// Candidate executions on benchmark inputs (warm-up and timed runs; a candidate that
    /// cannot run the shape launches nothing and is not counted).
    pub benchmark_runs: u64,
    /// Wall-clock microseconds of the calls that tuned a key: compiling and benchmarking the
    /// candidates, then running the chosen one (what tuning adds to a cold start).
    pub tuning_micros: u64,
}

// Relaxed: each counter is read on its own, for reports; no other memory depends on them.
static TUNING_PASSES: AtomicU64 = AtomicU64::new(0);
static BENCHMARK_RUNS: AtomicU64 = AtomicU64::new(0);
static TUNING_MICROS: AtomicU64 = AtomicU64::new(0);

/// The counters of ruda's tuners in this process.
pub fn stats() -> AutotuneStats {
    AutotuneStats {
        tuning_passes: TUNING_PASSES.load(Ordering::Relaxed),
        benchmark_runs: BENCHMARK_RUNS.load(Ordering::Relaxed),
        tuning_micros: TUNING_MICROS.load(Ordering::Relaxed),
    }
}

/// Counts one key being tuned: a tuner's input generator calls it (CubeCL calls the generator
/// once per cache miss).
pub(crate) fn count_tuning_pass() {
    TUNING_PASSES.fetch_add(1, Ordering::Relaxed);
}

/// Counts one candidate run on benchmark inputs.
pub(crate) fn count_benchmark_run() {
    BENCHMARK_RUNS.fetch_add(1, Ordering::Relaxed);
}

/// The candidate a tuner chose for a key, as recorded when it ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChosenVariant {
    /// `ruda-fp<hash>` for a persistent cache, [`IN_PROCESS_ID`] without a fingerprint.
    pub cache_id: String,
    /// The tuner (its cache file's name), e.g. `layer-norm-forward`.
    pub tuner: &'static str,
    /// The key, as the tuner prints it.
    pub key: String,
    /// The candidate's name.
    pub candidate: String,
}

static CHOSEN: Mutex<Vec<ChosenVariant>> = Mutex::new(Vec::new());

/// Every choice made in this process (each tuner and key once, in the order first run).
pub fn chosen_variants() -> Vec<ChosenVariant> {
    CHOSEN.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Records that `candidate` ran a caller's shape of `key` (the first time only).
pub(crate) fn record_choice(
    cache_id: &str,
    tuner: &'static str,
    key: &impl Display,
    candidate: String,
) {
    let key = key.to_string();
    let mut chosen = CHOSEN.lock().unwrap_or_else(|e| e.into_inner());
    if !chosen
        .iter()
        .any(|c| c.cache_id == cache_id && c.tuner == tuner && c.key == key)
    {
        chosen.push(ChosenVariant {
            cache_id: cache_id.into(),
            tuner,
            key,
            candidate,
        });
    }
}

/// The persistent cache id of `client`'s device for `tuner`, after preparing its file (once per
/// process, id and tuner); `None` without a fingerprint.
pub(crate) fn persistent_cache_id<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    tuner: &'static str,
) -> Option<String> {
    let identity = identity::identity_or_default(client);
    let id = identity.ruda_cache_id()?;
    static PREPARED: Mutex<Vec<(String, &'static str)>> = Mutex::new(Vec::new());
    let mut prepared = PREPARED.lock().unwrap_or_else(|e| e.into_inner());
    if !prepared.iter().any(|(i, t)| *i == id && *t == tuner) {
        let root = settings::cache_root();
        cache_files::prepare(&cache_files::cache_file(&root, &id, tuner));
        prepared.push((id.clone(), tuner));
    }
    Some(id)
}

/// The `TunableSet` of an op's `candidates`: keyed by `key`, benchmarked on what `inputs` makes
/// of a call, each candidate named by `name` (its name in CubeCL's cache, whose checksum covers
/// the names in order) and run by `run`.
pub(crate) fn candidate_set<K, I, O, C>(
    candidates: &[C],
    key: fn(&I) -> K,
    inputs: fn(&K, &I) -> I,
    name: fn(&C) -> String,
    run: fn(C, I) -> Result<O, String>,
) -> TunableSet<K, I, O>
where
    K: AutotuneKey,
    I: Clone + Send + Sync + 'static,
    O: AutotuneOutput,
    C: Copy + Send + Sync + 'static,
{
    candidates
        .iter()
        .fold(TunableSet::new(key, inputs), |set, &candidate| {
            set.with(Tunable::new(&name(&candidate), move |inputs: I| {
                run(candidate, inputs)
            }))
        })
}

/// Runs the tuned call `inputs` with the fastest candidate of `set` for its key: CubeCL's
/// `tuner` (named `name`, its cache file's name) with the persistent cache `cache_id`, or,
/// without one, the in-process tuner. The
/// call's wall-clock time is added to [`AutotuneStats::tuning_micros`] when it tuned a key.
pub(crate) fn execute<R, K, I, O>(
    client: &ComputeClient<R>,
    tuner: &'static LocalTuner<K, String>,
    name: &'static str,
    set: Arc<TunableSet<K, I, O>>,
    cache_id: Option<String>,
    inputs: I,
) -> O
where
    R: cubecl::Runtime,
    K: AutotuneKey,
    I: Clone + Send + Sync + 'static,
    O: AutotuneOutput,
{
    let passes = TUNING_PASSES.load(Ordering::Relaxed);
    let start = std::time::Instant::now();
    let out = match cache_id {
        Some(id) => tuner.execute(&id, client, set, inputs),
        None => execute_in_process(client, name, set, inputs),
    };
    if TUNING_PASSES.load(Ordering::Relaxed) != passes {
        TUNING_MICROS.fetch_add(start.elapsed().as_micros() as u64, Ordering::Relaxed);
    }
    out
}

/// (server, tuner, key) of an in-process result; the key as its `Debug` text, so that one map
/// serves every tuner.
type InProcessKey = (usize, &'static str, String);

/// The in-process tuner's results, for devices without a fingerprint.
///
/// CubeCL's `LocalTuner` cannot be used there: its cache always reads and appends the file
/// `<root>/autotune/<version>/<id>/<name>.json.log` (CubeCL built with `std` has no memory-only
/// mode), and without a fingerprint there is no id under which results could be trusted by a
/// later process. So results live in this map for the life of the process; the candidates,
/// inputs and timing are the same `TunableSet` and CubeCL's own `tune_benchmark`.
static IN_PROCESS: Mutex<Option<HashMap<InProcessKey, usize>>> = Mutex::new(None);

fn execute_in_process<R, K, I, O>(
    client: &ComputeClient<R>,
    tuner: &'static str,
    set: Arc<TunableSet<K, I, O>>,
    inputs: I,
) -> O
where
    R: cubecl::Runtime,
    K: AutotuneKey,
    I: Clone + Send + Sync + 'static,
    O: AutotuneOutput,
{
    let key = set.generate_key(&inputs);
    let map_key = (identity::server_key(client), tuner, format!("{key:?}"));
    let known = IN_PROCESS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|m| m.get(&map_key).copied());
    let index = match known {
        Some(index) => index,
        None => {
            // Tuned without holding the lock; two threads tuning one key both store the same
            // kind of answer.
            let bench_inputs = set.generate_inputs(&key, &inputs);
            let mut best: Option<(u64, usize)> = None;
            for (index, op) in set.autotunables().enumerate() {
                let Ok(profiles) = tune_benchmark(op, bench_inputs.clone(), client.clone()) else {
                    continue;
                };
                let Some(method) = profiles.first().map(|p| p.timing_method()) else {
                    continue;
                };
                let durations = profiles
                    .into_iter()
                    .map(|p| cubecl::future::block_on(p.resolve()).duration())
                    .collect();
                let score = BenchmarkComputations::new(&BenchmarkDurations::from_durations(
                    method, durations,
                ))
                .score();
                if best.is_none_or(|(s, _)| score < s) {
                    best = Some((score, index));
                }
            }
            let (_, index) =
                best.unwrap_or_else(|| panic!("{tuner} autotune: no candidate could run {key}"));
            IN_PROCESS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert_with(HashMap::new)
                .insert(map_key, index);
            index
        }
    };
    set.fastest(index)
        .execute(inputs)
        .unwrap_or_else(|err| panic!("{tuner}: the chosen candidate failed on {key}: {err:?}"))
}

/// Deterministic values in [-1, 1), uploaded as `dtype`: the benchmark inputs
/// of the tuners (`seed` makes distinct tensors).
pub(crate) fn synthetic<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    shape: &[usize],
    dtype: DType,
    seed: u64,
) -> TensorBuffer {
    let n: usize = shape.iter().product();
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let values: Vec<f32> = (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect();
    TensorBuffer::from_f32s(client, &values, Shape::from(shape.to_vec()), dtype)
}
