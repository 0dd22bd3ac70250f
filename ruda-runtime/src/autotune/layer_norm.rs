//! LayerNorm autotuning: the key and its buckets, the candidates, the inputs the candidates are
//! benchmarked on, and the two tuners (CubeCL's persistent one, and an in-process one for
//! devices without a fingerprint).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use burn_backend::DType;
use cubecl::{
    benchmark::{BenchmarkComputations, BenchmarkDurations},
    client::ComputeClient,
    tune::{AutotuneKey, AutotuneOutput, LocalTuner, Tunable, TunableSet, tune_benchmark},
    zspace::Shape,
};
use serde::{Deserialize, Serialize};

use super::{cache_files, identity, settings};
use crate::layer_norm::{
    Choice, ColumnSums, Variant, backward, forward,
    validate::{check_backward, check_forward},
};
use crate::layout::vector_size;
use crate::tensor_buffer::TensorBuffer;

/// Largest tuning problem, in elements: the representative shape of a bucket is cut to this
/// many elements (fewer rows), so that tuning a huge shape does not allocate gigabytes.
pub const MAX_TUNE_ELEMENTS: usize = 1 << 24;

/// The element type in a [`LayerNormKey`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TuneDType {
    /// f32.
    F32,
    /// f16.
    F16,
    /// bf16.
    BF16,
}

impl TuneDType {
    fn of(dtype: DType) -> Self {
        match dtype {
            DType::F16 => Self::F16,
            DType::BF16 => Self::BF16,
            // Validation rejects every other dtype before a key is made.
            _ => Self::F32,
        }
    }

    fn dtype(self) -> DType {
        match self {
            Self::F32 => DType::F32,
            Self::F16 => DType::F16,
            Self::BF16 => DType::BF16,
        }
    }
}

/// The autotune key of a LayerNorm call: one tuning result serves every call with the same key.
///
/// Buckets (documented in the README, "Autotuning"):
/// - `d_bucket`: the smallest of 1, 2, 3, 4, 6, 8, 12, ... (powers of two and 1.5 times powers
///   of two) that is `>= d`, so 768 and 1024 are tuned apart but 1000 shares 1024's result;
/// - `vector`: the widest vector the device loads for rows of `d` elements of this dtype (the
///   largest of the device's vector sizes that divides `d`): an odd `d` is read as scalars and
///   tuned apart from an even one;
/// - `rows_bucket`: the next power of two `>= rows`;
/// - `dtype`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LayerNormKey {
    /// Upper bound of the `d` bucket.
    pub d_bucket: usize,
    /// Widest vector width for `d`.
    pub vector: usize,
    /// Upper bound of the rows bucket.
    pub rows_bucket: usize,
    /// Element type.
    pub dtype: TuneDType,
}

impl AutotuneKey for LayerNormKey {}

impl core::fmt::Display for LayerNormKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "d<={} vec{} rows<={} {:?}",
            self.d_bucket, self.vector, self.rows_bucket, self.dtype
        )
    }
}

/// Upper bound of the `d` bucket: the smallest power of two or 1.5 times a power of two `>= d`.
pub fn d_bucket(d: usize) -> usize {
    let pow = d.max(1).next_power_of_two();
    let three_quarters = pow / 4 * 3;
    if pow >= 4 && d <= three_quarters {
        three_quarters
    } else {
        pow
    }
}

/// Upper bound of the rows bucket: the next power of two.
pub fn rows_bucket(rows: usize) -> usize {
    rows.max(1).next_power_of_two()
}

impl LayerNormKey {
    /// The key of a call with `rows` rows of `d` elements of `dtype` on `client`'s device.
    pub fn new<R: cubecl::Runtime>(
        client: &ComputeClient<R>,
        d: usize,
        rows: usize,
        dtype: DType,
    ) -> Self {
        Self {
            d_bucket: d_bucket(d),
            vector: vector_size(client, d, dtype.size(), &[]),
            rows_bucket: rows_bucket(rows),
            dtype: TuneDType::of(dtype),
        }
    }

