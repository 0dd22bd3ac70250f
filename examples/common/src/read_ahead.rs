//! Step outputs whose read-back starts on the training thread, for burn-train's `Learner`.
//!
//! burn-train hands every step's output to its metrics thread, and that thread reads the tensors
//! back (`ItemLazy::sync`: one `Transaction` of the logits, the loss and the targets). With a
//! fusion backend (ruda's, and Burn's own `Cuda` and `Wgpu`, all through burn-fusion) a read
//! first drains the queue of the stream that made the tensors: the training thread's, at
//! whatever point of the *next* step it has reached by then. Fusion then cuts that step's
//! operations at a different place every time, so the step runs more and smaller kernels, and
//! kernels of shapes never met before are compiled in the middle of training (on Mesa's lavapipe:
//! a new kernel every few dozen steps, for as long as training runs).
//!
//! [`SequenceRead`] and [`ClassificationRead`] wrap burn-train's output types and do the read on
//! the training thread, so the queue is drained at the same point of every step, every step runs
//! the same kernels, and nothing is compiled after the first steps. Where, [`ReadPoint`] says:
//! by default when the loop asks for its next batch, on a thread that iterates a
//! [`ReadsAtNextBatch`](crate::deferred_read::ReadsAtNextBatch) loader, so after the optimizer
//! step was queued ([`crate::deferred_read`] says why that matters); else where `TrainStep::step`
//! returns the output (after the backward pass). The price is one wait per step: CubeCL's CUDA
//! reads wait for their copies when first polled, as a training loop that syncs once a step does
//! (wgpu's reads may return before and finish on the metrics thread). What the metrics see is
//! unchanged (`SequenceOutput<Flex>` and `ClassificationOutput<Flex>`, as burn-train's own
//! `ItemLazy` makes them). [`ReadPoint::MetricsThread`] turns burn-train's behaviour back on, for
//! comparison.
//!
//! On the H200 (`docs/perf/training-step.md`, History), 100 steps of the
//! transformer example read on the metrics thread, right after a run that read here and had
//! compiled every kernel it met: `Autodiff<Cuda>` still compiled 53 new kernels (32 s of stalls),
//! ruda 18. On lavapipe, reading here, no kernel is compiled after the first steps.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use burn::prelude::*;
use burn::tensor::Transaction;
use burn::train::{ClassificationOutput, ItemLazy, SequenceOutput};
use burn_flex::Flex;

use crate::deferred_read;

type ReadResult = Result<Vec<TensorData>, burn::tensor::backend::ExecutionError>;
type ReadFuture = Pin<Box<dyn Future<Output = ReadResult> + Send>>;

/// Where [`SequenceRead`] and [`ClassificationRead`] read a training step's output back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ReadPoint {
    /// When the loop asks for its next batch, after the optimizer step was queued, on a thread
    /// that iterates a [`deferred_read::ReadsAtNextBatch`] loader; where the step ends elsewhere.
    #[default]
    NextBatch,
    /// Where the step returns its output, after the backward pass.
    StepEnd,
    /// On burn-train's metrics thread, as burn-train's own output types do.
    MetricsThread,
}

static READ_POINT: AtomicU8 = AtomicU8::new(0);

/// Where outputs made from now on are read. Process-wide: the examples set it from a flag before
/// training.
pub fn set_read_point(point: ReadPoint) {
    READ_POINT.store(point as u8, Ordering::Relaxed);
}

/// The current [`ReadPoint`].
pub fn read_point() -> ReadPoint {
    match READ_POINT.load(Ordering::Relaxed) {
        0 => ReadPoint::NextBatch,
        1 => ReadPoint::StepEnd,
        _ => ReadPoint::MetricsThread,
    }
}

/// A transaction whose read was started on the training thread, or queued there for the next
/// batch; [`StartedRead::wait`] finishes it on any thread (on CUDA the start already waited for
/// the data).
pub struct StartedRead {
    state: ReadState,
}

enum ReadState {
    Pending(ReadFuture),
    Ready(ReadResult),
    /// Deferred to the training thread's next batch, which sends the started read here.
    Queued(mpsc::Receiver<StartedRead>),
}

