//! How a row-major matrix product `[.., m, k] x [.., k, n]` over strided operands maps onto one
//! batched GEMM call of a column-major BLAS: pure layout arithmetic, no device. The batch is
//! walked by one stride per operand where the batch dimensions collapse into one
//! ([`BatchLayout::Strided`]), and by one pointer per batch entry where they do not
//! ([`BatchLayout::Nested`]: multi-head attention's `[batch, heads, seq, d]` views of
//! `[batch, seq, heads, d]`), so that no operand is copied for its batch layout. The output is
//! row-major, or laid out in an operand's memory order where [`output_strides`] says so
//! (attention's products whose results Burn swaps back and reshapes at once).

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
    /// Unused (0) under [`BatchLayout::Nested`], whose strides say where each entry is.
    pub batch_stride: usize,
}

/// The most batch dimensions (of size > 1) a [`BatchLayout::Nested`] plan walks.
pub const MAX_NESTED_BATCH_DIMS: usize = 6;

/// How a [`GemmPlan`] finds its batch entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchLayout {
    /// Batch entry `b` of each operand is `b * batch_stride` elements from its start: one
    /// strided-batched call.
    Strided,
    /// The batch dimensions do not collapse into one stride: entry `b`, at index
    /// `(i_0, .., i_{len-1})` of `sizes` (outermost first, row-major), starts `sum i_d *
    /// lhs[d]` elements into the left-hand side and `sum i_d * rhs[d]` into the right-hand
    /// side (0 where that operand is broadcast) and `sum i_d * out[d]` into the output. One
    /// batched call on per-entry pointers ([`GemmPlan::entry_offsets`]).
    Nested {
        /// Number of batch dimensions in use.
        len: usize,
        /// Their sizes, outermost first; `sizes[..len]` multiply to [`GemmPlan::batch`].
        sizes: [usize; MAX_NESTED_BATCH_DIMS],
        /// The left-hand side's stride along each, in elements.
        lhs: [usize; MAX_NESTED_BATCH_DIMS],
        /// The right-hand side's stride along each, in elements.
        rhs: [usize; MAX_NESTED_BATCH_DIMS],
        /// The output's stride along each, in elements.
        out: [usize; MAX_NESTED_BATCH_DIMS],
    },
}

/// A matrix product as one batched GEMM: `out[b] = lhs[b] x rhs[b]` for `b < batch`,
/// `lhs[b]` is `m x k`, `rhs[b]` is `k x n`, and the output is a fresh `[batch.., m, n]`
/// buffer of `batch * m * n` elements with no gaps: row-major under [`BatchLayout::Strided`],
/// each entry laid out as [`GemmPlan::out`] says under [`BatchLayout::Nested`].
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
    /// The output: row-major with `ld == n` and batch stride `m * n` unless it follows an
    /// operand's memory order ([`output_strides`]), which only a nested plan writes.
    pub out: GemmOperand,
    /// Where each batch entry of the operands and the output starts.
    pub batch_layout: BatchLayout,
}

impl GemmPlan {
    /// Element offsets of every batch entry, in batch order: `(lhs, rhs, out)` for entry `b`.
    pub fn entry_offsets(&self) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        (0..self.batch).map(move |b| match self.batch_layout {
            BatchLayout::Strided => (
                b * self.lhs.batch_stride,
                b * self.rhs.batch_stride,
                b * self.out.batch_stride,
            ),
            BatchLayout::Nested {
                len,
                sizes,
                lhs,
                rhs,
                out,
            } => {
                let (mut rest, mut l, mut r, mut o) = (b, 0, 0, 0);
                for d in (0..len).rev() {
                    let i = rest % sizes[d];
                    rest /= sizes[d];
                    l += i * lhs[d];
                    r += i * rhs[d];
                    o += i * out[d];
                }
                (l, r, o)
            }
        })
    }
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
    /// The output strides asked for ([`plan_into`]) are not a layout a plan writes (a
    /// row-major output always is).
    OutputLayout,
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
            Self::OutputLayout => "an output layout no plan writes",
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

