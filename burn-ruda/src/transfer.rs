//! Moving tensors between two devices of one runtime.
//!
//! Burn 0.21 moves a tensor to another device through CubeCL's server-to-server transfer
//! (`ComputeClient::to_client_tensor`), which only CUDA implements (NCCL). On every other
//! runtime (wgpu: Vulkan, Metal, lavapipe) the transfer panics ("not implemented") inside both
//! devices' worker threads, the panics are swallowed, and the destination tensor is never
//! written: with Burn's own `Wgpu`, reading a moved tensor fails ("Memory page 0 doesn't
//! exist"), so `ExecutionStrategy::MultiDevice` cannot train on two wgpu devices. Later Burn
//! releases copy through the host on those runtimes (tracel-ai/burn#5678); `Ruda` does the same
//! now, so a model, its batches and its gradients move between wgpu devices correctly. On CUDA,
//! and between tensors already on the target device, Burn's own path runs unchanged.

use burn_backend::{
    Backend, ExecutionError, TensorData,
    tensor::{BoolTensor, Device, FloatTensor, IntTensor, QuantizedTensor},
};
use burn_cubecl::cubecl::{self, future::block_on, server::ServerCommunication};

/// Whether the runtime `R` moves tensors between its devices itself (CUDA's NCCL transport).
pub fn runtime_transfers_between_devices<R: cubecl::Runtime>() -> bool {
    <R::Server as ServerCommunication>::SERVER_COMM_ENABLED
}

/// Reads a tensor back to the host for a move to `to`; a failed read is a device failure that
/// Burn's infallible `*_to_device` can only report by panicking, with its context.
fn read_for_move<D: core::fmt::Debug>(
    kind: &str,
    read: Result<TensorData, ExecutionError>,
    from: &D,
    to: &D,
) -> TensorData {
    read.unwrap_or_else(|error| {
        panic!("moving a {kind} tensor from {from:?} to {to:?}: reading it back failed: {error:?}")
    })
}

/// `float_to_device` through the host: read on the source device, upload on `device`.
pub fn float_through_host<B: Backend>(
    tensor: FloatTensor<B>,
    device: &Device<B>,
) -> FloatTensor<B> {
    let from = B::float_device(&tensor);
    let data = read_for_move("float", block_on(B::float_into_data(tensor)), &from, device);
    B::float_from_data(data, device)
}

/// `int_to_device` through the host.
pub fn int_through_host<B: Backend>(tensor: IntTensor<B>, device: &Device<B>) -> IntTensor<B> {
    let from = B::int_device(&tensor);
    let data = read_for_move("int", block_on(B::int_into_data(tensor)), &from, device);
    B::int_from_data(data, device)
}

/// `bool_to_device` through the host.
pub fn bool_through_host<B: Backend>(tensor: BoolTensor<B>, device: &Device<B>) -> BoolTensor<B> {
    let from = B::bool_device(&tensor);
    let data = read_for_move("bool", block_on(B::bool_into_data(tensor)), &from, device);
    B::bool_from_data(data, device)
}

/// `q_to_device` through the host (the quantized values and their scales, as Burn stores them).
pub fn quantized_through_host<B: Backend>(
    tensor: QuantizedTensor<B>,
    device: &Device<B>,
) -> QuantizedTensor<B> {
    let from = B::q_device(&tensor);
    let data = read_for_move("quantized", block_on(B::q_into_data(tensor)), &from, device);
    B::q_from_data(data, device)
}
