//! How many times each native kernel ran in this process: for tests that prove a native path
//! ran (feature `counters`, which the project's test crates enable; without it nothing is
//! counted and this module has no readers).
//!
//! A kernel is counted when it launches: under the `fusion` feature that is when burn-fusion
//! executes the stream, so read the counts after reading a result or after `Backend::sync`.

/// The native kernels that are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// LayerNorm forward.
    LayerNormForward,
    /// LayerNorm backward.
    LayerNormBackward,
    /// Softmax or log-softmax forward.
    SoftmaxForward,
    /// Softmax or log-softmax backward.
    SoftmaxBackward,
    /// A native matrix product.
    Matmul,
    /// The embedding table's gradient.
    EmbeddingBackward,
    /// A linear layer's backward as one operation (its products are counted as `Matmul` too).
    LinearBackward,
    /// One launch of the Adam kernel: the updates of one or more parameters.
    Adam,
    /// One operation of Adam updates: every parameter of an optimizer step on one device, up to
    /// a size (its launches are counted as `Adam` too).
    AdamOperation,
    /// GELU forward.
    GeluForward,
    /// GELU backward.
    GeluBackward,
}

#[cfg(feature = "counters")]
mod imp {
    use super::Kernel;
    use core::sync::atomic::{AtomicUsize, Ordering};

    // One counter a kernel; Relaxed: a count is read on its own, after a sync that orders it.
    static COUNTS: [AtomicUsize; 11] = [const { AtomicUsize::new(0) }; 11];

    pub(crate) fn record(kernel: Kernel) {
        COUNTS[kernel as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Launches of `kernel` in this process so far.
    pub fn launches(kernel: Kernel) -> usize {
        COUNTS[kernel as usize].load(Ordering::Relaxed)
    }
}

#[cfg(not(feature = "counters"))]
mod imp {
    use super::Kernel;

    #[inline(always)]
    pub(crate) fn record(_kernel: Kernel) {}
}

#[cfg(feature = "counters")]
pub use imp::launches;
pub(crate) use imp::record;
