//! A character text as a burn-dataset [`Dataset`] of fixed-length windows, and the [`Batcher`]
//! that makes (input, next-character target) pairs of them.

use std::sync::Arc;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::Dataset;
use burn::prelude::*;

/// `seq_len + 1` consecutive tokens: the model reads the first `seq_len` and predicts the last
/// `seq_len`.
#[derive(Clone, Debug)]
pub struct CharLmItem {
    /// The window's tokens.
    pub tokens: Vec<u32>,
}

/// Windows of `seq_len + 1` tokens of a token sequence, starting every `seq_len` tokens (each
/// token is predicted once).
#[derive(Clone, Debug)]
pub struct CharWindows {
    tokens: Arc<Vec<u32>>,
    seq_len: usize,
}

impl CharWindows {
    /// The windows of `tokens`.
    pub fn new(tokens: Vec<u32>, seq_len: usize) -> Self {
        assert!(seq_len > 0, "seq_len must be positive");
        Self {
            tokens: Arc::new(tokens),
            seq_len,
        }
    }

    /// The tokens.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }
}

impl Dataset<CharLmItem> for CharWindows {
    fn get(&self, index: usize) -> Option<CharLmItem> {
        let start = index * self.seq_len;
        let window = self.tokens.get(start..start + self.seq_len + 1)?;
        Some(CharLmItem {
            tokens: window.to_vec(),
        })
    }

    fn len(&self) -> usize {
        self.tokens.len().saturating_sub(1) / self.seq_len
    }
}

/// Splits a token sequence into a training part and the last `valid_fraction` of it.
pub fn split_tokens(tokens: &[u32], valid_fraction: f64) -> (Vec<u32>, Vec<u32>) {
    let valid = ((tokens.len() as f64) * valid_fraction.clamp(0.0, 1.0)).round() as usize;
    let cut = tokens.len() - valid;
    (tokens[..cut].to_vec(), tokens[cut..].to_vec())
}

/// A batch of windows on a device.
#[derive(Clone, Debug)]
pub struct CharLmBatch<B: Backend> {
    /// `[batch, seq_len]` input tokens.
    pub inputs: Tensor<B, 2, Int>,
    /// `[batch, seq_len]` next tokens (the inputs shifted by one).
    pub targets: Tensor<B, 2, Int>,
}

/// Builds [`CharLmBatch`]es from windows of equal length.
#[derive(Clone, Debug, Default)]
pub struct CharLmBatcher;

impl<B: Backend> Batcher<B, CharLmItem, CharLmBatch<B>> for CharLmBatcher {
    fn batch(&self, items: Vec<CharLmItem>, device: &B::Device) -> CharLmBatch<B> {
        let seq = items
            .first()
            .map_or(0, |i| i.tokens.len().saturating_sub(1));
        let mut inputs = Vec::with_capacity(items.len() * seq);
        let mut targets = Vec::with_capacity(items.len() * seq);
        for item in &items {
            assert_eq!(
                item.tokens.len(),
                seq + 1,
                "windows of one batch differ in length"
            );
            inputs.extend(item.tokens[..seq].iter().map(|&t| t as i64));
            targets.extend(item.tokens[1..].iter().map(|&t| t as i64));
        }
        let shape = [items.len(), seq];
        CharLmBatch {
            inputs: Tensor::from_data(TensorData::new(inputs, shape), device),
            targets: Tensor::from_data(TensorData::new(targets, shape), device),
        }
    }
}