/// Plans `lhs x rhs` from both operands' shapes and strides (in elements), into a row-major
/// output.
pub fn plan(
    lhs_shape: &[usize],
    lhs_strides: &[usize],
    rhs_shape: &[usize],
    rhs_strides: &[usize],
) -> Result<GemmPlan, GemmUnsupported> {
    plan_with(lhs_shape, lhs_strides, rhs_shape, rhs_strides, None, true)
}

/// [`plan`] restricted to [`BatchLayout::Strided`]: an operand whose batch dimensions do not
/// collapse into one stride is a layout error (a copy fixes it), as before nested batches.
pub fn plan_strided(
    lhs_shape: &[usize],
    lhs_strides: &[usize],
    rhs_shape: &[usize],
    rhs_strides: &[usize],
) -> Result<GemmPlan, GemmUnsupported> {
    plan_with(lhs_shape, lhs_strides, rhs_shape, rhs_strides, None, false)
}

/// [`plan`] into an output of strides `out_strides`: row-major ones, or those
/// [`output_strides`] gives (dense, rows or columns contiguous). A layout other than
/// row-major is walked per entry ([`BatchLayout::Nested`]); where that cannot be (more batch
/// dimensions than a nested plan walks, or strides that are not such a layout) the result is
/// [`GemmUnsupported::OutputLayout`], and a row-major output always has a plan.
pub fn plan_into(
    lhs_shape: &[usize],
    lhs_strides: &[usize],
    rhs_shape: &[usize],
    rhs_strides: &[usize],
    out_strides: &[usize],
) -> Result<GemmPlan, GemmUnsupported> {
    plan_with(
        lhs_shape,
        lhs_strides,
        rhs_shape,
        rhs_strides,
        Some(out_strides),
        true,
    )
}

/// The strides to give the output of `lhs x rhs` (shape `out`), from the operands' shapes and
/// strides: the right-hand side's where it has the output's shape and is a dense layout other
/// than row-major whose rows are contiguous; else, with `transposed`, the left-hand side's
/// where it has the output's shape and is a dense layout whose columns, not rows, are
/// contiguous (a transposed view); else row-major. Dense: a permutation of row-major storage,
/// such as multi-head attention's `[batch, heads, seq, d]` view of `[batch, seq, heads, d]`.
///
/// Why: in attention, `weights x value` and the gradients of the value and the query are
/// products whose right-hand side is such a view, and the key's gradient (Burn's autodiff
/// computes it as that of `key^T`: `query^T x dscores`) one whose left-hand side is its
/// transpose. Burn transposes, swaps (`swap_dims(1, 2)`) and reshapes each result to
/// `[batch, seq, d_model]` at once: written in the operand's order, the swapped result is
/// row-major and the reshape is free, where a row-major product output costs a copy kernel
/// per reshape (four per attention layer and step). Other products keep row-major outputs:
/// their consumers (softmax over the last dimension, element-wise work) read rows.
pub fn output_strides(
    out: &[usize],
    (lhs_shape, lhs_strides): (&[usize], &[usize]),
    (rhs_shape, rhs_strides): (&[usize], &[usize]),
    transposed: bool,
) -> Vec<usize> {
    let rank = out.len();
    let rows_contiguous = |strides: &[usize]| out[rank - 1] == 1 || strides[rank - 1] == 1;
    dense_order(out, rhs_shape, rhs_strides)
        .filter(|strides| rows_contiguous(strides))
        .or_else(|| {
            dense_order(out, lhs_shape, lhs_strides)
                .filter(|strides| transposed && !rows_contiguous(strides))
        })
        .unwrap_or_else(|| row_major_strides(out))
}

