//! Softmax autotuning (the last-dimension path): the key ([`SoftmaxKey`], the row kernels'
//! key), the candidates ([`candidates`]), the inputs they are benchmarked on, and the two
//! `TunableSet`s (forward, backward) that [`crate::autotune::tuner`] runs. Softmax and
//! log-softmax share the forward's tuner: they move the same bytes with the same reductions.
//! Their backwards are tuned apart: softmax's reads `y` twice (its sum needs `y`), log-softmax's
//! once, so the pipelined variant, whose second read of `y` comes a step after the first,
//! suits one and not the other (docs/perf/softmax.md).

pub mod candidates;

use std::sync::Arc;

use cubecl::{
    client::ComputeClient,
    tune::{AutotuneOutput, LocalTuner, TunableSet},
};

pub use candidates::{CANDIDATES, Candidate};

use super::{Choice, Kind, backward, forward};
use crate::autotune::row_key::{RowKey, tune_rows};
use crate::autotune::tuner::{
    self, IN_PROCESS_ID, count_benchmark_run, count_tuning_pass, record_choice, synthetic,
};
use crate::tensor_buffer::TensorBuffer;

/// The softmax key: rows of `d` elements, as every row kernel's.
pub type SoftmaxKey = RowKey;

/// The forward tuner's name, which is also its cache file's name.
pub const FORWARD_TUNER_NAME: &str = "softmax-forward";
/// Softmax's backward tuner's name, which is also its cache file's name.
pub const BACKWARD_TUNER_NAME: &str = "softmax-backward";
/// Log-softmax's backward tuner's name, which is also its cache file's name.
pub const LOG_BACKWARD_TUNER_NAME: &str = "softmax-log-backward";

/// The backward tuner of `kind`: its name and its tuner.
fn backward_tuner(kind: Kind) -> (&'static str, &'static LocalTuner<SoftmaxKey, String>) {
    match kind {
        Kind::Softmax => (BACKWARD_TUNER_NAME, &BACKWARD_TUNER),
        Kind::LogSoftmax => (LOG_BACKWARD_TUNER_NAME, &LOG_BACKWARD_TUNER),
    }
}

/// Output of a candidate (`y` or `dx`).
pub(crate) struct Output(TensorBuffer);

impl AutotuneOutput for Output {}

/// What a forward candidate runs on.
#[derive(Clone)]
pub(crate) struct ForwardInputs<R: cubecl::Runtime> {
    client: ComputeClient<R>,
    cache_id: Arc<str>,
    input: TensorBuffer,
    kind: Kind,
    /// Generated benchmark inputs (counted, strict) rather than the caller's.
    benchmark: bool,
}

/// What a backward candidate runs on.
#[derive(Clone)]
pub(crate) struct BackwardInputs<R: cubecl::Runtime> {
    client: ComputeClient<R>,
    cache_id: Arc<str>,
    output: TensorBuffer,
    grad: TensorBuffer,
    kind: Kind,
    benchmark: bool,
}

/// `(rows, d)` of a last-dimension softmax over `buffer`.
fn rows_and_d(buffer: &TensorBuffer) -> (usize, usize) {
    let rank = buffer.shape.num_dims();
    let d = buffer.shape[rank - 1];
    (buffer.shape.iter().take(rank - 1).product(), d)
}

fn key_of<R: cubecl::Runtime>(client: &ComputeClient<R>, buffer: &TensorBuffer) -> SoftmaxKey {
    let (rows, d) = rows_and_d(buffer);
    RowKey::new(client, d, rows, buffer.dtype)
}

fn forward_key<R: cubecl::Runtime>(inputs: &ForwardInputs<R>) -> SoftmaxKey {
    key_of(&inputs.client, &inputs.input)
}

fn backward_key<R: cubecl::Runtime>(inputs: &BackwardInputs<R>) -> SoftmaxKey {
    key_of(&inputs.client, &inputs.output)
}

/// The benchmark shape: the caller's `d` (not the bucket's largest, as LayerNorm's: whether a
/// row fits in shared memory decides which candidates run, and a bucket spans up to 1.5x), and
/// the bucket's rows cut by [`tune_rows`].
fn bench_shape(key: &SoftmaxKey, buffer: &TensorBuffer) -> [usize; 2] {
    let (_, d) = rows_and_d(buffer);
    [tune_rows(key.rows_bucket, d, key.dtype.dtype().size()), d]
}

fn forward_bench_inputs<R: cubecl::Runtime>(
    key: &SoftmaxKey,
    inputs: &ForwardInputs<R>,
) -> ForwardInputs<R> {
    count_tuning_pass();
    let client = &inputs.client;
    let shape = bench_shape(key, &inputs.input);
    ForwardInputs {
        client: client.clone(),
        cache_id: inputs.cache_id.clone(),
        input: synthetic(client, &shape, key.dtype.dtype(), 1),
        kind: inputs.kind,
        benchmark: true,
    }
}

