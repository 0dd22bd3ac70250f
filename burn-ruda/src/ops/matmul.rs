//! Native matrix products ([`ruda_runtime::matmul`]: cuBLAS on [`crate::RudaCuda`]).
//!
//! [`crate::Ruda`] takes over `float_matmul` and the four `linear` methods of Burn's
//! `ModuleOps` (which `burn::nn::Linear` and Burn's autodiff call): where the runtime has a native
//! product ([`ruda_runtime::Runtime::has_native_matmul`]) and the dtype has one
//! ([`ruda_runtime::matmul::supports_dtype`]), each is one product of the right shape, run
//! through [`super::custom_op`]; a linear layer over `[batch, seq, d_in]` is one
//! `[batch * seq, d_in] x [d_in, d_out]` product, its weight gradient one
//! `[d_in, batch * seq] x [batch * seq, d_out]` product instead of a batched product and a sum.
//! Elsewhere (wgpu, another dtype, a product with an empty dimension or an operand broadcast
//! over only some batch dimensions) the operation is Burn's own.

use burn_backend::{DType, Shape, TensorMetadata};
use burn_cubecl::tensor::CubeTensor;
use ruda_runtime::TensorBuffer;
use ruda_runtime::matmul::{output_shape, supports_dtype};

use super::counters::{self, Kernel};
use super::{InnerBackend, NativeKernel, RudaRuntime, RudaTensor, custom_op};

/// Whether `lhs x rhs` (shapes and dtypes, as known before the fusion stream runs) is a native
/// product on `device` (the strides do not matter: see [`ProductKernel`]).
fn native_applies<R: RudaRuntime>(
    device: &R::CubeDevice,
    lhs: (&[usize], DType),
    rhs: (&[usize], DType),
) -> bool {
    lhs.1 == rhs.1
        && supports_dtype(lhs.1)
        && output_shape(lhs.0, rhs.0).is_ok()
        && R::has_native_matmul(&R::client(device))
}

/// The native product: inputs `[lhs, rhs]`, output `[out]` (the runtime copies an operand
/// whose strides no GEMM operand describes).
struct ProductKernel;

impl<R: RudaRuntime> NativeKernel<R> for ProductKernel {
    fn name(&self) -> &'static str {
        "ruda_matmul"
    }

    fn launch(&self, inputs: Vec<CubeTensor<R>>) -> Vec<CubeTensor<R>> {
        let [lhs, rhs]: [CubeTensor<R>; 2] = inputs
            .try_into()
            .unwrap_or_else(|_| unreachable!("matmul: queued with two inputs"));
        let (client, device) = (lhs.client.clone(), lhs.device.clone());
        let out = R::matmul(&client, TensorBuffer::from(lhs), TensorBuffer::from(rhs));
        counters::record(Kernel::Matmul);
        vec![out.into_cube_tensor(client, device)]
    }
}

/// The native product `lhs x rhs`.
fn native_matmul<R: RudaRuntime>(lhs: RudaTensor<R>, rhs: RudaTensor<R>) -> RudaTensor<R> {
    let shape = Shape::from(
        output_shape(&lhs.shape(), &rhs.shape()).expect("ruda matmul: checked by native_applies"),
    );
    let dtype = lhs.dtype();
    let [out] = custom_op::run::<R, _, 1>(ProductKernel, vec![lhs, rhs], [(shape, dtype)]);
    out
}

/// Whether `lhs x rhs` runs natively on the operands' device (shapes as they will be given).
fn applies<R: RudaRuntime, In: InnerBackend<R>>(
    lhs: &RudaTensor<R>,
    lhs_shape: &[usize],
    rhs: &RudaTensor<R>,
    rhs_shape: &[usize],
) -> bool {
    let device = In::float_device(lhs);
    native_applies::<R>(&device, (lhs_shape, lhs.dtype()), (rhs_shape, rhs.dtype()))
}

/// `[..., d]` as `[rows, d]` (a no-op for rank 2).
fn rows_of<R: RudaRuntime, In: InnerBackend<R>>(tensor: RudaTensor<R>) -> RudaTensor<R> {
    let shape = tensor.shape();
    if shape.num_dims() == 2 {
        return tensor;
    }
    In::float_reshape(tensor, Shape::new(flat_shape(&shape)))
}

/// `[rows, d]` back to `leading + [d]`.
fn unflatten<R: RudaRuntime, In: InnerBackend<R>>(
    tensor: RudaTensor<R>,
    leading: &[usize],
) -> RudaTensor<R> {
    if leading.len() == 1 {
        return tensor;
    }
    let d = tensor.shape()[1];
    let dims: Vec<usize> = leading.iter().copied().chain([d]).collect();
    In::float_reshape(tensor, Shape::from(dims))
}

