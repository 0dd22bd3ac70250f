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

/// Effective bandwidth in GB/s of moving `elements` elements of `bytes_per_element` in `us`.
pub fn gb_per_s(elements: usize, bytes_per_element: usize, us: f64) -> f64 {
    (elements * bytes_per_element) as f64 / us / 1e3
}

/// One call of a workload, returning when the device has finished it.
pub type Call = Box<dyn FnMut()>;
