//! Host side of the forward pass: checks, layout, launch.

use burn_backend::DType;
use cubecl::{client::ComputeClient, prelude::*};

use super::{
    Choice, Variant, choose_variant,
    kernels::{
        forward::{forward_looped, forward_registers},
        unit::forward_unit,
    },
    plan::Plan,
    validate::check_forward,
};
use crate::layout::{address_type, array_arg, into_contiguous, needs_copy};
use crate::tensor_buffer::TensorBuffer;

pub(crate) fn forward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    input: TensorBuffer,
    weight: TensorBuffer,
    bias: Option<TensorBuffer>,
    epsilon: f64,
    choice: Choice,
) -> Result<[TensorBuffer; 3], String> {
    let problem = check_forward(client, &input, &weight, bias.as_ref(), epsilon);
    let rank = input.shape.num_dims();
    let mut stats_shape = input.shape.clone();
    stats_shape.remove(rank - 1);
    let out = TensorBuffer::empty(client, input.shape.clone(), input.dtype);
    // `mean` and `rstd` are saved together for the backward pass and freed together.
    let [mean, rstd] = TensorBuffer::empty_together(
        client,
        [(stats_shape.clone(), DType::F32), (stats_shape, DType::F32)],
    );
    if problem.rows == 0 {
        return Ok([out, mean, rstd]);
    }

    // Plan first (a forced strategy may panic), then copy strided buffers: nothing is launched
    // before every check has passed. Copies are fresh, aligned allocations, so only the buffers
    // used in place constrain the vector width.
    let has_plane = crate::group_reduce::usable_plane_size(client) > 0;
    let default = || choose_variant(problem.d, problem.rows, input.dtype, has_plane);
    let (strategy, forced, narrow) = choice.resolve(default);
    let in_place = [Some(&input), Some(&weight), bias.as_ref(), Some(&out)];
    let handles: alloc::vec::Vec<_> = in_place
        .into_iter()
        .flatten()
        .filter(|b| !needs_copy(b))
        .map(|b| &b.handle)
        .collect();
    let plan = Plan::new(
        client,
        problem,
        input.dtype.size(),
        &handles,
        strategy,
        forced,
        narrow,
    );
    choice.check(&plan)?;

    let input = into_contiguous(client, input);
    let weight = into_contiguous(client, weight);
    let bias = bias.map(|b| into_contiguous(client, b));

    let n = problem.rows * problem.d;
    let dtype: StorageType = input.dtype.into();
    let has_beta = bias.is_some();
    // Without beta the kernel never reads it; gamma stands in for the binding.
    let beta = bias.as_ref().unwrap_or(&weight);
    let cubes = plan.forward_cubes(client);
    let count = CubeCount::new_1d(cubes as u32);
    let addr = address_type(n);

    // SAFETY: every buffer is contiguous with the lengths given here; the kernels index
    // `x`/`out` below `rows * d`, `gamma`/`beta` below `d` and the statistics below `rows`.
    unsafe {
        match plan.variant {
            Variant::PlanePerRow | Variant::CubePerRow => forward_registers::launch_unchecked::<R>(
                client,
                count,
                plan.cube_dim(),
                addr,
                plan.vector,
                array_arg(&input, n),
                array_arg(&weight, problem.d),
                array_arg(beta, problem.d),
                array_arg(&out, n),
                array_arg(&mean, problem.rows),
                array_arg(&rstd, problem.rows),
                problem.rows,
                plan.d_vec,
                epsilon as f32,
                plan.group_size,
                plan.rows_per_cube,
                plan.vectors_per_unit,
                plan.plane_size,
                has_beta,
                dtype,
            ),
            Variant::CubePerRowLooped => forward_looped::launch_unchecked::<R>(
                client,
                count,
                plan.cube_dim(),
                addr,
                plan.vector,
                array_arg(&input, n),
                array_arg(&weight, problem.d),
                array_arg(beta, problem.d),
                array_arg(&out, n),
                array_arg(&mean, problem.rows),
                array_arg(&rstd, problem.rows),
                problem.rows,
                plan.d_vec,
                epsilon as f32,
                plan.group_size,
                plan.vectors_per_unit,
                plan.plane_size,
                has_beta,
                dtype,
            ),
            Variant::UnitPerRow => forward_unit::launch_unchecked::<R>(
                client,
                count,
                plan.cube_dim(),
                addr,
                plan.vector,
                array_arg(&input, n),
                array_arg(&weight, problem.d),
                array_arg(beta, problem.d),
                array_arg(&out, n),
                array_arg(&mean, problem.rows),
                array_arg(&rstd, problem.rows),
                problem.rows,
                plan.d_vec,
                epsilon as f32,
                has_beta,
                dtype,
            ),
        }
    }
    Ok([out, mean, rstd])
}
