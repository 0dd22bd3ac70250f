//! `Ruda` with fewer of burn-fusion's fusers than Burn's four (`burn_ruda::fusion`), on Mesa's
//! CPU Vulkan driver: this binary sets `RUDA_FUSERS=elementwise` before its one test, so every
//! plan burn-fusion builds is element-wise and every product, reduction and norm Burn composes
//! runs unfused (on lavapipe the products are Burn's, so the matmul fuser's work goes too). The
//! whole differential suite then matches NdArray, as it does with the default fusers (the
//! `backend` binary).

use burn_fusion::FusionRuntime;
use burn_ruda::fusion::{ENV_FUSERS, FuserSet, RudaFusionRuntime};
use burn_ruda::{Ruda, RudaWgpu};
use cubecl::wgpu::WgpuDevice;
use ruda_tests::differential::{self, Family};

type R = Ruda<RudaWgpu>;
type RudaAd = burn_ruda::Autodiff<R>;

#[test]
fn only_the_elementwise_fuser_and_every_differential_family_matches_ndarray() {
    // SAFETY: the one test of this binary sets the variable before any thread of it reads the
    // environment (burn-fusion's threads start with the first tensor, below).
    unsafe { std::env::set_var(ENV_FUSERS, "elementwise") };
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

    let outcomes = differential::run_checks::<R, RudaAd>(&Family::ALL, &device, &device);
    differential::assert_passed(&outcomes, "element-wise-fuser-only");
}