/// `strides` for a tensor of shape `out`, when `shape` is `out` (rank 3 or more) and `strides`
/// are a dense layout (no two elements overlap, none skipped) other than row-major whose
/// matrices have contiguous rows or columns, with each size-1 dimension given the stride a
/// row-major layout of the dimensions inside it would have.
fn dense_order(out: &[usize], shape: &[usize], strides: &[usize]) -> Option<Vec<usize>> {
    let rank = out.len();
    if rank < 3 || shape != out || strides.len() != rank {
        return None;
    }
    // Ordered by stride, each dimension of size > 1 steps over exactly the elements of those
    // inside it.
    let mut dims: Vec<(usize, usize)> = (0..rank)
        .filter(|&d| out[d] > 1)
        .map(|d| (strides[d], out[d]))
        .collect();
    dims.sort_unstable_by_key(|&(stride, _)| core::cmp::Reverse(stride));
    let mut inner = 1;
    for &(stride, size) in dims.iter().rev() {
        if stride != inner {
            return None;
        }
        inner *= size;
    }
    let mut strides = strides.to_vec();
    for d in (0..rank).rev() {
        if out[d] == 1 {
            strides[d] = if d + 1 < rank {
                strides[d + 1] * out[d + 1]
            } else {
                1
            };
        }
    }
    let matrix = matrix_layout(
        out[rank - 2],
        out[rank - 1],
        strides[rank - 2],
        strides[rank - 1],
    );
    (strides != row_major_strides(out) && matrix.is_some()).then_some(strides)
}

/// Row-major strides of `shape`, in elements.
fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    strides
}

fn plan_with(
    lhs_shape: &[usize],
    lhs_strides: &[usize],
    rhs_shape: &[usize],
    rhs_strides: &[usize],
    out_strides: Option<&[usize]>,
    nested: bool,
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

    let row_major = row_major_strides(&out);
    let out_strides = out_strides.unwrap_or(&row_major);
    let out_row_major = out_strides.len() == rank
        && (0..rank).all(|d| out[d] == 1 || out_strides[d] == row_major[d]);
    let out_matrix = if out_row_major {
        GemmOperand {
            column_major: false,
            ld: n,
            batch_stride: m * n,
        }
    } else {
        if dense_order(&out, &out, out_strides).as_deref() != Some(out_strides) {
            return Err(GemmUnsupported::OutputLayout);
        }
        matrix_layout(m, n, out_strides[rank - 2], out_strides[rank - 1])
            .ok_or(GemmUnsupported::OutputLayout)?
    };
    if i32::try_from(out_matrix.ld).is_err() {
        return Err(GemmUnsupported::TooLarge);
    }

    let matrix = |strides: &[usize], rows, cols, error: GemmUnsupported| {
        matrix_layout(rows, cols, strides[rank - 2], strides[rank - 1]).ok_or(error)
    };
    let mut lhs = matrix(lhs_strides, m, k, GemmUnsupported::LhsLayout)?;
    let mut rhs = matrix(rhs_strides, k, n, GemmUnsupported::RhsLayout)?;
    for side in [lhs, rhs] {
        if i32::try_from(side.ld).is_err() {
            return Err(GemmUnsupported::TooLarge);
        }
    }
    let strides_of = |shape: &[usize], strides: &[usize]| {
        batch_stride(&shape[..rank - 2], &strides[..rank - 2], batch_shape)
    };
    let walk_nested = || {
        nested_batch(
            (lhs_shape, lhs_strides),
            (rhs_shape, rhs_strides),
            out_strides,
            batch_shape,
        )
    };
    let batch_layout = match (
        strides_of(lhs_shape, lhs_strides),
        strides_of(rhs_shape, rhs_strides),
    ) {
        (Some(l), Some(r)) if out_row_major => {
            (lhs.batch_stride, rhs.batch_stride) = (l, r);
            BatchLayout::Strided
        }
        (Some(_), Some(_)) => walk_nested().ok_or(GemmUnsupported::OutputLayout)?,
        (l, _) => {
            let error = if l.is_none() {
                GemmUnsupported::LhsLayout
            } else {
                GemmUnsupported::RhsLayout
            };
            if !nested {
                return Err(error);
            }
            walk_nested().ok_or(error)?
        }
    };

    let mut plan = GemmPlan {
        m,
        n,
        k,
        batch,
        lhs,
        rhs,
        out: out_matrix,
        batch_layout,
    };
    // A shared right-hand side (a weight under a batch of rows) and left-hand rows that follow
    // one another across the batch: one tall product instead of `batch` small ones.
    if batch > 1
        && batch_layout == BatchLayout::Strided
        && rhs.batch_stride == 0
        && !lhs.column_major
        && lhs.batch_stride == m * lhs.ld
    {
        plan.m = m * batch;
        plan.batch = 1;
    }
    if batch == 1 || plan.batch == 1 {
        plan.lhs.batch_stride = 0;
        plan.rhs.batch_stride = 0;
    }
    Ok(plan)
}

