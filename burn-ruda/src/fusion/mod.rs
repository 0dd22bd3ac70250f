//! Burn's fusion engine as [`crate::Ruda`] runs it: burn-cubecl's kernels and
//! burn-cubecl-fusion's fusers, with the list of fusers chosen per device.
//!
//! `Ruda`'s tensors live in burn-fusion's streams ([`crate::Inner`] is
//! `burn_fusion::Fusion<RudaCube<R, ..>>`). burn-fusion offers every operation to every fuser of
//! its runtime, on its own thread, and copies the list into each new block it explores;
//! burn-cubecl's runtime names the same four (element-wise, matmul, reduce, reduce-broadcasted)
//! for every device. On a training step whose products and norms are ruda's, that thread paces
//! the step, and a fuser that can never fire only costs it time. So:
//! - [`RudaCube`]: burn-cubecl's backend under a name of ours, every method delegated;
//! - [`RudaFusionRuntime`]: its fusion runtime, burn-cubecl-fusion's optimizations with the
//!   fusers of a [`FuserSet`];
//! - [`FuserSet`]: which fusers, from [`ENV_FUSERS`] or, by default, Burn's four without the
//!   matmul fuser where ruda's products are native (no product reaches it there);
//! - [`ResetWhenUsed`]: each fuser in a wrapper that skips the resets burn-fusion asks of
//!   fusers it never used (its search templates, after every segment it runs).

mod backend;
mod fusers;
mod reset_when_used;
mod runtime;

pub use backend::RudaCube;
pub use fusers::{ENV_FUSERS, FUSER_NAMES, FuserSet};
pub use reset_when_used::ResetWhenUsed;
pub use runtime::{RudaFusionRuntime, burn_fusers_of, fusers_of};
