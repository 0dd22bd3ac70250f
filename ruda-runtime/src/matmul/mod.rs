//! Native matrix products: cuBLAS on [`crate::RudaCuda`], ordered with CubeCL's kernels.
//!
//! Burn's matmul on CUDA is burn-cubecl's: tensor-core kernels that reach about a third of
//! cuBLAS's throughput on an H200 in TF32, and a tuner that compiles and times ~180 candidate
//! kernels on a cold start (`docs/perf/startup.md`). NVIDIA's own GEMMs are
//! the better engine there, so [`crate::RudaCuda`] runs matrix products through cuBLAS, loaded at
//! run time like the driver and NVRTC (`libcublas.so`, e.g. from the CUDA toolkit or PyTorch's
//! `nvidia-cublas` wheel on `LD_LIBRARY_PATH`). Where it does not load, products stay Burn's.
//!
//! How a call is ordered with CubeCL's work: CubeCL 0.10 keeps its CUDA streams private, so a
//! library call cannot be put on them. Instead the call is queued on CubeCL's device thread like
//! any CubeCL command (so it is issued in program order, after the kernels that wrote its
//! operands), and runs on ruda's own stream between two context-wide events: the stream waits for
//! everything the context has queued so far (`cuCtxRecordEvent`), and everything queued later
//! waits for the product (`cuCtxWaitEvent`). Neither blocks the host. See [`cublas`].
//!
//! Numerics: f32 products run in TF32 on tensor cores by default, as burn-cubecl's matmul does on
//! the same GPUs and as PyTorch does with `allow_tf32`; `RUDA_MATMUL_TF32=off` keeps full f32
//! products. f16 and bf16 accumulate in f32; f64 runs in f64.
//!
//! Layouts: a product reads strided operands as they are: transposed, sliced, broadcast (one
//! strided-batched call), and views whose batch dimensions do not collapse into one stride
//! (multi-head attention's `[batch, heads, seq, d]` views of `[batch, seq, heads, d]`: one
//! batched call on per-entry pointers, see [`plan`]), instead of copying them row-major first
//! (48 fewer copies and 8-11% off the transformer's training step, `docs/perf/products.md`).
//! `RUDA_MATMUL_NESTED=off` copies such views first, as before. Where such a view has the
//! output's shape as the right-hand side (attention's `weights x value`, the value's and the
//! query's gradients), the output is written in the view's memory order ([`output_strides`]),
//! so that Burn's `swap_dims(1, 2).reshape(..)` of it needs no copy; likewise a transposed view
//! on the left (the key's gradient, which Burn computes as `key^T`'s: column-major outputs).
//! `RUDA_MATMUL_OUTPUT_ORDER=rhs` follows only the right-hand side, `=off` keeps every output
//! row-major.
//!
//! `RUDA_MATMUL=cubecl` (or `burn`, `off`) keeps Burn's matmul everywhere.

pub mod plan;

#[cfg(feature = "cuda")]
pub mod cublas;

pub use plan::{
    BatchLayout, GemmOperand, GemmPlan, GemmUnsupported, output_shape, output_strides, plan,
    plan_into, plan_strided,
};

use std::sync::OnceLock;

use burn_backend::DType;

use crate::env::is_off;

/// Whether native products take `dtype` (f32, f16, bf16, f64); others stay Burn's.
pub fn supports_dtype(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
}

/// `RUDA_MATMUL`: `cubecl` (also `burn`, `off`, `0`, `false`) keeps Burn's matmul; anything
/// else, or unset, uses the native one where the runtime has it.
pub const ENV_MATMUL: &str = "RUDA_MATMUL";
/// `RUDA_MATMUL_TF32`: `off` (also `0`, `false`, `no`) makes native f32 products full f32.
pub const ENV_MATMUL_TF32: &str = "RUDA_MATMUL_TF32";
/// `RUDA_MATMUL_NESTED`: `off` (also `0`, `false`, `no`) copies an operand whose batch
/// dimensions do not collapse into one stride, instead of reading it through per-entry pointers.
pub const ENV_MATMUL_NESTED: &str = "RUDA_MATMUL_NESTED";
/// `RUDA_MATMUL_OUTPUT_ORDER`: `off` (also `0`, `false`, `no`) keeps every product's output
/// row-major, instead of in an operand's memory order where [`output_strides`] gives one;
/// `rhs` follows only the right-hand side's order, not a transposed left-hand side's.
pub const ENV_MATMUL_OUTPUT_ORDER: &str = "RUDA_MATMUL_OUTPUT_ORDER";

