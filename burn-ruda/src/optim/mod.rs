//! Optimizers whose update of a parameter is one native operation.
//!
//! Burn's optimizers update each parameter with a dozen tensor operations; on a GPU each of
//! them costs host time on three threads (the training thread, burn-fusion's, CubeCL's), and a
//! transformer step spends a third of its time issuing them while the GPU waits
//! (`docs/perf/training-step.md`). These take the same configuration and keep the same state
//! records as Burn's, so a checkpoint moves between the two.
//!
//! - [`Adam`] ([`AdamConfig`]): Burn's `Adam` (weight decay, AMSGrad, gradient clipping).

mod adam;

pub use adam::{Adam, AdamConfig};
