//! What burn-ruda's correctness checks share, for the integration tests of this crate, the GPU
//! suite and the benchmarks (`ruda-benches`):
//!
//! - [`differential`]: every Burn op family and the gradients of an MLP, a CNN and a
//!   `TransformerEncoder` on a ruda backend against NdArray, on random inputs;
//! - [`launches`]: the native kernels' launch counts;
//! - [`reference`]: LayerNorm forward and backward in f64 on the host;
//! - [`layer_norm_checks`]: every LayerNorm variant and autotune candidate of a ruda runtime
//!   against that reference, at edge and long shapes;
//! - [`softmax_checks`]: every softmax variant and autotune candidate of a ruda runtime against
//!   an f64 reference, over every dimension and special value;
//! - [`adam_checks`]: the native Adam update against an f64 reference;
//! - [`gelu_checks`]: the native GELU forward and backward against an f64 reference;
//! - [`check_groups`]: running those checks group by group, as the GPU suite reports them;
//! - [`soak`]: a small transformer trained for many steps, sampling device memory and the
//!   cache directory, to show a leak as a slope;
//! - [`plain_runtime`]: a CubeCL runtime with nothing of ruda's, to test the defaults and the
//!   composed fallbacks.

pub mod adam_checks;
pub mod check_groups;
pub mod differential;
pub mod gelu_checks;
pub mod launches;
pub mod layer_norm_checks;
pub mod plain_runtime;
pub mod reference;
pub mod soak;
pub mod softmax_checks;
