//! [`RudaCube`]: burn-cubecl's backend under a name of ours, so that burn-fusion runs it with
//! [`RudaFusionRuntime`].

use core::fmt;
use core::marker::PhantomData;

use burn_backend::{
    BackendTypes, DType,
    ops::{ActivationOps, BoolTensorOps, FloatTensorOps, IntTensorOps, ModuleOps, QTensorOps},
    tensor::{BoolTensor, FloatTensor, IntTensor, QuantizedTensor},
};
use burn_cubecl::{BoolElement, CubeBackend, FloatElement, IntElement};
use burn_cubecl_fusion::CubeFusionHandle;
use burn_fusion::FusionBackend;
use burn_ir::{BackendIr, TensorHandle};

use super::RudaFusionRuntime;
use crate::ops::RudaRuntime;
use crate::signatures::*;

/// burn-cubecl's `CubeBackend<R, F, I, BT>`, every method delegated to it, with the same
/// tensors, handles and kernels. It exists for one difference: as a [`FusionBackend`] its
/// runtime is [`RudaFusionRuntime`], whose fusers ruda chooses ([`super::FuserSet`]).
/// [`crate::Inner`] is `burn_fusion::Fusion<RudaCube<R, F, I, BT>>`.
pub struct RudaCube<R, F = f32, I = i32, BT = u32> {
    _marker: Params<R, F, I, BT>,
}

/// The type parameters, held without a value of any (so `RudaCube` is `Send`, `Sync` and `Copy`
/// whatever they are).
type Params<R, F, I, BT> = PhantomData<fn() -> (R, F, I, BT)>;

impl<R, F, I, BT> Clone for RudaCube<R, F, I, BT> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R, F, I, BT> Copy for RudaCube<R, F, I, BT> {}

impl<R, F, I, BT> Default for RudaCube<R, F, I, BT> {
    fn default() -> Self {
        Self {
            _marker: PhantomData,
        }
    }
}

impl<R, F, I, BT> fmt::Debug for RudaCube<R, F, I, BT> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RudaCube")
    }
}

/// burn-cubecl's backend of the same parameters.
type Cube<R, F, I, BT> = CubeBackend<R, F, I, BT>;

impl<R: RudaRuntime, F: FloatElement, I: IntElement, BT: BoolElement> BackendTypes
    for RudaCube<R, F, I, BT>
{
    type Device = <Cube<R, F, I, BT> as BackendTypes>::Device;
    type FloatTensorPrimitive = <Cube<R, F, I, BT> as BackendTypes>::FloatTensorPrimitive;
    type FloatElem = F;
    type IntTensorPrimitive = <Cube<R, F, I, BT> as BackendTypes>::IntTensorPrimitive;
    type IntElem = I;
    type BoolTensorPrimitive = <Cube<R, F, I, BT> as BackendTypes>::BoolTensorPrimitive;
    type BoolElem = BT;
    type QuantizedTensorPrimitive = <Cube<R, F, I, BT> as BackendTypes>::QuantizedTensorPrimitive;
}

with_backend_signatures!(delegate_backend! {
    {
        impl [R: RudaRuntime, F: FloatElement, I: IntElement, BT: BoolElement]
            RudaCube<R, F, I, BT> => Cube<R, F, I, BT>;
        where [];
        forward
    }
});

impl<R: RudaRuntime, F: FloatElement, I: IntElement, BT: BoolElement> BackendIr
    for RudaCube<R, F, I, BT>
{
    type Handle = CubeFusionHandle<R>;

    fn float_tensor(handle: TensorHandle<Self::Handle>) -> FloatTensor<Self> {
        Cube::<R, F, I, BT>::float_tensor(handle)
    }

    fn int_tensor(handle: TensorHandle<Self::Handle>) -> IntTensor<Self> {
        Cube::<R, F, I, BT>::int_tensor(handle)
    }

    fn bool_tensor(handle: TensorHandle<Self::Handle>) -> BoolTensor<Self> {
        Cube::<R, F, I, BT>::bool_tensor(handle)
    }

    fn quantized_tensor(handle: TensorHandle<Self::Handle>) -> QuantizedTensor<Self> {
        Cube::<R, F, I, BT>::quantized_tensor(handle)
    }

    fn float_tensor_handle(tensor: FloatTensor<Self>) -> Self::Handle {
        Cube::<R, F, I, BT>::float_tensor_handle(tensor)
    }

    fn int_tensor_handle(tensor: IntTensor<Self>) -> Self::Handle {
        Cube::<R, F, I, BT>::int_tensor_handle(tensor)
    }

    fn bool_tensor_handle(tensor: BoolTensor<Self>) -> Self::Handle {
        Cube::<R, F, I, BT>::bool_tensor_handle(tensor)
    }

    fn quantized_tensor_handle(tensor: QuantizedTensor<Self>) -> Self::Handle {
        Cube::<R, F, I, BT>::quantized_tensor_handle(tensor)
    }
}

impl<R: RudaRuntime, F: FloatElement, I: IntElement, BT: BoolElement> FusionBackend
    for RudaCube<R, F, I, BT>
{
    type FusionRuntime = RudaFusionRuntime<R>;
    type FullPrecisionBackend = RudaCube<R, f32, i32, BT>;

    fn cast_float(tensor: FloatTensor<Self>, dtype: DType) -> Self::Handle {
        <Cube<R, F, I, BT> as FusionBackend>::cast_float(tensor, dtype)
    }
}
