//! Process-wide settings that must be made before any thread or driver starts.
//!
//! Two things depend on environment variables that drivers read once, when they load:
//!
//! - The CUDA driver's JIT cache (`CUDA_CACHE_PATH`): see
//!   [`crate::compilation_cache::keep_driver_jit_cache`].
//! - Mesa's Vulkan device-select layer (`VK_LAYER_MESA_device_select`, installed with Mesa's
//!   Vulkan drivers and loaded into every Vulkan program). When a program enables
//!   `VK_KHR_wayland_surface`, which wgpu always does, the layer connects to the Wayland display
//!   to find the GPU that drives the screen; on a machine without a desktop session
//!   (`XDG_RUNTIME_DIR` unset: servers, CI, containers) libwayland then prints "error:
//!   XDG_RUNTIME_DIR is invalid or not set in the environment." once per Vulkan instance. The
//!   layer only orders GPUs for presentation; ruda picks its compute device itself
//!   ([`crate::device`]), so [`prepare`] turns the layer off (`NODEVICE_SELECT=1`) when there is
//!   no desktop session.
//!
//! [`prepare`] does both; call it first thing in `main`.

use std::path::PathBuf;

/// `NODEVICE_SELECT`: set, Mesa's device-select layer does nothing.
pub const ENV_NO_DEVICE_SELECT: &str = "NODEVICE_SELECT";

/// What [`prepare`] set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prepared {
    /// The CUDA driver's JIT cache directory, when [`prepare`] set it.
    pub driver_jit_cache: Option<PathBuf>,
    /// Whether Mesa's device-select layer was turned off (no desktop session).
    pub device_select_off: bool,
}

/// Sets the environment the drivers read when they load: the CUDA driver's JIT cache under the
/// cache root, and Mesa's device-select layer off when there is no desktop session (see the
/// [module docs](self)). Variables the user set are left as they are. It reads CubeCL's
/// configuration (`cubecl.toml`) to find the cache root, so a program that sets CubeCL's
/// configuration in code must do so before.
///
/// # Safety
/// It sets environment variables: no other thread may run yet (see [`std::env::set_var`]).
pub unsafe fn prepare() -> Prepared {
    // SAFETY: the caller guarantees that no other thread runs.
    let driver_jit_cache = unsafe { crate::compilation_cache::keep_driver_jit_cache() };
    let headless = std::env::var_os("XDG_RUNTIME_DIR").is_none();
    let device_select_off = headless && std::env::var_os(ENV_NO_DEVICE_SELECT).is_none();
    if device_select_off {
        // SAFETY: as above.
        unsafe { std::env::set_var(ENV_NO_DEVICE_SELECT, "1") };
    }
    Prepared {
        driver_jit_cache,
        device_select_off,
    }
}
