//! Every GPU check and benchmark of burn-ruda in one binary, for the GPU machine (which has no
//! Rust toolchain): build it here, carry it there, run it beside `torch_layernorm.py`.
//!
//! ```text
//! cargo build --release -p ruda-benches --bin gpu_suite --features gpu-suite
//! ./target/release/gpu_suite            # all checks and benchmarks
//! ./target/release/gpu_suite --quick    # small shapes (CPU adapters such as lavapipe)
//! ./target/release/gpu_suite --quick --smoke   # and few iterations
//! ./target/release/gpu_suite --no-differential # skip the op-by-op checks
//! ./target/release/gpu_suite --differential-only  # only them
//! ./target/release/gpu_suite --differential-only --only TransformerEncoder  # by name
//! RUDA_AUTOTUNE_DIR=/tmp/at ./target/release/gpu_suite --autotune  # twice: tuning,
//!                                                # then the cache of the first run
//! ./target/release/gpu_suite --breakdown [--trace]  # LayerNorm through Burn, step by
//!                                                # step [and the host spans of the slow steps]
//! ./target/release/gpu_suite --softmax [--quick]   # softmax checks on CUDA (else wgpu),
//!                                                # the kernels against a copy, back to back
//! RUDA_BENCH_BACKENDS=ruda-cuda,ruda-cuda-bf16 ./target/release/gpu_suite --step \
//!     --dropouts 0,0.1 [--launch-log PATH]       # the transformer step: median, launches and
//!                                                # host CPU per step (PATH: CubeCL's profiling
//!                                                # log at level "minimal", see --step's docs),
//!                                                # back to back; [--sample-threads PREFIX]:
//!                                                # where each service thread's time goes
//! ./target/release/gpu_suite --benchmarks --csv out.csv [--groups mnist_step,...]
//!                                                # the published comparison (ruda_benches::suite)
//!                                                # on every backend present; RUDA_BENCH_BACKENDS
//!                                                # narrows the backends
//! ```
//!
//! Sections: the device list with fingerprints; LayerNorm correctness on CUDA and on the wgpu
//! GPU (or the CPU adapter when there is no GPU) against an f64 host reference; benchmarks of the
//! native kernels (default rule and every variant) and of Burn's composed LayerNorm under
//! `burn::backend::Autodiff`, timed as `docs/perf/README.md` says (wall clock + sync, warm-up, median); the
//! differential suite of `ruda_tests::differential` (every Burn op family and the gradients of
//! three models against NdArray) on CUDA and on the wgpu GPU.
//! Benchmark rows use `torch_layernorm.py`'s format. Exits non-zero if a check fails.

use burn::backend::Autodiff;
use ruda_benches::layer_norm::{self as bench, Case, Clock, SHAPES};
use ruda_benches::timing::TimingPlan;
use ruda_runtime::Runtime;
use ruda_runtime::layer_norm::{ColumnSums, Reduction, Strategy, Variant};
use ruda_runtime::prelude::DType;

/// Every GPU check and benchmark of burn-ruda (see the file's docs).
#[derive(clap::Parser, Debug)]
#[command(name = "gpu_suite")]
struct Options {
    /// Small shapes (CPU adapters such as lavapipe)
    #[arg(long)]
    quick: bool,
    /// With --quick: few iterations
    #[arg(long)]
    smoke: bool,
    /// Skip Burn's composed LayerNorm baselines
    #[arg(long)]
    no_burn: bool,
    /// LayerNorm through Burn, step by step
    #[arg(long)]
    breakdown: bool,
    /// Skip the op-by-op differential checks
    #[arg(long)]
    no_differential: bool,
    /// With --breakdown: the host spans of the slow steps
    #[arg(long)]
    trace: bool,
    /// Only the differential checks
    #[arg(long)]
    differential_only: bool,
    /// First and cached call per shape, cache identity and choices
    #[arg(long)]
    autotune: bool,
    /// Only the differential checks whose name contains NAME
    #[arg(long, value_name = "NAME")]
    only: Option<String>,
    /// The published comparison on every backend present (RUDA_BENCH_BACKENDS narrows them)
    #[arg(long)]
    benchmarks: bool,
    /// Only the embedding gradient: ruda's native kernel against Burn's, on CUDA or else wgpu
    #[arg(long)]
    embedding: bool,
    /// Only the matrix products: ruda's native product against burn-cubecl's, on CUDA or else wgpu
    #[arg(long)]
    matmul: bool,
    /// Only softmax: its checks, and its kernels against a copy of the same bytes
    #[arg(long)]
    softmax: bool,
    /// Only the native Adam update's checks against the f64 reference, on CUDA or else wgpu
    #[arg(long)]
    adam: bool,
    /// Only the native GELU kernels' checks against the f64 reference, on CUDA or else wgpu
    #[arg(long)]
    gelu: bool,
    /// With --softmax: the kernels against a copy only, without the checks (they compile every
    /// autotune candidate, minutes on a fresh machine)
    #[arg(long)]
    no_checks: bool,
    /// Only the transformer step on the selected backends (RUDA_BENCH_BACKENDS): its median
    /// time, launches and host CPU per step, and the step back to back (one sync per 10 steps)
    #[arg(long)]
    step: bool,
    /// With --step: the dropout probabilities to run (comma-separated)
    #[arg(long, value_name = "P,Q", default_value = "0.1")]
    dropouts: String,
    /// With --step: timed steps (the median is reported)
    #[arg(long, default_value_t = 30)]
    steps: usize,
    /// With --step: untimed steps first (compilation, autotuning)
    #[arg(long, default_value_t = 10)]
    warmup: usize,
    /// With --step: CubeCL's profiling log (cubecl.toml: `[profiling.logger] level =
    /// "minimal"`, `file = PATH`), whose lines over a window of steps count the launches
    #[arg(long, value_name = "PATH")]
    launch_log: Option<String>,
    /// With --step: after the timed steps, sample where the training, burn-fusion and CubeCL
    /// threads spend 50 more steps (`example_common::thread_sampler`, about every 0.5 ms), each
    /// synced and then back to back (one sync per 10), and write the raw samples to
    /// `PREFIX-<backend>-d<percent>.txt` and `...-pipelined.txt` (resolved against the
    /// unstripped binary by `benches/device/symbolize_samples.py`)
    #[arg(long, value_name = "PREFIX")]
    sample_threads: Option<String>,
    /// Only the soak run: a small transformer trained for STEPS steps on CUDA (else wgpu), the
    /// memory CubeCL holds and the cache directory's size sampled along the way
    #[arg(long, value_name = "STEPS")]
    soak: Option<usize>,
    /// Only the reliability checks on CUDA: an injected cuBLAS failure (run with
    /// RUDA_FAULT_INJECT=ruda_matmul) is an error at the next read naming the product; f64
    /// LayerNorm and softmax give the right answer (Burn's composed operations)
    #[arg(long)]
    faults: bool,
    /// Only the host's cost per call on CUDA: a CubeCL launch, a cuBLAS product and an
    /// allocation back to back on tiny tensors, through ruda_runtime and through Burn, and the
    /// pieces of a product (its fence, the cuBLAS call) on the device thread alone
    #[arg(long)]
    launch_costs: bool,
    /// Where --benchmarks writes its CSV
    #[arg(long, value_name = "PATH")]
    csv: Option<String>,
    /// Only these benchmark groups (comma-separated)
    #[arg(long, value_name = "A,B")]
    groups: Option<String>,
    /// Only the benchmark cases whose name contains one of these (comma-separated), e.g.
    /// `16384x2048/fwdbwd-dy-x20` (to profile one case under Nsight Compute)
    #[arg(long, value_name = "A,B")]
    cases: Option<String>,
}

