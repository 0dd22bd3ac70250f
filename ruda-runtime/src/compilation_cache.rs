//! Compiled kernels kept on disk between processes: CubeCL's compilation cache, turned on by the
//! ruda runtimes and keyed by the driver fingerprint.
//!
//! CubeCL 0.10 can keep what NVRTC compiles (a kernel's PTX, entry point and shared-memory size)
//! in a cache (`[compilation] cache` in `cubecl.toml`), but the cache is off by default and its
//! directory is named after the runtime alone (`cuda`), while its entries are keyed on the kernel
//! alone: PTX compiled for one GPU architecture or by one NVRTC would be loaded on another. The
//! ruda runtimes turn it on for each device they open, in a directory named after the device's
//! fingerprint (the one the autotune caches are keyed on, see [`crate::autotune`]):
//!
//! ```text
//! <root>/compilation/ruda-fp<hash>/cuda/<cubecl version>/ptx/{toc.json.log, chunk0.cbor}
//! ```
//!
//! `<root>` is the autotune cache root (`RUDA_AUTOTUNE_DIR`, else `cubecl.toml`'s `[autotune]
//! cache`, the project's `target/` by default); when `cubecl.toml` names a `[compilation] cache`,
//! that root is used instead (`<that root>/ruda-fp<hash>/cuda/...`). `RUDA_COMPILATION_CACHE=off`
//! turns it off; without a fingerprint (unknown driver, or `RUDA_AUTOTUNE_FINGERPRINT=none`)
//! nothing is cached on disk either.
//!
//! CubeCL reads its configuration when a device's server is created, once per device and
//! process, so [`load_client`] installs the device's directory in CubeCL's configuration just
//! for that creation. A server created earlier by a plain CubeCL client for the same device
//! (Burn's own `Cuda`) keeps the configuration it was created with.
//!
//! On wgpu, CubeCL 0.10 caches compiled kernels only on its SPIR-V path, which this build does
//! not use (it compiles WGSL, see `RudaWgpu`); there the driver's own shader cache (Mesa's disk
//! cache, say) is what persists.
//!
//! The CUDA driver then compiles the PTX to machine code when a kernel is loaded, with a JIT
//! cache of its own; [`keep_driver_jit_cache`] moves that cache under the same root.
//!
//! **Damaged files.** CubeCL panics on a table of contents that names a missing chunk, and reads
//! a chunk as one stream of CBOR entries: an entry cut off by a crash would swallow the entries
//! that later processes append after it. Before a server opens a directory, [`repair`] ends a
//! cut-off table-of-contents line and cuts the chunk back to its last entry that parses and
//! holds well-formed PTX (ending in a NUL, defining its entry point); the kernels after that
//! point are compiled again, and a warning names the file.

use std::fs;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cubecl::client::ComputeClient;
use cubecl::config::{CubeClRuntimeConfig, RuntimeConfig, cache::CacheConfig};
use cubecl::device::{Device, DeviceId};

use crate::autotune::settings::{self, AutotuneSettings, settings};
use crate::fingerprint::{fingerprint_hash, fnv1a};

pub use crate::autotune::settings::ENV_COMPILATION_CACHE;

/// The subdirectory CubeCL's CUDA runtime writes its PTX cache to under the root it is given:
/// `cuda/<cubecl version>/ptx`.
pub const CUDA_PTX_SUBDIR: [&str; 3] = ["cuda", crate::version::CUBECL_VERSION, "ptx"];

/// The directory of the compiled kernels of devices whose fingerprint hashes to `hash`.
pub fn directory(hash: &str) -> PathBuf {
    let config = CubeClRuntimeConfig::get();
    let base = match &config.compilation.cache {
        Some(cache) => cache.root(),
        None => settings::cache_root().join("compilation"),
    };
    base.join(format!("ruda-fp{hash}"))
}

