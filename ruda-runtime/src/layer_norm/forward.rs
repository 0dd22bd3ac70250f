//! Host side of the forward pass: checks, layout, launch.

use burn_backend::DType;
use cubecl::{client::ComputeClient, prelude::*};

use super::{
    Strategy, Variant,
    kernels::forward::{forward_looped, forward_registers},
    layout::{array_arg, into_contiguous},
    plan::{Plan, address_type},
    validate::check_forward,
};
use crate::runtime::normalization::TensorBuffer;

pub(crate) fn forward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    input: TensorBuffer,
    weight: TensorBuffer,
    bias: Option<TensorBuffer>,
    epsilon: f64,
    strategy: impl FnOnce(usize, usize, bool) -> Strategy,
) -> [TensorBuffer; 3] {
    let problem = check_forward(client, &input, &weight, bias.as_ref(), epsilon);
    let rank = input.shape.num_dims();
    let mut stats_shape = input.shape.clone();
    stats_shape.remove(rank - 1);
    let out = TensorBuffer::empty(client, input.shape.clone(), input.dtype);
    let mean = TensorBuffer::empty(client, stats_shape.clone(), DType::F32);
    let rstd = TensorBuffer::empty(client, stats_shape, DType::F32);
    if problem.rows == 0 {
        return [out, mean, rstd];
    }

    let input = into_contiguous(client, input);
    let weight = into_contiguous(client, weight);
    let bias = bias.map(|b| into_contiguous(client, b));
    let has_plane = super::plan::usable_plane_size(client) > 0;
    let strategy = strategy(problem.d, problem.rows, has_plane);

    let elem_size = input.dtype.size();
    let mut handles = alloc::vec![&input.handle, &weight.handle, &out.handle];
    if let Some(b) = &bias {
        handles.push(&b.handle);
    }
    let plan = Plan::new(client, problem, elem_size, &handles, strategy);

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
        }
    }
    [out, mean, rstd]
}
