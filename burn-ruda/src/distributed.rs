//! Burn's collective operations (feature `distributed`): what burn-train's DDP strategy needs.
//!
//! Burn 0.21 reduces DDP gradients through [`DistributedBackend`]: a sync server, started per
//! backend type, gathers each parameter's gradient from every device and all-reduces it with
//! the backend's `all_reduce` (NCCL on CUDA; the other CubeCL runtimes have no collectives).
//! [`Ruda`], [`Autodiff`] and `RudaCube` (under [`Inner`]'s fusion) forward every method, none
//! left to the trait's defaults: the sync server is found by the backend's type, so a default
//! `start_communication_server` on `Ruda` would start a server under `Ruda` while the forwarded
//! gradient submissions look for one under [`Inner`], and find none: every replica would train
//! on its own gradients, silently.
//!
//! `Ruda`'s tensors are [`Inner`]'s, so a [`TensorRef`] or a [`CollectiveTensor`] moves between
//! the two unchanged.

use burn_backend::{
    DeviceId,
    distributed::{
        CollectiveTensor, DistributedBackend, DistributedConfig, DistributedParams,
        ReduceOperation, TensorRef,
    },
    tensor::{Device, FloatTensor},
};
use burn_cubecl::{BoolElement, CubeRuntime, FloatElement, IntElement};

use crate::autodiff::{Autodiff, NativeBackend};
use crate::backend::{Inner, Ruda};
use burn_autodiff::checkpoint::strategy::CheckpointStrategy;

/// The same tensor behind a reference typed for another backend with the same primitives.
fn retype<From, To>(tensor: &TensorRef<From>) -> TensorRef<To>
where
    From: burn_backend::Backend,
    To: burn_backend::Backend<FloatTensorPrimitive = FloatTensor<From>>,
{
    TensorRef(tensor.0)
}

/// A collective result typed for another backend with the same primitives. The result stays
/// unresolved: `To::sync_collective` (which forwards to `From`'s) still has to run before use.
fn rewrap<From, To>(collective: CollectiveTensor<From>) -> CollectiveTensor<To>
where
    From: DistributedBackend,
    To: DistributedBackend<FloatTensorPrimitive = FloatTensor<From>>,
{
    // SAFETY: the handle is wrapped again at once; whoever resolves the new wrapper runs the
    // same synchronization (`To::sync_collective` forwards to `From::sync_collective`).
    CollectiveTensor::new(unsafe { collective.assume_resolved() })
}

/// `impl DistributedBackend for $wrapper`, every method forwarded to `$inner`, whose tensors
/// the wrapper's are.
macro_rules! forward_distributed {
    (impl [$($gen:tt)*] $wrapper:ty => $inner:ty; where [$($wc:tt)*]) => {
        impl<$($gen)*> DistributedBackend for $wrapper where $($wc)* {
            fn start_communication_server(devices: &[Self::Device], config: DistributedConfig) {
                <$inner>::start_communication_server(devices, config);
            }

            fn close_communication_server(device: &Self::Device) {
                <$inner>::close_communication_server(device);
            }

            fn register_sync_parameters(
                device: &Self::Device,
                distributed_params: Vec<DistributedParams>,
            ) {
                <$inner>::register_sync_parameters(device, distributed_params);
            }

            fn submit_sync_collective(device: &Self::Device) {
                <$inner>::submit_sync_collective(device);
            }

            fn submit_gradient_sync(tensor: TensorRef<Self>, distributed_params: DistributedParams) {
                <$inner>::submit_gradient_sync(retype(&tensor), distributed_params);
            }

            // Under Burn's autodiff, a differentiable all-reduce: its backward all-reduces the
            // incoming gradient.
            fn all_reduce(
                tensor: FloatTensor<Self>,
                op: ReduceOperation,
                device_ids: Vec<DeviceId>,
            ) -> CollectiveTensor<Self> {
                rewrap(<$inner>::all_reduce(tensor, op, device_ids))
            }

            fn sync_collective(device: &Self::Device) {
                <$inner>::sync_collective(device);
            }

            unsafe fn comm_device(tensor: &TensorRef<Self>) -> Device<Self> {
                // SAFETY: the caller's guarantee for `tensor`, which points to the same tensor.
                unsafe { <$inner>::comm_device(&retype(tensor)) }
            }

            unsafe fn float_from_ref(tensor: &TensorRef<Self>) -> FloatTensor<Self> {
                // SAFETY: as for `comm_device`.
                unsafe { <$inner>::float_from_ref(&retype(tensor)) }
            }
        }
    };
}

forward_distributed! {
    impl [R, F, I, BT] Ruda<R, F, I, BT> => Inner<R, F, I, BT>;
    where [R: ruda_runtime::Runtime + CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement]
}

// `Inner` is `Fusion<RudaCube>` under feature `fusion`: burn-fusion's collectives call
// `RudaCube`'s, which must reach burn-cubecl's (NCCL on CUDA) under the same server.
#[cfg(feature = "fusion")]
forward_distributed! {
    impl [R, F, I, BT] crate::fusion::RudaCube<R, F, I, BT> => burn_cubecl::CubeBackend<R, F, I, BT>;
    where [R: ruda_runtime::Runtime + CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement]
}

forward_distributed! {
    impl [B, C] Autodiff<B, C> => burn_autodiff::Autodiff<B, C>;
    where [B: NativeBackend + DistributedBackend, C: CheckpointStrategy]
}
