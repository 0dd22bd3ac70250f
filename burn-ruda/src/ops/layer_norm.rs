//! Native LayerNorm: the [`LayerNormBackend`] capability (which [`crate::Autodiff`] records as
//! one node), its kernels on burn-cubecl tensors (the runtime's hooks,
//! [`ruda_runtime::Runtime::layer_norm`]), and `Ruda`'s implementation through
//! [`super::custom_op`].

use burn_backend::{
    Backend, DType, Shape, TensorMetadata,
    tensor::{Device, FloatTensor},
};
use burn_cubecl::{BoolElement, FloatElement, IntElement, tensor::CubeTensor};
use ruda_runtime::TensorBuffer;
use ruda_runtime::layer_norm::validate;

use super::counters::{self, Kernel};
use super::{NativeKernel, RudaRuntime, custom_op};
use crate::backend::Ruda;

/// A backend that may run LayerNorm forward and backward as native kernels.
///
/// [`Ruda`] implements it through its runtime's hooks ([`ruda_runtime::Runtime::layer_norm`]
/// and [`ruda_runtime::Runtime::layer_norm_backward`]); [`crate::Autodiff`] uses it to record
/// LayerNorm as one autodiff node.
pub trait LayerNormBackend: Backend {
    /// Whether [`Self::layer_norm_native`] and [`Self::layer_norm_native_backward`] are
    /// available on `device`.
    fn has_native_layer_norm(device: &Device<Self>) -> bool;

    /// LayerNorm over the last dimension: `[out, mean, rstd]`, where `mean` and `rstd`
    /// (`1 / sqrt(var + epsilon)`) are F32 with the input's shape without its last dimension.
    ///
    /// # Panics
    /// When the backend has no native LayerNorm, or on invalid shapes.
    fn layer_norm_native(
        tensor: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: Option<FloatTensor<Self>>,
        epsilon: f64,
    ) -> [FloatTensor<Self>; 3];

    /// LayerNorm's output alone, for a forward no backward follows (inference, an untracked
    /// autodiff node, a recomputed one). The default is [`Self::layer_norm_native`]'s `out`;
    /// [`Ruda`] under `fusion` queues an operation with that one output, the statistics
    /// staying temporaries of the kernel launch, so the fusion stream has no tensors for them
    /// to track and drop.
    ///
    /// # Panics
    /// When the backend has no native LayerNorm, or on invalid shapes.
    fn layer_norm_native_output(
        tensor: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: Option<FloatTensor<Self>>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        let [out, _mean, _rstd] = Self::layer_norm_native(tensor, gamma, beta, epsilon);
        out
    }

    /// LayerNorm gradients `[dx, dgamma, dbeta]` from the input, gamma, the output gradient,
    /// and the forward's `mean` and `rstd`.
    ///
    /// # Panics
    /// When the backend has no native LayerNorm, or on invalid shapes.
    fn layer_norm_native_backward(
        tensor: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        rstd: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3];
}

/// Checks LayerNorm's arguments on the caller's thread, before anything is queued or composed,
/// so that a bad call panics where it is made, in the kernels' words (Burn's composed LayerNorm
/// would fail later, on burn-fusion's thread, or not at all). An empty last dimension is left to
/// the composed LayerNorm, which returns an empty tensor.
///
/// # Panics
/// On a scalar input, gamma or beta not `[d]` of the input's dtype, a negative or non-finite
/// epsilon.
pub(crate) fn check_args<B: Backend>(
    tensor: &FloatTensor<B>,
    gamma: &FloatTensor<B>,
    beta: Option<&FloatTensor<B>>,
    epsilon: f64,
) {
    let shape = tensor.shape();
    if shape.num_dims() > 0 && shape[shape.num_dims() - 1] == 0 {
        return;
    }
    let gamma_shape = gamma.shape();
    let beta_shape = beta.map(|b| (b.shape(), b.dtype()));
    validate::check_forward_args(
        (&shape, tensor.dtype()),
        (&gamma_shape, gamma.dtype()),
        beta_shape.as_ref().map(|(s, d)| (&s[..], *d)),
        epsilon,
    );
}

/// Whether the native LayerNorm of `B` takes `tensor` (arguments already checked): the backend
/// has one on the tensor's device, the last dimension is not empty, and the kernels take the
/// dtype on that device (F32, F16, BF16; an F64 tensor gets Burn's composed LayerNorm).
pub(crate) fn native_applies<B: LayerNormBackend>(tensor: &FloatTensor<B>) -> bool {
    let (shape, dtype) = (tensor.shape(), tensor.dtype());
    let device = B::float_device(tensor);
    shape.num_dims() >= 1
        && shape[shape.num_dims() - 1] > 0
        && validate::supports_dtype(dtype)
        && B::supports_dtype(&device, dtype)
        && B::has_native_layer_norm(&device)
}

/// The statistics' shape: the input's without its last dimension.
fn stats_shape(shape: &Shape) -> Shape {
    let dims: Vec<usize> = shape.iter().take(shape.num_dims() - 1).copied().collect();
    Shape::from(dims)
}

