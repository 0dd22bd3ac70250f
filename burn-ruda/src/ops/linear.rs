//! A linear layer's backward as one operation: the [`LinearBackend`] capability (which
//! [`crate::Autodiff`] records `linear` with), and `Ruda`'s implementation, one custom operation
//! in burn-fusion's stream that computes every gradient the layer's parents want.
//!
//! Burn's autodiff runs a linear layer's backward as three operations (`linear_x_backward`,
//! `linear_weight_backward`, `linear_bias_backward`), each with the reshapes around it. Through
//! burn-fusion each operation that is not fused away costs 20-28 us of host time, and a
//! transformer step has 37 linear layers, so here the three are one operation: the products
//! `dx = dy x W^T` and `dW = x^T x dy` over `[rows, d]` views of the activations (native
//! products where the runtime has them, burn-cubecl's elsewhere), and the bias gradient, the
//! sum of `dy`'s rows (a full-precision product `ones x dy` where the runtime has native
//! products, burn-cubecl's reduction elsewhere), launched back to back on burn-fusion's thread.
//!
//! `RUDA_LINEAR=burn` (or `off`) records Burn's own node instead, to compare the two in one
//! build.

use burn_backend::{
    Backend, DType, Shape, TensorMetadata, ops::FloatTensorOps, tensor::FloatTensor,
};
use burn_cubecl::{BoolElement, CubeBackend, FloatElement, IntElement, tensor::CubeTensor};
use ruda_runtime::TensorBuffer;
use ruda_runtime::matmul::supports_dtype;

use super::counters::{self, Kernel};
use super::ones::ones_row;
use super::{NativeKernel, RudaRuntime, custom_op};
use crate::backend::Ruda;

/// The variable that turns the single-operation backward off: `burn`, `off`, `0`, `false` or
/// `no` records Burn's linear node (three operations); anything else, or unset, records ruda's.
pub const ENV_LINEAR: &str = "RUDA_LINEAR";

/// Whether [`crate::Autodiff`] records `linear` as ruda's node (`RUDA_LINEAR`, read once per
/// process).
pub fn native_enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| ruda_runtime::env::switch_on(ENV_LINEAR, &["burn"]))
}

/// Which gradients a linear layer's backward computes: those of the parents that want one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// The input's, `dy x W^T`.
    pub x: bool,
    /// The weight's, `x^T x dy` summed over every leading dimension.
    pub weight: bool,
    /// The bias's, `dy` summed over every leading dimension.
    pub bias: bool,
}

/// The gradients [`LinearBackend::linear_backward`] computed: `Some` exactly where
/// [`Wanted`] asked.
#[derive(Debug)]
pub struct LinearGrads<B: Backend> {
    /// The input's gradient, shaped as the input.
    pub x: Option<FloatTensor<B>>,
    /// The weight's gradient, `[d_in, d_out]`.
    pub weight: Option<FloatTensor<B>>,
    /// The bias's gradient, `[d_out]`.
    pub bias: Option<FloatTensor<B>>,
}

/// A backend that may compute a linear layer's gradients in one operation.
pub trait LinearBackend: Backend {
    /// The gradients of `y = x W (+ b)` that `wanted` asks for, from the output's gradient
    /// `output_grad` (`[..., d_out]`). `weight` (`[d_in, d_out]`) must be given when the input's
    /// gradient is wanted, `x` (`[..., d_in]`) when the weight's is.
    ///
    /// The default runs Burn's three methods, one per gradient.
    ///
    /// # Panics
    /// When a tensor a wanted gradient needs is missing, or when the shapes do not chain.
    fn linear_backward(
        x: Option<FloatTensor<Self>>,
        weight: Option<FloatTensor<Self>>,
        output_grad: FloatTensor<Self>,
        wanted: Wanted,
    ) -> LinearGrads<Self> {
        check_args::<Self>(x.as_ref(), weight.as_ref(), &output_grad, wanted);
        separate_backward::<Self>(x, weight, output_grad, wanted)
    }
}

/// Burn's three backward methods, one per wanted gradient.
fn separate_backward<B: Backend>(
    x: Option<FloatTensor<B>>,
    weight: Option<FloatTensor<B>>,
    output_grad: FloatTensor<B>,
    wanted: Wanted,
) -> LinearGrads<B> {
    let dx = wanted
        .x
        .then(|| B::linear_x_backward(weight.expect("checked"), output_grad.clone()));
    let dw = wanted
        .weight
        .then(|| B::linear_weight_backward(x.expect("checked"), output_grad.clone()));
    let db = wanted.bias.then(|| B::linear_bias_backward(output_grad));
    LinearGrads {
        x: dx,
        weight: dw,
        bias: db,
    }
}

