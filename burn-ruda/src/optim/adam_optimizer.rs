//! [`AdamOptimizer`]: a training step's Adam updates queued as one operation a device.
//!
//! Burn's `OptimizerAdaptor` calls its optimizer once a parameter, so each parameter's update is
//! an operation of its own, which costs host time on the caller's and burn-fusion's threads
//! whatever its size. This optimizer walks the module twice: first it gathers every parameter's
//! inputs and queues their updates as one operation a device (cut at [`MAX_OPERATION_BYTES`]),
//! then it puts the results in place. Gradient clipping, device moves and records are the
//! adaptor's, so checkpoints move between the two and Burn's Adam.
//!
//! Where CubeCL's device thread paces a step, as in the transformer step measured so far, one
//! operation instead of 102 alone left the step's time where it was
//! (`docs/perf/training-step.md`): that thread still launched a kernel a parameter. Holding
//! every parameter of the step in one operation is what lets the kernels take many parameters a
//! launch ([`ruda_runtime::adam::adam_steps`]).

use core::fmt;
use core::marker::PhantomData;

use burn_core as burn;

use burn::module::{AutodiffModule, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Device, Tensor};
use burn_optim::adaptor::GradAdaptor;
use burn_optim::grad_clipping::GradientClipping;
use burn_optim::record::AdaptorRecord;
use burn_optim::{GradientsParams, LearningRate, MultiGradientsParams, Optimizer, SimpleOptimizer};
use hashbrown::HashMap;

use super::adam::{Adam, KeptState, PreparedStep};
use crate::ops::adam::{AdamBackend, AdamTensors};

/// Most parameter bytes one operation updates. An operation allocates all its outputs before it
/// frees any input, so a step cut in operations of this size holds at most three times this
/// much more memory at its peak (param and both moments; four with AMSGrad) than updates one
/// parameter at a time do.
pub const MAX_OPERATION_BYTES: usize = 128 << 20;

/// Burn's Adam with each training step's updates queued as one native operation a device (cut
/// at [`MAX_OPERATION_BYTES`] of parameters): [`super::AdamConfig::init`]'s optimizer.
///
/// Its results are those of `OptimizerAdaptor<Adam, M, B>` (one operation a parameter), and its
/// record is that adaptor's, which loads into Burn's own Adam and back.
pub struct AdamOptimizer<M, B>
where
    M: AutodiffModule<B>,
    B: AutodiffBackend,
    B::InnerBackend: AdamBackend,
{
    adam: Adam,
    records: HashMap<ParamId, AdaptorRecord<Adam, B>>,
    grad_clipping: Option<GradientClipping>,
    module: PhantomData<fn() -> M>,
}

impl<M, B> AdamOptimizer<M, B>
where
    M: AutodiffModule<B>,
    B: AutodiffBackend,
    B::InnerBackend: AdamBackend,
{
    pub(crate) fn new(adam: Adam, grad_clipping: Option<GradientClipping>) -> Self {
        Self {
            adam,
            records: HashMap::new(),
            grad_clipping,
            module: PhantomData,
        }
    }

    fn step_all(&mut self, lr: LearningRate, module: M, mut grads: GradAdaptor) -> M {
        let mut gather = Gather::<B> {
            adam: &self.adam,
            lr,
            grads: &mut grads,
            records: &mut self.records,
            clipping: self.grad_clipping.as_ref(),
            pending: Vec::new(),
        };
        module.visit(&mut gather);
        let operations = operations(
            gather
                .pending
                .iter()
                .map(|param| (&param.device, param.bytes)),
            MAX_OPERATION_BYTES,
        );
        let mut pending: Vec<Option<Pending<B>>> = gather.pending.into_iter().map(Some).collect();

        let mut updated = HashMap::with_capacity(pending.len());
        for operation in operations {
            let mut inputs = Vec::with_capacity(operation.len());
            let mut kept = Vec::with_capacity(operation.len());
            for index in operation {
                let Some(Pending { id, prepared, .. }) = pending[index].take() else {
                    unreachable!("Adam: each parameter is in one operation")
                };
                inputs.push(prepared.inputs);
                kept.push((id, prepared.kept));
            }
            let results = <B::InnerBackend as AdamBackend>::adam_steps(inputs);
            for ((id, kept), result) in kept.into_iter().zip(results) {
                updated.insert(id, (kept, result));
            }
        }

        module.map(&mut Apply::<B> {
            updated,
            records: &mut self.records,
        })
    }
}

impl<M, B> Clone for AdamOptimizer<M, B>
where
    M: AutodiffModule<B>,
    B: AutodiffBackend,
    B::InnerBackend: AdamBackend,
{
    fn clone(&self) -> Self {
        Self {
            adam: self.adam.clone(),
            records: self.records.clone(),
            grad_clipping: self.grad_clipping.clone(),
            module: PhantomData,
        }
    }
}

impl<M, B> fmt::Debug for AdamOptimizer<M, B>
where
    M: AutodiffModule<B>,
    B: AutodiffBackend,
    B::InnerBackend: AdamBackend,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdamOptimizer")
            .field("adam", &self.adam)
            .field("parameters_with_state", &self.records.len())
            .field("grad_clipping", &self.grad_clipping.is_some())
            .finish()
    }
}

impl<M, B> Optimizer<M, B> for AdamOptimizer<M, B>
where
    M: AutodiffModule<B>,
    B: AutodiffBackend,
    B::InnerBackend: AdamBackend,
{
    type Record = HashMap<ParamId, AdaptorRecord<Adam, B>>;

    fn step(&mut self, lr: LearningRate, module: M, grads: GradientsParams) -> M {
        self.step_all(lr, module, grads.into())
    }

    fn step_multi(&mut self, lr: LearningRate, module: M, grads: MultiGradientsParams) -> M {
        self.step_all(lr, module, grads.into())
    }

    fn to_record(&self) -> Self::Record {
        self.records.clone()
    }

    fn load_record(mut self, record: Self::Record) -> Self {
        self.records = record;
        self
    }
}