/// The matmul settings of this process, from the environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatmulSettings {
    /// `false` when `RUDA_MATMUL=cubecl`: Burn's matmul everywhere.
    pub native: bool,
    /// `false` when `RUDA_MATMUL_TF32=off`: f32 products without TF32 rounding.
    pub tf32: bool,
    /// `false` when `RUDA_MATMUL_NESTED=off`: nested batch layouts are copied first.
    pub nested: bool,
    /// `false` when `RUDA_MATMUL_OUTPUT_ORDER=off` (or nested layouts are off): outputs are
    /// always row-major.
    pub output_order: bool,
    /// `false` when `RUDA_MATMUL_OUTPUT_ORDER=rhs` (or `off`): outputs never follow a
    /// transposed left-hand side's order (column-major outputs).
    pub transposed_order: bool,
}

impl MatmulSettings {
    /// Reads the four variables (no caching; see [`settings`]).
    pub fn from_env() -> Self {
        let var = |name| std::env::var(name).ok();
        Self::from_values(var(ENV_MATMUL).as_deref(), var(ENV_MATMUL_TF32).as_deref())
            .with_nested(var(ENV_MATMUL_NESTED).as_deref())
            .with_output_order(var(ENV_MATMUL_OUTPUT_ORDER).as_deref())
    }

    /// The settings for the values of `RUDA_MATMUL` and `RUDA_MATMUL_TF32` (`None`: unset),
    /// nested batch layouts read in place, outputs in an operand's order where it
    /// applies.
    pub fn from_values(matmul: Option<&str>, tf32: Option<&str>) -> Self {
        Self {
            native: !is_off(matmul, &["cubecl", "burn"]),
            tf32: !is_off(tf32, &[]),
            nested: true,
            output_order: true,
            transposed_order: true,
        }
    }

    /// These settings with the value of `RUDA_MATMUL_NESTED` (`None`: unset).
    pub fn with_nested(self, nested: Option<&str>) -> Self {
        Self {
            nested: !is_off(nested, &[]),
            ..self
        }
    }

    /// These settings with the value of `RUDA_MATMUL_OUTPUT_ORDER` (`None`: unset).
    pub fn with_output_order(self, order: Option<&str>) -> Self {
        let output_order = !is_off(order, &[]);
        let rhs_only = order.is_some_and(|v| v.trim().eq_ignore_ascii_case("rhs"));
        Self {
            output_order,
            transposed_order: output_order && !rhs_only,
            ..self
        }
    }
}

/// The settings read at the first call of this process.
pub fn settings() -> MatmulSettings {
    static SETTINGS: OnceLock<MatmulSettings> = OnceLock::new();
    *SETTINGS.get_or_init(MatmulSettings::from_env)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_default_to_native_tf32_products() {
        let default = MatmulSettings::from_values(None, None);
        assert_eq!(
            default,
            MatmulSettings {
                native: true,
                tf32: true,
                nested: true,
                output_order: true,
                transposed_order: true
            }
        );
        for on in ["on", " ON ", "1", "true", "yes", "", "transposed"] {
            assert!(default.with_nested(Some(on)).nested, "{on}");
            assert_eq!(default.with_output_order(Some(on)), default, "{on}");
        }
        assert_eq!(MatmulSettings::from_values(Some(""), Some("on")), default);
        assert_eq!(MatmulSettings::from_values(Some("cublas"), None), default);
    }

    #[test]
    fn output_order_can_follow_the_right_hand_side_only() {
        let order = MatmulSettings::from_values(None, None).with_output_order(Some(" RHS "));
        assert!(order.output_order && !order.transposed_order);
    }

    #[test]
    fn settings_switch_off() {
        for off in ["cubecl", "Burn", " off ", "0", "false", "no"] {
            assert!(
                !MatmulSettings::from_values(Some(off), None).native,
                "{off}"
            );
        }
        for off in ["OFF", "0", "false", "no"] {
            assert!(!MatmulSettings::from_values(None, Some(off)).tf32, "{off}");
            let default = MatmulSettings::from_values(None, None);
            assert!(!default.with_nested(Some(off)).nested, "{off}");
            let order = default.with_output_order(Some(off));
            assert!(!order.output_order && !order.transposed_order, "{off}");
        }
    }

    #[test]
    fn native_dtypes() {
        for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
            assert!(supports_dtype(dtype));
        }
        for dtype in [DType::I32, DType::U8, DType::I64] {
            assert!(!supports_dtype(dtype));
        }
    }
}
