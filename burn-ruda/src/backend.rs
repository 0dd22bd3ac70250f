//! [`Ruda`]: the Burn backend, generated from the signature list of [`crate::signatures`].

use core::fmt;
use core::marker::PhantomData;

use burn_backend::{
    BackendTypes,
    ops::{ActivationOps, BoolTensorOps, FloatTensorOps, IntTensorOps, ModuleOps, QTensorOps},
    tensor::{BoolTensor, Device, FloatTensor, IntTensor, QuantizedTensor},
};
#[cfg(not(feature = "fusion"))]
use burn_cubecl::CubeBackend;
use burn_cubecl::{BoolElement, FloatElement, IntElement};

use crate::ops::{
    LayerNormBackend, RudaRuntime, embedding, faults, gelu, layer_norm, matmul,
    softmax::{self, Kind},
};
use crate::signatures::*;
use crate::transfer;

/// The backend `Ruda` delegates every operation to: Burn's fusion engine over burn-cubecl's
/// kernels (feature `fusion`, on by default; the fusers are ruda's choice, see
/// [`crate::fusion`]), or burn-cubecl's kernels directly.
#[cfg(feature = "fusion")]
pub type Inner<R, F, I, BT> = burn_fusion::Fusion<crate::fusion::RudaCube<R, F, I, BT>>;
/// The backend `Ruda` delegates every operation to: burn-cubecl's kernels (feature `fusion`
/// is off).
#[cfg(not(feature = "fusion"))]
pub type Inner<R, F, I, BT> = CubeBackend<R, F, I, BT>;

/// The runtime [`Ruda`] uses when none is named: [`crate::RudaWgpu`] with feature `wgpu`,
/// else [`crate::RudaCuda`].
#[cfg(feature = "wgpu")]
pub type DefaultRuntime = ruda_runtime::RudaWgpu;
/// The runtime [`Ruda`] uses when none is named: [`crate::RudaWgpu`] with feature `wgpu`,
/// else [`crate::RudaCuda`].
#[cfg(all(feature = "cuda", not(feature = "wgpu")))]
pub type DefaultRuntime = ruda_runtime::RudaCuda;

macro_rules! declare_ruda {
    ($($default:tt)*) => {
        /// The Burn backend for ruda devices.
        ///
        /// `Ruda<R, F, I, BT>` runs on the ruda runtime `R` (a [`ruda_runtime::Runtime`]:
        /// [`crate::RudaWgpu`], [`crate::RudaCuda`], or any CubeCL runtime with an
        /// `impl ruda_runtime::Runtime`), with float element `F`, int element `I` and bool
        /// element `BT`. Its tensors are those of [`Inner`] (Burn's fusion engine over
        /// burn-cubecl), and every operation is delegated to it, except the native ones of
        /// [`crate::ops`]: [`ModuleOps::layer_norm`] (when `R::has_native_layer_norm()`),
        /// softmax and log-softmax, GELU and its backward, the embedding table's gradient,
        /// and matrix products where the runtime has them; each falls back to Burn's own where
        /// it does not apply.
        ///
        /// Swap it in where a Burn program names its backend:
        ///
        /// ```no_run
        /// use burn_backend::{TensorData, ops::FloatTensorOps};
        ///
        /// // Before: type B = burn::backend::Wgpu;
        /// type B = burn_ruda::Ruda;
        /// let device = Default::default();
        /// let x = B::float_from_data(TensorData::new(vec![1.0f32, 2.0], [2]), &device);
        /// # let _ = x;
        /// ```
        ///
        /// For training, wrap it in [`crate::Autodiff`] (LayerNorm forward and backward are
        /// then one native kernel each) or in Burn's own `Autodiff` (composed LayerNorm).
        pub struct Ruda<R $($default)*> {
            _marker: PhantomData<fn() -> (R, F, I, BT)>,
        }
    };
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
declare_ruda!(= DefaultRuntime, F = f32, I = i32, BT = u32);
#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
declare_ruda!(, F = f32, I = i32, BT = u32);

impl<R, F, I, BT> Clone for Ruda<R, F, I, BT> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R, F, I, BT> Copy for Ruda<R, F, I, BT> {}

impl<R, F, I, BT> Default for Ruda<R, F, I, BT> {
    fn default() -> Self {
        Self {
            _marker: PhantomData,
        }
    }
}

impl<R, F, I, BT> fmt::Debug for Ruda<R, F, I, BT> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Ruda")
    }
}

