//! LayerNorm autotuning: the key ([`LayerNormKey`], the row kernels' key), the candidates
//! ([`candidates`]), the inputs the candidates are benchmarked on, and the two `TunableSet`s
//! (forward, backward) that [`crate::autotune::tuner`] runs.

pub mod candidates;

use std::sync::Arc;

use cubecl::{
    client::ComputeClient,
    tune::{AutotuneOutput, LocalTuner, TunableSet},
};

pub use crate::autotune::row_key::{MAX_TUNE_BYTES, TuneDType, d_bucket, rows_bucket};
pub use candidates::{BACKWARD_CANDIDATES, CANDIDATES, Candidate};

/// The LayerNorm key: rows of `d` elements, as every row kernel's
/// ([`crate::autotune::row_key::RowKey`]).
pub type LayerNormKey = crate::autotune::row_key::RowKey;

use super::{Choice, backward, forward};
use crate::autotune::tuner::{
    self, IN_PROCESS_ID, count_benchmark_run, count_tuning_pass, record_choice, synthetic,
};
use crate::tensor_buffer::TensorBuffer;

/// The forward tuner's name, which is also its cache file's name.
pub const FORWARD_TUNER_NAME: &str = "layer-norm-forward";
/// The backward tuner's name, which is also its cache file's name.
pub const BACKWARD_TUNER_NAME: &str = "layer-norm-backward";

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

fn forward_bench_inputs<R: cubecl::Runtime>(
    key: &LayerNormKey,
    inputs: &ForwardInputs<R>,
) -> ForwardInputs<R> {
    count_tuning_pass();
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
    count_tuning_pass();
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
        None if benchmark => count_benchmark_run(),
        Some(key) => record_choice(&cache_id, FORWARD_TUNER_NAME, &key, candidate.name()),
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
        None if benchmark => count_benchmark_run(),
        Some(key) => record_choice(&cache_id, BACKWARD_TUNER_NAME, &key, candidate.name()),
        None => {}
    }
    Ok(Outputs(out))
}

fn forward_set<R: cubecl::Runtime>() -> TunableSet<LayerNormKey, ForwardInputs<R>, Outputs> {
    tuner::candidate_set(
        &CANDIDATES,
        forward_key::<R>,
        forward_bench_inputs::<R>,
        Candidate::name,
        run_forward::<R>,
    )
}

fn backward_set<R: cubecl::Runtime>() -> TunableSet<LayerNormKey, BackwardInputs<R>, Outputs> {
    tuner::candidate_set(
        &BACKWARD_CANDIDATES,
        backward_key::<R>,
        backward_bench_inputs::<R>,
        Candidate::name,
        run_backward::<R>,
    )
}

static FORWARD_TUNER: LocalTuner<LayerNormKey, String> = LocalTuner::new(FORWARD_TUNER_NAME);
static BACKWARD_TUNER: LocalTuner<LayerNormKey, String> = LocalTuner::new(BACKWARD_TUNER_NAME);

/// The tuned forward pass: the fastest candidate for the call's key (arguments checked).
pub(crate) fn forward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    input: TensorBuffer,
    weight: TensorBuffer,
    bias: Option<TensorBuffer>,
    epsilon: f64,
) -> [TensorBuffer; 3] {
    let cache_id = tuner::persistent_cache_id(client, FORWARD_TUNER_NAME);
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
    let Outputs(out) = tuner::execute(
        client,
        &FORWARD_TUNER,
        FORWARD_TUNER_NAME,
        set,
        cache_id,
        inputs,
    );
    out
}

/// The tuned backward pass (arguments checked).
pub(crate) fn backward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    input: TensorBuffer,
    weight: TensorBuffer,
    grad: TensorBuffer,
    mean: TensorBuffer,
    rstd: TensorBuffer,
) -> [TensorBuffer; 3] {
    let cache_id = tuner::persistent_cache_id(client, BACKWARD_TUNER_NAME);
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
    let Outputs(out) = tuner::execute(
        client,
        &BACKWARD_TUNER,
        BACKWARD_TUNER_NAME,
        set,
        cache_id,
        inputs,
    );
    out
}
