//! Shared code of burn-ruda's examples, integration tests and benchmarks: the timing method
//! of DESIGN.md and the LayerNorm benchmark cases, so that every table is measured one way.

pub mod benchmarks;
pub mod burn_breakdown;
pub mod char_lm;
pub mod differential;
pub mod example_args;
pub mod layer_norm_bench;
pub mod layer_norm_checks;
pub mod mnist;
pub mod multi_device;
pub mod plain_runtime;
pub mod reference;
pub mod span_profile;
pub mod timing;
pub mod training_log;