fn main() {
    let options = <Options as clap::Parser>::parse();
    if options.trace && !ruda_benches::span_profile::install() {
        eprintln!("--trace: another tracing subscriber is installed; no spans will be recorded");
    }
    if options.breakdown {
        breakdown(&options);
        return;
    }
    if options.autotune {
        autotune_only();
        return;
    }
    if options.benchmarks {
        benchmarks(&options);
        return;
    }
    if options.embedding {
        embedding_only();
        return;
    }
    if options.softmax {
        let failures = softmax_only(options.quick, !options.no_checks);
        std::process::exit(if failures > 0 { 1 } else { 0 });
    }
    if options.adam {
        let failures = checks_only::<AdamChecks>();
        std::process::exit(if failures > 0 { 1 } else { 0 });
    }
    if options.gelu {
        let failures = checks_only::<GeluChecks>();
        std::process::exit(if failures > 0 { 1 } else { 0 });
    }
    if options.step {
        step_only(&options);
        return;
    }
    if let Some(steps) = options.soak {
        let flat = soak_only(steps);
        std::process::exit(if flat { 0 } else { 1 });
    }
    if options.faults {
        let failures = faults_only();
        std::process::exit(if failures > 0 { 1 } else { 0 });
    }
    if options.launch_costs {
        #[cfg(feature = "cuda")]
        let result = ruda_benches::launch_costs::report();
        #[cfg(not(feature = "cuda"))]
        let result: Result<(), String> = Err("built without CUDA".into());
        if let Err(why) = result {
            println!("# launch costs: {why}");
            std::process::exit(1);
        }
        return;
    }
    if options.matmul {
        matmul_only();
        return;
    }
    if options.differential_only {
        let failures = differential_only(options.only.as_deref());
        println!("\n## Result\n\n{failures} check(s) failed");
        std::process::exit(if failures > 0 { 1 } else { 0 });
    }
    println!(
        "# burn-ruda gpu_suite {}",
        if options.quick { "(quick)" } else { "" }
    );
    println!("\n## Devices\n");
    ruda_runtime::device::print_devices();

    let mut failures = 0;

    #[cfg(feature = "cuda")]
    if ruda_runtime::runtime::cuda::cuda_device_count() > 0 {
        let device = cubecl::cuda::CudaDevice::new(0);
        failures += suite::<ruda_runtime::RudaCuda>("ruda-cuda", &device, &options);
        if !options.no_differential {
            failures += differential::<burn_ruda::Ruda<ruda_runtime::RudaCuda>>(
                "burn_ruda-cuda",
                &Default::default(),
                options.only.as_deref(),
            );
        }
        if !options.no_burn {
            burn_baseline::<Autodiff<burn::backend::Cuda>>(
                "burn-cuda",
                &Default::default(),
                &options,
            );
            burn_baseline::<burn_ruda::Autodiff<burn_ruda::Ruda<ruda_runtime::RudaCuda>>>(
                "burn_ruda-cuda",
                &Default::default(),
                &options,
            );
        }
    }

    #[cfg(feature = "wgpu")]
    {
        use cubecl::wgpu::WgpuDevice;
        let devices: Vec<WgpuDevice> = ruda_runtime::runtime::wgpu::wgpu_adapters()
            .into_iter()
            .map(|(d, _)| d)
            .collect();
        let gpu = devices
            .iter()
            .find(|d| matches!(d, WgpuDevice::DiscreteGpu(_)));
        let device = gpu
            .cloned()
            .or_else(|| devices.iter().find(|d| **d == WgpuDevice::Cpu).cloned());
        if let Some(device) = device {
            let name = if gpu.is_some() {
                "ruda-vulkan"
            } else {
                "ruda-lavapipe"
            };
            failures += suite::<ruda_runtime::RudaWgpu>(name, &device, &options);
            if !options.no_differential && gpu.is_some() {
                failures += differential::<burn_ruda::Ruda<ruda_runtime::RudaWgpu>>(
                    "burn_ruda-vulkan",
                    &device,
                    options.only.as_deref(),
                );
            }
            if !options.no_burn {
                let burn_name = if gpu.is_some() {
                    "burn-vulkan"
                } else {
                    "burn-lavapipe"
                };
                burn_baseline::<Autodiff<burn::backend::Wgpu>>(burn_name, &device, &options);
                let ruda_name = if gpu.is_some() {
                    "burn_ruda-vulkan"
                } else {
                    "burn_ruda-lavapipe"
                };
                burn_baseline::<burn_ruda::Autodiff<burn_ruda::Ruda<ruda_runtime::RudaWgpu>>>(
                    ruda_name, &device, &options,
                );
            }
        }
    }

    println!("\n## Result\n\n{failures} check(s) failed");
    if failures > 0 {
        std::process::exit(1);
    }
}

