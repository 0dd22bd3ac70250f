//! `RudaCuda`: CubeCL's CUDA runtime as a ruda runtime.

use alloc::string::String;

use cubecl::{
    client::ComputeClient,
    cuda::{CudaDevice, CudaRuntime},
};

use crate::fingerprint::{ClientRegistry, DriverFingerprint};
use crate::hooks::Runtime;
use crate::tensor_buffer::TensorBuffer;

/// NVIDIA GPUs through CubeCL's CUDA runtime (NVRTC-compiled kernels), with native LayerNorm.
///
/// It shares CubeCL's CUDA compiler, server and device: a `RudaCuda` client and a `CudaRuntime`
/// client for the same device talk to the same server and memory pool.
#[derive(Debug, Clone, Copy, Default)]
pub struct RudaCuda;

static CLIENTS: ClientRegistry<CudaDevice> = ClientRegistry::new();

super::forward_cubecl_runtime!(RudaCuda => CudaRuntime {
    fn client(device: &Self::Device) -> ComputeClient<Self> {
        // `RUDA_AUTOTUNE_DIR` must reach CubeCL's configuration before its first server exists.
        crate::autotune::settings::apply_to_cubecl();
        // The first opening of a device gives CubeCL its fingerprint-keyed PTX cache.
        // CubeCL's own stream per thread: correct on CUDA and as fast as one shared stream
        // through burn-train's Learner (see `super::streams`), so it is left as CubeCL has it.
        let client = crate::compilation_cache::load_client(device, || device_fingerprint(device));
        CLIENTS.record(server_key(&client), device);
        client
    }

    fn name(client: &ComputeClient<Self>) -> &'static str {
        // CubeCL's name ("cuda") plus the fingerprint hash (`cuda-fp<hash>`). In CubeCL 0.10 and
        // burn-cubecl 0.21 the name is used only in display strings and in `CubeTuneId`, the
        // directory of every CubeCL tuner's cache: so those caches are keyed on the driver too
        // (compilation caches key on the kernel, not on this name). A lookup after the first call.
        crate::autotune::cache_identity(client, "cuda").runtime_name
    }
});

// LayerNorm: ruda's portable kernels. Products: cuBLAS where it loads.
impl Runtime for RudaCuda {
    crate::portable_layer_norm_hooks!();

    fn has_native_matmul(client: &ComputeClient<Self>) -> bool {
        CLIENTS
            .device(server_key(client))
            .is_some_and(|device| crate::matmul::cublas::available(&device).is_ok())
    }

    fn matmul(client: &ComputeClient<Self>, lhs: TensorBuffer, rhs: TensorBuffer) -> TensorBuffer {
        let device = CLIENTS
            .device(server_key(client))
            .expect("ruda matmul: a client not opened through RudaCuda::client");
        crate::matmul::cublas::matmul(client, &device, lhs, rhs)
    }

    fn matmul_full_precision(
        client: &ComputeClient<Self>,
        lhs: TensorBuffer,
        rhs: TensorBuffer,
    ) -> TensorBuffer {
        let device = CLIENTS
            .device(server_key(client))
            .expect("ruda matmul: a client not opened through RudaCuda::client");
        crate::matmul::cublas::matmul_with(client, &device, lhs, rhs, false)
    }

    fn autotune_driver_fingerprint(client: &ComputeClient<Self>) -> Option<String> {
        device_fingerprint(&CLIENTS.device(server_key(client))?)
    }
}

/// The fingerprint string of `device`, computed once per process.
fn device_fingerprint(device: &CudaDevice) -> Option<String> {
    CLIENTS.fingerprint_of(device, |device| {
        cuda_fingerprint(device.index).map(|f| f.to_string())
    })
}

fn server_key(client: &ComputeClient<RudaCuda>) -> usize {
    client.info() as *const _ as *const u8 as usize
}

/// Whether the CUDA driver library loads and reports at least one device.
pub fn cuda_available() -> bool {
    cuda_device_count() > 0
}

/// Number of CUDA devices the driver reports; 0 when no driver library is installed.
pub fn cuda_device_count() -> usize {
    // SAFETY: only probes whether the shared library can be opened.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return 0;
    }
    if cudarc::driver::result::init().is_err() {
        return 0;
    }
    cudarc::driver::result::device::get_count()
        .unwrap_or(0)
        .max(0) as usize
}

