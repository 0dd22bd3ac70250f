//! The library versions every fingerprint and cache path carries.

/// The version of this crate, part of every fingerprint: a new runtime library gets a new one.
pub const RUDA_RUNTIME_VERSION: &str = env!("CARGO_PKG_VERSION");
/// The CubeCL version this crate is built against, part of every fingerprint and of CubeCL's
/// cache paths (`<root>/autotune/<version>/...`).
pub const CUBECL_VERSION: &str = "0.10.0";