/// A parameter whose update is gathered, not yet queued.
struct Pending<B: AutodiffBackend>
where
    B::InnerBackend: AdamBackend,
{
    id: ParamId,
    device: Device<B::InnerBackend>,
    bytes: usize,
    prepared: PreparedStep<B::InnerBackend>,
}

/// The operations to queue, from each gathered parameter's `(device, bytes)`: indices of the
/// parameters of one device in the order the module lists them, cut where the next parameter
/// would pass `max_bytes` (a larger parameter is an operation of its own).
fn operations<D: PartialEq>(
    params: impl IntoIterator<Item = (D, usize)>,
    max_bytes: usize,
) -> Vec<Vec<usize>> {
    // (device, bytes so far, indices) of each device's open operation.
    let mut open: Vec<(D, usize, Vec<usize>)> = Vec::new();
    let mut done = Vec::new();
    for (index, (device, size)) in params.into_iter().enumerate() {
        let slot = match open.iter().position(|(open_on, ..)| *open_on == device) {
            Some(slot) => slot,
            None => {
                open.push((device, 0, Vec::new()));
                open.len() - 1
            }
        };
        let (_, bytes, indices) = &mut open[slot];
        if !indices.is_empty() && *bytes + size > max_bytes {
            done.push(core::mem::take(indices));
            *bytes = 0;
        }
        *bytes += size;
        indices.push(index);
    }
    done.extend(open.into_iter().map(|(.., indices)| indices));
    done
}

/// The first walk: each parameter with a gradient, its gradient (clipped) and state, as
/// `OptimizerAdaptor` prepares them, into `pending`.
struct Gather<'a, B: AutodiffBackend>
where
    B::InnerBackend: AdamBackend,
{
    adam: &'a Adam,
    lr: LearningRate,
    grads: &'a mut GradAdaptor,
    records: &'a mut HashMap<ParamId, AdaptorRecord<Adam, B>>,
    clipping: Option<&'a GradientClipping>,
    pending: Vec<Pending<B>>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Gather<'_, B>
where
    B::InnerBackend: AdamBackend,
{
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let id = param.id;
        let Some((grad, device)) = self.grads.remove::<B::InnerBackend, D>(id) else {
            return;
        };
        let mut tensor = param.val().inner();
        if tensor.device() != device {
            tensor = tensor.to_device(&device);
        }
        let grad = match self.clipping {
            Some(clipping) => clipping.clip_gradient(grad),
            None => grad,
        };
        let state = self
            .records
            .remove(&id)
            .map(|record| Adam::to_device(record.into_state::<D>(), &device));
        let bytes = tensor.shape().num_elements() * tensor.dtype().size();
        let prepared = self.adam.prepare(self.lr, tensor, grad, state);
        self.pending.push(Pending {
            id,
            device,
            bytes,
            prepared,
        });
    }
}

/// A parameter's update, queued: what its new state keeps, and the operation's results.
type Queued<B> = (KeptState<B>, AdamTensors<B>);

/// The second walk: each updated parameter replaced by its result, its state recorded.
struct Apply<'a, B: AutodiffBackend>
where
    B::InnerBackend: AdamBackend,
{
    updated: HashMap<ParamId, Queued<B::InnerBackend>>,
    records: &'a mut HashMap<ParamId, AdaptorRecord<Adam, B>>,
}

impl<B: AutodiffBackend> ModuleMapper<B> for Apply<'_, B>
where
    B::InnerBackend: AdamBackend,
{
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let (id, tensor, mapper) = param.consume();
        let Some((kept, result)) = self.updated.remove(&id) else {
            return Param::from_mapped_value(id, tensor, mapper);
        };
        let is_require_grad = tensor.is_require_grad();
        #[cfg(feature = "distributed")]
        let is_distributed = tensor.is_distributed();
        drop(tensor);

        let (inner, state) = Adam::finish::<B::InnerBackend, D>(kept, result);
        self.records.insert(id, AdaptorRecord::from_state(state));
        let mut tensor = Tensor::from_inner(inner);
        if is_require_grad {
            tensor = tensor.require_grad();
        }
        #[cfg(feature = "distributed")]
        if is_distributed {
            tensor = tensor.set_distributed(
                burn::tensor::backend::distributed::DistributedParamId::from(id.val()),
            );
        }
        Param::from_mapped_value(id, tensor, mapper)
    }
}

#[cfg(test)]
mod tests {
    use super::operations;

    #[test]
    fn one_operation_a_device_in_the_modules_order() {
        let params = [("a", 4), ("b", 4), ("a", 4), ("b", 4), ("a", 4)];
        assert_eq!(
            operations(params, 100),
            vec![vec![0, 2, 4], vec![1, 3]],
            "one operation a device, each in the order the module lists its parameters"
        );
        assert!(operations(Vec::<(u8, usize)>::new(), 100).is_empty());
    }

    #[test]
    fn operations_are_cut_at_the_byte_limit() {
        // 40 + 50 fits in 100, the next 20 would pass it; 150 alone passes it, on its own.
        let params = [(0, 40), (0, 50), (0, 20), (0, 150), (0, 10)];
        assert_eq!(
            operations(params, 100),
            vec![vec![0, 1], vec![2], vec![3], vec![4]]
        );
        // Exactly at the limit stays in one.
        assert_eq!(operations([(0, 60), (0, 40)], 100), vec![vec![0, 1]]);
    }
}
