//! Moving backend-generic structs between two backends that share their tensor primitives.
//!
//! A delegating backend has the same primitives as the backend it wraps, so a
//! `FloatTensor<Wrapper>` *is* a `FloatTensor<Inner>`. The few structs of Burn's op traits that
//! are generic over the backend (`TensorPrimitive<B>`, `MaxPool2dWithIndices<B>`,
//! `TransactionPrimitive<B>`, ...) are nominally different types for the two backends; [`Rebind`]
//! rebuilds them field by field, moving the primitives without touching them.

use burn_backend::{
    Backend, TensorPrimitive,
    ops::{
        DeformConv2dBackward, MaxPool1dBackward, MaxPool1dWithIndices, MaxPool2dBackward,
        MaxPool2dWithIndices, TransactionPrimitive,
    },
    quantization::QuantizationParametersPrimitive,
    tensor::{BoolTensor, FloatTensor, IntTensor, QuantizedTensor},
};

/// Rebuilds a backend-generic value for another backend with the same primitives.
pub trait Rebind<Target> {
    /// Moves every primitive of `self` into the same struct for the target backend.
    fn rebind(self) -> Target;
}

/// `To` has the same float tensor primitive as `From`.
pub trait SameFloat<From: Backend>: Backend<FloatTensorPrimitive = FloatTensor<From>> {}
impl<From: Backend, To: Backend<FloatTensorPrimitive = FloatTensor<From>>> SameFloat<From> for To {}

/// `To` has the same float, int, bool and quantized tensor primitives as `From`.
pub trait SamePrimitives<From: Backend>:
    Backend<
        FloatTensorPrimitive = FloatTensor<From>,
        IntTensorPrimitive = IntTensor<From>,
        BoolTensorPrimitive = BoolTensor<From>,
        QuantizedTensorPrimitive = QuantizedTensor<From>,
    >
{
}
impl<From, To> SamePrimitives<From> for To
where
    From: Backend,
    To: Backend<
            FloatTensorPrimitive = FloatTensor<From>,
            IntTensorPrimitive = IntTensor<From>,
            BoolTensorPrimitive = BoolTensor<From>,
            QuantizedTensorPrimitive = QuantizedTensor<From>,
        >,
{
}

impl<From, To> Rebind<TensorPrimitive<To>> for TensorPrimitive<From>
where
    From: Backend,
    To: Backend<
            FloatTensorPrimitive = FloatTensor<From>,
            QuantizedTensorPrimitive = QuantizedTensor<From>,
        >,
{
    fn rebind(self) -> TensorPrimitive<To> {
        match self {
            TensorPrimitive::Float(tensor) => TensorPrimitive::Float(tensor),
            TensorPrimitive::QFloat(tensor) => TensorPrimitive::QFloat(tensor),
        }
    }
}

impl<From: Backend, To: SameFloat<From>> Rebind<QuantizationParametersPrimitive<To>>
    for QuantizationParametersPrimitive<From>
{
    fn rebind(self) -> QuantizationParametersPrimitive<To> {
        QuantizationParametersPrimitive {
            scales: self.scales,
        }
    }
}

impl<From: Backend, To: SamePrimitives<From>> Rebind<MaxPool1dWithIndices<To>>
    for MaxPool1dWithIndices<From>
{
    fn rebind(self) -> MaxPool1dWithIndices<To> {
        MaxPool1dWithIndices::new(self.output, self.indices)
    }
}

impl<From: Backend, To: SamePrimitives<From>> Rebind<MaxPool2dWithIndices<To>>
    for MaxPool2dWithIndices<From>
{
    fn rebind(self) -> MaxPool2dWithIndices<To> {
        MaxPool2dWithIndices::new(self.output, self.indices)
    }
}

impl<From: Backend, To: SameFloat<From>> Rebind<MaxPool1dBackward<To>> for MaxPool1dBackward<From> {
    fn rebind(self) -> MaxPool1dBackward<To> {
        MaxPool1dBackward::new(self.x_grad)
    }
}

impl<From: Backend, To: SameFloat<From>> Rebind<MaxPool2dBackward<To>> for MaxPool2dBackward<From> {
    fn rebind(self) -> MaxPool2dBackward<To> {
        MaxPool2dBackward::new(self.x_grad)
    }
}

impl<From: Backend, To: SameFloat<From>> Rebind<DeformConv2dBackward<To>>
    for DeformConv2dBackward<From>
{
    fn rebind(self) -> DeformConv2dBackward<To> {
        DeformConv2dBackward::new(
            self.x_grad,
            self.offset_grad,
            self.weight_grad,
            self.mask_grad,
            self.bias_grad,
        )
    }
}

impl<From: Backend, To: SamePrimitives<From>> Rebind<TransactionPrimitive<To>>
    for TransactionPrimitive<From>
{
    /// The read order of a transaction is kept by its caller
    /// (`TransactionPrimitive::execute_async` takes it out before calling `tr_execute`), so
    /// rebuilding from the four lists loses nothing `tr_execute` uses.
    fn rebind(self) -> TransactionPrimitive<To> {
        TransactionPrimitive::new(
            self.read_floats,
            self.read_qfloats,
            self.read_ints,
            self.read_bools,
        )
    }
}
