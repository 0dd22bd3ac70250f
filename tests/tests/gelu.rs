//! The native GELU kernels on the machine's wgpu CPU adapter (Mesa's lavapipe in CI; the GPU
//! suite runs the same checks, `ruda_tests::gelu_checks`, on CUDA).

use cubecl::prelude::*;
use cubecl::wgpu::WgpuDevice;
use ruda_runtime::RudaWgpu;
use ruda_tests::gelu_checks as checks;

type R = RudaWgpu;

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
