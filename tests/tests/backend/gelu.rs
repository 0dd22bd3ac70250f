//! The native GELU kernels on the machine's wgpu CPU adapter (Mesa's lavapipe in CI; the GPU
//! suite runs the same checks, `ruda_tests::gelu_checks`, on CUDA), and `Ruda`'s GELU with them
//! switched on (`RUDA_GELU=native`, off by default: those tests run in a child process with it
//! set, as the switch is read once per process).

use burn::backend::NdArray;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{DType, Tensor, TensorData, activation};
use burn_ruda::Ruda;
use cubecl::prelude::*;
use cubecl::wgpu::WgpuDevice;
use ruda_runtime::RudaWgpu;
use ruda_tests::differential::{compare_floats, float_data};
use ruda_tests::gelu_checks as checks;
use ruda_tests::launches::gelu as gelu_calls;
use serial_test::serial;

use crate::child::in_child;

type R = RudaWgpu;
type RudaB = Ruda<RudaWgpu>;
type RudaAd = burn_ruda::Autodiff<RudaB>;
type BurnAdNd = burn::backend::Autodiff<NdArray>;

fn client() -> ComputeClient<R> {
    R::client(&WgpuDevice::Cpu)
}

#[test]
fn dtypes_and_shapes() {
    checks::dtypes_and_shapes(&client());
}

#[test]
fn strided_input() {
    checks::strided(&client());
}

#[test]
fn long_tensor() {
    checks::long(&client());
}

#[test]
fn special_values() {
    checks::special_values(&client());
}

#[test]
fn empty_tensors() {
    checks::empty(&client());
}

#[test]
fn a_gradient_of_another_shape_panics() {
    checks::shape_check(&client());
}

/// In the harness's process: runs `test` in a child process with `RUDA_GELU=native` and
/// returns `false`. In that child: checks that the switch is on and returns `true`.
fn in_child_with_native_gelu(test: &str) -> bool {
    if !in_child(test, &[(ruda_runtime::gelu::ENV_GELU, "native")]) {
        return false;
    }
    assert!(
        ruda_runtime::gelu::native_enabled(),
        "RUDA_GELU=native is read"
    );
    true
}

fn close(what: &str, got: TensorData, want: TensorData) {
    if let Err(message) = compare_floats(&got, &want, 1e-5) {
        panic!("{what}: {message}");
    }
}

/// GELU under `burn_ruda::Autodiff` (Burn's node, which runs `Ruda`'s `gelu` and
/// `gelu_backward`): one native forward and one native backward, with the output and input
/// gradient of Burn's autodiff over NdArray (whose backward is Burn's default, the derivative
/// the native kernel evaluates). Serial: reads the native-launch counters.
#[test]
#[serial]
fn gelu_under_autodiff_runs_one_native_forward_and_backward() {
    fn run<B: AutodiffBackend>(device: &B::Device) -> (TensorData, TensorData) {
        let x = Tensor::<B, 3>::from_data(float_data(91, &[4, 3, 40], -5.0, 5.0), device)
            .require_grad();
        let weights = Tensor::<B, 3>::from_data(float_data(92, &[4, 3, 40], -1.0, 1.0), device);
        let y = activation::gelu(x.clone());
        let grads = (y.clone() * weights).sum().backward();
        let dx = x.grad(&grads).expect("x has a gradient");
        (y.into_data(), dx.into_data())
    }

    if !in_child_with_native_gelu("gelu::gelu_under_autodiff_runs_one_native_forward_and_backward")
    {
        return;
    }
    let before = gelu_calls();
    let (y, dx) = run::<RudaAd>(&WgpuDevice::Cpu);
    let after = gelu_calls();
    let (want_y, want_dx) = run::<BurnAdNd>(&Default::default());
    close("gelu", y, want_y);
    close("gelu's input gradient", dx, want_dx);
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (1, 1),
        "one native forward and one native backward"
    );
}

/// GELU on plain `Ruda` (no autodiff): the native kernel for f32, against NdArray; Burn's
/// composed GELU for f64, which the kernel does not take (only the path is checked there: on
/// Vulkan, whose `exp` has no f64 form, Burn's f64 erf gives no usable values).
#[test]
#[serial]
fn gelu_on_ruda_runs_the_native_kernel_for_f32_and_burns_for_f64() {
    if !in_child_with_native_gelu(
        "gelu::gelu_on_ruda_runs_the_native_kernel_for_f32_and_burns_for_f64",
    ) {
        return;
    }
    let data = float_data(93, &[5, 7], -2.0, 2.0);
    let x = Tensor::<RudaB, 2>::from_data(data.clone(), &WgpuDevice::Cpu);
    let want = activation::gelu(Tensor::<NdArray, 2>::from_data(data, &Default::default()));
    let before = gelu_calls();
    let got = activation::gelu(x.clone()).into_data();
    assert_eq!(gelu_calls().0 - before.0, 1, "f32: one native forward");
    close("gelu f32", got, want.into_data());
    if <RudaB as Backend>::supports_dtype(&WgpuDevice::Cpu, DType::F64) {
        let before = gelu_calls();
        let got = activation::gelu(x.cast(DType::F64)).into_data();
        assert_eq!(got.dtype, DType::F64);
        assert_eq!(gelu_calls().0 - before.0, 0, "f64: Burn's composed GELU");
    }
}
