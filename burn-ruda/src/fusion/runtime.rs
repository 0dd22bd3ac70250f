//! [`RudaFusionRuntime`]: burn-cubecl's fusion runtime with the fusers of a [`FuserSet`].

use core::fmt;
use core::marker::PhantomData;

use burn_cubecl_fusion::optim::{
    CubeOptimization, CubeOptimizationState,
    elemwise::{ElementWiseFuser, ElemwiseOptimization},
    matmul::{MatmulFuser, MatmulOptimization},
    reduce::{ReduceFuser, ReduceOptimization, ReduceSettings},
    reduce_broadcasted::{ReduceBroadcastedFuser, ReduceBroadcastedOptimization},
};
use burn_cubecl_fusion::{CubeFusionHandle, FallbackOperation};
use burn_fusion::stream::{Context, OrderedExecution};
use burn_fusion::{FusionRuntime, OperationFuser, Optimization, UnfusedOp};

use super::{FuserSet, ResetWhenUsed};
use crate::ops::RudaRuntime;

/// burn-fusion's runtime for [`crate::Ruda`] on the ruda runtime `R`: burn-cubecl-fusion's
/// optimizations, handles and plan states, as in burn-cubecl's own runtime, with the fusers
/// [`FuserSet::for_device`] chooses instead of all four on every device.
pub struct RudaFusionRuntime<R> {
    _runtime: PhantomData<fn() -> R>,
}

impl<R> fmt::Debug for RudaFusionRuntime<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RudaFusionRuntime")
    }
}

/// A fuser of the list, for runtime `R`.
type Fuser<R> = Box<dyn OperationFuser<CubeOptimization<R>>>;

impl<R: RudaRuntime> FusionRuntime for RudaFusionRuntime<R> {
    type OptimizationState = CubeOptimizationState;
    type Optimization = CubeOptimization<R>;
    type FusionHandle = CubeFusionHandle<R>;
    type FusionDevice = R::CubeDevice;

    fn fusers(device: R::CubeDevice) -> Vec<Fuser<R>> {
        fusers_of(FuserSet::for_device::<R>(&device), device)
    }
}

/// The fusers of `set` on `device`, in Burn's order (which decides ties between equal plans),
/// each a [`ResetWhenUsed`]: burn-fusion gets them from [`RudaFusionRuntime`].
pub fn fusers_of<R: RudaRuntime>(set: FuserSet, device: R::CubeDevice) -> Vec<Fuser<R>> {
    build(set, device, true)
}

/// The fusers of `set` on `device` as burn-cubecl's runtime gives them (no [`ResetWhenUsed`]),
/// to measure one against the other.
pub fn burn_fusers_of<R: RudaRuntime>(set: FuserSet, device: R::CubeDevice) -> Vec<Fuser<R>> {
    build(set, device, false)
}

fn build<R: RudaRuntime>(set: FuserSet, device: R::CubeDevice, skip_resets: bool) -> Vec<Fuser<R>> {
    fn boxed<R: RudaRuntime, F>(fuser: F, skip_resets: bool) -> Fuser<R>
    where
        F: OperationFuser<CubeOptimization<R>> + Clone + 'static,
    {
        if skip_resets {
            Box::new(ResetWhenUsed::new(fuser))
        } else {
            Box::new(fuser)
        }
    }
    let mut fusers: Vec<Fuser<R>> = Vec::with_capacity(4);
    if set.elementwise {
        fusers.push(boxed(ElementWiseFuser::new(device.clone()), skip_resets));
    }
    if set.matmul {
        fusers.push(boxed(MatmulFuser::new(device.clone()), skip_resets));
    }
    if set.reduce {
        let fuser = ReduceFuser::new(device.clone(), ReduceSettings::Always);
        fusers.push(boxed(fuser, skip_resets));
    }
    if set.reduce_broadcasted {
        fusers.push(boxed(ReduceBroadcastedFuser::new(device), skip_resets));
    }
    fusers
}

/// An operation of a fused plan, run alone where the plan's kernel does not apply (the matmul
/// and reduce optimizations fall back to their operations one by one).
struct Unfused<R: RudaRuntime>(UnfusedOp<RudaFusionRuntime<R>>);

impl<R: RudaRuntime> FallbackOperation<R> for Unfused<R> {
    fn run(&self, context: &mut Context<CubeFusionHandle<R>>) {
        self.0.execute(&mut context.handles);
    }
}

impl<R: RudaRuntime> Optimization<RudaFusionRuntime<R>> for CubeOptimization<R> {
    fn execute(
        &mut self,
        context: &mut Context<CubeFusionHandle<R>>,
        execution: &OrderedExecution<RudaFusionRuntime<R>>,
    ) {
        let fallback = |index: usize| -> Box<dyn FallbackOperation<R>> {
            Box::new(Unfused(execution.operation_within_optimization(index)))
        };
        match self {
            Self::ElementWise(op) => op.execute(context),
            Self::Matmul(op) => op.execute(context, fallback),
            Self::Reduce(op) => op.execute(context, fallback),
            Self::ReduceBroadcasted(op) => op.execute(context, fallback),
        }
    }

    fn to_state(&self) -> CubeOptimizationState {
        self.to_opt_state()
    }

    fn from_state(device: &R::CubeDevice, state: CubeOptimizationState) -> Self {
        match state {
            CubeOptimizationState::ElementWise(state) => {
                Self::ElementWise(ElemwiseOptimization::from_state(device, state))
            }
            CubeOptimizationState::Matmul(state) => {
                Self::Matmul(MatmulOptimization::from_state(device, state))
            }
            CubeOptimizationState::Reduce(state) => {
                Self::Reduce(ReduceOptimization::from_state(device, state))
            }
            CubeOptimizationState::ReduceBroadcasted(state) => {
                Self::ReduceBroadcasted(ReduceBroadcastedOptimization::from_state(device, state))
            }
        }
    }
}
