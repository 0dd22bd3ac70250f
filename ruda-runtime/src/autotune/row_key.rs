//! The tuning key of the row kernels (LayerNorm, softmax over the last dimension): the buckets
//! of a row's length and of the number of rows, the vector width, and the element type.

use burn_backend::DType;
use cubecl::{client::ComputeClient, tune::AutotuneKey};
use serde::{Deserialize, Serialize};

use crate::layout::vector_size;

/// The element type in a tuning key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TuneDType {
    /// f32.
    F32,
    /// f16.
    F16,
    /// bf16.
    BF16,
}

impl TuneDType {
    pub(crate) fn of(dtype: DType) -> Self {
        match dtype {
            DType::F16 => Self::F16,
            DType::BF16 => Self::BF16,
            // Validation rejects every other dtype before a key is made.
            _ => Self::F32,
        }
    }

    pub(crate) fn dtype(self) -> DType {
        match self {
            Self::F32 => DType::F32,
            Self::F16 => DType::F16,
            Self::BF16 => DType::BF16,
        }
    }
}

/// Upper bound of the `d` bucket: the smallest power of two or 1.5 times a power of two `>= d`.
pub fn d_bucket(d: usize) -> usize {
    let pow = d.max(1).next_power_of_two();
    let three_quarters = pow / 4 * 3;
    if pow >= 4 && d <= three_quarters {
        three_quarters
    } else {
        pow
    }
}

/// Upper bound of the rows bucket: the next power of two.
pub fn rows_bucket(rows: usize) -> usize {
    rows.max(1).next_power_of_two()
}

/// Largest tuning tensor, in bytes: the representative shape of a bucket is cut to this size
/// (fewer rows), so that tuning a huge shape does not allocate gigabytes.
///
/// A cap in bytes, not elements, so that half-precision keys are timed on as many bytes as f32
/// ones. It must stay well above a GPU's L2 (50 MB on an H100 or H200) and leave many waves of
/// rows: on 2^24 bf16 elements (32 MiB, 333 rows of a 50304-wide vocabulary) the tuner picked
/// softmax's looped backward, 27% slower than the staged one on the full 8192 rows; on 128 MiB
/// (1334 rows) it picks the staged one (docs/perf/softmax.md). Tuning softmax's backward then
/// allocates three such tensors for the time it takes.
pub const MAX_TUNE_BYTES: usize = 128 << 20;

/// The rows of a tuning problem with rows of `d` elements of `elem_size` bytes: `rows` cut to
/// [`MAX_TUNE_BYTES`], at least one.
pub fn tune_rows(rows: usize, d: usize, elem_size: usize) -> usize {
    rows.min((MAX_TUNE_BYTES / (d.max(1) * elem_size.max(1))).max(1))
}

/// The autotune key of a call of a row kernel (LayerNorm, softmax over the last dimension):
/// one tuning result serves every call with the same key (each op has its own tuners and cache
/// files).
///
/// Buckets:
/// - `d_bucket`: the smallest of 1, 2, 3, 4, 6, 8, 12, ... (powers of two and 1.5 times powers
///   of two) that is `>= d`, so 768 and 1024 are tuned apart but 1000 shares 1024's result;
/// - `vector`: the widest vector the device loads for rows of `d` elements of this dtype (the
///   largest of the device's vector sizes that divides `d`): an odd `d` is read as scalars and
///   tuned apart from an even one;
/// - `rows_bucket`: the next power of two `>= rows`;
/// - `dtype`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RowKey {
    /// Upper bound of the `d` bucket.
    pub d_bucket: usize,
    /// Widest vector width for `d`.
    pub vector: usize,
    /// Upper bound of the rows bucket.
    pub rows_bucket: usize,
    /// Element type.
    pub dtype: TuneDType,
}

impl AutotuneKey for RowKey {}

impl core::fmt::Display for RowKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "d<={} vec{} rows<={} {:?}",
            self.d_bucket, self.vector, self.rows_bucket, self.dtype
        )
    }
}

impl RowKey {
    /// The key of a call with `rows` rows of `d` elements of `dtype` on `client`'s device.
    pub fn new<R: cubecl::Runtime>(
        client: &ComputeClient<R>,
        d: usize,
        rows: usize,
        dtype: DType,
    ) -> Self {
        Self {
            d_bucket: d_bucket(d),
            vector: vector_size(client, d, dtype.size(), &[]),
            rows_bucket: rows_bucket(rows),
            dtype: TuneDType::of(dtype),
        }
    }

    /// The shape the candidates are benchmarked on: the largest `d` of the bucket with the
    /// key's vector width, and the bucket's rows, cut to [`MAX_TUNE_BYTES`].
    pub fn representative<R: cubecl::Runtime>(&self, client: &ComputeClient<R>) -> (usize, usize) {
        let size = self.dtype.dtype().size();
        let d = (1..=self.d_bucket)
            .rev()
            .find(|&d| vector_size(client, d, size, &[]) == self.vector)
            .unwrap_or(self.d_bucket);
        let rows = tune_rows(self.rows_bucket, d, size);
        (d, rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d_buckets_are_powers_of_two_and_three_halves() {
        let buckets: Vec<usize> = [
            1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 200, 256, 257, 384, 385, 768, 1000,
        ]
        .iter()
        .map(|&d| d_bucket(d))
        .collect();
        assert_eq!(
            buckets,
            [
                1, 2, 3, 4, 6, 6, 8, 8, 12, 16, 256, 256, 384, 384, 512, 768, 1024
            ]
        );
        assert_eq!(d_bucket(65536), 65536);
        assert_eq!(d_bucket(65537), 98304);
    }

    #[test]
    fn tuning_rows_are_cut_to_the_same_bytes_in_every_dtype() {
        // The vocabulary-sized softmax: 8192 rows of 50304.
        assert_eq!(tune_rows(8192, 50304, 4), 667);
        assert_eq!(tune_rows(8192, 50304, 2), 1334);
        // Small problems are not cut; a row above the cap still gets one.
        assert_eq!(tune_rows(64, 1024, 4), 64);
        assert_eq!(tune_rows(4, MAX_TUNE_BYTES, 4), 1);
    }

    #[test]
    fn rows_buckets_are_powers_of_two() {
        assert_eq!(rows_bucket(0), 1);
        assert_eq!(rows_bucket(1), 1);
        assert_eq!(rows_bucket(3), 4);
        assert_eq!(rows_bucket(4096), 4096);
        assert_eq!(rows_bucket(4097), 8192);
    }

    #[test]
    fn key_serializes_as_json() {
        let key = RowKey {
            d_bucket: 768,
            vector: 4,
            rows_bucket: 4096,
            dtype: TuneDType::BF16,
        };
        let json = serde_json::to_string(&key).unwrap();
        assert_eq!(serde_json::from_str::<RowKey>(&json).unwrap(), key);
        assert_eq!(key.to_string(), "d<=768 vec4 rows<=4096 BF16");
    }
}
