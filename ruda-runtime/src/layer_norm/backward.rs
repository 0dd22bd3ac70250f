//! Host side of the backward pass: checks, layout, the row kernel, then the column reduction.

use burn_backend::DType;
use cubecl::{client::ComputeClient, ir::AddressType, prelude::*, zspace::Shape};

use super::{
    Choice, Variant, choose_variant,
    kernels::{
        backward::{backward_looped, backward_registers, reduce_partials},
        unit::{backward_unit_columns, backward_unit_rows},
    },
    plan::Plan,
    validate::check_backward,
};
use crate::layout::{address_type, array_arg, into_contiguous, needs_copy};
use crate::tensor_buffer::TensorBuffer;

/// Units per cube of the column reduction.
const REDUCE_UNITS: usize = 256;
/// Partial rows each unit of the column reduction sums, per chunk, when the partials are cut
/// into chunks: two steps of four loads in flight, and enough chunks to spread a narrow `d`.
const PARTIALS_PER_UNIT: usize = 8;
/// Above this many partial rows per unit a single launch is cut into chunks. H200 (Nsight
/// Compute, calls P-R and this change's call): 1056 partial rows of d = 256 take 7.8 us in one
/// launch of 16 cubes with vectors of 4 (16.5 rows a unit), and 5.1 + 3.0 us in chunks; with
/// vectors of 2 (33 rows a unit) 13.8 us in one launch, 4.9 + 3.0 us in chunks; 8448 partial
/// rows (132 a unit) took 41 us in one launch.
const SINGLE_LAUNCH_PARTIALS_PER_UNIT: usize = 24;

