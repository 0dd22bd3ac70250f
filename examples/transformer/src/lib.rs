//! A character-level transformer language model for burn-ruda's `transformer` example and its
//! tests: text loading, tokenizer and unigram baseline, a burn-dataset `Dataset` and `Batcher`,
//! the model (Burn's `TransformerEncoder` under a causal mask), training with burn-train's
//! `Learner`, and sampling.

pub mod data;
pub mod generate;
pub mod model;
pub mod text;
pub mod tokenizer;
pub mod training;