    /// The shape the candidates are benchmarked on: the largest `d` of the bucket with the
    /// key's vector width, and the bucket's rows, cut to [`MAX_TUNE_ELEMENTS`].
    pub fn representative<R: cubecl::Runtime>(&self, client: &ComputeClient<R>) -> (usize, usize) {
        let size = self.dtype.dtype().size();
        let d = (1..=self.d_bucket)
            .rev()
            .find(|&d| vector_size(client, d, size, &[]) == self.vector)
            .unwrap_or(self.d_bucket);
        let rows = self.rows_bucket.min((MAX_TUNE_ELEMENTS / d).max(1));
        (d, rows)
    }
}

/// One autotune candidate: a variant, with the widest usable vector or half of it, and, for
/// the backward pass of the register variants, where the column sums are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The work layout.
    pub variant: Variant,
    /// Half the widest usable vector (more units per row, fewer registers per unit).
    pub narrow: bool,
    /// Where the backward keeps its partial `dgamma`/`dbeta` and `gamma`:
    /// [`ColumnSums::Registers`] in [`CANDIDATES`], [`ColumnSums::SharedMemory`] in the
    /// backward's extra register-variant candidates ([`BACKWARD_CANDIDATES`]). The forward pass
    /// ignores it.
    pub column_sums: ColumnSums,
}

impl Candidate {
    /// A candidate with its column sums in registers.
    pub const fn new(variant: Variant, narrow: bool) -> Self {
        Candidate {
            variant,
            narrow,
            column_sums: ColumnSums::Registers,
        }
    }

    /// The same candidate with the backward's column sums in `column_sums`.
    pub const fn with_column_sums(self, column_sums: ColumnSums) -> Self {
        Candidate {
            column_sums,
            ..self
        }
    }

    /// Its name in the cache and in reports, e.g. `PlanePerRow/widest`, or
    /// `CubePerRow/widest/shared-sums` with the column sums in shared memory.
    pub fn name(&self) -> String {
        let width = if self.narrow { "half" } else { "widest" };
        let sums = match self.column_sums {
            ColumnSums::SharedMemory => "/shared-sums",
            ColumnSums::Registers | ColumnSums::Auto => "",
        };
        format!("{:?}/{width}{sums}", self.variant)
    }

    /// The [`Choice`] this candidate runs with: `strict` as when it is benchmarked (an error
    /// rather than another plan), not strict as when it runs a caller's shape of its key.
    fn choice(&self, strict: bool) -> Choice {
        Choice::Candidate {
            variant: self.variant,
            narrow: self.narrow,
            column_sums: self.column_sums,
            strict,
        }
    }

    /// This candidate's forward pass on the caller's inputs, planned exactly as the tuner
    /// benchmarks it (for tests that check every candidate against a reference).
    ///
    /// Returns `[out, mean, rstd]`, or an error, before anything is launched, when the candidate
    /// cannot run this shape as asked (a register variant whose row does not fit, a half-width
    /// vector where the widest is 1): the tuner skips it there.
    ///
    /// # Panics
    /// As [`layer_norm_forward`] on bad arguments.
    pub fn forward<R: cubecl::Runtime>(
        &self,
        client: &ComputeClient<R>,
        input: TensorBuffer,
        weight: TensorBuffer,
        bias: Option<TensorBuffer>,
        epsilon: f64,
    ) -> Result<[TensorBuffer; 3], String> {
        forward::forward(client, input, weight, bias, epsilon, self.choice(true))
    }

    /// This candidate's backward pass on the caller's inputs, as [`Candidate::forward`].
    ///
    /// Returns `[dx, dgamma, dbeta]`, or an error when the candidate cannot run this shape.
    ///
    /// # Panics
    /// As [`layer_norm_backward`] on bad arguments.
    pub fn backward<R: cubecl::Runtime>(
        &self,
        client: &ComputeClient<R>,
        input: TensorBuffer,
        weight: TensorBuffer,
        grad: TensorBuffer,
        mean: TensorBuffer,
        rstd: TensorBuffer,
    ) -> Result<[TensorBuffer; 3], String> {
        backward::backward(client, input, weight, grad, mean, rstd, self.choice(true))
    }
}

