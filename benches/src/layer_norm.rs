//! LayerNorm benchmark cases: the native kernels through a ruda runtime, and
//! `burn::nn::LayerNorm` under an autodiff backend (Burn's composed ops, or burn-ruda's native
//! node), timed the same way.

use burn::module::AutodiffModule;
use burn::nn::{LayerNorm, LayerNormConfig};
use burn::prelude::Backend;
use burn::tensor::{Distribution, Tensor};
use burn_ruda::{BackwardWithGrad, backward_with_grad};
use ruda_runtime::layer_norm::{Strategy, layer_norm_backward_with, layer_norm_forward_with};
use ruda_runtime::prelude::DType;
use ruda_runtime::{Runtime, TensorBuffer};

use crate::timing::{Call, TimingPlan, gb_per_s, median_on_device_thread_us, median_us};

/// The shapes (rows x d) of the kernel issue's table.
pub const SHAPES: [(usize, usize); 5] = [
    (4096, 768),
    (16384, 768),
    (16384, 1024),
    (16384, 4096),
    (4096, 8192),
];

/// The LayerNorm epsilon every benchmark uses (PyTorch's default).
pub const EPSILON: f64 = 1e-5;

/// One benchmark case.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    /// Number of rows.
    pub rows: usize,
    /// Normalized size.
    pub d: usize,
    /// Element type of x, gamma, beta, out, dy, dx.
    pub dtype: DType,
}

impl Case {
    /// PyTorch's name for the dtype, as `torch_layernorm.py` prints it.
    pub fn dtype_name(&self) -> &'static str {
        dtype_name(self.dtype)
    }
}

/// PyTorch's name for a float dtype.
pub fn dtype_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "float32",
        DType::F16 => "float16",
        DType::BF16 => "bfloat16",
        _ => "other",
    }
}

/// Median times of one case.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Forward alone, microseconds.
    pub fwd_us: f64,
    /// Forward then backward, microseconds.
    pub fwdbwd_us: f64,
}

impl Timing {
    /// A row in `torch_layernorm.py`'s format:
    /// `impl dtype shape fwd_us fwd_GBps fwdbwd_us fwdbwd_GBps` (forward moves 2N elements,
    /// forward+backward 5N).
    pub fn row(&self, implementation: &str, case: &Case) -> String {
        let n = case.rows * case.d;
        let size = case.dtype.size();
        format!(
            "{implementation}\t{}\t{}x{}\t{:.1}\t{:.0}\t{:.1}\t{:.0}",
            case.dtype_name(),
            case.rows,
            case.d,
            self.fwd_us,
            gb_per_s(2 * n, size, self.fwd_us),
            self.fwdbwd_us,
            gb_per_s(5 * n, size, self.fwdbwd_us)
        )
    }
}

/// Deterministic pseudo-random values, roughly normal (sum of four uniforms, centred).
pub fn random_values(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..n)
        .map(|_| ((uniform() + uniform() + uniform() + uniform() - 2.0) * 1.7) as f32)
        .collect()
}

/// The buffers of one benchmark case: `x` (random, roughly normal), `gamma`, `beta`, and
/// `dy = 1` as `torch_layernorm.py` uses.
pub struct Inputs {
    /// `[rows, d]`.
    pub x: TensorBuffer,
    /// `[d]`.
    pub gamma: TensorBuffer,
    /// `[d]`.
    pub beta: TensorBuffer,
    /// `[rows, d]`, all ones.
    pub dy: TensorBuffer,
}

impl Inputs {
    /// The inputs of `case` on `client`'s device.
    pub fn new<R: Runtime>(client: &cubecl::client::ComputeClient<R>, case: Case) -> Self {
        let (rows, d, dtype) = (case.rows, case.d, case.dtype);
        Self {
            x: TensorBuffer::from_f32s(
                client,
                &random_values(rows * d, 1),
                [rows, d].into(),
                dtype,
            ),
            gamma: TensorBuffer::from_f32s(client, &random_values(d, 2), [d].into(), dtype),
            beta: TensorBuffer::from_f32s(client, &random_values(d, 3), [d].into(), dtype),
            dy: TensorBuffer::from_f32s(client, &vec![1.0; rows * d], [rows, d].into(), dtype),
        }
    }
}

/// Where a sample's wall clock is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// On the caller's thread, around the call and a device sync ([`median_us`]), as
    /// `torch_layernorm.py` times PyTorch; the sync is ruda's ([`ruda_runtime::sync`], the one
    /// `Ruda`'s `Backend::sync` runs).
    Caller,
    /// [`Clock::Caller`] with CubeCL's `ComputeClient::sync` (burn-cubecl's `Backend::sync`),
    /// whose wait leaves CubeCL's device thread idle long enough to fall asleep.
    CubeclSync,
    /// On CubeCL's device thread, between a device sync before the call and one after it
    /// ([`median_on_device_thread_us`]): the same, less the wake-up of that thread.
    DeviceThread,
    /// On the caller's thread, around [`BACK_TO_BACK_CALLS`] calls and one device sync, divided
    /// by the number of calls: what a loop that keeps the device busy sees. The launch work of
    /// one call overlaps the kernels of the one before, so a call costs the larger of its host
    /// work and its device time, not their sum plus a round trip.
    BackToBack,
}

