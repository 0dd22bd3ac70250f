//! The flags every training example takes: `--backend`, `--device` and `--devices` (a clap
//! [`DeviceArgs`] to flatten into an example's own parser), and the devices they choose.
//!
//! `--device` takes `auto`, `cuda`, `wgpu`, `cpu`, or any other form `RUDA_DEVICE` accepts
//! (`cuda:1`, `wgpu:discrete:0`, ...). `auto` is ruda's best-device rule
//! ([`RudaDevice::from_env`]: `RUDA_DEVICE` when set, else a CUDA GPU, else a wgpu GPU, else the
//! wgpu CPU adapter). `cpu` is the wgpu CPU adapter (Mesa's lavapipe on Linux).

use core::fmt;

use ruda_runtime::device::{DeviceSpec, RudaDevice};

/// A flag whose value cannot be used, with the reason, in the user's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgError(pub String);

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ArgError {}

/// Which Burn backend trains the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    /// burn_ruda::Autodiff<burn_ruda::Ruda<RudaCuda|RudaWgpu>>: native LayerNorm forward and
    /// backward
    Ruda,
    /// Burn's own Autodiff<Wgpu>, for comparison (cargo feature `burn-backends`)
    #[value(alias = "wgpu")]
    BurnWgpu,
    /// Burn's own Autodiff<Cuda>, for comparison (cargo feature `burn-backends`)
    #[value(alias = "cuda")]
    BurnCuda,
}

impl fmt::Display for BackendChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Ruda => "ruda",
            Self::BurnWgpu => "burn-wgpu",
            Self::BurnCuda => "burn-cuda",
        })
    }
}

/// `--backend`, `--device`, `--devices`: flatten into an example's parser with
/// `#[command(flatten)]`.
#[derive(Clone, Debug, clap::Args)]
pub struct DeviceArgs {
    /// The Burn backend that trains the model
    #[arg(long, value_enum, default_value_t = BackendChoice::Ruda)]
    pub backend: BackendChoice,
    /// auto (ruda's best device: RUDA_DEVICE, else CUDA, else a wgpu GPU, else the wgpu CPU
    /// adapter), cuda, wgpu, cpu (the wgpu CPU adapter, Mesa's lavapipe), or any RUDA_DEVICE form
    /// (cuda:1, wgpu:discrete:0) [default: auto]
    #[arg(long, value_name = "DEVICE")]
    pub device: Option<String>,
    /// Data-parallel training with burn-train's multi-device strategy: N devices of --device's
    /// kind starting at it (--device cuda --devices 2), or a list (cuda:0,cuda:1). The batch size
    /// is then the global batch, split evenly
    #[arg(long, value_name = "N|LIST")]
    pub devices: Option<String>,
}

impl DeviceArgs {
    /// The training devices these flags name ([`choose_devices`]).
    pub fn choose(&self) -> Result<Vec<RudaDevice>, ArgError> {
        choose_devices(
            self.backend,
            self.device.as_deref(),
            self.devices.as_deref(),
        )
    }
}

/// Finds the device for `--device` (`None`: `auto`) and checks that `backend` can drive it.
///
/// `auto` is ruda's best-device rule ([`RudaDevice::from_env`]) for `ruda`; Burn's backends
/// take the best device of their own kind (`wgpu`, `cuda`).
pub fn choose_device(backend: BackendChoice, device: Option<&str>) -> Result<RudaDevice, ArgError> {
    let spec = match device {
        None => DeviceSpec::Auto,
        Some(value) => value
            .parse::<DeviceSpec>()
            .map_err(|e| ArgError(format!("--device: {e}")))?,
    };
    let not_found = |e: ruda_runtime::device::DeviceError| ArgError(e.to_string());
    let device = match (backend, spec) {
        (BackendChoice::Ruda, DeviceSpec::Auto) => RudaDevice::from_env().map_err(not_found)?,
        (BackendChoice::BurnWgpu, DeviceSpec::Auto) => {
            DeviceSpec::WgpuAuto.resolve().map_err(not_found)?
        }
        (BackendChoice::BurnCuda, DeviceSpec::Auto) => {
            DeviceSpec::Cuda(0).resolve().map_err(not_found)?
        }
        (_, spec) => spec.resolve().map_err(not_found)?,
    };
    match (backend, device.runtime()) {
        (BackendChoice::BurnWgpu, "cuda") => Err(ArgError(format!(
            "--backend burn-wgpu cannot run on {device}: choose a wgpu device (--device wgpu or cpu)"
        ))),
        (BackendChoice::BurnCuda, "wgpu") => Err(ArgError(format!(
            "--backend burn-cuda cannot run on {device}: choose a CUDA device (--device cuda)"
        ))),
        _ => Ok(device),
    }
}

