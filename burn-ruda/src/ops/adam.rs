//! One parameter's Adam update as one operation ([`ruda_runtime::adam`]): the [`AdamBackend`]
//! capability, which [`crate::optim::Adam`] calls, and `Ruda`'s implementation through
//! [`super::custom_op`].

use burn_backend::{Backend, TensorMetadata, tensor::FloatTensor};
use burn_cubecl::{BoolElement, FloatElement, IntElement, tensor::CubeTensor};
use ruda_runtime::TensorBuffer;
use ruda_runtime::adam::{self as kernels, AdamScalars, validate};

use super::counters::{self, Kernel};
use super::{NativeKernel, RudaRuntime, custom_op};
use crate::backend::Ruda;

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

/// A backend that runs one parameter's Adam update as one native operation.
pub trait AdamBackend: Backend {
    /// One Adam step of `param` ([`ruda_runtime::adam`] gives the arithmetic): the moments are
    /// those of the previous step (zeros before the first), `max_moment_2` AMSGrad's running
    /// maximum (zeros before the first step), `None` without AMSGrad.
    ///
    /// # Panics
    /// On the caller's thread, before anything is queued: when a tensor's shape or dtype differs
    /// from the parameter's, on a dtype other than f64, f32, f16 or bf16, or when
    /// `scalars.time` is 0.
    fn adam_step(
        scalars: AdamScalars,
        param: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        moment_1: FloatTensor<Self>,
        moment_2: FloatTensor<Self>,
        max_moment_2: Option<FloatTensor<Self>>,
    ) -> AdamTensors<Self>;
}

/// The kernel: inputs `[param, grad, m, v]` and AMSGrad's `vmax` when `amsgrad`, outputs in
/// the same order without the gradient.
struct AdamKernel {
    scalars: AdamScalars,
    amsgrad: bool,
}

impl<R: RudaRuntime> NativeKernel<R> for AdamKernel {
    fn name(&self) -> &'static str {
        if self.amsgrad {
            "ruda_adam_amsgrad"
        } else {
            "ruda_adam"
        }
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
        let (param, grad, m, v) = (next(), next(), next(), next());
        let max = self.amsgrad.then(next);
        let update = kernels::adam_step(&client, self.scalars, param, grad, m, v, max);
        counters::record(Kernel::Adam);
        [update.param, update.moment_1, update.moment_2]
            .into_iter()
            .chain(update.max_moment_2)
            .map(|out| out.into_cube_tensor(client.clone(), device.clone()))
            .collect()
    }
}

impl<R: RudaRuntime, F: FloatElement, I: IntElement, BT: BoolElement> AdamBackend
    for Ruda<R, F, I, BT>
{
    fn adam_step(
        scalars: AdamScalars,
        param: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        moment_1: FloatTensor<Self>,
        moment_2: FloatTensor<Self>,
        max_moment_2: Option<FloatTensor<Self>>,
    ) -> AdamTensors<Self> {
        let (shape, dtype) = (param.shape(), param.dtype());
        let max_layout = max_moment_2.as_ref().map(|max| (max.shape(), max.dtype()));
        validate::check(
            (&shape, dtype),
            (&grad.shape(), grad.dtype()),
            (&moment_1.shape(), moment_1.dtype()),
            (&moment_2.shape(), moment_2.dtype()),
            max_layout.as_ref().map(|(shape, dtype)| (shape, *dtype)),
            scalars.time,
        );

        let out = || (shape.clone(), dtype);
        let kernel = AdamKernel {
            scalars,
            amsgrad: max_moment_2.is_some(),
        };
        match max_moment_2 {
            Some(max) => {
                let [param, moment_1, moment_2, max] = custom_op::run::<R, _, 4>(
                    kernel,
                    vec![param, grad, moment_1, moment_2, max],
                    [out(), out(), out(), out()],
                );
                AdamTensors {
                    param,
                    moment_1,
                    moment_2,
                    max_moment_2: Some(max),
                }
            }
            None => {
                let [param, moment_1, moment_2] = custom_op::run::<R, _, 3>(
                    kernel,
                    vec![param, grad, moment_1, moment_2],
                    [out(), out(), out()],
                );
                AdamTensors {
                    param,
                    moment_1,
                    moment_2,
                    max_moment_2: None,
                }
            }
        }
    }
}