/// The directory a ruda runtime gives CubeCL for a device whose own fingerprint is
/// `fingerprint`, under this process's settings: `None` when `RUDA_COMPILATION_CACHE` is off or
/// there is no fingerprint. `RUDA_AUTOTUNE_FINGERPRINT` replaces the fingerprint, as for
/// autotuning.
pub fn directory_for(fingerprint: Option<&str>) -> Option<PathBuf> {
    cache_hash(settings(), fingerprint).map(|hash| directory(&hash))
}

/// The fingerprint hash that names the compilation cache under `settings`.
fn cache_hash(settings: &AutotuneSettings, fingerprint: Option<&str>) -> Option<String> {
    if !settings.compilation_cache {
        return None;
    }
    let (fingerprint, _) = settings.effective_fingerprint(|| fingerprint.map(String::from));
    fingerprint.as_deref().map(fingerprint_hash)
}

/// `CUDA_CACHE_PATH`: where the CUDA driver keeps the machine code it compiles from PTX.
pub const ENV_CUDA_DRIVER_CACHE: &str = "CUDA_CACHE_PATH";

/// The directory [`keep_driver_jit_cache`] points the CUDA driver's JIT cache to:
/// `<root>/compilation/cuda-driver` (one for every device: the driver keys its entries on the
/// PTX, the GPU and its own version).
pub fn driver_jit_cache_dir() -> PathBuf {
    settings::cache_root()
        .join("compilation")
        .join("cuda-driver")
}

/// Points the CUDA driver's JIT cache into the cache root ([`driver_jit_cache_dir`]), unless
/// `CUDA_CACHE_PATH` is set or `RUDA_COMPILATION_CACHE` is off, and returns the directory used
/// (`None`: left as it was).
///
/// The driver compiles each PTX module to machine code when it is loaded (about 5 s for the
/// 300 kernels of a transformer's first step on an H200) and keeps the result in its JIT cache,
/// `~/.nv/ComputeCache` by default. With this, the one cache directory holds everything a
/// warm start needs, and carrying it to another machine carries that too. The driver reads the
/// variable once, when it initializes: call this at the start of `main`, before any CUDA call.
///
/// # Safety
/// It sets an environment variable: no other thread may run yet (see
/// [`std::env::set_var`]).
pub unsafe fn keep_driver_jit_cache() -> Option<PathBuf> {
    if !settings().compilation_cache || std::env::var_os(ENV_CUDA_DRIVER_CACHE).is_some() {
        return None;
    }
    let dir = driver_jit_cache_dir();
    // SAFETY: the caller guarantees that no other thread runs.
    unsafe { std::env::set_var(ENV_CUDA_DRIVER_CACHE, &dir) };
    Some(dir)
}

/// The devices whose server a ruda runtime has created (or found) in this process.
static OPENED: Mutex<Vec<DeviceId>> = Mutex::new(Vec::new());