/// The published comparison (`--benchmarks`): every workload of `ruda_benches::suite` on
/// every backend present (or those `RUDA_BENCH_BACKENDS` names), one workload at a time across
/// the backends; a table on stdout and, with `--csv`, the CSV `bench_plots` draws.
fn benchmarks(options: &Options) {
    use ruda_benches::contenders::Contender;
    use ruda_benches::report::write_csv;
    use ruda_benches::suite::{measure, suite};
    let contenders = Contender::selected();
    println!("\n## Benchmarks: the same work on every backend\n");
    for c in &contenders {
        println!("# {c}: {}", c.backend_type());
    }
    let groups: Option<Vec<&str>> = options.groups.as_deref().map(|g| g.split(',').collect());
    let cases: Option<Vec<&str>> = options.cases.as_deref().map(|c| c.split(',').collect());
    println!("\ngroup\tcase\tbackend\tmedian_us\tthroughput\tdevice");
    let mut rows = Vec::new();
    for workload in suite(options.quick) {
        if groups
            .as_ref()
            .is_some_and(|g| !g.contains(&workload.group()))
        {
            continue;
        }
        let case = workload.case();
        if cases
            .as_ref()
            .is_some_and(|c| !c.iter().any(|part| case.contains(part)))
        {
            continue;
        }
        for contender in &contenders {
            match measure(contender, workload) {
                None => {}
                Some(Ok(row)) => {
                    println!("{}", row.table_row());
                    rows.push(row);
                }
                Some(Err(e)) => println!("# FAILED {e}"),
            }
        }
        // Each row as soon as it is measured: a command cut off by a time limit keeps them.
        if let Some(path) = &options.csv
            && let Err(e) = write_csv(std::path::Path::new(path), &rows)
        {
            eprintln!("cannot write {path}: {e}");
        }
    }
}

/// Only the differential checks (`--differential-only`), on CUDA and else the wgpu device.
fn differential_only(only: Option<&str>) -> usize {
    #[cfg(feature = "cuda")]
    if ruda_runtime::runtime::cuda::cuda_device_count() > 0 {
        return differential::<burn_ruda::Ruda<ruda_runtime::RudaCuda>>(
            "burn_ruda-cuda",
            &Default::default(),
            only,
        );
    }
    differential::<burn_ruda::Ruda<ruda_runtime::RudaWgpu>>(
        "burn_ruda-wgpu",
        &Default::default(),
        only,
    )
}

/// Only the matrix products (`--matmul`): ruda's native product (`Ruda`) against burn-cubecl's
/// tuned kernels (`burn_ruda::Inner`, the same device and fusion engine), on CUDA or else the wgpu
/// device, at the shapes of `ruda_benches::products::CASES`; f32 (TF32 on both where the GPU has
/// it) and bf16.
fn matmul_only() {
    use ruda_benches::products::{CASES, product_us};
    fn run<R: ruda_runtime::Runtime + ruda_runtime::burn_cubecl::CubeRuntime, F>(
        name: &str,
        device: &R::Device,
    ) where
        R::Device: burn::tensor::backend::DeviceOps,
        F: ruda_runtime::burn_cubecl::FloatElement,
    {
        type Native<R, F> = burn_ruda::Ruda<R, F>;
        type Burns<R, F> = burn_ruda::Inner<R, F, i32, u32>;
        let dtype = core::any::type_name::<F>();
        println!(
            "\n## {name}: matrix products, {dtype}, median us per call ({} calls back to back, \
             one sync)\n",
            ruda_benches::products::CALLS_PER_SYNC
        );
        println!("product\truda_us\tburn_us\tburn_over_ruda\truda_tflops\tburn_tflops");
        for product in CASES {
            let plan = TimingPlan::STANDARD;
            let native = product_us::<Native<R, F>>(device, product, plan);
            let burns = product_us::<Burns<R, F>>(device, product, plan);
            let tflops = |us: f64| product.flops() / us / 1e6;
            println!(
                "{}\t{native:.1}\t{burns:.1}\t{:.2}\t{:.1}\t{:.1}",
                product.name(),
                burns / native,
                tflops(native),
                tflops(burns)
            );
        }
        println!(
            "# native products run by this process so far: {}",
            ruda_tests::launches::matmul()
        );
    }
    #[cfg(feature = "cuda")]
    if ruda_runtime::runtime::cuda::cuda_device_count() > 0 {
        let device = Default::default();
        run::<ruda_runtime::RudaCuda, f32>("ruda-cuda", &device);
        run::<ruda_runtime::RudaCuda, burn::tensor::bf16>("ruda-cuda", &device);
        return;
    }
    run::<ruda_runtime::RudaWgpu, f32>("ruda-wgpu", &Default::default());
}

/// Only the embedding gradient (`--embedding`): ruda's native kernel (`Ruda`) against Burn's
/// `select_add` (`burn_ruda::Inner`, the same device and fusion engine), on CUDA or else the wgpu
/// device, at the sizes of `ruda_benches::embedding::CASES`.
fn embedding_only() {
    use ruda_benches::embedding::{CASES, embedding_backward_us};
    fn run<R: ruda_runtime::Runtime + ruda_runtime::burn_cubecl::CubeRuntime>(
        name: &str,
        device: &R::Device,
    ) where
        R::Device: burn::tensor::backend::DeviceOps,
    {
        type Native<R> = burn_ruda::Ruda<R>;
        type Burns<R> = burn_ruda::Inner<R, f32, i32, u32>;
        println!("\n## {name}: embedding backward, f32, median us per call (each call synced)\n");
        println!("rows\ttokens\td\truda_us\tburn_us\tburn_over_ruda");
        for (rows, tokens, d) in CASES {
            let plan = TimingPlan::STANDARD;
            let native = embedding_backward_us::<Native<R>>(device, rows, tokens, d, plan);
            let burns = embedding_backward_us::<Burns<R>>(device, rows, tokens, d, plan);
            println!(
                "{rows}\t{tokens}\t{d}\t{native:.1}\t{burns:.1}\t{:.2}",
                burns / native
            );
        }
    }
    #[cfg(feature = "cuda")]
    if ruda_runtime::runtime::cuda::cuda_device_count() > 0 {
        run::<ruda_runtime::RudaCuda>("ruda-cuda", &Default::default());
        return;
    }
    run::<ruda_runtime::RudaWgpu>("ruda-wgpu", &Default::default());
}

/// Only the LayerNorm autotuning section (`--autotune`), on CUDA or else the wgpu device.
fn autotune_only() {
    #[cfg(feature = "cuda")]
    if ruda_runtime::runtime::cuda::cuda_device_count() > 0 {
        return autotune::<ruda_runtime::RudaCuda>("ruda-cuda", &Default::default());
    }
    autotune::<ruda_runtime::RudaWgpu>("ruda-wgpu", &Default::default());
}

