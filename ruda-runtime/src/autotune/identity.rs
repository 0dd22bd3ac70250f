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
    /// `<base>-session<pid>x<nonce>` without one: a directory of this process only, removed
    /// when it exits ([`sessions`]).
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
/// ever read back. The first call also removes what earlier sessions left behind and arranges
/// for this one's directories to be removed at exit ([`sessions`]).
fn session_tag() -> String {
    static TAG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TAG.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let version_dir = super::settings::cache_root()
            .join("autotune")
            .join(crate::version::CUBECL_VERSION);
        sessions::start(version_dir);
        format!("session{}x{:x}", std::process::id(), nanos & 0xffff_ffff)
    })
    .clone()
}

/// The per-process directories CubeCL's tuners write for a device without a fingerprint
/// (`device-<type>-<index>-<base>-session<pid>x<nonce>`): nothing ever reads them again, so
/// they must not pile up, one a run. This process's are removed when it exits normally; those
/// of processes that no longer run (killed, crashed) are removed when the next session starts.
pub mod sessions {
    use std::path::{Path, PathBuf};
    use std::sync::OnceLock;

    /// The version directory this process's sessions live in.
    static ROOT: OnceLock<PathBuf> = OnceLock::new();

    /// The pid in a session directory's name (`...-session<pid>x<nonce>`).
    pub fn session_pid(name: &str) -> Option<u32> {
        let rest = &name[name.rfind("-session")? + "-session".len()..];
        rest.split('x').next()?.parse().ok()
    }

    /// Whether process `pid` still runs; `true` where that cannot be told (not Linux).
    fn alive(pid: u32) -> bool {
        if cfg!(target_os = "linux") {
            Path::new("/proc").join(pid.to_string()).exists()
        } else {
            true
        }
    }

    /// Removes the session directories under `version_dir` for which `remove(pid)` holds.
    fn remove_sessions(version_dir: &Path, remove: impl Fn(u32) -> bool) {
        let Ok(entries) = std::fs::read_dir(version_dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(pid) = session_pid(&name)
                && remove(pid)
                && let Err(err) = std::fs::remove_dir_all(entry.path())
            {
                log::warn!(
                    "autotune cache: cannot remove {}: {err}",
                    entry.path().display()
                );
            }
        }
    }

    /// Removes dead processes' sessions and registers this one's removal at exit.
    pub(super) fn start(version_dir: PathBuf) {
        remove_sessions(&version_dir, |pid| pid != std::process::id() && !alive(pid));
        if ROOT.set(version_dir).is_ok() {
            #[cfg(unix)]
            // SAFETY: `remove_at_exit` is an `extern "C" fn()` that catches every panic; it
            // runs once, when the process exits normally.
            unsafe {
                libc::atexit(remove_at_exit);
            }
        }
    }

    /// Removes this process's session directories (at exit).
    pub fn remove_own() {
        if let Some(root) = ROOT.get() {
            remove_sessions(root, |pid| pid == std::process::id());
        }
    }

    #[cfg(unix)]
    extern "C" fn remove_at_exit() {
        // A panic must not cross the C boundary.
        let _ = std::panic::catch_unwind(remove_own);
    }

    #[cfg(test)]
    mod tests {
        use super::session_pid;

        #[test]
        fn pids_of_session_names() {
            assert_eq!(
                session_pid("device-0-0-wgpu_wgsl_-session4242x1f2e"),
                Some(4242)
            );
            assert_eq!(session_pid("device-0-0-wgpu_wgsl_-fp0123"), None);
        }
    }
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