impl StartedRead {
    /// Starts reading what `transaction` registered: at once, or, with [`ReadPoint::NextBatch`]
    /// on a thread that iterates a [`deferred_read::ReadsAtNextBatch`] loader, when that loader
    /// hands out its next batch.
    pub fn start<B: Backend>(transaction: Transaction<B>) -> Self {
        if read_point() != ReadPoint::NextBatch {
            return Self::start_now(transaction);
        }
        let (sender, receiver) = mpsc::sync_channel(1);
        let read = Box::new(move || {
            // The receiver is gone only if the output was dropped unread.
            sender.send(Self::start_now(transaction)).ok();
        });
        match deferred_read::defer(read) {
            Ok(()) => Self {
                state: ReadState::Queued(receiver),
            },
            Err(read) => {
                read();
                receiver
                    .recv()
                    .expect("a read run on this thread has sent its result")
            }
        }
    }

    /// Starts reading now. Burn's reads are futures that do nothing until polled; the first poll
    /// is where burn-fusion drains the queue and the backend issues the copies (and, on CUDA,
    /// waits for them), so it happens here, on the caller's thread.
    fn start_now<B: Backend>(transaction: Transaction<B>) -> Self {
        let start = Instant::now();
        let mut future: ReadFuture = Box::pin(transaction.execute_async());
        let mut context = Context::from_waker(Waker::noop());
        let state = match future.as_mut().poll(&mut context) {
            Poll::Ready(result) => ReadState::Ready(result),
            Poll::Pending => ReadState::Pending(future),
        };
        deferred_read::count_read_wait(start.elapsed());
        Self { state }
    }

    /// Whether the read was queued for the next batch and has not run yet.
    pub fn is_queued(&self) -> bool {
        matches!(self.state, ReadState::Queued(_))
    }

    /// The data, in the order the transaction registered the tensors.
    ///
    /// # Panics
    /// If the device failed to run the work behind them, as burn-train's own reads do, or if the
    /// training thread ended without running a read it had queued.
    pub fn wait(self) -> Vec<TensorData> {
        let result = match self.state {
            ReadState::Ready(result) => result,
            ReadState::Pending(future) => burn_std::future::block_on(future),
            ReadState::Queued(receiver) => {
                return receiver
                    .recv()
                    .expect("the training thread ended before reading this step's output back")
                    .wait();
            }
        };
        result.expect("reading a training step's output back failed")
    }
}

fn data<const N: usize>(read: StartedRead) -> [TensorData; N] {
    let data = read.wait();
    let count = data.len();
    data.try_into()
        .unwrap_or_else(|_| panic!("expected {N} tensors back from the step's read, got {count}"))
}

/// burn-train's [`SequenceOutput`] (language models: `[batch, seq, vocab]` logits), its read
/// started where the step returns it (see the [module docs](self)).
pub enum SequenceRead<B: Backend> {
    /// Reading; `predictions` says whether the output carried its own.
    Started {
        read: StartedRead,
        predictions: bool,
    },
    /// Left to the metrics thread ([`ReadPoint::MetricsThread`]).
    OnMetricsThread(SequenceOutput<B>),
}

impl<B: Backend> SequenceRead<B> {
    /// Starts reading `output` back where [`read_point`] says.
    pub fn new(output: SequenceOutput<B>) -> Self {
        if read_point() == ReadPoint::MetricsThread {
            return Self::OnMetricsThread(output);
        }
        let predictions = output.predictions.is_some();
        let mut transaction = Transaction::default()
            .register(output.logits)
            .register(output.loss)
            .register(output.targets);
        if let Some(p) = output.predictions {
            transaction = transaction.register(p);
        }
        Self::Started {
            read: StartedRead::start(transaction),
            predictions,
        }
    }
}

impl<B: Backend> ItemLazy for SequenceRead<B> {
    type ItemSync = SequenceOutput<Flex>;

