//! The Ruda runtime layer on the machine's wgpu CPU adapter (Mesa's lavapipe in CI): the trait's
//! defaults, kernels through `RudaWgpu`, fingerprints, and device choice.

use cubecl::prelude::*;
use cubecl::wgpu::{WgpuDevice, WgpuRuntime};
use ruda_runtime::device::{DeviceError, DeviceSpec, Inventory, RudaDevice};
use ruda_runtime::{RudaWgpu, Runtime as RudaRuntimeTrait, TensorBuffer};
use ruda_tests::plain_runtime::PlainWgpu;
use serial_test::serial;

fn cpu() -> WgpuDevice {
    WgpuDevice::Cpu
}

#[test]
fn empty_impl_has_no_native_layer_norm() {
    assert!(!PlainWgpu::has_native_layer_norm());
    let client = PlainWgpu::client(&cpu());
    assert_eq!(PlainWgpu::autotune_driver_fingerprint(&client), None);
}

#[test]
#[should_panic(expected = "runtime does not supply native LayerNorm")]
fn empty_impl_layer_norm_panics_with_documented_message() {
    let client = PlainWgpu::client(&cpu());
    let x = TensorBuffer::from_f32s(
        &client,
        &[1.0, 2.0],
        [1, 2].into(),
        ruda_runtime::prelude::DType::F32,
    );
    let gamma = TensorBuffer::from_f32s(
        &client,
        &[1.0, 1.0],
        [2].into(),
        ruda_runtime::prelude::DType::F32,
    );
    let _ = PlainWgpu::layer_norm(&client, x, gamma, None, 1e-5);
}

#[test]
#[should_panic(expected = "runtime does not supply native LayerNorm backward")]
fn empty_impl_layer_norm_backward_panics_with_documented_message() {
    let client = PlainWgpu::client(&cpu());
    let t = |v: &[f32]| {
        TensorBuffer::from_f32s(
            &client,
            v,
            [v.len()].into(),
            ruda_runtime::prelude::DType::F32,
        )
    };
    let _ = PlainWgpu::layer_norm_backward(
        &client,
        t(&[1.0]),
        t(&[1.0]),
        t(&[1.0]),
        t(&[1.0]),
        t(&[1.0]),
    );
}

#[cube(launch_unchecked)]
fn scale_shift(input: &Array<f32>, output: &mut Array<f32>) {
    let i = ABSOLUTE_POS;
    if i < input.len() {
        output[i] = input[i] * 3.0 - f32::cast_from(i);
    }
}

fn run_scale_shift<R: cubecl::Runtime>(device: &R::Device, data: &[f32]) -> Vec<f32> {
    let client = R::client(device);
    let input = client.create_from_slice(f32::as_bytes(data));
    let output = client.empty(std::mem::size_of_val(data));
    let units = 64u32;
    let cubes = (data.len() as u32).div_ceil(units);
    // SAFETY: the kernel guards every access with the array length.
    unsafe {
        scale_shift::launch_unchecked(
            &client,
            CubeCount::Static(cubes, 1, 1),
            CubeDim::new_1d(units),
            ArrayArg::from_raw_parts(input, data.len()),
            ArrayArg::from_raw_parts(output.clone(), data.len()),
        )
    }
    f32::from_bytes(&client.read_one_unchecked(output)).to_vec()
}

#[test]
fn kernel_through_ruda_wgpu_matches_cubecl_wgpu() {
    let data: Vec<f32> = (0..1000)
        .map(|i| ((i * 37) % 101) as f32 * 0.25 - 7.0)
        .collect();
    let ours = run_scale_shift::<RudaWgpu>(&cpu(), &data);
    let theirs = run_scale_shift::<WgpuRuntime>(&cpu(), &data);
    let expected: Vec<f32> = data
        .iter()
        .enumerate()
        .map(|(i, v)| v * 3.0 - i as f32)
        .collect();
    assert_eq!(ours, theirs);
    assert_eq!(ours, expected);
}

