//! Waiting on the host for a device's work, with the wait on CubeCL's device thread.
//!
//! `ComputeClient::sync` (cubecl-runtime 0.10) asks the device thread for a fence, parks the
//! calling thread until the answer arrives (`oneshot`), then waits for the fence on the calling
//! thread. Meanwhile the device thread has nothing queued: after a short spin it yields, then
//! sleeps in 150 us steps (cubecl-common 0.10, `device/handle/channel.rs`). The next call's
//! launches then wait for the end of that sleep, so a loop of synchronized calls whose kernels
//! run longer than the spin pays up to 200 us a call (H200: 16384x8192 f16 LayerNorm forward,
//! 373 us synchronized against 169 us between two syncs on the device thread;
//! `docs/perf/host-launch.md`).
//!
//! [`sync`] waits on the device thread instead, as CubeCL's own profiler does
//! (`start_profile` blocks there on the same fence), so that thread wakes with the device and
//! takes the next launch at once; and the caller waits for it on an atomic flag, spinning
//! first, instead of parking, which costs a futex wake-up per call. Same guarantee as
//! `ComputeClient::sync`: every task the calling thread queued on the device, on its stream,
//! has completed.

use core::hint::spin_loop;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cubecl::device::Device;
use cubecl::device_handle::DeviceHandle;
use cubecl::server::{ComputeServer, ServerError};
use cubecl::stream_id::StreamId;

/// How long the caller spins on the flag before yielding its core between checks: a
/// LayerNorm-sized call ends well within it.
const SPIN: Duration = Duration::from_micros(50);
/// How long the caller yields between checks before sleeping between them: a long wait (a
/// training step's read-back) should not keep a core busy.
const YIELD: Duration = Duration::from_millis(2);
/// The caller's sleep between checks after [`YIELD`].
const SLEEP_STEP: Duration = Duration::from_micros(20);

/// The answer of the device thread.
#[derive(Default)]
struct Answer {
    done: AtomicBool,
    result: Mutex<Option<Result<(), ServerError>>>,
}

/// The device thread's end of an [`Answer`]. Dropping it raises the flag, with or without a
/// result: if the task panics, or is dropped without running (the device thread is gone), the
/// caller gets an error instead of waiting forever.
struct Reply(Arc<Answer>);

impl Reply {
    fn send(self, result: Result<(), ServerError>) {
        *self.0.result.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        self.0.done.store(true, Ordering::Release);
    }
}

/// Blocks until every operation the calling thread queued on `device` has completed, like
/// `ComputeClient::sync`, with the wait on CubeCL's device thread (module documentation).
///
/// # Errors
/// The device's error, as `ComputeClient::sync` returns it (a failed launch, a lost device).
pub fn sync<R: cubecl::Runtime>(device: &R::Device) -> Result<(), ServerError> {
    // Opens the device's server if nothing has yet.
    drop(R::client(device));
    let handle = DeviceHandle::<R::Server>::new(device.to_id());
    let stream = StreamId::current();
    let answer = Arc::new(Answer::default());
    let reply = Reply(answer.clone());
    handle.submit(move |server| reply.send(cubecl::future::block_on(server.sync(stream))));
    handle.flush_queue();
    wait_for(&answer.done);
    let result = answer
        .result
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    result.unwrap_or_else(|| {
        Err(ServerError::Generic {
            reason: "ruda sync: CubeCL's device thread dropped the wait without an answer (it \
                     panicked or has shut down)"
                .into(),
            backtrace: cubecl::backtrace::BackTrace::capture(),
        })
    })
}

/// Returns once `flag` is set: spins, then yields, then sleeps between checks.
fn wait_for(flag: &AtomicBool) {
    let start = Instant::now();
    let mut waited = Duration::ZERO;
    loop {
        // Reading the clock costs more than a check: once every 64 checks.
        for _ in 0..64 {
            if flag.load(Ordering::Acquire) {
                return;
            }
            if waited < SPIN {
                spin_loop();
            } else if waited < YIELD {
                std::thread::yield_now();
            } else {
                std::thread::sleep(SLEEP_STEP);
            }
        }
        waited = start.elapsed();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_dropped_without_a_result_still_raises_the_flag() {
        let answer = Arc::new(Answer::default());
        drop(Reply(answer.clone()));
        wait_for(&answer.done);
        assert!(answer.result.lock().unwrap().is_none());

        let answer = Arc::new(Answer::default());
        Reply(answer.clone()).send(Ok(()));
        wait_for(&answer.done);
        assert!(matches!(*answer.result.lock().unwrap(), Some(Ok(()))));
    }

    #[test]
    fn wait_returns_at_once_when_the_flag_is_set() {
        let flag = AtomicBool::new(true);
        wait_for(&flag);
    }

    #[test]
    fn wait_returns_once_another_thread_sets_the_flag_after_each_backoff_stage() {
        // Set within the spin, within the yields, and after the caller has begun sleeping.
        for delay in [Duration::ZERO, Duration::from_micros(500), YIELD * 3] {
            let flag = Arc::new(AtomicBool::new(false));
            let setter = {
                let flag = flag.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(delay);
                    flag.store(true, Ordering::Release);
                })
            };
            let start = Instant::now();
            wait_for(&flag);
            assert!(flag.load(Ordering::Acquire));
            assert!(start.elapsed() >= delay.saturating_sub(Duration::from_micros(100)));
            setter.join().unwrap();
        }
    }
}
