//! [`Adam`]: Burn's Adam with one native operation per parameter ([`AdamBackend`]).

use burn_core as burn;

use burn::config::Config;
use burn::module::AutodiffModule;
use burn::tensor::{Tensor, TensorPrimitive, backend::AutodiffBackend, ops::Device};
use burn_optim::adaptor::OptimizerAdaptor;
use burn_optim::decay::WeightDecayConfig;
use burn_optim::grad_clipping::GradientClippingConfig;
use burn_optim::{AdamState, AdaptiveMomentumState, LearningRate, SimpleOptimizer};
use ruda_runtime::adam::AdamScalars;

use crate::ops::adam::{AdamBackend, AdamTensors};

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

/// Adam whose update of each parameter is one native operation: the arithmetic, options and
/// state records of Burn's `burn::optim::Adam`, on a backend whose inner backend is an
/// [`AdamBackend`] (`Ruda` on any runtime, under `burn_ruda::Autodiff` or Burn's `Autodiff`).
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

    /// The optimizer for module `M` on backend `B`, as Burn's `AdamConfig::init`.
    pub fn init<B: AutodiffBackend, M: AutodiffModule<B>>(&self) -> OptimizerAdaptor<Adam, M, B>
    where
        B::InnerBackend: AdamBackend,
    {
        let optimizer = OptimizerAdaptor::from(self.build());
        match &self.grad_clipping {
            Some(clipping) => optimizer.with_grad_clipping(clipping.init()),
            None => optimizer,
        }
    }
}

fn primitive<B: AdamBackend, const D: usize>(
    tensor: Tensor<B, D>,
) -> burn::tensor::ops::FloatTensor<B> {
    tensor.into_primitive().tensor()
}

fn tensor<B: AdamBackend, const D: usize>(
    primitive: burn::tensor::ops::FloatTensor<B>,
) -> Tensor<B, D> {
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
        let AdamTensors {
            param,
            moment_1,
            moment_2,
            max_moment_2,
        } = B::adam_step(
            scalars,
            primitive(param),
            primitive(grad),
            primitive(moment_1),
            primitive(moment_2),
            max_moment_2.map(primitive),
        );
        let mut momentum = AdaptiveMomentumState::new(time, tensor(moment_1), tensor(moment_2));
        momentum.max_moment_2 = max_moment_2.map(tensor).or(kept_max);
        (tensor(param), Some(AdamState::new(momentum)))
    }

    fn to_device<const D: usize>(mut state: Self::State<D>, device: &Device<B>) -> Self::State<D> {
        state.momentum = state.momentum.to_device(device);
        state
    }
}