/// Every candidate of the forward pass, and the first of the backward's, in a fixed order
/// (CubeCL's cache checksum is over these names, so a change of the list invalidates old
/// results): the four variants, each with the widest usable vector and with half of it, the
/// backward's column sums in registers. A candidate that cannot run a shape as asked (a register
/// variant whose row does not fit, a half-width vector where the widest is 1, a `UnitPerRow`
/// whose unit would loop past lavapipe's limit of 65535 loop iterations per invocation) fails
/// its benchmark before launching anything and is skipped.
///
/// The tuner only times the candidates; it never compares their results. Every candidate is
/// therefore checked against the f64 reference on its own, forward and backward, at long rows
/// (d = 65536 among them) and short ones: `ruda-runtime/tests/candidates.rs`, `every_candidate`
/// in the root crate's `tests/layer_norm.rs`, and the GPU suite's group "every autotune
/// candidate". (A `UnitPerRow` with half-width vectors once ran at d = 65536 on lavapipe, had
/// its loops cut by that limit, left most of its output unwritten and, doing less work, was
/// chosen as the fastest.)
pub const CANDIDATES: [Candidate; 8] = [
    Candidate::new(Variant::PlanePerRow, false),
    Candidate::new(Variant::CubePerRow, false),
    Candidate::new(Variant::CubePerRowLooped, false),
    Candidate::new(Variant::UnitPerRow, false),
    Candidate::new(Variant::PlanePerRow, true),
    Candidate::new(Variant::CubePerRow, true),
    Candidate::new(Variant::CubePerRowLooped, true),
    Candidate::new(Variant::UnitPerRow, true),
];

/// The backward pass's candidates: [`CANDIDATES`], then the two register variants at both
/// widths with their column sums in shared memory ([`ColumnSums::SharedMemory`]), which is
/// skipped where the cube's slots do not fit in the device's shared memory.
///
/// Where the sums belong is a tuning dimension rather than a fixed threshold because the
/// crossover is not a count of elements a unit: forced both ways on an H200 (f32, forward +
/// backward; `benches/results/2026-12-03-h200-layer-norm-shared-sums.md`), shared memory won
/// 5-10% at 12 and 24 elements a unit (16384x768) and at 32, and lost 3-6% at 16 (16384x4096).
/// [`ColumnSums::Auto`]'s rule remains the choice without tuning (`RUDA_AUTOTUNE=off`).
pub const BACKWARD_CANDIDATES: [Candidate; 12] = {
    const SHARED: ColumnSums = ColumnSums::SharedMemory;
    [
        CANDIDATES[0],
        CANDIDATES[1],
        CANDIDATES[2],
        CANDIDATES[3],
        CANDIDATES[4],
        CANDIDATES[5],
        CANDIDATES[6],
        CANDIDATES[7],
        Candidate::new(Variant::PlanePerRow, false).with_column_sums(SHARED),
        Candidate::new(Variant::CubePerRow, false).with_column_sums(SHARED),
        Candidate::new(Variant::PlanePerRow, true).with_column_sums(SHARED),
        Candidate::new(Variant::CubePerRow, true).with_column_sums(SHARED),
    ]
};

/// Forward or backward: each has its own tuner and cache file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// `layer_norm_forward`.
    Forward,
    /// `layer_norm_backward`.
    Backward,
}

impl Direction {
    /// The tuner's name, which is also its cache file's name.
    pub const fn tuner_name(self) -> &'static str {
        match self {
            Direction::Forward => "layer-norm-forward",
            Direction::Backward => "layer-norm-backward",
        }
    }
}

/// Counters of this process, for tests and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AutotuneStats {
    /// Keys tuned (one per cache miss), forward and backward.
    pub tuning_passes: u64,
    /// Candidate executions on benchmark inputs (warm-up and timed runs; a candidate that
    /// cannot run the shape launches nothing and is not counted).
    pub benchmark_runs: u64,
    /// Wall-clock microseconds of the calls that tuned a key: compiling and benchmarking the
    /// candidates, then running the chosen one (what tuning adds to a cold start).
    pub tuning_micros: u64,
}

static TUNING_PASSES: AtomicU64 = AtomicU64::new(0);
static BENCHMARK_RUNS: AtomicU64 = AtomicU64::new(0);
static TUNING_MICROS: AtomicU64 = AtomicU64::new(0);

/// Runs one tuned call, adding its time to [`AutotuneStats::tuning_micros`] when it tuned a key.
fn timed_if_tuning<T>(call: impl FnOnce() -> T) -> T {
    let passes = TUNING_PASSES.load(Ordering::SeqCst);
    let start = std::time::Instant::now();
    let out = call();
    if TUNING_PASSES.load(Ordering::SeqCst) != passes {
        TUNING_MICROS.fetch_add(start.elapsed().as_micros() as u64, Ordering::SeqCst);
    }
    out
}

