//! `float_matmul` and the `linear` methods of `ModuleOps` for [`Ruda`]: one native product each
//! where the runtime has one ([`crate::matmul`]), launched directly on burn-cubecl's tensors or,
//! under the `fusion` feature, queued in Burn's fusion stream as a custom operation; Burn's own
//! otherwise.

use burn_backend::ops::{FloatTensorOps, ModuleOps};
use burn_backend::tensor::FloatTensor;
use burn_backend::{Shape, TensorMetadata};
use burn_cubecl::{BoolElement, CubeRuntime, FloatElement, IntElement};

use super::{Inner, Ruda};
use crate::matmul::native_applies;

type Tensor<R, F, I, BT> = FloatTensor<Ruda<R, F, I, BT>>;
type In<R, F, I, BT> = Inner<R, F, I, BT>;

/// Whether `lhs x rhs` runs natively on the operands' device.
fn applies<R, F, I, BT>(
    lhs: &Tensor<R, F, I, BT>,
    lhs_shape: &[usize],
    rhs: &Tensor<R, F, I, BT>,
    rhs_shape: &[usize],
) -> bool
where
    R: ruda_runtime::Runtime + CubeRuntime,
    F: FloatElement,
    I: IntElement,
    BT: BoolElement,
{
    let device = In::<R, F, I, BT>::float_device(lhs);
    native_applies::<R>(&device, (lhs_shape, lhs.dtype()), (rhs_shape, rhs.dtype()))
}

/// `[..., d]` as `[rows, d]` (a no-op for rank 2).
fn rows_of<R, F, I, BT>(tensor: Tensor<R, F, I, BT>) -> Tensor<R, F, I, BT>
where
    R: ruda_runtime::Runtime + CubeRuntime,
    F: FloatElement,
    I: IntElement,
    BT: BoolElement,
{
    let shape = tensor.shape();
    if shape.num_dims() == 2 {
        return tensor;
    }
    let d = shape[shape.num_dims() - 1];
    let rows = shape.num_elements().checked_div(d).unwrap_or(0);
    In::<R, F, I, BT>::float_reshape(tensor, Shape::new([rows, d]))
}

/// `[rows, d]` back to `leading + [d]`.
fn unflatten<R, F, I, BT>(tensor: Tensor<R, F, I, BT>, leading: &[usize]) -> Tensor<R, F, I, BT>
where
    R: ruda_runtime::Runtime + CubeRuntime,
    F: FloatElement,
    I: IntElement,
    BT: BoolElement,
{
    if leading.len() == 1 {
        return tensor;
    }
    let d = tensor.shape()[1];
    let dims: Vec<usize> = leading.iter().copied().chain([d]).collect();
    In::<R, F, I, BT>::float_reshape(tensor, Shape::from(dims))
}

/// The flattened `[rows, d]` shape of a `[..., d]` tensor of rank >= 1 (rank 1: one row).
fn flat_shape(shape: &Shape) -> [usize; 2] {
    let d = shape[shape.num_dims() - 1];
    [shape.num_elements().checked_div(d).unwrap_or(0), d]
}

pub(super) fn float_matmul<R, F, I, BT>(
    lhs: Tensor<R, F, I, BT>,
    rhs: Tensor<R, F, I, BT>,
) -> Tensor<R, F, I, BT>
where
    R: ruda_runtime::Runtime + CubeRuntime,
    F: FloatElement,
    I: IntElement,
    BT: BoolElement,
{
    let (lhs_shape, rhs_shape) = (lhs.shape(), rhs.shape());
    if applies::<R, F, I, BT>(&lhs, &lhs_shape, &rhs, &rhs_shape) {
        imp::native_matmul::<R, F, I, BT>(lhs, rhs)
    } else {
        In::<R, F, I, BT>::float_matmul(lhs, rhs)
    }
}

