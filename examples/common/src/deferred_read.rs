//! Reads of step outputs deferred to the moment the training loop asks for its next batch, and
//! the training thread's time per step split into its phases.
//!
//! burn-train's single-device loop runs, per batch: `next()` on the loader, `TrainStep::step`
//! (forward and backward), the optimizer step, and the hand-over of the step's output to the
//! metrics thread. A read that waits inside `TrainStep::step` leaves the device idle while the
//! training thread then queues the optimizer step, whose many small operations cost the host far
//! more than the device. Queued here and run by [`ReadsAtNextBatch`]'s `next()`, the same read
//! waits after the optimizer step was queued, so the device runs the backward pass while the host
//! queues the optimizer, as in a training loop that syncs once a step. burn-fusion still drains
//! the training stream at the same point of every step (now after the optimizer), so no new
//! kernels appear (see [`crate::read_ahead`]).
//!
//! The queue is the training thread's own: reads are deferred only on a thread that is iterating
//! a [`ReadsAtNextBatch`] loader, and that loader runs them before every batch and when its
//! iterator ends or is dropped, so every deferred read is run before the loop can wait on the
//! metrics thread. Elsewhere (validation, the worker threads of burn-train's multi-device
//! strategy) reads start where the step returns, as before.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use burn::data::dataloader::{DataLoader, DataLoaderIterator, Progress};
use burn::prelude::Backend;

/// A read to run on the training thread.
pub(crate) type DeferredRead = Box<dyn FnOnce()>;

#[derive(Default)]
struct Queue {
    /// Iterators of [`ReadsAtNextBatch`] loaders alive on this thread.
    iterators: usize,
    pending: Vec<DeferredRead>,
    /// Time this thread waited for reads since the last batch.
    read_wait: Duration,
}

thread_local! {
    static QUEUE: RefCell<Queue> = RefCell::new(Queue::default());
}

/// Queues `read` to run when this thread's training loop asks for its next batch; gives it back
/// when no [`ReadsAtNextBatch`] iterator is alive on this thread.
pub(crate) fn defer(read: DeferredRead) -> Result<(), DeferredRead> {
    QUEUE.with_borrow_mut(|queue| {
        if queue.iterators == 0 {
            return Err(read);
        }
        queue.pending.push(read);
        Ok(())
    })
}

/// Counts `wait` into this thread's read time of the current step.
pub(crate) fn count_read_wait(wait: Duration) {
    QUEUE.with_borrow_mut(|queue| queue.read_wait += wait);
}

/// Runs this thread's deferred reads, in the order they were queued (each counts its own wait).
fn run_pending() {
    // Taken out first: the queue stays usable while they run.
    let reads = QUEUE.with_borrow_mut(|queue| std::mem::take(&mut queue.pending));
    for read in reads {
        read();
    }
}

fn take_read_wait() -> Duration {
    QUEUE.with_borrow_mut(|queue| std::mem::take(&mut queue.read_wait))
}

/// One training step as the training thread spent it, from one batch handed out to the next (or
/// to the loader's end).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepPhases {
    /// The whole step.
    pub total: Duration,
    /// Waiting for the step's outputs to be read back (inside the step, or deferred).
    pub reads: Duration,
    /// Waiting for the loader's next batch.
    pub batch: Duration,
}

impl StepPhases {
    /// What is neither reading nor waiting for data: queueing the forward, backward and optimizer
    /// work, and burn-train's own bookkeeping.
    pub fn rest(&self) -> Duration {
        self.total.saturating_sub(self.reads + self.batch)
    }
}

/// The phases of the steps of the last epoch that a [`ReadsAtNextBatch`] iterator finished,
/// process-wide (the examples print them after training).
static LAST_EPOCH: Mutex<Vec<StepPhases>> = Mutex::new(Vec::new());

/// The steps of the last epoch a [`ReadsAtNextBatch`] iterator ran, in order.
pub fn last_epoch_phases() -> Vec<StepPhases> {
    LAST_EPOCH.lock().map(|p| p.clone()).unwrap_or_default()
}

/// A training data loader whose iterator runs the reads that steps deferred on its thread before
/// handing out the next batch (see the [module docs](self)).
///
/// [`DataLoader::slice`] gives the inner loader's slice, unwrapped: burn-train slices the loader
/// only for its multi-device strategy, whose loop hands several outputs to the metrics thread's
/// one-slot channel per step, and the metrics thread must not wait there for a read that only
/// the next batch would run.
pub struct ReadsAtNextBatch<B: Backend, O> {
    inner: Arc<dyn DataLoader<B, O>>,
}