/// Checks on the caller's thread that the tensors the wanted gradients need are given and that
/// their shapes chain, with Burn's kind of message.
fn check_args<B: Backend>(
    x: Option<&FloatTensor<B>>,
    weight: Option<&FloatTensor<B>>,
    output_grad: &FloatTensor<B>,
    wanted: Wanted,
) {
    let g = output_grad.shape();
    assert!(
        g.num_dims() >= 1,
        "linear backward: the output's gradient must have at least one dimension, got {g:?}"
    );
    let d_out = g[g.num_dims() - 1];
    if wanted.x {
        let w = weight
            .expect("linear backward: the input's gradient needs the weight")
            .shape();
        assert!(
            w.num_dims() == 2 && w[1] == d_out,
            "linear backward: weight {w:?} does not map to the output's gradient {g:?}"
        );
    }
    if wanted.weight {
        let x = x
            .expect("linear backward: the weight's gradient needs the input")
            .shape();
        assert!(
            x.num_dims() == g.num_dims() && x[..x.num_dims() - 1] == g[..g.num_dims() - 1],
            "linear backward: input {x:?} and the output's gradient {g:?} differ in their \
             leading dimensions"
        );
    }
}

/// The single-operation backward: inputs `[dy, W if dx is wanted, x if dW is wanted]`,
/// outputs `[dx, dW, db]`, those wanted, in that order.
struct BackwardKernel {
    wanted: Wanted,
}

impl BackwardKernel {
    /// Every combination its own name: burn-fusion tells operations apart by name and number of
    /// outputs.
    const fn name_of(wanted: Wanted) -> &'static str {
        match (wanted.x, wanted.weight, wanted.bias) {
            (true, true, true) => "ruda_linear_backward_x_w_b",
            (true, true, false) => "ruda_linear_backward_x_w",
            (true, false, true) => "ruda_linear_backward_x_b",
            (true, false, false) => "ruda_linear_backward_x",
            (false, true, true) => "ruda_linear_backward_w_b",
            (false, true, false) => "ruda_linear_backward_w",
            (false, false, true) => "ruda_linear_backward_b",
            (false, false, false) => "ruda_linear_backward_none",
        }
    }
}

/// burn-cubecl's backend on runtime `R`: its ops on burn-cubecl tensors run at once (the element
/// types only name defaults for new tensors; these ops keep their inputs' dtype).
type Cube<R> = CubeBackend<R, f32, i32, u32>;

/// `[..., d]` as `[rows, d]` (a view where the strides allow, else a copy: burn-cubecl's reshape).
fn rows_of<R: RudaRuntime>(tensor: CubeTensor<R>) -> CubeTensor<R> {
    let shape = tensor.shape();
    let d = shape[shape.num_dims() - 1];
    let rows = shape.num_elements() / d;
    Cube::<R>::float_reshape(tensor, Shape::new([rows, d]))
}

/// Whether the runtime has a native product for `tensor`'s dtype.
fn native_product<R: RudaRuntime>(tensor: &CubeTensor<R>) -> bool {
    supports_dtype(tensor.dtype) && R::has_native_matmul(&tensor.client)
}

/// `lhs x rhs` of two matrices: the runtime's native product where it has one for the dtype,
/// burn-cubecl's otherwise.
fn product<R: RudaRuntime>(lhs: CubeTensor<R>, rhs: CubeTensor<R>) -> CubeTensor<R> {
    if !native_product(&lhs) {
        return Cube::<R>::float_matmul(lhs, rhs);
    }
    let (client, device) = (lhs.client.clone(), lhs.device.clone());
    let out = R::matmul(&client, TensorBuffer::from(lhs), TensorBuffer::from(rhs));
    counters::record(Kernel::Matmul);
    out.into_cube_tensor(client, device)
}

/// The sums of `[rows, d]`'s columns, `[1, d]`. Where the runtime has a native product, one
/// `ones [1, rows] x rows` product in full precision (never TF32, so the sum is a reduction's):
/// burn-cubecl's reduction over the leading dimension took 78 us per `[8192, 512]` sum on an
/// H100, 37 of them 2.9 ms of a transformer step's 16 ms of kernel time. The row of ones is
/// filled once per device, dtype and length ([`super::ones`]). burn-cubecl's reduction elsewhere.
fn column_sums<R: RudaRuntime>(rows: CubeTensor<R>) -> CubeTensor<R> {
    if !native_product(&rows) {
        return Cube::<R>::float_sum_dim(rows, 0);
    }
    let (client, device, dtype) = (rows.client.clone(), rows.device.clone(), rows.dtype);
    let ones = ones_row::<R>(rows.shape()[0], &device, dtype);
    let out = R::matmul_full_precision(&client, TensorBuffer::from(ones), TensorBuffer::from(rows));
    counters::record(Kernel::Matmul);
    out.into_cube_tensor(client, device)
}

