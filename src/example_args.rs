//! Command-line flags shared by the training examples: a small `--name value` parser, and the
//! `--backend` / `--device` choice that decides which Burn backend runs the (unchanged) model on
//! which device.
//!
//! `--device` takes `auto`, `cuda`, `wgpu`, `cpu`, or any other form `RUDA_DEVICE` accepts
//! (`cuda:1`, `wgpu:discrete:0`, ...). `auto` is ruda's best-device rule
//! ([`RudaDevice::from_env`]: `RUDA_DEVICE` when set, else a CUDA GPU, else a wgpu GPU, else the
//! wgpu CPU adapter). `cpu` is the wgpu CPU adapter (Mesa's lavapipe on Linux).
//!
//! `--backend` picks the Burn backend: `ruda` (`burn_ruda::Autodiff<burn_ruda::Ruda<R>>`, with
//! `R` = `RudaCuda` or `RudaWgpu` after the device), or Burn's own `burn-wgpu`
//! (`burn::backend::Autodiff<burn::backend::Wgpu>`) or `burn-cuda`
//! (`burn::backend::Autodiff<burn::backend::Cuda>`) for comparison.

use core::fmt;
use core::str::FromStr;
use std::collections::BTreeMap;

use ruda_runtime::device::{DeviceSpec, RudaDevice};

/// A command-line error: a message for the user, printed before the example's usage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgError(pub String);

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ArgError {}

/// Parsed `--name value` / `--name=value` flags. Each value is taken once by its reader
/// ([`Args::get`], [`Args::flag`]); [`Args::finish`] then rejects whatever no reader took.
#[derive(Clone, Debug, Default)]
pub struct Args {
    values: BTreeMap<String, Option<String>>,
}

impl Args {
    /// The process's arguments (without the program name).
    pub fn from_env() -> Result<Self, ArgError> {
        Self::parse(std::env::args().skip(1))
    }

    /// Parses `--name value`, `--name=value` and bare `--name` (a switch, or `-h`).
    pub fn parse<I, S>(args: I) -> Result<Self, ArgError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut values = BTreeMap::new();
        let mut iter = args.into_iter().map(Into::into).peekable();
        while let Some(arg) = iter.next() {
            let name = if arg == "-h" {
                "help".to_string()
            } else if let Some(name) = arg.strip_prefix("--") {
                name.to_string()
            } else {
                return Err(ArgError(format!(
                    "unexpected argument {arg:?}: flags have the form --name value"
                )));
            };
            let (name, value) = match name.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => {
                    let value = match iter.peek() {
                        Some(next) if !next.starts_with("--") => iter.next(),
                        _ => None,
                    };
                    (name, value)
                }
            };
            if values.insert(name.clone(), value).is_some() {
                return Err(ArgError(format!("--{name} is given twice")));
            }
        }
        Ok(Self { values })
    }

    /// Whether the switch `--name` (or `-h` for `help`) is present.
    pub fn flag(&mut self, name: &str) -> Result<bool, ArgError> {
        match self.values.remove(name) {
            None => Ok(false),
            Some(None) => Ok(true),
            Some(Some(v)) => Err(ArgError(format!("--{name} takes no value (got {v:?})"))),
        }
    }

    /// The value of `--name`, parsed, if given.
    pub fn get<T: FromStr>(&mut self, name: &str) -> Result<Option<T>, ArgError>
    where
        T::Err: fmt::Display,
    {
        match self.values.remove(name) {
            None => Ok(None),
            Some(None) => Err(ArgError(format!("--{name} needs a value"))),
            Some(Some(v)) => v
                .parse()
                .map(Some)
                .map_err(|e| ArgError(format!("--{name} {v:?}: {e}"))),
        }
    }

    /// The value of `--name`, parsed, or `default`.
    pub fn get_or<T: FromStr>(&mut self, name: &str, default: T) -> Result<T, ArgError>
    where
        T::Err: fmt::Display,
    {
        Ok(self.get(name)?.unwrap_or(default))
    }

    /// Fails on any flag no reader took.
    pub fn finish(self) -> Result<(), ArgError> {
        match self.values.keys().next() {
            None => Ok(()),
            Some(name) => Err(ArgError(format!("unknown flag --{name}"))),
        }
    }
}

/// Which Burn backend trains the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// `burn_ruda::Autodiff<burn_ruda::Ruda<R>>`: native LayerNorm forward and backward.
    Ruda,
    /// Burn's `Autodiff<Wgpu>`.
    BurnWgpu,
    /// Burn's `Autodiff<Cuda>`.
    BurnCuda,
}

impl FromStr for BackendChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "ruda" => Ok(Self::Ruda),
            "burn-wgpu" | "wgpu" => Ok(Self::BurnWgpu),
            "burn-cuda" | "cuda" => Ok(Self::BurnCuda),
            _ => Err("expected ruda, burn-wgpu or burn-cuda".into()),
        }
    }
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

