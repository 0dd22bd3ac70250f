//! Failures of native operations that happen after their caller has returned: a kernel that
//! burn-fusion's thread could not launch, a cuBLAS product that failed on CubeCL's device
//! thread. The caller's thread is long gone by then, and the operation's output was never
//! written; so the failure is kept here, per device, and the backend reports it as an error at
//! the device's next read or sync, naming the operation ([`check`]), so that no result computed
//! on the device since is taken for a valid one.
//!
//! A fault stays until [`clear`]: every read and sync of the device fails until then, since any
//! tensor computed after the failed operation may depend on its unwritten output.
//!
//! Fault injection, for tests: [`inject`] (or `RUDA_FAULT_INJECT=<op>[,<op>...]`, read once)
//! makes the next launch of the named operation (`ruda_matmul`, `ruda_layer_norm`, ...) fail
//! instead of running.

use alloc::{format, string::String, vec::Vec};
use core::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use cubecl::device::DeviceId;

/// `RUDA_FAULT_INJECT`: comma-separated operation names whose first launch fails (tests).
pub const ENV_FAULT_INJECT: &str = "RUDA_FAULT_INJECT";

/// A native operation that failed after its caller returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The operation, e.g. `ruda_matmul`.
    pub op: String,
    /// The device, e.g. `cuda:0`.
    pub device: String,
    /// What went wrong.
    pub reason: String,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the native operation {} failed on {}: {}; its output was never written, and no \
             result computed on this device since it can be used (ruda_runtime::faults::clear \
             resets the device's fault)",
            self.op, self.device, self.reason
        )
    }
}

impl std::error::Error for Fault {}

/// Raised with the first fault: [`check`] is one atomic load while nothing has failed.
static ANY: AtomicBool = AtomicBool::new(false);
/// The first fault of each device, not yet cleared.
static FAULTS: Mutex<Vec<(DeviceId, Fault)>> = Mutex::new(Vec::new());
/// Operation names whose next launch is to fail.
static INJECTED: Mutex<Option<Vec<String>>> = Mutex::new(None);

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records that `op` failed on `device` (named `name` in messages, e.g. `Cuda(0)`); the
/// first fault of a device is the one reported.
pub fn record(device: DeviceId, name: impl fmt::Display, op: &str, reason: impl Into<String>) {
    let (name, reason) = (format!("{name}"), reason.into());
    log::error!("ruda: {op} failed on {name}: {reason}");
    let mut faults = lock(&FAULTS);
    if !faults.iter().any(|(d, _)| *d == device) {
        faults.push((
            device,
            Fault {
                op: op.into(),
                device: name,
                reason,
            },
        ));
    }
    ANY.store(true, Ordering::Release);
}

/// `Err` with the device's fault, if a native operation failed on it.
pub fn check(device: DeviceId) -> Result<(), Fault> {
    if !ANY.load(Ordering::Acquire) {
        return Ok(());
    }
    match lock(&FAULTS).iter().find(|(d, _)| *d == device) {
        Some((_, fault)) => Err(fault.clone()),
        None => Ok(()),
    }
}

/// Forgets the device's fault (its earlier results stay invalid); returns it.
pub fn clear(device: DeviceId) -> Option<Fault> {
    let mut faults = lock(&FAULTS);
    let index = faults.iter().position(|(d, _)| *d == device)?;
    Some(faults.remove(index).1)
}

/// Makes the next launch of operation `op` fail (a test hook).
pub fn inject(op: &str) {
    injected_names(|names| names.push(op.into()));
}

/// Whether the next launch of `op` was asked to fail ([`inject`], `RUDA_FAULT_INJECT`); the
/// request is used up.
pub fn take_injected(op: &str) -> bool {
    injected_names(|names| match names.iter().position(|n| n == op) {
        Some(index) => {
            names.remove(index);
            true
        }
        None => false,
    })
}

fn injected_names<T>(f: impl FnOnce(&mut Vec<String>) -> T) -> T {
    let mut injected = lock(&INJECTED);
    let names = injected.get_or_insert_with(|| {
        std::env::var(ENV_FAULT_INJECT)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default()
    });
    f(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_is_reported_until_cleared_and_names_the_operation() {
        let device = DeviceId {
            type_id: 7,
            index_id: 3,
        };
        assert_eq!(check(device), Ok(()));
        record(device, "cuda:3", "ruda_matmul", "cuBLAS status 13");
        record(device, "cuda:3", "ruda_softmax", "later");
        let fault = check(device).unwrap_err();
        assert_eq!(fault.op, "ruda_matmul");
        assert!(
            fault
                .to_string()
                .contains("ruda_matmul failed on cuda:3: cuBLAS status 13")
        );
        assert!(check(device).is_err(), "sticky");
        assert_eq!(clear(device).map(|f| f.op), Some("ruda_matmul".into()));
        assert_eq!(check(device), Ok(()));
    }

    #[test]
    fn an_injected_failure_is_used_once() {
        inject("ruda_test_op");
        assert!(take_injected("ruda_test_op"));
        assert!(!take_injected("ruda_test_op"));
    }
}
