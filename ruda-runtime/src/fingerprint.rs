//! Driver fingerprints: the identity of a loaded driver and device, for persistent autotuning.

use alloc::{string::String, vec::Vec};
use core::fmt;

/// An ordered list of `key=value` facts about a device and its driver.
///
/// Its [`Display`](fmt::Display) form is the string that
/// [`Runtime::autotune_driver_fingerprint`](crate::Runtime::autotune_driver_fingerprint)
/// returns: stable across processes, and different as soon as the driver, the device or the
/// runtime library (ruda-runtime or CubeCL) version changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DriverFingerprint {
    fields: Vec<(&'static str, String)>,
}

impl DriverFingerprint {
    /// A fingerprint for `runtime` (e.g. `cuda`), carrying the library versions.
    pub fn new(runtime: &str) -> Self {
        let mut fingerprint = Self::default();
        fingerprint.push("runtime", runtime);
        fingerprint.push("ruda-runtime", crate::version::RUDA_RUNTIME_VERSION);
        fingerprint.push("cubecl", crate::version::CUBECL_VERSION);
        fingerprint
    }

    /// Appends a fact; `|` and `=` inside the value are replaced so the string stays parseable.
    pub fn push(&mut self, key: &'static str, value: impl fmt::Display) {
        let value = alloc::format!("{value}").replace(['|', '='], "/");
        self.fields.push((key, value.trim().into()));
    }

    /// The value recorded under `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }
}

impl fmt::Display for DriverFingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (key, value)) in self.fields.iter().enumerate() {
            if i > 0 {
                f.write_str("|")?;
            }
            write!(f, "{key}={value}")?;
        }
        Ok(())
    }
}

/// A short stable hash (16 hex digits, FNV-1a 64) of a fingerprint string, for file names.
pub fn fingerprint_hash(fingerprint: &str) -> String {
    alloc::format!("{:016x}", fnv1a(fingerprint.as_bytes()))
}

/// FNV-1a, 64 bits.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Remembers which device each client serves.
///
/// A [`ComputeClient`](cubecl::client::ComputeClient) does not expose its device; its server
/// utilities live at a fixed address for the life of the process, so the address of
/// `client.info()` identifies the server, and the runtime's `client()` records the device there.
pub(crate) struct ClientRegistry<D> {
    entries: std::sync::Mutex<Vec<(usize, D, Option<String>)>>,
}

impl<D: Clone + PartialEq> ClientRegistry<D> {
    pub(crate) const fn new() -> Self {
        Self {
            entries: std::sync::Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn record(&self, key: usize, device: &D) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if !entries.iter().any(|(k, _, _)| *k == key) {
            entries.push((key, device.clone(), None));
        }
    }

    pub(crate) fn device(&self, key: usize) -> Option<D> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .iter()
            .find(|(k, _, _)| *k == key)
            .map(|(_, d, _)| d.clone())
    }

    /// The fingerprint of `device`, computed once per process.
    pub(crate) fn fingerprint_of(
        &self,
        device: &D,
        compute: impl FnOnce(&D) -> Option<String>,
    ) -> Option<String> {
        {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((_, _, Some(fp))) = entries
                .iter()
                .find(|(_, d, fp)| d == device && fp.is_some())
            {
                return Some(fp.clone());
            }
        }
        let fingerprint = compute(device)?;
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        for entry in entries.iter_mut().filter(|(_, d, _)| d == device) {
            entry.2 = Some(fingerprint.clone());
        }
        Some(fingerprint)
    }
}