/// `x [..., d_in] x weight [d_in, d_out] (+ bias [d_out])` as one `[rows, d_in]` product.
pub(super) fn linear<R, F, I, BT>(
    x: Tensor<R, F, I, BT>,
    weight: Tensor<R, F, I, BT>,
    bias: Option<Tensor<R, F, I, BT>>,
) -> Tensor<R, F, I, BT>
where
    R: ruda_runtime::Runtime + CubeRuntime,
    F: FloatElement,
    I: IntElement,
    BT: BoolElement,
{
    let x_shape = x.shape();
    let w_shape = weight.shape();
    let rank = x_shape.num_dims();
    if rank == 0 || !applies::<R, F, I, BT>(&x, &flat_shape(&x_shape), &weight, &w_shape) {
        return In::<R, F, I, BT>::linear(x, weight, bias);
    }
    let leading = &x_shape[..rank - 1];
    let out = imp::native_matmul::<R, F, I, BT>(rows_of::<R, F, I, BT>(x), weight);
    let out = unflatten::<R, F, I, BT>(out, leading);
    match bias {
        Some(bias) => {
            let d_out = w_shape[1];
            let dims: Vec<usize> = core::iter::repeat_n(1, rank - 1).chain([d_out]).collect();
            let bias = In::<R, F, I, BT>::float_reshape(bias, Shape::from(dims));
            In::<R, F, I, BT>::float_add(out, bias)
        }
        None => out,
    }
}

/// `dx = output_grad [..., d_out] x weight^T`, one `[rows, d_out] x [d_out, d_in]` product.
pub(super) fn linear_x_backward<R, F, I, BT>(
    weight: Tensor<R, F, I, BT>,
    output_grad: Tensor<R, F, I, BT>,
) -> Tensor<R, F, I, BT>
where
    R: ruda_runtime::Runtime + CubeRuntime,
    F: FloatElement,
    I: IntElement,
    BT: BoolElement,
{
    let g_shape = output_grad.shape();
    let w_shape = weight.shape();
    let rank = g_shape.num_dims();
    if rank == 0 || w_shape.num_dims() != 2 {
        return In::<R, F, I, BT>::linear_x_backward(weight, output_grad);
    }
    let wt_shape = [w_shape[1], w_shape[0]];
    if !applies::<R, F, I, BT>(&output_grad, &flat_shape(&g_shape), &weight, &wt_shape) {
        return In::<R, F, I, BT>::linear_x_backward(weight, output_grad);
    }
    let weight_t = In::<R, F, I, BT>::float_swap_dims(weight, 0, 1);
    let dx = imp::native_matmul::<R, F, I, BT>(rows_of::<R, F, I, BT>(output_grad), weight_t);
    unflatten::<R, F, I, BT>(dx, &g_shape[..rank - 1])
}

/// `dW = x^T x output_grad`, summed over every leading dimension by the product itself: one
/// `[d_in, rows] x [rows, d_out]` product.
pub(super) fn linear_weight_backward<R, F, I, BT>(
    x: Tensor<R, F, I, BT>,
    output_grad: Tensor<R, F, I, BT>,
) -> Tensor<R, F, I, BT>
where
    R: ruda_runtime::Runtime + CubeRuntime,
    F: FloatElement,
    I: IntElement,
    BT: BoolElement,
{
    let (x_shape, g_shape) = (x.shape(), output_grad.shape());
    if x_shape.num_dims() == 0 || g_shape.num_dims() == 0 {
        return In::<R, F, I, BT>::linear_weight_backward(x, output_grad);
    }
    let [rows, d_in] = flat_shape(&x_shape);
    let [grad_rows, d_out] = flat_shape(&g_shape);
    if rows != grad_rows || !applies::<R, F, I, BT>(&x, &[d_in, rows], &output_grad, &[rows, d_out])
    {
        return In::<R, F, I, BT>::linear_weight_backward(x, output_grad);
    }
    let x_t = In::<R, F, I, BT>::float_swap_dims(rows_of::<R, F, I, BT>(x), 0, 1);
    imp::native_matmul::<R, F, I, BT>(x_t, rows_of::<R, F, I, BT>(output_grad))
}

/// `db = output_grad` summed over every leading dimension: one reduction over `[rows, d_out]`
/// (Burn's default reduces the leading dimensions one after another). On every runtime.
pub(super) fn linear_bias_backward<R, F, I, BT>(
    output_grad: Tensor<R, F, I, BT>,
) -> Tensor<R, F, I, BT>
where
    R: ruda_runtime::Runtime + CubeRuntime,
    F: FloatElement,
    I: IntElement,
    BT: BoolElement,
{
    let shape = output_grad.shape();
    if shape.num_dims() < 2 || shape.num_elements() == 0 {
        return In::<R, F, I, BT>::linear_bias_backward(output_grad);
    }
    let d_out = shape[shape.num_dims() - 1];
    let sums = In::<R, F, I, BT>::float_sum_dim(rows_of::<R, F, I, BT>(output_grad), 0);
    In::<R, F, I, BT>::float_reshape(sums, Shape::new([d_out]))
}

