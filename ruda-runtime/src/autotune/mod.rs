//! Persistent autotuning keyed by the driver fingerprint.
//!
//! - Ruda's native ops tune their launch shapes with CubeCL's tuner (`LocalTuner`,
//!   `TunableSet`): each op's `tune/` module has its key, candidates and sets (LayerNorm:
//!   [`crate::layer_norm::tune`], one tuner per pass; softmax: [`crate::softmax::tune`]), and
//!   runs them through [`tuner`], which this module shares between them.
//! - The cache identity of a device is its driver fingerprint
//!   ([`Runtime::autotune_driver_fingerprint`](crate::Runtime::autotune_driver_fingerprint)),
//!   hashed: ruda's caches live in `ruda-fp<hash>/`, and the ruda runtimes report
//!   `<name>-fp<hash>` as their CubeCL runtime name, which CubeCL's own tuners (matmul,
//!   reduce, convolution, fused kernels) put in their cache directory
//!   `device-<type>-<index>-<name>-fp<hash>/`. Another driver or GPU gets fresh caches; the old
//!   ones stay for when it comes back.
//! - Without a fingerprint ruda's tuners keep their results in memory only, and the runtime
//!   name carries a per-process tag so that CubeCL's tuners never read another process's
//!   results; the directories CubeCL writes under that name are removed when the process
//!   exits ([`identity::sessions`]).
//! - A cache directory that cannot be created or written is a warning ([`cache_warnings`]),
//!   and the run goes on without that cache.
//! - Settings: [`settings::ENV_AUTOTUNE_DIR`], [`settings::ENV_AUTOTUNE`],
//!   [`settings::ENV_AUTOTUNE_FINGERPRINT`].
//!
//! [`autotune_report`] says, for a client, where the caches are, which fingerprint they are
//! keyed on, and which candidate was chosen per key.

mod cache_files;
pub mod identity;
pub mod row_key;
pub mod settings;
pub mod tuner;

use std::path::PathBuf;

use cubecl::{client::ComputeClient, device::Device};

pub(crate) use cache_files::repair as repair_cache_file;
pub use cache_files::warnings as cache_warnings;
pub(crate) use cache_files::{warn as cache_files_warn, writable as cache_files_writable};
pub use identity::{CacheIdentity, cache_identity};
pub use settings::{AutotuneSettings, settings};
pub use tuner::{AutotuneStats, ChosenVariant, IN_PROCESS_ID, chosen_variants, stats};

/// The tuning results stored so far under the cache root ([`settings::cache_root`]), by ruda's
/// tuners and CubeCL's, for every device: sample it before and during a first step to count
/// the kernel shapes tuned meanwhile (a progress report; it reads every cache file).
pub fn stored_results() -> usize {
    cache_files::stored_entries(&settings::cache_root())
}

/// Where the autotune caches of one device are and what they hold, for printing.
#[derive(Clone, Debug)]
pub struct AutotuneReport {
    /// The settings of this process.
    pub settings: AutotuneSettings,
    /// The device's cache identity (fingerprint, hash, runtime name).
    pub identity: CacheIdentity,
    /// The cache root.
    pub root: PathBuf,
    /// Ruda's own tuners' cache files (one per tuner that has run on this fingerprint); empty
    /// without a fingerprint.
    pub ruda_files: Vec<PathBuf>,
    /// The directory of CubeCL's tuners for this device.
    pub cubecl_dir: PathBuf,
    /// The cache files in `cubecl_dir` at the time of the report.
    pub cubecl_files: Vec<PathBuf>,
    /// The candidate chosen per tuner and key on this device, in this process.
    pub chosen: Vec<ChosenVariant>,
    /// Tuning counters of this process.
    pub stats: AutotuneStats,
    /// The cache problems of this process ([`cache_warnings`]).
    pub warnings: Vec<String>,
}

/// Collects the [`AutotuneReport`] of `client`'s device (`device` names CubeCL's directory).
///
/// Call it after the work whose choices should be listed; `Display` prints it as a few lines.
pub fn autotune_report<R: crate::hooks::Runtime>(
    client: &ComputeClient<R>,
    device: &R::Device,
) -> AutotuneReport {
    // For a ruda runtime, `name` records the identity of the device.
    let name = <R as cubecl::Runtime>::name(client);
    let identity = (*identity::identity_or_default(client)).clone();
    let root = settings::cache_root();
    let ruda_files = match identity.ruda_cache_id() {
        Some(id) => cache_files::files_in(&cache_files::cache_dir(&root, &id)),
        None => Vec::new(),
    };
    let id = device.to_id();
    let cubecl_dir = cache_files::cache_dir(
        &root,
        &format!("device-{}-{}-{name}", id.type_id, id.index_id),
    );
    let cubecl_files = cache_files::files_in(&cubecl_dir);
    let cache_id = identity
        .ruda_cache_id()
        .unwrap_or_else(|| IN_PROCESS_ID.into());
    let chosen = chosen_variants()
        .into_iter()
        .filter(|c| c.cache_id == cache_id)
        .collect();
    AutotuneReport {
        settings: settings().clone(),
        identity,
        root,
        ruda_files,
        cubecl_dir,
        cubecl_files,
        chosen,
        stats: stats(),
        warnings: cache_warnings(),
    }
}

impl core::fmt::Display for AutotuneReport {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let on = match (self.settings.enabled, self.settings.tune_cpu_adapters) {
            (false, _) => "off (RUDA_AUTOTUNE)",
            (true, true) => "on, CPU adapters too (RUDA_AUTOTUNE=on)",
            (true, false) => "on, except on CPU adapters",
        };
        writeln!(f, "autotune: {on}, root {}", self.root.display())?;
        match (&self.identity.fingerprint, &self.identity.hash) {
            (Some(fp), Some(hash)) => {
                let from = if self.identity.overridden {
                    " (RUDA_AUTOTUNE_FINGERPRINT)"
                } else {
                    ""
                };
                writeln!(f, "  fingerprint hash {hash}{from}: {fp}")?;
            }
            _ => writeln!(
                f,
                "  no fingerprint: ruda's results kept in memory only; CubeCL's under a \
                 per-process name"
            )?,
        }
        writeln!(
            f,
            "  runtime name (CubeCL cache id): {}",
            self.identity.runtime_name
        )?;
        for file in &self.ruda_files {
            writeln!(f, "  ruda cache: {}", file.display())?;
        }
        writeln!(
            f,
            "  CubeCL caches: {} ({} files)",
            self.cubecl_dir.display(),
            self.cubecl_files.len()
        )?;
        for file in &self.cubecl_files {
            writeln!(f, "    {}", file.display())?;
        }
        for c in &self.chosen {
            writeln!(f, "  {} [{}] -> {}", c.tuner, c.key, c.candidate)?;
        }
        for warning in &self.warnings {
            writeln!(f, "  warning: {warning}")?;
        }
        write!(
            f,
            "  this process: {} tuning passes, {} benchmark runs, {:.1} s tuning",
            self.stats.tuning_passes,
            self.stats.benchmark_runs,
            self.stats.tuning_micros as f64 * 1e-6
        )
    }
}
