//! The Ruda [`Runtime`] trait: a CubeCL runtime plus the hooks that make it a ruda runtime.

use alloc::string::String;

use crate::tensor_buffer::TensorBuffer;
use cubecl::client::ComputeClient;

/// Runtime for the `Ruda`.
///
/// Every method of [`cubecl::Runtime`] (compiler, server, device, client, name, launch limits,
/// device enumeration) comes from CubeCL; this trait adds the ruda hooks, all with defaults, so
/// that any CubeCL runtime becomes a ruda runtime with an empty `impl`.
///
/// A runtime supplies native LayerNorm by implementing the three LayerNorm hooks: with kernels
/// of its own, or with ruda's portable ones (written once in CubeCL for every runtime) through
/// [`portable_layer_norm_hooks!`](crate::portable_layer_norm_hooks), as [`crate::RudaCuda`] and
/// [`crate::RudaWgpu`] do. Backends call the hooks only when `has_native_layer_norm` is true.
///
/// ```
/// #[derive(Debug, Clone)]
/// struct MyRuntime;
/// # use ruda_runtime::cubecl;
/// # impl cubecl::Runtime for MyRuntime {
/// #     type Compiler = <cubecl::wgpu::WgpuRuntime as cubecl::Runtime>::Compiler;
/// #     type Server = <cubecl::wgpu::WgpuRuntime as cubecl::Runtime>::Server;
/// #     type Device = <cubecl::wgpu::WgpuRuntime as cubecl::Runtime>::Device;
/// #     fn client(device: &Self::Device) -> cubecl::client::ComputeClient<Self> {
/// #         cubecl::client::ComputeClient::load(device)
/// #     }
/// #     fn name(_: &cubecl::client::ComputeClient<Self>) -> &'static str { "mine" }
/// #     fn max_cube_count() -> (u32, u32, u32) { cubecl::wgpu::WgpuRuntime::max_cube_count() }
/// #     fn can_read_tensor(shape: &cubecl::zspace::Shape, strides: &cubecl::zspace::Strides) -> bool {
/// #         cubecl::wgpu::WgpuRuntime::can_read_tensor(shape, strides)
/// #     }
/// #     fn target_properties() -> cubecl::ir::TargetProperties {
/// #         cubecl::wgpu::WgpuRuntime::target_properties()
/// #     }
/// #     fn enumerate_devices(t: u16, info: &<Self::Server as cubecl::server::ComputeServer>::Info)
/// #         -> Vec<cubecl::device::DeviceId> { cubecl::wgpu::WgpuRuntime::enumerate_devices(t, info) }
/// # }
/// // `MyRuntime` implements `cubecl::Runtime`; it opts in with the defaults:
/// impl ruda_runtime::Runtime for MyRuntime {}
/// assert!(!<MyRuntime as ruda_runtime::Runtime>::has_native_layer_norm());
/// ```
pub trait Runtime: cubecl::Runtime {
    /// Whether this runtime supplies native LayerNorm forward and all first-order gradients.
    fn has_native_layer_norm() -> bool {
        false
    }

    /// Native LayerNorm, returning output, mean and reciprocal standard deviation (the contract
    /// of [`crate::layer_norm::layer_norm_forward`]).
    fn layer_norm(
        _client: &ComputeClient<Self>,
        _input: TensorBuffer,
        _weight: TensorBuffer,
        _bias: Option<TensorBuffer>,
        _epsilon: f64,
    ) -> [TensorBuffer; 3] {
        unimplemented!("runtime does not supply native LayerNorm")
    }

    /// Native LayerNorm gradients, returning input, weight and bias gradients (the contract of
    /// [`crate::layer_norm::layer_norm_backward`]).
    fn layer_norm_backward(
        _client: &ComputeClient<Self>,
        _input: TensorBuffer,
        _weight: TensorBuffer,
        _grad: TensorBuffer,
        _mean: TensorBuffer,
        _rstd: TensorBuffer,
    ) -> [TensorBuffer; 3] {
        unimplemented!("runtime does not supply native LayerNorm backward")
    }