/// `ruda_runtime::sync` from several threads at once, each with its own launches on its own
/// stream (CubeCL's stream per thread), and from a thread that launched nothing: every call
/// returns `Ok` (no thread waits forever on an answer the device thread never sends), and each
/// thread's output holds what its kernel wrote.
#[test]
fn sync_waits_on_the_device_thread_for_every_calling_thread() {
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let client = RudaWgpu::client(&cpu());
                let data: Vec<f32> = (0..4096).map(|i| (i + t) as f32).collect();
                let input = client.create_from_slice(f32::as_bytes(&data));
                let output = client.empty(std::mem::size_of_val(data.as_slice()));
                // SAFETY: the kernel guards every access with the array length.
                unsafe {
                    scale_shift::launch_unchecked(
                        &client,
                        CubeCount::Static(64, 1, 1),
                        CubeDim::new_1d(64),
                        ArrayArg::from_raw_parts(input, data.len()),
                        ArrayArg::from_raw_parts(output.clone(), data.len()),
                    )
                }
                ruda_runtime::sync::<RudaWgpu>(&cpu()).expect("sync after launches");
                let got = f32::from_bytes(&client.read_one_unchecked(output)).to_vec();
                let expected: Vec<f32> = data
                    .iter()
                    .enumerate()
                    .map(|(i, v)| v * 3.0 - i as f32)
                    .collect();
                assert_eq!(got, expected, "thread {t}");
            })
        })
        .collect();
    ruda_runtime::sync::<RudaWgpu>(&cpu()).expect("sync from a thread that launched nothing");
    for thread in threads {
        thread.join().expect("a syncing thread panicked");
    }
}

#[test]
fn ruda_wgpu_reports_native_layer_norm() {
    assert!(RudaWgpu::has_native_layer_norm());
}

fn cpu_fingerprint() -> String {
    let client = RudaWgpu::client(&cpu());
    RudaWgpu::autotune_driver_fingerprint(&client)
        .expect("the CPU adapter reports its driver, so it has a fingerprint")
}

#[test]
fn fingerprint_is_stable_and_names_the_driver() {
    let first = cpu_fingerprint();
    let second = cpu_fingerprint();
    assert_eq!(first, second);

    let info = ruda_runtime::runtime::wgpu::adapter_info(&cpu()).expect("CPU adapter");
    let driver_info = info.driver_info.trim().replace(['|', '='], "/");
    assert!(
        first.contains(&format!("driver-info={driver_info}")),
        "fingerprint {first} lacks the adapter's driver info {driver_info:?}"
    );
    assert!(first.contains("backend=Vulkan"), "{first}");
    assert!(
        first.contains("ruda-runtime=") && first.contains("cubecl=0.10.0"),
        "{first}"
    );
    // Mesa names its version in the driver info ("Mesa 22.3.6 (LLVM 15.0.6)").
    if info.name.contains("llvmpipe") {
        assert!(first.contains("Mesa"), "{first}");
    }
}

/// Child half of the cross-process check: prints the fingerprint when asked to.
#[test]
fn fingerprint_child() {
    if std::env::var_os("RUDA_FINGERPRINT_CHILD").is_some() {
        println!("FINGERPRINT<{}>", cpu_fingerprint());
    }
}

