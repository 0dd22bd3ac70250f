//! The backends a benchmark compares: ruda and every Burn built-in backend present on the
//! machine, each on the device it would train on.

use std::fmt;

use cubecl::wgpu::WgpuDevice;

/// One backend on one device.
#[derive(Clone, Debug, PartialEq)]
pub enum Contender {
    /// `burn_ruda::Autodiff<burn_ruda::Ruda<RudaCuda>>` on CUDA device 0.
    RudaCuda,
    /// `burn::backend::Autodiff<burn::backend::Cuda>` on CUDA device 0.
    BurnCuda,
    /// `burn::backend::Autodiff<burn_ruda::Ruda<RudaCuda>>` on CUDA device 0: Burn's own
    /// autodiff over Ruda, so LayerNorm runs as Burn's composed ops. Not part of the published
    /// comparison ([`Contender::present`]); named in `RUDA_BENCH_BACKENDS` it separates the cost
    /// of the native LayerNorm node from that of the rest of the Ruda backend.
    RudaCudaComposed,
    /// `burn_ruda::Autodiff<burn_ruda::Ruda<RudaCuda, bf16>>` on CUDA device 0: the training
    /// step in bf16 (parameters, activations and gradients; LayerNorm statistics and the
    /// native kernels' sums in f32). Only the training steps, and only when named in
    /// `RUDA_BENCH_BACKENDS`.
    RudaCudaBf16,
    /// `burn::backend::Autodiff<burn::backend::Cuda<bf16>>` on CUDA device 0, beside
    /// [`Contender::RudaCudaBf16`].
    BurnCudaBf16,
    /// `burn_ruda::Autodiff<burn_ruda::Ruda<RudaWgpu>>` on a wgpu adapter.
    RudaWgpu(WgpuDevice),
    /// `burn::backend::Autodiff<burn::backend::Wgpu>` on the same wgpu adapter.
    BurnWgpu(WgpuDevice),
    /// `burn::backend::Autodiff<burn::backend::NdArray>` on the CPU.
    NdArray,
}

impl Contender {
    /// Every contender this machine can run: the CUDA pair when a CUDA driver answers, the wgpu
    /// pair on the best wgpu adapter (a discrete GPU, else an integrated one, else the CPU
    /// adapter), and NdArray.
    pub fn present() -> Vec<Contender> {
        let mut out = Vec::new();
        if cuda_available() {
            #[cfg(feature = "cuda")]
            out.push(Contender::RudaCuda);
            out.push(Contender::BurnCuda);
        }
        if let Some(device) = best_wgpu_device() {
            out.push(Contender::RudaWgpu(device.clone()));
            out.push(Contender::BurnWgpu(device));
        }
        out.push(Contender::NdArray);
        out
    }

    /// [`Contender::present`], or, when `RUDA_BENCH_BACKENDS` is set (a comma-separated list
    /// of [`Contender::name`]s), the contenders it names among those this machine can run
    /// (`ruda-cuda-composed` included).
    ///
    /// # Panics
    /// When `RUDA_BENCH_BACKENDS` names a backend that is not one of [`Contender::NAMES`].
    pub fn selected() -> Vec<Contender> {
        let mut present = Self::present();
        let Ok(list) = std::env::var("RUDA_BENCH_BACKENDS") else {
            return present;
        };
        if cfg!(feature = "cuda") && cuda_available() {
            present.splice(
                2..2,
                [
                    Contender::RudaCudaComposed,
                    Contender::RudaCudaBf16,
                    Contender::BurnCudaBf16,
                ],
            );
        }
        let wanted: Vec<&str> = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        for name in &wanted {
            assert!(
                Self::NAMES.contains(name),
                "RUDA_BENCH_BACKENDS: unknown backend {name:?}; expected a comma-separated list of {:?}",
                Self::NAMES
            );
        }
        present
            .into_iter()
            .filter(|c| wanted.contains(&c.name()))
            .collect()
    }

    /// Every name [`Contender::name`] can return.
    pub const NAMES: [&'static str; 8] = [
        "ruda-cuda",
        "burn-cuda",
        "ruda-cuda-composed",
        "ruda-cuda-bf16",
        "burn-cuda-bf16",
        "ruda-wgpu",
        "burn-wgpu",
        "burn-ndarray",
    ];

