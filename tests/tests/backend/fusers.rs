//! `Ruda` with fewer of burn-fusion's fusers than Burn's four (`burn_ruda::fusion`), on Mesa's
//! CPU Vulkan driver: in a child process with `RUDA_FUSERS=elementwise`, so every plan
//! burn-fusion builds is element-wise and every product, reduction and norm Burn composes runs
//! unfused (on lavapipe the products are Burn's, so the matmul fuser's work goes too). The
//! differential families whose operations burn-fusion's fusers take then match NdArray, as the
//! whole suite does with the default fusers (`burn_backend`).

use burn_fusion::FusionRuntime;
use burn_ruda::fusion::{ENV_FUSERS, FuserSet, RudaFusionRuntime};
use burn_ruda::{Ruda, RudaWgpu};
use cubecl::wgpu::WgpuDevice;
use ruda_tests::differential::{self, Family};

use crate::child::in_child;

type R = Ruda<RudaWgpu>;
type RudaAd = burn_ruda::Autodiff<R>;

/// The families with operations burn-fusion fuses (element-wise, int and bool, reductions,
/// indexing, norms and module ops, activations, gradients); sorting, quantization and
/// transactions never reach a fuser.
const FUSED_FAMILIES: [Family; 7] = [
    Family::Float,
    Family::IntBool,
    Family::Reductions,
    Family::Indexing,
    Family::ModuleOps,
    Family::Activations,
    Family::Gradients,
];

#[test]
fn only_the_elementwise_fuser_and_the_fused_families_match_ndarray() {
    if !in_child(
        "fusers::only_the_elementwise_fuser_and_the_fused_families_match_ndarray",
        &[(ENV_FUSERS, "elementwise")],
    ) {
        return;
    }
    let device = WgpuDevice::Cpu;
    let set = FuserSet::for_device::<RudaWgpu>(&device);
    assert_eq!(set.names(), ["elementwise"], "RUDA_FUSERS is read");
    assert_eq!(
        RudaFusionRuntime::<RudaWgpu>::fusers(device.clone()).len(),
        1,
        "burn-fusion gets the one fuser"
    );
    assert_eq!(
        FuserSet::default_for(false),
        FuserSet::BURN,
        "a device without native products keeps Burn's four by default"
    );

    let outcomes = differential::run_checks::<R, RudaAd>(&FUSED_FAMILIES, &device, &device);
    differential::assert_passed(&outcomes, "element-wise-fuser-only");
}
