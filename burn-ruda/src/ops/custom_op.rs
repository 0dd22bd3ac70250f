//! The one helper every native operation of [`crate::Ruda`] goes through: a [`NativeKernel`] on
//! burn-cubecl tensors, launched at once, or, under the `fusion` feature, queued in Burn's
//! fusion stream as a custom operation (`OperationIr::Custom`, as burn-vision queues its
//! connected components) that runs the kernel when the stream executes.
//!
//! Queued, a native operation stays in program order with the fused operations around it and
//! never forces a flush: burn-fusion executes what was queued before it, then runs it on the
//! handles of its inputs, and registers its outputs' handles under the ids the caller already
//! holds. Its arguments are checked on the caller's thread before it is queued (each op's
//! `validate`), so a bad call panics where it is made, not later on burn-fusion's thread.
//!
//! A launch that fails anyway (a device error, or a failure injected for tests:
//! [`ruda_runtime::faults::inject`]) is recorded as the device's fault, which its next read or
//! sync reports naming the operation; its outputs are registered unwritten, so that the stream
//! goes on and nothing waits for them forever.

use burn_backend::{DType, DeviceOps, Shape};
use burn_cubecl::{ops::numeric::empty_device_dtype, tensor::CubeTensor};

use super::{RudaRuntime, RudaTensor};

/// Launches `kernel` on `inputs`; on a failure (a panic of the launch, or an injected one),
/// records the device's fault and returns unwritten outputs of the given shapes and dtypes.
fn launch_or_record<R: RudaRuntime, K: NativeKernel<R>>(
    kernel: &K,
    inputs: Vec<CubeTensor<R>>,
    outputs: &[(Shape, DType)],
) -> Vec<CubeTensor<R>> {
    let name = kernel.name();
    let (client, device) = match inputs.first() {
        Some(first) => (first.client.clone(), first.device.clone()),
        None => unreachable!("{name}: a native operation has an input"),
    };
    let launched = if ruda_runtime::faults::take_injected(name) {
        Err("injected failure (a test hook)".to_string())
    } else {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| kernel.launch(inputs))).map_err(
            |panic| {
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "the launch panicked".into())
            },
        )
    };
    match launched {
        Ok(launched) => launched,
        Err(reason) => {
            ruda_runtime::faults::record(device.id(), format!("{device:?}"), name, reason);
            outputs
                .iter()
                .map(|(shape, dtype)| {
                    empty_device_dtype(client.clone(), device.clone(), shape.clone(), *dtype)
                })
                .collect()
        }
    }
}

/// A native kernel on burn-cubecl tensors.
///
/// `launch` takes the inputs in the order [`run`] was given them and returns the outputs in a
/// fixed order; [`run`] keeps the first `N` of them, so a kernel may return outputs a caller
/// does not want (LayerNorm's statistics for an inference forward), which are then freed in
/// stream order.
pub(crate) trait NativeKernel<R: RudaRuntime>: Send + Sync + 'static {
    /// The operation's name in burn-fusion's stream and in its trace span, e.g.
    /// `ruda_layer_norm`: distinct for every kernel.
    fn name(&self) -> &'static str;

    /// Runs the kernel.
    fn launch(&self, inputs: Vec<CubeTensor<R>>) -> Vec<CubeTensor<R>>;
}

/// Runs `kernel` on Ruda's tensors `inputs` (float or int); `outputs` are the shapes and dtypes
/// of the first `N` outputs it returns.
///
/// Without the `fusion` feature the kernel runs now. Under it, the operation is queued in the
/// stream of its inputs and the returned tensors are placeholders burn-fusion fills when it
/// executes the operation.
pub(crate) fn run<R: RudaRuntime, K: NativeKernel<R>, const N: usize>(
    kernel: K,
    inputs: Vec<RudaTensor<R>>,
    outputs: [(Shape, DType); N],
) -> [RudaTensor<R>; N] {
    let name = kernel.name();
    run_many(kernel, inputs, outputs.into())
        .try_into()
        .unwrap_or_else(|_| unreachable!("{name}: one tensor per output asked"))
}

/// [`run`] for a number of outputs known at run time (an operation over many parameters):
/// one tensor per entry of `outputs`, in its order.
pub(crate) fn run_many<R: RudaRuntime, K: NativeKernel<R>>(
    kernel: K,
    inputs: Vec<RudaTensor<R>>,
    outputs: Vec<(Shape, DType)>,
) -> Vec<RudaTensor<R>> {
    imp::run_many(kernel, inputs, outputs)
}