    /// Short name, used in tables, CSV files and criterion's benchmark ids.
    pub fn name(&self) -> &'static str {
        match self {
            Contender::RudaCuda => "ruda-cuda",
            Contender::BurnCuda => "burn-cuda",
            Contender::RudaCudaComposed => "ruda-cuda-composed",
            Contender::RudaCudaBf16 => "ruda-cuda-bf16",
            Contender::BurnCudaBf16 => "burn-cuda-bf16",
            Contender::RudaWgpu(_) => "ruda-wgpu",
            Contender::BurnWgpu(_) => "burn-wgpu",
            Contender::NdArray => "burn-ndarray",
        }
    }

    /// The Burn backend type that runs the work.
    pub fn backend_type(&self) -> &'static str {
        match self {
            Contender::RudaCuda => "burn_ruda::Autodiff<burn_ruda::Ruda<RudaCuda>>",
            Contender::BurnCuda => "burn::backend::Autodiff<burn::backend::Cuda>",
            Contender::RudaCudaComposed => "burn::backend::Autodiff<burn_ruda::Ruda<RudaCuda>>",
            Contender::RudaCudaBf16 => "burn_ruda::Autodiff<burn_ruda::Ruda<RudaCuda, bf16>>",
            Contender::BurnCudaBf16 => "burn::backend::Autodiff<burn::backend::Cuda<bf16>>",
            Contender::RudaWgpu(_) => "burn_ruda::Autodiff<burn_ruda::Ruda<RudaWgpu>>",
            Contender::BurnWgpu(_) => "burn::backend::Autodiff<burn::backend::Wgpu>",
            Contender::NdArray => "burn::backend::Autodiff<burn::backend::NdArray>",
        }
    }

    /// Whether this is one of ruda's f32 backends (which also have the kernel-level
    /// benchmarks).
    pub fn is_ruda(&self) -> bool {
        matches!(self, Contender::RudaCuda | Contender::RudaWgpu(_))
    }

    /// Whether this is one of the bf16 contenders, which run the training steps only.
    pub fn is_bf16(&self) -> bool {
        matches!(self, Contender::RudaCudaBf16 | Contender::BurnCudaBf16)
    }

    /// Whether the work runs on the CPU (NdArray, or a CPU wgpu adapter such as lavapipe):
    /// such contenders get shorter timing plans.
    pub fn on_cpu(&self) -> bool {
        match self {
            Contender::NdArray => true,
            Contender::RudaWgpu(d) | Contender::BurnWgpu(d) => *d == WgpuDevice::Cpu,
            Contender::RudaCuda
            | Contender::BurnCuda
            | Contender::RudaCudaComposed
            | Contender::RudaCudaBf16
            | Contender::BurnCudaBf16 => false,
        }
    }

    /// The device, as the tables print it.
    pub fn device_label(&self) -> String {
        match self {
            Contender::RudaCuda
            | Contender::BurnCuda
            | Contender::RudaCudaComposed
            | Contender::RudaCudaBf16
            | Contender::BurnCudaBf16 => "cuda:0".into(),
            Contender::RudaWgpu(d) | Contender::BurnWgpu(d) => format!("wgpu:{d:?}"),
            Contender::NdArray => "cpu".into(),
        }
    }
}

impl fmt::Display for Contender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.device_label())
    }
}

/// Whether a CUDA driver answers with at least one device.
pub fn cuda_available() -> bool {
    #[cfg(feature = "cuda")]
    {
        ruda_runtime::runtime::cuda::cuda_device_count() > 0
    }
    #[cfg(not(feature = "cuda"))]
    {
        false
    }
}

/// The wgpu adapter a user would train on: the first discrete GPU, else the first integrated
/// one, else the CPU adapter; `None` when wgpu finds no adapter.
pub fn best_wgpu_device() -> Option<WgpuDevice> {
    let devices: Vec<WgpuDevice> = ruda_runtime::runtime::wgpu::wgpu_adapters()
        .into_iter()
        .map(|(device, _)| device)
        .collect();
    let rank = |d: &WgpuDevice| match d {
        WgpuDevice::DiscreteGpu(_) => 0,
        WgpuDevice::IntegratedGpu(_) => 1,
        WgpuDevice::VirtualGpu(_) => 2,
        WgpuDevice::Cpu => 3,
        _ => 4,
    };
    devices.into_iter().min_by_key(rank)
}