#[cfg(not(feature = "fusion"))]
mod imp {
    use super::*;
    use crate::matmul::cube_matmul;

    /// The native product on `Ruda`'s tensors.
    pub(super) fn native_matmul<R, F, I, BT>(
        lhs: Tensor<R, F, I, BT>,
        rhs: Tensor<R, F, I, BT>,
    ) -> Tensor<R, F, I, BT>
    where
        R: ruda_runtime::Runtime + CubeRuntime,
        F: FloatElement,
        I: IntElement,
        BT: BoolElement,
    {
        cube_matmul::<R>(lhs, rhs)
    }
}

#[cfg(feature = "fusion")]
mod imp {
    use super::*;

    use core::fmt;
    use core::marker::PhantomData;

    use burn_cubecl::CubeBackend;
    use burn_fusion::{
        FusionBackend, FusionRuntime,
        stream::{Operation, OperationStreams},
    };
    use burn_ir::{CustomOpIr, HandleContainer, OperationIr, TensorIr};

    use crate::matmul::{cube_matmul, product_shape};

    type Cube<R, F, I, BT> = CubeBackend<R, F, I, BT>;
    type CubeFusionRuntime<R, F, I, BT> = <Cube<R, F, I, BT> as FusionBackend>::FusionRuntime;
    type Handles<R, F, I, BT> =
        HandleContainer<<CubeFusionRuntime<R, F, I, BT> as FusionRuntime>::FusionHandle>;

    /// Names the backend without owning any of its types.
    type BackendMarker<R, F, I, BT> = PhantomData<fn() -> (R, F, I, BT)>;

    /// The native product queued in the fusion stream: inputs `[lhs, rhs]`, output `[out]`.
    struct NativeMatmul<R, F, I, BT> {
        desc: CustomOpIr,
        _backend: BackendMarker<R, F, I, BT>,
    }

    impl<R, F, I, BT> fmt::Debug for NativeMatmul<R, F, I, BT> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("NativeMatmul")
                .field("desc", &self.desc)
                .finish()
        }
    }

    impl<R, F, I, BT> Operation<CubeFusionRuntime<R, F, I, BT>> for NativeMatmul<R, F, I, BT>
    where
        R: ruda_runtime::Runtime + CubeRuntime,
        F: FloatElement,
        I: IntElement,
        BT: BoolElement,
    {
        fn execute(&self, handles: &mut Handles<R, F, I, BT>) {
            let _span = tracing::trace_span!("ruda_matmul").entered();
            let [lhs, rhs] = &self.desc.inputs[..] else {
                unreachable!("matmul: queued with two inputs")
            };
            let lhs = handles.get_float_tensor::<Cube<R, F, I, BT>>(lhs);
            let rhs = handles.get_float_tensor::<Cube<R, F, I, BT>>(rhs);
            let out = cube_matmul::<R>(lhs, rhs);
            handles.register_float_tensor::<Cube<R, F, I, BT>>(&self.desc.outputs[0].id, out);
        }
    }

    /// The native product on `Ruda`'s tensors, queued in the fusion stream.
    pub(super) fn native_matmul<R, F, I, BT>(
        lhs: Tensor<R, F, I, BT>,
        rhs: Tensor<R, F, I, BT>,
    ) -> Tensor<R, F, I, BT>
    where
        R: ruda_runtime::Runtime + CubeRuntime,
        F: FloatElement,
        I: IntElement,
        BT: BoolElement,
    {
        let shape = Shape::from(product_shape(&lhs.shape, &rhs.shape));
        let client = lhs.client.clone();
        let dtype = lhs.dtype;
        let streams = OperationStreams::with_inputs([&lhs, &rhs]);
        let out = TensorIr::uninit(client.create_empty_handle(), shape, dtype);
        let inputs = [lhs.into_ir(), rhs.into_ir()];
        let desc = CustomOpIr::new("ruda_matmul", &inputs, &[out]);
        let op = NativeMatmul::<R, F, I, BT> {
            desc: desc.clone(),
            _backend: PhantomData,
        };
        let [out] = client
            .register(streams, OperationIr::Custom(desc), op)
            .try_into()
            .expect("matmul: one output");
        out
    }
}