/// Finds the training devices for `--device` and `--devices` and checks that `backend` can
/// drive them.
///
/// Without `--devices`: the one device of [`choose_device`]. `--devices N` (a count): N devices
/// of the kind `--device` chooses, starting at it (`--device cuda --devices 2`: `cuda:0`,
/// `cuda:1`). `--devices LIST` (comma-separated `RUDA_DEVICE` forms, `cuda:0,cuda:1`): those
/// devices; `--device` must then be absent. All devices must be of one runtime.
pub fn choose_devices(
    backend: BackendChoice,
    device: Option<&str>,
    devices: Option<&str>,
) -> Result<Vec<RudaDevice>, ArgError> {
    let Some(devices) = devices.map(str::trim) else {
        return Ok(vec![choose_device(backend, device)?]);
    };
    let chosen = if let Ok(count) = devices.parse::<usize>() {
        if count == 0 {
            return Err(ArgError("--devices: at least one device".into()));
        }
        let first = choose_device(backend, device)?;
        let mut chosen = vec![first.clone()];
        for offset in 1..count {
            let next = next_of_kind(&first, offset).ok_or_else(|| {
                ArgError(format!(
                    "--devices {count}: {first} has no further devices of its kind"
                ))
            })?;
            let found = choose_device(backend, Some(&next)).map_err(|e| {
                ArgError(format!(
                    "--devices {count}: device {} of {count}: {e}",
                    offset + 1
                ))
            })?;
            chosen.push(found);
        }
        chosen
    } else {
        if device.is_some() {
            return Err(ArgError(
                "give either --device or a list of --devices, not both".into(),
            ));
        }
        devices
            .split(',')
            .map(|spec| choose_device(backend, Some(spec.trim())))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ArgError(format!("--devices {devices}: {e}")))?
    };
    for (i, device) in chosen.iter().enumerate() {
        if chosen[..i].contains(device) {
            return Err(ArgError(format!("--devices: {device} is given twice")));
        }
        if device.runtime() != chosen[0].runtime() {
            return Err(ArgError(format!(
                "--devices: {} and {device} are of different runtimes; one training runs on one \
                 runtime",
                chosen[0]
            )));
        }
    }
    Ok(chosen)
}

/// The `RUDA_DEVICE` form of the device `offset` places after `device` among devices of its
/// kind (`cuda:1` after `cuda:0`), if that kind is numbered.
fn next_of_kind(device: &RudaDevice, offset: usize) -> Option<String> {
    use ruda_runtime::cubecl::wgpu::WgpuDevice;
    match device {
        RudaDevice::Cuda(index) => Some(format!("cuda:{}", index + offset)),
        RudaDevice::Wgpu(WgpuDevice::DiscreteGpu(i)) => {
            Some(format!("wgpu:discrete:{}", i + offset))
        }
        RudaDevice::Wgpu(WgpuDevice::IntegratedGpu(i)) => {
            Some(format!("wgpu:integrated:{}", i + offset))
        }
        RudaDevice::Wgpu(WgpuDevice::VirtualGpu(i)) => Some(format!("wgpu:virtual:{}", i + offset)),
        RudaDevice::Wgpu(_) => None,
    }
}

/// A clap value parser for counts that must be at least 1 (epochs, batch sizes).
pub fn positive(value: &str) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// The devices as the examples print them: `cuda:0` or `cuda:0 + cuda:1`.
pub fn device_list(devices: &[RudaDevice]) -> String {
    devices
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" + ")
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        devices: DeviceArgs,
    }

    #[test]
    fn backend_flag_takes_the_three_names_and_their_aliases() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
                .map(|cli| cli.devices.backend)
        };
        assert_eq!(parse(&[]).unwrap(), BackendChoice::Ruda);
        assert_eq!(
            parse(&["--backend", "burn-wgpu"]).unwrap(),
            BackendChoice::BurnWgpu
        );
        assert_eq!(parse(&["--backend=cuda"]).unwrap(), BackendChoice::BurnCuda);
        let error = parse(&["--backend", "tch"]).unwrap_err().to_string();
        assert!(error.contains("ruda, burn-wgpu, burn-cuda"), "{error}");
    }

    #[test]
    fn a_device_list_excludes_device() {
        let error = choose_devices(BackendChoice::Ruda, Some("cpu"), Some("cpu,wgpu"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("either --device or a list"), "{error}");
        let error = choose_devices(BackendChoice::Ruda, None, Some("0")).unwrap_err();
        assert_eq!(error.to_string(), "--devices: at least one device");
    }
}
