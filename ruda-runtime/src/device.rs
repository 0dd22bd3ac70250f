//! Which ruda device to run on: discovery, the `RUDA_DEVICE` override, and "the best device".
//!
//! The best device is, in order:
//! 1. a CUDA GPU, if the CUDA driver loads and reports one (`cuda:0`);
//! 2. otherwise a wgpu GPU: the first discrete, then integrated, then virtual adapter;
//! 3. otherwise the wgpu CPU adapter (Mesa's lavapipe on Linux).
//!
//! `RUDA_DEVICE` overrides the choice. Accepted forms are listed in [`ACCEPTED_FORMS`].

use alloc::{string::String, vec::Vec};
use core::{fmt, str::FromStr};

#[cfg(feature = "wgpu")]
use cubecl::wgpu::WgpuDevice;

/// The environment variable that overrides the device choice.
pub const DEVICE_ENV: &str = "RUDA_DEVICE";

/// The values `RUDA_DEVICE` accepts, for error messages and docs.
pub const ACCEPTED_FORMS: &str = "auto, cuda, cuda:N, wgpu, wgpu:discrete:N, wgpu:integrated:N, \
wgpu:virtual:N, wgpu:cpu, cpu (N is a device index such as 0)";

/// A ruda device: a CUDA GPU or a wgpu adapter.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RudaDevice {
    /// CUDA device with this ordinal.
    #[cfg(feature = "cuda")]
    Cuda(usize),
    /// A wgpu adapter, as CubeCL names it.
    #[cfg(feature = "wgpu")]
    Wgpu(WgpuDevice),
}

impl RudaDevice {
    /// The runtime that drives this device: `"cuda"` or `"wgpu"`.
    pub fn runtime(&self) -> &'static str {
        match self {
            #[cfg(feature = "cuda")]
            RudaDevice::Cuda(_) => "cuda",
            #[cfg(feature = "wgpu")]
            RudaDevice::Wgpu(_) => "wgpu",
        }
    }

    /// The device `RUDA_DEVICE` names, or the best device when it is unset, empty or `auto`.
    pub fn from_env() -> Result<Self, DeviceError> {
        match std::env::var(DEVICE_ENV) {
            Ok(value) => Self::from_value(Some(&value)),
            Err(std::env::VarError::NotPresent) => Self::from_value(None),
            Err(std::env::VarError::NotUnicode(raw)) => {
                Err(DeviceError::BadSpec(DeviceSpecError {
                    value: raw.to_string_lossy().into_owned(),
                }))
            }
        }
    }

    /// The device `RUDA_DEVICE=value` selects (`None`: the variable is unset), as
    /// [`RudaDevice::from_env`] resolves it.
    ///
    /// # Errors
    /// As [`RudaDevice::from_env`].
    pub fn from_value(value: Option<&str>) -> Result<Self, DeviceError> {
        match value {
            Some(value) => match value.parse::<DeviceSpec>() {
                Ok(spec) => spec.resolve(),
                Err(e) => Err(DeviceError::BadSpec(e)),
            },
            None => DeviceSpec::Auto.resolve(),
        }
    }

    /// The best device on this machine (see the [module docs](self)).
    pub fn best() -> Result<Self, DeviceError> {
        DeviceSpec::Auto.resolve()
    }
}

impl fmt::Display for RudaDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            #[cfg(feature = "cuda")]
            RudaDevice::Cuda(index) => write!(f, "cuda:{index}"),
            #[cfg(feature = "wgpu")]
            RudaDevice::Wgpu(device) => match device {
                WgpuDevice::DiscreteGpu(i) => write!(f, "wgpu:discrete:{i}"),
                WgpuDevice::IntegratedGpu(i) => write!(f, "wgpu:integrated:{i}"),
                WgpuDevice::VirtualGpu(i) => write!(f, "wgpu:virtual:{i}"),
                WgpuDevice::Cpu => write!(f, "wgpu:cpu"),
                other => write!(f, "wgpu:{other:?}"),
            },
        }
    }
}

