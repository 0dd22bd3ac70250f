//! The published suite: which workloads run, at which sizes, with how many warm-up and timed
//! calls, and measuring one workload on one contender.

use crate::contenders::Contender;
use crate::layer_norm::Pass;
use crate::report::Measurement;
use crate::timing::{TimingPlan, median_us};
use crate::workloads::{TransformerSize, Workload, prepare};

/// Row counts and widths of the LayerNorm sweep: `d` from 256 to 8192 at 16384 rows (the curve
/// of the bandwidth plot), and the two 4096-row shapes of the kernel issue's table.
pub const LAYER_NORM_SHAPES: [(usize, usize); 9] = [
    (16384, 256),
    (16384, 512),
    (16384, 768),
    (16384, 1024),
    (16384, 2048),
    (16384, 4096),
    (16384, 8192),
    (4096, 768),
    (4096, 8192),
];

/// Small LayerNorm shapes for the quick mode.
pub const QUICK_LAYER_NORM_SHAPES: [(usize, usize); 2] = [(64, 256), (32, 1024)];

/// Digits per MNIST step: the example's default batch size.
pub const MNIST_BATCH: usize = 32;

/// Every workload of the benchmark suite, in the order they run; `quick` shrinks them to sizes
/// a CPU adapter runs in seconds (CI's smoke run).
pub fn suite(quick: bool) -> Vec<Workload> {
    let shapes: &[(usize, usize)] = if quick {
        &QUICK_LAYER_NORM_SHAPES
    } else {
        &LAYER_NORM_SHAPES
    };
    let mut out = Vec::new();
    for pass in [Pass::Forward, Pass::ForwardBackward] {
        for &(rows, d) in shapes {
            out.push(Workload::LayerNormKernel { rows, d, pass });
        }
    }
    // Through Burn also back to back, which is what a training loop sees (issue 18 compares it
    // with the kernels' own time), with `y.backward()` and with `y`'s gradient given.
    for pass in [
        Pass::Forward,
        Pass::ForwardBackward,
        Pass::BackToBack,
        Pass::BackToBackGivenGrad,
    ] {
        for &(rows, d) in shapes {
            out.push(Workload::LayerNormBurn { rows, d, pass });
        }
    }
    out.push(Workload::TransformerStep(if quick {
        TransformerSize::QUICK
    } else {
        TransformerSize::DESIGN
    }));
    out.push(Workload::MnistStep {
        batch: if quick { 8 } else { MNIST_BATCH },
    });
    out
}

/// Whether the benchmarks run in quick mode (small sizes) for `contenders`: when
/// `RUDA_BENCH_QUICK=1` or `--quick` is given; under criterion's test mode (`cargo test
/// --benches` passes no `--bench`), which runs every benchmark once; and when every contender
/// runs on the CPU (a transformer step at full size takes minutes on lavapipe), unless
/// `RUDA_BENCH_FULL=1`.
pub fn quick_mode(contenders: &[Contender]) -> bool {
    let args: Vec<String> = std::env::args().collect();
    let env_is = |name: &str| std::env::var(name).is_ok_and(|v| v == "1");
    env_is("RUDA_BENCH_QUICK")
        || args.iter().any(|a| a == "--quick")
        || !args.iter().any(|a| a == "--bench")
        || (contenders.iter().all(Contender::on_cpu) && !env_is("RUDA_BENCH_FULL"))
}

/// The warm-up and timed calls for `workload` on `contender`: `docs/perf/README.md`'s 10 + 50 for LayerNorm
/// on a GPU, fewer for training steps and on CPUs (a transformer step on NdArray takes seconds).
pub fn timing_plan(contender: &Contender, workload: &Workload) -> TimingPlan {
    let step = matches!(
        workload,
        Workload::TransformerStep(_) | Workload::MnistStep { .. }
    );
    match (step, contender.on_cpu()) {
        (false, false) => TimingPlan::STANDARD,
        (false, true) => TimingPlan::QUICK,
        (true, false) => TimingPlan {
            warmup: 5,
            iters: 21,
        },
        (true, true) => TimingPlan {
            warmup: 1,
            iters: 5,
        },
    }
}

/// Prepares and times `workload` on `contender` with [`timing_plan`]; `None` when it does not
/// apply. A panic inside the backend (an unsupported op, out of memory) is caught and reported
/// as an error, so one contender's failure does not end the run.
pub fn measure(contender: &Contender, workload: Workload) -> Option<Result<Measurement, String>> {
    if !workload.applies_to(contender) {
        return None;
    }
    let plan = timing_plan(contender, &workload);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut call = prepare(contender, workload).expect("the workload applies");
        median_us(plan, &mut call, || {})
    }));
    Some(match result {
        Ok(median_us) => Ok(Measurement::new(contender, &workload, median_us, plan)),
        Err(panic) => Err(format!(
            "{} on {contender}: {}",
            workload.case(),
            panic_message(&panic)
        )),
    })
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into())
}
