//! The softmax autotune candidates: a row variant and a vector width.

use cubecl::client::ComputeClient;

use crate::softmax::{Choice, Kind, Variant, backward, forward};
use crate::tensor_buffer::TensorBuffer;

/// One autotune candidate: a variant, with the widest usable vector or half of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The work layout.
    pub variant: Variant,
    /// Half the widest usable vector (more units a row, fewer registers a unit).
    pub narrow: bool,
}

impl Candidate {
    /// A candidate.
    pub const fn new(variant: Variant, narrow: bool) -> Self {
        Candidate { variant, narrow }
    }

    /// Its name in the cache and in reports, e.g. `PlanePerRow/widest`.
    pub fn name(&self) -> String {
        let width = if self.narrow { "half" } else { "widest" };
        format!("{:?}/{width}", self.variant)
    }

    /// The [`Choice`] this candidate runs with: `strict` as when it is benchmarked.
    pub(super) fn choice(&self, strict: bool) -> Choice {
        Choice::Candidate {
            variant: self.variant,
            narrow: self.narrow,
            strict,
        }
    }

    /// This candidate's forward pass over the last dimension of `input`, planned exactly as
    /// the tuner benchmarks it (for tests that check every candidate against a reference).
    /// An error, before anything is launched, when it cannot run the shape as asked.
    ///
    /// # Panics
    /// As [`crate::softmax::softmax_forward`] on bad arguments.
    pub fn forward<R: cubecl::Runtime>(
        &self,
        client: &ComputeClient<R>,
        input: TensorBuffer,
        kind: Kind,
    ) -> Result<TensorBuffer, String> {
        let dim = input.shape.num_dims().saturating_sub(1);
        forward::forward(client, input, dim, kind, self.choice(true))
    }

    /// This candidate's backward pass, as [`Candidate::forward`].
    ///
    /// # Panics
    /// As [`crate::softmax::softmax_backward`] on bad arguments.
    pub fn backward<R: cubecl::Runtime>(
        &self,
        client: &ComputeClient<R>,
        output: TensorBuffer,
        grad: TensorBuffer,
        kind: Kind,
    ) -> Result<TensorBuffer, String> {
        let dim = output.shape.num_dims().saturating_sub(1);
        backward::backward(client, output, grad, dim, kind, self.choice(true))
    }
}

/// Every candidate, forward and backward, in a fixed order (CubeCL's cache checksum is over
/// these names, so a change of the list invalidates old results): the six variants with the
/// widest usable vector, then with half of it. A candidate that cannot run a shape as asked (a
/// row too long for its registers or for shared memory, a half-width vector where the widest
/// is 1, a unit looping past lavapipe's limit) fails its benchmark before launching anything
/// and is skipped.
///
/// The tuner only times the candidates; every candidate is checked against the f64 reference
/// on its own, in `tests/src/softmax_checks.rs` (run on lavapipe in CI by
/// `tests/tests/softmax.rs`) and in the GPU suite.
pub const CANDIDATES: [Candidate; 12] = [
    Candidate::new(Variant::PlanePerRow, false),
    Candidate::new(Variant::CubePerRow, false),
    Candidate::new(Variant::CubePerRowStaged, false),
    Candidate::new(Variant::CubePerRowPipelined, false),
    Candidate::new(Variant::CubePerRowLooped, false),
    Candidate::new(Variant::UnitPerRow, false),
    Candidate::new(Variant::PlanePerRow, true),
    Candidate::new(Variant::CubePerRow, true),
    Candidate::new(Variant::CubePerRowStaged, true),
    Candidate::new(Variant::CubePerRowPipelined, true),
    Candidate::new(Variant::CubePerRowLooped, true),
    Candidate::new(Variant::UnitPerRow, true),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_names_are_unique() {
        let names: std::collections::HashSet<String> =
            CANDIDATES.iter().map(Candidate::name).collect();
        assert_eq!(names.len(), CANDIDATES.len());
        assert_eq!(CANDIDATES[2].name(), "CubePerRowStaged/widest");
    }
}
