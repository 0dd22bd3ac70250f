//! What one launch and one product cost the host on CUDA (`gpu_suite --launch-costs`).
//!
//! The transformer step is paced by CubeCL's device thread, which launches every kernel and
//! issues every cuBLAS product (docs/perf/host-launch.md). Here each kind of call runs on tiny
//! tensors, so that the GPU finishes each call long before the next is issued and the time per
//! call, back to back, is the host's: through `ruda_runtime` (the caller queues, the device
//! thread launches) and through Burn's `Ruda` (burn-fusion's thread between them). The pieces
//! of a product are then timed alone on the device thread
//! ([`ruda_runtime::matmul::cublas::product_host_costs`]).

use burn::tensor::{Tensor, activation};
use ruda_runtime::RudaCuda;
use ruda_runtime::prelude::*;
use ruda_runtime::softmax::Kind;

type Ruda = burn_ruda::Ruda<RudaCuda>;

/// Calls per timed batch (each batch ends with one sync).
const CALLS: usize = 400;
/// Timed batches after one untimed batch; the median is reported.
const ROUNDS: usize = 9;

/// Prints the table of host costs per call on CUDA device 0. `Err` when there is no device or
/// cuBLAS is not available on it.
pub fn report() -> Result<(), String> {
    if ruda_runtime::runtime::cuda::cuda_device_count() == 0 {
        return Err("no CUDA device".into());
    }
    let device = cubecl::cuda::CudaDevice::new(0);
    let client = <RudaCuda as cubecl::Runtime>::client(&device);
    ruda_runtime::matmul::cublas::available(&device)?;
    let sync = || ruda_runtime::sync::<RudaCuda>(&device).expect("sync");

    let small = |shape: [usize; 2]| {
        TensorBuffer::from_f32s(
            &client,
            &vec![0.5; shape[0] * shape[1]],
            shape.to_vec().into(),
            DType::F32,
        )
    };
    let (a, b) = (small([16, 16]), small([16, 16]));
    let row = small([1, 16]);

    println!(
        "\n## Host cost per call on CUDA, back to back ({CALLS} calls a batch, median of {ROUNDS})\n"
    );
    println!("| call (f32, tiny tensors) | microseconds per call |");
    println!("| --- | ---: |");
    let line = |name: &str, us: f64| println!("| {name} | {us:.2} |");

    line(
        "ruda_runtime: softmax forward 1x16 (one kernel, one allocation)",
        per_call(&sync, || {
            drop(ruda_runtime::softmax_forward(
                &client,
                row.clone(),
                1,
                Kind::Softmax,
            ));
        }),
    );
    line(
        "ruda_runtime: product 16x16x16 (one allocation, one cuBLAS product)",
        per_call(&sync, || {
            drop(ruda_runtime::matmul::cublas::matmul(
                &client,
                &device,
                a.clone(),
                b.clone(),
            ));
        }),
    );
    line(
        "ruda_runtime: an allocation alone (16x16)",
        per_call(&sync, || {
            drop(TensorBuffer::empty(
                &client,
                [16, 16].to_vec().into(),
                DType::F32,
            ));
        }),
    );

    let burn_device = Default::default();
    let x = Tensor::<Ruda, 2>::ones([16, 16], &burn_device);
    let burn_sync = || <Ruda as burn::tensor::backend::Backend>::sync(&burn_device).expect("sync");
    line(
        "Burn `Ruda`: softmax 16x16, result dropped (a native custom operation)",
        per_call(&burn_sync, || drop(activation::softmax(x.clone(), 1))),
    );
    line(
        "Burn `Ruda`: matmul 16x16x16, result dropped (a native custom operation)",
        per_call(&burn_sync, || drop(x.clone().matmul(x.clone()))),
    );
    line(
        "Burn `Ruda`: (x * 2 + 1).sum(), result dropped (burn-fusion may fuse or skip it)",
        per_call(&burn_sync, || {
            let y = x.clone() * 2.0 + 1.0;
            // The sum makes the element-wise result the input of another operation.
            drop(y.sum());
        }),
    );
    // The two halves alone: what one element-wise operation and one reduction cost on their own.
    line(
        "Burn `Ruda`: x + 1, result dropped (one element-wise operation)",
        per_call(&burn_sync, || drop(x.clone() + 1.0)),
    );
    line(
        "Burn `Ruda`: x.sum(), result dropped (one reduction)",
        per_call(&burn_sync, || drop(x.clone().sum())),
    );

    let pieces = ruda_runtime::matmul::cublas::product_host_costs(&device, CALLS, ROUNDS)?;
    println!("\nOn the device thread alone, per product:\n");
    println!("| piece of a product | microseconds per call |");
    println!("| --- | ---: |");
    println!(
        "| the four driver calls of the fence (context-wide record, stream wait, record, context-wide wait) | {:.2} |",
        pieces.fence_us
    );
    println!(
        "| `cublasGemmStridedBatchedEx` alone (16x16x16, no fence) | {:.2} |",
        pieces.gemm_us
    );
    println!(
        "| both, as a product issues them | {:.2} |",
        pieces.fenced_gemm_us
    );
    Ok(())
}

/// Microseconds per call of `call`, run [`CALLS`] times back to back and then synchronized:
/// the median of [`ROUNDS`] such batches after one untimed batch.
fn per_call(sync: &dyn Fn(), mut call: impl FnMut()) -> f64 {
    let mut batch = || {
        let start = std::time::Instant::now();
        for _ in 0..CALLS {
            call();
        }
        sync();
        start.elapsed().as_secs_f64() * 1e6 / CALLS as f64
    };
    batch();
    let mut times: Vec<f64> = (0..ROUNDS).map(|_| batch()).collect();
    times.sort_by(f64::total_cmp);
    times[ROUNDS / 2]
}
