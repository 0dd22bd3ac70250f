//! The host work of ruda's LayerNorm calls: many forward (or forward+backward) calls on a shape
//! whose kernels take almost nothing, a device sync every `--every` calls. Prints, per call, the
//! median over batches of the caller thread's time before the sync (its own work, as long as a
//! batch's tasks fit in CubeCL's device-thread queue of 32, e.g. `--every 4`; with more it also
//! waits for room in that queue) and of the whole batch with its sync. `--alloc-only` makes the
//! forward's three allocations and nothing else, to separate the device thread's share, and
//! `--alloc-together` the same three in one call. Run it
//! under `perf record -g` to see where a call's host time goes.
//!
//! `cargo run --release -p ruda-benches --features gpu-suite --example layer_norm_host -- \
//!   --calls 20000 --every 4 [--backward] [--alloc-only | --alloc-together] [--cuda]`

use std::time::Instant;

use ruda_benches::layer_norm::{Case, Inputs};
use ruda_runtime::prelude::DType;
use ruda_runtime::{Runtime, TensorBuffer};

#[derive(clap::Parser, Debug)]
struct Options {
    /// Timed calls
    #[arg(long, default_value_t = 20000)]
    calls: usize,
    /// A device sync after this many calls
    #[arg(long, default_value_t = 100)]
    every: usize,
    /// Forward and backward in each call
    #[arg(long)]
    backward: bool,
    /// Rows of the tiny shape
    #[arg(long, default_value_t = 4)]
    rows: usize,
    /// Row length of the tiny shape
    #[arg(long, default_value_t = 768)]
    d: usize,
    /// On CUDA device 0 rather than the first wgpu adapter
    #[arg(long)]
    cuda: bool,
    /// Only the forward's three output allocations in each call, one at a time
    #[arg(long)]
    alloc_only: bool,
    /// Only the same three allocations, in one call (`TensorBuffer::empty_together`)
    #[arg(long)]
    alloc_together: bool,
}

fn run<R: Runtime>(device: &R::Device, options: &Options) {
    let client = R::client(device);
    let case = Case {
        rows: options.rows,
        d: options.d,
        dtype: DType::F32,
    };
    let Inputs { x, gamma, beta, dy } = Inputs::new(&client, case);
    let call = || {
        if options.alloc_together {
            let stats: ruda_runtime::cubecl::zspace::Shape = [options.rows].into();
            drop(TensorBuffer::empty_together(
                &client,
                [
                    (x.shape.clone(), DType::F32),
                    (stats.clone(), DType::F32),
                    (stats, DType::F32),
                ],
            ));
            return;
        }
        if options.alloc_only {
            let stats: ruda_runtime::cubecl::zspace::Shape = [options.rows].into();
            drop([
                TensorBuffer::empty(&client, x.shape.clone(), DType::F32),
                TensorBuffer::empty(&client, stats.clone(), DType::F32),
                TensorBuffer::empty(&client, stats, DType::F32),
            ]);
            return;
        }
        let [_out, mean, rstd] =
            R::layer_norm(&client, x.clone(), gamma.clone(), Some(beta.clone()), 1e-5);
        if options.backward {
            drop(R::layer_norm_backward(
                &client,
                x.clone(),
                gamma.clone(),
                dy.clone(),
                mean,
                rstd,
            ));
        }
    };
    let sync = || ruda_runtime::sync::<R>(device).expect("device sync failed");
    // Warm-up: compilation and autotuning.
    for _ in 0..options.every.max(10) {
        call();
    }
    sync();
    let every = options.every.max(1);
    let (mut caller, mut total) = (Vec::new(), Vec::new());
    for _ in 0..options.calls.div_ceil(every) {
        let start = Instant::now();
        for _ in 0..every {
            call();
        }
        caller.push(start.elapsed().as_secs_f64() * 1e6 / every as f64);
        sync();
        total.push(start.elapsed().as_secs_f64() * 1e6 / every as f64);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let what = match (options.alloc_together, options.alloc_only, options.backward) {
        (true, _, _) => "three allocations in one call",
        (false, true, _) => "three allocations",
        (false, false, true) => "forward+backward",
        (false, false, false) => "forward",
    };
    println!(
        "{}x{} f32 {what}, batches of {every} calls and a sync: caller {:.2} us a call, with the \
         sync {:.2} us a call (medians of {} batches)",
        options.rows,
        options.d,
        median(&mut caller),
        median(&mut total),
        total.len()
    );
}

fn main() {
    let options = <Options as clap::Parser>::parse();
    if options.cuda {
        #[cfg(feature = "cuda")]
        {
            run::<ruda_runtime::RudaCuda>(&cubecl::cuda::CudaDevice::new(0), &options);
            return;
        }
        #[cfg(not(feature = "cuda"))]
        panic!("--cuda: built without the cuda feature");
    }
    run::<ruda_runtime::RudaWgpu>(&Default::default(), &options);
}