/// The Burn backend type a [`BackendChoice`] and a device run, as the examples print it.
pub fn backend_type_name(backend: BackendChoice, device: &RudaDevice) -> &'static str {
    match (backend, device.runtime()) {
        (BackendChoice::Ruda, "cuda") => "burn_ruda::Autodiff<burn_ruda::Ruda<RudaCuda>>",
        (BackendChoice::Ruda, _) => "burn_ruda::Autodiff<burn_ruda::Ruda<RudaWgpu>>",
        (BackendChoice::BurnWgpu, _) => "burn::backend::Autodiff<burn::backend::Wgpu>",
        (BackendChoice::BurnCuda, _) => "burn::backend::Autodiff<burn::backend::Cuda>",
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
    match device {
        #[cfg(feature = "cuda")]
        RudaDevice::Cuda(index) => Some(format!("cuda:{}", index + offset)),
        RudaDevice::Wgpu(wgpu) => {
            use burn::backend::wgpu::WgpuDevice;
            match wgpu {
                WgpuDevice::DiscreteGpu(i) => Some(format!("wgpu:discrete:{}", i + offset)),
                WgpuDevice::IntegratedGpu(i) => Some(format!("wgpu:integrated:{}", i + offset)),
                WgpuDevice::VirtualGpu(i) => Some(format!("wgpu:virtual:{}", i + offset)),
                _ => None,
            }
        }
    }
}

/// Work generic over the training backend: the examples implement it once and [`run_on`] calls
/// it with the Burn backend type that `--backend` and `--device` chose.
pub trait BackendJob {
    /// What the job returns.
    type Output;

    /// Runs the job on backend `B` and `devices` (one, or several for data-parallel training;
    /// never empty).
    fn run<B: burn::tensor::backend::AutodiffBackend>(
        self,
        devices: Vec<B::Device>,
    ) -> Self::Output;
}

/// Runs `job` on the Burn backend of `backend` for `devices` (see the [module docs](self)),
/// all of one runtime, as [`choose_devices`] returns them.
pub fn run_on<J: BackendJob>(backend: BackendChoice, devices: &[RudaDevice], job: J) -> J::Output {
    use burn_ruda::{Autodiff, Ruda};
    let first = devices.first().expect("run_on: no device");
    #[cfg(feature = "cuda")]
    let cuda = || {
        devices
            .iter()
            .map(|device| match device {
                RudaDevice::Cuda(index) => burn::backend::cuda::CudaDevice::new(*index),
                other => panic!("run_on: {other} among CUDA devices"),
            })
            .collect::<Vec<_>>()
    };
    let wgpu = || {
        devices
            .iter()
            .map(|device| match device {
                RudaDevice::Wgpu(device) => device.clone(),
                #[allow(unreachable_patterns)]
                other => panic!("run_on: {other} among wgpu devices"),
            })
            .collect::<Vec<_>>()
    };
    match (backend, first) {
        #[cfg(feature = "cuda")]
        (BackendChoice::Ruda, RudaDevice::Cuda(_)) => {
            job.run::<Autodiff<Ruda<burn_ruda::RudaCuda>>>(cuda())
        }
        (BackendChoice::Ruda, RudaDevice::Wgpu(_)) => {
            job.run::<Autodiff<Ruda<burn_ruda::RudaWgpu>>>(wgpu())
        }
        (BackendChoice::BurnWgpu, RudaDevice::Wgpu(_)) => {
            job.run::<burn::backend::Autodiff<burn::backend::Wgpu>>(wgpu())
        }
        #[cfg(feature = "cuda")]
        (BackendChoice::BurnCuda, RudaDevice::Cuda(_)) => {
            job.run::<burn::backend::Autodiff<burn::backend::Cuda>>(cuda())
        }
        #[allow(unreachable_patterns)]
        (backend, device) => panic!("--backend {backend} cannot run on {device}"),
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

/// The recorder the examples save models with: named MessagePack, full precision
/// (`<path>.mpk`).
pub type ModelRecorder = burn::record::NamedMpkFileRecorder<burn::record::FullPrecisionSettings>;

/// A directory for an example's artifacts (metric logs, the saved model) when none is given:
/// `burn-ruda-examples/<name>` in the system's temporary directory.
pub fn default_artifact_dir(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join("burn-ruda-examples").join(name)
}

/// The repository's `data/` directory, where the examples' shipped data sets live.
pub fn shipped_data_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_flags() {
        let mut args =
            Args::parse(["--epochs", "3", "--lr=0.01", "--quiet", "--data", "x"]).unwrap();
        assert_eq!(args.get::<usize>("epochs").unwrap(), Some(3));
        assert_eq!(args.get_or::<f64>("lr", 1.0).unwrap(), 0.01);
        assert!(args.flag("quiet").unwrap());
        assert!(!args.flag("verbose").unwrap());
        assert_eq!(args.get_or("data", String::new()).unwrap(), "x");
        args.finish().unwrap();
    }

    #[test]
    fn rejects_bad_flags() {
        assert!(Args::parse(["epochs"]).is_err());
        assert!(Args::parse(["--a", "1", "--a", "2"]).is_err());
        let mut args = Args::parse(["--epochs", "x", "--what"]).unwrap();
        assert!(args.get::<usize>("epochs").is_err());
        assert_eq!(
            args.finish().unwrap_err().to_string(),
            "unknown flag --what".to_string()
        );
    }

    #[test]
    fn backend_names() {
        assert_eq!("ruda".parse::<BackendChoice>(), Ok(BackendChoice::Ruda));
        assert_eq!(
            "burn-wgpu".parse::<BackendChoice>(),
            Ok(BackendChoice::BurnWgpu)
        );
        assert_eq!(
            "burn-cuda".parse::<BackendChoice>(),
            Ok(BackendChoice::BurnCuda)
        );
        assert!("tch".parse::<BackendChoice>().is_err());
    }
}