/// What the driver says about one CUDA device.
#[derive(Clone, Debug)]
pub struct CudaDeviceReport {
    /// Ordinal.
    pub index: usize,
    /// Marketing name, e.g. `NVIDIA H200`.
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Total device memory in bytes.
    pub total_memory: u64,
    /// The chip's UUID (not part of the fingerprint: see [`CudaDeviceFacts`]).
    pub uuid: Option<String>,
    /// The fingerprint [`RudaCuda`] reports for it.
    pub fingerprint: Option<DriverFingerprint>,
}

/// Queries device `index` through the driver API, without creating a CubeCL server.
pub fn cuda_device_report(index: usize) -> Option<CudaDeviceReport> {
    use cudarc::driver::{result::device, sys::CUdevice_attribute::*};
    if index >= cuda_device_count() {
        return None;
    }
    let dev = device::get(index as i32).ok()?;
    let name = device::get_name(dev).ok()?;
    // SAFETY: `dev` is a valid device handle from the driver; attributes are read-only queries.
    let (major, minor, total_memory) = unsafe {
        let major =
            device::get_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR).ok()?;
        let minor =
            device::get_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR).ok()?;
        (major, minor, device::total_mem(dev).ok()? as u64)
    };
    let uuid = device::get_uuid(dev).ok().map(|uuid| {
        uuid.bytes
            .iter()
            .map(|b| alloc::format!("{:02x}", *b as u8))
            .collect()
    });
    Some(CudaDeviceReport {
        index,
        name,
        compute_capability: (major, minor),
        total_memory,
        uuid,
        fingerprint: cuda_fingerprint(index),
    })
}

/// What determines compiled code and tuning results on one CUDA device: the driver and its
/// CUDA/NVRTC versions, and the GPU model. Two devices with equal facts share caches.
///
/// Deliberately absent: the device's UUID and ordinal. They name one physical chip, not what
/// the compiler and the tuner depend on, so with them every GPU of an eight-GPU machine, and
/// every machine of a cluster, would tune and compile the same kernels again for nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaDeviceFacts {
    /// The NVIDIA kernel module's version (`580.159.04`): the exact driver build, which JIT-
    /// compiles PTX and can change kernel timings. `unknown` off Linux.
    pub driver: String,
    /// The CUDA API version the driver implements (`13.0`).
    pub cuda_api: String,
    /// NVRTC's version (`13.0`): NVRTC turns CubeCL's CUDA C++ into PTX, so another NVRTC can
    /// emit other code. `missing` when it does not load.
    pub nvrtc: String,
    /// Marketing name (`NVIDIA H200`).
    pub name: String,
    /// Compute capability (major, minor): the instruction set the PTX targets.
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors: cards sold under one name can differ (cut-down parts,
    /// MIG slices), and the best launch shape depends on it.
    pub multiprocessors: i32,
    /// Device memory in bytes, for the same reason (e.g. an 80 GB and a 94 GB part of one name).
    pub memory_bytes: u64,
}

impl CudaDeviceFacts {
    /// The fingerprint these facts make (see [`CudaDeviceFacts`] for why each one is in).
    pub fn fingerprint(&self) -> DriverFingerprint {
        let mut fingerprint = DriverFingerprint::new("cuda");
        fingerprint.push("driver", &self.driver);
        fingerprint.push("cuda-api", &self.cuda_api);
        fingerprint.push("nvrtc", &self.nvrtc);
        fingerprint.push("device", &self.name);
        let (major, minor) = self.compute_capability;
        fingerprint.push("sm", alloc::format!("{major}.{minor}"));
        fingerprint.push("multiprocessors", self.multiprocessors);
        fingerprint.push("memory", self.memory_bytes);
        fingerprint
    }
}

