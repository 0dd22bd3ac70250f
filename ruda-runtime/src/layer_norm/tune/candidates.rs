//! The LayerNorm autotune candidates: a variant, a vector width, and, for the backward pass,
//! where the column sums are kept.

use cubecl::client::ComputeClient;

use crate::layer_norm::{Choice, ColumnSums, Variant, backward, forward};
use crate::tensor_buffer::TensorBuffer;

/// One autotune candidate: a variant, with the widest usable vector or half of it, and, for
/// the backward pass of the register variants, where the column sums are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The work layout.
    pub variant: Variant,
    /// Half the widest usable vector (more units per row, fewer registers per unit).
    pub narrow: bool,
    /// Where the backward keeps its partial `dgamma`/`dbeta` and `gamma`:
    /// [`ColumnSums::Registers`] in [`CANDIDATES`], [`ColumnSums::SharedMemory`] in the
    /// backward's extra register-variant candidates ([`BACKWARD_CANDIDATES`]). The forward pass
    /// ignores it.
    pub column_sums: ColumnSums,
}

impl Candidate {
    /// A candidate with its column sums in registers.
    pub const fn new(variant: Variant, narrow: bool) -> Self {
        Candidate {
            variant,
            narrow,
            column_sums: ColumnSums::Registers,
        }
    }

    /// The same candidate with the backward's column sums in `column_sums`.
    pub const fn with_column_sums(self, column_sums: ColumnSums) -> Self {
        Candidate {
            column_sums,
            ..self
        }
    }

    /// Its name in the cache and in reports, e.g. `PlanePerRow/widest`, or
    /// `CubePerRow/widest/shared-sums` with the column sums in shared memory.
    pub fn name(&self) -> String {
        let width = if self.narrow { "half" } else { "widest" };
        let sums = match self.column_sums {
            ColumnSums::SharedMemory => "/shared-sums",
            ColumnSums::Registers | ColumnSums::Auto => "",
        };
        format!("{:?}/{width}{sums}", self.variant)
    }

    /// The [`Choice`] this candidate runs with: `strict` as when it is benchmarked (an error
    /// rather than another plan), not strict as when it runs a caller's shape of its key.
    pub(super) fn choice(&self, strict: bool) -> Choice {
        Choice::Candidate {
            variant: self.variant,
            narrow: self.narrow,
            column_sums: self.column_sums,
            strict,
        }
    }

    /// This candidate's forward pass on the caller's inputs, planned exactly as the tuner
    /// benchmarks it (for tests that check every candidate against a reference).
    ///
    /// Returns `[out, mean, rstd]`, or an error, before anything is launched, when the candidate
    /// cannot run this shape as asked (a register variant whose row does not fit, a half-width
    /// vector where the widest is 1): the tuner skips it there.
    ///
    /// # Panics
    /// As [`layer_norm_forward`](crate::layer_norm::layer_norm_forward) on bad arguments.
    pub fn forward<R: cubecl::Runtime>(
        &self,
        client: &ComputeClient<R>,
        input: TensorBuffer,
        weight: TensorBuffer,
        bias: Option<TensorBuffer>,
        epsilon: f64,
    ) -> Result<[TensorBuffer; 3], String> {
        forward::forward(client, input, weight, bias, epsilon, self.choice(true))
    }

    /// This candidate's backward pass on the caller's inputs, as [`Candidate::forward`].
    ///
    /// Returns `[dx, dgamma, dbeta]`, or an error when the candidate cannot run this shape.
    ///
    /// # Panics
    /// As [`layer_norm_backward`](crate::layer_norm::layer_norm_backward) on bad arguments.
    pub fn backward<R: cubecl::Runtime>(
        &self,
        client: &ComputeClient<R>,
        input: TensorBuffer,
        weight: TensorBuffer,
        grad: TensorBuffer,
        mean: TensorBuffer,
        rstd: TensorBuffer,
    ) -> Result<[TensorBuffer; 3], String> {
        backward::backward(client, input, weight, grad, mean, rstd, self.choice(true))
    }
}

/// Every candidate of the forward pass, and the first of the backward's, in a fixed order
/// (CubeCL's cache checksum is over these names, so a change of the list invalidates old
/// results): the four variants, each with the widest usable vector and with half of it, the
/// backward's column sums in registers. A candidate that cannot run a shape as asked (a register
/// variant whose row does not fit, a half-width vector where the widest is 1, a `UnitPerRow`
/// whose unit would loop past lavapipe's limit of 65535 loop iterations per invocation) fails
/// its benchmark before launching anything and is skipped.
///
/// The tuner only times the candidates; it never compares their results. Every candidate is
/// therefore checked against the f64 reference on its own, forward and backward, at long rows
/// (d = 65536 among them) and short ones: `ruda-runtime/tests/candidates.rs`, `every_candidate`
/// in the root crate's `tests/layer_norm.rs`, and the GPU suite's group "every autotune
/// candidate". (A `UnitPerRow` with half-width vectors once ran at d = 65536 on lavapipe, had
/// its loops cut by that limit, left most of its output unwritten and, doing less work, was
/// chosen as the fastest.)
pub const CANDIDATES: [Candidate; 8] = [
    Candidate::new(Variant::PlanePerRow, false),
    Candidate::new(Variant::CubePerRow, false),
    Candidate::new(Variant::CubePerRowLooped, false),
    Candidate::new(Variant::UnitPerRow, false),
    Candidate::new(Variant::PlanePerRow, true),
    Candidate::new(Variant::CubePerRow, true),
    Candidate::new(Variant::CubePerRowLooped, true),
    Candidate::new(Variant::UnitPerRow, true),
];

/// The backward pass's candidates: [`CANDIDATES`], then the two register variants at both
/// widths with their column sums in shared memory ([`ColumnSums::SharedMemory`]), which is
/// skipped where the cube's slots do not fit in the device's shared memory.
///
/// Where the sums belong is a tuning dimension rather than a fixed threshold because the
/// crossover is not a count of elements a unit: forced both ways on an H200 (f32, forward +
/// backward; `docs/perf/layer-norm.md`, History), shared memory won
/// 5-10% at 12 and 24 elements a unit (16384x768) and at 32, and lost 3-6% at 16 (16384x4096).
/// [`ColumnSums::Auto`]'s rule remains the choice without tuning (`RUDA_AUTOTUNE=off`).
pub const BACKWARD_CANDIDATES: [Candidate; 12] = {
    const SHARED: ColumnSums = ColumnSums::SharedMemory;
    [
        CANDIDATES[0],
        CANDIDATES[1],
        CANDIDATES[2],
        CANDIDATES[3],
        CANDIDATES[4],
        CANDIDATES[5],
        CANDIDATES[6],
        CANDIDATES[7],
        Candidate::new(Variant::PlanePerRow, false).with_column_sums(SHARED),
        Candidate::new(Variant::CubePerRow, false).with_column_sums(SHARED),
        Candidate::new(Variant::PlanePerRow, true).with_column_sums(SHARED),
        Candidate::new(Variant::CubePerRow, true).with_column_sums(SHARED),
    ]
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_names_are_unique() {
        let names: std::collections::HashSet<String> =
            BACKWARD_CANDIDATES.iter().map(Candidate::name).collect();
        assert_eq!(names.len(), BACKWARD_CANDIDATES.len());
        assert_eq!(CANDIDATES[0].name(), "PlanePerRow/widest");
        assert_eq!(BACKWARD_CANDIDATES[..8], CANDIDATES);
        assert_eq!(
            BACKWARD_CANDIDATES[9].name(),
            "CubePerRow/widest/shared-sums"
        );
    }
}