/// The counters of ruda's LayerNorm tuners in this process.
pub fn stats() -> AutotuneStats {
    AutotuneStats {
        tuning_passes: TUNING_PASSES.load(Ordering::SeqCst),
        benchmark_runs: BENCHMARK_RUNS.load(Ordering::SeqCst),
        tuning_micros: TUNING_MICROS.load(Ordering::SeqCst),
    }
}

/// The candidate a tuner chose for a key, as recorded when it ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChosenVariant {
    /// `ruda-fp<hash>` for a persistent cache, `in-process` without a fingerprint.
    pub cache_id: String,
    /// Forward or backward.
    pub direction: Direction,
    /// The key.
    pub key: LayerNormKey,
    /// The candidate's [`Candidate::name`].
    pub candidate: String,
}

static CHOSEN: Mutex<Vec<ChosenVariant>> = Mutex::new(Vec::new());

/// Every choice made in this process (each key once, in the order first run).
pub fn chosen_variants() -> Vec<ChosenVariant> {
    CHOSEN.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

fn record_choice(cache_id: &str, direction: Direction, key: LayerNormKey, candidate: Candidate) {
    let mut chosen = CHOSEN.lock().unwrap_or_else(|e| e.into_inner());
    if !chosen
        .iter()
        .any(|c| c.cache_id == cache_id && c.direction == direction && c.key == key)
    {
        chosen.push(ChosenVariant {
            cache_id: cache_id.into(),
            direction,
            key,
            candidate: candidate.name(),
        });
    }
}

/// Outputs of a candidate (`[out, mean, rstd]` or `[dx, dgamma, dbeta]`).
pub(crate) struct Outputs([TensorBuffer; 3]);

impl AutotuneOutput for Outputs {}

/// What a forward candidate runs on.
pub(crate) struct ForwardInputs<R: cubecl::Runtime> {
    client: ComputeClient<R>,
    cache_id: Arc<str>,
    input: TensorBuffer,
    weight: TensorBuffer,
    bias: Option<TensorBuffer>,
    epsilon: f64,
    /// Generated benchmark inputs (counted, strict) rather than the caller's.
    benchmark: bool,
}

impl<R: cubecl::Runtime> Clone for ForwardInputs<R> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            cache_id: self.cache_id.clone(),
            input: self.input.clone(),
            weight: self.weight.clone(),
            bias: self.bias.clone(),
            epsilon: self.epsilon,
            benchmark: self.benchmark,
        }
    }
}

/// What a backward candidate runs on.
pub(crate) struct BackwardInputs<R: cubecl::Runtime> {
    client: ComputeClient<R>,
    cache_id: Arc<str>,
    input: TensorBuffer,
    weight: TensorBuffer,
    grad: TensorBuffer,
    mean: TensorBuffer,
    rstd: TensorBuffer,
    benchmark: bool,
}

impl<R: cubecl::Runtime> Clone for BackwardInputs<R> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            cache_id: self.cache_id.clone(),
            input: self.input.clone(),
            weight: self.weight.clone(),
            grad: self.grad.clone(),
            mean: self.mean.clone(),
            rstd: self.rstd.clone(),
            benchmark: self.benchmark,
        }
    }
}

fn problem_key<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    input: &TensorBuffer,
) -> LayerNormKey {
    let rank = input.shape.num_dims();
    let d = input.shape[rank - 1];
    let rows = input.shape.iter().take(rank - 1).product();
    LayerNormKey::new(client, d, rows, input.dtype)
}

fn forward_key<R: cubecl::Runtime>(inputs: &ForwardInputs<R>) -> LayerNormKey {
    problem_key(&inputs.client, &inputs.input)
}

fn backward_key<R: cubecl::Runtime>(inputs: &BackwardInputs<R>) -> LayerNormKey {
    problem_key(&inputs.client, &inputs.input)
}

