//! The native softmax and log-softmax kernels on the machine's wgpu CPU adapter (Mesa's lavapipe
//! in CI, without plane operations: the shared-memory reductions and the unit-per-row kernels
//! run here; the GPU suite runs the same checks, `ruda_tests::softmax_checks`, on CUDA).

use cubecl::prelude::*;
use cubecl::wgpu::WgpuDevice;
use ruda_runtime::RudaWgpu;
use ruda_runtime::softmax::{Kind, Variant, choose_variant, softmax_forward_with};
use ruda_tests::softmax_checks as checks;

type R = RudaWgpu;

fn client() -> ComputeClient<R> {
    R::client(&WgpuDevice::Cpu)
}

#[test]
fn every_variant() {
    checks::every_variant(&client());
}

#[test]
fn automatic_choice() {
    checks::automatic_choice(&client());
}

#[test]
fn every_autotune_candidate() {
    checks::every_autotune_candidate(&client());
}

#[test]
fn other_dimensions() {
    checks::other_dimensions(&client());
}

#[test]
fn half_precision() {
    checks::half_precision(&client());
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
fn default_rule() {
    assert_eq!(choose_variant(256, 1000, false), Variant::UnitPerRow);
    assert_eq!(choose_variant(256, 10, false), Variant::PlanePerRow);
    assert_eq!(choose_variant(256, 1000, true), Variant::PlanePerRow);
    assert_eq!(choose_variant(4096, 1000, true), Variant::CubePerRow);
    assert_eq!(choose_variant(50304, 8192, true), Variant::CubePerRowStaged);
}

#[test]
#[should_panic(expected = "softmax PlanePerRow: a row of 100000 elements")]
fn a_forced_variant_that_cannot_hold_the_row_panics_before_launching() {
    let client = client();
    let input = checks::upload_f32(&client, &vec![0.0; 100_000], &[1, 100_000]);
    softmax_forward_with(&client, input, 1, Kind::Softmax, Variant::PlanePerRow);
}

#[test]
#[should_panic(
    expected = "softmax: dimension 2 is out of range for a tensor of rank 2 (shape [2, 3])"
)]
fn a_dimension_out_of_range_panics() {
    let client = client();
    let input = checks::upload_f32(&client, &[0.0; 6], &[2, 3]);
    softmax_forward_with(&client, input, 2, Kind::Softmax, Variant::PlanePerRow);
}
