//! burn-ruda's benchmarks: one set of workloads (LayerNorm kernels and `burn::nn::LayerNorm`
//! through Burn, the transformer and MNIST training steps) timed one way on ruda and on every
//! Burn built-in backend present (`docs/perf/README.md`: wall clock around a call that ends with
//! a device sync, warm-up first, median).
//!
//! Front ends: `cargo bench -p ruda-benches` (criterion, `benches/backends.rs`), and the GPU
//! suite (`src/bin/gpu_suite.rs`), which also runs the correctness checks of `ruda-tests` on the
//! GPU machine and writes the CSV that `src/bin/bench_plots.rs` draws. The results are on the
//! pages of `docs/perf/`; the GPU machine's runner is `benches/device/run.sh`.

pub mod breakdown;
pub mod contenders;
pub mod embedding;
#[cfg(feature = "cuda")]
pub mod launch_costs;
pub mod layer_norm;
pub mod products;
pub mod report;
pub mod softmax;
pub mod span_profile;
pub mod suite;
pub mod timing;
pub mod workloads;
