//! Quantize/dequantize round trips (8-bit, symmetric), per tensor and per block, against
//! NdArray's round trip.
//!
//! NdArray stores quantized values natively (one `i8` each); the CubeCL backends pack four into
//! a `u32` (`QuantStore::PackedU32`), which needs the last dim to be a multiple of 4. The scheme
//! is otherwise the same, so the quantized values, the scales and the dequantized tensors must
//! agree.
//!
//! Tolerances come from the scale `s` (the step between two quantized values):
//! - the scales: 1e-6 relative (both compute `max|x| / 127` in f32);
//! - the quantized values: equal, except that at most 1% may differ by one step (an input
//!   within rounding of a midpoint `(k + 1/2) s` may round either way when the device computes
//!   `x / s` differently, e.g. as `x * (1 / s)`);
//! - the dequantized values: within `1e-6 (1 + |want|)` of NdArray's except those same ties,
//!   which may be one step `s` apart; and within `s / 2` of the input (round to nearest).

use burn::tensor::backend::Backend;
use burn::tensor::quantization::{
    Calibration, QuantLevel, QuantScheme, QuantStore, QuantValue, QuantizationParameters,
    QuantizedBytes, compute_q_params, compute_range,
};
use burn::tensor::{DType, Tensor, TensorData};

use super::{CheckResult, Checker, Reference, f32s, values};

/// The raw quantized values and scales of a quantized tensor's data.
fn raw(data: TensorData) -> Result<(Vec<i8>, Vec<f32>), String> {
    let DType::QFloat(scheme) = data.dtype else {
        return Err(format!("not a quantized tensor: {:?}", data.dtype));
    };
    let num_elements = data.num_elements();
    let (values, params) = QuantizedBytes {
        bytes: data.bytes,
        scheme,
        num_elements,
    }
    .into_vec_i8();
    Ok((values, params.scales))
}