fn backward_bench_inputs<R: cubecl::Runtime>(
    key: &SoftmaxKey,
    inputs: &BackwardInputs<R>,
) -> BackwardInputs<R> {
    count_tuning_pass();
    let client = &inputs.client;
    let shape = bench_shape(key, &inputs.output);
    let dtype = key.dtype.dtype();
    let x = synthetic(client, &shape, dtype, 1);
    let output = forward::forward(client, x, 1, inputs.kind, Choice::Default)
        .expect("the default choice always runs");
    BackwardInputs {
        client: client.clone(),
        cache_id: inputs.cache_id.clone(),
        output,
        grad: synthetic(client, &shape, dtype, 4),
        kind: inputs.kind,
        benchmark: true,
    }
}

fn run_forward<R: cubecl::Runtime>(
    candidate: Candidate,
    inputs: ForwardInputs<R>,
) -> Result<Output, String> {
    let key = (!inputs.benchmark).then(|| forward_key(&inputs));
    let dim = inputs.input.shape.num_dims() - 1;
    let choice = candidate.choice(inputs.benchmark);
    let out = forward::forward(&inputs.client, inputs.input, dim, inputs.kind, choice)?;
    match key {
        None => count_benchmark_run(),
        Some(key) => record_choice(&inputs.cache_id, FORWARD_TUNER_NAME, &key, candidate.name()),
    }
    Ok(Output(out))
}

fn run_backward<R: cubecl::Runtime>(
    candidate: Candidate,
    inputs: BackwardInputs<R>,
) -> Result<Output, String> {
    let key = (!inputs.benchmark).then(|| backward_key(&inputs));
    let dim = inputs.output.shape.num_dims() - 1;
    let choice = candidate.choice(inputs.benchmark);
    let dx = backward::backward(
        &inputs.client,
        inputs.output,
        inputs.grad,
        dim,
        inputs.kind,
        choice,
    )?;
    match key {
        None => count_benchmark_run(),
        Some(key) => record_choice(
            &inputs.cache_id,
            backward_tuner(inputs.kind).0,
            &key,
            candidate.name(),
        ),
    }
    Ok(Output(dx))
}

fn forward_set<R: cubecl::Runtime>() -> TunableSet<SoftmaxKey, ForwardInputs<R>, Output> {
    tuner::candidate_set(
        &CANDIDATES,
        forward_key::<R>,
        forward_bench_inputs::<R>,
        Candidate::name,
        run_forward::<R>,
    )
}

fn backward_set<R: cubecl::Runtime>() -> TunableSet<SoftmaxKey, BackwardInputs<R>, Output> {
    tuner::candidate_set(
        &CANDIDATES,
        backward_key::<R>,
        backward_bench_inputs::<R>,
        Candidate::name,
        run_backward::<R>,
    )
}

static FORWARD_TUNER: LocalTuner<SoftmaxKey, String> = LocalTuner::new(FORWARD_TUNER_NAME);
static BACKWARD_TUNER: LocalTuner<SoftmaxKey, String> = LocalTuner::new(BACKWARD_TUNER_NAME);
static LOG_BACKWARD_TUNER: LocalTuner<SoftmaxKey, String> =
    LocalTuner::new(LOG_BACKWARD_TUNER_NAME);

/// The tuned forward pass over the last dimension of `input` (arguments checked, non-empty).
pub(crate) fn forward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    input: TensorBuffer,
    kind: Kind,
) -> TensorBuffer {
    let cache_id = tuner::persistent_cache_id(client, FORWARD_TUNER_NAME);
    let inputs = ForwardInputs {
        client: client.clone(),
        cache_id: cache_id.as_deref().unwrap_or(IN_PROCESS_ID).into(),
        input,
        kind,
        benchmark: false,
    };
    let set = FORWARD_TUNER.init(forward_set::<R>);
    let Output(out) = tuner::execute(
        client,
        &FORWARD_TUNER,
        FORWARD_TUNER_NAME,
        set,
        cache_id,
        inputs,
    );
    out
}

/// The tuned backward pass over the last dimension (arguments checked, non-empty).
pub(crate) fn backward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    output: TensorBuffer,
    grad: TensorBuffer,
    kind: Kind,
) -> TensorBuffer {
    let (name, backward_tuner) = backward_tuner(kind);
    let cache_id = tuner::persistent_cache_id(client, name);
    let inputs = BackwardInputs {
        client: client.clone(),
        cache_id: cache_id.as_deref().unwrap_or(IN_PROCESS_ID).into(),
        output,
        grad,
        kind,
        benchmark: false,
    };
    let set = backward_tuner.init(backward_set::<R>);
    let Output(dx) = tuner::execute(client, backward_tuner, name, set, cache_id, inputs);
    dx
}
