//! Native Adam: a parameter's whole update in one kernel, many parameters in one launch.
//!
//! Burn's Adam (`burn::optim::Adam`) updates each parameter with about a dozen tensor
//! operations (the two moments, the bias-corrected step, the weight decay), each of which
//! passes through the training thread, burn-fusion's and CubeCL's device threads. In a bf16
//! transformer step on an H100 the step's tail after its last product (the optimizer, mostly)
//! took those threads 3.7-4.7 ms to issue, for 0.6 ms of GPU work (`docs/perf/host-launch.md`).
//! Here a parameter's update is one kernel body, and [`adam_steps`] runs the updates of many
//! parameters in one launch (burn-ruda queues a whole step's as one operation): with an
//! operation and a kernel a parameter the tail took 1.1-1.4 ms. The arithmetic is Burn's,
//! at step `t` (counted from 1), with `g` the gradient plus `penalty * param` under weight decay:
//!
//! ```text
//! m' = beta_1 * m + (1 - beta_1) * g
//! v' = beta_2 * v + (1 - beta_2) * g^2
//! param' = param - lr * c * m' / (sqrt(v') + epsilon * sqrt(1 - beta_2^t))
//!   where c = sqrt(1 - beta_2^t) / (1 - beta_1^t)
//! ```
//!
//! With AMSGrad the denominator uses `vmax' = max(vmax, v')` instead of `v'`, taken before `v'`
//! is rounded to the tensor's dtype (the plain update, too, divides by the unrounded `v'`). The
//! kernel computes in f32 (f64 for f64 tensors) and rounds each result once to the tensor's
//! dtype, where Burn's composed update rounds after each operation: in f16 and bf16 the two
//! differ by the rounding of the intermediate values.

use burn_backend::DType;
use cubecl::{client::ComputeClient, prelude::*};

// How a call's parameters are cut into launches.
mod batches;
// The `#[cube]` kernel.
mod kernels;
// Argument checks, before anything is queued or launched.
pub mod validate;

pub use batches::{MAX_PARAMETERS_PER_KERNEL, parameters_per_kernel};

use crate::layout::{address_type, array_arg, into_contiguous, vector_size};
use crate::tensor_buffer::TensorBuffer;
use batches::batches;
use kernels::adam_kernel;

/// Units in a cube.
const CUBE_UNITS: usize = 256;
/// Most cubes of one launch, shared by its parameters: a parameter with more vectors than its
/// cubes' units loops over them.
const MAX_CUBES: usize = 65_535;

/// The scalars of one Adam step, the same for every parameter of the step but for `time`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamScalars {
    /// The learning rate.
    pub lr: f64,
    /// The first moment's decay.
    pub beta_1: f32,
    /// The second moment's decay.
    pub beta_2: f32,
    /// Added to the denominator's square root, after bias correction (as Burn does).
    pub epsilon: f32,
    /// The weight decay's penalty (L2, added to the gradient); 0 for none.
    pub weight_decay: f32,
    /// The step's number for this parameter, counted from 1.
    pub time: usize,
}

impl AdamScalars {
    /// `(lr * c, epsilon * sqrt(1 - beta_2^t))`: the kernel's step size and epsilon, computed
    /// as Burn computes them (in f32, from `time` as an `i32` power).
    fn bias_corrected(&self) -> (f32, f32) {
        let time = i32::try_from(self.time).unwrap_or(i32::MAX);
        let correction_2 = (1.0 - self.beta_2.powi(time)).sqrt();
        let factor = correction_2 / (1.0 - self.beta_1.powi(time));
        (
            (self.lr * factor as f64) as f32,
            self.epsilon * correction_2,
        )
    }
}

/// One parameter's tensors before its Adam step, and the step's scalars.
#[derive(Debug)]
pub struct AdamParameter {
    /// The learning rate, the options and this parameter's step count.
    pub scalars: AdamScalars,
    /// The parameter.
    pub param: TensorBuffer,
    /// Its gradient.
    pub grad: TensorBuffer,
    /// The first moment of the previous step (zeros before the first).
    pub moment_1: TensorBuffer,
    /// The second moment of the previous step (zeros before the first).
    pub moment_2: TensorBuffer,
    /// AMSGrad's running maximum of the second moment (zeros before the first step: the second
    /// moment is never negative); `None` without AMSGrad.
    pub max_moment_2: Option<TensorBuffer>,
}

/// The updated tensors of one parameter.
#[derive(Debug)]
pub struct AdamUpdate {
    /// The parameter after the step.
    pub param: TensorBuffer,
    /// The first moment `m'`.
    pub moment_1: TensorBuffer,
    /// The second moment `v'`.
    pub moment_2: TensorBuffer,
    /// AMSGrad's running maximum of the second moment, when `max_moment_2` was given.
    pub max_moment_2: Option<TensorBuffer>,
}