    fn sync(self) -> SequenceOutput<Flex> {
        let device = &Default::default();
        match self {
            Self::OnMetricsThread(output) => output.sync(),
            Self::Started {
                read,
                predictions: false,
            } => {
                let [logits, loss, targets] = data(read);
                SequenceOutput::new(
                    Tensor::from_data(loss, device),
                    Tensor::from_data(logits, device),
                    None,
                    Tensor::from_data(targets, device),
                )
            }
            Self::Started {
                read,
                predictions: true,
            } => {
                let [logits, loss, targets, predictions] = data(read);
                SequenceOutput::new(
                    Tensor::from_data(loss, device),
                    Tensor::from_data(logits, device),
                    Some(Tensor::from_data(predictions, device)),
                    Tensor::from_data(targets, device),
                )
            }
        }
    }
}

/// burn-train's [`ClassificationOutput`] (`[batch, classes]` outputs), its read started where
/// the step returns it (see the [module docs](self)).
pub enum ClassificationRead<B: Backend> {
    /// Reading.
    Started(StartedRead),
    /// Left to the metrics thread ([`ReadPoint::MetricsThread`]).
    OnMetricsThread(ClassificationOutput<B>),
}

impl<B: Backend> ClassificationRead<B> {
    /// Starts reading `output` back where [`read_point`] says.
    pub fn new(output: ClassificationOutput<B>) -> Self {
        if read_point() == ReadPoint::MetricsThread {
            return Self::OnMetricsThread(output);
        }
        let transaction = Transaction::default()
            .register(output.output)
            .register(output.loss)
            .register(output.targets);
        Self::Started(StartedRead::start(transaction))
    }
}

impl<B: Backend> ItemLazy for ClassificationRead<B> {
    type ItemSync = ClassificationOutput<Flex>;

