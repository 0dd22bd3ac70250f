//! burn-train's application log (`experiment.log` in the artifact directory), written with a
//! filter that tracing decides once per call site.
//!
//! burn-train's own installer (`FileApplicationLoggerInstaller`, what `SupervisedTraining` installs
//! unless told otherwise) filters with a closure, to drop wgpu's info lines. A closure tells
//! tracing nothing about which levels can pass, so no call site is ever switched off: every
//! `log` and `tracing` call of every crate, down to the trace-level ones that burn-fusion, CubeCL
//! and burn-ruda make for each operation, reaches the subscriber and asks the filter. Through
//! burn-train's `Learner` on an H100 that took the transformer's step from 17.8-19.5 ms to
//! 23.0-24.1 ms (docs/perf/training-step.md). [`StaticFileLogger`] writes the same file at the
//! same levels (info and above; wgpu's crates from warn) through a [`Targets`] filter, which
//! tracing evaluates once per call site and whose most verbose level (info) also caps the `log`
//! crate's: a call below it costs a load and a compare.
//!
//! `--app-log burn` in the examples installs burn-train's logger instead, to compare the two.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use burn::train::ApplicationLoggerInstaller;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::prelude::*;

/// Which installer writes the application log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum AppLog {
    /// [`StaticFileLogger`]: call sites below its levels cost nothing.
    #[default]
    Static,
    /// burn-train's `FileApplicationLoggerInstaller`, as `SupervisedTraining` installs it.
    Burn,
}

static BURNS: AtomicBool = AtomicBool::new(false);

/// Which installer [`installer`] returns from now on. Process-wide: the examples set it from a
/// flag before training.
pub fn set_app_log(choice: AppLog) {
    BURNS.store(choice == AppLog::Burn, Ordering::Relaxed);
}

/// The installer for `SupervisedTraining::with_application_logger`, writing to `path`.
pub fn installer(path: impl AsRef<Path>) -> Option<Box<dyn ApplicationLoggerInstaller>> {
    let path = path.as_ref();
    Some(if BURNS.load(Ordering::Relaxed) {
        Box::new(burn::train::FileApplicationLoggerInstaller::new(path))
    } else {
        Box::new(StaticFileLogger::new(path))
    })
}

/// Installs a global tracing subscriber that appends info-and-above lines to a file (wgpu's
/// crates: warn and above), and a panic hook that logs the panic there and names the file.
pub struct StaticFileLogger {
    path: PathBuf,
}

impl StaticFileLogger {
    /// A logger that will write to `path` (a file; its directory must exist when installed).
    pub fn new(path: impl AsRef<Path>) -> Self {
        Self {
            path: path.as_ref().to_path_buf(),
        }
    }

    /// The levels that reach the file, by target: the same as burn-train's installer.
    fn filter() -> Targets {
        Targets::new()
            .with_default(LevelFilter::INFO)
            .with_target("wgpu", LevelFilter::WARN)
    }
}

impl ApplicationLoggerInstaller for StaticFileLogger {
    fn install(&self) -> Result<(), String> {
        let (Some(dir), Some(file)) = (self.path.parent(), self.path.file_name()) else {
            return Err(format!(
                "the application log '{}' is not a file path",
                self.path.display()
            ));
        };
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let layer = tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_writer(tracing_appender::rolling::never(dir, file))
            .with_filter(Self::filter());
        tracing_subscriber::registry()
            .with(layer)
            .try_init()
            .map_err(|e| {
                format!(
                    "installing the application log '{}': {e}",
                    self.path.display()
                )
            })?;
        let previous = std::panic::take_hook();
        let path = self.path.clone();
        std::panic::set_hook(Box::new(move |info| {
            tracing::error!("PANIC => {info}");
            eprintln!("the application log is at '{}'", path.display());
            previous(info);
        }));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use tracing::Level;
    use tracing_subscriber::layer::Filter;

    use super::*;

    #[test]
    fn the_filter_is_static_and_caps_levels_at_info() {
        let filter = StaticFileLogger::filter();
        // A maximum level lets tracing (and `log`) switch off every more verbose call site.
        assert_eq!(
            Filter::<tracing_subscriber::Registry>::max_level_hint(&filter),
            Some(LevelFilter::INFO)
        );
        assert!(filter.would_enable("burn_train::learner", &Level::INFO));
        assert!(!filter.would_enable("burn_fusion::stream", &Level::DEBUG));
        assert!(!filter.would_enable("wgpu_core::device", &Level::INFO));
        assert!(filter.would_enable("wgpu_hal::vulkan", &Level::WARN));
    }
}