/// `ComputeClient::load(device)`, with the device's compilation cache directory in CubeCL's
/// configuration the first time the device is opened in this process (see the
/// [module docs](self)). `fingerprint` is asked only then.
pub(crate) fn load_client<R: cubecl::Runtime>(
    device: &R::Device,
    fingerprint: impl FnOnce() -> Option<String>,
) -> ComputeClient<R> {
    let id = device.to_id();
    if lock(&OPENED).contains(&id) {
        return ComputeClient::load(device);
    }
    // One first opening at a time, so that the configuration each server sees is its own.
    static OPENING: Mutex<()> = Mutex::new(());
    let _opening = lock(&OPENING);
    if lock(&OPENED).contains(&id) {
        return ComputeClient::load(device);
    }
    // A directory that cannot be written: a warning, and no compilation cache (CubeCL 0.10's
    // would panic on its first write).
    let dir = directory_for(fingerprint().as_deref()).filter(|dir| {
        match crate::autotune::cache_files_writable(dir) {
            Ok(()) => true,
            Err(why) => {
                crate::autotune::cache_files_warn(format!(
                    "compilation cache: {why}; kernels are compiled in memory for this run"
                ));
                false
            }
        }
    });
    let client = match dir {
        Some(dir) => {
            repair(&dir.join(CUDA_PTX_SUBDIR.iter().collect::<PathBuf>()));
            with_compilation_cache(dir, || ComputeClient::load(device))
        }
        None => ComputeClient::load(device),
    };
    lock(&OPENED).push(id);
    client
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `create` with `dir` as CubeCL's compilation cache root, then puts the configuration
/// back as it was.
fn with_compilation_cache<T>(dir: PathBuf, create: impl FnOnce() -> T) -> T {
    let storage = <CubeClRuntimeConfig as RuntimeConfig>::storage();
    // Loads the file and the CUBECL_* variables if nothing did yet.
    let previous: Arc<CubeClRuntimeConfig> = CubeClRuntimeConfig::get();
    let mut config = (*previous).clone();
    config.compilation.cache = Some(CacheConfig::File(dir));
    *storage.lock() = Some(Arc::new(config));
    // CubeCL takes the configuration lock itself while it creates the server: not held here.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(create));
    *storage.lock() = Some(previous);
    result.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// One entry of CubeCL's CUDA PTX chunk file, as `cubecl-cuda` 0.10 writes it (`Entry<u128,
/// PtxCacheEntry>`, CBOR); the fields are read only to check them.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct PtxEntry {
    /// The kernel's stable hash (CubeCL's `KernelId::stable_hash`).
    pub key: u128,
    /// What CubeCL keeps for it.
    pub value: PtxValue,
}

/// The value of a [`PtxEntry`].
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct PtxValue {
    /// The kernel's entry point in the PTX.
    pub entrypoint_name: String,
    /// Dynamic shared memory the kernel needs.
    pub shared_mem_bytes: usize,
    /// NUL-terminated PTX text.
    pub ptx: Vec<std::ffi::c_char>,
}

impl PtxValue {
    /// Whether the PTX is whole: NUL-terminated, and defining the entry point.
    fn is_well_formed(&self) -> bool {
        let Some((&0, text)) = self.ptx.split_last() else {
            return false;
        };
        let bytes: Vec<u8> = text.iter().map(|&c| c as u8).collect();
        let entry = format!(".entry {}", self.entrypoint_name);
        !self.entrypoint_name.is_empty()
            && bytes
                .windows(entry.len())
                .any(|window| window == entry.as_bytes())
    }
}

/// What [`repair`] found in a PTX cache directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// Entries read and found whole this time (those appended since the last check).
    pub checked: usize,
    /// Bytes cut from the end of the chunk (0: it was whole).
    pub bytes_dropped: u64,
}

/// Makes the PTX cache in `ptx_dir` (`.../cuda/<version>/ptx`) safe for CubeCL to open (see the
/// [module docs](self)): a cut-off last line of the table of contents is ended, and the chunk is
/// cut back to its last well-formed entry. Missing files are left missing.
///
/// CubeCL only appends to the chunk, so the length checked last time is remembered beside it
/// (`chunk0.cbor.checked`, with a hash of the file's first bytes to notice a replaced file) and
/// only what was appended since is read: a start with a warm cache reads nothing.
pub fn repair(ptx_dir: &Path) -> RepairReport {
    crate::autotune::repair_cache_file(&ptx_dir.join("toc.json.log"));
    let chunk = ptx_dir.join("chunk0.cbor");
    let Ok(data) = fs::read(&chunk) else {
        return RepairReport::default();
    };
    let stamp_path = ptx_dir.join("chunk0.cbor.checked");
    let checked = fs::read_to_string(&stamp_path)
        .ok()
        .and_then(|text| Stamp::parse(&text))
        .filter(|stamp| stamp.matches(&data))
        .map_or(0, |stamp| stamp.len);
    let mut cursor = Cursor::new(data.as_slice());
    cursor.set_position(checked as u64);
    let mut entries = 0;
    let mut good_end = checked as u64;
    while (cursor.position() as usize) < data.len() {
        match ciborium::de::from_reader::<PtxEntry, _>(&mut cursor) {
            Ok(entry) if entry.value.is_well_formed() => {
                entries += 1;
                good_end = cursor.position();
            }
            _ => break,
        }
    }
    let bytes_dropped = data.len() as u64 - good_end;
    if bytes_dropped > 0 {
        // A new file in place of the old, so that a process still appending to the old one
        // cannot interleave with what is kept.
        let tmp = chunk.with_extension(format!("cbor.repair{}", std::process::id()));
        let written =
            fs::write(&tmp, &data[..good_end as usize]).and_then(|()| fs::rename(&tmp, &chunk));
        match written {
            Ok(()) => log::warn!(
                "compilation cache {}: the {bytes_dropped} bytes after byte {good_end} are \
                 damaged (an interrupted write?); they are dropped and their kernels will be \
                 compiled again",
                chunk.display(),
            ),
            Err(err) => {
                fs::remove_file(&tmp).ok();
                log::warn!(
                    "compilation cache {}: damaged after byte {good_end}, and it cannot be \
                     rewritten ({err}); removing it",
                    chunk.display()
                );
                fs::remove_file(&chunk).ok();
                fs::remove_file(&stamp_path).ok();
                return RepairReport {
                    checked: 0,
                    bytes_dropped: data.len() as u64,
                };
            }
        }
    }
    let stamp = Stamp::of(&data[..good_end as usize]);
    if stamp.len != checked {
        fs::write(&stamp_path, stamp.to_string()).ok();
    }
    RepairReport {
        checked: entries,
        bytes_dropped,
    }
}

