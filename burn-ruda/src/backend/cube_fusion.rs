//! Names shared by `Ruda`'s own operations in burn-fusion's stream (feature `fusion`): the
//! burn-cubecl backend they run on, its fusion runtime and handle container.

use core::marker::PhantomData;

use burn_cubecl::CubeBackend;
use burn_fusion::{FusionBackend, FusionRuntime};
use burn_ir::HandleContainer;

/// The burn-cubecl backend under burn-fusion.
pub(super) type Cube<R, F, I, BT> = CubeBackend<R, F, I, BT>;
/// Its fusion runtime, which every queued operation is an `Operation` of.
pub(super) type CubeFusionRuntime<R, F, I, BT> =
    <Cube<R, F, I, BT> as FusionBackend>::FusionRuntime;
/// The handles an operation reads its inputs from and registers its outputs in.
pub(super) type Handles<R, F, I, BT> =
    HandleContainer<<CubeFusionRuntime<R, F, I, BT> as FusionRuntime>::FusionHandle>;
/// Names the backend in an operation without owning any of its types.
pub(super) type BackendMarker<R, F, I, BT> = PhantomData<fn() -> (R, F, I, BT)>;
