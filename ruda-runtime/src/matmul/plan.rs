//! How a row-major matrix product `[.., m, k] x [.., k, n]` over strided operands maps onto one
//! strided-batched GEMM call of a column-major BLAS: pure layout arithmetic, no device.

use core::fmt;

/// One operand of a [`GemmPlan`], as a row-major matrix `rows x cols` per batch entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmOperand {
    /// `false`: element `(i, j)` at `i * ld + j` (rows contiguous); `true`: at `i + j * ld`
    /// (columns contiguous, e.g. the `swap_dims` view of a row-major matrix).
    pub column_major: bool,
    /// The leading dimension, in elements: at least `cols` (row-major) or `rows` (column-major).
    pub ld: usize,
    /// Elements between two batch entries; 0 when the operand is broadcast over the batch.
    pub batch_stride: usize,
}

/// A matrix product as one strided-batched GEMM: `out[b] = lhs[b] x rhs[b]` for `b < batch`,
/// `lhs[b]` is `m x k`, `rhs[b]` is `k x n`, and the output is a fresh row-major
/// `[batch.., m, n]` buffer (`batch * m * n` elements, no gaps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmPlan {
    /// Rows of each product (with the batch folded in when [`GemmPlan::batch`] is 1 and the
    /// right-hand side is shared by every batch entry).
    pub m: usize,
    /// Columns of each product.
    pub n: usize,
    /// The contracted dimension.
    pub k: usize,
    /// Number of products.
    pub batch: usize,
    /// The left-hand side.
    pub lhs: GemmOperand,
    /// The right-hand side.
    pub rhs: GemmOperand,
}

/// Why a matrix product has no [`GemmPlan`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GemmUnsupported {
    /// Not two tensors of one rank >= 2 with matching inner dimensions and broadcastable batch
    /// dimensions: Burn's own matmul reports it.
    Shapes,
    /// An empty output or `k = 0` (nothing to multiply: Burn's matmul fills the zeros).
    Empty,
    /// Some dimension or leading dimension does not fit the 32-bit sizes of a BLAS call.
    TooLarge,
    /// One operand broadcasts over some batch dimensions and not others (`[b, 1, ..]` against
    /// `[1, h, ..]`): no single batch stride describes it.
    MixedBroadcast,
    /// The left-hand side's strides fit no GEMM operand (a copy to row-major fixes it).
    LhsLayout,
    /// The right-hand side's strides fit no GEMM operand (a copy to row-major fixes it).
    RhsLayout,
}

impl fmt::Display for GemmUnsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Shapes => "shapes that do not multiply",
            Self::Empty => "an empty product",
            Self::TooLarge => "sizes beyond 32-bit BLAS arguments",
            Self::MixedBroadcast => "an operand broadcast over only some batch dimensions",
            Self::LhsLayout => "a left-hand side layout no GEMM operand describes",
            Self::RhsLayout => "a right-hand side layout no GEMM operand describes",
        })
    }
}

/// The shape of the product of `lhs` and `rhs` (`[broadcast batch.., m, n]`), checking what
/// depends on the shapes alone: what [`plan`] can still reject is the operands' strides, and a
/// row-major copy of the rejected operand always fixes that.
pub fn output_shape(lhs: &[usize], rhs: &[usize]) -> Result<Vec<usize>, GemmUnsupported> {
    let rank = lhs.len();
    if rank < 2 || rhs.len() != rank {
        return Err(GemmUnsupported::Shapes);
    }
    let (m, k) = (lhs[rank - 2], lhs[rank - 1]);
    let (k2, n) = (rhs[rank - 2], rhs[rank - 1]);
    if k != k2 {
        return Err(GemmUnsupported::Shapes);
    }
    let mut out = Vec::with_capacity(rank);
    for (&a, &b) in lhs[..rank - 2].iter().zip(&rhs[..rank - 2]) {
        out.push(match (a, b) {
            _ if a == b => a,
            (1, b) => b,
            (a, 1) => a,
            _ => return Err(GemmUnsupported::Shapes),
        });
    }
    out.extend([m, n]);
    let batch: usize = out[..rank - 2].iter().product();
    if batch == 0 || m == 0 || n == 0 || k == 0 {
        return Err(GemmUnsupported::Empty);
    }
    let fits = |v: usize| i32::try_from(v).is_ok();
    if ![m, n, k, batch].into_iter().all(fits) || !fits(m.saturating_mul(batch)) {
        return Err(GemmUnsupported::TooLarge);
    }
    for shape in [lhs, rhs] {
        if broadcast_kind(&shape[..rank - 2], &out[..rank - 2]).is_none() {
            return Err(GemmUnsupported::MixedBroadcast);
        }
    }
    Ok(out)
}