/// A parsed `RUDA_DEVICE` value: what the user asked for, before looking at the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceSpec {
    /// The best device.
    Auto,
    /// A CUDA device by ordinal (`cuda` is `cuda:0`).
    Cuda(usize),
    /// The best wgpu adapter: a GPU, else the CPU adapter.
    WgpuAuto,
    /// The N-th discrete wgpu GPU.
    WgpuDiscrete(usize),
    /// The N-th integrated wgpu GPU.
    WgpuIntegrated(usize),
    /// The N-th virtual wgpu GPU.
    WgpuVirtual(usize),
    /// The wgpu CPU adapter.
    WgpuCpu,
}

/// A `RUDA_DEVICE` value that is not one of the [`ACCEPTED_FORMS`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSpecError {
    /// The value as given.
    pub value: String,
}

impl fmt::Display for DeviceSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{DEVICE_ENV}={:?} is not a ruda device; accepted forms: {ACCEPTED_FORMS}",
            self.value
        )
    }
}

impl std::error::Error for DeviceSpecError {}

impl FromStr for DeviceSpec {
    type Err = DeviceSpecError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let err = || DeviceSpecError {
            value: value.into(),
        };
        let index = |s: &str| s.parse::<usize>().map_err(|_| err());
        let lower = value.trim().to_ascii_lowercase();
        let parts: Vec<&str> = lower.split(':').collect();
        Ok(match parts.as_slice() {
            [""] | ["auto"] => DeviceSpec::Auto,
            ["cuda"] => DeviceSpec::Cuda(0),
            ["cuda", n] => DeviceSpec::Cuda(index(n)?),
            ["wgpu"] => DeviceSpec::WgpuAuto,
            ["wgpu", "cpu"] | ["cpu"] => DeviceSpec::WgpuCpu,
            ["wgpu", "discrete"] => DeviceSpec::WgpuDiscrete(0),
            ["wgpu", "discrete", n] => DeviceSpec::WgpuDiscrete(index(n)?),
            ["wgpu", "integrated"] => DeviceSpec::WgpuIntegrated(0),
            ["wgpu", "integrated", n] => DeviceSpec::WgpuIntegrated(index(n)?),
            ["wgpu", "virtual"] => DeviceSpec::WgpuVirtual(0),
            ["wgpu", "virtual", n] => DeviceSpec::WgpuVirtual(index(n)?),
            _ => return Err(err()),
        })
    }
}

impl DeviceSpec {
    /// Finds the device this spec names on this machine.
    pub fn resolve(&self) -> Result<RudaDevice, DeviceError> {
        self.resolve_with(&Inventory::probe())
    }

    /// Like [`resolve`](Self::resolve), against a given inventory (tests use a made-up one).
    pub fn resolve_with(&self, inventory: &Inventory) -> Result<RudaDevice, DeviceError> {
        let missing = |what: &str| DeviceError::NotFound {
            requested: what.into(),
            tried: inventory.summary(),
        };
        match self {
            DeviceSpec::Auto => {
                #[cfg(feature = "cuda")]
                if inventory.cuda_devices > 0 {
                    return Ok(RudaDevice::Cuda(0));
                }
                DeviceSpec::WgpuAuto
                    .resolve_with(inventory)
                    .map_err(|_| missing("the best device"))
            }
            DeviceSpec::Cuda(index) => {
                #[cfg(feature = "cuda")]
                if *index < inventory.cuda_devices {
                    return Ok(RudaDevice::Cuda(*index));
                }
                Err(missing(&alloc::format!("cuda:{index}")))
            }
            wgpu_spec => {
                #[cfg(feature = "wgpu")]
                {
                    let wanted: Vec<WgpuDevice> = match wgpu_spec {
                        DeviceSpec::WgpuAuto => {
                            // GPUs by kind, in the order the module docs give, then the CPU.
                            let mut order: Vec<WgpuDevice> = Vec::new();
                            for kind in 0..4 {
                                for d in &inventory.wgpu_devices {
                                    let rank = match d {
                                        WgpuDevice::DiscreteGpu(_) => 0,
                                        WgpuDevice::IntegratedGpu(_) => 1,
                                        WgpuDevice::VirtualGpu(_) => 2,
                                        WgpuDevice::Cpu => 3,
                                        _ => 4,
                                    };
                                    if rank == kind {
                                        order.push(d.clone());
                                    }
                                }
                            }
                            order
                        }
                        DeviceSpec::WgpuDiscrete(i) => alloc::vec![WgpuDevice::DiscreteGpu(*i)],
                        DeviceSpec::WgpuIntegrated(i) => {
                            alloc::vec![WgpuDevice::IntegratedGpu(*i)]
                        }
                        DeviceSpec::WgpuVirtual(i) => alloc::vec![WgpuDevice::VirtualGpu(*i)],
                        _ => alloc::vec![WgpuDevice::Cpu],
                    };
                    if let Some(found) = wanted
                        .into_iter()
                        .find(|d| inventory.wgpu_devices.contains(d))
                    {
                        return Ok(RudaDevice::Wgpu(found));
                    }
                }
                Err(missing(&spec_name(wgpu_spec)))
            }
        }
    }
}

