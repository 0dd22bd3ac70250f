//! Host side of the backward pass: route (rows, columns, or `dim` moved last), plan, launch.

use cubecl::{client::ComputeClient, prelude::*};

use super::{
    Choice, Kind, Variant,
    kernels::{
        columns::softmax_backward_columns,
        pipelined::softmax_backward_pipelined,
        rows::{softmax_backward_looped, softmax_backward_registers},
        unit::softmax_backward_unit,
    },
    layout::{move_back, move_last},
    plan::{ColumnsPlan, Pass},
    validate::check_backward,
};
use crate::layout::{address_type, array_arg, into_contiguous, needs_copy};
use crate::tensor_buffer::TensorBuffer;

/// The backward pass from the forward's `output` and its gradient `grad` (arguments checked
/// again). Returns an error, before anything is launched, only for a strict candidate that
/// cannot run the shape.
pub(crate) fn backward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    output: TensorBuffer,
    grad: TensorBuffer,
    dim: usize,
    kind: Kind,
    choice: Choice,
) -> Result<TensorBuffer, String> {
    let problem = check_backward(
        kind,
        (&output.shape, output.dtype),
        (&grad.shape, grad.dtype),
        dim,
    );
    let dx = TensorBuffer::empty(client, output.shape.clone(), output.dtype);
    let n = problem.num_elements();
    if n == 0 {
        return Ok(dx);
    }
    let dtype: StorageType = output.dtype.into();
    let log = kind.is_log();
    let addr = address_type(n);

    if problem.inner > 1 {
        let output = into_contiguous(client, output);
        let grad = into_contiguous(client, grad);
        let size = output.dtype.size();
        let handles = [&output.handle, &grad.handle, &dx.handle];
        let Some(plan) = ColumnsPlan::new(
            client,
            problem.outer,
            problem.d,
            problem.inner,
            size,
            &handles,
        ) else {
            // Too long a softmax for one unit per column on lavapipe: move `dim` last.
            let rank = output.shape.num_dims();
            let output = into_contiguous(client, move_last(output, dim));
            let grad = into_contiguous(client, move_last(grad, dim));
            let moved_dx = backward(client, output, grad, rank - 1, kind, choice)?;
            return Ok(move_back(moved_dx, dim));
        };
        // SAFETY: the three buffers are contiguous with `n` elements; the kernel indexes them
        // below `outer * d * inner_vec` vectors.
        unsafe {
            softmax_backward_columns::launch_unchecked::<R>(
                client,
                CubeCount::new_1d(plan.cubes as u32),
                CubeDim::new_1d(plan.units as u32),
                addr,
                plan.vector,
                array_arg(&output, n),
                array_arg(&grad, n),
                array_arg(&dx, n),
                plan.columns,
                problem.d,
                plan.inner_vec,
                log,
                dtype,
            );
        }
        return Ok(dx);
    }

    let rows = problem.outer;
    let d = problem.d;
    let handles: alloc::vec::Vec<_> = [&output, &grad, &dx]
        .into_iter()
        .filter(|b| !needs_copy(b))
        .map(|b| &b.handle)
        .collect();
    let plan = choice.plan(
        client,
        rows,
        d,
        output.dtype.size(),
        &handles,
        Pass::Backward,
    )?;
    let output = into_contiguous(client, output);
    let grad = into_contiguous(client, grad);
    let count = CubeCount::new_1d(plan.cubes as u32);

    // SAFETY: the three buffers are contiguous with `rows * d` elements; the kernels index
    // them below `rows * d_vec` vectors (rows past the end of a tile are never stored).
    unsafe {
        match plan.variant {
            Variant::PlanePerRow | Variant::CubePerRow => {
                softmax_backward_registers::launch_unchecked::<R>(
                    client,
                    count,
                    plan.cube_dim(),
                    addr,
                    plan.vector,
                    array_arg(&output, n),
                    array_arg(&grad, n),
                    array_arg(&dx, n),
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
                softmax_backward_looped::launch_unchecked::<R>(
                    client,
                    count,
                    plan.cube_dim(),
                    addr,
                    plan.vector,
                    array_arg(&output, n),
                    array_arg(&grad, n),
                    array_arg(&dx, n),
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
            Variant::CubePerRowPipelined => softmax_backward_pipelined::launch_unchecked::<R>(
                client,
                count,
                plan.cube_dim(),
                addr,
                plan.vector,
                array_arg(&output, n),
                array_arg(&grad, n),
                array_arg(&dx, n),
                rows,
                plan.d_vec,
                plan.group_size,
                plan.vectors_per_unit,
                plan.staged_len,
                plan.plane_size,
                log,
                dtype,
            ),
            Variant::UnitPerRow => softmax_backward_unit::launch_unchecked::<R>(
                client,
                count,
                plan.cube_dim(),
                addr,
                plan.vector,
                array_arg(&output, n),
                array_arg(&grad, n),
                array_arg(&dx, n),
                rows,
                plan.d_vec,
                log,
                dtype,
            ),
        }
    }
    Ok(dx)
}
