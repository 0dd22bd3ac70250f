//! The native LayerNorm kernels on the machine's wgpu CPU adapter (Mesa's lavapipe in CI, which
//! has no plane operations: the shared-memory reductions are what runs here; the GPU suite runs
//! the same checks, `ruda_tests::layer_norm_checks`, on CUDA and Vulkan with plane reductions).
//!
//! Here: the accuracy groups of the shared checks, the variant choice rule, and the panics on
//! bad arguments.

use cubecl::prelude::*;
use cubecl::wgpu::WgpuDevice;
use ruda_runtime::RudaWgpu;
use ruda_runtime::TensorBuffer;
use ruda_runtime::layer_norm::{
    ColumnSums, Reduction, Strategy, Variant, choose_variant, layer_norm_backward_with,
    layer_norm_forward_with,
};
use ruda_runtime::prelude::DType;
use ruda_runtime::{layer_norm_backward, layer_norm_forward};
use ruda_tests::layer_norm_checks::{self as checks, EPS, upload};

type R = RudaWgpu;

fn client() -> ComputeClient<R> {
    R::client(&WgpuDevice::Cpu)
}

// ---------------------------------------------------------------------------------------------
// Accuracy

#[test]
fn every_variant_f32() {
    checks::every_variant_f32(&client());
}

#[test]
fn forced_shared_memory_reduction() {
    checks::forced_shared_memory_reduction(&client());
}

#[test]
fn column_sums_in_registers_and_shared_memory() {
    checks::column_sums_both_ways(&client());
}

#[test]
fn automatic_choice_shapes() {
    checks::automatic_choice_shapes(&client());
}

#[test]
fn half_precision() {
    checks::half_precision(&client());
}

#[test]
fn zero_rows() {
    checks::zero_rows(&client());
}

#[test]
fn nan_stays_in_its_row() {
    checks::nan_stays_in_its_row(&client());
}

// ---------------------------------------------------------------------------------------------
// Finite differences: the backward is the gradient of the forward

#[test]
fn backward_matches_finite_differences() {
    checks::backward_matches_finite_differences(&client());
}

// ---------------------------------------------------------------------------------------------
// The choice rule

#[test]
fn choice_rule() {
    use Variant::*;
    assert_eq!(choose_variant(1, 1, DType::F32, true), PlanePerRow);
    assert_eq!(choose_variant(256, 8, DType::F32, true), PlanePerRow);
    assert_eq!(choose_variant(768, 16384, DType::F16, true), PlanePerRow);
    assert_eq!(choose_variant(768, 8, DType::F32, true), CubePerRow);
    assert_eq!(choose_variant(2048, 4096, DType::F32, true), CubePerRow);
    assert_eq!(choose_variant(2048, 4096, DType::F32, false), UnitPerRow);
    assert_eq!(choose_variant(768, 64, DType::F32, false), UnitPerRow);
    assert_eq!(choose_variant(768, 63, DType::F32, false), CubePerRow);
    assert_eq!(
        choose_variant(65536, 4, DType::F32, false),
        CubePerRowLooped
    );
    assert_eq!(choose_variant(4096, 16384, DType::F32, true), CubePerRow);
    assert_eq!(choose_variant(8192, 1, DType::BF16, false), CubePerRow);
    assert_eq!(choose_variant(8193, 1, DType::F32, true), CubePerRowLooped);
    assert_eq!(choose_variant(65536, 4, DType::F32, true), CubePerRowLooped);
}

// ---------------------------------------------------------------------------------------------
// Bad arguments panic before launching, naming the tensors and shapes

fn f32s<Rt: Runtime>(client: &ComputeClient<Rt>, shape: &[usize]) -> TensorBuffer {
    let n = shape.iter().product();
    upload(client, &vec![1.0; n], shape, DType::F32)
}

#[test]
#[should_panic(
    expected = "LayerNorm: gamma must have shape [768] to match the last dimension of input [32, 768], got [512]"
)]
fn gamma_of_wrong_length_panics() {
    let client = client();
    layer_norm_forward(
        &client,
        f32s(&client, &[32, 768]),
        f32s(&client, &[512]),
        None,
        EPS,
    );
}

#[test]
#[should_panic(
    expected = "LayerNorm: beta must have shape [8] to match the last dimension of input [2, 8], got [2, 8]"
)]
fn beta_of_wrong_shape_panics() {
    let client = client();
    let bias = Some(f32s(&client, &[2, 8]));
    layer_norm_forward(
        &client,
        f32s(&client, &[2, 8]),
        f32s(&client, &[8]),
        bias,
        EPS,
    );
}

#[test]
#[should_panic(expected = "LayerNorm: gamma has dtype F16 but input has dtype F32")]
fn mismatched_dtypes_panic() {
    let client = client();
    let gamma = upload(&client, &[1.0; 8], &[8], DType::F16);
    layer_norm_forward(&client, f32s(&client, &[2, 8]), gamma, None, EPS);
}

#[test]
#[should_panic(expected = "LayerNorm: input must have at least one dimension")]
fn rank_0_panics() {
    let client = client();
    let scalar = upload(&client, &[1.0], &[], DType::F32);
    layer_norm_forward(&client, scalar, f32s(&client, &[1]), None, EPS);
}

#[test]
#[should_panic(expected = "LayerNorm: the last dimension of input [4, 0] is empty")]
fn empty_last_dim_panics() {
    let client = client();
    layer_norm_forward(
        &client,
        f32s(&client, &[4, 0]),
        f32s(&client, &[0]),
        None,
        EPS,
    );
}