impl<R: RudaRuntime, F: FloatElement, I: IntElement, BT: BoolElement> BackendTypes
    for Ruda<R, F, I, BT>
{
    type Device = <Inner<R, F, I, BT> as BackendTypes>::Device;
    type FloatTensorPrimitive = <Inner<R, F, I, BT> as BackendTypes>::FloatTensorPrimitive;
    type FloatElem = F;
    type IntTensorPrimitive = <Inner<R, F, I, BT> as BackendTypes>::IntTensorPrimitive;
    type IntElem = I;
    type BoolTensorPrimitive = <Inner<R, F, I, BT> as BackendTypes>::BoolTensorPrimitive;
    type BoolElem = BT;
    type QuantizedTensorPrimitive = <Inner<R, F, I, BT> as BackendTypes>::QuantizedTensorPrimitive;
}

with_backend_signatures!(delegate_backend! {
    {
        impl [R: RudaRuntime, F: FloatElement, I: IntElement, BT: BoolElement]
            Ruda<R, F, I, BT> => Inner<R, F, I, BT>;
        where [];
        own OwnOps
    }
});

/// Whether a move from `from` to `to` on runtime `R` must go through the host: the devices
/// differ and the runtime has no device-to-device transport (see [`crate::transfer`]).
fn through_host<R: RudaRuntime, D: PartialEq>(from: &D, to: &D) -> bool {
    from != to && !transfer::runtime_transfers_between_devices::<R>()
}

/// `Inner` of the same parameters, for the methods below.
type In<R, F, I, BT> = Inner<R, F, I, BT>;

impl<R: RudaRuntime, F: FloatElement, I: IntElement, BT: BoolElement> OwnOps for Ruda<R, F, I, BT> {
    // burn-cubecl's sync waits on the calling thread while CubeCL's device thread may fall
    // asleep (150 us steps) before the next launches; ruda's waits on the device thread
    // (`ruda_runtime::sync`). Under fusion, the queued operations are launched first, as
    // burn-fusion's own sync does.
    // A native operation that failed after its caller returned is reported here and at every
    // read of the device ([`ruda_runtime::faults`]).
    fn sync(device: &Device<Self>) -> Result<(), ExecutionError> {
        let wait = |device: &Device<Self>| {
            ruda_runtime::sync::<R>(device).map_err(|err| ExecutionError::WithContext {
                reason: format!("{err}"),
            })?;
            faults::check_device(device)
        };
        #[cfg(feature = "fusion")]
        {
            let target = device.clone();
            burn_fusion::get_client::<crate::fusion::RudaCube<R, F, I, BT>>(device)
                .sync(move || wait(&target))
        }
        #[cfg(not(feature = "fusion"))]
        wait(device)
    }

    fn float_into_data(
        tensor: FloatTensor<Self>,
    ) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send {
        let device = In::<R, F, I, BT>::float_device(&tensor);
        faults::checked_read(device, In::<R, F, I, BT>::float_into_data(tensor))
    }

    fn int_into_data(
        tensor: IntTensor<Self>,
    ) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send {
        let device = In::<R, F, I, BT>::int_device(&tensor);
        faults::checked_read(device, In::<R, F, I, BT>::int_into_data(tensor))
    }

    fn bool_into_data(
        tensor: BoolTensor<Self>,
    ) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send {
        let device = In::<R, F, I, BT>::bool_device(&tensor);
        faults::checked_read(device, In::<R, F, I, BT>::bool_into_data(tensor))
    }

    fn q_into_data(
        tensor: QuantizedTensor<Self>,
    ) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send {
        let device = In::<R, F, I, BT>::q_device(&tensor);
        faults::checked_read(device, In::<R, F, I, BT>::q_into_data(tensor))
    }

    fn tr_execute(
        transaction: TransactionPrimitive<Self>,
    ) -> impl Future<Output = Result<TransactionPrimitiveData, ExecutionError>> + Send {
        // The devices the transaction reads from.
        let mut devices: Vec<Device<Self>> = Vec::new();
        let floats = transaction
            .read_floats
            .iter()
            .map(In::<R, F, I, BT>::float_device);
        let ints = transaction
            .read_ints
            .iter()
            .map(In::<R, F, I, BT>::int_device);
        let bools = transaction
            .read_bools
            .iter()
            .map(In::<R, F, I, BT>::bool_device);
        let quantized = transaction
            .read_qfloats
            .iter()
            .map(In::<R, F, I, BT>::q_device);
        for device in floats.chain(ints).chain(bools).chain(quantized) {
            if !devices.contains(&device) {
                devices.push(device);
            }
        }
        let read = In::<R, F, I, BT>::tr_execute(crate::rebind::Rebind::rebind(transaction));
        async move {
            let data = read.await;
            for device in &devices {
                faults::check_device(device)?;
            }
            data
        }
    }

