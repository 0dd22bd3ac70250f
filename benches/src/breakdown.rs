//! Where the time of LayerNorm through Burn goes: the same work measured in steps, from the
//! native node's kernels on the inner backend up to `burn::nn::LayerNorm` forward +
//! `y.backward()` (or `backward_with_grad(y, dy)`) + `x.grad` under autodiff. Each step is timed three ways: wall clock with a
//! sync per call (the method of every other table), host time to enqueue one call (no sync),
//! and throughput (calls back to back, one sync, time per call).

use std::time::Instant;

use burn::module::AutodiffModule;
use burn::nn::{LayerNorm, LayerNormConfig};
use burn::prelude::Backend;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Distribution, Tensor};
use burn_ruda::{BackwardWithGrad, LayerNormBackend, backward_with_grad};

use crate::layer_norm::EPSILON;
use crate::timing::{TimingPlan, median_us};

/// One step's three times, microseconds.
#[derive(Clone, Copy, Debug)]
pub struct StepTimes {
    /// Wall clock of one call plus a sync (median).
    pub latency_us: f64,
    /// Host time to issue one call without waiting for the device (median).
    pub enqueue_us: f64,
    /// Per-call time of calls issued back to back with one sync at the end.
    pub throughput_us: f64,
}

/// Times `call` the three ways.
pub fn step_times(plan: TimingPlan, mut call: impl FnMut(), mut sync: impl FnMut()) -> StepTimes {
    let latency_us = median_us(plan, &mut call, &mut sync);
    let mut enqueue: Vec<f64> = (0..plan.iters.max(1))
        .map(|_| {
            let start = Instant::now();
            call();
            let elapsed = start.elapsed().as_secs_f64() * 1e6;
            sync();
            elapsed
        })
        .collect();
    enqueue.sort_by(f64::total_cmp);
    let batch = plan.iters.max(1);
    sync();
    let start = Instant::now();
    for _ in 0..batch {
        call();
    }
    sync();
    let throughput_us = start.elapsed().as_secs_f64() * 1e6 / batch as f64;
    StepTimes {
        latency_us,
        enqueue_us: enqueue[enqueue.len() / 2],
        throughput_us,
    }
}

