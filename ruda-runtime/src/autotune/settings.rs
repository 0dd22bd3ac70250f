//! The environment variables that steer autotuning, read once per process, and how
//! `RUDA_AUTOTUNE_DIR` is handed to CubeCL's configuration.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use cubecl::config::{CubeClRuntimeConfig, RuntimeConfig, cache::CacheConfig};

/// `RUDA_AUTOTUNE`: `off` (also `0`, `false`, `no`) turns ruda's own tuning off; `on` (also `1`,
/// `true`, `yes`) tunes on every device; unset (or `auto`), ruda tunes except on CPU adapters
/// (see [`AutotuneSettings::tune_cpu_adapters`]).
pub const ENV_AUTOTUNE: &str = "RUDA_AUTOTUNE";
/// `RUDA_AUTOTUNE_DIR`: the cache root, for ruda's tuners and CubeCL's alike.
pub const ENV_AUTOTUNE_DIR: &str = "RUDA_AUTOTUNE_DIR";
/// `RUDA_COMPILATION_CACHE`: `off` (also `0`, `false`, `no`) keeps compiled kernels in memory
/// only (see [`crate::compilation_cache`]).
pub const ENV_COMPILATION_CACHE: &str = "RUDA_COMPILATION_CACHE";
/// `RUDA_AUTOTUNE_FINGERPRINT`: replaces the driver fingerprint in the cache identity
/// (`none` for the unknown-driver case). For tests and for pinning a cache on purpose.
pub const ENV_AUTOTUNE_FINGERPRINT: &str = "RUDA_AUTOTUNE_FINGERPRINT";

/// The autotune settings of this process, from the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutotuneSettings {
    /// `false` when `RUDA_AUTOTUNE=off`: ruda's native ops run their documented default rule
    /// ([`crate::layer_norm::choose_variant`], [`crate::softmax::choose_variant`]) and never
    /// benchmark. CubeCL's own kernels are not affected (CubeCL 0.10 has no switch to turn its
    /// tuning off; `CUBECL_AUTOTUNE_LEVEL=minimal` makes it cheaper).
    pub enabled: bool,
    /// `true` when `RUDA_AUTOTUNE=on`: ruda tunes on CPU adapters too. Unset, it does not: on a
    /// CPU adapter (Mesa's lavapipe) every candidate is one more shader for LLVM to compile, a
    /// first step spent minutes tuning, and the default rule's unit-per-row kernels are what
    /// the tuner picks there anyway.
    pub tune_cpu_adapters: bool,
    /// `RUDA_AUTOTUNE_DIR`, when set: the root of every autotune cache.
    pub dir: Option<PathBuf>,
    /// `RUDA_AUTOTUNE_FINGERPRINT`, when set: `Some(None)` for `none`, else the string that
    /// replaces the driver fingerprint.
    pub fingerprint_override: Option<Option<String>>,
    /// `false` when `RUDA_COMPILATION_CACHE=off`: compiled kernels are not kept on disk (see
    /// [`crate::compilation_cache`]).
    pub compilation_cache: bool,
}

impl AutotuneSettings {
    /// Reads the variables (no caching; see [`settings`]).
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// The settings for the variables' values as `var` gives them (`None`: unset).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let var = |name| var(name).filter(|v: &String| !v.trim().is_empty());
        let off = |name| crate::env::is_off(var(name).as_deref(), &[]);
        let enabled = !off(ENV_AUTOTUNE);
        let tune_cpu_adapters = matches!(
            var(ENV_AUTOTUNE)
                .map(|v| v.trim().to_ascii_lowercase())
                .as_deref(),
            Some("on" | "1" | "true" | "yes")
        );
        let compilation_cache = !off(ENV_COMPILATION_CACHE);
        let dir = var(ENV_AUTOTUNE_DIR).map(PathBuf::from);
        let fingerprint_override = var(ENV_AUTOTUNE_FINGERPRINT).map(|v| {
            if v.trim().eq_ignore_ascii_case("none") {
                None
            } else {
                Some(v)
            }
        });
        Self {
            enabled,
            tune_cpu_adapters,
            dir,
            fingerprint_override,
            compilation_cache,
        }
    }
}

impl AutotuneSettings {
    /// The fingerprint caches are keyed on: `RUDA_AUTOTUNE_FINGERPRINT` when set (`none`: no
    /// fingerprint), else the driver's (`computed`, only called then); and whether it was
    /// overridden.
    pub fn effective_fingerprint(
        &self,
        computed: impl FnOnce() -> Option<String>,
    ) -> (Option<String>, bool) {
        match &self.fingerprint_override {
            Some(fp) => (fp.clone(), true),
            None => (computed(), false),
        }
    }
}

/// The CubeCL servers (by the address of their `info()`, as [`super::identity`] keys them) of
/// CPU adapters: recorded by the runtime that opens them ([`crate::RudaWgpu`] for
/// `WgpuDevice::Cpu`).
static CPU_ADAPTERS: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