fn spec_name(spec: &DeviceSpec) -> String {
    match spec {
        DeviceSpec::Auto => "auto".into(),
        DeviceSpec::Cuda(i) => alloc::format!("cuda:{i}"),
        DeviceSpec::WgpuAuto => "wgpu".into(),
        DeviceSpec::WgpuDiscrete(i) => alloc::format!("wgpu:discrete:{i}"),
        DeviceSpec::WgpuIntegrated(i) => alloc::format!("wgpu:integrated:{i}"),
        DeviceSpec::WgpuVirtual(i) => alloc::format!("wgpu:virtual:{i}"),
        DeviceSpec::WgpuCpu => "wgpu:cpu".into(),
    }
}

/// What was found on this machine: CUDA devices and wgpu adapters.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    /// Number of CUDA devices the driver reports (0 when the driver is missing).
    pub cuda_devices: usize,
    /// wgpu adapters of CubeCL's graphics API, as CubeCL devices.
    #[cfg(feature = "wgpu")]
    pub wgpu_devices: Vec<WgpuDevice>,
}

impl Inventory {
    /// Looks at the machine.
    pub fn probe() -> Self {
        Self {
            #[cfg(feature = "cuda")]
            cuda_devices: crate::runtime::cuda::cuda_device_count(),
            #[cfg(not(feature = "cuda"))]
            cuda_devices: 0,
            #[cfg(feature = "wgpu")]
            wgpu_devices: crate::runtime::wgpu::wgpu_adapters()
                .into_iter()
                .map(|(d, _)| d)
                .collect(),
        }
    }

    fn summary(&self) -> String {
        let mut tried = Vec::new();
        #[cfg(feature = "cuda")]
        tried.push(alloc::format!(
            "CUDA: {} device(s){}",
            self.cuda_devices,
            if self.cuda_devices == 0 {
                " (no driver library, or no GPU)"
            } else {
                ""
            }
        ));
        #[cfg(not(feature = "cuda"))]
        tried.push("CUDA: not compiled in (feature `cuda`)".into());
        #[cfg(feature = "wgpu")]
        tried.push(alloc::format!(
            "wgpu ({:?}): {}",
            crate::runtime::wgpu::wgpu_backend(),
            if self.wgpu_devices.is_empty() {
                "no adapter".into()
            } else {
                self.wgpu_devices
                    .iter()
                    .map(|d| RudaDevice::Wgpu(d.clone()).to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ));
        #[cfg(not(feature = "wgpu"))]
        tried.push("wgpu: not compiled in (feature `wgpu`)".into());
        tried.join("; ")
    }
}

/// Why no device could be chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceError {
    /// `RUDA_DEVICE` holds a value that is not a device.
    BadSpec(DeviceSpecError),
    /// The requested device is not on this machine.
    NotFound {
        /// What was asked for.
        requested: String,
        /// What the probe found.
        tried: String,
    },
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceError::BadSpec(e) => e.fmt(f),
            DeviceError::NotFound { requested, tried } => write!(
                f,
                "no ruda device for {requested}. Tried: {tried}. To get one: install the NVIDIA \
driver for CUDA GPUs; a Vulkan driver for wgpu GPUs; on a CPU-only Debian/Ubuntu machine, \
Mesa's Vulkan CPU driver (`apt-get install mesa-vulkan-drivers`). Set {DEVICE_ENV} to choose \
({ACCEPTED_FORMS})."
            ),
        }
    }
}

impl std::error::Error for DeviceError {}