/// The [`CudaDeviceFacts`] of device `index`, read through the driver API without creating a
/// CubeCL server. `None` when the driver does not answer.
pub fn cuda_device_facts(index: usize) -> Option<CudaDeviceFacts> {
    use cudarc::driver::{result::device, sys};
    if index >= cuda_device_count() {
        return None;
    }
    let dev = device::get(index as i32).ok()?;
    let mut api_version = 0i32;
    // SAFETY: the driver writes one integer into `api_version`.
    let status = unsafe { sys::cuDriverGetVersion(&mut api_version) };
    if status != sys::CUresult::CUDA_SUCCESS {
        return None;
    }
    // SAFETY: read-only attribute queries on a valid device.
    let (major, minor, multiprocessors, memory_bytes) = unsafe {
        use sys::CUdevice_attribute::*;
        (
            device::get_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR).ok()?,
            device::get_attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR).ok()?,
            device::get_attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).ok()?,
            device::total_mem(dev).ok()? as u64,
        )
    };
    Some(CudaDeviceFacts {
        driver: kernel_module_version().unwrap_or_else(|| "unknown".into()),
        cuda_api: alloc::format!("{}.{}", api_version / 1000, (api_version % 1000) / 10),
        nvrtc: nvrtc_version().unwrap_or_else(|| "missing".into()),
        name: device::get_name(dev).ok()?,
        compute_capability: (major, minor),
        multiprocessors,
        memory_bytes,
    })
}

/// The fingerprint of device `index` ([`CudaDeviceFacts::fingerprint`]); `None` when the
/// driver does not answer.
pub fn cuda_fingerprint(index: usize) -> Option<DriverFingerprint> {
    cuda_device_facts(index).map(|facts| facts.fingerprint())
}

fn nvrtc_version() -> Option<String> {
    // SAFETY: only probes whether the shared library can be opened.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return None;
    }
    let (mut major, mut minor) = (0i32, 0i32);
    // SAFETY: NVRTC writes two integers.
    let status = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    (status == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS)
        .then(|| alloc::format!("{major}.{minor}"))
}

/// The NVIDIA kernel module's version (e.g. `580.159.03`), from `/proc/driver/nvidia/version`.
fn kernel_module_version() -> Option<String> {
    let text = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
    parse_nvidia_module_version(&text)
}

/// Extracts the version from the first line of `/proc/driver/nvidia/version`.
pub(crate) fn parse_nvidia_module_version(text: &str) -> Option<String> {
    let line = text.lines().next()?;
    let after = line.split("Kernel Module").nth(1).unwrap_or(line);
    after
        .split_whitespace()
        .find(|word| word.chars().next().is_some_and(|c| c.is_ascii_digit()) && word.contains('.'))
        .map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_version_is_parsed() {
        let text = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.03  Thu Oct  2 2025\nGCC version: gcc 12\n";
        assert_eq!(
            parse_nvidia_module_version(text).as_deref(),
            Some("580.159.03")
        );
        assert_eq!(parse_nvidia_module_version(""), None);
    }

    fn h200() -> CudaDeviceFacts {
        CudaDeviceFacts {
            driver: "580.159.04".into(),
            cuda_api: "13.0".into(),
            nvrtc: "13.0".into(),
            name: "NVIDIA H200".into(),
            compute_capability: (9, 0),
            multiprocessors: 132,
            memory_bytes: 150_754_820_096,
        }
    }

    #[test]
    fn fingerprint_names_the_model_and_driver_not_the_chip() {
        let text = h200().fingerprint().to_string();
        assert!(text.starts_with("runtime=cuda|ruda-runtime="), "{text}");
        assert!(text.contains("|driver=580.159.04|cuda-api=13.0|nvrtc=13.0|device=NVIDIA H200|sm=9.0|multiprocessors=132|memory=150754820096"), "{text}");
        assert!(!text.contains("uuid"), "{text}");
    }

    #[test]
    fn each_fact_changes_the_fingerprint() {
        let base = h200().fingerprint();
        let changes: [fn(&mut CudaDeviceFacts); 7] = [
            |f| f.driver = "580.159.05".into(),
            |f| f.cuda_api = "13.1".into(),
            |f| f.nvrtc = "12.9".into(),
            |f| f.name = "NVIDIA H100 80GB HBM3".into(),
            |f| f.compute_capability = (10, 0),
            |f| f.multiprocessors = 114,
            |f| f.memory_bytes = 85_520_809_984,
        ];
        for change in changes {
            let mut facts = h200();
            change(&mut facts);
            assert_ne!(facts.fingerprint(), base, "{facts:?}");
        }
        assert_eq!(h200().fingerprint(), base);
    }
}
