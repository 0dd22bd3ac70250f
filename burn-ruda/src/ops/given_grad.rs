//! [`GivenGradOps`]: the root of `backward_with_grad`'s node, made once per runtime and device,
//! and the end of Burn's seed; and `Ruda`'s implementation.
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
//! - Burn's seed, a fused `ones` that nothing reads, is read under `fusion` by a native
//!   operation that does nothing, which closes the seed's fusion block as the native LayerNorm
//!   backward closes `y.backward()`'s seed.

use core::any::{Any, TypeId};
use std::sync::Mutex;

use burn_backend::{
    Backend, DeviceId, DeviceOps, TensorData,
    ops::FloatTensorOps,
    tensor::{Device, FloatTensor},
};
use burn_cubecl::{BoolElement, CubeBackend, FloatElement, IntElement, tensor::CubeTensor};

use super::{NativeKernel, RudaRuntime, custom_op};
use crate::backend::Ruda;

/// What a backend does for [`backward_with_grad`](crate::backward_with_grad)'s node under
/// [`crate::Autodiff`]: its
/// one-element output (the root Burn's backward pass starts from) and the end of Burn's
/// one-element seed (the root's gradient, which nothing reads).
///
/// Both exist for burn-fusion. An operation that no executed operation reads leaves its fusion
/// block open: burn-fusion then defers every later operation of the stream, the native
/// LayerNorm's included, until a sync or five open blocks, exploring the growing queue again at
/// every registration. Back to back on an H200, LayerNorm calls then cost 0.6-3.7 ms each
/// instead of about 0.1 ms (measured on an H200: `docs/perf/layer-norm.md`, "Through Burn").
/// Burn's own
/// autodiff, over any backend, uploads the root on every call ([`upload_root`]) and drops the
/// seed, whose block then stays open over burn-fusion.
pub trait GivenGradOps: Backend {
    /// A one-element F32 tensor on `device`, whose value is never read.
    fn given_grad_root(device: &Device<Self>) -> FloatTensor<Self>;

    /// Ends the seed, a one-element tensor nothing else reads.
    fn release_given_grad_seed(seed: FloatTensor<Self>);
}

/// The root uploaded from the host, as Burn's own autodiff takes it over any backend. On CUDA a
/// copy from pageable host memory waits for the stream's earlier work, so every call waits for
/// the device.
pub fn upload_root<B: Backend>(device: &Device<B>) -> FloatTensor<B> {
    B::float_from_data(TensorData::new(vec![0.0f32], [1]), device)
}

/// A cached root: its tensor type, its device, the tensor.
type CachedRoot = (TypeId, DeviceId, Box<dyn Any + Send + Sync>);

/// The cached roots: one a tensor type (burn-cubecl's of a runtime, or its fusion tensor) and
/// device, for the life of the process.
static ROOTS: Mutex<Vec<CachedRoot>> = Mutex::new(Vec::new());

/// The root of type `T` on `device`, made by `make` the first time it is asked for (outside the
/// lock: making it uploads to the device). Clones share one buffer, whose value nothing reads;
/// two threads that both make one keep the first.
fn cached_root<T>(device: DeviceId, make: impl FnOnce() -> T) -> T
where
    T: Clone + Send + Sync + 'static,
{
    let key = (TypeId::of::<T>(), device);
    let find = |roots: &[CachedRoot]| {
        roots
            .iter()
            .find(|(tensor_type, id, _)| (*tensor_type, *id) == key)
            .and_then(|(_, _, root)| root.downcast_ref::<T>())
            .cloned()
    };
    // A panic elsewhere while the lock was held leaves the list whole.
    let lock = || {
        ROOTS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    if let Some(root) = find(&lock()) {
        return root;
    }
    let root = make();
    let mut roots = lock();
    if let Some(first) = find(&roots) {
        return first;
    }
    roots.push((key.0, key.1, Box::new(root.clone())));
    root
}

/// A one-element F32 burn-cubecl tensor of runtime `R` on `device`, uploaded.
fn upload_cube_root<R: RudaRuntime>(device: &R::Device) -> CubeTensor<R> {
    CubeBackend::<R, f32, i32, u32>::float_from_data(TensorData::new(vec![0.0f32], [1]), device)
}

/// Reads its one input and does nothing else: the seed's last use, which frees it.
struct ReleaseKernel;

impl<R: RudaRuntime> NativeKernel<R> for ReleaseKernel {
    fn name(&self) -> &'static str {
        "ruda_release_seed"
    }

    fn launch(&self, _inputs: Vec<CubeTensor<R>>) -> Vec<CubeTensor<R>> {
        Vec::new()
    }
}

impl<R: RudaRuntime, F: FloatElement, I: IntElement, BT: BoolElement> GivenGradOps
    for Ruda<R, F, I, BT>
{
    fn given_grad_root(device: &Device<Self>) -> FloatTensor<Self> {
        cached_root(device.id(), || imp::register_root::<R>(device))
    }

    fn release_given_grad_seed(seed: FloatTensor<Self>) {
        let [] = custom_op::run::<R, _, 0>(ReleaseKernel, vec![seed], []);
    }
}

#[cfg(feature = "fusion")]
mod imp {
    use super::*;

    use burn_backend::TensorMetadata;
    use burn_fusion::{NoOp, stream::OperationStreams};
    use burn_ir::{BackendIr, InitOperationIr, OperationIr, OperationOutput};

    use crate::ops::RudaTensor;

    /// The uploaded root, registered once as a fusion tensor, the way burn-fusion registers an
    /// uploaded tensor.
    pub(super) fn register_root<R: RudaRuntime>(device: &R::Device) -> RudaTensor<R> {
        // The fusion backend `Ruda`'s tensors are registered with (its client and streams).
        type Cube<R> = crate::fusion::RudaCube<R, f32, i32, u32>;
        let root = upload_cube_root::<R>(device);
        let (shape, dtype) = (root.shape(), root.dtype());
        let client = burn_fusion::get_client::<Cube<R>>(device);
        let handle = Cube::<R>::float_tensor_handle(root);
        let desc = InitOperationIr::create(shape, dtype, || client.register_tensor_handle(handle));
        client
            .register(
                OperationStreams::default(),
                OperationIr::Init(desc),
                NoOp::<Cube<R>>::new(),
            )
            .output()
    }
}

#[cfg(not(feature = "fusion"))]
mod imp {
    use super::*;

    /// Without fusion every operation runs as it is called: the uploaded tensor is the root.
    pub(super) fn register_root<R: RudaRuntime>(device: &R::Device) -> CubeTensor<R> {
        upload_cube_root::<R>(device)
    }
}
