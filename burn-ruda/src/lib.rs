//! burn-ruda: the Burn backend for ruda devices.
//!
//! The backend type `Ruda<R>` and its autodiff decorator are being built (see the project's
//! issues); today this crate re-exports the runtime layer it will sit on, so that the device
//! types users name do not move when the backend lands.

pub use ruda_runtime::device::{DeviceError, RudaDevice};
#[cfg(feature = "cuda")]
pub use ruda_runtime::RudaCuda;
#[cfg(feature = "wgpu")]
pub use ruda_runtime::RudaWgpu;
