//! The soak run on lavapipe: a small transformer trained for a few hundred steps through
//! `burn_ruda::Autodiff<Ruda<RudaWgpu>>`; the memory CubeCL holds and the cache directory must
//! stay flat after the warm-up (`ruda_tests::soak::check_flat`). The GPU suite runs the same
//! for thousands of steps on CUDA (`gpu_suite --soak STEPS`).

use cubecl::wgpu::WgpuDevice;
use ruda_runtime::RudaWgpu;
use ruda_tests::soak::{Sample, SoakConfig, check_flat, run};

#[test]
fn memory_and_cache_stay_flat_over_hundreds_of_training_steps() {
    let config = SoakConfig::CI;
    println!("{}", Sample::HEADER);
    let samples = run::<RudaWgpu>(&WgpuDevice::Cpu, config, |s| println!("{}", s.line()));
    assert_eq!(samples.last().map(|s| s.step), Some(config.steps));
    let first = samples[0].loss;
    let last = samples.last().unwrap().loss;
    assert!(last < first, "the model trains: loss {first} -> {last}");
    if let Err(growth) = check_flat(&samples, config.warmup) {
        panic!("grew after the warm-up:\n{growth}");
    }
}
