//! Burn's collective operations (feature `distributed`): what burn-train's DDP strategy needs.
//!
//! Burn 0.21 reduces DDP gradients through [`DistributedBackend`]: a sync server, started per
//! backend type, gathers each parameter's gradient from every device and all-reduces it with
//! the backend's `all_reduce` (NCCL on CUDA; the other CubeCL runtimes have no collectives).
//! [`Ruda`] and [`Autodiff`] forward every method, none left to the trait's defaults: the sync
//! server is found by the backend's type, so a default `start_communication_server` on `Ruda`
//! would start a server under `Ruda` while the forwarded gradient submissions look for one under
//! [`Inner`], and find none: every replica would train on its own gradients, silently.
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

impl<R, F, I, BT> DistributedBackend for Ruda<R, F, I, BT>
where
    R: ruda_runtime::Runtime + CubeRuntime,
    F: FloatElement,
    I: IntElement,
    BT: BoolElement,
{
    fn start_communication_server(devices: &[Self::Device], config: DistributedConfig) {
        Inner::<R, F, I, BT>::start_communication_server(devices, config);
    }

    fn close_communication_server(device: &Self::Device) {
        Inner::<R, F, I, BT>::close_communication_server(device);
    }

    fn register_sync_parameters(device: &Self::Device, distributed_params: Vec<DistributedParams>) {
        Inner::<R, F, I, BT>::register_sync_parameters(device, distributed_params);
    }

    fn submit_sync_collective(device: &Self::Device) {
        Inner::<R, F, I, BT>::submit_sync_collective(device);
    }

    fn submit_gradient_sync(tensor: TensorRef<Self>, distributed_params: DistributedParams) {
        Inner::<R, F, I, BT>::submit_gradient_sync(retype(&tensor), distributed_params);
    }

    fn all_reduce(
        tensor: FloatTensor<Self>,
        op: ReduceOperation,
        device_ids: Vec<DeviceId>,
    ) -> CollectiveTensor<Self> {
        rewrap(Inner::<R, F, I, BT>::all_reduce(tensor, op, device_ids))
    }

    fn sync_collective(device: &Self::Device) {
        Inner::<R, F, I, BT>::sync_collective(device);
    }

    unsafe fn comm_device(tensor: &TensorRef<Self>) -> Device<Self> {
        // SAFETY: the caller's guarantee for `tensor`, which points to the same tensor.
        unsafe { Inner::<R, F, I, BT>::comm_device(&retype(tensor)) }
    }

    unsafe fn float_from_ref(tensor: &TensorRef<Self>) -> FloatTensor<Self> {
        // SAFETY: as for `comm_device`.
        unsafe { Inner::<R, F, I, BT>::float_from_ref(&retype(tensor)) }
    }
}

/// Burn's autodiff over `B`, the decorator's inner backend.
type AdInner<B, C> = burn_autodiff::Autodiff<B, C>;

impl<B, C> DistributedBackend for Autodiff<B, C>
where
    B: NativeBackend + DistributedBackend,
    C: CheckpointStrategy,
{
    fn start_communication_server(devices: &[Self::Device], config: DistributedConfig) {
        AdInner::<B, C>::start_communication_server(devices, config);
    }

    fn close_communication_server(device: &Self::Device) {
        AdInner::<B, C>::close_communication_server(device);
    }

    fn register_sync_parameters(device: &Self::Device, distributed_params: Vec<DistributedParams>) {
        AdInner::<B, C>::register_sync_parameters(device, distributed_params);
    }

    fn submit_sync_collective(device: &Self::Device) {
        AdInner::<B, C>::submit_sync_collective(device);
    }

    fn submit_gradient_sync(tensor: TensorRef<Self>, distributed_params: DistributedParams) {
        AdInner::<B, C>::submit_gradient_sync(retype(&tensor), distributed_params);
    }

    // Burn's differentiable all-reduce: its backward all-reduces the incoming gradient.
    fn all_reduce(
        tensor: FloatTensor<Self>,
        op: ReduceOperation,
        device_ids: Vec<DeviceId>,
    ) -> CollectiveTensor<Self> {
        rewrap(AdInner::<B, C>::all_reduce(tensor, op, device_ids))
    }

    fn sync_collective(device: &Self::Device) {
        AdInner::<B, C>::sync_collective(device);
    }

    unsafe fn comm_device(tensor: &TensorRef<Self>) -> Device<Self> {
        // SAFETY: the caller's guarantee for `tensor`, which points to the same tensor.
        unsafe { AdInner::<B, C>::comm_device(&retype(tensor)) }
    }

    unsafe fn float_from_ref(tensor: &TensorRef<Self>) -> FloatTensor<Self> {
        // SAFETY: as for `comm_device`.
        unsafe { AdInner::<B, C>::float_from_ref(&retype(tensor)) }
    }
}