/// The first forward and backward call per shape (tuning on a fresh cache, a lookup on a cache
/// an earlier process wrote), the steady-state times, then the cache identity, files and the
/// candidate chosen per key (`ruda_runtime::autotune::autotune_report`).
fn autotune<R: Runtime>(name: &str, device: &R::Device) {
    let client = R::client(device);
    println!("\n## {name}: LayerNorm autotuning, f32\n");
    println!("shape\tfirst_fwd_us\tfirst_bwd_us\tfwd_us\tfwdbwd_us");
    for (rows, d) in SHAPES {
        let case = Case {
            rows,
            d,
            dtype: DType::F32,
        };
        let (first_fwd, first_bwd) = bench::first_calls_us::<R>(device, case);
        let steady = bench::native::<R>(device, case, None, TimingPlan::STANDARD);
        println!(
            "{rows}x{d}\t{first_fwd:.0}\t{first_bwd:.0}\t{:.1}\t{:.1}",
            steady.fwd_us, steady.fwdbwd_us
        );
    }
    println!(
        "\n{}",
        ruda_runtime::autotune::autotune_report(&client, device)
    );
}

/// Only the breakdown of LayerNorm through Burn (`--breakdown`), on CUDA or else the wgpu
/// device.
fn breakdown(options: &Options) {
    type RudaAd<R> = burn_ruda::Autodiff<burn_ruda::Ruda<R>>;
    let shapes = if options.quick {
        vec![(1024, 1024)]
    } else {
        vec![(16384, 1024), (16384, 4096)]
    };
    println!("\n## burn_ruda: LayerNorm through Burn, step by step (f32)\n");
    println!("impl\tshape\tstep\tlatency_us\tenqueue_us\tthroughput_us");
    for (rows, d) in shapes {
        #[cfg(feature = "cuda")]
        if ruda_runtime::runtime::cuda::cuda_device_count() > 0 {
            ruda_benches::breakdown::print_raw_breakdown::<ruda_runtime::RudaCuda>(
                "ruda-cuda",
                &Default::default(),
                rows,
                d,
                plan(options),
            );
            ruda_benches::breakdown::print_breakdown::<RudaAd<ruda_runtime::RudaCuda>>(
                "burn_ruda-cuda",
                &Default::default(),
                rows,
                d,
                plan(options),
            );
            if options.trace {
                ruda_benches::breakdown::print_breakdown_trace::<RudaAd<ruda_runtime::RudaCuda>>(
                    &Default::default(),
                    rows,
                    d,
                );
            }
            continue;
        }
        ruda_benches::breakdown::print_breakdown::<RudaAd<ruda_runtime::RudaWgpu>>(
            "burn_ruda-wgpu",
            &Default::default(),
            rows,
            d,
            plan(options),
        );
        if options.trace {
            ruda_benches::breakdown::print_breakdown_trace::<RudaAd<ruda_runtime::RudaWgpu>>(
                &Default::default(),
                rows,
                d,
            );
        }
    }
}

fn shapes(options: &Options) -> Vec<(usize, usize)> {
    if options.quick {
        vec![(256, 768), (1024, 1024), (128, 4096)]
    } else {
        SHAPES.to_vec()
    }
}

fn plan(options: &Options) -> TimingPlan {
    if options.smoke {
        TimingPlan::QUICK
    } else {
        TimingPlan::STANDARD
    }
}

fn supports(client: &cubecl::client::ComputeClient<impl cubecl::Runtime>, dtype: DType) -> bool {
    let storage: cubecl::ir::StorageType = dtype.into();
    client.properties().supports_type(storage)
}

/// Correctness checks and native benchmarks of runtime `R` on `device`; returns the failures.
fn suite<R: Runtime>(name: &str, device: &R::Device, options: &Options) -> usize {
    let client = R::client(device);
    println!("\n## {name}: LayerNorm checks against the f64 reference\n");
    let mut failures = ruda_tests::layer_norm_checks::run_all(&client, !options.quick);
    println!("\n## {name}: Adam checks against the f64 reference\n");
    failures += ruda_tests::adam_checks::run_all(&client);
    println!("\n## {name}: GELU checks against the f64 reference\n");
    failures += ruda_tests::gelu_checks::run_all(&client);

    println!("\n## {name}: LayerNorm benchmarks (native kernels, default rule)\n");
    println!(
        "# every shape of the benchmark suite; each case on the caller's clock with ruda's sync \
         ({name}) and with CubeCL's ({name}{}), on CubeCL's device thread ({name}{}), and back \
         to back ({name}{}: {} calls, one sync, per call)",
        Clock::CubeclSync.suffix(),
        Clock::DeviceThread.suffix(),
        Clock::BackToBack.suffix(),
        bench::BACK_TO_BACK_CALLS
    );
    let cubecl_sync = || cubecl::future::block_on(client.sync()).expect("device sync failed");
    let ruda_sync = || ruda_runtime::sync::<R>(device).expect("device sync failed");
    println!(
        "# a call that launches nothing: {:.1} us on the caller's clock with ruda's sync, {:.1} \
         us with CubeCL's, {:.1} us on the device thread",
        ruda_benches::timing::median_us(plan(options), || {}, ruda_sync),
        ruda_benches::timing::median_us(plan(options), || {}, cubecl_sync),
        ruda_benches::timing::median_on_device_thread_us(&client, plan(options), || {})
    );
    // A shape whose kernels take a few microseconds: back to back, a call costs its host work.
    let tiny = Case {
        rows: 64,
        d: 768,
        dtype: DType::F32,
    };
    let host = bench::native_clocked::<R>(device, tiny, None, plan(options), Clock::BackToBack);
    println!(
        "# host work of a call (64x768 f32, back to back): forward {:.1} us, forward+backward \
         {:.1} us",
        host.fwd_us, host.fwdbwd_us
    );
    println!("impl\tdtype\tshape\tfwd_us\tfwd_GBps\tfwdbwd_us\tfwdbwd_GBps");
    let table_shapes = if options.quick {
        shapes(options)
    } else {
        ruda_benches::suite::LAYER_NORM_SHAPES.to_vec()
    };
    for dtype in [DType::F32, DType::BF16, DType::F16] {
        if !supports(&client, dtype) {
            println!("# {dtype:?} not supported on this device: skipped");
            continue;
        }
        if options.quick && dtype != DType::F32 {
            continue;
        }
        for &(rows, d) in &table_shapes {
            let case = Case { rows, d, dtype };
            for clock in [
                Clock::Caller,
                Clock::CubeclSync,
                Clock::DeviceThread,
                Clock::BackToBack,
            ] {
                let timing = bench::native_clocked::<R>(device, case, None, plan(options), clock);
                println!(
                    "{}",
                    timing.row(&format!("{name}{}", clock.suffix()), &case)
                );
            }
        }
    }

    println!("\n## {name}: every variant, f32\n");
    println!("impl\tdtype\tshape\tfwd_us\tfwd_GBps\tfwdbwd_us\tfwdbwd_GBps");
    let has_plane = client
        .properties()
        .features
        .plane
        .contains(cubecl::features::Plane::Ops);
    for (rows, d) in shapes(options) {
        let case = Case {
            rows,
            d,
            dtype: DType::F32,
        };
        for variant in ruda_tests::layer_norm_checks::VARIANTS {
            // One unit per row is for CPU adapters; on a GPU it would only cost device time.
            if variant == Variant::UnitPerRow && has_plane {
                continue;
            }
            let mut reductions = vec![Reduction::SharedMemory];
            if has_plane {
                reductions.push(Reduction::Plane);
            }
            // The register variants' backward column sums both ways, side by side.
            let column_sums = match variant {
                Variant::PlanePerRow | Variant::CubePerRow => {
                    vec![ColumnSums::Registers, ColumnSums::SharedMemory]
                }
                _ => vec![ColumnSums::Auto],
            };
            for reduction in reductions {
                if !variant_fits(variant, d) {
                    continue;
                }
                for &sums in &column_sums {
                    let strategy = Strategy::new(variant, reduction).with_column_sums(sums);
                    let label = match sums {
                        ColumnSums::Auto => format!("{name}/{variant:?}/{reduction:?}"),
                        _ => format!("{name}/{variant:?}/{reduction:?}/sums-{sums:?}"),
                    };
                    // Shared column sums panic, before launching, where they do not fit.
                    let timing = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        bench::native::<R>(device, case, Some(strategy), plan(options))
                    }));
                    match timing {
                        Ok(timing) => println!("{}", timing.row(&label, &case)),
                        Err(_) => println!("# {label} {rows}x{d}: does not fit, skipped"),
                    }
                }
            }
        }
    }
    failures
}