/// What [`adam_steps`] returns.
#[derive(Debug)]
pub struct AdamSteps {
    /// Each parameter's update, in the order given.
    pub updates: Vec<AdamUpdate>,
    /// How many kernels ran (empty parameters take none).
    pub kernels: usize,
}

/// One Adam step of each parameter (module documentation), in as few launches as the
/// parameters and the device allow: parameters of one dtype and vector size, with or without
/// AMSGrad and with equal scalars share a launch, up to the device's binding limit and
/// [`MAX_PARAMETERS_PER_KERNEL`]. A transformer's step (one dtype, one step count) takes
/// `ceil(parameters / 32)` launches on CUDA, where a launch a parameter made CubeCL's device
/// thread, which paces a training step, issue a hundred. The outputs are new row-major buffers,
/// allocated a parameter at a time, so that a caller who keeps one parameter keeps only its own.
///
/// # Panics
/// When a tensor's shape or dtype differs from its parameter's, the dtype is not a float the
/// kernel takes ([`validate::check`]), or a step count is 0; before anything is launched.
pub fn adam_steps<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    parameters: Vec<AdamParameter>,
) -> AdamSteps {
    for parameter in &parameters {
        validate::check(
            (&parameter.param.shape, parameter.param.dtype),
            (&parameter.grad.shape, parameter.grad.dtype),
            (&parameter.moment_1.shape, parameter.moment_1.dtype),
            (&parameter.moment_2.shape, parameter.moment_2.dtype),
            parameter
                .max_moment_2
                .as_ref()
                .map(|max| (&max.shape, max.dtype)),
            parameter.scalars.time,
        );
    }

    let mut prepared = Vec::new();
    let mut updates = Vec::with_capacity(parameters.len());
    for parameter in parameters {
        let update = empty_update(client, &parameter);
        if parameter.param.num_elements() > 0 {
            prepared.push(Prepared::new(client, parameter, &update, updates.len()));
        }
        updates.push(update);
    }

    let max_bindings = client.properties().hardware.max_bindings;
    let keys: Vec<LaunchKey> = prepared.iter().map(|p| p.key).collect();
    let launches = batches(&keys, |key| {
        parameters_per_kernel(max_bindings, key.amsgrad)
    });
    for batch in &launches {
        let members: Vec<&Prepared> = batch.iter().map(|&i| &prepared[i]).collect();
        launch(client, &members, &updates);
    }
    AdamSteps {
        updates,
        kernels: launches.len(),
    }
}

/// One parameter's Adam step: [`adam_steps`] of one.
///
/// # Panics
/// As [`adam_steps`].
pub fn adam_step<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    scalars: AdamScalars,
    param: TensorBuffer,
    grad: TensorBuffer,
    moment_1: TensorBuffer,
    moment_2: TensorBuffer,
    max_moment_2: Option<TensorBuffer>,
) -> AdamUpdate {
    let parameter = AdamParameter {
        scalars,
        param,
        grad,
        moment_1,
        moment_2,
        max_moment_2,
    };
    adam_steps(client, vec![parameter])
        .updates
        .pop()
        .unwrap_or_else(|| unreachable!("Adam: one update a parameter"))
}

/// The parameter's output buffers, allocated together (one allocation for CubeCL's device
/// thread); they live and die together, as an optimizer keeps a parameter's moments as long as
/// the parameter.
fn empty_update<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    parameter: &AdamParameter,
) -> AdamUpdate {
    let layout = (parameter.param.shape.clone(), parameter.param.dtype);
    if parameter.max_moment_2.is_some() {
        let [param, moment_1, moment_2, max] = TensorBuffer::empty_together(
            client,
            [layout.clone(), layout.clone(), layout.clone(), layout],
        );
        AdamUpdate {
            param,
            moment_1,
            moment_2,
            max_moment_2: Some(max),
        }
    } else {
        let [param, moment_1, moment_2] =
            TensorBuffer::empty_together(client, [layout.clone(), layout.clone(), layout]);
        AdamUpdate {
            param,
            moment_1,
            moment_2,
            max_moment_2: None,
        }
    }
}

/// What must be equal for parameters to share a launch.
#[derive(Clone, Copy, Debug, PartialEq)]
struct LaunchKey {
    dtype: DType,
    vector: usize,
    amsgrad: bool,
    scalars: AdamScalars,
}

