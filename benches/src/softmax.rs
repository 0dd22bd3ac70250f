//! Softmax and log-softmax kernels alone (`ruda_runtime::softmax`), against a device copy of
//! the same bytes in the same process: the kernels' effective bandwidth as a share of what the
//! memory moves at all.
//!
//! Back to back: `calls` calls queued, one device sync, the time divided by `calls` (what a
//! training loop that keeps the device busy sees; the host's launch cost per call is hidden as
//! long as it is below the kernel's time). Effective bytes: the forward reads `x` and writes
//! `y` (2N elements), the backward reads `y` and `dy` and writes `dx` (3N); the copy reads and
//! writes N. The copy is a plain CubeCL kernel (16-byte vectors, a grid-stride loop), the same
//! compiler and launch path as the kernels it is compared with; `benches/torch/softmax.py` times
//! PyTorch's own copy and softmaxes in the same device call.

use std::time::Instant;

use cubecl::prelude::*;
use ruda_runtime::TensorBuffer;
use ruda_runtime::prelude::DType;
use ruda_runtime::softmax::{Kind, softmax_backward, softmax_forward};

/// The shapes of the GPU suite's `--softmax` section: the attention scores of the benchmarked
/// transformer step (`[batch 32, heads 8, seq 256, seq 256]`) and a vocabulary-sized
/// log-softmax (`[8192 tokens, 50304 logits]`, GPT-2's vocabulary padded to a multiple of 64).
pub const SHAPES: [&[usize]; 2] = [&[32, 8, 256, 256], &[8192, 50304]];
/// Small shapes for CPU adapters.
pub const QUICK_SHAPES: [&[usize]; 2] = [&[2, 4, 64, 64], &[64, 3000]];

/// One row of the softmax table.
#[derive(Clone, Debug)]
pub struct Row {
    /// `softmax` or `log_softmax`.
    pub kind: Kind,
    /// The shape, e.g. `32x8x256x256`.
    pub shape: String,
    /// The element type.
    pub dtype: DType,
    /// Microseconds a forward call, back to back.
    pub forward_us: f64,
    /// Microseconds a backward call, back to back.
    pub backward_us: f64,
    /// Microseconds a copy of the tensor's bytes, back to back.
    pub copy_us: f64,
}

impl Row {
    /// Effective GB/s of forward + backward (5N elements).
    pub fn fwdbwd_gb_s(&self) -> f64 {
        self.bytes(5) / (self.forward_us + self.backward_us) / 1e3
    }

    /// Effective GB/s of the forward alone (2N elements).
    pub fn forward_gb_s(&self) -> f64 {
        self.bytes(2) / self.forward_us / 1e3
    }

    /// Effective GB/s of the backward alone (3N elements).
    pub fn backward_gb_s(&self) -> f64 {
        self.bytes(3) / self.backward_us / 1e3
    }

    /// GB/s of the copy (2N elements).
    pub fn copy_gb_s(&self) -> f64 {
        self.bytes(2) / self.copy_us / 1e3
    }

    fn bytes(&self, tensors: usize) -> f64 {
        let n: usize = self
            .shape
            .split('x')
            .map(|d| d.parse::<usize>().unwrap())
            .product();
        (tensors * n * self.dtype.size()) as f64
    }

    /// The header of [`Row::line`].
    pub const HEADER: &'static str = "kind\tshape\tdtype\tforward_us\tbackward_us\tcopy_us\tforward_GB_s\tbackward_GB_s\tfwdbwd_GB_s\tcopy_GB_s\tfwdbwd_share_of_copy";

    /// A tab-separated line.
    pub fn line(&self) -> String {
        format!(
            "{}\t{}\t{:?}\t{:.2}\t{:.2}\t{:.2}\t{:.0}\t{:.0}\t{:.0}\t{:.0}\t{:.1}%",
            self.kind.name(),
            self.shape,
            self.dtype,
            self.forward_us,
            self.backward_us,
            self.copy_us,
            self.forward_gb_s(),
            self.backward_gb_s(),
            self.fwdbwd_gb_s(),
            self.copy_gb_s(),
            100.0 * self.fwdbwd_gb_s() / self.copy_gb_s()
        )
    }
}

/// Copies `input` into `output`, 16-byte vectors, a grid-stride loop.
#[cube(launch_unchecked)]
fn copy_kernel<F: Float, N: Size>(
    input: &Array<Vector<F, N>>,
    output: &mut Array<Vector<F, N>>,
    len: usize,
    #[define(F)] _dtype: StorageType,
) {
    let stride = CUBE_COUNT * (CUBE_DIM_X as usize);
    let mut i = ABSOLUTE_POS;
    while i < len {
        output[i] = input[i];
        i += stride;
    }
}

/// Median of `rounds` rounds of `calls` back-to-back calls of `call`, each round ended by a
/// device sync: microseconds a call.
fn back_to_back_us<R: Runtime>(
    client: &ComputeClient<R>,
    calls: usize,
    rounds: usize,
    mut call: impl FnMut(),
) -> f64 {
    let sync = || cubecl::future::block_on(client.sync()).expect("device sync failed");
    for _ in 0..2 {
        call();
    }
    sync();
    let mut times: Vec<f64> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..calls {
                call();
            }
            sync();
            start.elapsed().as_secs_f64() * 1e6 / calls as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Deterministic values, N(0, 3)-like spread (attention scores and logits are a few units wide).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 23) as f32 - 1.0) * 5.0
        })
        .collect()
}

/// Times the softmax and log-softmax kernels (tuned, as the backends call them) and a copy at
/// `shape` (the last dimension) in `dtype`: `calls` back-to-back calls a round, the median of
/// `rounds` rounds.
pub fn measure<R: Runtime>(
    client: &ComputeClient<R>,
    shape: &[usize],
    dtype: DType,
    calls: usize,
    rounds: usize,
) -> Vec<Row> {
    let n: usize = shape.iter().product();
    let dim = shape.len() - 1;
    let shape_v = shape.to_vec();
    let upload =
        |seed| TensorBuffer::from_f32s(client, &values(n, seed), shape_v.clone().into(), dtype);
    let (x, dy) = (upload(1), upload(2));

    let vector = 16 / dtype.size();
    let copy_out = TensorBuffer::empty(client, shape_v.clone().into(), dtype);
    let len = n / vector;
    let units = 256usize;
    let cubes = len.div_ceil(units).clamp(1, 65_535);
    let storage: StorageType = dtype.into();
    let copy_us = back_to_back_us(client, calls, rounds, || {
        // SAFETY: both buffers hold `n` elements, `n` a multiple of the vector width; the
        // kernel indexes below `len` vectors.
        unsafe {
            copy_kernel::launch_unchecked::<R>(
                client,
                CubeCount::new_1d(cubes as u32),
                CubeDim::new_1d(units as u32),
                vector,
                ArrayArg::from_raw_parts(x.handle.clone(), n),
                ArrayArg::from_raw_parts(copy_out.handle.clone(), n),
                len,
                storage,
            );
        }
    });

    [Kind::Softmax, Kind::LogSoftmax]
        .into_iter()
        .map(|kind| {
            let forward_us = back_to_back_us(client, calls, rounds, || {
                drop(softmax_forward(client, x.clone(), dim, kind));
            });
            let y = softmax_forward(client, x.clone(), dim, kind);
            let backward_us = back_to_back_us(client, calls, rounds, || {
                drop(softmax_backward(client, y.clone(), dy.clone(), dim, kind));
            });
            Row {
                kind,
                shape: shape
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join("x"),
                dtype,
                forward_us,
                backward_us,
                copy_us,
            }
        })
        .collect()
}