#[cfg(not(feature = "fusion"))]
mod imp {
    use super::*;

    pub(super) fn run_many<R: RudaRuntime, K: NativeKernel<R>>(
        kernel: K,
        inputs: Vec<CubeTensor<R>>,
        outputs: Vec<(Shape, DType)>,
    ) -> Vec<CubeTensor<R>> {
        let _span = tracing::trace_span!("ruda_native_op", name = kernel.name()).entered();
        let mut launched = launch_or_record(&kernel, inputs, &outputs).into_iter();
        outputs
            .into_iter()
            .map(|(shape, dtype)| {
                let out = launched
                    .next()
                    .unwrap_or_else(|| panic!("{}: fewer outputs than asked", kernel.name()));
                debug_assert!(out.meta.shape() == &shape && out.dtype == dtype);
                out
            })
            .collect()
    }
}

#[cfg(feature = "fusion")]
mod imp {
    use super::*;

    use core::fmt;
    use core::marker::PhantomData;

    use burn_cubecl::CubeBackend;
    use burn_fusion::FusionRuntime;

    use crate::fusion::RudaFusionRuntime;
    use burn_fusion::stream::{Operation, OperationStreams};
    use burn_ir::{CustomOpIr, HandleContainer, OperationIr, TensorIr};

    /// Any burn-cubecl backend of runtime `R`, to convert between fusion handles and
    /// burn-cubecl tensors: the conversion depends on the runtime alone (the handle carries its
    /// own dtype), never on the backend's default element types.
    type Cube<R> = CubeBackend<R, f32, i32, u32>;
    /// The handles an operation reads its inputs from and registers its outputs in.
    type Handles<R> = HandleContainer<<RudaFusionRuntime<R> as FusionRuntime>::FusionHandle>;

    /// A [`NativeKernel`] queued in the fusion stream.
    struct CustomOp<R: RudaRuntime, K> {
        desc: CustomOpIr,
        kernel: K,
        _runtime: PhantomData<fn() -> R>,
    }

    impl<R: RudaRuntime, K: NativeKernel<R>> fmt::Debug for CustomOp<R, K> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct(self.kernel.name())
                .field("desc", &self.desc)
                .finish()
        }
    }

    impl<R: RudaRuntime, K: NativeKernel<R>> Operation<RudaFusionRuntime<R>> for CustomOp<R, K> {
        fn execute(&self, handles: &mut Handles<R>) {
            let _span = tracing::trace_span!("ruda_native_op", name = self.kernel.name()).entered();
            let inputs = self
                .desc
                .inputs
                .iter()
                .map(|ir| handles.get_float_tensor::<Cube<R>>(ir))
                .collect();
            let shapes: Vec<(Shape, DType)> = self
                .desc
                .outputs
                .iter()
                .map(|ir| (ir.shape.clone(), ir.dtype))
                .collect();
            let outputs = launch_or_record(&self.kernel, inputs, &shapes);
            // Outputs the caller did not ask for are dropped here; their memory is reused in
            // stream order.
            for (ir, tensor) in self.desc.outputs.iter().zip(outputs) {
                handles.register_float_tensor::<Cube<R>>(&ir.id, tensor);
            }
        }
    }

    pub(super) fn run_many<R: RudaRuntime, K: NativeKernel<R>>(
        kernel: K,
        inputs: Vec<RudaTensor<R>>,
        outputs: Vec<(Shape, DType)>,
    ) -> Vec<RudaTensor<R>> {
        let name = kernel.name();
        let client = inputs
            .first()
            .unwrap_or_else(|| panic!("{name}: a native operation needs an input"))
            .client
            .clone();
        let streams = OperationStreams::with_inputs(inputs.iter());
        let outputs: Vec<TensorIr> = outputs
            .into_iter()
            .map(|(shape, dtype)| TensorIr::uninit(client.create_empty_handle(), shape, dtype))
            .collect();
        let inputs: Vec<TensorIr> = inputs.into_iter().map(|t| t.into_ir()).collect();
        let desc = CustomOpIr::new(name, &inputs, &outputs);
        let op = CustomOp::<R, K> {
            desc: desc.clone(),
            kernel,
            _runtime: PhantomData,
        };
        client.register(streams, OperationIr::Custom(desc), op)
    }
}