/// A non-empty parameter ready to launch: contiguous inputs, its update's index, its vectors.
struct Prepared {
    /// Parameter, gradient, first and second moment, AMSGrad's maximum when given.
    inputs: Vec<TensorBuffer>,
    /// Its update's index in the call's results.
    update: usize,
    len: usize,
    key: LaunchKey,
}

impl Prepared {
    fn new<R: cubecl::Runtime>(
        client: &ComputeClient<R>,
        parameter: AdamParameter,
        update: &AdamUpdate,
        index: usize,
    ) -> Self {
        let dtype = parameter.param.dtype;
        let len = parameter.param.num_elements();
        let amsgrad = parameter.max_moment_2.is_some();
        let inputs: Vec<TensorBuffer> = [
            parameter.param,
            parameter.grad,
            parameter.moment_1,
            parameter.moment_2,
        ]
        .into_iter()
        .chain(parameter.max_moment_2)
        .map(|buffer| into_contiguous(client, buffer))
        .collect();
        let handles: Vec<_> = inputs
            .iter()
            .chain(update_buffers(update))
            .map(|buffer| &buffer.handle)
            .collect();
        let vector = vector_size(client, len, dtype.size(), &handles);
        Self {
            inputs,
            update: index,
            len,
            key: LaunchKey {
                dtype,
                vector,
                amsgrad,
                scalars: parameter.scalars,
            },
        }
    }
}

/// An update's buffers: parameter, first and second moment, AMSGrad's maximum when present.
fn update_buffers(update: &AdamUpdate) -> impl Iterator<Item = &TensorBuffer> {
    [&update.param, &update.moment_1, &update.moment_2]
        .into_iter()
        .chain(update.max_moment_2.as_ref())
}

/// Launches one kernel over `members`, which share a [`LaunchKey`]: each gets
/// `MAX_CUBES / members` cubes at most, and as many as its vectors fill.
fn launch<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    members: &[&Prepared],
    updates: &[AdamUpdate],
) {
    let Some(first) = members.first() else {
        return;
    };
    let LaunchKey {
        dtype,
        vector,
        amsgrad,
        scalars,
    } = first.key;
    let most_cubes = (MAX_CUBES / members.len()).max(1);
    let mut first_cube = vec![0usize];
    for member in members {
        let cubes = (member.len / vector)
            .div_ceil(CUBE_UNITS)
            .clamp(1, most_cubes);
        first_cube.push(first_cube.last().copied().unwrap_or(0) + cubes);
    }
    let cubes = first_cube.last().copied().unwrap_or(0);
    let longest = members.iter().map(|m| m.len).max().unwrap_or(0);

    // The k-th input (0 parameter, 1 gradient, 2 and 3 the moments, 4 the maximum) of every
    // member, and likewise the k-th output.
    let inputs = |k: usize| -> Vec<ArrayArg<R>> {
        members
            .iter()
            .filter_map(|m| m.inputs.get(k).map(|b| array_arg(b, m.len)))
            .collect()
    };
    let outputs = |k: usize| -> Vec<ArrayArg<R>> {
        members
            .iter()
            .filter_map(|m| {
                update_buffers(&updates[m.update])
                    .nth(k)
                    .map(|b| array_arg(b, m.len))
            })
            .collect()
    };
    let lens: SequenceArg<R, usize> = members.iter().map(|m| m.len / vector).collect();
    let first_cube: SequenceArg<R, usize> = first_cube.into_iter().collect();
    let accumulator = match dtype {
        DType::F64 => DType::F64,
        _ => DType::F32,
    };
    let dtypes: [StorageType; 2] = [dtype.into(), accumulator.into()];
    let (step, eps) = scalars.bias_corrected();

    // SAFETY: every buffer is contiguous with its member's `len` elements (checked shapes,
    // fresh outputs); member k's units touch its vectors below `lens[k]` only, and the cubes
    // of distinct members do not overlap.
    unsafe {
        adam_kernel::launch_unchecked::<R>(
            client,
            CubeCount::new_1d(cubes as u32),
            CubeDim::new_1d(CUBE_UNITS as u32),
            address_type(longest),
            vector,
            inputs(0).into_iter().collect(),
            inputs(1).into_iter().collect(),
            inputs(2).into_iter().collect(),
            inputs(3).into_iter().collect(),
            inputs(4).into_iter().collect(),
            outputs(0).into_iter().collect(),
            outputs(1).into_iter().collect(),
            outputs(2).into_iter().collect(),
            outputs(3).into_iter().collect(),
            lens,
            first_cube,
            scalars.beta_1,
            scalars.beta_2,
            step,
            eps,
            scalars.weight_decay,
            amsgrad,
            dtypes,
        );
    }
}
