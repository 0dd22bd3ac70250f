//! Lists every ruda device on this machine: a small `nvidia-smi` for ruda.
//!
//! ```text
//! cargo run --release --example ruda_info
//! ```
//!
//! For each CUDA GPU and each wgpu adapter it prints the runtime, the name, whether LayerNorm
//! runs natively, memory, and the driver fingerprint that persistent autotuning is keyed on.
//! The device that `RUDA_DEVICE` (or the best-device rule) selects is marked with `*`.

fn main() {
    if ruda_runtime::device::print_devices() == 0 {
        eprintln!("no ruda device found");
        std::process::exit(1);
    }
}
