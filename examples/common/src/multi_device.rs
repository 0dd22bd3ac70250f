//! Training on several devices with burn-train's own data parallelism.
//!
//! With more than one device the examples hand burn-train
//! `ExecutionStrategy::MultiDevice(devices, MultiDeviceOptim::OptimSharded)`, as Burn's own
//! multi-GPU example does: every step, each device runs the forward and backward of its share
//! of the global batch on a fork of the model, the gradients are added on the device that owns
//! each parameter, and the optimizer steps there. Nothing here is ruda-specific: the same code
//! trains Burn's `Autodiff<Cuda>`.
//!
//! Burn adds the devices' gradients (it does not average them), so n devices apply n times the
//! mean gradient of the global batch. Adam, which the examples use, normalizes that scale away
//! (up to its epsilon); the loss curve of n devices follows the one-device curve at the same
//! global batch.

use std::fmt;

use burn::tensor::backend::Backend;
use burn::train::{ExecutionStrategy, MultiDeviceOptim};

/// The burn-train strategy for `devices`: one device, or Burn's multi-device data parallelism.
///
/// Panics if `devices` is empty or names one device twice.
pub fn execution_strategy<B: Backend>(devices: &[B::Device]) -> ExecutionStrategy<B> {
    check_devices::<B>(devices);
    match devices {
        [device] => ExecutionStrategy::single(device.clone()),
        _ => ExecutionStrategy::multi(devices.to_vec(), MultiDeviceOptim::OptimSharded),
    }
}

fn check_devices<B: Backend>(devices: &[B::Device]) {
    assert!(!devices.is_empty(), "training needs at least one device");
    for (i, device) in devices.iter().enumerate() {
        assert!(
            !devices[..i].contains(device),
            "training devices {devices:?}: {device:?} is given twice"
        );
    }
}

/// The batch each device trains on when `devices` devices share a global batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchSplit {
    /// Items per step, over all devices.
    pub global: usize,
    /// Items per step on each device.
    pub per_device: usize,
}

/// A global batch that the devices cannot share evenly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchSplitError {
    /// The global batch size asked for.
    pub global: usize,
    /// The number of devices.
    pub devices: usize,
}

impl fmt::Display for BatchSplitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { global, devices } = self;
        write!(
            f,
            "a global batch of {global} cannot be split evenly over {devices} device(s): choose \
             a batch size that is a multiple of {devices}"
        )
    }
}

impl std::error::Error for BatchSplitError {}

impl BatchSplit {
    /// Splits a global batch of `global` items over `devices` devices.
    pub fn new(global: usize, devices: usize) -> Result<Self, BatchSplitError> {
        let error = BatchSplitError { global, devices };
        if devices == 0 || global == 0 || !global.is_multiple_of(devices) {
            return Err(error);
        }
        Ok(Self {
            global,
            per_device: global / devices,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_global_batches() {
        assert_eq!(
            BatchSplit::new(32, 2),
            Ok(BatchSplit {
                global: 32,
                per_device: 16
            })
        );
        assert_eq!(BatchSplit::new(7, 1).unwrap().per_device, 7);
        let error = BatchSplit::new(33, 2).unwrap_err();
        assert_eq!(
            error.to_string(),
            "a global batch of 33 cannot be split evenly over 2 device(s): choose a batch size \
             that is a multiple of 2"
        );
        assert!(BatchSplit::new(0, 2).is_err());
        assert!(BatchSplit::new(4, 0).is_err());
    }
}