    /// Whether matrix products on `client`'s device have a native implementation
    /// ([`Runtime::matmul`]; see [`crate::matmul`]). The default: no, Burn's matmul runs.
    fn has_native_matmul(_client: &ComputeClient<Self>) -> bool {
        false
    }

    /// Native `lhs x rhs` (`[.., m, k] x [.., k, n]`, batch dimensions broadcast), returning a
    /// fresh row-major buffer of `lhs`'s dtype. Called only when [`Runtime::has_native_matmul`]
    /// is true, with equal float dtypes and shapes [`crate::matmul::output_shape`] accepts; an
    /// operand whose strides no GEMM operand describes is the runtime's to copy (see
    /// [`crate::matmul::plan`]).
    fn matmul(
        _client: &ComputeClient<Self>,
        _lhs: TensorBuffer,
        _rhs: TensorBuffer,
    ) -> TensorBuffer {
        unimplemented!("runtime does not supply a native matmul")
    }

    /// [`Runtime::matmul`] with f32 operands never rounded to TF32, whatever
    /// `RUDA_MATMUL_TF32` says: for products that stand for a sum and must match a reduction's
    /// precision (a linear layer's bias gradient, `ones x dy`). The default is
    /// [`Runtime::matmul`], for runtimes whose products do not round.
    fn matmul_full_precision(
        client: &ComputeClient<Self>,
        lhs: TensorBuffer,
        rhs: TensorBuffer,
    ) -> TensorBuffer {
        Self::matmul(client, lhs, rhs)
    }

    /// Stable loaded driver/runtime identity for persistent autotuning. Unknown backends return
    /// None and use session-only caches; device ordinal or API major version alone is insufficient.
    /// Adding a default preserves existing custom Runtime implementations.
    ///
    /// Autotune caches are keyed on its hash ([`crate::autotune`]). A runtime records it for
    /// ruda's tuners and CubeCL's by returning
    /// [`cache_identity(client, base).runtime_name`](crate::autotune::cache_identity) from its
    /// `cubecl::Runtime::name`, as [`crate::RudaCuda`] and [`crate::RudaWgpu`] do; otherwise
    /// LayerNorm is tuned per process only.
    fn autotune_driver_fingerprint(_client: &ComputeClient<Self>) -> Option<String> {
        None
    }
}

/// The three LayerNorm hooks of [`Runtime`] for a runtime that runs ruda's portable kernels
/// (autotuned, [`crate::layer_norm`]), written inside its `impl ruda_runtime::Runtime`:
///
/// ```ignore
/// impl ruda_runtime::Runtime for MyRuntime {
///     ruda_runtime::portable_layer_norm_hooks!();
/// }
/// ```
#[macro_export]
macro_rules! portable_layer_norm_hooks {
    () => {
        fn has_native_layer_norm() -> bool {
            true
        }

        fn layer_norm(
            client: &$crate::cubecl::client::ComputeClient<Self>,
            input: $crate::TensorBuffer,
            weight: $crate::TensorBuffer,
            bias: Option<$crate::TensorBuffer>,
            epsilon: f64,
        ) -> [$crate::TensorBuffer; 3] {
            $crate::layer_norm::layer_norm_forward(client, input, weight, bias, epsilon)
        }

        fn layer_norm_backward(
            client: &$crate::cubecl::client::ComputeClient<Self>,
            input: $crate::TensorBuffer,
            weight: $crate::TensorBuffer,
            grad: $crate::TensorBuffer,
            mean: $crate::TensorBuffer,
            rstd: $crate::TensorBuffer,
        ) -> [$crate::TensorBuffer; 3] {
            $crate::layer_norm::layer_norm_backward(client, input, weight, grad, mean, rstd)
        }
    };
}
