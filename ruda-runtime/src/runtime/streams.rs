//! Which CubeCL stream `RudaWgpu`'s clients submit to: one per device, shared by every thread,
//! instead of CubeCL's one per thread.
//!
//! CubeCL gives each thread a stream of its own, and burn-train's data loader makes each batch on
//! a worker thread that the training thread then uses. On wgpu, CubeCL 0.10's streams are queues
//! of tasks in front of the device's one queue, and memory moves between them unordered: a buffer
//! the training thread freed while its kernels were still queued is handed to a worker's next
//! upload, which reaches the device first and overwrites what the queued kernels read
//! (`tests/tests/backend/threads.rs` reproduces it on Burn's own `Wgpu` and on CubeCL's runtime
//! without fusion; on lavapipe the Learner's validation figures came out worse than the trained
//! model's: `docs/perf/training-step.md`, "The examples' end-to-end runs"). One stream per device
//! keeps every submission in program order; wgpu has one queue per device, so nothing that ran in
//! parallel before is serialized.
//!
//! `RudaCuda` keeps CubeCL's streams: there each stream is a CUDA stream, ordered by events; the
//! same test passes on an H200, and through burn-train's Learner with two loader workers a step
//! took 28.8 ms with per-thread streams and 28.7 ms with one shared stream
//! (`docs/perf/training-step.md`, History).
//!
//! `RUDA_STREAMS=per-thread` restores CubeCL's own behaviour on wgpu too.

use cubecl::client::ComputeClient;
use cubecl::stream_id::StreamId;

/// `RUDA_STREAMS`: `shared` (the default) or `per-thread` (CubeCL's own behaviour).
pub const ENV_STREAMS: &str = "RUDA_STREAMS";

/// The stream every `RudaWgpu` client of a device submits to.
pub const SHARED_STREAM: StreamId = StreamId { value: 0 };

/// Whether `RudaWgpu` clients share [`SHARED_STREAM`] (`RUDA_STREAMS`, read once).
///
/// # Panics
/// On a value other than `shared` or `per-thread`, naming the accepted ones.
pub fn shared() -> bool {
    static SHARED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SHARED.get_or_init(|| {
        parse(std::env::var(ENV_STREAMS).ok().as_deref()).unwrap_or_else(|e| panic!("{e}"))
    })
}

/// `RUDA_STREAMS`'s value: whether the streams are shared.
fn parse(value: Option<&str>) -> Result<bool, String> {
    match value.map(str::trim) {
        None | Some("" | "shared") => Ok(true),
        Some("per-thread") => Ok(false),
        Some(other) => Err(format!(
            "{ENV_STREAMS}={other:?}: expected `shared` or `per-thread`"
        )),
    }
}

/// Points `client` at [`SHARED_STREAM`] unless `RUDA_STREAMS=per-thread`.
pub(crate) fn share_stream<R: cubecl::Runtime>(client: &mut ComputeClient<R>) {
    if shared() {
        // SAFETY: the stream id only orders this client's work on the device's server, and every
        // ruda client of the device uses the same one (see the module docs).
        unsafe { client.set_stream(SHARED_STREAM) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_setting() {
        assert_eq!(parse(None), Ok(true));
        assert_eq!(parse(Some("shared")), Ok(true));
        assert_eq!(parse(Some(" per-thread ")), Ok(false));
        let error = parse(Some("many")).unwrap_err();
        assert!(
            error.contains("expected `shared` or `per-thread`"),
            "{error}"
        );
    }
}
