//! Characters as tokens, and the unigram entropy a language model has to beat.

use std::collections::HashMap;

/// Maps each distinct character of a text to a token id (characters in sorted order).
#[derive(Clone, Debug)]
pub struct CharTokenizer {
    chars: Vec<char>,
    ids: HashMap<char, u32>,
}

impl CharTokenizer {
    /// The tokenizer of every character that occurs in `text`.
    pub fn from_text(text: &str) -> Self {
        let mut chars: Vec<char> = text.chars().collect();
        chars.sort_unstable();
        chars.dedup();
        let ids = chars
            .iter()
            .enumerate()
            .map(|(i, &c)| (c, i as u32))
            .collect();
        Self { chars, ids }
    }

    /// Number of distinct characters.
    pub fn vocab_size(&self) -> usize {
        self.chars.len()
    }

    /// The id of `c`, if the tokenizer knows it.
    pub fn id(&self, c: char) -> Option<u32> {
        self.ids.get(&c).copied()
    }

    /// Token ids of `text`; characters the tokenizer does not know become a space (or the first
    /// character when there is no space).
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let fallback = self.id(' ').unwrap_or(0);
        text.chars()
            .map(|c| self.id(c).unwrap_or(fallback))
            .collect()
    }

    /// The text of token ids (unknown ids are skipped).
    pub fn decode(&self, tokens: &[u32]) -> String {
        tokens
            .iter()
            .filter_map(|&t| self.chars.get(t as usize))
            .collect()
    }
}

/// Entropy in nats per character of the unigram distribution of `tokens` (each token's
/// frequency in `tokens`): the cross-entropy of the best model that ignores context.
pub fn unigram_entropy(tokens: &[u32]) -> f64 {
    let mut counts: HashMap<u32, usize> = HashMap::new();
    for &t in tokens {
        *counts.entry(t).or_default() += 1;
    }
    let n = tokens.len() as f64;
    counts
        .values()
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.ln()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_entropy() {
        let tok = CharTokenizer::from_text("abcab");
        assert_eq!(tok.vocab_size(), 3);
        assert_eq!(tok.decode(&tok.encode("cab")), "cab");
        assert!((unigram_entropy(&tok.encode("abab")) - 2f64.ln()).abs() < 1e-12);
        assert_eq!(unigram_entropy(&tok.encode("aaaa")), 0.0);
    }
}
