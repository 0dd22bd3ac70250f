//! [`LayerNormBackend`] for [`Ruda`]: the runtime's native kernels, launched directly on
//! burn-cubecl's tensors, or, under the `fusion` feature, queued in Burn's fusion stream as
//! custom operations (see [`crate::layer_norm`]).

use burn_backend::tensor::{Device, FloatTensor};
use burn_cubecl::{BoolElement, CubeRuntime, FloatElement, IntElement};

use super::Ruda;
use crate::layer_norm::{LayerNormBackend, cube_backward, cube_forward};

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
    use burn_cubecl::tensor::CubeTensor;
    use burn_fusion::{
        FusionTensor,
        stream::{Operation, OperationStreams},
    };
    use burn_ir::{CustomOpIr, OperationIr, TensorIr};

    use crate::backend::cube_fusion::{BackendMarker, Cube, CubeFusionRuntime, Handles};
    use crate::layer_norm::stats_shape;

    /// Which native kernel a [`NativeOp`] runs.
    #[derive(Clone, Copy, Debug)]
    enum Kind {
        /// Inputs `[x, gamma]` or `[x, gamma, beta]`; outputs `[out, mean, rstd]`, or `[out]`.
        Forward { epsilon: f64 },
        /// Inputs `[x, gamma, dy, mean, rstd]`; outputs `[dx, dgamma, dbeta]`.
        Backward,
    }

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
            // Outputs the operation did not register (the statistics of a forward whose output
            // alone is wanted) are dropped here; their memory is reused in stream order.
            for (ir, tensor) in self.desc.outputs.iter().zip(outputs) {
                handles.register_float_tensor::<Cube<R, F, I, BT>>(&ir.id, tensor);
            }
        }
    }

    /// Queues a native kernel with `inputs` and outputs of the given shapes and dtypes: the
    /// kernel's first `N` outputs (the others are dropped when it has run).
    fn register<R, F, I, BT, const N: usize>(
        name: &'static str,
        kind: Kind,
        inputs: Vec<FusionTensor<CubeFusionRuntime<R, F, I, BT>>>,
        outputs: [(burn_backend::Shape, DType); N],
    ) -> [FusionTensor<CubeFusionRuntime<R, F, I, BT>>; N]
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
            .expect("LayerNorm: one tensor per registered output")
    }

    /// The forward's inputs, in the order [`NativeOp`] takes them: `[x, gamma]` or
    /// `[x, gamma, beta]`.
    fn forward_inputs<T>(tensor: T, gamma: T, beta: Option<T>) -> Vec<T> {
        let mut inputs = vec![tensor, gamma];
        inputs.extend(beta);
        inputs
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
            let (shape, dtype) = (tensor.shape.clone(), tensor.dtype);
            let stats = stats_shape(&shape);
            register::<R, F, I, BT, 3>(
                "ruda_layer_norm",
                Kind::Forward { epsilon },
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
            let (shape, dtype) = (tensor.shape.clone(), tensor.dtype);
            let [out] = register::<R, F, I, BT, 1>(
                "ruda_layer_norm_output",
                Kind::Forward { epsilon },
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
            let shape = tensor.shape.clone();
            let dtype = tensor.dtype;
            let gamma_shape = gamma.shape.clone();
            let gamma_dtype = gamma.dtype;
            register::<R, F, I, BT, 3>(
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