impl Clock {
    /// The suffix of a table row's implementation name: none for [`Clock::Caller`].
    pub fn suffix(self) -> &'static str {
        match self {
            Clock::Caller => "",
            Clock::CubeclSync => "@cubecl-sync",
            Clock::DeviceThread => "@device-thread",
            Clock::BackToBack => "@back-to-back",
        }
    }
}

/// Times the native kernels of runtime `R` on `device` (forward, and forward + backward with
/// `dy = 1` as `torch_layernorm.py` does), with the given strategy or the default rule, on the
/// caller's clock.
pub fn native<R: Runtime>(
    device: &R::Device,
    case: Case,
    strategy: Option<Strategy>,
    plan: TimingPlan,
) -> Timing {
    native_clocked::<R>(device, case, strategy, plan, Clock::Caller)
}

/// [`native`] on the given [`Clock`].
pub fn native_clocked<R: Runtime>(
    device: &R::Device,
    case: Case,
    strategy: Option<Strategy>,
    plan: TimingPlan,
    clock: Clock,
) -> Timing {
    let client = R::client(device);
    let Inputs { x, gamma, beta, dy } = Inputs::new(&client, case);
    let sync = || ruda_runtime::sync::<R>(device).expect("device sync failed");
    let cubecl_sync = || cubecl::future::block_on(client.sync()).expect("device sync failed");
    let time = |call: &mut (dyn FnMut() + Send)| match clock {
        Clock::Caller => median_us(plan, call, &sync),
        Clock::CubeclSync => median_us(plan, call, &cubecl_sync),
        Clock::DeviceThread => median_on_device_thread_us(&client, plan, call),
        Clock::BackToBack => {
            let calls = BACK_TO_BACK_CALLS;
            let all = median_us(
                plan,
                || {
                    for _ in 0..calls {
                        call()
                    }
                },
                &sync,
            );
            all / calls as f64
        }
    };

    let forward = || match strategy {
        Some(s) => layer_norm_forward_with(
            &client,
            x.clone(),
            gamma.clone(),
            Some(beta.clone()),
            EPSILON,
            s,
        ),
        None => R::layer_norm(
            &client,
            x.clone(),
            gamma.clone(),
            Some(beta.clone()),
            EPSILON,
        ),
    };
    let fwd_us = time(&mut || drop(forward()));
    let fwdbwd_us = time(&mut || {
        let [_out, mean, rstd] = forward();
        let grads = match strategy {
            Some(s) => layer_norm_backward_with(
                &client,
                x.clone(),
                gamma.clone(),
                dy.clone(),
                mean,
                rstd,
                s,
            ),
            None => {
                R::layer_norm_backward(&client, x.clone(), gamma.clone(), dy.clone(), mean, rstd)
            }
        };
        drop(grads);
    });
    Timing { fwd_us, fwdbwd_us }
}

/// Times `burn::nn::LayerNorm` (f32) under the autodiff backend `B` on `device`: forward on the
/// inner backend (no graph, like PyTorch's `no_grad`), and forward + `y.backward()` + reading
/// `x.grad` under autodiff (the calls of [`crate::workloads::Workload::LayerNormBurn`]). Under
/// `burn::backend::Autodiff<Cuda or Wgpu>` that is Burn's composed LayerNorm; under
/// `burn_ruda::Autodiff<Ruda<..>>` the native kernels.
pub fn burn_layer_norm<B: BackwardWithGrad>(
    device: &B::Device,
    rows: usize,
    d: usize,
    plan: TimingPlan,
) -> Timing {
    let time = |pass| {
        let mut call = layer_norm_call::<B>(device.clone(), rows, d, pass);
        median_us(plan, &mut call, || {})
    };
    Timing {
        fwd_us: time(Pass::Forward),
        fwdbwd_us: time(Pass::ForwardBackward),
    }
}

