//! The cache identity of a device: its driver fingerprint (or the override), the fingerprint's
//! hash, and the runtime name CubeCL's tuners put in their cache path.

use std::sync::{Arc, Mutex};

use cubecl::client::ComputeClient;

use super::settings::settings;
use crate::fingerprint::fingerprint_hash;

/// What autotune caches are keyed on for one device (one CubeCL server) in this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheIdentity {
    /// The fingerprint the caches are keyed on: the runtime's
    /// [`autotune_driver_fingerprint`](crate::Runtime::autotune_driver_fingerprint), or
    /// `RUDA_AUTOTUNE_FINGERPRINT` when set. `None`: the driver is unknown, nothing is reused.
    pub fingerprint: Option<String>,
    /// Whether `fingerprint` came from `RUDA_AUTOTUNE_FINGERPRINT`.
    pub overridden: bool,
    /// [`fingerprint_hash`] of the fingerprint (16 hex digits).
    pub hash: Option<String>,
    /// The name the runtime reports to CubeCL (`cubecl::Runtime::name`), which CubeCL's tuners
    /// (matmul, reduce, convolution, fused kernels) put in their cache directory
    /// `device-<type>-<index>-<name>`: `<base>-fp<hash>` with a fingerprint,
    /// `<base>-session<pid>x<nonce>` without one (see the README, "Autotuning").
    pub runtime_name: &'static str,
}

impl CacheIdentity {
    /// The directory name of ruda's own tuners' caches: `ruda-fp<hash>`; `None` without a
    /// fingerprint (ruda's tuners then keep their results in memory only).
    pub fn ruda_cache_id(&self) -> Option<String> {
        self.hash.as_ref().map(|hash| format!("ruda-fp{hash}"))
    }
}

/// The identity per server (keyed by the address of the server's `info()`, which is fixed for
/// the life of the process and shared by every runtime type that talks to that server).
static IDENTITIES: Mutex<Vec<(usize, Arc<CacheIdentity>)>> = Mutex::new(Vec::new());

/// The key of the CubeCL server behind `client`.
pub(crate) fn server_key<R: cubecl::Runtime>(client: &ComputeClient<R>) -> usize {
    client.info() as *const _ as *const u8 as usize
}

/// The identity recorded for `client`'s server, if a ruda runtime registered one.
pub(crate) fn lookup<R: cubecl::Runtime>(client: &ComputeClient<R>) -> Option<Arc<CacheIdentity>> {
    let key = server_key(client);
    let identities = IDENTITIES.lock().unwrap_or_else(|e| e.into_inner());
    identities
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, id)| id.clone())
}

/// The identity of `client`'s device, computed and recorded on first use: the fingerprint from
/// `R::autotune_driver_fingerprint` (or the override) and the runtime name `<base>-fp<hash>`.
///
/// A ruda runtime calls this from `cubecl::Runtime::name` (with `base` its CubeCL runtime's
/// name) so that CubeCL's tuners key their caches on the fingerprint; it is a lookup after the
/// first call.
pub fn cache_identity<R: crate::hooks::Runtime>(
    client: &ComputeClient<R>,
    base: &'static str,
) -> Arc<CacheIdentity> {
    if let Some(identity) = lookup(client) {
        return identity;
    }
    let (fingerprint, overridden) =
        settings().effective_fingerprint(|| R::autotune_driver_fingerprint(client));
    let hash = fingerprint.as_deref().map(fingerprint_hash);
    let runtime_name = match &hash {
        Some(hash) => intern(format!("{base}-fp{hash}")),
        None => intern(format!("{base}-{}", session_tag())),
    };
    let identity = Arc::new(CacheIdentity {
        fingerprint,
        overridden,
        hash,
        runtime_name,
    });
    let key = server_key(client);
    let mut identities = IDENTITIES.lock().unwrap_or_else(|e| e.into_inner());
    // Another thread may have won the race; keep the first so the name never changes.
    if let Some((_, existing)) = identities.iter().find(|(k, _)| *k == key) {
        return existing.clone();
    }
    identities.push((key, identity.clone()));
    drop(identities);
    if identity.hash.is_some() {
        repair_cubecl_caches(runtime_name);
    }
    identity
}

/// Repairs the caches CubeCL's tuners keep for `runtime_name` (every device directory
/// `device-<type>-<index>-<runtime_name>`), once per name and process; see
/// [`super::cache_files::repair`].
fn repair_cubecl_caches(runtime_name: &str) {
    let root = super::settings::cache_root();
    let version_dir = root.join("autotune").join(crate::version::CUBECL_VERSION);
    let suffix = super::cache_files::cache_dir(&root, &format!("-{runtime_name}"));
    let suffix = suffix.file_name().map(|s| s.to_string_lossy().into_owned());
    let (Some(suffix), Ok(entries)) = (suffix, std::fs::read_dir(&version_dir)) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("device-") && name.ends_with(&suffix) {
            for file in super::cache_files::files_in(&entry.path()) {
                super::cache_files::repair(&file);
            }
        }
    }
}

/// The identity of `client`'s device; for a runtime that records none (a plain CubeCL runtime,
/// or a ruda runtime whose `name` does not call [`cache_identity`]): the override if set, else
/// no fingerprint.
pub(crate) fn identity_or_default<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
) -> Arc<CacheIdentity> {
    // A ruda runtime records its identity when asked for its name.
    let name = R::name(client);
    if let Some(identity) = lookup(client) {
        return identity;
    }
    let fingerprint = settings().fingerprint_override.clone().flatten();
    let hash = fingerprint.as_deref().map(fingerprint_hash);
    Arc::new(CacheIdentity {
        overridden: settings().fingerprint_override.is_some(),
        fingerprint,
        hash,
        runtime_name: name,
    })
}

/// `session<pid>x<nonce>`: unique to this process, so that no earlier process's results are
/// ever read back.
fn session_tag() -> String {
    static TAG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TAG.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        format!("session{}x{:x}", std::process::id(), nanos & 0xffff_ffff)
    })
    .clone()
}

/// A `'static` copy of `name`, leaked at most once per distinct string.
fn intern(name: String) -> &'static str {
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(existing) = names.iter().find(|n| **n == name) {
        return existing;
    }
    let leaked: &'static str = Box::leak(name.into_boxed_str());
    names.push(leaked);
    leaked
}
