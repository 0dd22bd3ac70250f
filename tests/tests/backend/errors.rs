//! Bad input through Burn: the mistake panics on the caller's thread, at the call that made
//! it, with a message naming the operation and the shapes, before anything is queued; a dtype
//! the native kernels do not take gets Burn's composed operation and the right answer.
//!
//! Each case runs on `Ruda<RudaWgpu>`, `burn_ruda::Autodiff<Ruda>` and Burn's own
//! `Autodiff<Ruda>`. A panic that surfaced later (on burn-fusion's thread, at the next read)
//! would not be caught around the call: each case checks that the call itself panics and that
//! the device still works afterwards.

use burn::nn::LayerNormConfig;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData, activation};
use burn_ruda::{Ruda, RudaWgpu};
use cubecl::wgpu::WgpuDevice;
use ruda_tests::differential::module_ops::layer_norm_of as layer_norm;
use serial_test::serial;

type R = Ruda<RudaWgpu>;
type RudaAd = burn_ruda::Autodiff<R>;
type BurnAd = burn::backend::Autodiff<R>;

fn device() -> WgpuDevice {
    WgpuDevice::Cpu
}

/// The message of the panic `f` raises on this thread; fails when it does not panic.
fn panic_of(f: impl FnOnce()) -> String {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    let panic = result.expect_err("expected the call to panic on the caller's thread");
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// The device still answers after a refused call: nothing half-queued broke the stream.
fn still_works<B: Backend>(device: &B::Device) {
    let x = Tensor::<B, 1>::from_data(TensorData::new(vec![1.0f32, 2.0, 3.0], [3]), device);
    let sum: Vec<f32> = (x * 2.0)
        .sum()
        .into_data()
        .convert::<f32>()
        .to_vec()
        .unwrap();
    assert_eq!(sum, [12.0]);
}

/// `layer_norm(x [2, 6], gamma [5])` on backend `B`: the panic's message.
fn wrong_gamma<B: Backend>(device: &B::Device) -> String {
    let x = Tensor::<B, 2>::ones([2, 6], device);
    let gamma = Tensor::<B, 1>::ones([5], device);
    let message = panic_of(|| {
        let y = layer_norm(x, gamma, None, 1e-5);
        drop(y);
    });
    still_works::<B>(device);
    message
}

/// `layer_norm(x [2, 6], gamma [6], beta [7])`.
fn wrong_beta<B: Backend>(device: &B::Device) -> String {
    let x = Tensor::<B, 2>::ones([2, 6], device);
    let gamma = Tensor::<B, 1>::ones([6], device);
    let beta = Tensor::<B, 1>::zeros([7], device);
    let message = panic_of(|| {
        drop(layer_norm(x, gamma, Some(beta), 1e-5));
    });
    still_works::<B>(device);
    message
}

#[test]
#[serial]
fn layer_norm_with_a_wrong_gamma_or_beta_panics_at_the_call_naming_it() {
    for message in [
        wrong_gamma::<R>(&device()),
        wrong_gamma::<RudaAd>(&device()),
        wrong_beta::<R>(&device()),
        wrong_beta::<RudaAd>(&device()),
    ] {
        assert!(
            message.starts_with("LayerNorm: ")
                && message.contains("to match the last dimension of input [2, 6]"),
            "{message}"
        );
    }
}

/// `layer_norm` of a rank-0 tensor, through the backend's own method.
fn scalar_layer_norm<B: Backend>(device: &B::Device) -> String {
    use burn::tensor::ops::ModuleOps;
    // CubeCL cannot allocate a rank-0 tensor: a one-element tensor reshaped to rank 0.
    let x = B::float_from_data(TensorData::new(vec![1.0f32], [1]), device);
    let x = B::float_reshape(x, burn::tensor::Shape::new([0usize; 0]));
    let gamma = B::float_from_data(TensorData::new(vec![1.0f32], [1]), device);
    let message = panic_of(|| drop(<B as ModuleOps<B>>::layer_norm(x, gamma, None, 1e-5)));
    still_works::<B>(device);
    message
}

#[test]
#[serial]
fn layer_norm_of_a_scalar_panics_at_the_call_naming_it() {
    for message in [
        scalar_layer_norm::<R>(&device()),
        scalar_layer_norm::<RudaAd>(&device()),
    ] {
        assert!(
            message.contains("LayerNorm: input must have at least one dimension"),
            "{message}"
        );
    }
}

#[test]
#[serial]
fn layer_norm_with_gamma_of_another_dtype_panics_at_the_call_naming_it() {
    fn case<B: Backend>(device: &B::Device) -> String {
        let x = Tensor::<B, 2>::ones([3, 4], device);
        let gamma = Tensor::<B, 1>::ones([4], device).cast(burn::tensor::DType::F16);
        let message = panic_of(|| drop(layer_norm(x, gamma, None, 1e-5)));
        still_works::<B>(device);
        message
    }
    for message in [case::<R>(&device()), case::<RudaAd>(&device())] {
        assert!(
            message.contains("LayerNorm: gamma has dtype F16 but input has dtype F32"),
            "{message}"
        );
    }
}

/// Burn's own autodiff composes LayerNorm from Burn's operations (it never calls the backend's
/// `layer_norm`): its mistakes are Burn's to report, and burn-fusion refuses the composed
/// LayerNorm's reshape of the wrong gamma on the caller's thread.
#[test]
#[serial]
fn layer_norm_under_burns_own_autodiff_panics_at_the_call() {
    let message = wrong_gamma::<BurnAd>(&device());
    assert!(
        message.contains("doesn't have the same number of elements")
            && message.contains("Current shape: [5], target shape: [1, 6]"),
        "{message}"
    );
}

/// The checks let a right call through: `nn::LayerNorm` normalizes as before.
#[test]
#[serial]
fn nn_layer_norm_passes_the_checks_and_normalizes() {
    let x = Tensor::<R, 2>::from_data(
        TensorData::new(vec![1.0f32, 2.0, 4.0, 8.0], [2, 2]),
        &device(),
    );
    let module = LayerNormConfig::new(2).init::<R>(&device());
    let y: Vec<f32> = module.forward(x).into_data().to_vec().unwrap();
    for (got, want) in y.iter().zip([-1.0f32, 1.0, -1.0, 1.0]) {
        assert!((got - want).abs() < 1e-3, "{y:?}");
    }
}

#[test]
#[serial]
fn softmax_over_a_dimension_out_of_range_panics_at_the_call() {
    fn case<B: Backend>(device: &B::Device) -> String {
        let x = Tensor::<B, 2>::ones([2, 3], device);
        // Burn's tensor API checks the dimension first; the primitive path is ruda's check.
        let message = panic_of(|| {
            drop(Tensor::<B, 2>::from_primitive(
                burn::tensor::TensorPrimitive::Float(B::softmax(x.into_primitive().tensor(), 2)),
            ))
        });
        still_works::<B>(device);
        message
    }
    for message in [case::<R>(&device()), case::<RudaAd>(&device())] {
        assert!(
            message.contains(
                "softmax: dimension 2 is out of range for a tensor of rank 2 (shape [2, 3])"
            ),
            "{message}"
        );
    }
    let x = Tensor::<R, 2>::ones([2, 3], &device());
    let message = panic_of(|| drop(activation::softmax(x, 2)));
    assert!(message.contains("softmax"), "{message}");
}

// ---------------------------------------------------------------------------------------------
// Faults: a native operation that fails after its caller returned

/// An injected failure of the native LayerNorm's launch (`RUDA_FAULT_INJECT`, the hook the GPU
/// suite also uses for the cuBLAS product) is an error naming the operation at the next read
/// and at every sync of the device, never a read of its unwritten output. In its own process:
/// the fault is process-wide and would fail every other test on the device.
#[test]
fn an_injected_launch_failure_is_an_error_at_the_next_read_naming_it() {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "errors::injected_failure_in_this_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            ruda_runtime::faults::ENV_FAULT_INJECT,
            "ruda_layer_norm_output",
        )
        .output()
        .expect("the test binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "the child test failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Run by [`an_injected_launch_failure_is_an_error_at_the_next_read_naming_it`] in a process of
/// its own, with `RUDA_FAULT_INJECT=ruda_layer_norm_output`.
#[test]
#[ignore = "run in its own process by an_injected_launch_failure_is_an_error_at_the_next_read_naming_it"]
fn injected_failure_in_this_process() {
    use burn::tensor::ops::FloatTensorOps;
    use cubecl::device::Device as _;
    assert!(
        std::env::var(ruda_runtime::faults::ENV_FAULT_INJECT).is_ok(),
        "run by its parent test, which sets the injection"
    );
    let x = Tensor::<R, 2>::ones([2, 4], &device());
    let gamma = Tensor::<R, 1>::ones([4], &device());
    // The call itself returns: the failure happens when burn-fusion launches the kernel.
    let y = layer_norm(x, gamma, None, 1e-5);
    let read = cubecl::future::block_on(R::float_into_data(y.into_primitive().tensor()));
    let error = format!(
        "{:?}",
        read.expect_err("the read of a failed operation is an error")
    );
    assert!(
        error.contains("ruda_layer_norm_output failed") && error.contains("injected failure"),
        "{error}"
    );
    // Every later read and sync of the device reports it too, until cleared.
    let z = Tensor::<R, 1>::ones([3], &device()) * 2.0;
    let read = cubecl::future::block_on(R::float_into_data(z.into_primitive().tensor()));
    assert!(read.is_err());
    assert!(format!("{:?}", R::sync(&device()).unwrap_err()).contains("ruda_layer_norm_output"));
    let fault = ruda_runtime::faults::clear(device().to_id()).expect("the fault was recorded");
    assert_eq!(fault.op, "ruda_layer_norm_output");
    R::sync(&device()).expect("cleared");
    still_works::<R>(&device());
}