/// Prints the breakdown for `rows x d` (f32) under the autodiff backend `A`, whose inner
/// backend has the native LayerNorm.
pub fn print_breakdown<A>(name: &str, device: &A::Device, rows: usize, d: usize, plan: TimingPlan)
where
    A: BackwardWithGrad,
    A::InnerBackend: LayerNormBackend,
{
    type Inner<A> = <A as AutodiffBackend>::InnerBackend;
    let layer: LayerNorm<A> = LayerNormConfig::new(d).with_epsilon(EPSILON).init(device);
    let inner_layer = layer.valid();
    let x = Tensor::<A, 2>::random([rows, d], Distribution::Normal(0.0, 1.0), device);
    let x_inner = x.clone().inner();
    let ones = Tensor::<Inner<A>, 2>::ones([rows, d], device);
    let gamma = inner_layer.gamma.val();
    let beta = inner_layer.beta.as_ref().map(|b| b.val());
    let sync = || A::sync(device).expect("device sync failed");
    let inner_sync = || Inner::<A>::sync(device).expect("device sync failed");
    let primitive = |t: Tensor<Inner<A>, 2>| t.into_primitive().tensor();
    let primitive1 = |t: Tensor<Inner<A>, 1>| t.into_primitive().tensor();

    let report = |step: &str, times: StepTimes| {
        println!(
            "{name}\t{rows}x{d}\t{step}\t{:.1}\t{:.1}\t{:.1}",
            times.latency_us, times.enqueue_us, times.throughput_us
        );
    };

    // Kept until the sync, so that the fusion stream cannot drop the unused result unexecuted.
    let kept = std::cell::RefCell::new(Vec::new());
    report(
        "inner: ones",
        step_times(
            plan,
            || {
                kept.borrow_mut()
                    .push(Tensor::<Inner<A>, 2>::ones([rows, d], device))
            },
            || {
                inner_sync();
                kept.borrow_mut().clear();
            },
        ),
    );
    report(
        "inner: native fwd",
        step_times(
            plan,
            || {
                drop(Inner::<A>::layer_norm_native(
                    primitive(x_inner.clone()),
                    primitive1(gamma.clone()),
                    beta.clone().map(primitive1),
                    EPSILON,
                ))
            },
            inner_sync,
        ),
    );
    report(
        "inner: nn::LayerNorm fwd",
        step_times(
            plan,
            || drop(inner_layer.forward(x_inner.clone())),
            inner_sync,
        ),
    );
    report(
        "inner: native fwd+bwd (dy kept)",
        step_times(
            plan,
            || {
                let [_, mean, rstd] = Inner::<A>::layer_norm_native(
                    primitive(x_inner.clone()),
                    primitive1(gamma.clone()),
                    beta.clone().map(primitive1),
                    EPSILON,
                );
                drop(Inner::<A>::layer_norm_native_backward(
                    primitive(x_inner.clone()),
                    primitive1(gamma.clone()),
                    primitive(ones.clone()),
                    mean,
                    rstd,
                ));
            },
            inner_sync,
        ),
    );
    report(
        "inner: native fwd+bwd (dy = new ones)",
        step_times(
            plan,
            || {
                let [_, mean, rstd] = Inner::<A>::layer_norm_native(
                    primitive(x_inner.clone()),
                    primitive1(gamma.clone()),
                    beta.clone().map(primitive1),
                    EPSILON,
                );
                let dy = Tensor::<Inner<A>, 2>::ones([rows, d], device);
                drop(Inner::<A>::layer_norm_native_backward(
                    primitive(x_inner.clone()),
                    primitive1(gamma.clone()),
                    primitive(dy),
                    mean,
                    rstd,
                ));
            },
            inner_sync,
        ),
    );
    report(
        "autodiff: fwd (graph kept)",
        step_times(
            plan,
            || {
                let xg = x.clone().detach().require_grad();
                drop(layer.forward(xg));
            },
            sync,
        ),
    );
    report(
        "autodiff: fwd + backward",
        step_times(
            plan,
            || {
                let xg = x.clone().detach().require_grad();
                drop(layer.forward(xg).backward());
            },
            sync,
        ),
    );
    report(
        "autodiff: fwd + backward + x.grad",
        step_times(
            plan,
            || {
                let xg = x.clone().detach().require_grad();
                let grads = layer.forward(xg.clone()).backward();
                drop(xg.grad(&grads));
            },
            sync,
        ),
    );
    report(
        "autodiff: fwd + backward_with_grad(dy kept) + x.grad",
        step_times(
            plan,
            || {
                let xg = x.clone().detach().require_grad();
                let grads = backward_with_grad(layer.forward(xg.clone()), ones.clone());
                drop(xg.grad(&grads));
            },
            sync,
        ),
    );
}

/// The native kernels of runtime `R` alone, timed the same three ways, for comparison with
/// [`print_breakdown`]'s steps.
pub fn print_raw_breakdown<R: ruda_runtime::Runtime>(
    name: &str,
    device: &R::Device,
    rows: usize,
    d: usize,
    plan: TimingPlan,
) {
    use ruda_runtime::TensorBuffer;
    use ruda_runtime::prelude::DType;

    let client = R::client(device);
    let buffer = |values: &[f32], shape: Vec<usize>| {
        TensorBuffer::from_f32s(&client, values, shape.into(), DType::F32)
    };
    let x = buffer(
        &crate::layer_norm::random_values(rows * d, 1),
        vec![rows, d],
    );
    let gamma = buffer(&vec![1.0; d], vec![d]);
    let beta = buffer(&vec![0.0; d], vec![d]);
    let dy = buffer(&vec![1.0; rows * d], vec![rows, d]);
    let sync = || cubecl::future::block_on(client.sync()).expect("device sync failed");
    let forward = || {
        R::layer_norm(
            &client,
            x.clone(),
            gamma.clone(),
            Some(beta.clone()),
            EPSILON,
        )
    };
    let report = |step: &str, times: StepTimes| {
        println!(
            "{name}\t{rows}x{d}\t{step}\t{:.1}\t{:.1}\t{:.1}",
            times.latency_us, times.enqueue_us, times.throughput_us
        );
    };
    report(
        "raw: native fwd",
        step_times(plan, || drop(forward()), sync),
    );
    report(
        "raw: native fwd+bwd (dy kept)",
        step_times(
            plan,
            || {
                let [_, mean, rstd] = forward();
                drop(R::layer_norm_backward(
                    &client,
                    x.clone(),
                    gamma.clone(),
                    dy.clone(),
                    mean,
                    rstd,
                ));
            },
            sync,
        ),
    );
}