#[test]
fn fingerprint_is_identical_across_processes() {
    let exe = std::env::current_exe().unwrap();
    let run = || {
        let out = std::process::Command::new(&exe)
            .args([
                "--exact",
                "fingerprint_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("RUDA_FINGERPRINT_CHILD", "1")
            .output()
            .expect("re-running the test binary");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let start = text
            .find("FINGERPRINT<")
            .expect("child printed its fingerprint")
            + 12;
        let end = start + text[start..].find(">\n").unwrap();
        text[start..end].to_string()
    };
    let (a, b) = (run(), run());
    assert_eq!(a, b);
    assert_eq!(a, cpu_fingerprint());
}

#[test]
fn fingerprint_is_none_without_driver_strings() {
    let mut info = ruda_runtime::runtime::wgpu::adapter_info(&cpu()).unwrap();
    info.driver.clear();
    info.driver_info.clear();
    assert!(ruda_runtime::runtime::wgpu::wgpu_fingerprint(&info).is_none());
    info.driver_info = "Mesa 99.0".into();
    let changed = ruda_runtime::runtime::wgpu::wgpu_fingerprint(&info)
        .unwrap()
        .to_string();
    assert_ne!(
        changed,
        cpu_fingerprint(),
        "another driver must give another fingerprint"
    );
}

#[test]
fn identical_adapters_share_a_fingerprint_and_another_model_or_driver_does_not() {
    use ruda_runtime::runtime::wgpu::wgpu_fingerprint;
    let info = ruda_runtime::runtime::wgpu::adapter_info(&cpu()).unwrap();
    let base = wgpu_fingerprint(&info).unwrap();
    // A second card of the same model and driver in another slot: same caches.
    let mut other_slot = info.clone();
    other_slot.device_pci_bus_id = "0000:81:00.0".into();
    assert_eq!(wgpu_fingerprint(&other_slot).unwrap(), base);
    // Another model, another device id, another driver build: caches of their own.
    let mut other_model = info.clone();
    other_model.name = format!("{} (another model)", info.name);
    let mut other_device = info.clone();
    other_device.device ^= 1;
    let mut other_driver = info.clone();
    other_driver.driver = format!("{} 2", info.driver);
    for changed in [other_model, other_device, other_driver] {
        assert_ne!(wgpu_fingerprint(&changed).unwrap(), base, "{changed:?}");
    }
}

#[test]
#[serial]
fn two_devices_of_one_adapter_share_their_caches() {
    // `WgpuDevice::Cpu` and `WgpuDevice::DefaultDevice` are two CubeCL devices (two servers)
    // on the one lavapipe adapter of this machine: one driver, one model, one cache identity.
    let default = WgpuDevice::DefaultDevice;
    let same_adapter = ruda_runtime::runtime::wgpu::adapter_info(&default)
        .is_some_and(|info| format!("{:?}", info.device_type) == "Cpu");
    if !same_adapter {
        eprintln!("skipped: the default adapter of this machine is not the CPU adapter");
        return;
    }
    let name = |device: &WgpuDevice| {
        let client = <RudaWgpu as cubecl::Runtime>::client(device);
        <RudaWgpu as cubecl::Runtime>::name(&client)
    };
    let (cpu_name, default_name) = (name(&cpu()), name(&default));
    assert_eq!(cpu_name, default_name);
    assert!(cpu_name.starts_with("wgpu<wgsl>-fp"), "{cpu_name}");
}

#[test]
fn device_spec_parses_every_accepted_form() {
    let cases = [
        ("", DeviceSpec::Auto),
        ("auto", DeviceSpec::Auto),
        ("cuda", DeviceSpec::Cuda(0)),
        ("cuda:1", DeviceSpec::Cuda(1)),
        ("CUDA:0", DeviceSpec::Cuda(0)),
        ("wgpu", DeviceSpec::WgpuAuto),
        ("wgpu:discrete:0", DeviceSpec::WgpuDiscrete(0)),
        ("wgpu:discrete", DeviceSpec::WgpuDiscrete(0)),
        ("wgpu:integrated:2", DeviceSpec::WgpuIntegrated(2)),
        ("wgpu:virtual:0", DeviceSpec::WgpuVirtual(0)),
        ("wgpu:cpu", DeviceSpec::WgpuCpu),
        ("cpu", DeviceSpec::WgpuCpu),
    ];
    for (text, spec) in cases {
        assert_eq!(text.parse::<DeviceSpec>(), Ok(spec), "{text:?}");
    }
}

#[test]
fn device_spec_rejects_bad_values_listing_accepted_forms() {
    for bad in [
        "gpu",
        "cuda:x",
        "cuda:-1",
        "wgpu:discrete:a",
        "wgpu:tpu",
        "cuda:0:1",
        "metal",
    ] {
        let err = bad.parse::<DeviceSpec>().unwrap_err();
        let message = err.to_string();
        assert!(message.contains(bad), "{message}");
        assert!(
            message.contains("cuda:N") && message.contains("wgpu:cpu"),
            "{message}"
        );
    }
}

#[test]
fn best_device_prefers_cuda_then_wgpu_gpus_then_cpu() {
    let inv = |cuda, wgpu: Vec<WgpuDevice>| Inventory {
        cuda_devices: cuda,
        wgpu_devices: wgpu,
    };
    let all = vec![
        WgpuDevice::Cpu,
        WgpuDevice::IntegratedGpu(0),
        WgpuDevice::DiscreteGpu(0),
    ];
    assert_eq!(
        DeviceSpec::Auto.resolve_with(&inv(1, all.clone())),
        Ok(RudaDevice::Cuda(0))
    );
    assert_eq!(
        DeviceSpec::Auto.resolve_with(&inv(0, all.clone())),
        Ok(RudaDevice::Wgpu(WgpuDevice::DiscreteGpu(0)))
    );
    assert_eq!(
        DeviceSpec::Auto.resolve_with(&inv(0, vec![WgpuDevice::Cpu, WgpuDevice::IntegratedGpu(0)])),
        Ok(RudaDevice::Wgpu(WgpuDevice::IntegratedGpu(0)))
    );
    assert_eq!(
        DeviceSpec::Auto.resolve_with(&inv(0, vec![WgpuDevice::Cpu])),
        Ok(RudaDevice::Wgpu(WgpuDevice::Cpu))
    );
    assert_eq!(
        DeviceSpec::WgpuCpu.resolve_with(&inv(2, all.clone())),
        Ok(RudaDevice::Wgpu(WgpuDevice::Cpu))
    );
    assert_eq!(
        DeviceSpec::Cuda(1).resolve_with(&inv(2, vec![])),
        Ok(RudaDevice::Cuda(1))
    );
}

#[test]
fn no_device_error_says_what_was_tried_and_how_to_get_one() {
    let empty = Inventory {
        cuda_devices: 0,
        wgpu_devices: vec![],
    };
    let err = DeviceSpec::Auto.resolve_with(&empty).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, DeviceError::NotFound { .. }));
    assert!(message.contains("CUDA: 0 device"), "{message}");
    assert!(message.contains("no adapter"), "{message}");
    assert!(message.contains("mesa-vulkan-drivers"), "{message}");

    let missing_gpu = DeviceSpec::Cuda(3)
        .resolve_with(&Inventory {
            cuda_devices: 1,
            wgpu_devices: vec![WgpuDevice::Cpu],
        })
        .unwrap_err()
        .to_string();
    assert!(
        missing_gpu.contains("cuda:3") && missing_gpu.contains("wgpu:cpu"),
        "{missing_gpu}"
    );
}