/// How much of a chunk was found whole, and a hash of its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    len: usize,
    head: u64,
}

impl Stamp {
    const HEAD: usize = 4096;

    fn of(data: &[u8]) -> Self {
        let head = &data[..data.len().min(Self::HEAD)];
        Self {
            len: data.len(),
            head: fnv1a(head),
        }
    }

    fn parse(text: &str) -> Option<Self> {
        let (len, head) = text.trim().split_once(' ')?;
        Some(Self {
            len: len.parse().ok()?,
            head: u64::from_str_radix(head, 16).ok()?,
        })
    }

    /// Whether `data` still starts with the bytes this stamp checked.
    fn matches(&self, data: &[u8]) -> bool {
        self.len <= data.len() && Self::of(&data[..self.len]).head == self.head
    }
}

impl core::fmt::Display for Stamp {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} {:016x}", self.len, self.head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(
        compilation_cache: bool,
        fingerprint_override: Option<Option<&str>>,
    ) -> AutotuneSettings {
        AutotuneSettings {
            enabled: true,
            tune_cpu_adapters: false,
            dir: None,
            fingerprint_override: fingerprint_override.map(|o| o.map(String::from)),
            compilation_cache,
        }
    }

    #[test]
    fn the_cache_is_named_by_the_fingerprint() {
        let on = settings(true, None);
        let a = cache_hash(
            &on,
            Some("runtime=cuda|device=NVIDIA H200|driver=580.159.04"),
        );
        let same = cache_hash(
            &on,
            Some("runtime=cuda|device=NVIDIA H200|driver=580.159.04"),
        );
        let other_driver = cache_hash(
            &on,
            Some("runtime=cuda|device=NVIDIA H200|driver=580.160.01"),
        );
        let other_model = cache_hash(
            &on,
            Some("runtime=cuda|device=NVIDIA H100|driver=580.159.04"),
        );
        assert!(a.is_some());
        assert_eq!(
            a, same,
            "two devices with one fingerprint share their compiled kernels"
        );
        assert_ne!(a, other_driver);
        assert_ne!(a, other_model);
        assert_ne!(other_driver, other_model);
    }

    #[test]
    fn off_switch_and_unknown_driver_keep_nothing_on_disk() {
        assert_eq!(cache_hash(&settings(false, None), Some("fp")), None);
        assert_eq!(cache_hash(&settings(true, None), None), None);
        assert_eq!(cache_hash(&settings(true, Some(None)), Some("fp")), None);
    }

    #[test]
    fn the_override_replaces_the_fingerprint_as_for_autotuning() {
        let pinned = settings(true, Some(Some("X")));
        assert_eq!(cache_hash(&pinned, Some("fp")), Some(fingerprint_hash("X")));
        assert_eq!(cache_hash(&pinned, None), Some(fingerprint_hash("X")));
    }
}
