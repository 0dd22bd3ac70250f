//! [`AdamConfig`] and [`Adam`]: Burn's Adam options, and one parameter's update as a native
//! operation ([`AdamBackend`]); [`super::AdamOptimizer`] queues a whole step's as one.

use burn_core as burn;

use burn::config::Config;
use burn::module::AutodiffModule;
use burn::tensor::ops::{Device, FloatTensor};
use burn::tensor::{Tensor, TensorPrimitive, backend::AutodiffBackend};
use burn_optim::decay::WeightDecayConfig;
use burn_optim::grad_clipping::GradientClippingConfig;
use burn_optim::{AdamState, AdaptiveMomentumState, LearningRate, SimpleOptimizer};
use ruda_runtime::adam::AdamScalars;

use super::AdamOptimizer;
use crate::ops::adam::{AdamBackend, AdamInputs, AdamTensors};

/// The configuration of [`Adam`]: the fields, defaults and builders of Burn's `AdamConfig`.
///
/// ```no_run
/// use burn_core::module::AutodiffModule;
/// use burn_ruda::optim::AdamConfig;
///
/// type B = burn_ruda::Autodiff<burn_ruda::Ruda>;
///
/// fn train<M: AutodiffModule<B>>(model: M) {
///     // Before: burn::optim::AdamConfig::new().with_beta_2(0.98).init::<B, M>()
///     let optimizer = AdamConfig::new().with_beta_2(0.98).init::<B, M>();
///     # let _ = (model, optimizer);
/// }
/// ```
#[derive(Config, Debug)]
pub struct AdamConfig {
    /// The first moment's decay.
    #[config(default = 0.9)]
    pub beta_1: f32,
    /// The second moment's decay.
    #[config(default = 0.999)]
    pub beta_2: f32,
    /// Added to the denominator for numerical stability (after bias correction, as Burn).
    #[config(default = 1e-5)]
    pub epsilon: f32,
    /// Whether to use AMSGrad (the running maximum of the second moment).
    #[config(default = false)]
    pub amsgrad: bool,
    /// Weight decay (an L2 penalty added to the gradient).
    pub weight_decay: Option<WeightDecayConfig>,
    /// Gradient clipping, before the update.
    pub grad_clipping: Option<GradientClippingConfig>,
}

/// Adam whose update of a parameter is one native kernel: the arithmetic, options and state
/// records of Burn's `burn::optim::Adam`, on a backend whose inner backend is an
/// [`AdamBackend`] (`Ruda` on any runtime, under `burn_ruda::Autodiff` or Burn's `Autodiff`).
///
/// [`AdamConfig::init`] gives the optimizer to train with, [`AdamOptimizer`], which queues a
/// step's updates as one operation a device. As a `SimpleOptimizer` in Burn's
/// `OptimizerAdaptor` (`OptimizerAdaptor::from(config.build())`) each parameter is one
/// operation, with the same results and records.
#[derive(Clone, Debug)]
pub struct Adam {
    beta_1: f32,
    beta_2: f32,
    epsilon: f32,
    amsgrad: bool,
    weight_decay: f32,
}

impl AdamConfig {
    /// The optimizer this configuration describes.
    pub fn build(&self) -> Adam {
        Adam {
            beta_1: self.beta_1,
            beta_2: self.beta_2,
            epsilon: self.epsilon,
            amsgrad: self.amsgrad,
            weight_decay: self
                .weight_decay
                .as_ref()
                .map_or(0.0, |decay| decay.penalty),
        }
    }

    /// The optimizer for module `M` on backend `B`, as Burn's `AdamConfig::init`: each step's
    /// updates queued as one operation a device ([`AdamOptimizer`]).
    pub fn init<B: AutodiffBackend, M: AutodiffModule<B>>(&self) -> AdamOptimizer<M, B>
    where
        B::InnerBackend: AdamBackend,
    {
        AdamOptimizer::new(
            self.build(),
            self.grad_clipping.as_ref().map(|clipping| clipping.init()),
        )
    }
}

