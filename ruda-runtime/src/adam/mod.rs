//! Native Adam: one parameter's whole update in one kernel.
//!
//! Burn's Adam (`burn::optim::Adam`) updates each parameter with about a dozen tensor
//! operations (the two moments, the bias-corrected step, the weight decay), each of which
//! passes through the training thread, burn-fusion's and CubeCL's device threads. In a bf16
//! transformer step on an H100 the step's tail after its last product (the optimizer, mostly)
//! took those threads 3.7-4.7 ms to issue, for 0.6 ms of GPU work (`docs/perf/host-launch.md`).
//! Here each parameter is one kernel (and burn-ruda queues a whole step's as one operation): the
//! tail took 1.1-1.4 ms with an operation a parameter. The arithmetic is Burn's,
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

// The `#[cube]` kernels.
mod kernels;
// Argument checks, before anything is queued or launched.
pub mod validate;

use crate::layout::{address_type, array_arg, into_contiguous, vector_size};
use crate::tensor_buffer::TensorBuffer;
use kernels::{adam_amsgrad_kernel, adam_kernel};

/// Units in a cube.
const CUBE_UNITS: usize = 256;
/// Most cubes launched: larger parameters loop over their vectors.
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

/// One Adam step of one parameter: new parameter and moments (module documentation). With
/// `max_moment_2` (AMSGrad) the step also returns the new maximum; zeros are a valid first
/// maximum, as the second moment is never negative. The outputs are new buffers, row-major.
///
/// # Panics
/// When a tensor's shape or dtype differs from the parameter's, or the dtype is not a float
/// the kernels take ([`validate::check`]), or `scalars.time` is 0.
pub fn adam_step<R: cubecl::Runtime>(
    client: &ComputeClient<R>,
    scalars: AdamScalars,
    param: TensorBuffer,
    grad: TensorBuffer,
    moment_1: TensorBuffer,
    moment_2: TensorBuffer,
    max_moment_2: Option<TensorBuffer>,
) -> AdamUpdate {
    validate::check(
        (&param.shape, param.dtype),
        (&grad.shape, grad.dtype),
        (&moment_1.shape, moment_1.dtype),
        (&moment_2.shape, moment_2.dtype),
        max_moment_2.as_ref().map(|max| (&max.shape, max.dtype)),
        scalars.time,
    );

    let (shape, dtype) = (param.shape.clone(), param.dtype);
    let len = param.num_elements();
    let outputs = (shape.clone(), dtype);
    let amsgrad = max_moment_2.is_some();
    let (param_out, moment_1_out, moment_2_out, max_out) = if amsgrad {
        let [p, m, v, x] = TensorBuffer::empty_together(
            client,
            [outputs.clone(), outputs.clone(), outputs.clone(), outputs],
        );
        (p, m, v, Some(x))
    } else {
        let [p, m, v] =
            TensorBuffer::empty_together(client, [outputs.clone(), outputs.clone(), outputs]);
        (p, m, v, None)
    };
    if len == 0 {
        return AdamUpdate {
            param: param_out,
            moment_1: moment_1_out,
            moment_2: moment_2_out,
            max_moment_2: max_out,
        };
    }

    let param = into_contiguous(client, param);
    let grad = into_contiguous(client, grad);
    let moment_1 = into_contiguous(client, moment_1);
    let moment_2 = into_contiguous(client, moment_2);
    let max_moment_2 = max_moment_2.map(|max| into_contiguous(client, max));

    let mut handles = vec![
        &param.handle,
        &grad.handle,
        &moment_1.handle,
        &moment_2.handle,
        &param_out.handle,
        &moment_1_out.handle,
        &moment_2_out.handle,
    ];
    handles.extend(max_moment_2.iter().map(|b| &b.handle));
    handles.extend(max_out.iter().map(|b| &b.handle));
    let vector = vector_size(client, len, dtype.size(), &handles);
    let vectors = len / vector;
    let cubes = vectors.div_ceil(CUBE_UNITS).clamp(1, MAX_CUBES);
    let accumulator = match dtype {
        DType::F64 => DType::F64,
        _ => DType::F32,
    };
    let dtypes: [StorageType; 2] = [dtype.into(), accumulator.into()];
    let (step, eps) = scalars.bias_corrected();
    let (count, dim, address) = (
        CubeCount::new_1d(cubes as u32),
        CubeDim::new_1d(CUBE_UNITS as u32),
        address_type(len),
    );

    // SAFETY: every buffer is contiguous with `len` elements (checked shapes, fresh outputs);
    // the kernels touch vectors below `vectors` only.
    unsafe {
        match (&max_moment_2, &max_out) {
            (Some(max), Some(max_out)) => adam_amsgrad_kernel::launch_unchecked::<R>(
                client,
                count,
                dim,
                address,
                vector,
                array_arg(&param, len),
                array_arg(&grad, len),
                array_arg(&moment_1, len),
                array_arg(&moment_2, len),
                array_arg(max, len),
                array_arg(&param_out, len),
                array_arg(&moment_1_out, len),
                array_arg(&moment_2_out, len),
                array_arg(max_out, len),
                vectors,
                scalars.beta_1,
                scalars.beta_2,
                step,
                eps,
                scalars.weight_decay,
                dtypes,
            ),
            _ => adam_kernel::launch_unchecked::<R>(
                client,
                count,
                dim,
                address,
                vector,
                array_arg(&param, len),
                array_arg(&grad, len),
                array_arg(&moment_1, len),
                array_arg(&moment_2, len),
                array_arg(&param_out, len),
                array_arg(&moment_1_out, len),
                array_arg(&moment_2_out, len),
                vectors,
                scalars.beta_1,
                scalars.beta_2,
                step,
                eps,
                scalars.weight_decay,
                dtypes,
            ),
        }
    }
    AdamUpdate {
        param: param_out,
        moment_1: moment_1_out,
        moment_2: moment_2_out,
        max_moment_2: max_out,
    }
}