/// The flattened `[rows, d]` shape of a `[..., d]` tensor of rank >= 1 (rank 1: one row).
fn flat_shape(shape: &Shape) -> [usize; 2] {
    let d = shape[shape.num_dims() - 1];
    [shape.num_elements().checked_div(d).unwrap_or(0), d]
}

/// `float_matmul`: native where it applies, `In`'s otherwise.
pub(crate) fn float_matmul<R: RudaRuntime, In: InnerBackend<R>>(
    lhs: RudaTensor<R>,
    rhs: RudaTensor<R>,
) -> RudaTensor<R> {
    let (lhs_shape, rhs_shape) = (lhs.shape(), rhs.shape());
    if applies::<R, In>(&lhs, &lhs_shape, &rhs, &rhs_shape) {
        native_matmul::<R>(lhs, rhs)
    } else {
        In::float_matmul(lhs, rhs)
    }
}

/// `x [..., d_in] x weight [d_in, d_out] (+ bias [d_out])` as one `[rows, d_in]` product.
pub(crate) fn linear<R: RudaRuntime, In: InnerBackend<R>>(
    x: RudaTensor<R>,
    weight: RudaTensor<R>,
    bias: Option<RudaTensor<R>>,
) -> RudaTensor<R> {
    let x_shape = x.shape();
    let w_shape = weight.shape();
    let rank = x_shape.num_dims();
    if rank == 0 || !applies::<R, In>(&x, &flat_shape(&x_shape), &weight, &w_shape) {
        return In::linear(x, weight, bias);
    }
    let leading = &x_shape[..rank - 1];
    let out = native_matmul::<R>(rows_of::<R, In>(x), weight);
    let out = unflatten::<R, In>(out, leading);
    match bias {
        Some(bias) => {
            let d_out = w_shape[1];
            let dims: Vec<usize> = core::iter::repeat_n(1, rank - 1).chain([d_out]).collect();
            let bias = In::float_reshape(bias, Shape::from(dims));
            In::float_add(out, bias)
        }
        None => out,
    }
}

/// `dx = output_grad [..., d_out] x weight^T`, one `[rows, d_out] x [d_out, d_in]` product.
pub(crate) fn linear_x_backward<R: RudaRuntime, In: InnerBackend<R>>(
    weight: RudaTensor<R>,
    output_grad: RudaTensor<R>,
) -> RudaTensor<R> {
    let g_shape = output_grad.shape();
    let w_shape = weight.shape();
    let rank = g_shape.num_dims();
    if rank == 0 || w_shape.num_dims() != 2 {
        return In::linear_x_backward(weight, output_grad);
    }
    let wt_shape = [w_shape[1], w_shape[0]];
    if !applies::<R, In>(&output_grad, &flat_shape(&g_shape), &weight, &wt_shape) {
        return In::linear_x_backward(weight, output_grad);
    }
    let weight_t = In::float_swap_dims(weight, 0, 1);
    let dx = native_matmul::<R>(rows_of::<R, In>(output_grad), weight_t);
    unflatten::<R, In>(dx, &g_shape[..rank - 1])
}

/// `dW = x^T x output_grad`, summed over every leading dimension by the product itself: one
/// `[d_in, rows] x [rows, d_out]` product.
pub(crate) fn linear_weight_backward<R: RudaRuntime, In: InnerBackend<R>>(
    x: RudaTensor<R>,
    output_grad: RudaTensor<R>,
) -> RudaTensor<R> {
    let (x_shape, g_shape) = (x.shape(), output_grad.shape());
    if x_shape.num_dims() == 0 || g_shape.num_dims() == 0 {
        return In::linear_weight_backward(x, output_grad);
    }
    let [rows, d_in] = flat_shape(&x_shape);
    let [grad_rows, d_out] = flat_shape(&g_shape);
    if rows != grad_rows || !applies::<R, In>(&x, &[d_in, rows], &output_grad, &[rows, d_out]) {
        return In::linear_weight_backward(x, output_grad);
    }
    let x_t = In::float_swap_dims(rows_of::<R, In>(x), 0, 1);
    native_matmul::<R>(x_t, rows_of::<R, In>(output_grad))
}

/// `db = output_grad` summed over every leading dimension: one reduction over `[rows, d_out]`
/// (Burn's default reduces the leading dimensions one after another). On every runtime.
pub(crate) fn linear_bias_backward<R: RudaRuntime, In: InnerBackend<R>>(
    output_grad: RudaTensor<R>,
) -> RudaTensor<R> {
    let shape = output_grad.shape();
    if shape.num_dims() < 2 || shape.num_elements() == 0 {
        return In::linear_bias_backward(output_grad);
    }
    let d_out = shape[shape.num_dims() - 1];
    let sums = In::float_sum_dim(rows_of::<R, In>(output_grad), 0);
    In::float_reshape(sums, Shape::new([d_out]))
}
