//! A character-level transformer language model built from Burn's own modules: token and
//! learned position embeddings, `burn::nn::transformer::TransformerEncoder` (pre-norm, so each
//! layer runs two LayerNorms) under a causal mask, a final LayerNorm, and a linear head.

use burn::nn::attention::generate_autoregressive_mask;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::transformer::{
    TransformerEncoder, TransformerEncoderConfig, TransformerEncoderInput,
};
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::train::{InferenceStep, SequenceOutput, TrainOutput, TrainStep};

use crate::data::CharLmBatch;
use example_common::read_ahead::SequenceRead;

/// Sizes of [`CharLm`].
#[derive(Config, Debug)]
pub struct CharLmConfig {
    /// Distinct characters.
    pub vocab_size: usize,
    /// Longest context, in characters.
    pub max_seq_len: usize,
    /// Width of the residual stream.
    #[config(default = 128)]
    pub d_model: usize,
    /// Attention heads per layer.
    #[config(default = 4)]
    pub n_heads: usize,
    /// Transformer layers.
    #[config(default = 2)]
    pub n_layers: usize,
    /// Width of the feed-forward layers.
    #[config(default = 512)]
    pub d_ff: usize,
    /// Dropout probability.
    #[config(default = 0.1)]
    pub dropout: f64,
}

/// The language model (see the [module docs](self)).
#[derive(Module, Debug)]
pub struct CharLm<B: Backend> {
    tokens: Embedding<B>,
    positions: Embedding<B>,
    encoder: TransformerEncoder<B>,
    norm: LayerNorm<B>,
    head: Linear<B>,
    max_seq_len: usize,
}

impl CharLmConfig {
    /// The model, with freshly initialized parameters on `device`.
    pub fn init<B: Backend>(&self, device: &B::Device) -> CharLm<B> {
        CharLm {
            tokens: EmbeddingConfig::new(self.vocab_size, self.d_model).init(device),
            positions: EmbeddingConfig::new(self.max_seq_len, self.d_model).init(device),
            encoder: TransformerEncoderConfig::new(
                self.d_model,
                self.d_ff,
                self.n_heads,
                self.n_layers,
            )
            .with_dropout(self.dropout)
            .with_norm_first(true)
            .init(device),
            norm: LayerNormConfig::new(self.d_model).init(device),
            head: LinearConfig::new(self.d_model, self.vocab_size).init(device),
            max_seq_len: self.max_seq_len,
        }
    }
}

impl<B: Backend> CharLm<B> {
    /// The longest context the model takes.
    pub fn max_seq_len(&self) -> usize {
        self.max_seq_len
    }

    /// Next-character logits `[batch, seq, vocab]` of tokens `[batch, seq]`; position `i` sees
    /// tokens `0..=i` only.
    pub fn forward(&self, tokens: Tensor<B, 2, Int>) -> Tensor<B, 3> {
        let [batch, seq] = tokens.dims();
        assert!(
            seq <= self.max_seq_len,
            "sequence of {seq} tokens is longer than the model's context ({})",
            self.max_seq_len
        );
        let device = tokens.device();
        let positions = Tensor::<B, 1, Int>::arange(0..seq as i64, &device)
            .reshape([1, seq])
            .repeat_dim(0, batch);
        let x = self.tokens.forward(tokens) + self.positions.forward(positions);
        let mask = generate_autoregressive_mask::<B>(batch, seq, &device);
        let x = self
            .encoder
            .forward(TransformerEncoderInput::new(x).mask_attn(mask));
        self.head.forward(self.norm.forward(x))
    }

    /// Logits, mean cross-entropy (nats per character) and targets of a batch.
    pub fn forward_loss(&self, batch: CharLmBatch<B>) -> SequenceOutput<B> {
        let logits = self.forward(batch.inputs);
        let [b, s, v] = logits.dims();
        let loss = CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(
                logits.clone().reshape([b * s, v]),
                batch.targets.clone().reshape([b * s]),
            );
        SequenceOutput::new(loss, logits, None, batch.targets)
    }
}

// The outputs are read back on the training thread, when the loop asks for its next batch: read
// from burn-train's metrics thread, they would cut the next step's fusion at random places
// (`example_common::read_ahead`).
impl<B: AutodiffBackend> TrainStep for CharLm<B> {
    type Input = CharLmBatch<B>;
    type Output = SequenceRead<B>;

    fn step(&self, batch: CharLmBatch<B>) -> TrainOutput<SequenceRead<B>> {
        let item = self.forward_loss(batch);
        let grads = item.loss.backward();
        TrainOutput::new(self, grads, SequenceRead::new(item))
    }
}

impl<B: Backend> InferenceStep for CharLm<B> {
    type Input = CharLmBatch<B>;
    type Output = SequenceRead<B>;

    fn step(&self, batch: CharLmBatch<B>) -> SequenceRead<B> {
        SequenceRead::new(self.forward_loss(batch))
    }
}