#[test]
#[should_panic(
    expected = "LayerNorm backward: grad (dy) must have the shape of input [4, 8], got [4, 9]"
)]
fn grad_of_wrong_shape_panics() {
    let client = client();
    layer_norm_backward(
        &client,
        f32s(&client, &[4, 8]),
        f32s(&client, &[8]),
        f32s(&client, &[4, 9]),
        f32s(&client, &[4]),
        f32s(&client, &[4]),
    );
}

#[test]
#[should_panic(
    expected = "LayerNorm backward: mean must have 4 elements (one per row of input [4, 8]), got shape [5]"
)]
fn mean_of_wrong_length_panics() {
    let client = client();
    layer_norm_backward(
        &client,
        f32s(&client, &[4, 8]),
        f32s(&client, &[8]),
        f32s(&client, &[4, 8]),
        f32s(&client, &[5]),
        f32s(&client, &[4]),
    );
}

#[test]
#[should_panic(
    expected = "LayerNorm backward: rstd must have 6 elements (one per row of input [2, 3, 8]), got shape [2, 2]"
)]
fn rstd_of_wrong_length_panics() {
    let client = client();
    layer_norm_backward(
        &client,
        f32s(&client, &[2, 3, 8]),
        f32s(&client, &[8]),
        f32s(&client, &[2, 3, 8]),
        f32s(&client, &[2, 3]),
        f32s(&client, &[2, 2]),
    );
}

#[test]
#[should_panic(expected = "LayerNorm backward: gamma must have shape [8]")]
fn backward_gamma_of_wrong_length_panics() {
    let client = client();
    layer_norm_backward(
        &client,
        f32s(&client, &[4, 8]),
        f32s(&client, &[7]),
        f32s(&client, &[4, 8]),
        f32s(&client, &[4]),
        f32s(&client, &[4]),
    );
}

#[test]
#[should_panic(expected = "cannot fit d = 65536")]
fn register_variant_too_long_for_registers_panics() {
    let client = client();
    layer_norm_forward_with(
        &client,
        f32s(&client, &[1, 65536]),
        f32s(&client, &[65536]),
        None,
        EPS,
        Variant::PlanePerRow,
    );
}

#[test]
fn forcing_shared_column_sums_beyond_shared_memory_panics() {
    // A cube per row of 8192 f32 elements holds 96 KiB of gamma and sums, whatever the vector.
    let client = client();
    let max = client.properties().hardware.max_shared_memory_size;
    if max >= 3 * 8192 * 4 + 4096 {
        println!("note: this device has {max} bytes of shared memory a cube; nothing to check");
        return;
    }
    let result = std::panic::catch_unwind(|| {
        let client = self::client();
        let strategy = Strategy::new(Variant::CubePerRow, Reduction::Auto)
            .with_column_sums(ColumnSums::SharedMemory);
        layer_norm_backward_with(
            &client,
            f32s(&client, &[1, 8192]),
            f32s(&client, &[8192]),
            f32s(&client, &[1, 8192]),
            f32s(&client, &[1]),
            f32s(&client, &[1]),
            strategy,
        );
    });
    let message = *result
        .expect_err("forcing shared column sums beyond the device's shared memory must panic")
        .downcast::<String>()
        .unwrap();
    assert!(
        message.contains("ColumnSums::SharedMemory was forced")
            && message.contains(&format!("more than this device's {max}")),
        "{message}"
    );
}

#[test]
fn forcing_plane_reduction_without_plane_ops_panics() {
    let client = client();
    if client
        .properties()
        .features
        .plane
        .contains(cubecl::features::Plane::Ops)
    {
        println!("note: this device has plane operations; nothing to check");
        return;
    }
    let result = std::panic::catch_unwind(|| {
        let strategy = Strategy::new(Variant::PlanePerRow, Reduction::Plane);
        let client = self::client();
        layer_norm_forward_with(
            &client,
            f32s(&client, &[2, 8]),
            f32s(&client, &[8]),
            None,
            EPS,
            strategy,
        );
    });
    let message = *result
        .expect_err("forcing Reduction::Plane without plane operations must panic")
        .downcast::<String>()
        .unwrap();
    assert!(
        message.contains("Reduction::Plane was forced but this device does not advertise plane"),
        "{message}"
    );
}

// ---------------------------------------------------------------------------------------------
// Every autotune candidate on its own: the tuner only times them, so each must be right

#[test]
fn every_candidate() {
    use ruda_runtime::layer_norm::tune::{BACKWARD_CANDIDATES, CANDIDATES};
    assert_eq!(CANDIDATES.len(), 8);
    assert_eq!(BACKWARD_CANDIDATES.len(), 12);
    let shapes: &[&[usize]] = &[
        &[3, 65536],
        &[4, 65536],
        &[2, 40000],
        &[3, 32768],
        &[3, 16384],
        &[4, 8192],
        &[2, 3, 40],
        &[64, 768],
        &[37, 1031],
    ];
    let ran = checks::every_candidate(&client(), &BACKWARD_CANDIDATES, shapes);
    // d = 65536: the looped candidates at both widths, one unit per row only with the widest
    // vector (half-width vectors would loop past lavapipe's limit).
    for ran in &ran[..2] {
        assert!(ran.contains(&"CubePerRowLooped/half".to_string()));
        assert!(ran.contains(&"UnitPerRow/widest".to_string()));
        assert!(!ran.contains(&"UnitPerRow/half".to_string()));
    }
    // d = 40000: both widths of one unit per row.
    assert!(ran[2].contains(&"UnitPerRow/half".to_string()));
    // Short vectorized rows: the forward's eight; [2, 3, 40] also with shared column sums.
    for candidate in &CANDIDATES {
        assert!(ran[7].contains(&candidate.name()), "{:?}", ran[7]);
    }
    assert_eq!(ran[6].len(), 12, "{:?}", ran[6]);
}
