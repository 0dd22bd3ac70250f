//! Native softmax and log-softmax: the [`SoftmaxBackend`] capability (which
//! [`crate::Autodiff`] records as one node each), the kernels on burn-cubecl tensors
//! ([`ruda_runtime::softmax`], one CubeCL source for every runtime), and `Ruda`'s
//! implementation through [`super::custom_op`].
//!
//! Burn 0.21 composes each from five or more operations (`max_dim`, `sub`, `exp`, `sum_dim`,
//! `div`, and a `log` for log-softmax), and its autodiff records each of them with a backward
//! of its own. `burn::nn::attention::MultiHeadAttention` calls `softmax(scores, 3)` and
//! `burn::nn::loss::CrossEntropyLoss` calls `log_softmax(logits, 1)`, so a transformer step
//! runs both on every layer and at the loss.

use burn_backend::{Backend, TensorMetadata, ops::FloatTensorOps, tensor::FloatTensor};
use burn_cubecl::{BoolElement, FloatElement, IntElement, tensor::CubeTensor};
use ruda_runtime::TensorBuffer;
use ruda_runtime::cubecl::ir::StorageType;
use ruda_runtime::softmax::{self as kernels, validate};

pub use ruda_runtime::softmax::Kind;

use super::counters::{self, Kernel};
use super::{NativeKernel, RudaRuntime, custom_op};
use crate::backend::Ruda;

/// A backend that may run softmax and log-softmax, forward and backward, as native kernels.
pub trait SoftmaxBackend: Backend {
    /// Whether [`Self::softmax_native`] takes `tensor` (its dtype on its device).
    fn has_native_softmax(tensor: &FloatTensor<Self>) -> bool;

    /// Softmax or log-softmax of `tensor` over `dim`.
    ///
    /// # Panics
    /// On the caller's thread, before anything is queued: when `dim` is out of range, on a
    /// scalar, or on a dtype [`Self::has_native_softmax`] refuses.
    fn softmax_native(tensor: FloatTensor<Self>, dim: usize, kind: Kind) -> FloatTensor<Self>;

    /// The input's gradient from the forward's `output` and the output's gradient `grad`:
    /// `output * (grad - sum(grad * output))` for softmax, `grad - exp(output) * sum(grad)`
    /// for log-softmax, the sums over `dim`.
    ///
    /// # Panics
    /// As [`Self::softmax_native`], and when `grad`'s shape or dtype differs from `output`'s.
    fn softmax_native_backward(
        output: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        dim: usize,
        kind: Kind,
    ) -> FloatTensor<Self>;
}

/// Checks the rank and the dimension on the caller's thread (the kernels' message, also where
/// Burn's composed softmax then runs), and tells whether `B`'s native softmax takes `tensor`: a
/// backend with one (and `RUDA_SOFTMAX` not `burn`) and a dtype it takes on the device; Burn's
/// composed softmax runs otherwise.
///
/// # Panics
/// On a scalar tensor or a dimension out of range.
pub(crate) fn native_applies<B: SoftmaxBackend>(
    tensor: &FloatTensor<B>,
    dim: usize,
    kind: Kind,
) -> bool {
    validate::check_dim(kind.name(), &tensor.shape(), dim);
    kernels::native_enabled() && B::has_native_softmax(tensor)
}

/// The forward kernel: input `[x]`, output `[y]`.
struct ForwardKernel {
    dim: usize,
    kind: Kind,
}

impl<R: RudaRuntime> NativeKernel<R> for ForwardKernel {
    fn name(&self) -> &'static str {
        match self.kind {
            Kind::Softmax => "ruda_softmax",
            Kind::LogSoftmax => "ruda_log_softmax",
        }
    }

    fn launch(&self, inputs: Vec<CubeTensor<R>>) -> Vec<CubeTensor<R>> {
        let [x]: [CubeTensor<R>; 1] = inputs
            .try_into()
            .unwrap_or_else(|_| unreachable!("softmax: queued with one input"));
        let (client, device) = (x.client.clone(), x.device.clone());
        let y = kernels::softmax_forward(&client, TensorBuffer::from(x), self.dim, self.kind);
        counters::record(Kernel::SoftmaxForward);
        vec![y.into_cube_tensor(client, device)]
    }
}

/// The backward kernel: inputs `[y, dy]`, output `[dx]`.
struct BackwardKernel {
    dim: usize,
    kind: Kind,
}

impl<R: RudaRuntime> NativeKernel<R> for BackwardKernel {
    fn name(&self) -> &'static str {
        match self.kind {
            Kind::Softmax => "ruda_softmax_backward",
            Kind::LogSoftmax => "ruda_log_softmax_backward",
        }
    }

    fn launch(&self, inputs: Vec<CubeTensor<R>>) -> Vec<CubeTensor<R>> {
        let [y, dy]: [CubeTensor<R>; 2] = inputs
            .try_into()
            .unwrap_or_else(|_| unreachable!("softmax backward: queued with two inputs"));
        let (client, device) = (y.client.clone(), y.device.clone());
        let dx = kernels::softmax_backward(
            &client,
            TensorBuffer::from(y),
            TensorBuffer::from(dy),
            self.dim,
            self.kind,
        );
        counters::record(Kernel::SoftmaxBackward);
        vec![dx.into_cube_tensor(client, device)]
    }
}

impl<R: RudaRuntime, F: FloatElement, I: IntElement, BT: BoolElement> SoftmaxBackend
    for Ruda<R, F, I, BT>
{
    fn has_native_softmax(tensor: &FloatTensor<Self>) -> bool {
        let dtype = tensor.dtype();
        if !validate::supports_dtype(dtype) {
            return false;
        }
        let storage: StorageType = dtype.into();
        R::client(&<Self as FloatTensorOps<Self>>::float_device(tensor))
            .properties()
            .supports_type(storage)
    }

    fn softmax_native(tensor: FloatTensor<Self>, dim: usize, kind: Kind) -> FloatTensor<Self> {
        let (shape, dtype) = (tensor.shape(), tensor.dtype());
        validate::check_forward(kind, &shape, dtype, dim);
        let [y] =
            custom_op::run::<R, _, 1>(ForwardKernel { dim, kind }, vec![tensor], [(shape, dtype)]);
        y
    }

    fn softmax_native_backward(
        output: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        dim: usize,
        kind: Kind,
    ) -> FloatTensor<Self> {
        let (shape, dtype) = (output.shape(), output.dtype());
        validate::check_backward(kind, (&shape, dtype), (&grad.shape(), grad.dtype()), dim);
        let [dx] = custom_op::run::<R, _, 1>(
            BackwardKernel { dim, kind },
            vec![output, grad],
            [(shape, dtype)],
        );
        dx
    }
}

/// `Ruda`'s own softmax and log-softmax (`ActivationOps`): native where
/// [`native_applies`], Burn's composed version on the inner backend otherwise.
pub(crate) fn softmax<B: SoftmaxBackend>(
    tensor: FloatTensor<B>,
    dim: usize,
    kind: Kind,
    composed: impl FnOnce(FloatTensor<B>, usize) -> FloatTensor<B>,
) -> FloatTensor<B> {
    if native_applies::<B>(&tensor, dim, kind) {
        B::softmax_native(tensor, dim, kind)
    } else {
        composed(tensor, dim)
    }
}