/// Deterministic values in [-1, 1) plus a per-row offset, uploaded as `dtype`.
fn synthetic<R: cubecl::Runtime>(
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

fn forward_bench_inputs<R: cubecl::Runtime>(
    key: &LayerNormKey,
    inputs: &ForwardInputs<R>,
) -> ForwardInputs<R> {
    TUNING_PASSES.fetch_add(1, Ordering::SeqCst);
    let client = &inputs.client;
    let (d, rows) = key.representative(client);
    let dtype = key.dtype.dtype();
    ForwardInputs {
        client: client.clone(),
        cache_id: inputs.cache_id.clone(),
        input: synthetic(client, &[rows, d], dtype, 1),
        weight: synthetic(client, &[d], dtype, 2),
        bias: inputs
            .bias
            .as_ref()
            .map(|_| synthetic(client, &[d], dtype, 3)),
        epsilon: inputs.epsilon,
        benchmark: true,
    }
}

fn backward_bench_inputs<R: cubecl::Runtime>(
    key: &LayerNormKey,
    inputs: &BackwardInputs<R>,
) -> BackwardInputs<R> {
    TUNING_PASSES.fetch_add(1, Ordering::SeqCst);
    let client = &inputs.client;
    let (d, rows) = key.representative(client);
    let dtype = key.dtype.dtype();
    let input = synthetic(client, &[rows, d], dtype, 1);
    let weight = synthetic(client, &[d], dtype, 2);
    let [_, mean, rstd] = forward::forward(
        client,
        input.clone(),
        weight.clone(),
        None,
        1e-5,
        Choice::Default,
    )
    .expect("the default choice always runs");
    BackwardInputs {
        client: client.clone(),
        cache_id: inputs.cache_id.clone(),
        input,
        weight,
        grad: synthetic(client, &[rows, d], dtype, 4),
        mean,
        rstd,
        benchmark: true,
    }
}

fn run_forward<R: cubecl::Runtime>(
    candidate: Candidate,
    inputs: ForwardInputs<R>,
) -> Result<Outputs, String> {
    let key = (!inputs.benchmark).then(|| forward_key(&inputs));
    let choice = candidate.choice(inputs.benchmark);
    let ForwardInputs {
        client,
        cache_id,
        input,
        weight,
        bias,
        epsilon,
        benchmark,
    } = inputs;
    let out = forward::forward(&client, input, weight, bias, epsilon, choice)?;
    match key {
        None if benchmark => {
            BENCHMARK_RUNS.fetch_add(1, Ordering::SeqCst);
        }
        Some(key) => record_choice(&cache_id, Direction::Forward, key, candidate),
        None => {}
    }
    Ok(Outputs(out))
}

fn run_backward<R: cubecl::Runtime>(
    candidate: Candidate,
    inputs: BackwardInputs<R>,
) -> Result<Outputs, String> {
    let key = (!inputs.benchmark).then(|| backward_key(&inputs));
    let choice = candidate.choice(inputs.benchmark);
    let BackwardInputs {
        client,
        cache_id,
        input,
        weight,
        grad,
        mean,
        rstd,
        benchmark,
    } = inputs;
    let out = backward::backward(&client, input, weight, grad, mean, rstd, choice)?;
    match key {
        None if benchmark => {
            BENCHMARK_RUNS.fetch_add(1, Ordering::SeqCst);
        }
        Some(key) => record_choice(&cache_id, Direction::Backward, key, candidate),
        None => {}
    }
    Ok(Outputs(out))
}

fn forward_set<R: cubecl::Runtime>() -> TunableSet<LayerNormKey, ForwardInputs<R>, Outputs> {
    CANDIDATES.iter().fold(
        TunableSet::new(forward_key::<R>, forward_bench_inputs::<R>),
        |set, &candidate| {
            set.with(Tunable::new(
                &candidate.name(),
                move |inputs: ForwardInputs<R>| run_forward(candidate, inputs),
            ))
        },
    )
}

fn backward_set<R: cubecl::Runtime>() -> TunableSet<LayerNormKey, BackwardInputs<R>, Outputs> {
    BACKWARD_CANDIDATES.iter().fold(
        TunableSet::new(backward_key::<R>, backward_bench_inputs::<R>),
        |set, &candidate| {
            set.with(Tunable::new(
                &candidate.name(),
                move |inputs: BackwardInputs<R>| run_backward(candidate, inputs),
            ))
        },
    )
}

static FORWARD_TUNER: LocalTuner<LayerNormKey, String> =
    LocalTuner::new(Direction::Forward.tuner_name());
static BACKWARD_TUNER: LocalTuner<LayerNormKey, String> =
    LocalTuner::new(Direction::Backward.tuner_name());

/// The cache id for `client`, after preparing its file (once per process and file).
fn persistent_cache_id<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    direction: Direction,
) -> Option<String> {
    let identity = identity::identity_or_default(client);
    let id = identity.ruda_cache_id()?;
    static PREPARED: Mutex<Vec<(String, Direction)>> = Mutex::new(Vec::new());
    let mut prepared = PREPARED.lock().unwrap_or_else(|e| e.into_inner());
    if !prepared.iter().any(|(i, d)| *i == id && *d == direction) {
        let root = settings::cache_root();
        cache_files::prepare(&cache_files::cache_file(&root, &id, direction.tuner_name()));
        prepared.push((id.clone(), direction));
    }
    Some(id)
}

