//! What each of burn-cubecl-fusion's fusers costs burn-fusion's thread for the two things it
//! does with every fuser however the stream looks: a copy (each new search block starts with one
//! of every fuser) and a reset (of every template fuser after every segment it runs, stored plan
//! or not, though it never fuses into them). Times, on this machine's CPU, `--calls` of each on
//! a fuser fresh from a reset, median of `--batches`, for the fusers as burn-cubecl's runtime
//! gives them and as ruda's does (`burn_ruda::fusion::ResetWhenUsed`: an unused fuser's reset is
//! skipped); the fusers are built for the first wgpu adapter (their work does not depend on it).
//!
//! `cargo run --release -p burn-ruda --example fuser_costs`
//!
//! Multiply by the events of a step (`benches/device/fusion_ops.py` counts the segments run and
//! the new blocks from burn-fusion's trace) for a fuser's cost a step.

use std::time::Instant;

use burn_ruda::RudaWgpu;
use burn_ruda::fusion::{FUSER_NAMES, FuserSet, burn_fusers_of, fusers_of};
use ruda_runtime::cubecl::wgpu::WgpuDevice;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Nanoseconds per call of `f`, median over `batches` batches of `calls`.
fn per_call(calls: usize, batches: usize, mut f: impl FnMut()) -> f64 {
    let times = (0..batches)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..calls {
                f();
            }
            start.elapsed().as_nanos() as f64 / calls as f64
        })
        .collect();
    median(times)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut calls = 20_000;
    let mut batches = 7;
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{arg} takes a positive number"))
        };
        match arg.as_str() {
            "--calls" => calls = value(),
            "--batches" => batches = value(),
            other => panic!("unknown argument {other}: --calls N, --batches N"),
        }
    }
    let device = WgpuDevice::DefaultDevice;
    let mut burn = burn_fusers_of::<RudaWgpu>(FuserSet::BURN, device.clone());
    let mut ruda = fusers_of::<RudaWgpu>(FuserSet::BURN, device);
    println!(
        "fuser\tBurn's copy+drop ns\tBurn's reset ns\truda's copy+drop ns\truda's reset ns\t({calls} calls, median of {batches})"
    );
    for ((name, burn), ruda) in FUSER_NAMES.iter().zip(burn.iter_mut()).zip(ruda.iter_mut()) {
        let mut row = vec![name.to_string()];
        for fuser in [burn, ruda] {
            // As burn-fusion holds its templates: reset once, then only copied and reset.
            fuser.reset();
            let copy = per_call(calls, batches, || {
                drop(std::hint::black_box(fuser.clone_dyn()))
            });
            let reset = per_call(calls, batches, || fuser.reset());
            row.extend([format!("{copy:.0}"), format!("{reset:.0}")]);
        }
        println!("{}", row.join("\t"));
    }
}