    fn layer_norm(
        tensor: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: Option<FloatTensor<Self>>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        layer_norm::check_args::<Self>(&tensor, &gamma, beta.as_ref(), epsilon);
        if layer_norm::native_applies::<Self>(&tensor) {
            <Self as LayerNormBackend>::layer_norm_native_output(tensor, gamma, beta, epsilon)
        } else {
            // Burn's composed LayerNorm (the trait's default), on the inner backend.
            <In<R, F, I, BT> as ModuleOps<In<R, F, I, BT>>>::layer_norm(
                tensor, gamma, beta, epsilon,
            )
        }
    }

    fn softmax(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        softmax::softmax::<Self>(tensor, dim, Kind::Softmax, In::<R, F, I, BT>::softmax)
    }

    fn log_softmax(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        softmax::softmax::<Self>(
            tensor,
            dim,
            Kind::LogSoftmax,
            In::<R, F, I, BT>::log_softmax,
        )
    }

    fn gelu(tensor: FloatTensor<Self>) -> FloatTensor<Self> {
        gelu::gelu::<R, In<R, F, I, BT>>(tensor, In::<R, F, I, BT>::gelu)
    }

    fn gelu_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        gelu::gelu_backward::<R, In<R, F, I, BT>>(x, grad, In::<R, F, I, BT>::gelu_backward)
    }

    // Burn's default: the softmax of `-tensor`, here `Ruda`'s own.
    fn softmin(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self> {
        <Self as OwnOps>::softmax(In::<R, F, I, BT>::float_neg(tensor), dim)
    }

    // Native on every runtime for small tables (Burn's default walks every token on one unit per
    // column); Burn's for large ones.
    fn embedding_backward(
        weights: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        indices: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        embedding::embedding_backward::<R, In<R, F, I, BT>>(weights, output_grad, indices)
    }

    // Native products where the runtime has them (cuBLAS on CUDA), Burn's elsewhere.
    fn float_matmul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        matmul::float_matmul::<R, In<R, F, I, BT>>(lhs, rhs)
    }

    fn linear(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
    ) -> FloatTensor<Self> {
        matmul::linear::<R, In<R, F, I, BT>>(x, weight, bias)
    }

    fn linear_x_backward(
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        matmul::linear_x_backward::<R, In<R, F, I, BT>>(weight, output_grad)
    }

    fn linear_weight_backward(
        x: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        matmul::linear_weight_backward::<R, In<R, F, I, BT>>(x, output_grad)
    }

    fn linear_bias_backward(output_grad: FloatTensor<Self>) -> FloatTensor<Self> {
        matmul::linear_bias_backward::<R, In<R, F, I, BT>>(output_grad)
    }

    fn float_to_device(tensor: FloatTensor<Self>, device: &Device<Self>) -> FloatTensor<Self> {
        if through_host::<R, _>(&Inner::<R, F, I, BT>::float_device(&tensor), device) {
            transfer::float_through_host::<Inner<R, F, I, BT>>(tensor, device)
        } else {
            Inner::<R, F, I, BT>::float_to_device(tensor, device)
        }
    }

    fn int_to_device(tensor: IntTensor<Self>, device: &Device<Self>) -> IntTensor<Self> {
        if through_host::<R, _>(&Inner::<R, F, I, BT>::int_device(&tensor), device) {
            transfer::int_through_host::<Inner<R, F, I, BT>>(tensor, device)
        } else {
            Inner::<R, F, I, BT>::int_to_device(tensor, device)
        }
    }

    fn bool_to_device(tensor: BoolTensor<Self>, device: &Device<Self>) -> BoolTensor<Self> {
        if through_host::<R, _>(&Inner::<R, F, I, BT>::bool_device(&tensor), device) {
            transfer::bool_through_host::<Inner<R, F, I, BT>>(tensor, device)
        } else {
            Inner::<R, F, I, BT>::bool_to_device(tensor, device)
        }
    }

    fn q_to_device(tensor: QuantizedTensor<Self>, device: &Device<Self>) -> QuantizedTensor<Self> {
        if through_host::<R, _>(&Inner::<R, F, I, BT>::q_device(&tensor), device) {
            transfer::quantized_through_host::<Inner<R, F, I, BT>>(tensor, device)
        } else {
            Inner::<R, F, I, BT>::q_to_device(tensor, device)
        }
    }
}