impl<B: Backend, O> ReadsAtNextBatch<B, O> {
    /// `inner`, wrapped, as the `Arc<dyn DataLoader>` burn-train takes.
    pub fn wrap(inner: Arc<dyn DataLoader<B, O>>) -> Arc<dyn DataLoader<B, O>>
    where
        O: 'static,
    {
        Arc::new(Self { inner })
    }
}

impl<B: Backend, O: 'static> DataLoader<B, O> for ReadsAtNextBatch<B, O> {
    fn iter<'a>(&'a self) -> Box<dyn DataLoaderIterator<O> + 'a> {
        QUEUE.with_borrow_mut(|queue| queue.iterators += 1);
        Box::new(ReadsAtNextBatchIter {
            inner: self.inner.iter(),
            last_batch: None,
            phases: Vec::new(),
        })
    }

    fn num_items(&self) -> usize {
        self.inner.num_items()
    }

    fn to_device(&self, device: &B::Device) -> Arc<dyn DataLoader<B, O>> {
        Self::wrap(self.inner.to_device(device))
    }

    fn slice(&self, start: usize, end: usize) -> Arc<dyn DataLoader<B, O>> {
        self.inner.slice(start, end)
    }
}

struct ReadsAtNextBatchIter<'a, O> {
    inner: Box<dyn DataLoaderIterator<O> + 'a>,
    /// When the last batch was handed out.
    last_batch: Option<Instant>,
    phases: Vec<StepPhases>,
}

impl<O> Iterator for ReadsAtNextBatchIter<'_, O> {
    type Item = O;

    fn next(&mut self) -> Option<O> {
        run_pending();
        let loading = Instant::now();
        let batch = self.inner.next();
        let now = Instant::now();
        let reads = take_read_wait();
        if let Some(last) = self.last_batch {
            self.phases.push(StepPhases {
                total: now - last,
                reads,
                batch: now - loading,
            });
        }
        self.last_batch = Some(now);
        batch
    }
}

impl<O> DataLoaderIterator<O> for ReadsAtNextBatchIter<'_, O> {
    fn progress(&self) -> Progress {
        self.inner.progress()
    }
}

impl<O> Drop for ReadsAtNextBatchIter<'_, O> {
    fn drop(&mut self) {
        run_pending();
        take_read_wait();
        QUEUE.with_borrow_mut(|queue| queue.iterators -= 1);
        if !self.phases.is_empty()
            && let Ok(mut last) = LAST_EPOCH.lock()
        {
            *last = std::mem::take(&mut self.phases);
        }
    }
}

/// Medians of `phases` after the first tenth (compilation and tuning happen in the first steps),
/// in milliseconds: total, reads, batch, rest; `None` without steps.
pub fn median_phases_ms(phases: &[StepPhases]) -> Option<[f64; 4]> {
    let kept = &phases[phases.len() / 10..];
    if kept.is_empty() {
        return None;
    }
    let median = |f: &dyn Fn(&StepPhases) -> Duration| {
        let mut ms: Vec<f64> = kept.iter().map(|p| f(p).as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        ms[ms.len() / 2]
    };
    Some([
        median(&|p| p.total),
        median(&|p| p.reads),
        median(&|p| p.batch),
        median(&|p| p.rest()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    #[test]
    fn reads_are_deferred_only_while_a_loader_iterates_this_thread() {
        let ran = Rc::new(Cell::new(0));
        let read = {
            let ran = ran.clone();
            Box::new(move || ran.set(ran.get() + 1)) as DeferredRead
        };
        assert!(
            defer(read).is_err(),
            "no loader iterates: the read is given back"
        );

        QUEUE.with_borrow_mut(|queue| queue.iterators += 1);
        for _ in 0..2 {
            let ran = ran.clone();
            assert!(defer(Box::new(move || ran.set(ran.get() + 1))).is_ok());
        }
        assert_eq!(ran.get(), 0, "deferred reads wait for the next batch");
        run_pending();
        assert_eq!(ran.get(), 2);
        QUEUE.with_borrow_mut(|queue| queue.iterators -= 1);

        let other = std::thread::spawn(|| defer(Box::new(|| {})).is_err());
        assert!(
            other.join().unwrap(),
            "another thread's reads are not deferred"
        );
    }

    #[test]
    fn medians_leave_out_the_first_tenth() {
        let ms = |n: u64| Duration::from_millis(n);
        let mut phases = vec![
            StepPhases {
                total: ms(1000),
                reads: ms(0),
                batch: ms(0),
            };
            2
        ];
        phases.extend((0..18).map(|i| StepPhases {
            total: ms(30 + i % 3),
            reads: ms(5),
            batch: ms(1),
        }));
        let [total, reads, batch, rest] = median_phases_ms(&phases).unwrap();
        assert_eq!((total, reads, batch, rest), (31.0, 5.0, 1.0, 25.0));
        assert_eq!(median_phases_ms(&[]), None);
    }
}
