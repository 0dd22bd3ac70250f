//! Host side of the forward pass: route (rows, columns, or `dim` moved last), plan, launch.

use cubecl::{client::ComputeClient, prelude::*};

use super::{
    Choice, Kind, Variant,
    kernels::{
        columns::softmax_forward_columns,
        pipelined::softmax_forward_pipelined,
        rows::{softmax_forward_looped, softmax_forward_registers},
        unit::softmax_forward_unit,
    },
    layout::{move_back, move_last},
    plan::{ColumnsPlan, Pass},
    validate::check_forward,
};
use crate::layout::{address_type, array_arg, into_contiguous, needs_copy};
use crate::tensor_buffer::TensorBuffer;

/// The forward pass (arguments checked again: the entry points and the tuner's candidates all
/// come here). Returns an error, before anything is launched, only for a strict candidate that
/// cannot run the shape.
pub(crate) fn forward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    input: TensorBuffer,
    dim: usize,
    kind: Kind,
    choice: Choice,
) -> Result<TensorBuffer, String> {
    let problem = check_forward(kind, &input.shape, input.dtype, dim);
    let out = TensorBuffer::empty(client, input.shape.clone(), input.dtype);
    let n = problem.num_elements();
    if n == 0 {
        return Ok(out);
    }
    let dtype: StorageType = input.dtype.into();
    let log = kind.is_log();
    let addr = address_type(n);

    if problem.inner > 1 {
        let input = into_contiguous(client, input);
        let size = input.dtype.size();
        let handles = [&input.handle, &out.handle];
        let Some(plan) = ColumnsPlan::new(
            client,
            problem.outer,
            problem.d,
            problem.inner,
            size,
            &handles,
        ) else {
            // Too long a softmax for one unit per column on lavapipe: move `dim` last.
            let rank = input.shape.num_dims();
            let moved = into_contiguous(client, move_last(input, dim));
            let moved_out = forward(client, moved, rank - 1, kind, choice)?;
            return Ok(move_back(moved_out, dim));
        };
        // SAFETY: both buffers are contiguous with `n` elements; the kernel indexes them below
        // `outer * d * inner_vec` vectors.
        unsafe {
            softmax_forward_columns::launch_unchecked::<R>(
                client,
                CubeCount::new_1d(plan.cubes as u32),
                CubeDim::new_1d(plan.units as u32),
                addr,
                plan.vector,
                array_arg(&input, n),
                array_arg(&out, n),
                plan.columns,
                problem.d,
                plan.inner_vec,
                log,
                dtype,
            );
        }
        return Ok(out);
    }

    // Plan first (a forced variant may panic), then copy a strided input: nothing is launched
    // before every check has passed. A copy is a fresh, aligned allocation, so only buffers
    // used in place constrain the vector width.
    let rows = problem.outer;
    let d = problem.d;
    let handles: alloc::vec::Vec<_> = [&input, &out]
        .into_iter()
        .filter(|b| !needs_copy(b))
        .map(|b| &b.handle)
        .collect();
    let plan = choice.plan(client, rows, d, input.dtype.size(), &handles, Pass::Forward)?;
    let input = into_contiguous(client, input);
    let count = CubeCount::new_1d(plan.cubes as u32);

    // SAFETY: both buffers are contiguous with `rows * d` elements; the kernels index them
    // below `rows * d_vec` vectors (rows past the end of a tile are never stored).
    unsafe {
        match plan.variant {
            Variant::PlanePerRow | Variant::CubePerRow => {
                softmax_forward_registers::launch_unchecked::<R>(
                    client,
                    count,
                    plan.cube_dim(),
                    addr,
                    plan.vector,
                    array_arg(&input, n),
                    array_arg(&out, n),
                    rows,
                    plan.d_vec,
                    plan.group_size,
                    plan.rows_per_cube,
                    plan.vectors_per_unit,
                    plan.plane_size,
                    log,
                    dtype,
                )
            }
            Variant::CubePerRowStaged | Variant::CubePerRowLooped => {
                softmax_forward_looped::launch_unchecked::<R>(
                    client,
                    count,
                    plan.cube_dim(),
                    addr,
                    plan.vector,
                    array_arg(&input, n),
                    array_arg(&out, n),
                    rows,
                    plan.d_vec,
                    plan.group_size,
                    plan.vectors_per_unit,
                    plan.staged_len,
                    plan.plane_size,
                    log,
                    dtype,
                )
            }
            Variant::CubePerRowPipelined => softmax_forward_pipelined::launch_unchecked::<R>(
                client,
                count,
                plan.cube_dim(),
                addr,
                plan.vector,
                array_arg(&input, n),
                array_arg(&out, n),
                rows,
                plan.d_vec,
                plan.group_size,
                plan.vectors_per_unit,
                plan.staged_len,
                plan.plane_size,
                log,
                dtype,
            ),
            Variant::UnitPerRow => softmax_forward_unit::launch_unchecked::<R>(
                client,
                count,
                plan.cube_dim(),
                addr,
                plan.vector,
                array_arg(&input, n),
                array_arg(&out, n),
                rows,
                plan.d_vec,
                log,
                dtype,
            ),
        }
    }
    Ok(out)
}