/// Wall-clock microseconds of the first forward call, then of the first backward call, of
/// runtime `R`'s default (autotuned) LayerNorm on `case`, each followed by a device sync: on a
/// fresh autotune cache they include the tuning of the case's key, on a cache written by an
/// earlier process only the lookup. Call it before anything else runs `case`'s key.
pub fn first_calls_us<R: Runtime>(device: &R::Device, case: Case) -> (f64, f64) {
    let client = R::client(device);
    let Inputs { x, gamma, beta, dy } = Inputs::new(&client, case);
    let sync = || cubecl::future::block_on(client.sync()).expect("device sync failed");
    sync();
    let start = std::time::Instant::now();
    let [_out, mean, rstd] = R::layer_norm(&client, x.clone(), gamma.clone(), Some(beta), EPSILON);
    sync();
    let forward = start.elapsed().as_secs_f64() * 1e6;
    let start = std::time::Instant::now();
    let grads = R::layer_norm_backward(&client, x, gamma, dy, mean, rstd);
    sync();
    let backward = start.elapsed().as_secs_f64() * 1e6;
    drop(grads);
    (forward, backward)
}

/// LayerNorm calls one after another with one device sync at the end, in [`Pass::BackToBack`].
pub const BACK_TO_BACK_CALLS: usize = 20;

/// Forward alone, or forward and backward, once or back to back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// Forward on the inner backend, no autodiff graph (PyTorch's `no_grad`).
    Forward,
    /// Forward, `y.backward()`, and the input's gradient read.
    ForwardBackward,
    /// [`Pass::ForwardBackward`] [`BACK_TO_BACK_CALLS`] times with one device sync at the end,
    /// as a training loop issues them: the device's idle time between synchronized calls (the
    /// sleeps of CubeCL's device threads, the host's launch work) is paid once, not per call.
    /// A sample is all the calls; per call is the sample's time divided by their number.
    BackToBack,
    /// [`Pass::BackToBack`] with `y`'s gradient given, as a training loop's upstream layers
    /// give it, PyTorch's `y.backward(dy)` in `torch_layernorm.py` and the kernels' benchmark:
    /// `burn_ruda::backward_with_grad(y, dy)` with `dy` made once, where `y.backward()` fills
    /// a new full-size ones tensor as `y`'s gradient on every call.
    BackToBackGivenGrad,
}

impl Pass {
    /// `fwd` or `fwdbwd`, as the tables print it.
    pub fn name(self) -> &'static str {
        match self {
            Pass::Forward => "fwd",
            Pass::ForwardBackward => "fwdbwd",
            Pass::BackToBack => "fwdbwd-x20",
            Pass::BackToBackGivenGrad => "fwdbwd-dy-x20",
        }
    }

    /// LayerNorm calls in one sample: [`BACK_TO_BACK_CALLS`] back to back, else 1.
    pub fn calls(self) -> usize {
        match self {
            Pass::BackToBack | Pass::BackToBackGivenGrad => BACK_TO_BACK_CALLS,
            _ => 1,
        }
    }

    /// Elements moved per input element, for the effective bandwidth: the forward reads `x`
    /// and writes `y` (2), forward + backward also reads `x` and `dy` and writes `dx` (5), the
    /// count `torch_layernorm.py` uses. Per call: a back-to-back sample moves [`Pass::calls`]
    /// times as much.
    pub fn elements_moved(self) -> usize {
        match self {
            Pass::Forward => 2,
            Pass::ForwardBackward | Pass::BackToBack | Pass::BackToBackGivenGrad => 5,
        }
    }
}

/// `burn::nn::LayerNorm` on `[rows, d]` under `B`: the call of [`crate::workloads::Workload::LayerNormBurn`].
pub fn layer_norm_call<B: BackwardWithGrad>(
    device: B::Device,
    rows: usize,
    d: usize,
    pass: Pass,
) -> Call {
    let layer: LayerNorm<B> = LayerNormConfig::new(d).with_epsilon(EPSILON).init(&device);
    let x = Tensor::<B, 2>::random([rows, d], Distribution::Normal(0.0, 1.0), &device);
    match pass {
        Pass::Forward => {
            let inner = layer.valid();
            let x = x.inner();
            Box::new(move || {
                drop(inner.forward(x.clone()));
                <B::InnerBackend as Backend>::sync(&device).expect("device sync failed");
            })
        }
        Pass::ForwardBackward | Pass::BackToBack => Box::new(move || {
            for _ in 0..pass.calls() {
                let xg = x.clone().detach().require_grad();
                let grads = layer.forward(xg.clone()).backward();
                drop(xg.grad(&grads).expect("x has a gradient"));
            }
            B::sync(&device).expect("device sync failed");
        }),
        Pass::BackToBackGivenGrad => {
            let dy = Tensor::<B::InnerBackend, 2>::ones([rows, d], &device);
            Box::new(move || {
                for _ in 0..pass.calls() {
                    let xg = x.clone().detach().require_grad();
                    let grads = backward_with_grad(layer.forward(xg.clone()), dy.clone());
                    drop(xg.grad(&grads).expect("x has a gradient"));
                }
                B::sync(&device).expect("device sync failed");
            })
        }
    }
}