/// The differential suite (every op family against NdArray; gradients of an MLP, a CNN and a
/// `TransformerEncoder` under `burn_ruda::Autodiff<B>` against `Autodiff<NdArray>`) on `B`, the
/// same checks `tests/tests/backend/burn_backend.rs` runs on lavapipe; returns the failures.
fn differential<B: burn_ruda::NativeBackend>(
    name: &str,
    device: &B::Device,
    only: Option<&str>,
) -> usize {
    use ruda_tests::differential::{Family, MatmulPrecision, report, run_checks_with};
    println!("\n## {name}: differential checks against NdArray\n");
    let precision = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        MatmulPrecision::of::<B>(device)
    }));
    println!(
        "# f32 matmul operands on this device: {precision:?} (measured; the matmul, convolution \
         and attention checks allow its rounding)"
    );
    // Family by family, so that each result is printed as soon as it is known; the products'
    // family too, which CI's lavapipe runs leave out.
    let failures = Family::ALL
        .iter()
        .chain([&Family::Products])
        .map(|family| {
            let outcomes =
                run_checks_with::<B, burn_ruda::Autodiff<B>>(&[*family], device, device, |check| {
                    let selected = only.is_none_or(|only| check.contains(only));
                    if selected {
                        eprintln!("running: {check}");
                    }
                    selected
                });
            report(&outcomes)
        })
        .sum();
    println!(
        "# native matrix products run so far: {}",
        ruda_tests::launches::matmul()
    );
    failures
}

/// Whether `variant` accepts rows of `d` (the register-held variants have a size limit).
fn variant_fits(variant: Variant, d: usize) -> bool {
    match variant {
        Variant::PlanePerRow => d <= 32 * 4 * ruda_runtime::layer_norm::MAX_VECTORS_PER_UNIT,
        Variant::CubePerRow => d <= 256 * 4 * ruda_runtime::layer_norm::MAX_VECTORS_PER_UNIT,
        Variant::CubePerRowLooped | Variant::UnitPerRow => true,
    }
}

/// `burn::nn::LayerNorm` under an autodiff backend `B`, f32, the same shapes: Burn's composed
/// ops under `burn::backend::Autodiff`, the native node under `burn_ruda::Autodiff`.
fn burn_baseline<B: burn_ruda::BackwardWithGrad>(
    name: &str,
    device: &B::Device,
    options: &Options,
) {
    println!(
        "\n## {name}: burn::nn::LayerNorm through Burn (forward; forward + backward + x.grad), f32\n"
    );
    println!("impl\tdtype\tshape\tfwd_us\tfwd_GBps\tfwdbwd_us\tfwdbwd_GBps");
    for (rows, d) in shapes(options) {
        let case = Case {
            rows,
            d,
            dtype: DType::F32,
        };
        let timing = bench::burn_layer_norm::<B>(device, rows, d, plan(options));
        println!("{}", timing.row(name, &case));
    }
}

/// `--softmax`: the softmax checks against the f64 reference on CUDA (else the wgpu GPU, else
/// the CPU adapter; `checks` false: none), then the kernels against a copy of the same bytes, back to back, f32 and
/// bf16 where the device has it. Returns the number of failed check groups.
fn softmax_only(quick: bool, checks: bool) -> usize {
    #[cfg(feature = "cuda")]
    if ruda_runtime::runtime::cuda::cuda_device_count() > 0 {
        return softmax_section::<ruda_runtime::RudaCuda>(
            "ruda-cuda",
            &cubecl::cuda::CudaDevice::new(0),
            quick,
            checks,
        );
    }
    let device = ruda_runtime::runtime::wgpu::wgpu_adapters()
        .into_iter()
        .map(|(d, _)| d)
        .find(|d| matches!(d, cubecl::wgpu::WgpuDevice::DiscreteGpu(_)))
        .unwrap_or(cubecl::wgpu::WgpuDevice::Cpu);
    softmax_section::<ruda_runtime::RudaWgpu>("ruda-wgpu", &device, quick, checks)
}