    fn sync(self) -> ClassificationOutput<Flex> {
        match self {
            Self::OnMetricsThread(output) => output.sync(),
            Self::Started(read) => {
                let device = &Default::default();
                let [output, loss, targets] = data(read);
                ClassificationOutput::new(
                    Tensor::from_data(loss, device),
                    Tensor::from_data(output, device),
                    Tensor::from_data(targets, device),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deferred_read::ReadsAtNextBatch;
    use burn::data::dataloader::DataLoaderBuilder;
    use burn::data::dataloader::batcher::Batcher;
    use burn::data::dataset::InMemDataset;
    use burn_flex::FlexDevice;

    fn sequence_output<B: Backend>(device: &B::Device, predictions: bool) -> SequenceOutput<B> {
        let logits = Tensor::<B, 1>::from_floats([0.5, -1.0, 2.0, 0.25, 3.0, -0.5], device)
            .reshape([1, 2, 3]);
        let loss = Tensor::<B, 1>::from_floats([1.5], device);
        let targets = Tensor::<B, 1, Int>::from_ints([2, 0], device).reshape([1, 2]);
        let predictions =
            predictions.then(|| Tensor::<B, 1, Int>::from_ints([2, 1], device).reshape([1, 2]));
        SequenceOutput::new(loss, logits, predictions, targets)
    }

    fn same(a: Tensor<Flex, 3>, b: Tensor<Flex, 3>) {
        a.into_data().assert_eq(&b.into_data(), true);
    }

    fn same_sequences(a: SequenceOutput<Flex>, b: SequenceOutput<Flex>) {
        same(a.logits, b.logits);
        a.loss.into_data().assert_eq(&b.loss.into_data(), true);
        a.targets
            .into_data()
            .assert_eq(&b.targets.into_data(), true);
        assert_eq!(a.predictions.is_some(), b.predictions.is_some());
        if let (Some(a), Some(b)) = (a.predictions, b.predictions) {
            a.into_data().assert_eq(&b.into_data(), true);
        }
    }

    struct ValueBatcher;

    impl Batcher<Flex, f32, Tensor<Flex, 1>> for ValueBatcher {
        fn batch(&self, items: Vec<f32>, device: &FlexDevice) -> Tensor<Flex, 1> {
            Tensor::from_floats(items.as_slice(), device)
        }
    }

    /// Syncs `read` on another thread, as burn-train's metrics thread does, and fails instead of
    /// hanging if its read never runs.
    fn sync_elsewhere(read: SequenceRead<Flex>) -> SequenceOutput<Flex> {
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || sender.send(read.sync()).ok());
        receiver
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the deferred read did not run")
    }

    // Every read point gives the metrics the same values. One test: the read point is
    // process-wide.
    #[test]
    fn outputs_read_at_every_read_point_agree() {
        let device = Default::default();
        for predictions in [false, true] {
            let expected = sequence_output::<Flex>(&device, predictions);
            let expected = || {
                SequenceOutput::<Flex>::new(
                    expected.loss.clone(),
                    expected.logits.clone(),
                    expected.predictions.clone(),
                    expected.targets.clone(),
                )
            };

            set_read_point(ReadPoint::StepEnd);
            let at_step_end = SequenceRead::new(sequence_output::<Flex>(&device, predictions));
            let SequenceRead::Started { read, .. } = &at_step_end else {
                panic!("the read should start where the step ends");
            };
            assert!(!read.is_queued());
            same_sequences(at_step_end.sync(), expected());

            set_read_point(ReadPoint::MetricsThread);
            let lazy = SequenceRead::new(sequence_output::<Flex>(&device, predictions));
            assert!(matches!(lazy, SequenceRead::OnMetricsThread(_)));
            same_sequences(lazy.sync(), expected());

            // The default: without a loader that runs deferred reads, where the step ends.
            set_read_point(ReadPoint::default());
            let alone = SequenceRead::new(sequence_output::<Flex>(&device, predictions));
            let SequenceRead::Started { read, .. } = &alone else {
                panic!("the read should start here");
            };
            assert!(
                !read.is_queued(),
                "no loader iterates: nothing may wait for one"
            );
            same_sequences(alone.sync(), expected());
        }

        // Under a loader that runs them, reads wait for the next batch, and the last one for the
        // end of the iteration.
        let loader = ReadsAtNextBatch::wrap(
            DataLoaderBuilder::new(ValueBatcher)
                .batch_size(2)
                .build(InMemDataset::new(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])),
        );
        let mut previous: Option<(SequenceRead<Flex>, f32)> = None;
        let mut batches = 0;
        for batch in loader.iter() {
            if let Some((read, loss)) = previous.take() {
                sync_elsewhere(read)
                    .loss
                    .into_data()
                    .assert_eq(&TensorData::from([loss]), true);
            }
            let loss = batch.sum().into_scalar();
            let mut output = sequence_output::<Flex>(&device, false);
            output.loss = Tensor::from_floats([loss], &device);
            let read = SequenceRead::new(output);
            let SequenceRead::Started { read: started, .. } = &read else {
                panic!("the read should be queued, not left to the metrics thread");
            };
            assert!(
                started.is_queued(),
                "a loader iterates: the read waits for it"
            );
            previous = Some((read, loss));
            batches += 1;
        }
        assert_eq!(batches, 3);
        let (read, loss) = previous.expect("three batches");
        sync_elsewhere(read)
            .loss
            .into_data()
            .assert_eq(&TensorData::from([loss]), true);
        let phases = crate::deferred_read::last_epoch_phases();
        assert_eq!(
            phases.len(),
            3,
            "one step per batch, the last up to the loader's end"
        );

        let classes = || {
            ClassificationOutput::<Flex>::new(
                Tensor::from_floats([0.75], &device),
                Tensor::<Flex, 1>::from_floats([0.1, 0.9, 0.3, 0.2], &device).reshape([2, 2]),
                Tensor::from_ints([1, 0], &device),
            )
        };
        let read = ClassificationRead::new(classes());
        assert!(matches!(read, ClassificationRead::Started(_)));
        let read = read.sync();
        let expected = classes();
        read.output
            .into_data()
            .assert_eq(&expected.output.into_data(), true);
        read.loss
            .into_data()
            .assert_eq(&expected.loss.into_data(), true);
        read.targets
            .into_data()
            .assert_eq(&expected.targets.into_data(), true);
    }
}