/// Compares two round trips of `x` (the values of the input): the quantized values and scales
/// (`got_q`, `want_q`, the data of the quantized tensors) and the dequantized values; `block`
/// is the number of consecutive elements that share a scale.
fn compare_round_trip(
    x: &[f32],
    got_q: TensorData,
    want_q: TensorData,
    got: TensorData,
    want: TensorData,
    block: usize,
) -> CheckResult {
    let mut errors = Vec::new();
    let (gq, gs) = raw(got_q)?;
    let (wq, ws) = raw(want_q)?;
    if gq.len() != wq.len() || gs.len() != ws.len() {
        return Err(format!(
            "{} values and {} scales, reference {} and {}",
            gq.len(),
            gs.len(),
            wq.len(),
            ws.len()
        ));
    }
    for (i, (g, w)) in gs.iter().zip(&ws).enumerate() {
        if (g - w).abs() > 1e-6 * w.abs() {
            errors.push(format!("scale {i}: got {g}, reference {w}"));
        }
    }
    let allowed = x.len() / 100;
    let ties = gq.iter().zip(&wq).filter(|(g, w)| g != w).count();
    if let Some(i) = (0..gq.len()).find(|&i| (gq[i] as i32 - wq[i] as i32).abs() > 1) {
        errors.push(format!(
            "quantized value {i}: got {}, reference {} (input {})",
            gq[i], wq[i], x[i]
        ));
    }
    if ties > allowed {
        errors.push(format!(
            "{ties} of {} quantized values differ by one step (at most {allowed} allowed)",
            x.len()
        ));
    }
    if got.shape != want.shape {
        errors.push(format!(
            "dequantized shape {:?}, reference {:?}",
            got.shape.to_vec(),
            want.shape.to_vec()
        ));
    } else {
        let (g, w) = (f32s(&got), f32s(&want));
        let mut off = 0;
        for i in 0..g.len() {
            let s = ws[i / block];
            let step = (g[i] - w[i]).abs();
            if step > 1e-6 * (1.0 + w[i].abs()) {
                off += 1;
                if step > s * 1.001 {
                    errors.push(format!(
                        "dequantized value {i}: got {}, reference {} (scale {s})",
                        g[i], w[i]
                    ));
                    break;
                }
            }
            if (g[i] - x[i]).abs() > 0.5 * s * 1.001 + 1e-6 {
                errors.push(format!(
                    "dequantized value {i}: got {}, input {} (more than half a step {s} away)",
                    g[i], x[i]
                ));
                break;
            }
        }
        if off > allowed {
            errors.push(format!(
                "{off} of {} dequantized values differ (at most {allowed} ties allowed)",
                g.len()
            ));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// The scheme NdArray supports: values stored natively.
fn native(scheme: QuantScheme) -> QuantScheme {
    scheme.with_store(QuantStore::Native)
}

/// Round trip of `x` with min-max calibration on each backend (`quantize_dynamic`).
fn dynamic<B: Backend>(
    c: &mut Checker<B>,
    op: &str,
    x: (Tensor<B, 3>, Tensor<Reference, 3>),
    scheme: QuantScheme,
    block: usize,
) {
    let (x, nx) = x;
    let input = f32s(&nx.to_data());
    let q = x.quantize_dynamic(&scheme);
    let nq = nx.quantize_dynamic(&native(scheme));
    let result = compare_round_trip(
        &input,
        q.to_data(),
        nq.to_data(),
        q.dequantize().into_data(),
        nq.dequantize().into_data(),
        block,
    );
    c.record(op, result);
}

/// 8-bit symmetric, one scale for the whole tensor: `quantize_dynamic`, and `quantize` with
/// the reference's scale given to both backends.
pub fn per_tensor<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("x: [5, 7, 12] in [-3, 2)");
    let x = c.floats_in(60, [5, 7, 12], -3.0, 2.0);
    for value in [QuantValue::Q8S, QuantValue::Q8F] {
        let scheme = QuantScheme::default()
            .with_value(value)
            .with_level(QuantLevel::Tensor)
            .with_store(QuantStore::PackedU32(0));
        dynamic(
            &mut c,
            &format!("quantize_dynamic({value:?}, per tensor).dequantize()"),
            x.clone(),
            scheme,
            5 * 7 * 12,
        );
    }

    // The same given scale on both backends.
    let (x, nx) = x;
    let scheme = QuantScheme::default()
        .with_value(QuantValue::Q8S)
        .with_level(QuantLevel::Tensor)
        .with_store(QuantStore::PackedU32(0));
    let range = compute_range(&native(scheme), &nx, &Calibration::MinMax);
    let nparams = compute_q_params(&native(scheme), range);
    let scales = nparams.scales.to_data();
    let params = QuantizationParameters {
        scales: Tensor::<B, 1>::from_data(scales, device),
    };
    let input = f32s(&nx.to_data());
    let q = x.quantize(&scheme, params);
    let nq = nx.quantize(&native(scheme), nparams);
    let result = compare_round_trip(
        &input,
        q.to_data(),
        nq.to_data(),
        q.dequantize().into_data(),
        nq.dequantize().into_data(),
        5 * 7 * 12,
    );
    c.record("quantize(Q8S, given scale).dequantize()", result);
    c.finish()
}

/// 8-bit symmetric, one scale per block of the last dim.
pub fn per_block<B: Backend>(device: &B::Device) -> CheckResult {
    let mut c = Checker::<B>::new(device);
    c.inputs("x: [5, 7, 12] in [-3, 2), each row scaled by 10^u, u in [-2, 1)");
    // Rows of very different magnitudes, so that one scale per tensor would not fit them.
    let base = values(61, 5 * 7 * 12, -3.0, 2.0);
    let exponents = values(62, 5 * 7, -2.0, 1.0);
    let data: Vec<f32> = (0..base.len())
        .map(|i| base[i] * 10f32.powf(exponents[i / 12]))
        .collect();
    let (x, nx) = c.pair::<3>(TensorData::new(data, [5, 7, 12]));
    for block in [4usize, 12] {
        let scheme = QuantScheme::default()
            .with_value(QuantValue::Q8S)
            .with_level(QuantLevel::block([block as u8]))
            .with_store(QuantStore::PackedU32(0));
        dynamic(
            &mut c,
            &format!("quantize_dynamic(Q8S, blocks of {block}).dequantize()"),
            (x.clone(), nx.clone()),
            scheme,
            block,
        );
    }
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::differential::float_data;

    #[test]
    fn round_trip_comparison_catches_a_wrong_step() {
        let device = Default::default();
        let x = Tensor::<Reference, 3>::from_data(float_data(1, &[2, 3, 4], -1.0, 1.0), &device);
        let scheme = native(QuantScheme::default().with_value(QuantValue::Q8S));
        let q = x.clone().quantize_dynamic(&scheme);
        let input = f32s(&x.to_data());
        let deq = q.clone().dequantize().into_data();
        let compare = |got: TensorData| {
            compare_round_trip(&input, q.to_data(), q.to_data(), got, deq.clone(), 24)
        };
        assert!(compare(deq.clone()).is_ok());
        let scale = raw(q.to_data()).unwrap().1[0];
        let mut off = f32s(&deq);
        off[5] += 2.0 * scale;
        assert!(compare(TensorData::new(off, [2, 3, 4])).is_err());
        let mut half_off = f32s(&deq);
        half_off[7] += 0.5 * scale;
        assert!(compare(TensorData::new(half_off, [2, 3, 4])).is_err());
    }
}
