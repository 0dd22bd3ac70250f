//! The Burn backend type a run trains on, chosen at run time from `--backend` and the device.
//!
//! An example writes its training once, generic over `B: TrainingBackend` ([`BackendJob`]),
//! and [`run_on`] calls it with the type the flags chose: `burn_ruda::Autodiff<Ruda<RudaCuda>>`
//! or `<Ruda<RudaWgpu>>`; with the cargo feature `burn-backends`, also Burn's own
//! `Autodiff<Wgpu>` and `Autodiff<Cuda>` for comparison. Each type is a separate instantiation of
//! burn-train's Learner to compile, which is why Burn's own backends are behind a feature.

use burn::module::AutodiffModule;
use burn::optim::Optimizer;
use burn::tensor::backend::AutodiffBackend;
use ruda_runtime::device::RudaDevice;

use crate::cli::{ArgError, BackendChoice};

/// Work generic over the training backend: the examples implement it once and [`run_on`] calls
/// it with the Burn backend type that `--backend` and `--device` chose.
pub trait BackendJob {
    /// What the job returns.
    type Output;

    /// Runs the job on backend `B` and `devices` (one, or several for data-parallel training;
    /// never empty).
    fn run<B: TrainingBackend>(self, devices: Vec<B::Device>) -> Self::Output;
}

/// A backend the examples train on, with the Adam they train with there: ruda's
/// (`burn_ruda::optim::AdamOptimizer`, a step's updates as one native operation) on ruda's
/// backends, Burn's on Burn's. Both take Burn's default options and keep the same records.
pub trait TrainingBackend: AutodiffBackend {
    /// Adam for module `M` on this backend.
    type Adam<M: AutodiffModule<Self> + 'static>: Optimizer<M, Self> + 'static;

    /// Adam with Burn's default options.
    fn adam<M: AutodiffModule<Self> + 'static>() -> Self::Adam<M>;
}

impl<B, C> TrainingBackend for burn_ruda::Autodiff<B, C>
where
    B: burn_ruda::NativeBackend + burn_ruda::ops::AdamBackend,
    C: burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy,
{
    type Adam<M: AutodiffModule<Self> + 'static> = burn_ruda::optim::AdamOptimizer<M, Self>;

    fn adam<M: AutodiffModule<Self> + 'static>() -> Self::Adam<M> {
        burn_ruda::optim::AdamConfig::new().init()
    }
}

/// Burn's own backends (feature `burn-backends`) train with Burn's Adam.
#[cfg(feature = "burn-backends")]
macro_rules! burn_adam {
    ($($backend:ty),*) => {$(
        impl TrainingBackend for burn::backend::Autodiff<$backend> {
            type Adam<M: AutodiffModule<Self> + 'static> =
                burn::optim::adaptor::OptimizerAdaptor<burn::optim::Adam, M, Self>;

            fn adam<M: AutodiffModule<Self> + 'static>() -> Self::Adam<M> {
                burn::optim::AdamConfig::new().init()
            }
        }
    )*};
}
#[cfg(feature = "burn-backends")]
burn_adam!(burn::backend::Wgpu, burn::backend::Cuda);

/// Whether this build can run `backend`: Burn's own backends need the cargo feature
/// `burn-backends`.
pub fn check_available(backend: BackendChoice) -> Result<(), ArgError> {
    if backend == BackendChoice::Ruda || cfg!(feature = "burn-backends") {
        Ok(())
    } else {
        Err(ArgError(format!(
            "--backend {backend}: this build has ruda only; rebuild with `--features \
             burn-backends` to compare with Burn's own backends"
        )))
    }
}

/// The Burn backend type a [`BackendChoice`] and a device run, as the examples print it.
pub fn backend_type_name(backend: BackendChoice, device: &RudaDevice) -> &'static str {
    match (backend, device.runtime()) {
        (BackendChoice::Ruda, "cuda") => "burn_ruda::Autodiff<burn_ruda::Ruda<RudaCuda>>",
        (BackendChoice::Ruda, _) => "burn_ruda::Autodiff<burn_ruda::Ruda<RudaWgpu>>",
        (BackendChoice::BurnWgpu, _) => "burn::backend::Autodiff<burn::backend::Wgpu>",
        (BackendChoice::BurnCuda, _) => "burn::backend::Autodiff<burn::backend::Cuda>",
    }
}

/// Runs `job` on the Burn backend of `backend` for `devices`, all of one runtime, as
/// [`crate::cli::choose_devices`] returns them.
///
/// # Panics
/// When `devices` is empty or mixes runtimes, or `backend` cannot drive them (the flags'
/// checks rule these out), or `backend` is not in this build ([`check_available`]).
pub fn run_on<J: BackendJob>(backend: BackendChoice, devices: &[RudaDevice], job: J) -> J::Output {
    use burn_ruda::{Autodiff, Ruda, RudaCuda, RudaWgpu};
    let first = devices.first().expect("run_on: no device");
    if let Err(error) = check_available(backend) {
        panic!("{error}");
    }
    match (backend, first) {
        (BackendChoice::Ruda, RudaDevice::Cuda(_)) => {
            job.run::<Autodiff<Ruda<RudaCuda>>>(cuda_devices(devices))
        }
        (BackendChoice::Ruda, RudaDevice::Wgpu(_)) => {
            job.run::<Autodiff<Ruda<RudaWgpu>>>(wgpu_devices(devices))
        }
        #[cfg(feature = "burn-backends")]
        (BackendChoice::BurnWgpu, RudaDevice::Wgpu(_)) => {
            job.run::<burn::backend::Autodiff<burn::backend::Wgpu>>(wgpu_devices(devices))
        }
        #[cfg(feature = "burn-backends")]
        (BackendChoice::BurnCuda, RudaDevice::Cuda(_)) => {
            job.run::<burn::backend::Autodiff<burn::backend::Cuda>>(cuda_devices(devices))
        }
        (backend, device) => panic!("--backend {backend} cannot run on {device}"),
    }
}

fn cuda_devices(devices: &[RudaDevice]) -> Vec<ruda_runtime::cubecl::cuda::CudaDevice> {
    devices
        .iter()
        .map(|device| match device {
            RudaDevice::Cuda(index) => ruda_runtime::cubecl::cuda::CudaDevice::new(*index),
            other => panic!("run_on: {other} among CUDA devices"),
        })
        .collect()
}

fn wgpu_devices(devices: &[RudaDevice]) -> Vec<ruda_runtime::cubecl::wgpu::WgpuDevice> {
    devices
        .iter()
        .map(|device| match device {
            RudaDevice::Wgpu(device) => device.clone(),
            other => panic!("run_on: {other} among wgpu devices"),
        })
        .collect()
}

/// The recorder the examples save models with: named MessagePack, full precision
/// (`<path>.mpk`).
pub type ModelRecorder = burn::record::NamedMpkFileRecorder<burn::record::FullPrecisionSettings>;