/// (server, direction, key) of an in-process result.
type InProcessKey = (usize, Direction, LayerNormKey);

/// The in-process tuner for devices without a fingerprint.
///
/// CubeCL's `LocalTuner` cannot be used there: its cache always reads and appends the file
/// `<root>/autotune/<version>/<id>/<name>.json.log` (CubeCL built with `std` has no memory-only
/// mode), and without a fingerprint there is no id under which results could be trusted by a
/// later process. So results live in this map for the life of the process; the candidates,
/// inputs and timing are the same `TunableSet` and CubeCL's own `tune_benchmark`.
static IN_PROCESS: Mutex<Option<HashMap<InProcessKey, usize>>> = Mutex::new(None);

fn execute_in_process<R, I>(
    client: &ComputeClient<R>,
    direction: Direction,
    set: Arc<TunableSet<LayerNormKey, I, Outputs>>,
    inputs: I,
) -> Outputs
where
    R: cubecl::Runtime,
    I: Clone + Send + Sync + 'static,
{
    let key = set.generate_key(&inputs);
    let map_key = (identity::server_key(client), direction, key.clone());
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
            let (_, index) = best.expect("LayerNorm autotune: no candidate could run");
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
        .expect("the chosen LayerNorm candidate runs any shape of its key")
}

/// The name recorded in reports for the in-process tuner.
pub const IN_PROCESS_ID: &str = "in-process";

/// LayerNorm forward over the last dimension of `input`.
///
/// The variant and vector width are autotuned per (d bucket, vector width, rows bucket, dtype)
/// ([`crate::autotune`]): cached on disk under the device's driver fingerprint for the ruda
/// runtimes, in memory for the process when there is none; `RUDA_AUTOTUNE=off` runs
/// [`choose_variant`](crate::layer_norm::choose_variant) instead.
///
/// Returns `[out, mean, rstd]`: `out` has the input's dtype and shape (contiguous); `mean` and
/// `rstd` are F32 with the input's shape without its last dimension (one value per row), `rstd`
/// being `1 / sqrt(var + epsilon)` with the biased variance.
///
/// `weight` (gamma) and `bias` (beta) must have shape `[d]` and the input's dtype.
///
/// # Panics
/// Before launching anything, if `input` is a scalar (rank 0) or has an empty last dimension,
/// if gamma or beta has the wrong shape or dtype, if the dtype is not F32/F16/BF16 or not
/// supported by the device, or if `epsilon` is negative or not finite.
pub fn layer_norm_forward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    input: TensorBuffer,
    weight: TensorBuffer,
    bias: Option<TensorBuffer>,
    epsilon: f64,
) -> [TensorBuffer; 3] {
    let problem = check_forward(client, &input, &weight, bias.as_ref(), epsilon);
    if problem.rows == 0 || !settings::settings().enabled {
        return forward::forward(client, input, weight, bias, epsilon, Choice::Default)
            .expect("the default choice always runs");
    }
    let cache_id = persistent_cache_id(client, Direction::Forward);
    let inputs = ForwardInputs {
        client: client.clone(),
        cache_id: cache_id.as_deref().unwrap_or(IN_PROCESS_ID).into(),
        input,
        weight,
        bias,
        epsilon,
        benchmark: false,
    };
    let set = FORWARD_TUNER.init(forward_set::<R>);
    let Outputs(out) = timed_if_tuning(|| match cache_id {
        Some(id) => FORWARD_TUNER.execute(&id, client, set, inputs),
        None => execute_in_process(client, Direction::Forward, set, inputs),
    });
    out
}

