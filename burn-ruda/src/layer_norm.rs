//! LayerNorm on [`Ruda`]: the native kernels of the runtime, wired into Burn.
//!
//! Under the `fusion` feature the native forward and backward are *custom operations* of
//! Burn's fusion stream (`OperationIr::Custom`, as burn-vision's connected components): they
//! are queued in order with the surrounding operations, never force a flush, and run their
//! kernel when the stream executes (the fused operations before them are executed first).
//! Without `fusion` they launch directly on burn-cubecl's tensors.

use core::sync::atomic::{AtomicUsize, Ordering};

use burn_backend::{
    Backend, TensorMetadata,
    tensor::{Device, FloatTensor},
};
use burn_cubecl::{BoolElement, CubeRuntime, FloatElement, IntElement, tensor::CubeTensor};
use ruda_runtime::TensorBuffer;

use crate::backend::Ruda;

/// Number of native LayerNorm forward kernels launched by this process (a test hook: it lets a
/// test prove that the native path ran, and how many times).
///
/// It counts launches, not calls: under the `fusion` feature the kernel is launched when the
/// fusion stream executes, so read it after reading a result or after `Backend::sync`.
pub static NATIVE_FORWARD_CALLS: AtomicUsize = AtomicUsize::new(0);
/// Number of native LayerNorm backward kernels launched by this process (a test hook).
pub static NATIVE_BACKWARD_CALLS: AtomicUsize = AtomicUsize::new(0);

/// The current values of [`NATIVE_FORWARD_CALLS`] and [`NATIVE_BACKWARD_CALLS`].
pub fn native_calls() -> (usize, usize) {
    (
        NATIVE_FORWARD_CALLS.load(Ordering::SeqCst),
        NATIVE_BACKWARD_CALLS.load(Ordering::SeqCst),
    )
}

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

/// Whether the native LayerNorm of `B` takes `tensor`: the backend has one and the tensor has
/// at least one dimension with a non-empty last dimension (other shapes go to the composed
/// LayerNorm, which handles them).
pub(crate) fn native_applies<B: LayerNormBackend>(tensor: &FloatTensor<B>) -> bool {
    let shape = tensor.shape();
    let usable = shape.num_dims() >= 1 && shape[shape.num_dims() - 1] > 0;
    usable && B::has_native_layer_norm(&B::float_device(tensor))
}

/// The statistics' shape: the input's without its last dimension.
#[cfg(feature = "fusion")]
fn stats_shape(shape: &burn_backend::Shape) -> burn_backend::Shape {
    let dims: Vec<usize> = shape.iter().take(shape.num_dims() - 1).copied().collect();
    burn_backend::Shape::from(dims)
}

/// Native forward on burn-cubecl tensors.
fn cube_forward<R: ruda_runtime::Runtime + CubeRuntime>(
    tensor: CubeTensor<R>,
    gamma: CubeTensor<R>,
    beta: Option<CubeTensor<R>>,
    epsilon: f64,
) -> [CubeTensor<R>; 3] {
    let client = tensor.client.clone();
    let device = tensor.device.clone();
    let outputs = R::layer_norm(
        &client,
        TensorBuffer::from(tensor),
        TensorBuffer::from(gamma),
        beta.map(TensorBuffer::from),
        epsilon,
    );
    NATIVE_FORWARD_CALLS.fetch_add(1, Ordering::SeqCst);
    outputs.map(|buffer| buffer.into_cube_tensor(client.clone(), device.clone()))
}

/// Native backward on burn-cubecl tensors.
fn cube_backward<R: ruda_runtime::Runtime + CubeRuntime>(
    tensor: CubeTensor<R>,
    gamma: CubeTensor<R>,
    grad: CubeTensor<R>,
    mean: CubeTensor<R>,
    rstd: CubeTensor<R>,
) -> [CubeTensor<R>; 3] {
    let client = tensor.client.clone();
    let device = tensor.device.clone();
    let outputs = R::layer_norm_backward(
        &client,
        TensorBuffer::from(tensor),
        TensorBuffer::from(gamma),
        TensorBuffer::from(grad),
        TensorBuffer::from(mean),
        TensorBuffer::from(rstd),
    );
    NATIVE_BACKWARD_CALLS.fetch_add(1, Ordering::SeqCst);
    outputs.map(|buffer| buffer.into_cube_tensor(client.clone(), device.clone()))
}

#[cfg(not(feature = "fusion"))]
impl<R, F, I, BT> LayerNormBackend for Ruda<R, F, I, BT>
where
    R: ruda_runtime::Runtime + CubeRuntime,
    F: FloatElement,
    I: IntElement,
    BT: BoolElement,
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
        cube_forward::<R>(tensor, gamma, beta, epsilon)
    }

    fn layer_norm_native_backward(
        tensor: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        rstd: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 3] {
        cube_backward::<R>(tensor, gamma, grad, mean, rstd)
    }
}

#[cfg(feature = "fusion")]
mod fusion {
    use super::*;

    use core::fmt;
    use core::marker::PhantomData;

    use burn_backend::DType;
    use burn_cubecl::CubeBackend;
    use burn_fusion::{
        FusionBackend, FusionRuntime, FusionTensor,
        stream::{Operation, OperationStreams},
    };
    use burn_ir::{CustomOpIr, HandleContainer, OperationIr, TensorIr};

    type Cube<R, F, I, BT> = CubeBackend<R, F, I, BT>;
    type CubeFusionRuntime<R, F, I, BT> = <Cube<R, F, I, BT> as FusionBackend>::FusionRuntime;
    type Handles<R, F, I, BT> =
        HandleContainer<<CubeFusionRuntime<R, F, I, BT> as FusionRuntime>::FusionHandle>;