pub(crate) fn backward<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    input: TensorBuffer,
    weight: TensorBuffer,
    grad: TensorBuffer,
    mean: TensorBuffer,
    rstd: TensorBuffer,
    choice: Choice,
) -> Result<[TensorBuffer; 3], String> {
    let problem = check_backward(client, &input, &weight, &grad, &mean, &rstd);
    let d = problem.d;
    let dx = TensorBuffer::empty(client, input.shape.clone(), input.dtype);
    if problem.rows == 0 {
        // Sums over no rows: zeros, uploaded rather than computed.
        let zeros = alloc::vec![0.0f32; d];
        let shape = Shape::new([d]);
        let dgamma = TensorBuffer::from_f32s(client, &zeros, shape.clone(), weight.dtype);
        let dbeta = TensorBuffer::from_f32s(client, &zeros, shape, weight.dtype);
        return Ok([dx, dgamma, dbeta]);
    }
    // Both parameter gradients reach the optimizer together.
    let [dgamma, dbeta] = TensorBuffer::empty_together(
        client,
        [
            (Shape::new([d]), weight.dtype),
            (Shape::new([d]), weight.dtype),
        ],
    );

    // Plan first (a forced strategy may panic), then copy strided buffers: nothing is launched
    // before every check has passed. Copies are fresh, aligned allocations, so only the buffers
    // used in place constrain the vector width.
    let has_plane = crate::group_reduce::usable_plane_size(client) > 0;
    let default = || choose_variant(d, problem.rows, input.dtype, has_plane);
    let (strategy, forced, narrow) = choice.resolve(default);
    let in_place = [&input, &weight, &grad, &dx, &dgamma, &dbeta];
    let handles: alloc::vec::Vec<_> = in_place
        .into_iter()
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
    )
    .with_full_cubes(client);
    let shared_sums = plan.shared_column_sums(client, strategy.column_sums, forced);
    choice.check_backward(&plan, shared_sums)?;

    let input = into_contiguous(client, input);
    let weight = into_contiguous(client, weight);
    let grad = into_contiguous(client, grad);
    let mean = into_contiguous(client, mean);
    let rstd = into_contiguous(client, rstd);
    let cubes = plan.backward_cubes(client, shared_sums);
    // One partial row of dgamma/dbeta per cube; the unit-per-row variant needs none.
    let num_partials = match plan.variant {
        Variant::UnitPerRow => 1,
        _ => cubes,
    };
    let partial_shape = Shape::new([num_partials, d]);
    let [dgamma_partial, dbeta_partial] = TensorBuffer::empty_together(
        client,
        [
            (partial_shape.clone(), DType::F32),
            (partial_shape, DType::F32),
        ],
    );

    let n = problem.rows * d;
    let dtype: StorageType = input.dtype.into();
    let addr = address_type(n.max(num_partials * d));
    let count = CubeCount::new_1d(cubes as u32);

    // SAFETY: every buffer is contiguous with the lengths given here; the kernels index
    // `x`/`dy`/`dx` below `rows * d`, `gamma` below `d`, the statistics below `rows` and the
    // partials below `num_partials * d` (the partial row of a cube is below `cubes`).
    unsafe {
        match plan.variant {
            Variant::PlanePerRow | Variant::CubePerRow => {
                backward_registers::launch_unchecked::<R>(
                    client,
                    count,
                    plan.cube_dim(),
                    addr,
                    plan.vector,
                    array_arg(&input, n),
                    array_arg(&weight, d),
                    array_arg(&grad, n),
                    array_arg(&mean, problem.rows),
                    array_arg(&rstd, problem.rows),
                    array_arg(&dx, n),
                    array_arg(&dgamma_partial, num_partials * d),
                    array_arg(&dbeta_partial, num_partials * d),
                    problem.rows,
                    plan.d_vec,
                    plan.group_size,
                    plan.rows_per_cube,
                    plan.vectors_per_unit,
                    plan.plane_size,
                    shared_sums,
                    dtype,
                )
            }
            Variant::CubePerRowLooped => backward_looped::launch_unchecked::<R>(
                client,
                count,
                plan.cube_dim(),
                addr,
                plan.vector,
                array_arg(&input, n),
                array_arg(&weight, d),
                array_arg(&grad, n),
                array_arg(&mean, problem.rows),
                array_arg(&rstd, problem.rows),
                array_arg(&dx, n),
                array_arg(&dgamma_partial, num_partials * d),
                array_arg(&dbeta_partial, num_partials * d),
                problem.rows,
                plan.d_vec,
                plan.group_size,
                plan.vectors_per_unit,
                plan.plane_size,
                dtype,
            ),
            Variant::UnitPerRow => {
                // The exact centre correction of each row, from the row kernel to the column one.
                let centre = TensorBuffer::empty(client, Shape::new([problem.rows]), DType::F32);
                backward_unit_rows::launch_unchecked::<R>(
                    client,
                    CubeCount::new_1d(plan.forward_cubes(client) as u32),
                    plan.cube_dim(),
                    addr,
                    plan.vector,
                    array_arg(&input, n),
                    array_arg(&weight, d),
                    array_arg(&grad, n),
                    array_arg(&mean, problem.rows),
                    array_arg(&rstd, problem.rows),
                    array_arg(&dx, n),
                    array_arg(&centre, problem.rows),
                    problem.rows,
                    plan.d_vec,
                    dtype,
                );
                let column_cubes = plan.d_vec.div_ceil(super::plan::UNIT_CUBE);
                backward_unit_columns::launch_unchecked::<R>(
                    client,
                    CubeCount::new_1d(column_cubes as u32),
                    CubeDim::new_1d(super::plan::UNIT_CUBE as u32),
                    addr,
                    plan.vector,
                    array_arg(&input, n),
                    array_arg(&grad, n),
                    array_arg(&mean, problem.rows),
                    array_arg(&rstd, problem.rows),
                    array_arg(&centre, problem.rows),
                    array_arg(&dgamma, d),
                    array_arg(&dbeta, d),
                    problem.rows,
                    plan.d_vec,
                    dtype,
                );
                return Ok([dx, dgamma, dbeta]);
            }
        }

        reduce_columns(
            client,
            &plan,
            addr,
            &dgamma_partial,
            &dbeta_partial,
            num_partials,
            &dgamma,
            &dbeta,
        );
    }
    Ok([dx, dgamma, dbeta])
}

