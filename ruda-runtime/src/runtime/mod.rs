//! The ruda runtimes: CubeCL's CUDA and wgpu runtimes with the hooks of [`crate::Runtime`].
//!
//! Each is a newtype over CubeCL's runtime with the same compiler, server and device, so a ruda
//! client and a CubeCL client of one device share one server and memory pool. Only `client`
//! (caches, streams) and `name` (the fingerprint in CubeCL's cache paths) are their own; the
//! rest is forwarded by [`forward_cubecl_runtime!`].

pub mod streams;

#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "wgpu")]
pub mod wgpu;

/// `impl cubecl::Runtime for $ruda`: the compiler, server and device of CubeCL's runtime
/// `$cubecl`, the given items (`fn client`, `fn name`), and every other method forwarded to
/// `$cubecl`.
macro_rules! forward_cubecl_runtime {
    ($ruda:ty => $cubecl:ty { $($own:item)* }) => {
        impl cubecl::Runtime for $ruda {
            type Compiler = <$cubecl as cubecl::Runtime>::Compiler;
            type Server = <$cubecl as cubecl::Runtime>::Server;
            type Device = <$cubecl as cubecl::Runtime>::Device;

            $($own)*

            fn require_array_lengths() -> bool {
                <$cubecl as cubecl::Runtime>::require_array_lengths()
            }

            fn max_cube_count() -> (u32, u32, u32) {
                <$cubecl as cubecl::Runtime>::max_cube_count()
            }

            fn can_read_tensor(
                shape: &cubecl::zspace::Shape,
                strides: &cubecl::zspace::Strides,
            ) -> bool {
                <$cubecl as cubecl::Runtime>::can_read_tensor(shape, strides)
            }

            fn target_properties() -> cubecl::ir::TargetProperties {
                <$cubecl as cubecl::Runtime>::target_properties()
            }

            fn enumerate_devices(
                type_id: u16,
                info: &<Self::Server as cubecl::server::ComputeServer>::Info,
            ) -> alloc::vec::Vec<cubecl::device::DeviceId> {
                <$cubecl as cubecl::Runtime>::enumerate_devices(type_id, info)
            }

            fn enumerate_all_devices(
                info: &<Self::Server as cubecl::server::ComputeServer>::Info,
            ) -> alloc::vec::Vec<cubecl::device::DeviceId> {
                <$cubecl as cubecl::Runtime>::enumerate_all_devices(info)
            }
        }
    };
}
#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub(crate) use forward_cubecl_runtime;