/// `RUDA_DEVICE`'s values, through the function `from_env` reads the variable with (setting
/// the variable here would race with the other tests of the binary that read the environment).
#[test]
fn ruda_device_values_override_and_bad_ones_are_reported() {
    assert_eq!(
        RudaDevice::from_value(Some("wgpu:cpu")),
        Ok(RudaDevice::Wgpu(WgpuDevice::Cpu))
    );
    let err = RudaDevice::from_value(Some("tpu:0")).unwrap_err();
    assert!(matches!(err, DeviceError::BadSpec(_)));
    assert!(err.to_string().contains("tpu:0"));
    assert!(matches!(
        RudaDevice::from_value(Some("wgpu:discrete:7")),
        Err(DeviceError::NotFound { .. })
    ));
    // This machine (CI: no GPU, lavapipe installed) has at least the CPU adapter.
    assert!(RudaDevice::from_value(None).is_ok());
}

#[test]
fn this_machine_lists_the_cpu_adapter() {
    let inventory = Inventory::probe();
    assert!(
        inventory.wgpu_devices.contains(&WgpuDevice::Cpu),
        "expected Mesa's Vulkan CPU adapter; found {:?}",
        inventory.wgpu_devices
    );
}

// Adam: parameters' updates, one or many a launch (`ruda_runtime::adam`), against the f64 reference
// of `ruda_tests::adam_checks` (the GPU suite runs the same checks on CUDA).

fn adam_client() -> ComputeClient<RudaWgpu> {
    RudaWgpu::client(&cpu())
}

#[test]
fn adam_lengths_and_dtypes() {
    ruda_tests::adam_checks::lengths_and_dtypes(&adam_client());
}

#[test]
fn adam_options() {
    ruda_tests::adam_checks::options(&adam_client());
}

#[test]
fn adam_edge_cases() {
    ruda_tests::adam_checks::edge_cases(&adam_client());
}

#[test]
fn adam_double_precision() {
    ruda_tests::adam_checks::double_precision(&adam_client());
}

#[test]
fn adam_many_parameters_in_one_launch() {
    ruda_tests::adam_checks::many_parameters(&adam_client());
}

/// An f32 buffer of `shape` (zeros) on the CPU adapter.
fn zeros(client: &ComputeClient<RudaWgpu>, shape: &[usize]) -> TensorBuffer {
    let n = shape.iter().product();
    TensorBuffer::from_f32s(
        client,
        &vec![0.0; n],
        shape.to_vec().into(),
        ruda_runtime::prelude::DType::F32,
    )
}

fn adam_scalars(time: usize) -> ruda_runtime::adam::AdamScalars {
    ruda_runtime::adam::AdamScalars {
        lr: 1e-3,
        beta_1: 0.9,
        beta_2: 0.999,
        epsilon: 1e-5,
        weight_decay: 0.0,
        time,
    }
}

#[test]
#[should_panic(expected = "Adam: the second moment must have the parameter's shape and dtype")]
fn adam_rejects_a_moment_of_another_shape() {
    let client = adam_client();
    let _ = ruda_runtime::adam_step(
        &client,
        adam_scalars(1),
        zeros(&client, &[4, 8]),
        zeros(&client, &[4, 8]),
        zeros(&client, &[4, 8]),
        zeros(&client, &[8, 4]),
        None,
    );
}

#[test]
#[should_panic(expected = "Adam: steps are counted from 1, got step 0")]
fn adam_rejects_step_zero() {
    let client = adam_client();
    let z = || zeros(&client, &[3]);
    let _ = ruda_runtime::adam_step(&client, adam_scalars(0), z(), z(), z(), z(), None);
}
