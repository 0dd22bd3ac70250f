//! The matrix products of the transformer step alone (`burn::tensor::module::linear` and the
//! attention's batched `matmul`, what `burn::nn` runs), timed on any backend: ruda's native
//! product on `Ruda`, burn-cubecl's tuned kernels on `burn_ruda::Inner` (the same device and
//! fusion engine without ruda's ops).

use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Tensor, module::linear};

use crate::timing::{TimingPlan, median_us};

/// One product of the cases below.
#[derive(Clone, Copy, Debug)]
pub enum Product {
    /// `linear` of `[rows, d_in]` by a `[d_in, d_out]` weight, with a bias.
    Linear {
        /// Rows (batch x sequence).
        rows: usize,
        /// Input features.
        d_in: usize,
        /// Output features.
        d_out: usize,
    },
    /// `[batch, heads, m, k] x [batch, heads, k, n]`, the right-hand side a `swap_dims` view (the
    /// attention scores `q k^T`).
    Attention {
        /// Batch x heads.
        batch: usize,
        /// Rows and columns of each product (the sequence length).
        seq: usize,
        /// The contracted head dimension.
        d_head: usize,
    },
}

impl Product {
    /// Floating-point operations of one call.
    pub fn flops(self) -> f64 {
        match self {
            Product::Linear { rows, d_in, d_out } => 2.0 * (rows * d_in * d_out) as f64,
            Product::Attention { batch, seq, d_head } => 2.0 * (batch * seq * seq * d_head) as f64,
        }
    }

    /// A short name for tables.
    pub fn name(self) -> String {
        match self {
            Product::Linear { rows, d_in, d_out } => {
                format!("linear {rows}x{d_in} . {d_in}x{d_out}")
            }
            Product::Attention { batch, seq, d_head } => {
                format!("q k^T {batch} x {seq}x{d_head} . {d_head}x{seq}")
            }
        }
    }
}

/// The products of one layer of the benchmarked transformer (d_model 512, 8 heads, d_ff 2048, batch
/// 32, seq 256): the q/k/v/output projections, the feed-forward layers, the attention scores.
pub const CASES: [Product; 4] = [
    Product::Linear {
        rows: 8192,
        d_in: 512,
        d_out: 512,
    },
    Product::Linear {
        rows: 8192,
        d_in: 512,
        d_out: 2048,
    },
    Product::Linear {
        rows: 8192,
        d_in: 2048,
        d_out: 512,
    },
    Product::Attention {
        batch: 256,
        seq: 256,
        d_head: 64,
    },
];

/// Calls per timed batch of [`product_us`].
pub const CALLS_PER_SYNC: usize = 20;

/// Median microseconds per call of `product` on `B`, timed as a training step sees it:
/// [`CALLS_PER_SYNC`] calls back to back on independent inputs, their outputs kept until one
/// device sync at the end (a synced single call would time mostly the sync, and a lazy backend
/// may never run a product whose output is dropped unread).
pub fn product_us<B: Backend>(device: &B::Device, product: Product, plan: TimingPlan) -> f64 {
    let normal = Distribution::Normal(0.0, 1.0);
    let sync = || B::sync(device).expect("device sync failed");
    let batch_us = match product {
        Product::Linear { rows, d_in, d_out } => {
            // A different input each call, as the layers of a step have.
            let xs: Vec<_> = (0..CALLS_PER_SYNC)
                .map(|_| Tensor::<B, 2>::random([rows, d_in], normal, device))
                .collect();
            let w = Tensor::<B, 2>::random([d_in, d_out], normal, device);
            let b = Tensor::<B, 1>::random([d_out], normal, device);
            let mut outs = Vec::with_capacity(CALLS_PER_SYNC);
            median_us(
                plan,
                || {
                    outs.clear();
                    for x in &xs {
                        outs.push(linear(x.clone(), w.clone(), Some(b.clone())));
                    }
                },
                sync,
            )
        }
        Product::Attention { batch, seq, d_head } => {
            let qs: Vec<_> = (0..CALLS_PER_SYNC)
                .map(|_| Tensor::<B, 3>::random([batch, seq, d_head], normal, device))
                .collect();
            let k = Tensor::<B, 3>::random([batch, seq, d_head], normal, device);
            let mut outs = Vec::with_capacity(CALLS_PER_SYNC);
            median_us(
                plan,
                || {
                    outs.clear();
                    for q in &qs {
                        outs.push(q.clone().matmul(k.clone().swap_dims(1, 2)));
                    }
                },
                sync,
            )
        }
    };
    batch_us / CALLS_PER_SYNC as f64
}
