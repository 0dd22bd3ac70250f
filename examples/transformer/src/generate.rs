//! Sampling text from a trained [`CharLm`].

use burn::prelude::*;

use crate::model::CharLm;
use crate::tokenizer::CharTokenizer;

/// Continues `prompt` by `length` characters, sampling each from the model's next-character
/// distribution at `temperature` (0 picks the most likely character) with a generator seeded by
/// `seed`. The model sees at most its context length of preceding characters.
pub fn generate<B: Backend>(
    model: &CharLm<B>,
    tokenizer: &CharTokenizer,
    prompt: &str,
    length: usize,
    temperature: f64,
    seed: u64,
    device: &B::Device,
) -> String {
    let mut tokens = tokenizer.encode(prompt);
    if tokens.is_empty() {
        tokens.push(tokenizer.id('\n').unwrap_or(0));
    }
    let start = tokens.len();
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    // Every step feeds one window of the model's full context length, the context at its start
    // and filler after it: the causal mask keeps the filler from affecting the prediction at the
    // context's last position, and one input shape means the device compiles (and autotunes) its
    // kernels once rather than once per context length.
    let window = model.max_seq_len();
    let mut input = vec![0i64; window];
    for _ in 0..length {
        let context = &tokens[tokens.len().saturating_sub(window)..];
        for (slot, &t) in input.iter_mut().zip(context) {
            *slot = t as i64;
        }
        let position = context.len() - 1;
        let logits = model.forward(Tensor::<B, 2, Int>::from_data(
            TensorData::new(input.clone(), [1, window]),
            device,
        ));
        let vocab = logits.dims()[2];
        let logits = logits
            .into_data()
            .convert::<f32>()
            .to_vec::<f32>()
            .expect("f32 logits");
        let next = &logits[position * vocab..(position + 1) * vocab];
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let uniform = (rng >> 11) as f64 / (1u64 << 53) as f64;
        tokens.push(sample(next, temperature, uniform));
    }
    tokenizer.decode(&tokens[start..])
}

/// The index drawn from `softmax(logits / temperature)` by `uniform` in `[0, 1)`; the arg max
/// when `temperature` is 0 or less.
pub fn sample(logits: &[f32], temperature: f64, uniform: f64) -> u32 {
    let argmax = logits
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map_or(0, |(i, _)| i as u32);
    if temperature <= 0.0 {
        return argmax;
    }
    let max = logits[argmax as usize] as f64;
    let weights: Vec<f64> = logits
        .iter()
        .map(|&l| ((l as f64 - max) / temperature).exp())
        .collect();
    let mut target = uniform * weights.iter().sum::<f64>();
    for (i, w) in weights.iter().enumerate() {
        if target < *w {
            return i as u32;
        }
        target -= w;
    }
    argmax
}