/// Plans `lhs x rhs` from both operands' shapes and strides (in elements).
pub fn plan(
    lhs_shape: &[usize],
    lhs_strides: &[usize],
    rhs_shape: &[usize],
    rhs_strides: &[usize],
) -> Result<GemmPlan, GemmUnsupported> {
    let out = output_shape(lhs_shape, rhs_shape)?;
    if lhs_strides.len() != lhs_shape.len() || rhs_strides.len() != rhs_shape.len() {
        return Err(GemmUnsupported::Shapes);
    }
    let rank = out.len();
    let (m, n) = (out[rank - 2], out[rank - 1]);
    let k = lhs_shape[rank - 1];
    let batch_shape = &out[..rank - 2];
    let batch: usize = batch_shape.iter().product();

    let operand = |shape: &[usize], strides: &[usize], rows, cols, error: GemmUnsupported| {
        let matrix =
            matrix_layout(rows, cols, strides[rank - 2], strides[rank - 1]).ok_or(error.clone())?;
        let batch_stride =
            batch_stride(&shape[..rank - 2], &strides[..rank - 2], batch_shape).ok_or(error)?;
        Ok::<_, GemmUnsupported>(GemmOperand {
            batch_stride,
            ..matrix
        })
    };
    let lhs = operand(lhs_shape, lhs_strides, m, k, GemmUnsupported::LhsLayout)?;
    let rhs = operand(rhs_shape, rhs_strides, k, n, GemmUnsupported::RhsLayout)?;
    for side in [lhs, rhs] {
        if i32::try_from(side.ld).is_err() {
            return Err(GemmUnsupported::TooLarge);
        }
    }

    let mut plan = GemmPlan {
        m,
        n,
        k,
        batch,
        lhs,
        rhs,
    };
    // A shared right-hand side (a weight under a batch of rows) and left-hand rows that follow
    // one another across the batch: one tall product instead of `batch` small ones.
    if batch > 1 && rhs.batch_stride == 0 && !lhs.column_major && lhs.batch_stride == m * lhs.ld {
        plan.m = m * batch;
        plan.batch = 1;
    }
    if batch == 1 || plan.batch == 1 {
        plan.lhs.batch_stride = 0;
        plan.rhs.batch_stride = 0;
    }
    Ok(plan)
}

/// The row-major `rows x cols` matrix with strides `(row_stride, col_stride)` as a GEMM operand
/// (batch stride left at 0); `None` when neither its rows nor its columns are contiguous.
fn matrix_layout(
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
) -> Option<GemmOperand> {
    // A size-1 dimension's stride is arbitrary: it never moves.
    let row_major_ld = if rows == 1 { cols } else { row_stride };
    if (cols == 1 || col_stride == 1) && row_major_ld >= cols {
        return Some(GemmOperand {
            column_major: false,
            ld: row_major_ld.max(1),
            batch_stride: 0,
        });
    }
    let column_major_ld = if cols == 1 { rows } else { col_stride };
    if (rows == 1 || row_stride == 1) && column_major_ld >= rows {
        return Some(GemmOperand {
            column_major: true,
            ld: column_major_ld.max(1),
            batch_stride: 0,
        });
    }
    None
}

/// How an operand's batch dimensions relate to the output's: all equal, or all broadcast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BroadcastKind {
    /// Every batch dimension of size > 1 in the output has the same size in the operand.
    Full,
    /// The operand has size 1 in every batch dimension where the output has more.
    Broadcast,
}

fn broadcast_kind(shape: &[usize], out: &[usize]) -> Option<BroadcastKind> {
    let varying = || shape.iter().zip(out).filter(|&(_, &o)| o > 1);
    if varying().all(|(&s, _)| s == 1) {
        Some(BroadcastKind::Broadcast)
    } else if varying().all(|(&s, &o)| s == o) {
        Some(BroadcastKind::Full)
    } else {
        None
    }
}