/// The batch dimensions of size > 1 with each operand's and the output's stride along them
/// (0 where an operand is broadcast), when they fit [`MAX_NESTED_BATCH_DIMS`].
fn nested_batch(
    (lhs_shape, lhs_strides): (&[usize], &[usize]),
    (rhs_shape, rhs_strides): (&[usize], &[usize]),
    out_strides: &[usize],
    out: &[usize],
) -> Option<BatchLayout> {
    let mut layout = (
        [0; MAX_NESTED_BATCH_DIMS],
        [0; MAX_NESTED_BATCH_DIMS],
        [0; MAX_NESTED_BATCH_DIMS],
    );
    let mut sizes = [0; MAX_NESTED_BATCH_DIMS];
    let mut len = 0;
    for (d, &size) in out.iter().enumerate().filter(|&(_, &size)| size > 1) {
        if len == MAX_NESTED_BATCH_DIMS {
            return None;
        }
        let stride = |shape: &[usize], strides: &[usize]| {
            if shape[d] == 1 { 0 } else { strides[d] }
        };
        sizes[len] = size;
        layout.0[len] = stride(lhs_shape, lhs_strides);
        layout.1[len] = stride(rhs_shape, rhs_strides);
        layout.2[len] = out_strides[d];
        len += 1;
    }
    Some(BatchLayout::Nested {
        len,
        sizes,
        lhs: layout.0,
        rhs: layout.1,
        out: layout.2,
    })
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
    fn heads_swapped_in_front_of_the_sequence_are_walked_per_entry() {
        // Multi-head attention: [b, s, h, dh] viewed as [b, h, s, dh] (swap_dims(1, 2)).
        let (b, s, h, dh) = (2, 5, 3, 4);
        let base = contiguous(&[b, s, h, dh]);
        let shape = [b, h, s, dh];
        let strides = [base[0], base[2], base[1], base[3]];
        let (kt_shape, kt_strides) = swap_last(&shape, &strides);
        let p = plan(&shape, &strides, &kt_shape, &kt_strides).unwrap();
        assert_eq!((p.m, p.n, p.k, p.batch), (s, s, dh, b * h));
        // Rows of the query are h * dh apart; the key read transposed is column-major.
        assert_eq!((p.lhs.column_major, p.lhs.ld), (false, h * dh));
        assert_eq!((p.rhs.column_major, p.rhs.ld), (true, h * dh));
        let mut sizes = [0; MAX_NESTED_BATCH_DIMS];
        let mut lhs = [0; MAX_NESTED_BATCH_DIMS];
        let mut out = [0; MAX_NESTED_BATCH_DIMS];
        sizes[..2].copy_from_slice(&[b, h]);
        lhs[..2].copy_from_slice(&[s * h * dh, dh]);
        out[..2].copy_from_slice(&[h * s * s, s * s]);
        assert_eq!(
            p.batch_layout,
            BatchLayout::Nested {
                len: 2,
                sizes,
                lhs,
                rhs: lhs,
                out
            }
        );
        assert_eq!(
            p.out,
            GemmOperand {
                column_major: false,
                ld: s,
                batch_stride: s * s
            }
        );
        // Without nested batches the query is the first operand to copy.
        assert_eq!(
            plan_strided(&shape, &strides, &kt_shape, &kt_strides),
            Err(GemmUnsupported::LhsLayout)
        );
        assert_eq!(
            plan_strided(&shape, &contiguous(&shape), &kt_shape, &kt_strides),
            Err(GemmUnsupported::RhsLayout)
        );
        let offsets: Vec<_> = p.entry_offsets().map(|(l, _, o)| (l, o)).collect();
        assert_eq!(offsets[1], (dh, s * s));
        assert_eq!(offsets[h], (s * h * dh, h * s * s));
        // Row-major operands keep one strided call.
        let (ct_shape, ct_strides) = swap_last(&shape, &contiguous(&shape));
        let p = plan(&shape, &contiguous(&shape), &ct_shape, &ct_strides).unwrap();
        assert_eq!(p.batch_layout, BatchLayout::Strided);
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
    fn more_batch_dimensions_than_a_nested_plan_walks_are_a_layout_error() {
        let mut shape = vec![2; MAX_NESTED_BATCH_DIMS + 1];
        shape.extend([3, 3]);
        let rank = shape.len();
        let mut strides = contiguous(&shape);
        // Swap the two outermost batch dimensions' strides: no single batch stride.
        strides.swap(0, 1);
        assert_eq!(
            plan(&shape, &strides, &shape, &contiguous(&shape)),
            Err(GemmUnsupported::LhsLayout)
        );
        assert_eq!(rank, MAX_NESTED_BATCH_DIMS + 3);
    }

    /// Runs `plan` the way a column-major BLAS runs it (per-entry offsets, leading dimensions,
    /// transposes), over the operands' flat storage.
    fn run_plan(p: &GemmPlan, lhs: &[f64], rhs: &[f64]) -> Vec<f64> {
        let at = |op: &GemmOperand, base: usize, i: usize, j: usize| {
            base + if op.column_major {
                i + j * op.ld
            } else {
                i * op.ld + j
            }
        };
        let mut out = vec![f64::NAN; p.batch * p.m * p.n];
        for (l, r, o) in p.entry_offsets() {
            for i in 0..p.m {
                for j in 0..p.n {
                    out[at(&p.out, o, i, j)] = (0..p.k)
                        .map(|t| lhs[at(&p.lhs, l, i, t)] * rhs[at(&p.rhs, r, t, j)])
                        .sum();
                }
            }
        }
        out
    }

    /// The product by definition, reading each operand through its shape and strides.
    fn reference(
        out: &[usize],
        (ls, lt, lhs): (&[usize], &[usize], &[f64]),
        (rs, rt, rhs): (&[usize], &[usize], &[f64]),
    ) -> Vec<f64> {
        let rank = out.len();
        let total: usize = out.iter().product();
        let index = |shape: &[usize], strides: &[usize], idx: &[usize]| -> usize {
            idx.iter()
                .zip(shape)
                .zip(strides)
                .map(|((&i, &size), &st)| if size == 1 { 0 } else { i * st })
                .sum()
        };
        (0..total)
            .map(|flat| {
                let mut idx = vec![0; rank];
                let mut rest = flat;
                for d in (0..rank).rev() {
                    idx[d] = rest % out[d];
                    rest /= out[d];
                }
                (0..ls[rank - 1])
                    .map(|t| {
                        let mut li = idx.clone();
                        li[rank - 1] = t;
                        let mut ri = idx.clone();
                        ri[rank - 2] = t;
                        lhs[index(ls, lt, &li)] * rhs[index(rs, rt, &ri)]
                    })
                    .sum()
            })
            .collect()
    }

    /// The view of row-major `storage` whose dimension `i` is storage dimension `perm[i]`.
    fn permuted(storage: &[usize], perm: &[usize]) -> (Vec<usize>, Vec<usize>) {
        let strides = contiguous(storage);
        let shape = perm.iter().map(|&p| storage[p]).collect();
        let strides = perm.iter().map(|&p| strides[p]).collect();
        (shape, strides)
    }

    #[test]
    fn every_plan_computes_the_product() {
        // Operands as permuted views of row-major storage: attention's layouts, transposes,
        // broadcast batches, and permutations that leave the batch nested.
        let (b, s, h, d) = (2, 3, 4, 5);
        let cases = [
            // q [b, h, s, d] x k^T [b, h, d, s], both views of [b, s, h, d].
            (
                permuted(&[b, s, h, d], &[0, 2, 1, 3]),
                permuted(&[b, s, h, d], &[0, 2, 3, 1]),
            ),
            // weights [b, h, s, s] (row-major) x v [b, h, s, d] (a view of [b, s, h, d]).
            (
                (vec![b, h, s, s], contiguous(&[b, h, s, s])),
                permuted(&[b, s, h, d], &[0, 2, 1, 3]),
            ),
            // the backward's q^T: [b, h, d, s] views.
            (
                permuted(&[b, s, h, d], &[0, 2, 3, 1]),
                (vec![b, h, s, s], contiguous(&[b, h, s, s])),
            ),
            // batch dimensions in reverse order of storage.
            (
                permuted(&[h, b, s, d], &[1, 0, 2, 3]),
                (vec![b, h, d, s], contiguous(&[b, h, d, s])),
            ),
            // a broadcast left-hand side against a nested right-hand side.
            (
                (vec![1, 1, s, d], contiguous(&[1, 1, s, d])),
                permuted(&[b, d, h, s], &[0, 2, 1, 3]),
            ),
            // plain strided batches.
            (
                (vec![b, h, s, d], contiguous(&[b, h, s, d])),
                (vec![b, h, d, s], contiguous(&[b, h, d, s])),
            ),
        ];
        let mut nested = 0;
        for ((ls, lt), (rs, rt)) in cases {
            let size = |shape: &[usize]| shape.iter().product::<usize>();
            let lhs: Vec<f64> = (0..size(&ls)).map(|i| (i as f64 * 0.37).sin()).collect();
            let rhs: Vec<f64> = (0..size(&rs)).map(|i| (i as f64 * 0.91).cos()).collect();
            let p = plan(&ls, &lt, &rs, &rt).unwrap();
            nested += usize::from(p.batch_layout != BatchLayout::Strided);
            let out = output_shape(&ls, &rs).unwrap();
            let want = reference(&out, (&ls, &lt, &lhs), (&rs, &rt, &rhs));
            let got = run_plan(&p, &lhs, &rhs);
            let worst = got
                .iter()
                .zip(&want)
                .map(|(g, w)| (g - w).abs())
                .fold(0.0, f64::max);
            assert!(
                worst < 1e-12,
                "{ls:?}/{lt:?} x {rs:?}/{rt:?}: {p:?} differs by {worst}"
            );
        }
        assert_eq!(nested, 5, "the first five cases need per-entry pointers");
    }

    #[test]
    fn outputs_in_an_operands_order_compute_the_product() {
        // Attention's products with a [b, h, s, d] view of [b, s, h, d] (or its transpose) of
        // the output's shape: the output is written in that order, every element once.
        let (b, s, h, d) = (2, 3, 4, 5);
        let weights = (vec![b, h, s, s], contiguous(&[b, h, s, s]));
        let heads = permuted(&[b, s, h, d], &[0, 2, 1, 3]);
        let heads_t = permuted(&[b, s, h, d], &[0, 2, 3, 1]);
        let cases = [
            // weights x value (the forward's context; also the query's gradient: dscores x key).
            (weights.clone(), heads.clone(), true),
            // weights^T x dcontext (the value's gradient).
            (swap_last(&weights.0, &weights.1), heads.clone(), true),
            // query^T x dscores (the gradient of key^T): the left-hand side's order, whose
            // matrices are column-major.
            (heads_t.clone(), weights.clone(), true),
            // batch dimensions stored in the other order.
            (
                weights.clone(),
                permuted(&[h, b, s, d], &[1, 0, 2, 3]),
                true,
            ),
            // a single batch entry: the size-1 dimension's stride is normalised.
            (
                (vec![1, h, s, s], contiguous(&[1, h, s, s])),
                permuted(&[1, s, h, d], &[0, 2, 1, 3]),
                true,
            ),
            // q x k^T with s == d: the scores stay row-major (softmax reads their rows).
            (
                permuted(&[b, d, h, d], &[0, 2, 1, 3]),
                permuted(&[b, d, h, d], &[0, 2, 3, 1]),
                false,
            ),
            // a row-major right-hand side: a row-major output.
            (
                weights.clone(),
                (vec![b, h, s, d], contiguous(&[b, h, s, d])),
                false,
            ),
        ];
        for ((ls, lt), (rs, rt), follows) in cases {
            let out = output_shape(&ls, &rs).unwrap();
            let strides = output_strides(&out, (&ls, &lt), (&rs, &rt), true);
            // A transposed left-hand side is followed only when asked for.
            let plain = output_strides(&out, (&ls, &lt), (&rs, &rt), false);
            let transposed_lhs =
                strides != contiguous(&out) && dense_order(&out, &rs, &rt).is_none();
            assert_eq!(plain == strides, !transposed_lhs);
            assert_eq!(
                strides != contiguous(&out),
                follows,
                "{ls:?}/{lt:?} x {rs:?}/{rt:?}: output strides {strides:?}"
            );
            let size = |shape: &[usize]| shape.iter().product::<usize>();
            let lhs: Vec<f64> = (0..size(&ls)).map(|i| (i as f64 * 0.37).sin()).collect();
            let rhs: Vec<f64> = (0..size(&rs)).map(|i| (i as f64 * 0.91).cos()).collect();
            let p = plan_into(&ls, &lt, &rs, &rt, &strides).unwrap();
            if follows {
                assert!(matches!(p.batch_layout, BatchLayout::Nested { .. }));
            }
            let want = reference(&out, (&ls, &lt, &lhs), (&rs, &rt, &rhs));
            let got = run_plan(&p, &lhs, &rhs);
            assert!(
                got.iter().all(|v| !v.is_nan()),
                "{p:?} left elements unwritten"
            );
            // Element `flat` (row-major order of the output's shape) lives at its strides.
            for (flat, w) in want.iter().enumerate() {
                let (mut rest, mut at) = (flat, 0);
                for dim in (0..out.len()).rev() {
                    at += (rest % out[dim]) * strides[dim];
                    rest /= out[dim];
                }
                assert!(
                    (got[at] - w).abs() < 1e-12,
                    "{ls:?}/{lt:?} x {rs:?}/{rt:?} into {strides:?}: element {flat}"
                );
            }
        }
    }

    #[test]
    fn only_dense_operands_of_the_output_shape_are_followed() {
        let shape = [2, 4, 3, 5];
        let row_major = contiguous(&shape);
        let square = (vec![2, 4, 3, 3], contiguous(&[2, 4, 3, 3]));
        let rhs_order = |strides: &[usize]| {
            output_strides(&shape, (&square.0, &square.1), (&shape, strides), true)
        };
        // The heads view of [2, 3, 4, 5] on the right: followed.
        let heads = [60, 5, 20, 1];
        assert_eq!(rhs_order(&heads), heads.to_vec());
        // A broadcast dimension (stride 0) overlaps, a slice leaves gaps: row-major.
        assert_eq!(rhs_order(&[0, 5, 20, 1]), row_major);
        assert_eq!(rhs_order(&[120, 5, 20, 1]), row_major);
        // A right-hand side with columns contiguous instead of rows: row-major.
        assert_eq!(rhs_order(&[60, 15, 1, 3]), row_major);
        // On the left the order is followed only where the columns are contiguous.
        let wide = (vec![2, 4, 5, 5], contiguous(&[2, 4, 5, 5]));
        let lhs_order =
            |strides: &[usize]| output_strides(&shape, (&shape, strides), (&wide.0, &wide.1), true);
        assert_eq!(lhs_order(&[60, 15, 1, 3]), vec![60, 15, 1, 3]);
        assert_eq!(
            output_strides(&shape, (&shape, &[60, 15, 1, 3]), (&wide.0, &wide.1), false),
            row_major
        );
        assert_eq!(lhs_order(&heads), row_major);
        // Another shape than the output's, or a matrix without batch dimensions: not dense
        // orders of the output.
        assert_eq!(dense_order(&shape, &[2, 4, 3, 1], &[12, 1, 4, 1]), None);
        assert_eq!(dense_order(&[3, 5], &[3, 5], &[1, 3]), None);
        // A layout no plan writes is refused; a row-major output always has a plan.
        assert_eq!(
            plan_into(&square.0, &square.1, &shape, &heads, &[0, 5, 20, 1]),
            Err(GemmUnsupported::OutputLayout)
        );
        assert_eq!(
            plan_into(&square.0, &square.1, &shape, &heads, &row_major),
            plan(&square.0, &square.1, &shape, &heads)
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