/// Records that `client`'s device is a CPU adapter.
pub(crate) fn mark_cpu_adapter<R: cubecl::Runtime>(client: &cubecl::client::ComputeClient<R>) {
    let key = super::identity::server_key(client);
    let mut cpus = CPU_ADAPTERS.lock().unwrap_or_else(|e| e.into_inner());
    if !cpus.contains(&key) {
        cpus.push(key);
    }
}

/// Whether ruda's tuners run on `client`'s device under this process's settings: not with
/// `RUDA_AUTOTUNE=off`, and on a CPU adapter only with `RUDA_AUTOTUNE=on`.
pub fn tunes<R: cubecl::Runtime>(client: &cubecl::client::ComputeClient<R>) -> bool {
    let settings = settings();
    if !settings.enabled {
        return false;
    }
    let key = super::identity::server_key(client);
    settings.tune_cpu_adapters
        || !CPU_ADAPTERS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&key)
}

/// The settings of this process, read from the environment on first use.
pub fn settings() -> &'static AutotuneSettings {
    static SETTINGS: OnceLock<AutotuneSettings> = OnceLock::new();
    SETTINGS.get_or_init(AutotuneSettings::from_env)
}

/// The root under which every autotune cache of this process lives: `RUDA_AUTOTUNE_DIR` when
/// set, else CubeCL's configured root (`cubecl.toml`, `[autotune] cache`; the project's
/// `target` directory by default). Files are at
/// `<root>/autotune/<cubecl version>/<cache id>/<tuner>.json.log`.
pub fn cache_root() -> PathBuf {
    apply_to_cubecl();
    CubeClRuntimeConfig::get().autotune.cache.root()
}

/// Makes CubeCL's configuration use `RUDA_AUTOTUNE_DIR` as its autotune cache root.
///
/// CubeCL reads its configuration once, when the first client is created (or on the first
/// [`RuntimeConfig::get`]); the ruda runtimes call this before creating a client. When the
/// configuration was already loaded with another root (a plain CubeCL client was created first,
/// or the application set it), the directory cannot be applied to CubeCL's kernels nor to
/// ruda's tuners (both go through CubeCL's cache), and this panics rather than silently writing
/// elsewhere. Without `RUDA_AUTOTUNE_DIR` nothing is changed.
///
/// # Panics
/// As described, on the first and every later call.
pub fn apply_to_cubecl() {
    static APPLIED: OnceLock<Result<(), String>> = OnceLock::new();
    let result = APPLIED.get_or_init(|| {
        let Some(dir) = settings().dir.clone() else {
            return Ok(());
        };
        let storage = <CubeClRuntimeConfig as RuntimeConfig>::storage();
        // Load the file and CUBECL_* variables first, without holding the lock.
        let mut config = CubeClRuntimeConfig::from_current_dir().override_from_env();
        config.autotune.cache = CacheConfig::File(dir.clone());
        let mut state = storage.lock();
        match state.as_ref() {
            None => {
                *state = Some(Arc::new(config));
                Ok(())
            }
            Some(current) if current.autotune.cache.root() == dir => Ok(()),
            Some(current) => Err(format!(
                "{ENV_AUTOTUNE_DIR}={} cannot be applied: CubeCL's configuration was already \
                 loaded with the autotune cache root {} before the first ruda client was created. \
                 Create a ruda client first, or set the root in cubecl.toml ([autotune] cache = \
                 {{ file = \"...\" }}) instead.",
                dir.display(),
                current.autotune.cache.root().display()
            )),
        }
    });
    if let Err(message) = result {
        panic!("{message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The variables' values as a map, never the process's environment (which the other
    /// tests of the binary read).
    fn from(pairs: &[(&str, &str)]) -> AutotuneSettings {
        AutotuneSettings::from_vars(|name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn parses_the_variables() {
        let s = from(&[
            (ENV_AUTOTUNE, "OFF"),
            (ENV_AUTOTUNE_DIR, "/tmp/x"),
            (ENV_AUTOTUNE_FINGERPRINT, "None"),
            (ENV_COMPILATION_CACHE, "off"),
        ]);
        assert!(!s.enabled);
        assert!(!s.compilation_cache);
        assert_eq!(s.dir, Some(PathBuf::from("/tmp/x")));
        assert_eq!(s.fingerprint_override, Some(None));
        let s = from(&[(ENV_AUTOTUNE, "on"), (ENV_AUTOTUNE_FINGERPRINT, "driver=1")]);
        assert!(s.enabled);
        assert!(s.compilation_cache);
        assert_eq!(s.dir, None);
        assert_eq!(s.fingerprint_override, Some(Some("driver=1".into())));
        assert_eq!(from(&[(ENV_AUTOTUNE_DIR, "  ")]).dir, None);
        let auto = from(&[]);
        assert!(auto.enabled && !auto.tune_cpu_adapters);
    }
}