/// One parameter's update, ready to queue: the operation's inputs, and what its new state takes
/// besides the results.
pub(crate) struct PreparedStep<B: AdamBackend> {
    pub(crate) inputs: AdamInputs<B>,
    pub(crate) kept: KeptState<B>,
}

/// What a parameter's new state takes besides the update's results.
pub(crate) struct KeptState<B: AdamBackend> {
    /// The step count of this update.
    time: usize,
    /// A saved AMSGrad maximum that a step without AMSGrad passes through untouched.
    max_moment_2: Option<FloatTensor<B>>,
}

impl Adam {
    /// The inputs of `param`'s update from its gradient and saved state.
    pub(crate) fn prepare<B: AdamBackend, const D: usize>(
        &self,
        lr: LearningRate,
        param: Tensor<B, D>,
        grad: Tensor<B, D>,
        state: Option<AdamState<B, D>>,
    ) -> PreparedStep<B> {
        // Before the first step the moments are zeros, which gives Burn's first moments
        // `(1 - beta) * g` and `(1 - beta) * g^2`; so is AMSGrad's maximum, which gives
        // Burn's `max(v', v')` there and for a state saved without AMSGrad. Without AMSGrad a
        // saved maximum passes through untouched, as in Burn's Adam, so switching AMSGrad off
        // and on again resumes from it.
        let (time, moment_1, moment_2, max_moment_2) = match state {
            Some(state) => {
                let momentum = state.momentum;
                (
                    momentum.time + 1,
                    momentum.moment_1,
                    momentum.moment_2,
                    momentum.max_moment_2,
                )
            }
            None => (1, grad.zeros_like(), grad.zeros_like(), None),
        };
        let (max_moment_2, kept_max) = if self.amsgrad {
            (
                Some(max_moment_2.unwrap_or_else(|| grad.zeros_like())),
                None,
            )
        } else {
            (None, max_moment_2)
        };
        let scalars = AdamScalars {
            lr,
            beta_1: self.beta_1,
            beta_2: self.beta_2,
            epsilon: self.epsilon,
            weight_decay: self.weight_decay,
            time,
        };
        PreparedStep {
            inputs: AdamInputs {
                scalars,
                param: primitive(param),
                grad: primitive(grad),
                moment_1: primitive(moment_1),
                moment_2: primitive(moment_2),
                max_moment_2: max_moment_2.map(primitive),
            },
            kept: KeptState {
                time,
                max_moment_2: kept_max.map(primitive),
            },
        }
    }

    /// The parameter and its new state, from the update's results.
    pub(crate) fn finish<B: AdamBackend, const D: usize>(
        kept: KeptState<B>,
        updated: AdamTensors<B>,
    ) -> (Tensor<B, D>, AdamState<B, D>) {
        let AdamTensors {
            param,
            moment_1,
            moment_2,
            max_moment_2,
        } = updated;
        let mut momentum =
            AdaptiveMomentumState::new(kept.time, tensor(moment_1), tensor(moment_2));
        momentum.max_moment_2 = max_moment_2.or(kept.max_moment_2).map(tensor);
        (tensor(param), AdamState::new(momentum))
    }
}

fn primitive<B: AdamBackend, const D: usize>(tensor: Tensor<B, D>) -> FloatTensor<B> {
    tensor.into_primitive().tensor()
}

fn tensor<B: AdamBackend, const D: usize>(primitive: FloatTensor<B>) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(primitive))
}

impl<B: AdamBackend> SimpleOptimizer<B> for Adam {
    type State<const D: usize> = AdamState<B, D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        param: Tensor<B, D>,
        grad: Tensor<B, D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<B, D>, Option<Self::State<D>>) {
        let PreparedStep { inputs, kept } = self.prepare(lr, param, grad, state);
        let (param, state) = Self::finish(kept, B::adam_step(inputs));
        (param, Some(state))
    }

    fn to_device<const D: usize>(mut state: Self::State<D>, device: &Device<B>) -> Self::State<D> {
        state.momentum = state.momentum.to_device(device);
        state
    }
}