/// Runs `call` + `sync` `iters` times under [`crate::span_profile::record`] (after 10 unrecorded
/// warm-up calls) and prints the spans per call, then the timeline of one more call. The
/// benchmark's own phases are the spans `bench_call` and `bench_sync` on the main thread.
pub fn print_trace(step: &str, iters: usize, mut call: impl FnMut(), mut sync: impl FnMut()) {
    use crate::span_profile::{record, summary, timeline};
    let mut once = || {
        tracing::info_span!("bench_call").in_scope(&mut call);
        tracing::info_span!("bench_sync").in_scope(&mut sync);
    };
    for _ in 0..10 {
        once();
    }
    let records = record(|| {
        for _ in 0..iters {
            once();
        }
    });
    println!("\n### spans of '{step}', per call ({iters} calls)\n");
    print!("{}", summary(&records, iters));
    let records = record(&mut once);
    println!("\n### timeline of one call of '{step}'\n");
    print!("{}", timeline(&records, 300));
}

/// [`print_trace`] for the slow steps of [`print_breakdown`]: the inner native forward +
/// backward with a new `ones` as dy, and forward + backward + `x.grad` under autodiff.
pub fn print_breakdown_trace<A>(device: &A::Device, rows: usize, d: usize)
where
    A: BackwardWithGrad,
    A::InnerBackend: LayerNormBackend,
{
    type Inner<A> = <A as AutodiffBackend>::InnerBackend;
    let layer: LayerNorm<A> = LayerNormConfig::new(d).with_epsilon(EPSILON).init(device);
    let inner_layer = layer.valid();
    let x = Tensor::<A, 2>::random([rows, d], Distribution::Normal(0.0, 1.0), device);
    let x_inner = x.clone().inner();
    let gamma = inner_layer.gamma.val();
    let beta = inner_layer.beta.as_ref().map(|b| b.val());
    let primitive = |t: Tensor<Inner<A>, 2>| t.into_primitive().tensor();
    let primitive1 = |t: Tensor<Inner<A>, 1>| t.into_primitive().tensor();
    println!("\n## spans at {rows}x{d}");
    print_trace(
        "inner: native fwd+bwd (dy = new ones)",
        20,
        || {
            let [_, mean, rstd] = Inner::<A>::layer_norm_native(
                primitive(x_inner.clone()),
                primitive1(gamma.clone()),
                beta.clone().map(primitive1),
                EPSILON,
            );
            let dy = Tensor::<Inner<A>, 2>::ones([rows, d], device);
            drop(Inner::<A>::layer_norm_native_backward(
                primitive(x_inner.clone()),
                primitive1(gamma.clone()),
                primitive(dy),
                mean,
                rstd,
            ));
        },
        || Inner::<A>::sync(device).expect("device sync failed"),
    );
    print_trace(
        "autodiff: fwd + backward + x.grad",
        20,
        || {
            let xg = x.clone().detach().require_grad();
            let grads = layer.forward(xg.clone()).backward();
            drop(xg.grad(&grads));
        },
        || A::sync(device).expect("device sync failed"),
    );
}