fn softmax_section<R: Runtime>(name: &str, device: &R::Device, quick: bool, checks: bool) -> usize {
    use ruda_benches::softmax::{QUICK_SHAPES, Row, SHAPES, measure};
    let client = R::client(device);
    let failures = if checks {
        println!("\n## Softmax checks on {name}\n");
        ruda_tests::softmax_checks::run_all(&client, !quick)
    } else {
        0
    };
    println!("\n## Softmax kernels against a copy on {name}, back to back\n");
    println!("{}", Row::HEADER);
    let (shapes, calls, rounds) = if quick {
        (QUICK_SHAPES, 5, 3)
    } else {
        (SHAPES, 20, 7)
    };
    for dtype in [DType::F32, DType::BF16] {
        let storage: cubecl::ir::StorageType = dtype.into();
        if !client.properties().supports_type(storage) {
            println!("# {dtype:?}: not supported by this device");
            continue;
        }
        for shape in shapes {
            for row in measure(&client, shape, dtype, calls, rounds) {
                println!("{}", row.line());
            }
        }
    }
    failures
}

/// A set of check groups that `--adam` or `--gelu` runs alone.
trait CheckSet {
    /// The checked operation, in headings.
    const NAME: &'static str;
    /// Runs every group on `client`; returns the number that failed.
    fn run_all<Rt: cubecl::Runtime>(client: &cubecl::client::ComputeClient<Rt>) -> usize;
}

/// The native Adam update's checks.
struct AdamChecks;

impl CheckSet for AdamChecks {
    const NAME: &'static str = "Adam";
    fn run_all<Rt: cubecl::Runtime>(client: &cubecl::client::ComputeClient<Rt>) -> usize {
        ruda_tests::adam_checks::run_all(client)
    }
}

/// The native GELU kernels' checks.
struct GeluChecks;

impl CheckSet for GeluChecks {
    const NAME: &'static str = "GELU";
    fn run_all<Rt: cubecl::Runtime>(client: &cubecl::client::ComputeClient<Rt>) -> usize {
        ruda_tests::gelu_checks::run_all(client)
    }
}

/// `--adam`, `--gelu`: one operation's checks against the f64 reference on CUDA (else the wgpu
/// GPU, else the CPU adapter). Returns the number of failed check groups.
fn checks_only<C: CheckSet>() -> usize {
    #[cfg(feature = "cuda")]
    if ruda_runtime::runtime::cuda::cuda_device_count() > 0 {
        println!("\n## {} checks on ruda-cuda\n", C::NAME);
        let client =
            <ruda_runtime::RudaCuda as cubecl::Runtime>::client(&cubecl::cuda::CudaDevice::new(0));
        return C::run_all(&client);
    }
    let device = ruda_runtime::runtime::wgpu::wgpu_adapters()
        .into_iter()
        .map(|(d, _)| d)
        .find(|d| matches!(d, cubecl::wgpu::WgpuDevice::DiscreteGpu(_)))
        .unwrap_or(cubecl::wgpu::WgpuDevice::Cpu);
    println!("\n## {} checks on ruda-wgpu ({device:?})\n", C::NAME);
    C::run_all(&<ruda_runtime::RudaWgpu as cubecl::Runtime>::client(
        &device,
    ))
}

/// `--step`: the transformer training step (forward, loss, backward, Adam, device sync) on
/// every selected backend at each `--dropouts`, `--warmup` untimed steps then the median of
/// `--steps`; then a window of steps over which it counts, per step, the kernels CubeCL
/// launched (the lines `--launch-log` gained), the native products and softmaxes, and the host
/// threads' CPU time by role.
fn step_only(options: &Options) {
    use example_common::thread_cpu::ThreadCpu;
    use ruda_benches::contenders::Contender;
    use ruda_benches::workloads::{TransformerSize, Workload, prepare};
    use std::time::{Duration, Instant};

    let size = if options.quick {
        TransformerSize::QUICK
    } else {
        TransformerSize::DESIGN
    };
    let dropouts: Vec<u32> = options
        .dropouts
        .split(',')
        .map(|p| {
            let p: f64 = p
                .trim()
                .parse()
                .expect("--dropouts: probabilities such as 0,0.1");
            (p * 100.0).round() as u32
        })
        .collect();
    let count_lines = |path: &str| {
        std::fs::read_to_string(path)
            .map(|text| text.lines().count())
            .unwrap_or(0)
    };
    // The profiling logger writes from its own thread: let it drain before reading.
    let settle = || std::thread::sleep(Duration::from_millis(300));
    let window = 10;
    println!("\n## Transformer step\n");
    println!(
        "# Adam of ruda's contenders: {} (RUDA_BENCH_ADAM; Burn's contenders and \
         ruda-cuda-composed run Burn's)",
        ruda_benches::workloads::AdamChoice::for_ruda().name()
    );
    println!(
        "backend\tcase\tmedian_ms\tp10_ms\tp90_ms\tmin_ms\tsteps\tkernels_per_step\tproducts_per_step\tsoftmax_launches_per_step\ttraining_cpu_ms\tfusion_cpu_ms\tcubecl_cpu_ms\tpipelined_ms"
    );
    for &percent in &dropouts {
        for contender in Contender::selected() {
            let workload = Workload::TransformerStep(size.with_dropout_percent(percent));
            if !workload.applies_to(&contender) {
                continue;
            }
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut call = prepare(&contender, workload).expect("the workload applies");
                for _ in 0..options.warmup {
                    call();
                }
                let mut times: Vec<f64> = (0..options.steps.max(1))
                    .map(|_| {
                        let start = Instant::now();
                        call();
                        start.elapsed().as_secs_f64() * 1e3
                    })
                    .collect();
                times.sort_by(f64::total_cmp);
                let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
                settle();
                let lines = options.launch_log.as_deref().map(count_lines);
                let log_lines = |path: &str| {
                    std::fs::read_to_string(path)
                        .map(|t| t.lines().map(str::to_owned).collect::<Vec<_>>())
                        .unwrap_or_default()
                };
                let products = ruda_tests::launches::matmul();
                let softmaxes = ruda_tests::launches::softmax();
                let cpu = ThreadCpu::snapshot().ok();
                let start = Instant::now();
                for _ in 0..window {
                    call();
                }
                let wall = start.elapsed();
                let cpu =
                    cpu.and_then(|before| Some(ThreadCpu::snapshot().ok()?.since(&before, wall)));
                settle();
                let per_step = |n: usize| n as f64 / window as f64;
                let (kernels, families) = match (lines, options.launch_log.as_deref()) {
                    (Some(before), Some(path)) => {
                        let window_lines: Vec<String> =
                            log_lines(path).into_iter().skip(before).collect();
                        (
                            format!("{:.1}", per_step(window_lines.len())),
                            kernel_families(&window_lines, window),
                        )
                    }
                    _ => ("-".into(), String::new()),
                };
                let softmax_now = ruda_tests::launches::softmax();
                let products_now = ruda_tests::launches::matmul();
                // Steps back to back, one sync per window of 10: the step when the host runs
                // ahead of the GPU (median of 3 windows).
                let mut pipelined: Vec<f64> = (0..3)
                    .map(|_| {
                        let start = Instant::now();
                        pipelined_window(&mut call, window);
                        start.elapsed().as_secs_f64() * 1e3 / window as f64
                    })
                    .collect();
                pipelined.sort_by(f64::total_cmp);
                // After the counts: the sampled steps are not part of the window.
                if let Some(prefix) = options.sample_threads.as_deref() {
                    let name = format!(
                        "{prefix}-{}-d{percent}",
                        file_name_part(&contender.to_string())
                    );
                    sample_threads(&format!("{name}.txt"), 50, 1, &mut call);
                    sample_threads(&format!("{name}-pipelined.txt"), 5, window, &mut || {
                        pipelined_window(&mut call, window)
                    });
                }
                let cpu_ms = |role: &str| {
                    cpu.as_ref().map_or("-".into(), |c| {
                        format!("{:.2}", c.per_step(role, window).as_secs_f64() * 1e3)
                    })
                };
                format!(
                    "{contender}\t{}\t{:.2}\t{:.2}\t{:.2}\t{:.2}\t{}\t{kernels}\t{:.1}\t{:.1}\t{}\t{}\t{}\t{:.2}{families}",
                    workload.case(),
                    at(0.5),
                    at(0.1),
                    at(0.9),
                    times[0],
                    times.len(),
                    per_step(products_now - products),
                    per_step(softmax_now.0 + softmax_now.1 - softmaxes.0 - softmaxes.1),
                    cpu_ms("training"),
                    cpu_ms("fusion"),
                    cpu_ms("cubecl"),
                    pipelined[1],
                )
            }));
            match result {
                Ok(line) => println!("{line}"),
                Err(panic) => println!(
                    "{contender}\t{}\terror: {}",
                    workload.case(),
                    panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default()
                ),
            }
        }
    }
}

