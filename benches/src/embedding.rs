//! The embedding table's gradient alone (`ModuleOps::embedding_backward`, what Burn's autodiff
//! calls for `burn::nn::Embedding`), timed on any backend: ruda's native kernel on `Ruda`, Burn's
//! `select_add` on `burn_ruda::Inner` (the same device and fusion engine without ruda's op).

use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Int, Tensor, TensorPrimitive};

use crate::timing::{TimingPlan, median_us};

/// The cases of the GPU suite's `--embedding` section: `(table rows, tokens, d_model)`. The
/// transformer step's table (76 characters, 32 x 256 tokens, d 512), the largest table `Ruda`
/// gives its native kernel (`ruda_runtime::embedding::NATIVE_MAX_ROWS`), GPT-2's vocabulary at
/// d 768 and a 128k vocabulary (Llama 3) at d 512 (both Burn's kernel on `Ruda`).
pub const CASES: [(usize, usize, usize); 4] = [
    (76, 8192, 512),
    (1024, 8192, 512),
    (50_257, 8192, 768),
    (128_256, 8192, 512),
];

/// Median microseconds of one `embedding_backward` of a `[rows, d]` table over `tokens` random
/// ids on `B`, each call followed by a device sync.
pub fn embedding_backward_us<B: Backend>(
    device: &B::Device,
    rows: usize,
    tokens: usize,
    d: usize,
    plan: TimingPlan,
) -> f64 {
    let table = Tensor::<B, 2>::zeros([rows, d], device);
    let grad = Tensor::<B, 3>::random([1, tokens, d], Distribution::Normal(0.0, 1.0), device);
    let ids =
        Tensor::<B, 2, Int>::random([1, tokens], Distribution::Uniform(0.0, rows as f64), device);
    median_us(
        plan,
        || {
            let out = B::embedding_backward(
                table.clone().into_primitive().tensor(),
                grad.clone().into_primitive().tensor(),
                ids.clone().into_primitive(),
            );
            drop(Tensor::<B, 2>::from_primitive(TensorPrimitive::Float(out)));
        },
        || B::sync(device).expect("device sync failed"),
    )
}