/// The single stride that walks the operand's batch entries in the order of the output's
/// flattened batch index, or `None` when the batch dimensions do not collapse into one.
fn batch_stride(shape: &[usize], strides: &[usize], out: &[usize]) -> Option<usize> {
    match broadcast_kind(shape, out)? {
        BroadcastKind::Broadcast => Some(0),
        BroadcastKind::Full => {
            // Dimensions of output size 1 never move; the others must nest with no gaps:
            // stride[outer] == stride[inner] * size[inner].
            let mut dims = out
                .iter()
                .zip(strides)
                .filter(|&(&o, _)| o > 1)
                .map(|(&o, &s)| (o, s))
                .rev();
            let Some((mut inner_size, innermost)) = dims.next() else {
                return Some(0);
            };
            let mut inner_stride = innermost;
            for (size, stride) in dims {
                if stride != inner_stride * inner_size {
                    return None;
                }
                inner_size = size;
                inner_stride = stride;
            }
            Some(innermost)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contiguous(shape: &[usize]) -> Vec<usize> {
        let mut strides = vec![1; shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * shape[i + 1];
        }
        strides
    }

    fn swap_last(shape: &[usize], strides: &[usize]) -> (Vec<usize>, Vec<usize>) {
        let (mut shape, mut strides) = (shape.to_vec(), strides.to_vec());
        let r = shape.len();
        shape.swap(r - 2, r - 1);
        strides.swap(r - 2, r - 1);
        (shape, strides)
    }

    #[test]
    fn row_major_2d() {
        let p = plan(&[4, 3], &[3, 1], &[3, 5], &[5, 1]).unwrap();
        assert_eq!((p.m, p.n, p.k, p.batch), (4, 5, 3, 1));
        assert_eq!(
            p.lhs,
            GemmOperand {
                column_major: false,
                ld: 3,
                batch_stride: 0
            }
        );
        assert_eq!(
            p.rhs,
            GemmOperand {
                column_major: false,
                ld: 5,
                batch_stride: 0
            }
        );
    }

    #[test]
    fn transposed_views_are_column_major() {
        // lhs = x.swap_dims(0, 1) of a row-major [3, 4]: [4, 3] with strides [1, 4].
        let (ls, lt) = swap_last(&[3, 4], &contiguous(&[3, 4]));
        let (rs, rt) = swap_last(&[5, 3], &contiguous(&[5, 3]));
        let p = plan(&ls, &lt, &rs, &rt).unwrap();
        assert_eq!(
            p.lhs,
            GemmOperand {
                column_major: true,
                ld: 4,
                batch_stride: 0
            }
        );
        assert_eq!(
            p.rhs,
            GemmOperand {
                column_major: true,
                ld: 3,
                batch_stride: 0
            }
        );
    }

    #[test]
    fn batched_with_gaps_between_rows_uses_the_row_stride() {
        // A [2, 4, 3] slice of a [2, 4, 8] tensor: rows 8 apart, batches 32 apart.
        let p = plan(&[2, 4, 3], &[32, 8, 1], &[2, 3, 5], &contiguous(&[2, 3, 5])).unwrap();
        assert_eq!(p.batch, 2);
        assert_eq!(
            p.lhs,
            GemmOperand {
                column_major: false,
                ld: 8,
                batch_stride: 32
            }
        );
        assert_eq!(p.rhs.batch_stride, 15);
    }

    #[test]
    fn shared_weight_folds_the_batch_into_rows() {
        // linear: [32, 256, 512] x [1, 512, 2048].
        let p = plan(
            &[32, 256, 512],
            &contiguous(&[32, 256, 512]),
            &[1, 512, 2048],
            &contiguous(&[1, 512, 2048]),
        )
        .unwrap();
        assert_eq!((p.m, p.n, p.k, p.batch), (32 * 256, 2048, 512, 1));
        assert_eq!(p.rhs.batch_stride, 0);
    }

    #[test]
    fn shared_weight_with_transposed_rows_stays_batched() {
        let (ls, lt) = swap_last(&[2, 3, 4], &contiguous(&[2, 3, 4]));
        let p = plan(&ls, &lt, &[1, 3, 5], &contiguous(&[1, 3, 5])).unwrap();
        assert_eq!((p.m, p.batch), (4, 2));
        assert_eq!(
            p.lhs,
            GemmOperand {
                column_major: true,
                ld: 4,
                batch_stride: 12
            }
        );
        assert_eq!(p.rhs.batch_stride, 0);
    }

    #[test]
    fn broadcast_lhs_has_batch_stride_zero() {
        let p = plan(
            &[1, 4, 3],
            &contiguous(&[1, 4, 3]),
            &[6, 3, 5],
            &contiguous(&[6, 3, 5]),
        )
        .unwrap();
        assert_eq!(p.batch, 6);
        assert_eq!(p.lhs.batch_stride, 0);
        assert_eq!(p.rhs.batch_stride, 15);
    }

    #[test]
    fn expanded_batch_with_stride_zero_is_a_broadcast() {
        // `expand` leaves stride 0 on a batch dimension of size > 1.
        let p = plan(&[6, 4, 3], &[0, 3, 1], &[6, 3, 5], &contiguous(&[6, 3, 5])).unwrap();
        assert_eq!(p.lhs.batch_stride, 0);
        assert_eq!(p.batch, 6);
    }

    #[test]
    fn heads_swapped_in_front_of_the_sequence_do_not_collapse() {
        // Multi-head attention: [b, s, h, dh] viewed as [b, h, s, dh] (swap_dims(1, 2)).
        let (b, s, h, dh) = (2, 5, 3, 4);
        let base = contiguous(&[b, s, h, dh]);
        let shape = [b, h, s, dh];
        let strides = [base[0], base[2], base[1], base[3]];
        let (kt_shape, kt_strides) = swap_last(&shape, &strides);
        assert_eq!(
            plan(&shape, &strides, &kt_shape, &kt_strides),
            Err(GemmUnsupported::LhsLayout)
        );
        // Once the query is copied row-major, only the key's layout is left.
        assert_eq!(
            plan(&shape, &contiguous(&shape), &kt_shape, &kt_strides),
            Err(GemmUnsupported::RhsLayout)
        );
        let (ct_shape, ct_strides) = swap_last(&shape, &contiguous(&shape));
        let p = plan(&shape, &contiguous(&shape), &ct_shape, &ct_strides).unwrap();
        assert_eq!((p.m, p.n, p.k, p.batch), (s, s, dh, b * h));
        assert_eq!(
            p.rhs,
            GemmOperand {
                column_major: true,
                ld: dh,
                batch_stride: s * dh
            }
        );
    }

    #[test]
    fn size_one_dimensions_accept_any_stride() {
        // A single row and a single column, with strides that would be invalid elsewhere.
        let p = plan(&[1, 3], &[999, 1], &[3, 1], &[7, 42]).unwrap();
        assert_eq!(p.lhs.ld, 3);
        assert!(!p.rhs.column_major);
        assert_eq!(p.rhs.ld, 7);
        // A column vector stored with a column stride: row-major with ld 1.
        let p = plan(&[3, 3], &[3, 1], &[3, 1], &[1, 0]).unwrap();
        assert_eq!(
            p.rhs,
            GemmOperand {
                column_major: false,
                ld: 1,
                batch_stride: 0
            }
        );
    }

    #[test]
    fn neither_rows_nor_columns_contiguous_is_rejected() {
        assert_eq!(
            plan(&[4, 3], &[6, 2], &[3, 5], &[5, 1]),
            Err(GemmUnsupported::LhsLayout)
        );
        assert_eq!(
            plan(&[4, 3], &[3, 1], &[3, 5], &[10, 2]),
            Err(GemmUnsupported::RhsLayout)
        );
        // Broadcast rows (stride 0) are no leading dimension.
        assert_eq!(
            plan(&[4, 3], &[0, 1], &[3, 5], &[5, 1]),
            Err(GemmUnsupported::LhsLayout)
        );
    }

    #[test]
    fn shape_problems_are_reported_before_strides() {
        let s = |shape: &[usize]| contiguous(shape);
        assert_eq!(
            plan(&[4, 3], &s(&[4, 3]), &[4, 5], &s(&[4, 5])),
            Err(GemmUnsupported::Shapes)
        );
        assert_eq!(plan(&[3], &[1], &[3], &[1]), Err(GemmUnsupported::Shapes));
        assert_eq!(
            plan(&[2, 4, 3], &s(&[2, 4, 3]), &[3, 3, 5], &s(&[3, 3, 5])),
            Err(GemmUnsupported::Shapes)
        );
        assert_eq!(
            plan(&[0, 3], &s(&[0, 3]), &[3, 5], &s(&[3, 5])),
            Err(GemmUnsupported::Empty)
        );
        assert_eq!(
            plan(&[4, 0], &[0, 1], &[0, 5], &[5, 1]),
            Err(GemmUnsupported::Empty)
        );
        assert_eq!(
            output_shape(&[2, 1, 4, 3], &[1, 6, 3, 5]),
            Err(GemmUnsupported::MixedBroadcast)
        );
        assert_eq!(
            output_shape(&[2, 6, 4, 3], &[1, 1, 3, 5]),
            Ok(vec![2, 6, 4, 5])
        );
        assert_eq!(
            output_shape(&[1 << 31, 2], &[2, 2]),
            Err(GemmUnsupported::TooLarge)
        );
    }
}
