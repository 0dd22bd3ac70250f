//! The timing method: wall clock around one call plus a device synchronize, warm-up calls
//! first, median of many (the method of `torch_layernorm.py`, so ratios are like for like).

use std::time::Instant;

/// Warm-up calls and timed calls of one measurement.
#[derive(Clone, Copy, Debug)]
pub struct TimingPlan {
    /// Calls made first and not timed (compilation, autotune, allocation).
    pub warmup: usize,
    /// Timed calls; the median is reported.
    pub iters: usize,
}

impl TimingPlan {
    /// 10 warm-up calls and the median of 50, as `torch_layernorm.py` does.
    pub const STANDARD: TimingPlan = TimingPlan {
        warmup: 10,
        iters: 50,
    };
    /// A shorter plan for slow devices (CPU adapters) and smoke runs: 3 warm-up calls, the
    /// median of 11.
    pub const QUICK: TimingPlan = TimingPlan {
        warmup: 3,
        iters: 11,
    };
}

/// Median wall-clock microseconds of `call` followed by `sync`, after `plan.warmup` untimed
/// runs of both.
pub fn median_us(plan: TimingPlan, mut call: impl FnMut(), mut sync: impl FnMut()) -> f64 {
    for _ in 0..plan.warmup {
        call();
    }
    sync();
    let mut times: Vec<f64> = (0..plan.iters.max(1))
        .map(|_| {
            let start = Instant::now();
            call();
            sync();
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Median microseconds of `call`, each timed on CubeCL's device thread by
/// `ComputeClient::profile`: a device sync, the call, a device sync, and the wall clock between
/// the two syncs, all read on that thread (CubeCL's own benchmark method on CUDA). `plan.warmup`
/// untimed calls come first, from the caller's thread.
///
/// Beside [`median_us`] it leaves out one thing: the hand-off between the caller's thread and
/// CubeCL's device thread. That thread sleeps in 150 us steps once idle for a while
/// (cubecl-common 0.10, `device/handle/channel.rs`), and a synchronized call from another thread
/// wakes it first; a training loop, which keeps it busy, does not pay that per call. The
/// launches, the host work of the call and the wait for the device are still in the figure.
pub fn median_on_device_thread_us<R: cubecl::Runtime>(
    client: &cubecl::client::ComputeClient<R>,
    plan: TimingPlan,
    mut call: impl FnMut() + Send,
) -> f64 {
    for _ in 0..plan.warmup {
        call();
    }
    cubecl::future::block_on(client.sync()).expect("device sync failed");
    let mut times: Vec<f64> = (0..plan.iters.max(1))
        .map(|_| {
            let ((), duration) = client
                .profile(&mut call, "ruda-benches sample")
                .expect("profiling a sample on the device thread failed");
            let ticks = cubecl::future::block_on(duration.resolve());
            ticks.duration().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Effective bandwidth in GB/s of moving `elements` elements of `bytes_per_element` in `us`.
pub fn gb_per_s(elements: usize, bytes_per_element: usize, us: f64) -> f64 {
    (elements * bytes_per_element) as f64 / us / 1e3
}

/// One call of a workload, returning when the device has finished it.
pub type Call = Box<dyn FnMut()>;
