//! Feature `distributed`: Burn's collective operations through `Ruda` and `burn_ruda::Autodiff`,
//! on Mesa's CPU Vulkan driver, against Burn's own autodiff over the same backend.
//!
//! wgpu has no collectives (CubeCL implements all-reduce with NCCL, on CUDA only), so `all_reduce`
//! itself cannot run here. What can go wrong in the delegation, and is checked:
//! - the parameter marks DDP puts on every parameter (`set_distributed_params` and its readers):
//!   if the decorator dropped them, each replica would train on its own gradients, silently;
//! - the sync server, which Burn finds by backend type: started through the training backend,
//!   it must be the one the gradient submissions of the inner backend find;
//! - the raw tensor references the sync server works on (`comm_device`, `float_from_ref`);
//! - the marks after a step of `burn_ruda::optim`'s Adam, which puts new parameters in place.
//!
//! Run with `cargo test -p burn-ruda --features distributed --test distributed`.

#![cfg(feature = "distributed")]

use burn_backend::distributed::{
    DistributedBackend, DistributedConfig, DistributedParamId, ReduceOperation, TensorRef,
    get_distributed_sync_client,
};
use burn_backend::{AutodiffBackend, Backend, TensorData, ops::FloatTensorOps};
use burn_cubecl::cubecl::wgpu::WgpuDevice;
use burn_ruda::{Inner, Ruda, RudaWgpu};

type R = Ruda<RudaWgpu>;
type In = Inner<RudaWgpu, f32, i32, u32>;
type RudaAd = burn_ruda::Autodiff<R>;
type BurnAd = burn_autodiff::Autodiff<R>;

fn device() -> WgpuDevice {
    WgpuDevice::Cpu
}

fn values<B: Backend>(tensor: burn_backend::tensor::FloatTensor<B>) -> Vec<f32> {
    burn_cubecl::cubecl::future::block_on(B::float_into_data(tensor))
        .expect("read back")
        .to_vec::<f32>()
        .expect("f32 values")
}

fn tensor<B: Backend<Device = WgpuDevice>>(values: &[f32]) -> burn_backend::tensor::FloatTensor<B> {
    B::float_from_data(TensorData::new(values.to_vec(), [values.len()]), &device())
}

/// What `B`'s parameter marks report, as DDP's sharder sets them.
fn marks<B: AutodiffBackend<Device = WgpuDevice>>() -> (bool, bool, Option<DistributedParamId>) {
    let param = B::float_set_require_grad(tensor::<B>(&[1.0, 2.0, 3.0]), true);
    let before = B::is_distributed(&param);
    let param = B::set_distributed_params(param, DistributedParamId::from(7));
    let after = B::is_distributed(&param);
    let id = B::distributed_params(&param).map(|p| p.param_id);
    (before, after, id)
}

#[test]
fn parameter_marks_pass_through_the_decorator() {
    let ours = marks::<RudaAd>();
    assert_eq!(ours, (false, true, Some(DistributedParamId::from(7))));
    assert_eq!(ours, marks::<BurnAd>());
}

#[test]
fn a_marked_parameter_still_trains() {
    // Marking must not lose the tensor or its gradient (one device: no collective runs).
    let param = RudaAd::float_set_require_grad(tensor::<RudaAd>(&[1.0, -2.0]), true);
    let param = RudaAd::set_distributed_params(param, DistributedParamId::from(3));
    let loss = RudaAd::float_sum(RudaAd::float_mul_scalar(param.clone(), 3.0.into()));
    let grads = RudaAd::backward(loss);
    let grad = RudaAd::grad(&param, &grads).expect("a gradient");
    assert_eq!(values::<R>(grad), vec![3.0, 3.0]);
}

#[test]
fn adam_keeps_the_parameter_marks() {
    use burn_core::module::{Param, ParamId};
    use burn_core::tensor::{Tensor, TensorPrimitive};
    use burn_optim::{GradientsParams, Optimizer};

    // A marked parameter, as DDP's sharder leaves it (one device: no collective runs).
    let id = ParamId::new();
    let value = Tensor::<RudaAd, 1>::from_floats([1.0, -2.0], &device())
        .require_grad()
        .set_distributed(DistributedParamId::from(id.val()));
    let param = Param::initialized(id, value);
    let grads = GradientsParams::from_grads((param.val() * 3.0).sum().backward(), &param);
    let mut adam = burn_ruda::optim::AdamConfig::new().init::<RudaAd, Param<Tensor<RudaAd, 1>>>();
    let param = adam.step(0.1, param, grads);

    let value = param.val();
    assert!(
        value.is_require_grad(),
        "the parameter still requires its gradient"
    );
    let TensorPrimitive::Float(primitive) = value.into_primitive() else {
        unreachable!("a float parameter")
    };
    assert_eq!(
        RudaAd::distributed_params(&primitive).map(|p| p.param_id),
        Some(DistributedParamId::from(id.val())),
        "the parameter keeps its mark after the step"
    );
    // Adam's first step moves each value by the learning rate against its gradient's sign.
    let stepped = values::<R>(RudaAd::inner(primitive));
    for (got, want) in stepped.iter().zip([0.9, -2.1]) {
        assert!((got - want).abs() < 1e-5, "{stepped:?}");
    }
}

/// Starts the sync server through `B` (the training backend), reports which backend types have
/// one, and closes it.
fn server_owners<B: DistributedBackend<Device = WgpuDevice>>() -> [bool; 3] {
    let config = DistributedConfig {
        all_reduce_op: ReduceOperation::Mean,
    };
    B::start_communication_server(&[device()], config);
    let owners = [
        get_distributed_sync_client::<In>().is_some(),
        get_distributed_sync_client::<R>().is_some(),
        get_distributed_sync_client::<RudaAd>().is_some(),
    ];
    B::close_communication_server(&device());
    assert!(
        get_distributed_sync_client::<In>().is_none(),
        "the server outlived close_communication_server"
    );
    owners
}

#[test]
fn the_sync_server_is_the_one_gradient_submissions_find() {
    // Gradient submissions come from the autodiff graph through `Ruda` (its inner backend),
    // which forwards to `Inner`: the server must be keyed by `Inner`, whichever backend started
    // it, as under Burn's own autodiff.
    let ours = server_owners::<RudaAd>();
    assert_eq!(ours, [true, false, false]);
    assert_eq!(ours, server_owners::<BurnAd>());
    assert_eq!(server_owners::<R>(), [true, false, false]);
}

#[test]
fn tensor_references_read_the_same_tensor() {
    let mut plain = tensor::<R>(&[4.0, 5.0]);
    let reference = TensorRef::<R>(&mut plain);
    // SAFETY: `plain` outlives the reference and is not moved while it is used.
    let (device_of, copy) = unsafe { (R::comm_device(&reference), R::float_from_ref(&reference)) };
    assert_eq!(device_of, device());
    assert_eq!(values::<R>(copy), vec![4.0, 5.0]);

    let mut tracked = RudaAd::float_set_require_grad(tensor::<RudaAd>(&[6.0]), true);
    let reference = TensorRef::<RudaAd>(&mut tracked);
    // SAFETY: as above.
    let (device_of, copy) = unsafe {
        (
            RudaAd::comm_device(&reference),
            RudaAd::float_from_ref(&reference),
        )
    };
    assert_eq!(device_of, device());
    assert_eq!(values::<R>(RudaAd::inner(copy)), vec![6.0]);
}
