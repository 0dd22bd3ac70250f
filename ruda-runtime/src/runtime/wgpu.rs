//! `RudaWgpu`: CubeCL's wgpu runtime as a ruda runtime.

use alloc::{string::String, vec::Vec};

use cubecl::{
    client::ComputeClient,
    wgpu::{AutoGraphicsApi, GraphicsApi, WgpuDevice, WgpuRuntime},
};

use crate::fingerprint::{ClientRegistry, DriverFingerprint};
use crate::hooks::Runtime;

/// Every wgpu adapter (Vulkan, Metal, DX12; Mesa's lavapipe on a CPU-only machine) through
/// CubeCL's wgpu runtime, with native LayerNorm.
///
/// It shares CubeCL's wgpu compiler, server and device: a `RudaWgpu` client and a `WgpuRuntime`
/// client for the same device talk to the same server and memory pool.
#[derive(Debug, Clone, Copy, Default)]
pub struct RudaWgpu;

static CLIENTS: ClientRegistry<WgpuDevice> = ClientRegistry::new();

/// The runtime name's base: the shading language this build compiles kernels to.
pub const WGPU_COMPILER_NAME: &str = "wgpu<wgsl>";

super::forward_cubecl_runtime!(RudaWgpu => WgpuRuntime {
    fn client(device: &Self::Device) -> ComputeClient<Self> {
        // `RUDA_AUTOTUNE_DIR` must reach CubeCL's configuration before its first server exists.
        crate::autotune::settings::apply_to_cubecl();
        let mut client = ComputeClient::load(device);
        super::streams::share_stream(&mut client);
        CLIENTS.record(server_key(&client), device);
        if is_cpu_adapter(device) {
            crate::autotune::settings::mark_cpu_adapter(&client);
        }
        client
    }

    fn name(client: &ComputeClient<Self>) -> &'static str {
        // What this build compiles: CubeCL's wgpu runtime without its `spirv` feature writes
        // WGSL for every graphics API, Vulkan included (Burn's own wgpu runtime says
        // `wgpu<wgsl>` too); plus the fingerprint hash (`wgpu<wgsl>-fp<hash>`). In CubeCL 0.10
        // and burn-cubecl 0.21 the name is used only in display strings and in `CubeTuneId`,
        // the directory of every CubeCL tuner's cache: so those caches are keyed on the driver
        // too. A lookup after the first call.
        crate::autotune::cache_identity(client, WGPU_COMPILER_NAME).runtime_name
    }
});

// LayerNorm: ruda's portable kernels. Products: Burn's.
impl Runtime for RudaWgpu {
    crate::portable_layer_norm_hooks!();

    fn autotune_driver_fingerprint(client: &ComputeClient<Self>) -> Option<String> {
        let device = CLIENTS.device(server_key(client))?;
        CLIENTS.fingerprint_of(&device, |device| {
            let info = adapter_info(device)?;
            wgpu_fingerprint(&info).map(|f| f.to_string())
        })
    }
}

fn server_key(client: &ComputeClient<RudaWgpu>) -> usize {
    client.info() as *const _ as *const u8 as usize
}

/// The graphics API CubeCL's wgpu runtime uses on this platform (Vulkan on Linux).
pub fn wgpu_backend() -> wgpu::Backend {
    AutoGraphicsApi::backend()
}

fn instance() -> wgpu::Instance {
    wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends: wgpu_backend().into(),
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    })
}

/// Every adapter of CubeCL's graphics API, each with the [`WgpuDevice`] that selects it.
pub fn wgpu_adapters() -> Vec<(WgpuDevice, wgpu::AdapterInfo)> {
    let adapters = cubecl::future::block_on(instance().enumerate_adapters(wgpu_backend().into()));
    let (mut discrete, mut integrated, mut virtual_gpu, mut cpu) = (0, 0, 0, false);
    let mut out = Vec::new();
    for adapter in adapters {
        let info = adapter.get_info();
        // Numbered per type, in enumeration order, as CubeCL numbers them.
        let device = match info.device_type {
            wgpu::DeviceType::DiscreteGpu => {
                discrete += 1;
                WgpuDevice::DiscreteGpu(discrete - 1)
            }
            wgpu::DeviceType::IntegratedGpu => {
                integrated += 1;
                WgpuDevice::IntegratedGpu(integrated - 1)
            }
            wgpu::DeviceType::VirtualGpu => {
                virtual_gpu += 1;
                WgpuDevice::VirtualGpu(virtual_gpu - 1)
            }
            // CubeCL's `Cpu` device selects the first CPU adapter.
            wgpu::DeviceType::Cpu if !cpu => {
                cpu = true;
                WgpuDevice::Cpu
            }
            _ => continue,
        };
        out.push((device, info));
    }
    out
}

/// Whether `device` opens a CPU adapter (Mesa's lavapipe): `WgpuDevice::Cpu`, or the default
/// device on a machine whose best adapter is one. The default adapter is asked once a process.
fn is_cpu_adapter(device: &WgpuDevice) -> bool {
    #[allow(deprecated)]
    match device {
        WgpuDevice::Cpu => true,
        WgpuDevice::DefaultDevice | WgpuDevice::BestAvailable => {
            static DEFAULT_IS_CPU: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
            *DEFAULT_IS_CPU.get_or_init(|| {
                adapter_info(device).is_some_and(|info| info.device_type == wgpu::DeviceType::Cpu)
            })
        }
        _ => false,
    }
}

/// The adapter CubeCL opens for `device`; `None` for devices made from an existing setup.
pub fn adapter_info(device: &WgpuDevice) -> Option<wgpu::AdapterInfo> {
    #[allow(deprecated)]
    match device {
        WgpuDevice::DefaultDevice | WgpuDevice::BestAvailable => {
            let adapter = cubecl::future::block_on(instance().request_adapter(
                &wgpu::RequestAdapterOptions {
                    power_preference: wgpu::PowerPreference::HighPerformance,
                    force_fallback_adapter: false,
                    compatible_surface: None,
                },
            ))
            .ok()?;
            Some(adapter.get_info())
        }
        WgpuDevice::Existing(_) => None,
        other => wgpu_adapters()
            .into_iter()
            .find(|(d, _)| d == other)
            .map(|(_, info)| info),
    }
}

/// Backend, adapter name, vendor and device ids, device type, driver and driver info of an
/// adapter: the GPU model and the driver that compiles and runs its shaders, which is what
/// compiled code and tuning results depend on.
///
/// Deliberately absent: the PCI bus id, which names one physical slot; two identical GPUs
/// share their caches, as for CUDA.
///
/// `None` when the adapter does not say which driver it runs (both driver strings empty):
/// without that, a driver update would go unnoticed.
pub fn wgpu_fingerprint(info: &wgpu::AdapterInfo) -> Option<DriverFingerprint> {
    if info.driver.trim().is_empty() && info.driver_info.trim().is_empty() {
        return None;
    }
    let mut fingerprint = DriverFingerprint::new("wgpu");
    fingerprint.push("backend", alloc::format!("{:?}", info.backend));
    fingerprint.push("adapter", &info.name);
    fingerprint.push("vendor", alloc::format!("0x{:04x}", info.vendor));
    fingerprint.push("device", alloc::format!("0x{:04x}", info.device));
    fingerprint.push("type", alloc::format!("{:?}", info.device_type));
    fingerprint.push("driver", &info.driver);
    fingerprint.push("driver-info", &info.driver_info);
    Some(fingerprint)
}
