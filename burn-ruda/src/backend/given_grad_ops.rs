//! [`GivenGradOps`] for [`Ruda`]: the root of `backward_with_grad`'s node, uploaded once per
//! runtime and device, and the end of Burn's seed.
//!
//! Uploaded on every call, the root costs a copy from pageable host memory, which on CUDA
//! waits for the stream's earlier work: every `backward_with_grad` then waits for the device.
//! So it is uploaded once. Under `fusion` each call registers that burn-cubecl tensor as a new
//! fusion tensor, the way burn-fusion registers an uploaded one (an `Init` operation, not
//! fusable, dropped after the backward pass), without the upload; and Burn's seed, a fused
//! `ones` that nothing reads, is read by a custom operation that does nothing, which closes the
//! seed's fusion block as the native LayerNorm backward closes `y.backward()`'s seed.

use core::any::{Any, TypeId};
use std::sync::Mutex;

use burn_backend::{
    DeviceId, DeviceOps, TensorData,
    ops::FloatTensorOps,
    tensor::{Device, FloatTensor},
};
use burn_cubecl::{
    BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement, tensor::CubeTensor,
};

use super::Ruda;
use crate::backward_with_grad::GivenGradOps;

/// An uploaded root: the runtime's type, the device, and the `CubeTensor` of that runtime.
type CachedRoot = (TypeId, DeviceId, Box<dyn Any + Send + Sync>);

/// The uploaded roots: one a runtime and device, for the life of the process.
static ROOTS: Mutex<Vec<CachedRoot>> = Mutex::new(Vec::new());

/// The one-element F32 burn-cubecl tensor of runtime `R` on `device`, uploaded the first time
/// it is asked for. Clones share its buffer, so no kernel writes into it in place.
fn cached_root<R, F, I, BT>(device: &Device<CubeBackend<R, F, I, BT>>) -> CubeTensor<R>
where
    R: CubeRuntime,
    F: FloatElement,
    I: IntElement,
    BT: BoolElement,
{
    let key = (TypeId::of::<R>(), device.id());
    // A panic elsewhere while the lock was held leaves the list whole.
    let mut roots = ROOTS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let found = roots
        .iter()
        .find(|(runtime, id, _)| (*runtime, *id) == key)
        .and_then(|(_, _, root)| root.downcast_ref::<CubeTensor<R>>());
    if let Some(root) = found {
        return root.clone();
    }
    let root =
        CubeBackend::<R, F, I, BT>::float_from_data(TensorData::new(vec![0.0f32], [1]), device);
    roots.push((key.0, key.1, Box::new(root.clone())));
    root
}

#[cfg(feature = "fusion")]
mod fusion {
    use super::*;

    use core::marker::PhantomData;

    use burn_backend::TensorMetadata;
    use burn_fusion::{
        FusionBackend, FusionRuntime, NoOp,
        stream::{Operation, OperationStreams},
    };
    use burn_ir::{
        BackendIr, CustomOpIr, HandleContainer, InitOperationIr, OperationIr, OperationOutput,
    };

    type Cube<R, F, I, BT> = CubeBackend<R, F, I, BT>;
    type CubeFusionRuntime<R, F, I, BT> = <Cube<R, F, I, BT> as FusionBackend>::FusionRuntime;
    /// Names the backend without owning any of its types.
    type BackendMarker<R, F, I, BT> = PhantomData<fn() -> (R, F, I, BT)>;

    /// Reads its one input and does nothing else: the seed's last use, which frees it.
    #[derive(Debug)]
    struct ReleaseOp<R, F, I, BT> {
        desc: CustomOpIr,
        _backend: BackendMarker<R, F, I, BT>,
    }

    impl<R, F, I, BT> Operation<CubeFusionRuntime<R, F, I, BT>> for ReleaseOp<R, F, I, BT>
    where
        R: ruda_runtime::Runtime + CubeRuntime,
        F: FloatElement,
        I: IntElement,
        BT: BoolElement,
    {
        fn execute(
            &self,
            handles: &mut HandleContainer<
                <CubeFusionRuntime<R, F, I, BT> as FusionRuntime>::FusionHandle,
            >,
        ) {
            // Taken out of the container when this is its last use (a read-write input).
            for input in &self.desc.inputs {
                drop(handles.get_handle(&input.id, &input.status));
            }
        }
    }

    impl<R, F, I, BT> GivenGradOps for Ruda<R, F, I, BT>
    where
        R: ruda_runtime::Runtime + CubeRuntime,
        F: FloatElement,
        I: IntElement,
        BT: BoolElement,
    {
        fn given_grad_root(device: &Device<Self>) -> FloatTensor<Self> {
            let root = cached_root::<R, F, I, BT>(device);
            let (shape, dtype) = (root.shape(), root.dtype());
            let client = burn_fusion::get_client::<Cube<R, F, I, BT>>(device);
            let handle = Cube::<R, F, I, BT>::float_tensor_handle(root);
            let desc =
                InitOperationIr::create(shape, dtype, || client.register_tensor_handle(handle));
            client
                .register(
                    OperationStreams::default(),
                    OperationIr::Init(desc),
                    NoOp::<Cube<R, F, I, BT>>::new(),
                )
                .output()
        }

        fn release_given_grad_seed(seed: FloatTensor<Self>) {
            let client = seed.client.clone();
            let streams = OperationStreams::with_inputs([&seed]);
            let desc = CustomOpIr::new("ruda_release_seed", &[seed.into_ir()], &[]);
            let op = ReleaseOp::<R, F, I, BT> {
                desc: desc.clone(),
                _backend: PhantomData,
            };
            client.register(streams, OperationIr::Custom(desc), op);
        }
    }
}

#[cfg(not(feature = "fusion"))]
impl<R, F, I, BT> GivenGradOps for Ruda<R, F, I, BT>
where
    R: ruda_runtime::Runtime + CubeRuntime,
    F: FloatElement,
    I: IntElement,
    BT: BoolElement,
{
    // Without fusion every operation runs as it is called: a clone of the cached tensor is the
    // root, and the seed is dropped.
    fn given_grad_root(device: &Device<Self>) -> FloatTensor<Self> {
        cached_root::<R, F, I, BT>(device)
    }

    fn release_given_grad_seed(seed: FloatTensor<Self>) {
        drop(seed);
    }
}