/// `backend`'s first word with anything but letters, digits and '-' replaced: a file name part.
fn file_name_part(backend: &str) -> String {
    backend
        .split_whitespace()
        .next()
        .unwrap_or("backend")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `steps` training steps back to back with one device sync, after the last
/// (`ruda_benches::workloads::set_sync_every_step`).
fn pipelined_window(call: &mut dyn FnMut(), steps: usize) {
    use ruda_benches::workloads::set_sync_every_step;
    set_sync_every_step(false);
    for _ in 1..steps {
        call();
    }
    set_sync_every_step(true);
    call();
}

/// Samples the service threads over `rounds` calls of `run` (`steps` training steps each) and
/// writes them to `path` (`--sample-threads`); a failure is reported, not fatal.
fn sample_threads(path: &str, rounds: usize, steps: usize, run: &mut dyn FnMut()) {
    use example_common::thread_sampler::ThreadSampler;
    let sampler = match ThreadSampler::start(
        &["training", "fusion", "cubecl"],
        std::time::Duration::from_micros(500),
    ) {
        Ok(sampler) => sampler,
        Err(err) => {
            eprintln!("--sample-threads: {err}");
            return;
        }
    };
    let start = std::time::Instant::now();
    for _ in 0..rounds {
        run();
    }
    let wall = start.elapsed();
    let samples = sampler.finish();
    match samples.write(std::path::Path::new(path)) {
        Ok(()) => eprintln!(
            "--sample-threads: {path} over {} steps ({:.2} ms a step) by role {:?}, {} dropped",
            rounds * steps,
            wall.as_secs_f64() * 1e3 / (rounds * steps) as f64,
            samples.count_by_role(),
            samples.dropped
        ),
        Err(err) => eprintln!("--sample-threads: {err}"),
    }
}

/// The kernel families of CubeCL's launch log (`Executing <name>` lines, level "minimal"), in
/// the order a name is matched: one line `# launches per step by family: ...` and the ten most
/// launched kernels, each per step over `steps`.
fn kernel_families(lines: &[String], steps: usize) -> String {
    const FAMILIES: [(&str, &[&str]); 9] = [
        ("softmax", &["softmax"]),
        (
            "layer_norm",
            &[
                "layernorm",
                "forwardregisters",
                "backwardregisters",
                "forwardlooped",
                "backwardlooped",
                "reducepartials",
                "forwardunit",
                "backwardunit",
            ],
        ),
        ("embedding", &["embedding"]),
        ("matmul", &["matmul", "gemm", "mma"]),
        (
            "random",
            &["random", "bernoulli", "prng", "uniform", "normal"],
        ),
        (
            "reduction",
            &["reduce", "sum", "mean", "argmax", "max", "min"],
        ),
        (
            "copy/layout",
            &[
                "copy",
                "cast",
                "contiguous",
                "layout",
                "fill",
                "slice",
                "gather",
                "select",
                "scatter",
                "repeat",
            ],
        ),
        (
            "elementwise",
            &[
                "elemwise",
                "fuse",
                "unary",
                "binop",
                "binary",
                "elementwise",
            ],
        ),
        ("other", &[""]),
    ];
    let mut counts = vec![0usize; FAMILIES.len()];
    let mut names: std::collections::BTreeMap<String, usize> = Default::default();
    for line in lines {
        let Some(name) = line.strip_prefix("Executing ") else {
            continue;
        };
        // CubeCL names kernels by their type (`BackwardUnitColumns`), so keys have no `_`.
        let low = name.to_ascii_lowercase().replace('_', "");
        let family = FAMILIES
            .iter()
            .position(|(_, keys)| keys.iter().any(|k| low.contains(k)))
            .unwrap_or(FAMILIES.len() - 1);
        counts[family] += 1;
        *names.entry(name.chars().take(120).collect()).or_default() += 1;
    }
    let per = |n: usize| n as f64 / steps.max(1) as f64;
    let mut out = String::from("\n# launches per step by family:");
    for ((family, _), n) in FAMILIES.iter().zip(&counts) {
        if *n > 0 {
            out.push_str(&format!(" {family} {:.1};", per(*n)));
        }
    }
    let mut top: Vec<(String, usize)> = names.into_iter().collect();
    top.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    for (name, n) in top.into_iter().take(10) {
        out.push_str(&format!("\n#   {:6.1}  {name}", per(n)));
    }
    out
}

/// `--soak STEPS`: the soak run of `ruda_tests::soak` on CUDA (else the best wgpu device), its
/// samples as they come, then whether memory and cache stayed flat after the warm-up.
fn soak_only(steps: usize) -> bool {
    use ruda_tests::soak::{Sample, SoakConfig, check_flat, run};
    let config = SoakConfig::gpu(steps);
    println!("\n## Soak: {steps} steps, {config:?}\n");
    println!("{}", Sample::HEADER);
    let print = |s: &Sample| println!("{}", s.line());
    #[cfg(feature = "cuda")]
    let samples = if ruda_runtime::runtime::cuda::cuda_device_count() > 0 {
        run::<ruda_runtime::RudaCuda>(&cubecl::cuda::CudaDevice::new(0), config, print)
    } else {
        run::<ruda_runtime::RudaWgpu>(&Default::default(), config, print)
    };
    #[cfg(not(feature = "cuda"))]
    let samples = run::<ruda_runtime::RudaWgpu>(&Default::default(), config, print);
    match check_flat(&samples, config.warmup) {
        Ok(()) => {
            println!("# flat after the warm-up ({} steps)", config.warmup);
            true
        }
        Err(growth) => {
            println!("# GREW after the warm-up:\n{growth}");
            false
        }
    }
}

/// `--faults`: on CUDA, an injected product failure (`RUDA_FAULT_INJECT=ruda_matmul`) is an
/// error at the next read and sync naming the product, and f64 LayerNorm and softmax (which the
/// native kernels do not take) match NdArray. Returns the number of failed checks.
fn faults_only() -> usize {
    #[cfg(feature = "cuda")]
    {
        use burn::tensor::{Tensor, TensorData, activation};
        type R = burn_ruda::Ruda<ruda_runtime::RudaCuda>;
        type N = burn::backend::NdArray<f64>;
        if ruda_runtime::runtime::cuda::cuda_device_count() == 0 {
            println!("# no CUDA device");
            return 1;
        }
        let device = Default::default();
        let mut failures = 0;
        let mut check = |name: &str, ok: bool, detail: String| {
            println!("{}\t{name}: {detail}", if ok { "PASS" } else { "FAIL" });
            if !ok {
                failures += 1;
            }
        };

        // f64: Burn's composed LayerNorm and softmax, against NdArray in f64.
        let values: Vec<f64> = (0..24)
            .map(|i| (i as f64 * 0.37).sin() * 3.0 + 1e3)
            .collect();
        // Created as f64 on the device: `from_data` with the device alone would store the
        // backend's default float (f32) and lose the digits the comparison is about.
        let f64_on = (&device, burn::tensor::DType::F64);
        let x = Tensor::<R, 2>::from_data(TensorData::new(values.clone(), [4, 6]), f64_on);
        let nx = Tensor::<N, 2>::from_data(TensorData::new(values, [4, 6]), &Default::default());
        let gamma = |d: usize| (0..d).map(|i| 1.0 + i as f64 * 0.1).collect::<Vec<f64>>();
        let g = Tensor::<R, 1>::from_data(TensorData::new(gamma(6), [6]), f64_on);
        let ng = Tensor::<N, 1>::from_data(TensorData::new(gamma(6), [6]), &Default::default());
        let max_diff = |a: TensorData, b: TensorData| {
            let (a, b) = (
                a.convert::<f64>().to_vec::<f64>().unwrap(),
                b.convert::<f64>().to_vec::<f64>().unwrap(),
            );
            a.iter()
                .zip(&b)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0f64, f64::max)
        };
        let x_is_f64 = x.dtype() == burn::tensor::DType::F64;
        let ln = ruda_tests::differential::module_ops::layer_norm_of(x.clone(), g, None, 1e-5);
        let nln = ruda_tests::differential::module_ops::layer_norm_of(nx.clone(), ng, None, 1e-5);
        let diff = max_diff(ln.into_data(), nln.into_data());
        check(
            "f64 LayerNorm = NdArray",
            x_is_f64 && diff < 1e-10,
            format!("max diff {diff:.2e}"),
        );
        let sm = activation::log_softmax(x, 1);
        let nsm = activation::log_softmax(nx, 1);
        let diff = max_diff(sm.into_data(), nsm.into_data());
        check(
            "f64 log_softmax = NdArray",
            diff < 1e-10,
            format!("max diff {diff:.2e}"),
        );

        // An injected product failure: an error at the next read and sync, never numbers.
        let injected = std::env::var(ruda_runtime::faults::ENV_FAULT_INJECT)
            .is_ok_and(|v| v.contains("ruda_matmul"));
        if injected {
            let a = Tensor::<R, 2>::ones([64, 64], &device);
            let product = a.clone().matmul(a);
            use burn::tensor::ops::FloatTensorOps;
            let read =
                cubecl::future::block_on(R::float_into_data(product.into_primitive().tensor()));
            let error = read
                .as_ref()
                .err()
                .map(|e| format!("{e:?}"))
                .unwrap_or_default();
            check(
                "injected cuBLAS failure: the read is an error naming ruda_matmul",
                read.is_err() && error.contains("ruda_matmul"),
                error.chars().take(200).collect(),
            );
            let sync = <R as burn::tensor::backend::Backend>::sync(&device);
            check(
                "injected cuBLAS failure: the sync is an error too",
                sync.is_err(),
                format!("{:?}", sync.err()).chars().take(120).collect(),
            );
            use cubecl::device::Device as _;
            let cleared = ruda_runtime::faults::clear(cubecl::cuda::CudaDevice::new(0).to_id());
            let a = Tensor::<R, 2>::ones([64, 64], &device);
            let value: Vec<f32> = a.clone().matmul(a).into_data().to_vec().unwrap();
            check(
                "after faults::clear the next product is right",
                cleared.is_some() && value.iter().all(|v| *v == 64.0),
                format!("first value {}", value[0]),
            );
        } else {
            println!(
                "# RUDA_FAULT_INJECT=ruda_matmul not set: the injected failure is not checked"
            );
        }
        failures
    }
    #[cfg(not(feature = "cuda"))]
    {
        println!("# built without CUDA");
        1
    }
}
