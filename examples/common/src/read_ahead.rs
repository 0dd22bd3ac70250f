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
//! [`SequenceRead`] and [`ClassificationRead`] wrap burn-train's output types and do the read
//! where `TrainStep::step` returns them, on the training thread: the queue is drained at the
//! same point of every step (after the backward pass, before the optimizer), so every step runs
//! the same kernels and nothing is compiled after the first steps. The price is one wait per
//! step: CubeCL's CUDA reads wait for their copies when first polled, so the training thread
//! waits there for the step's forward and backward passes, as a training loop that syncs once a
//! step does (wgpu's reads may return before and finish on the metrics thread). What the metrics
//! see is unchanged (`SequenceOutput<Flex>` and `ClassificationOutput<Flex>`, as burn-train's own
//! `ItemLazy` makes them). [`set_read_on_metrics_thread`] turns burn-train's behaviour back on,
//! for comparison.
//!
//! On the H200 (benches/results/2026-12-01-h200-learner-read-ahead.md), 100 steps of the
//! transformer example read on the metrics thread, right after a run that read here and had
//! compiled every kernel it met: `Autodiff<Cuda>` still compiled 53 new kernels (32 s of stalls),
//! ruda 18. On lavapipe, reading here, no kernel is compiled after the first steps.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use std::sync::atomic::{AtomicBool, Ordering};

use burn::prelude::*;
use burn::tensor::Transaction;
use burn::train::{ClassificationOutput, ItemLazy, SequenceOutput};
use burn_flex::Flex;

type ReadResult = Result<Vec<TensorData>, burn::tensor::backend::ExecutionError>;
type ReadFuture = Pin<Box<dyn Future<Output = ReadResult> + Send>>;

static READ_ON_METRICS_THREAD: AtomicBool = AtomicBool::new(false);

/// With `true`, [`SequenceRead::new`] and [`ClassificationRead::new`] keep the tensors and let
/// burn-train's metrics thread read them, as its own output types do; with `false` (the default)
/// they start the read at once. Process-wide: the examples set it from a flag before training.
pub fn set_read_on_metrics_thread(on: bool) {
    READ_ON_METRICS_THREAD.store(on, Ordering::Relaxed);
}

fn read_on_metrics_thread() -> bool {
    READ_ON_METRICS_THREAD.load(Ordering::Relaxed)
}

/// A transaction whose read was started on the calling thread; [`StartedRead::wait`] finishes
/// it on any thread (on CUDA the start already waited for the data).
pub struct StartedRead {
    state: ReadState,
}

enum ReadState {
    Pending(ReadFuture),
    Ready(ReadResult),
}

impl StartedRead {
    /// Starts reading what `transaction` registered. Burn's reads are futures that do nothing
    /// until polled; the first poll is where burn-fusion drains the queue and the backend issues
    /// the copies (and, on CUDA, waits for them), so it happens here, on the caller's thread.
    pub fn start<B: Backend>(transaction: Transaction<B>) -> Self {
        let mut future: ReadFuture = Box::pin(transaction.execute_async());
        let mut context = Context::from_waker(Waker::noop());
        let state = match future.as_mut().poll(&mut context) {
            Poll::Ready(result) => ReadState::Ready(result),
            Poll::Pending => ReadState::Pending(future),
        };
        Self { state }
    }

    /// The data, in the order the transaction registered the tensors.
    ///
    /// # Panics
    /// If the device failed to run the work behind them, as burn-train's own reads do.
    pub fn wait(self) -> Vec<TensorData> {
        let result = match self.state {
            ReadState::Ready(result) => result,
            ReadState::Pending(future) => burn_std::future::block_on(future),
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
    /// Left to the metrics thread ([`set_read_on_metrics_thread`]).
    OnMetricsThread(SequenceOutput<B>),
}

impl<B: Backend> SequenceRead<B> {
    /// Starts reading `output` back, unless [`set_read_on_metrics_thread`] said not to.
    pub fn new(output: SequenceOutput<B>) -> Self {
        if read_on_metrics_thread() {
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
    /// Left to the metrics thread ([`set_read_on_metrics_thread`]).
    OnMetricsThread(ClassificationOutput<B>),
}

impl<B: Backend> ClassificationRead<B> {
    /// Starts reading `output` back, unless [`set_read_on_metrics_thread`] said not to.
    pub fn new(output: ClassificationOutput<B>) -> Self {
        if read_on_metrics_thread() {
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

    // Both ways of reading give the metrics the same values; the flag picks the way.
    #[test]
    fn outputs_read_here_and_on_the_metrics_thread_agree() {
        let device = Default::default();
        for predictions in [false, true] {
            let SequenceRead::Started { .. } =
                SequenceRead::new(sequence_output::<Flex>(&device, predictions))
            else {
                panic!("the read should start at once by default");
            };
            let here = SequenceRead::new(sequence_output::<Flex>(&device, predictions)).sync();
            set_read_on_metrics_thread(true);
            let lazy = SequenceRead::new(sequence_output::<Flex>(&device, predictions));
            set_read_on_metrics_thread(false);
            assert!(matches!(lazy, SequenceRead::OnMetricsThread(_)));
            let lazy = lazy.sync();
            same(here.logits, lazy.logits);
            here.loss
                .into_data()
                .assert_eq(&lazy.loss.into_data(), true);
            here.targets
                .into_data()
                .assert_eq(&lazy.targets.into_data(), true);
            assert_eq!(here.predictions.is_some(), predictions);
            if let (Some(a), Some(b)) = (here.predictions, lazy.predictions) {
                a.into_data().assert_eq(&b.into_data(), true);
            }
        }

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
