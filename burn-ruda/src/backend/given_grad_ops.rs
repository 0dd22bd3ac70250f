//! [`GivenGradOps`] for [`Ruda`]: the root of `backward_with_grad`'s node, made once per
//! runtime and device, and the end of Burn's seed.
//!
//! Burn's backward pass reads nothing of its root but the shape, device and dtype (it seeds the
//! root's gradient with ones of that shape), so one root serves every call.
//! - Uploaded on every call, the root costs a copy from pageable host memory, which on CUDA
//!   waits for the stream's earlier work: every `backward_with_grad` then waits for the device.
//! - Under `fusion`, a root registered on every call costs two operations in burn-fusion's
//!   stream (its `Init` and its `Drop`), each a pass of burn-fusion's thread where the host
//!   paces LayerNorm calls. The cached fusion tensor keeps a clone, so the clones handed out are
//!   read-only and dropping them registers nothing; no operation reads it, so it never ties a
//!   stream to the one it was registered on.
//! - Burn's seed, a fused `ones` that nothing reads, is read under `fusion` by a custom
//!   operation that does nothing, which closes the seed's fusion block as the native LayerNorm
//!   backward closes `y.backward()`'s seed.

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

/// A cached root: its tensor type, its device, the tensor.
type CachedRoot = (TypeId, DeviceId, Box<dyn Any + Send + Sync>);

/// The cached roots: one a tensor type (burn-cubecl's of a runtime, or its fusion tensor) and
/// device, for the life of the process.
static ROOTS: Mutex<Vec<CachedRoot>> = Mutex::new(Vec::new());

/// The root of type `T` on `device`, made by `make` the first time it is asked for. Clones
/// share one buffer, whose value nothing reads.
fn cached_root<T>(device: DeviceId, make: impl FnOnce() -> T) -> T
where
    T: Clone + Send + Sync + 'static,
{
    let key = (TypeId::of::<T>(), device);
    // A panic elsewhere while the lock was held leaves the list whole.
    let mut roots = ROOTS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let found = roots
        .iter()
        .find(|(tensor_type, id, _)| (*tensor_type, *id) == key)
        .and_then(|(_, _, root)| root.downcast_ref::<T>());
    if let Some(root) = found {
        return root.clone();
    }
    let root = make();
    roots.push((key.0, key.1, Box::new(root.clone())));
    root
}

/// A one-element F32 burn-cubecl tensor of runtime `R` on `device`, uploaded.
fn upload_cube_root<R, F, I, BT>(device: &Device<CubeBackend<R, F, I, BT>>) -> CubeTensor<R>
where
    R: CubeRuntime,
    F: FloatElement,
    I: IntElement,
    BT: BoolElement,
{
    CubeBackend::<R, F, I, BT>::float_from_data(TensorData::new(vec![0.0f32], [1]), device)
}

#[cfg(feature = "fusion")]
mod fusion {
    use super::*;

    use core::marker::PhantomData;

    use burn_backend::TensorMetadata;
    use burn_fusion::{
        NoOp,
        stream::{Operation, OperationStreams},
    };
    use burn_ir::{BackendIr, CustomOpIr, InitOperationIr, OperationIr, OperationOutput};

    use crate::backend::cube_fusion::{BackendMarker, Cube, CubeFusionRuntime, Handles};

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
        fn execute(&self, handles: &mut Handles<R, F, I, BT>) {
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
            cached_root(device.id(), || {
                // Registered once, the way burn-fusion registers an uploaded tensor.
                let root = upload_cube_root::<R, F, I, BT>(device);
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
            })
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
        cached_root(device.id(), || upload_cube_root::<R, F, I, BT>(device))
    }

    fn release_given_grad_seed(seed: FloatTensor<Self>) {
        drop(seed);
    }
}
