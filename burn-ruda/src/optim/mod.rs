//! Optimizers whose update of a parameter is one native operation.
//!
//! Burn's optimizers update each parameter with a dozen tensor operations; on a GPU each of
//! them costs host time on three threads (the training thread, burn-fusion's, CubeCL's), and a
//! transformer step spends a third of its time issuing them while the GPU waits
//! (`docs/perf/training-step.md`). These take the same configuration and keep the same state
//! records as Burn's, so a checkpoint moves between the two.
//!
//! - [`AdamConfig`]: Burn's `Adam` (weight decay, AMSGrad, gradient clipping); its `init`
//!   gives an [`AdamOptimizer`], which queues a training step's updates as one operation a
//!   device. [`Adam`] is one parameter's update, for Burn's `OptimizerAdaptor`.

mod adam;
mod adam_optimizer;

pub use adam::{Adam, AdamConfig};
pub use adam_optimizer::{AdamOptimizer, MAX_OPERATION_BYTES};