impl<R: RudaRuntime> NativeKernel<R> for BackwardKernel {
    fn name(&self) -> &'static str {
        Self::name_of(self.wanted)
    }

    fn launch(&self, inputs: Vec<CubeTensor<R>>) -> Vec<CubeTensor<R>> {
        let mut inputs = inputs.into_iter();
        let grad = inputs
            .next()
            .expect("linear backward: queued with dy first");
        let grad_shape = grad.shape();
        let leading = &grad_shape[..grad_shape.num_dims() - 1];
        let grad_rows = rows_of(grad);
        let mut outputs = Vec::with_capacity(3);
        if self.wanted.x {
            let weight = inputs
                .next()
                .expect("linear backward: queued with the weight");
            let d_in = weight.shape()[0];
            let weight_t = Cube::<R>::float_swap_dims(weight, 0, 1);
            let dx = product(grad_rows.clone(), weight_t);
            let dims: Vec<usize> = leading.iter().copied().chain([d_in]).collect();
            outputs.push(Cube::<R>::float_reshape(dx, Shape::from(dims)));
        }
        if self.wanted.weight {
            let x = inputs
                .next()
                .expect("linear backward: queued with the input");
            let x_t = Cube::<R>::float_swap_dims(rows_of(x), 0, 1);
            outputs.push(product(x_t, grad_rows.clone()));
        }
        if self.wanted.bias {
            let d_out = grad_rows.shape()[1];
            let sums = column_sums(grad_rows);
            outputs.push(Cube::<R>::float_reshape(sums, Shape::new([d_out])));
        }
        counters::record(Kernel::LinearBackward);
        outputs
    }
}

/// Whether the single operation takes these tensors: non-empty, one float dtype. Empty tensors
/// and mixed dtypes take Burn's three methods (and their messages).
fn single_op_applies<B: Backend>(
    x: Option<&FloatTensor<B>>,
    weight: Option<&FloatTensor<B>>,
    output_grad: &FloatTensor<B>,
) -> bool {
    let dtype = output_grad.dtype();
    let usable = |t: &FloatTensor<B>| t.dtype() == dtype && t.shape().num_elements() > 0;
    matches!(dtype, DType::F64 | DType::F32 | DType::F16 | DType::BF16)
        && output_grad.shape().num_elements() > 0
        && x.is_none_or(usable)
        && weight.is_none_or(usable)
}

impl<R: RudaRuntime, F: FloatElement, I: IntElement, BT: BoolElement> LinearBackend
    for Ruda<R, F, I, BT>
{
    fn linear_backward(
        x: Option<FloatTensor<Self>>,
        weight: Option<FloatTensor<Self>>,
        output_grad: FloatTensor<Self>,
        wanted: Wanted,
    ) -> LinearGrads<Self> {
        check_args::<Self>(x.as_ref(), weight.as_ref(), &output_grad, wanted);
        let wanted_any = wanted.x || wanted.weight || wanted.bias;
        if !wanted_any || !single_op_applies::<Self>(x.as_ref(), weight.as_ref(), &output_grad) {
            return separate_backward::<Self>(x, weight, output_grad, wanted);
        }
        let (g_shape, dtype) = (output_grad.shape(), output_grad.dtype());
        let rank = g_shape.num_dims();
        let d_out = g_shape[rank - 1];
        let mut inputs = vec![output_grad];
        let mut outputs: Vec<(Shape, DType)> = Vec::with_capacity(3);
        if wanted.x {
            let weight = weight.expect("checked");
            let d_in = weight.shape()[0];
            let dims: Vec<usize> = g_shape[..rank - 1].iter().copied().chain([d_in]).collect();
            outputs.push((Shape::from(dims), dtype));
            inputs.push(weight);
        }
        if wanted.weight {
            let x = x.expect("checked");
            let x_shape = x.shape();
            outputs.push((Shape::new([x_shape[x_shape.num_dims() - 1], d_out]), dtype));
            inputs.push(x);
        }
        if wanted.bias {
            outputs.push((Shape::new([d_out]), dtype));
        }
        let kernel = BackwardKernel { wanted };
        let mut grads = match outputs.len() {
            1 => custom_op::run::<R, _, 1>(kernel, inputs, [outputs[0].clone()]).to_vec(),
            2 => {
                custom_op::run::<R, _, 2>(kernel, inputs, [outputs[0].clone(), outputs[1].clone()])
                    .to_vec()
            }
            _ => custom_op::run::<R, _, 3>(
                kernel,
                inputs,
                [outputs[0].clone(), outputs[1].clone(), outputs[2].clone()],
            )
            .to_vec(),
        }
        .into_iter();
        LinearGrads {
            x: wanted
                .x
                .then(|| grads.next().expect("one output per gradient")),
            weight: wanted
                .weight
                .then(|| grads.next().expect("one output per gradient")),
            bias: wanted
                .bias
                .then(|| grads.next().expect("one output per gradient")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_combination_has_its_own_name() {
        let mut names = std::collections::HashSet::new();
        for bits in 0..8u8 {
            let wanted = Wanted {
                x: bits & 1 != 0,
                weight: bits & 2 != 0,
                bias: bits & 4 != 0,
            };
            assert!(names.insert(BackwardKernel::name_of(wanted)));
        }
    }
}
