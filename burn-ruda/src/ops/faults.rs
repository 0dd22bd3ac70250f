//! Reporting a native operation's late failure ([`ruda_runtime::faults`]) at the device's next
//! read or sync, as Burn's `ExecutionError`.

use core::future::Future;

use burn_backend::{DeviceOps, ExecutionError};

/// `Err` naming the operation that failed on `device`, if one did.
pub(crate) fn check_device<D: DeviceOps>(device: &D) -> Result<(), ExecutionError> {
    ruda_runtime::faults::check(device.id()).map_err(|fault| ExecutionError::WithContext {
        reason: fault.to_string(),
    })
}

/// `read`, then the fault check of its `device`: a read that completed still fails if a native
/// operation failed on the device, since what it read may depend on that operation's unwritten
/// output.
pub(crate) async fn checked_read<D: DeviceOps, T>(
    device: D,
    read: impl Future<Output = Result<T, ExecutionError>> + Send,
) -> Result<T, ExecutionError> {
    let data = read.await;
    check_device(&device)?;
    data
}