/// One ruda device as `ruda_info` shows it.
#[derive(Clone, Debug)]
pub struct DeviceDescription {
    /// The device (`cuda:0`, `wgpu:discrete:0`, ...).
    pub device: RudaDevice,
    /// The runtime and, for wgpu, its graphics API (`cuda`, `wgpu (Vulkan)`).
    pub runtime: String,
    /// The device's name as its driver gives it.
    pub name: String,
    /// Type, compute capability, driver, memory: one human-readable line.
    pub details: String,
    /// Whether LayerNorm runs as native fused kernels on it.
    pub native_layer_norm: bool,
    /// The runtime's [`autotune_driver_fingerprint`](crate::Runtime::autotune_driver_fingerprint).
    pub fingerprint: Option<String>,
}

/// Describes every ruda device of this machine, opening a client on each (which also checks that
/// it works): CUDA GPUs first, then the wgpu adapters.
pub fn describe_all() -> Vec<DeviceDescription> {
    #[allow(unused_mut)]
    let mut out = Vec::new();
    let gib = |bytes: u64| alloc::format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64);

    #[cfg(feature = "cuda")]
    {
        use crate::{
            hooks::Runtime,
            runtime::cuda::{self, RudaCuda},
        };
        use cubecl::Runtime as _;
        for index in 0..cuda::cuda_device_count() {
            let Some(report) = cuda::cuda_device_report(index) else {
                continue;
            };
            let client = RudaCuda::client(&cubecl::cuda::CudaDevice::new(index));
            out.push(DeviceDescription {
                device: RudaDevice::Cuda(index),
                runtime: "cuda".into(),
                name: report.name.clone(),
                details: alloc::format!(
                    "compute capability {}.{}, memory {} total",
                    report.compute_capability.0,
                    report.compute_capability.1,
                    gib(report.total_memory)
                ),
                native_layer_norm: RudaCuda::has_native_layer_norm(),
                fingerprint: RudaCuda::autotune_driver_fingerprint(&client),
            });
        }
    }

    #[cfg(feature = "wgpu")]
    {
        use crate::{
            hooks::Runtime,
            runtime::wgpu::{self, RudaWgpu},
        };
        use cubecl::Runtime as _;
        for (device, info) in wgpu::wgpu_adapters() {
            let client = RudaWgpu::client(&device);
            let largest = client.properties().memory.max_page_size;
            out.push(DeviceDescription {
                device: RudaDevice::Wgpu(device.clone()),
                runtime: alloc::format!("wgpu ({:?})", wgpu::wgpu_backend()),
                name: info.name.clone(),
                details: alloc::format!(
                    "type {:?}, driver {:?} {:?}, largest buffer {} (wgpu reports no total)",
                    info.device_type,
                    info.driver,
                    info.driver_info,
                    gib(largest)
                ),
                native_layer_norm: RudaWgpu::has_native_layer_norm(),
                fingerprint: RudaWgpu::autotune_driver_fingerprint(&client),
            });
        }
    }
    out
}

/// Prints [`describe_all`] like `nvidia-smi -L` with details, marking the device that
/// [`RudaDevice::from_env`] selects; returns how many devices were listed.
pub fn print_devices() -> usize {
    let chosen = RudaDevice::from_env();
    let devices = describe_all();
    for d in &devices {
        let mark = if chosen.as_ref() == Ok(&d.device) {
            "*"
        } else {
            " "
        };
        std::println!("{mark}{}  runtime={}  {}", d.device, d.runtime, d.name);
        std::println!("    {}", d.details);
        std::println!(
            "    native LayerNorm: {}",
            if d.native_layer_norm { "yes" } else { "no" }
        );
        match &d.fingerprint {
            Some(fp) => std::println!(
                "    fingerprint {} = {fp}",
                crate::fingerprint::fingerprint_hash(fp)
            ),
            None => std::println!(
                "    fingerprint: none (driver identity unknown; autotune results stay in memory)"
            ),
        }
    }
    match chosen {
        Ok(device) => std::println!("\n{} ruda device(s); selected: {device} (*)", devices.len()),
        Err(error) => std::println!("\n{} ruda device(s); none selected: {error}", devices.len()),
    }
    devices.len()
}
