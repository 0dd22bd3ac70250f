//! `cargo bench`: LayerNorm forward and forward+backward (ruda's kernels, and
//! `burn::nn::LayerNorm` through Burn), a transformer training step and an MNIST training step,
//! on ruda and on every Burn built-in backend this machine has (see
//! `ruda_benches::contenders::Contender::present`): burn-wgpu on the same wgpu adapter,
//! burn-ndarray on the CPU, burn-cuda where a CUDA driver answers.
//!
//! ```text
//! cargo bench -p ruda-benches --bench backends                       # every workload, full sizes on a GPU
//! cargo bench -p ruda-benches --bench backends -- --quick            # small sizes
//! RUDA_BENCH_FULL=1 cargo bench -p ruda-benches --bench backends     # full sizes on a CPU-only machine too
//!                                                    # (else quick: a full transformer step
//!                                                    # takes minutes on lavapipe)
//! cargo bench -p ruda-benches --bench backends -- transformer_step   # criterion's filter: one group
//! RUDA_BENCH_BACKENDS=ruda-wgpu,burn-wgpu cargo bench -p ruda-benches --bench backends
//! cargo test -p ruda-benches --benches               # quick sizes, each benchmark run once
//! ```
//! The GPU suite (`gpu_suite --benchmarks`) runs the same workloads with the fixed
//! warm-up/median plan and writes the CSV behind `docs/perf/`'s tables and plots.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ruda_benches::contenders::Contender;
use ruda_benches::suite::{quick_mode, suite};
use ruda_benches::timing::Call;
use ruda_benches::workloads::{Workload, prepare};

fn backends(c: &mut Criterion) {
    let contenders = Contender::selected();
    let quick = quick_mode(&contenders);
    eprintln!(
        "backends: {}{}",
        contenders
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        if quick { " (quick sizes)" } else { "" }
    );
    let workloads = suite(quick);
    let mut groups: Vec<&'static str> = workloads.iter().map(Workload::group).collect();
    groups.dedup();
    for name in groups {
        let mut group = c.benchmark_group(name);
        if name.ends_with("_step") {
            // A transformer step takes tens of milliseconds on a GPU, seconds on a CPU.
            group.sample_size(10);
        }
        for workload in workloads.iter().filter(|w| w.group() == name) {
            group.throughput(match workload {
                Workload::LayerNormKernel { .. } | Workload::LayerNormBurn { .. } => {
                    Throughput::Bytes(workload.work_per_call())
                }
                _ => Throughput::Elements(workload.work_per_call()),
            });
            for contender in contenders.iter().filter(|c| workload.applies_to(c)) {
                // Built on first use: criterion calls the closure again for each sample
                // batch, and a filtered-out benchmark is never built.
                let mut call: Option<Call> = None;
                group.bench_function(BenchmarkId::new(contender.name(), workload.case()), |b| {
                    let call = call.get_or_insert_with(|| {
                        prepare(contender, *workload).expect("the workload applies")
                    });
                    b.iter(call)
                });
            }
        }
        group.finish();
    }
}

fn config() -> Criterion {
    let quick = quick_mode(&Contender::selected());
    let c = Criterion::default().configure_from_args();
    if quick {
        c.sample_size(10)
            .warm_up_time(std::time::Duration::from_millis(200))
            .measurement_time(std::time::Duration::from_secs(1))
    } else {
        c
    }
}

criterion_group! {
    name = benches;
    config = config();
    targets = backends
}
criterion_main!(benches);
