//! Adam updates as one operation ([`ruda_runtime::adam`]): the [`AdamBackend`] capability,
//! which [`crate::optim`] calls, and `Ruda`'s implementation through [`super::custom_op`].

use burn_backend::{Backend, TensorMetadata, ops::FloatTensorOps, tensor::FloatTensor};
use burn_cubecl::{BoolElement, FloatElement, IntElement, tensor::CubeTensor};
use ruda_runtime::TensorBuffer;
use ruda_runtime::adam::{self as kernels, AdamParameter, AdamScalars, validate};

use super::counters::{self, Kernel};
use super::{NativeKernel, RudaRuntime, custom_op};
use crate::backend::Ruda;

/// One parameter's tensors before an Adam step, and the step's scalars.
#[derive(Debug)]
pub struct AdamInputs<B: Backend> {
    /// The learning rate, the options and this parameter's step count.
    pub scalars: AdamScalars,
    /// The parameter.
    pub param: FloatTensor<B>,
    /// Its gradient.
    pub grad: FloatTensor<B>,
    /// The first moment of the previous step (zeros before the first).
    pub moment_1: FloatTensor<B>,
    /// The second moment of the previous step (zeros before the first).
    pub moment_2: FloatTensor<B>,
    /// AMSGrad's running maximum of the second moment (zeros before the first step); `None`
    /// without AMSGrad.
    pub max_moment_2: Option<FloatTensor<B>>,
}

/// One parameter's tensors after an Adam step.
#[derive(Debug)]
pub struct AdamTensors<B: Backend> {
    /// The parameter.
    pub param: FloatTensor<B>,
    /// The first moment.
    pub moment_1: FloatTensor<B>,
    /// The second moment.
    pub moment_2: FloatTensor<B>,
    /// AMSGrad's running maximum of the second moment, when one was given.
    pub max_moment_2: Option<FloatTensor<B>>,
}

/// A backend that runs Adam updates as native operations.
pub trait AdamBackend: Backend {
    /// One Adam step of each parameter of `updates`, all on one device, as ONE operation
    /// ([`ruda_runtime::adam`] gives the arithmetic): one registration on the host, where an
    /// operation per parameter costs host time on three threads a parameter. The results come
    /// in the order of `updates`.
    ///
    /// # Panics
    /// On the caller's thread, before anything is queued: when a tensor's shape or dtype differs
    /// from its parameter's, on a dtype other than f64, f32, f16 or bf16, when a step count is
    /// 0, or when the parameters are not all on one device.
    fn adam_steps(updates: Vec<AdamInputs<Self>>) -> Vec<AdamTensors<Self>>;

    /// One parameter's Adam step as one operation: [`AdamBackend::adam_steps`] of one.
    ///
    /// # Panics
    /// As [`AdamBackend::adam_steps`].
    fn adam_step(update: AdamInputs<Self>) -> AdamTensors<Self> {
        Self::adam_steps(vec![update])
            .pop()
            .unwrap_or_else(|| unreachable!("Adam: one result per parameter"))
    }
}

/// The kernels of one operation: for each parameter, inputs `[param, grad, m, v]` and AMSGrad's
/// `vmax` when its flag is set, outputs in the same order without the gradient.
/// [`kernels::adam_steps`] runs them in as few launches as the device's binding limit allows.
struct AdamKernel {
    /// Each parameter's scalars and whether it has AMSGrad's maximum.
    params: Vec<(AdamScalars, bool)>,
}

impl<R: RudaRuntime> NativeKernel<R> for AdamKernel {
    fn name(&self) -> &'static str {
        "ruda_adam"
    }

    fn launch(&self, inputs: Vec<CubeTensor<R>>) -> Vec<CubeTensor<R>> {
        let (client, device) = match inputs.first() {
            Some(param) => (param.client.clone(), param.device.clone()),
            None => unreachable!("Adam: queued with its inputs"),
        };
        let mut inputs = inputs.into_iter().map(TensorBuffer::from);
        let mut next = || {
            inputs
                .next()
                .unwrap_or_else(|| unreachable!("Adam: queued with its inputs"))
        };
        let parameters = self
            .params
            .iter()
            .map(|&(scalars, amsgrad)| AdamParameter {
                scalars,
                param: next(),
                grad: next(),
                moment_1: next(),
                moment_2: next(),
                max_moment_2: amsgrad.then(&mut next),
            })
            .collect();
        let steps = kernels::adam_steps(&client, parameters);
        for _ in 0..steps.kernels {
            counters::record(Kernel::Adam);
        }
        counters::record(Kernel::AdamOperation);
        steps
            .updates
            .into_iter()
            .flat_map(|update| {
                [update.param, update.moment_1, update.moment_2]
                    .into_iter()
                    .chain(update.max_moment_2)
            })
            .map(|out| out.into_cube_tensor(client.clone(), device.clone()))
            .collect()
    }
}

impl<R: RudaRuntime, F: FloatElement, I: IntElement, BT: BoolElement> AdamBackend
    for Ruda<R, F, I, BT>
{
    fn adam_steps(updates: Vec<AdamInputs<Self>>) -> Vec<AdamTensors<Self>> {
        let Some(first) = updates.first() else {
            return Vec::new();
        };
        let device = Self::float_device(&first.param);
        let mut params = Vec::with_capacity(updates.len());
        let mut inputs = Vec::with_capacity(updates.len() * 5);
        let mut outputs = Vec::with_capacity(updates.len() * 4);
        for (index, update) in updates.into_iter().enumerate() {
            let (shape, dtype) = (update.param.shape(), update.param.dtype());
            let max_layout = update
                .max_moment_2
                .as_ref()
                .map(|max| (max.shape(), max.dtype()));
            validate::check(
                (&shape, dtype),
                (&update.grad.shape(), update.grad.dtype()),
                (&update.moment_1.shape(), update.moment_1.dtype()),
                (&update.moment_2.shape(), update.moment_2.dtype()),
                max_layout.as_ref().map(|(shape, dtype)| (shape, *dtype)),
                update.scalars.time,
            );
            for tensor in [
                &update.param,
                &update.grad,
                &update.moment_1,
                &update.moment_2,
            ]
            .into_iter()
            .chain(update.max_moment_2.as_ref())
            {
                let on = Self::float_device(tensor);
                assert!(
                    on == device,
                    "Adam: the tensors of one operation are on one device, but parameter \
                     {index}'s are on {on:?} and parameter 0 is on {device:?}"
                );
            }
            let amsgrad = update.max_moment_2.is_some();
            params.push((update.scalars, amsgrad));
            let copies = if amsgrad { 4 } else { 3 };
            outputs.extend(std::iter::repeat_n((shape, dtype), copies));
            inputs.extend([update.param, update.grad, update.moment_1, update.moment_2]);
            inputs.extend(update.max_moment_2);
        }

        let amsgrad: Vec<bool> = params.iter().map(|&(_, amsgrad)| amsgrad).collect();
        let mut results =
            custom_op::run_many::<R, _>(AdamKernel { params }, inputs, outputs).into_iter();
        let mut next = || {
            results
                .next()
                .unwrap_or_else(|| unreachable!("Adam: every output was registered"))
        };
        amsgrad
            .into_iter()
            .map(|amsgrad| AdamTensors {
                param: next(),
                moment_1: next(),
                moment_2: next(),
                max_moment_2: amsgrad.then(&mut next),
            })
            .collect()
    }
}