/// The forward kernel: inputs `[x, gamma]` or `[x, gamma, beta]`, outputs `[out, mean, rstd]`.
struct ForwardKernel {
    epsilon: f64,
    /// `out` alone is wanted (another name in the stream: another number of outputs).
    output_only: bool,
}

impl<R: RudaRuntime> NativeKernel<R> for ForwardKernel {
    fn name(&self) -> &'static str {
        if self.output_only {
            "ruda_layer_norm_output"
        } else {
            "ruda_layer_norm"
        }
    }

    fn launch(&self, inputs: Vec<CubeTensor<R>>) -> Vec<CubeTensor<R>> {
        let client = inputs[0].client.clone();
        let device = inputs[0].device.clone();
        let mut inputs = inputs.into_iter().map(TensorBuffer::from);
        let (Some(x), Some(gamma)) = (inputs.next(), inputs.next()) else {
            unreachable!("LayerNorm: queued with x and gamma")
        };
        let outputs = R::layer_norm(&client, x, gamma, inputs.next(), self.epsilon);
        counters::record(Kernel::LayerNormForward);
        outputs
            .into_iter()
            .map(|buffer| buffer.into_cube_tensor(client.clone(), device.clone()))
            .collect()
    }
}

/// The backward kernel: inputs `[x, gamma, dy, mean, rstd]`, outputs `[dx, dgamma, dbeta]`.
struct BackwardKernel;

impl<R: RudaRuntime> NativeKernel<R> for BackwardKernel {
    fn name(&self) -> &'static str {
        "ruda_layer_norm_backward"
    }

    fn launch(&self, inputs: Vec<CubeTensor<R>>) -> Vec<CubeTensor<R>> {
        let client = inputs[0].client.clone();
        let device = inputs[0].device.clone();
        let [x, gamma, grad, mean, rstd]: [TensorBuffer; 5] = inputs
            .into_iter()
            .map(TensorBuffer::from)
            .collect::<Vec<_>>()
            .try_into()
            .unwrap_or_else(|_| unreachable!("LayerNorm backward: queued with five inputs"));
        let outputs = R::layer_norm_backward(&client, x, gamma, grad, mean, rstd);
        counters::record(Kernel::LayerNormBackward);
        outputs
            .into_iter()
            .map(|buffer| buffer.into_cube_tensor(client.clone(), device.clone()))
            .collect()
    }
}

/// The forward's inputs in the order the kernel takes them: `[x, gamma]` or `[x, gamma, beta]`.
fn forward_inputs<T>(tensor: T, gamma: T, beta: Option<T>) -> Vec<T> {
    let mut inputs = vec![tensor, gamma];
    inputs.extend(beta);
    inputs
}

impl<R: RudaRuntime, F: FloatElement, I: IntElement, BT: BoolElement> LayerNormBackend
    for Ruda<R, F, I, BT>
{
    fn has_native_layer_norm(_device: &Device<Self>) -> bool {
        R::has_native_layer_norm()
    }

    fn layer_norm_native(
        tensor: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: Option<FloatTensor<Self>>,
        epsilon: f64,
    ) -> [FloatTensor<Self>; 3] {
        check_args::<Self>(&tensor, &gamma, beta.as_ref(), epsilon);
        let (shape, dtype) = (tensor.shape(), tensor.dtype());
        let stats = stats_shape(&shape);
        let kernel = ForwardKernel {
            epsilon,
            output_only: false,
        };
        custom_op::run::<R, _, 3>(
            kernel,
            forward_inputs(tensor, gamma, beta),
            [
                (shape, dtype),
                (stats.clone(), DType::F32),
                (stats, DType::F32),
            ],
        )
    }

    fn layer_norm_native_output(
        tensor: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: Option<FloatTensor<Self>>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        check_args::<Self>(&tensor, &gamma, beta.as_ref(), epsilon);
        let (shape, dtype) = (tensor.shape(), tensor.dtype());
        let kernel = ForwardKernel {
            epsilon,
            output_only: true,
        };
        let [out] = custom_op::run::<R, _, 1>(
            kernel,
            forward_inputs(tensor, gamma, beta),
            [(shape, dtype)],
        );
        out
    }

    fn layer_norm_native_backward(
        tensor: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        rstd: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3] {
        let (shape, dtype) = (tensor.shape(), tensor.dtype());
        let (gamma_shape, gamma_dtype) = (gamma.shape(), gamma.dtype());
        validate::check_backward_args(
            (&shape, dtype),
            (&gamma_shape, gamma_dtype),
            (&grad.shape(), grad.dtype()),
            (&mean.shape(), mean.dtype()),
            (&rstd.shape(), rstd.dtype()),
        );
        custom_op::run::<R, _, 3>(
            BackwardKernel,
            vec![tensor, gamma, grad, mean, rstd],
            [
                (shape, dtype),
                (gamma_shape.clone(), gamma_dtype),
                (gamma_shape, gamma_dtype),
            ],
        )
    }
}