    /// Which native kernel a [`NativeOp`] runs.
    #[derive(Clone, Copy, Debug)]
    enum Kind {
        /// Inputs `[x, gamma]` or `[x, gamma, beta]`; outputs `[out, mean, rstd]`.
        Forward { epsilon: f64 },
        /// Inputs `[x, gamma, dy, mean, rstd]`; outputs `[dx, dgamma, dbeta]`.
        Backward,
    }

    /// Names the backend without owning any of its types.
    type BackendMarker<R, F, I, BT> = PhantomData<fn() -> (R, F, I, BT)>;

    /// A native LayerNorm kernel queued in the fusion stream.
    struct NativeOp<R, F, I, BT> {
        desc: CustomOpIr,
        kind: Kind,
        _backend: BackendMarker<R, F, I, BT>,
    }

    impl<R, F, I, BT> fmt::Debug for NativeOp<R, F, I, BT> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("NativeLayerNorm")
                .field("desc", &self.desc)
                .field("kind", &self.kind)
                .finish()
        }
    }

    impl<R, F, I, BT> Operation<CubeFusionRuntime<R, F, I, BT>> for NativeOp<R, F, I, BT>
    where
        R: ruda_runtime::Runtime + CubeRuntime,
        F: FloatElement,
        I: IntElement,
        BT: BoolElement,
    {
        fn execute(&self, handles: &mut Handles<R, F, I, BT>) {
            let _span = match self.kind {
                Kind::Forward { .. } => tracing::trace_span!("ruda_layer_norm_forward"),
                Kind::Backward => tracing::trace_span!("ruda_layer_norm_backward"),
            }
            .entered();
            let mut inputs: Vec<CubeTensor<R>> = self
                .desc
                .inputs
                .iter()
                .map(|ir| handles.get_float_tensor::<Cube<R, F, I, BT>>(ir))
                .collect();
            let outputs = match self.kind {
                Kind::Forward { epsilon } => {
                    let beta = (inputs.len() == 3).then(|| inputs.pop()).flatten();
                    let gamma = inputs.pop().expect("LayerNorm: gamma");
                    let tensor = inputs.pop().expect("LayerNorm: input");
                    cube_forward::<R>(tensor, gamma, beta, epsilon)
                }
                Kind::Backward => {
                    let [tensor, gamma, grad, mean, rstd]: [CubeTensor<R>; 5] =
                        inputs.try_into().expect("LayerNorm backward: five inputs");
                    cube_backward::<R>(tensor, gamma, grad, mean, rstd)
                }
            };
            for (ir, tensor) in self.desc.outputs.iter().zip(outputs) {
                handles.register_float_tensor::<Cube<R, F, I, BT>>(&ir.id, tensor);
            }
        }
    }

    /// Queues a native kernel with `inputs` and outputs of the given shapes and dtypes.
    fn register<R, F, I, BT>(
        name: &'static str,
        kind: Kind,
        inputs: Vec<FusionTensor<CubeFusionRuntime<R, F, I, BT>>>,
        outputs: [(burn_backend::Shape, DType); 3],
    ) -> [FusionTensor<CubeFusionRuntime<R, F, I, BT>>; 3]
    where
        R: ruda_runtime::Runtime + CubeRuntime,
        F: FloatElement,
        I: IntElement,
        BT: BoolElement,
    {
        let client = inputs[0].client.clone();
        let streams = OperationStreams::with_inputs(inputs.iter());
        let outputs = outputs
            .map(|(shape, dtype)| TensorIr::uninit(client.create_empty_handle(), shape, dtype));
        let inputs: Vec<TensorIr> = inputs.into_iter().map(FusionTensor::into_ir).collect();
        let desc = CustomOpIr::new(name, &inputs, &outputs);
        let op = NativeOp::<R, F, I, BT> {
            desc: desc.clone(),
            kind,
            _backend: PhantomData,
        };
        client
            .register(streams, OperationIr::Custom(desc), op)
            .try_into()
            .expect("LayerNorm: three outputs")
    }

    impl<R, F, I, BT> LayerNormBackend for Ruda<R, F, I, BT>
    where
        R: ruda_runtime::Runtime + CubeRuntime,
        F: FloatElement,
        I: IntElement,
        BT: BoolElement,
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
            let shape = tensor.shape.clone();
            let stats = stats_shape(&shape);
            let dtype = tensor.dtype;
            let mut inputs = vec![tensor, gamma];
            inputs.extend(beta);
            register::<R, F, I, BT>(
                "ruda_layer_norm",
                Kind::Forward { epsilon },
                inputs,
                [
                    (shape, dtype),
                    (stats.clone(), DType::F32),
                    (stats, DType::F32),
                ],
            )
        }

        fn layer_norm_native_backward(
            tensor: FloatTensor<Self>,
            gamma: FloatTensor<Self>,
            grad: FloatTensor<Self>,
            mean: FloatTensor<Self>,
            rstd: FloatTensor<Self>,
        ) -> [FloatTensor<Self>; 3] {
            let shape = tensor.shape.clone();
            let dtype = tensor.dtype;
            let gamma_shape = gamma.shape.clone();
            let gamma_dtype = gamma.dtype;
            register::<R, F, I, BT>(
                "ruda_layer_norm_backward",
                Kind::Backward,
                vec![tensor, gamma, grad, mean, rstd],
                [
                    (shape, dtype),
                    (gamma_shape.clone(), gamma_dtype),
                    (gamma_shape, gamma_dtype),
                ],
            )
        }
    }
}
