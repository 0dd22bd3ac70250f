//! What burn-ruda's training examples share: the `--backend` / `--device` / `--devices` flags and
//! the Burn backend they choose ([`cli`], [`backend`]), burn-train's multi-device strategy
//! ([`multi_device`]), a line renderer for burn-train's `Learner` that keeps what it shows
//! ([`training_log`]), and step outputs read back on the training thread ([`read_ahead`]), by
//! default when the loop asks for its next batch ([`deferred_read`]), the CPU time of each stage
//! of a host-bound step ([`thread_cpu`]) and where it goes ([`thread_sampler`]), and
//! burn-train's application log with a filter that costs nothing below its levels ([`app_log`]).

pub mod app_log;
pub mod backend;
pub mod cli;
pub mod deferred_read;
pub mod multi_device;
pub mod read_ahead;
pub mod thread_cpu;
pub mod thread_sampler;
pub mod training_log;

/// A directory for an example's artifacts (metric logs, the saved model) when none is given:
/// `burn-ruda-examples/<name>` in the system's temporary directory.
pub fn default_artifact_dir(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join("burn-ruda-examples").join(name)
}

/// What an example's `main` does first, before any thread starts: marks the start for the
/// time-to-first-step figure and sets the driver environment ([`ruda_runtime::process::prepare`]:
/// the CUDA driver's JIT cache under the cache root, Mesa's device-select layer off on machines
/// without a desktop session).
///
/// # Safety
/// It sets environment variables: call it first thing in `main`, before any other thread exists.
pub unsafe fn start_process() {
    training_log::mark_process_start();
    // SAFETY: the caller guarantees that no other thread runs.
    unsafe { ruda_runtime::process::prepare() };
}