/// LayerNorm backward: the gradients of `out = layer_norm(input, weight, bias)` given the
/// upstream gradient `grad` (dy) and the forward's `mean` and `rstd`.
///
/// Autotuned like [`layer_norm_forward`] (its own tuner and cache).
///
/// Returns `[dx, dgamma, dbeta]`: `dx` has the input's dtype and shape (contiguous); `dgamma`
/// and `dbeta` have the weight's dtype and shape `[d]`. `dbeta` is the sum of `dy` over the
/// rows; it does not depend on beta, so it is returned whether or not the forward had a beta,
/// and callers without one may drop it. With zero rows, `dgamma` and `dbeta` are zeros.
///
/// `grad` must have the input's shape and dtype; `mean` and `rstd` must be F32 with one element
/// per row (any shape, e.g. the forward's `[..]` or a keep-dim `[.., 1]`). `rstd` is used as
/// given; `mean` only as a close approximation of the row's mean: the kernel corrects it by the
/// mean of `x - mean` over the row, so `xhat = ((x - mean) - mean(x - mean)) * rstd` is centred
/// on the exact mean of `x` even where the f32 `mean` cannot resolve the row's spread (mean 1e4,
/// std 1e-2). With the forward's statistics the gradients therefore match the exact f64
/// gradient computed from `x` alone (to ~1e-7 relative in f32).
///
/// # Panics
/// Before launching anything, on any mismatch above, or as [`layer_norm_forward`] for the
/// input and weight.
pub fn layer_norm_backward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    input: TensorBuffer,
    weight: TensorBuffer,
    grad: TensorBuffer,
    mean: TensorBuffer,
    rstd: TensorBuffer,
) -> [TensorBuffer; 3] {
    let problem = check_backward(client, &input, &weight, &grad, &mean, &rstd);
    if problem.rows == 0 || !settings::settings().enabled {
        return backward::backward(client, input, weight, grad, mean, rstd, Choice::Default)
            .expect("the default choice always runs");
    }
    let cache_id = persistent_cache_id(client, Direction::Backward);
    let inputs = BackwardInputs {
        client: client.clone(),
        cache_id: cache_id.as_deref().unwrap_or(IN_PROCESS_ID).into(),
        input,
        weight,
        grad,
        mean,
        rstd,
        benchmark: false,
    };
    let set = BACKWARD_TUNER.init(backward_set::<R>);
    let Outputs(out) = timed_if_tuning(|| match cache_id {
        Some(id) => BACKWARD_TUNER.execute(&id, client, set, inputs),
        None => execute_in_process(client, Direction::Backward, set, inputs),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d_buckets_are_powers_of_two_and_three_halves() {
        let buckets: Vec<usize> = [
            1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 200, 256, 257, 384, 385, 768, 1000,
        ]
        .iter()
        .map(|&d| d_bucket(d))
        .collect();
        assert_eq!(
            buckets,
            [
                1, 2, 3, 4, 6, 6, 8, 8, 12, 16, 256, 256, 384, 384, 512, 768, 1024
            ]
        );
        assert_eq!(d_bucket(65536), 65536);
        assert_eq!(d_bucket(65537), 98304);
    }

    #[test]
    fn rows_buckets_are_powers_of_two() {
        assert_eq!(rows_bucket(0), 1);
        assert_eq!(rows_bucket(1), 1);
        assert_eq!(rows_bucket(3), 4);
        assert_eq!(rows_bucket(4096), 4096);
        assert_eq!(rows_bucket(4097), 8192);
    }

    #[test]
    fn candidate_names_are_unique() {
        let names: std::collections::HashSet<String> =
            BACKWARD_CANDIDATES.iter().map(Candidate::name).collect();
        assert_eq!(names.len(), BACKWARD_CANDIDATES.len());
        assert_eq!(CANDIDATES[0].name(), "PlanePerRow/widest");
        assert_eq!(BACKWARD_CANDIDATES[..8], CANDIDATES);
        assert_eq!(
            BACKWARD_CANDIDATES[9].name(),
            "CubePerRow/widest/shared-sums"
        );
    }

    #[test]
    fn key_serializes_as_json() {
        let key = LayerNormKey {
            d_bucket: 768,
            vector: 4,
            rows_bucket: 4096,
            dtype: TuneDType::BF16,
        };
        let json = serde_json::to_string(&key).unwrap();
        assert_eq!(serde_json::from_str::<LayerNormKey>(&json).unwrap(), key);
        assert_eq!(key.to_string(), "d<=768 vec4 rows<=4096 BF16");
    }
}
