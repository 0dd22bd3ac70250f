//! Native GELU forward and backward (`ActivationOps::gelu`, `ActivationOps::gelu_backward`):
//! the kernels on burn-cubecl tensors ([`ruda_runtime::gelu`], one CubeCL source for every
//! runtime), queued through [`super::custom_op`].
//!
//! Burn composes GELU from five operations and its backward from fifteen; burn-fusion fuses
//! each group into one kernel but handles every operation on its own thread, which paces a
//! bf16 transformer step. Here each is one operation. Burn's autodiff already records GELU as
//! one node calling these two, so no autodiff node of ours is needed.
//!
//! Opt-in (`RUDA_GELU=native`, [`ruda_runtime::gelu::ENV_GELU`]): measured, the transformer
//! step was slower with them, Burn's composed GELU fusing with the dropout around it.

use burn_backend::{TensorMetadata, tensor::FloatTensor};
use burn_cubecl::tensor::CubeTensor;
use ruda_runtime::TensorBuffer;
use ruda_runtime::cubecl::ir::StorageType;
use ruda_runtime::gelu as kernels;

use super::counters::{self, Kernel};
use super::{InnerBackend, NativeKernel, RudaRuntime, custom_op};

/// The forward kernel: input `[x]`, output `[y]`.
struct ForwardKernel;

impl<R: RudaRuntime> NativeKernel<R> for ForwardKernel {
    fn name(&self) -> &'static str {
        "ruda_gelu"
    }

    fn launch(&self, inputs: Vec<CubeTensor<R>>) -> Vec<CubeTensor<R>> {
        let [x]: [CubeTensor<R>; 1] = inputs
            .try_into()
            .unwrap_or_else(|_| unreachable!("gelu: queued with one input"));
        let (client, device) = (x.client.clone(), x.device.clone());
        let y = kernels::gelu_forward(&client, TensorBuffer::from(x));
        counters::record(Kernel::GeluForward);
        vec![y.into_cube_tensor(client, device)]
    }
}

/// The backward kernel: inputs `[x, dy]`, output `[dx]`.
struct BackwardKernel;

impl<R: RudaRuntime> NativeKernel<R> for BackwardKernel {
    fn name(&self) -> &'static str {
        "ruda_gelu_backward"
    }

    fn launch(&self, inputs: Vec<CubeTensor<R>>) -> Vec<CubeTensor<R>> {
        let [x, dy]: [CubeTensor<R>; 2] = inputs
            .try_into()
            .unwrap_or_else(|_| unreachable!("gelu backward: queued with two inputs"));
        let (client, device) = (x.client.clone(), x.device.clone());
        let dx = kernels::gelu_backward(&client, TensorBuffer::from(x), TensorBuffer::from(dy));
        counters::record(Kernel::GeluBackward);
        vec![dx.into_cube_tensor(client, device)]
    }
}

/// Whether the native kernels take `tensor`: `RUDA_GELU=native`, and its dtype is one
/// the kernels take and its device supports.
fn native_applies<R: RudaRuntime, B: InnerBackend<R>>(tensor: &FloatTensor<B>) -> bool {
    let dtype = tensor.dtype();
    if !kernels::native_enabled() || !kernels::supports_dtype(dtype) {
        return false;
    }
    let storage: StorageType = dtype.into();
    R::client(&B::float_device(tensor))
        .properties()
        .supports_type(storage)
}

/// `Ruda`'s GELU: native where it applies, `composed` (Burn's, on the inner backend) otherwise.
pub(crate) fn gelu<R: RudaRuntime, B: InnerBackend<R>>(
    tensor: FloatTensor<B>,
    composed: impl FnOnce(FloatTensor<B>) -> FloatTensor<B>,
) -> FloatTensor<B> {
    if !native_applies::<R, B>(&tensor) {
        return composed(tensor);
    }
    let (shape, dtype) = (tensor.shape(), tensor.dtype());
    let [y] = custom_op::run::<R, _, 1>(ForwardKernel, vec![tensor], [(shape, dtype)]);
    y
}

/// `Ruda`'s GELU backward from the forward's input `x` and the output's gradient `grad`: native
/// where it applies, `composed` (Burn's) otherwise.
///
/// # Panics
/// On the caller's thread, before anything is queued, when `grad`'s shape or dtype differs
/// from `x`'s.
pub(crate) fn gelu_backward<R: RudaRuntime, B: InnerBackend<R>>(
    x: FloatTensor<B>,
    grad: FloatTensor<B>,
    composed: impl FnOnce(FloatTensor<B>, FloatTensor<B>) -> FloatTensor<B>,
) -> FloatTensor<B> {
    let (shape, dtype) = (x.shape(), x.dtype());
    kernels::check_grad_matches((&shape, dtype), (&grad.shape(), grad.dtype()));
    if !native_applies::<R, B>(&x) {
        return composed(x, grad);
    }
    let [dx] = custom_op::run::<R, _, 1>(BackwardKernel, vec![x, grad], [(shape, dtype)]);
    dx
}
