//! A ruda runtime with nothing of its own, for tests of the defaults and of the fallbacks.

use cubecl::wgpu::{WgpuDevice, WgpuRuntime};

/// A CubeCL runtime (CubeCL's wgpu under another name) that knows nothing of ruda and opts into
/// [`ruda_runtime::Runtime`] with an empty `impl`: no native LayerNorm, no fingerprint. Tests use
/// it to check the trait's defaults and that `burn_ruda::Ruda` falls back to Burn's composed
/// LayerNorm.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlainWgpu;

impl cubecl::Runtime for PlainWgpu {
    type Compiler = <WgpuRuntime as cubecl::Runtime>::Compiler;
    type Server = <WgpuRuntime as cubecl::Runtime>::Server;
    type Device = WgpuDevice;

    fn client(device: &Self::Device) -> cubecl::client::ComputeClient<Self> {
        cubecl::client::ComputeClient::load(device)
    }

    fn name(_client: &cubecl::client::ComputeClient<Self>) -> &'static str {
        // What this build compiles, as `RudaWgpu` says.
        ruda_runtime::runtime::wgpu::WGPU_COMPILER_NAME
    }

    fn require_array_lengths() -> bool {
        WgpuRuntime::require_array_lengths()
    }

    fn max_cube_count() -> (u32, u32, u32) {
        WgpuRuntime::max_cube_count()
    }

    fn can_read_tensor(shape: &cubecl::zspace::Shape, strides: &cubecl::zspace::Strides) -> bool {
        WgpuRuntime::can_read_tensor(shape, strides)
    }

    fn target_properties() -> cubecl::ir::TargetProperties {
        WgpuRuntime::target_properties()
    }

    fn enumerate_devices(
        type_id: u16,
        info: &<Self::Server as cubecl::server::ComputeServer>::Info,
    ) -> Vec<cubecl::device::DeviceId> {
        WgpuRuntime::enumerate_devices(type_id, info)
    }
}

impl ruda_runtime::Runtime for PlainWgpu {}