/// `dgamma`/`dbeta` from the row kernel's `[num_partials, d]` partial sums.
///
/// A few column vectors per cube (64 contiguous bytes of each partial row) and the rest of the
/// cube on partial rows, so that a narrow `d` still spreads over many units. When each unit
/// would sum more than [`SINGLE_LAUNCH_PARTIALS_PER_UNIT`] partial rows, the rows are cut into
/// chunks of [`PARTIALS_PER_UNIT`] rows a unit, one cube row per chunk, summed into an f32
/// scratch of one row per chunk, which a second launch of the same kernel sums: the result is
/// still one fixed order of additions.
///
/// # Safety
/// The partials hold `num_partials * d` contiguous f32 elements, `dgamma`/`dbeta` `d` elements.
#[allow(clippy::too_many_arguments)]
unsafe fn reduce_columns<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    plan: &Plan,
    addr: AddressType,
    dgamma_partial: &TensorBuffer,
    dbeta_partial: &TensorBuffer,
    num_partials: usize,
    dgamma: &TensorBuffer,
    dbeta: &TensorBuffer,
) {
    let columns = (16 / plan.vector).clamp(1, 16);
    let grid = ColumnGrid {
        columns,
        splits: REDUCE_UNITS / columns,
        column_cubes: plan.d_vec.div_ceil(columns) as u32,
    };
    let out_type: StorageType = dgamma.dtype.into();
    let max_chunks = client.properties().hardware.max_cube_count.1 as usize;
    let per_chunk = if num_partials > grid.splits * SINGLE_LAUNCH_PARTIALS_PER_UNIT {
        (grid.splits * PARTIALS_PER_UNIT).max(num_partials.div_ceil(max_chunks))
    } else {
        num_partials
    };
    let chunks = num_partials.div_ceil(per_chunk);
    let partials = [dgamma_partial, dbeta_partial];
    // SAFETY (every launch): as `ColumnGrid::launch` asks: the partials hold `num_partials * d`
    // elements (this function's contract), the chunk sums `chunks` rows, the outputs one.
    unsafe {
        if chunks == 1 {
            grid.launch(
                client,
                plan,
                addr,
                partials,
                num_partials,
                num_partials,
                [dgamma, dbeta],
                out_type,
            );
            return;
        }
        let chunk_shape = Shape::new([chunks, plan.d_vec * plan.vector]);
        let dgamma_chunks = TensorBuffer::empty(client, chunk_shape.clone(), DType::F32);
        let dbeta_chunks = TensorBuffer::empty(client, chunk_shape, DType::F32);
        let sums = [&dgamma_chunks, &dbeta_chunks];
        grid.launch(
            client,
            plan,
            addr,
            partials,
            num_partials,
            per_chunk,
            sums,
            DType::F32.into(),
        );
        grid.launch(
            client,
            plan,
            addr,
            sums,
            chunks,
            chunks,
            [dgamma, dbeta],
            out_type,
        );
    }
}

/// The column reduction's launch shape: cubes of `columns` column vectors by `splits` units on
/// partial rows, `column_cubes` of them across the row.
struct ColumnGrid {
    columns: usize,
    splits: usize,
    column_cubes: u32,
}

impl ColumnGrid {
    /// Sums `rows` rows of both `sources`, `per_chunk` rows a cube row, into one row per chunk
    /// of both `targets` (of `out_type`).
    ///
    /// # Safety
    /// The sources hold `rows * d` contiguous f32 elements, the targets
    /// `rows.div_ceil(per_chunk) * d` elements: unit `(c, s)` of cube `(x, k)` reads rows below
    /// `rows` at columns below `d_vec`, and writes row `k`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn launch<R: cubecl::Runtime>(
        &self,
        client: &ComputeClient<R>,
        plan: &Plan,
        addr: AddressType,
        sources: [&TensorBuffer; 2],
        rows: usize,
        per_chunk: usize,
        targets: [&TensorBuffer; 2],
        out_type: StorageType,
    ) {
        let d = plan.d_vec * plan.vector;
        let chunks = rows.div_ceil(per_chunk);
        // SAFETY: as the caller promises (above).
        unsafe {
            reduce_partials::launch_unchecked::<R>(
                client,
                CubeCount::new_2d(self.column_cubes, chunks as u32),
                CubeDim::new_2d(self.columns as u32, self.splits as u32),
                addr,
                plan.vector,
                array_arg(sources[0], rows * d),
                array_arg(sources[1], rows * d),
                array_arg(targets[0], chunks * d),
                array_arg(targets[1], chunks * d),
                rows,
                per_chunk,
                plan.d_vec,
                self.columns,
                self.splits,
                out_type,
            );
        }
    }
}
