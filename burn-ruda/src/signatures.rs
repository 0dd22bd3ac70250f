//! The one list of Burn 0.21 backend signatures, and the macros that turn it into delegating
//! trait implementations.
//!
//! [`with_backend_signatures!`] holds every method of every trait a Burn [`Backend`] must
//! implement (`Backend` itself, the float, int, bool, module, activation, quantized and
//! transaction ops), each written once, as the trait declares it with `B` spelled `Self`.
//! It hands the list to a callback macro; [`delegate_backend!`] is the callback that writes,
//! for a wrapper type, one `impl` per trait whose every method forwards its arguments, by name
//! and in declaration order, to the same method of an inner backend. [`crate::Ruda`],
//! [`crate::Autodiff`] and `crate::fusion::RudaCube` (which forwards every method, `#[own]`
//! ones included: its context says `forward` instead of `own Trait`) are generated from this
//! list, so no method is wired by hand.
//!
//! Notation inside the list:
//! - `#[own] fn ...` — the wrapper implements this method itself, through [`OwnOps`], the trait
//!   of every `#[own]` method, generated from the list by [`declare_own_ops!`]
//!   (`Backend::sync` and every read, which report a native operation's late failure;
//!   `ModuleOps::layer_norm`, `ModuleOps::embedding_backward`, the softmaxes, `gelu` and
//!   `gelu_backward` of `ActivationOps`, the four `*_to_device`, `float_matmul` and the four
//!   `linear*` methods);
//! - `#[rebind] arg: T<Self>` / `-> T<Self> => rebind` — a struct generic over the backend
//!   (`TensorPrimitive<B>`, `MaxPool2dWithIndices<B>`, ...) whose fields are primitives: it is
//!   rebuilt field by field for the other backend (see [`crate::rebind`]);
//! - `fn name[<generics>](...) where [bounds];` — method-level generics and bounds.
//!
//! When Burn's traits change, the compiler reports the methods missing from (or unknown to)
//! this list: the generated impls name every method explicitly.

#![allow(unused_imports)]

pub(crate) use burn_backend::{
    Backend, DType, DTypeUsageSet, Distribution, ExecutionError, Scalar, TensorData,
    TensorPrimitive,
    ops::{
        ActivationOps, AttentionModuleOptions, BoolTensorOps, ConvOptions, ConvTransposeOptions,
        DeformConv2dBackward, DeformConvOptions, FloatTensorOps, GridSampleOptions, IntTensorOps,
        InterpolateOptions, MaxPool1dBackward, MaxPool1dWithIndices, MaxPool2dBackward,
        MaxPool2dWithIndices, ModuleOps, QTensorOps, TransactionOps, TransactionPrimitive,
        TransactionPrimitiveData, UnfoldOptions,
    },
    quantization::{QuantScheme, QuantizationParametersPrimitive},
    tensor::{BoolTensor, Device, FloatTensor, IndexingUpdateOp, IntTensor, QuantizedTensor},
};
pub(crate) use burn_backend::{BoolDType, FloatDType, IntDType, Shape, Slice};
pub(crate) use core::future::Future;
pub(crate) use core::ops::Range;

/// `with_backend_signatures!(callback! { { context } })` calls `callback!` with the context
/// token tree `{ context }` (forwarded untouched) followed by the list of every Burn backend
/// method signature.
macro_rules! with_backend_signatures {
    ($callback:ident ! { $ctx:tt }) => {
        $callback! { $ctx
        backend Backend {
            fn ad_enabled(device: &Self::Device) -> bool;
            fn memory_persistent_allocations[<Output: Send, Input: Send, Func: Fn(Input) -> Output + Send>](device: &Self::Device, input: Input, func: Func) -> Output;
            fn memory_cleanup(device: &Self::Device);
            fn name(device: &Self::Device) -> String;
            fn seed(device: &Self::Device, seed: u64);
            #[own] fn sync(device: &Self::Device) -> Result<(), ExecutionError>;
            fn staging[<'a, Iter>](data: Iter, device: &Self::Device) where [Iter: Iterator<Item = &'a mut TensorData>];
            fn supports_dtype(device: &Self::Device, dtype: DType) -> bool;
            fn dtype_usage(device: &Self::Device, dtype: DType) -> DTypeUsageSet;
            fn device_count(type_id: u16) -> usize;
        }
        ops FloatTensorOps {
            fn float_from_data(data: TensorData, device: &Device<Self>) -> FloatTensor<Self>;
            fn float_random(shape: Shape, distribution: Distribution, device: &Device<Self>, dtype: FloatDType) -> FloatTensor<Self>;
            fn float_zeros(shape: Shape, device: &Device<Self>, dtype: FloatDType) -> FloatTensor<Self>;
            fn float_ones(shape: Shape, device: &Device<Self>, dtype: FloatDType) -> FloatTensor<Self>;
            fn float_full(shape: Shape, fill_value: Scalar, device: &Device<Self>, dtype: FloatDType) -> FloatTensor<Self>;
            #[own] fn float_into_data(tensor: FloatTensor<Self>) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send;
            fn float_device(tensor: &FloatTensor<Self>) -> Device<Self>;
            #[own] fn float_to_device(tensor: FloatTensor<Self>, device: &Device<Self>) -> FloatTensor<Self>;
            fn float_into_int(tensor: FloatTensor<Self>, out_dtype: IntDType) -> IntTensor<Self>;
            fn float_empty(shape: Shape, device: &Device<Self>, dtype: FloatDType) -> FloatTensor<Self>;
            fn float_repeat_dim(tensor: FloatTensor<Self>, dim: usize, times: usize) -> FloatTensor<Self>;
            fn float_add(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_add_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
            fn float_clamp_min(tensor: FloatTensor<Self>, min: Scalar) -> FloatTensor<Self>;
            fn float_clamp_max(tensor: FloatTensor<Self>, max: Scalar) -> FloatTensor<Self>;
            fn float_clamp(tensor: FloatTensor<Self>, min: Scalar, max: Scalar) -> FloatTensor<Self>;
            fn float_sub(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_sub_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
            fn float_mul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_mul_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
            fn float_div(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_div_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
            fn float_remainder(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_remainder_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
            #[own] fn float_matmul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_cross(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
            fn float_neg(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_recip(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_transpose(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_swap_dims(tensor: FloatTensor<Self>, dim1: usize, dim2: usize) -> FloatTensor<Self>;
            fn float_permute(tensor: FloatTensor<Self>, axes: &[usize]) -> FloatTensor<Self>;
            fn float_flip(tensor: FloatTensor<Self>, axes: &[usize]) -> FloatTensor<Self>;
            fn float_reshape(tensor: FloatTensor<Self>, shape: Shape) -> FloatTensor<Self>;
            fn float_gather(dim: usize, tensor: FloatTensor<Self>, indices: IntTensor<Self>) -> FloatTensor<Self>;
            fn float_scatter_add(dim: usize, tensor: FloatTensor<Self>, indices: IntTensor<Self>, value: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_scatter_nd(data: FloatTensor<Self>, indices: IntTensor<Self>, values: FloatTensor<Self>, reduction: IndexingUpdateOp) -> FloatTensor<Self>;
            fn float_gather_nd(data: FloatTensor<Self>, indices: IntTensor<Self>) -> FloatTensor<Self>;
            fn float_select(tensor: FloatTensor<Self>, dim: usize, indices: IntTensor<Self>) -> FloatTensor<Self>;
            fn float_select_add(tensor: FloatTensor<Self>, dim: usize, indices: IntTensor<Self>, value: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_slice(tensor: FloatTensor<Self>, slices: &[Slice]) -> FloatTensor<Self>;
            fn float_slice_assign(tensor: FloatTensor<Self>, slices: &[Slice], value: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_mask_where(tensor: FloatTensor<Self>, mask: BoolTensor<Self>, value: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_mask_fill(tensor: FloatTensor<Self>, mask: BoolTensor<Self>, value: Scalar) -> FloatTensor<Self>;
            fn float_equal(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn float_not_equal(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn float_equal_elem(lhs: FloatTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn float_not_equal_elem(lhs: FloatTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn float_greater(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn float_greater_elem(lhs: FloatTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn float_greater_equal(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn float_greater_equal_elem(lhs: FloatTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn float_lower(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn float_lower_elem(lhs: FloatTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn float_lower_equal(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn float_lower_equal_elem(lhs: FloatTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn float_detach(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_set_require_grad(tensor: FloatTensor<Self>, require_grad: bool) -> FloatTensor<Self>;
            fn float_is_require_grad(tensor: &FloatTensor<Self>) -> bool;
            fn float_sum(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_sum_dim(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
            fn float_prod(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_prod_dim(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
            fn float_mean(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_mean_dim(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
            fn float_cumsum(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
            fn float_cumprod(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
            fn float_cummin(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
            fn float_cummax(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
            fn float_cast(tensor: FloatTensor<Self>, dtype: FloatDType) -> FloatTensor<Self>;
            fn float_exp(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_log(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_log1p(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_powf(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_powi(lhs: FloatTensor<Self>, rhs: IntTensor<Self>) -> FloatTensor<Self>;
            fn float_powi_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
            fn float_powi_scalar_impl(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
            fn float_powf_scalar(tensor: FloatTensor<Self>, value: Scalar) -> FloatTensor<Self>;
            fn float_powf_scalar_impl(tensor: FloatTensor<Self>, value: Scalar) -> FloatTensor<Self>;
            fn float_sqrt(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_abs(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_cos(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_sin(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_tan(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_cosh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_sinh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_tanh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_acos(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_acosh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_asin(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_asinh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_atan(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_atanh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_atan2(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_round(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_floor(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_ceil(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_trunc(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_erf(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_cat(tensors: Vec<FloatTensor<Self>>, dim: usize) -> FloatTensor<Self>;
            fn float_argmax(tensor: FloatTensor<Self>, dim: usize, out_dtype: IntDType) -> IntTensor<Self>;
            fn float_argtopk(tensor: FloatTensor<Self>, dim: usize, k: usize, out_dtype: IntDType) -> IntTensor<Self>;
            fn float_topk(tensor: FloatTensor<Self>, dim: usize, k: usize) -> FloatTensor<Self>;
            fn float_argmin(tensor: FloatTensor<Self>, dim: usize, out_dtype: IntDType) -> IntTensor<Self>;
            fn float_max(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_max_dim(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
            fn float_max_dim_with_indices(tensor: FloatTensor<Self>, dim: usize, indices_dtype: IntDType) -> (FloatTensor<Self>, IntTensor<Self>);
            fn float_min(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_min_dim(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
            fn float_min_dim_with_indices(tensor: FloatTensor<Self>, dim: usize, indices_dtype: IntDType) -> (FloatTensor<Self>, IntTensor<Self>);
            fn float_max_abs(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_max_abs_dim(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
            fn float_any(tensor: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn float_any_dim(tensor: FloatTensor<Self>, dim: usize, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn float_all(tensor: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn float_all_dim(tensor: FloatTensor<Self>, dim: usize, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn float_sign(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn float_expand(tensor: FloatTensor<Self>, shape: Shape) -> FloatTensor<Self>;
            fn float_sort(tensor: FloatTensor<Self>, dim: usize, descending: bool) -> FloatTensor<Self>;
            fn float_sort_with_indices(tensor: FloatTensor<Self>, dim: usize, descending: bool, indices_dtype: IntDType) -> (FloatTensor<Self>, IntTensor<Self>);
            fn float_argsort(tensor: FloatTensor<Self>, dim: usize, descending: bool, out_dtype: IntDType) -> IntTensor<Self>;
            fn float_grid_sample_2d(tensor: FloatTensor<Self>, grid: FloatTensor<Self>, options: GridSampleOptions) -> FloatTensor<Self>;
            fn float_unfold(tensor: FloatTensor<Self>, dim: usize, size: usize, step: usize) -> FloatTensor<Self>;
            fn float_is_nan(tensor: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn float_is_inf(tensor: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
        }
        ops IntTensorOps {
            fn int_empty(shape: Shape, device: &Device<Self>, dtype: IntDType) -> IntTensor<Self>;
            #[own] fn int_into_data(tensor: IntTensor<Self>) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send;
            fn int_from_data(data: TensorData, device: &Device<Self>) -> IntTensor<Self>;
            fn int_device(tensor: &IntTensor<Self>) -> Device<Self>;
            #[own] fn int_to_device(tensor: IntTensor<Self>, device: &Device<Self>) -> IntTensor<Self>;
            fn int_reshape(tensor: IntTensor<Self>, shape: Shape) -> IntTensor<Self>;
            fn int_slice(tensor: IntTensor<Self>, slices: &[Slice]) -> IntTensor<Self>;
            fn int_slice_assign(tensor: IntTensor<Self>, slices: &[Slice], value: IntTensor<Self>) -> IntTensor<Self>;
            fn int_into_float(tensor: IntTensor<Self>, out_dtype: FloatDType) -> FloatTensor<Self>;
            fn int_mask_where(tensor: IntTensor<Self>, mask: BoolTensor<Self>, value: IntTensor<Self>) -> IntTensor<Self>;
            fn int_mask_fill(tensor: IntTensor<Self>, mask: BoolTensor<Self>, value: Scalar) -> IntTensor<Self>;
            fn int_gather(dim: usize, tensor: IntTensor<Self>, indices: IntTensor<Self>) -> IntTensor<Self>;
            fn int_scatter_add(dim: usize, tensor: IntTensor<Self>, indices: IntTensor<Self>, value: IntTensor<Self>) -> IntTensor<Self>;
            fn int_scatter_nd(data: IntTensor<Self>, indices: IntTensor<Self>, values: IntTensor<Self>, reduction: IndexingUpdateOp) -> IntTensor<Self>;
            fn int_gather_nd(data: IntTensor<Self>, indices: IntTensor<Self>) -> IntTensor<Self>;
            fn int_select(tensor: IntTensor<Self>, dim: usize, indices: IntTensor<Self>) -> IntTensor<Self>;
            fn int_select_add(tensor: IntTensor<Self>, dim: usize, indices: IntTensor<Self>, value: IntTensor<Self>) -> IntTensor<Self>;
            fn int_repeat_dim(tensor: IntTensor<Self>, dim: usize, times: usize) -> IntTensor<Self>;
            fn int_cat(tensors: Vec<IntTensor<Self>>, dim: usize) -> IntTensor<Self>;
            fn int_equal(lhs: IntTensor<Self>, rhs: IntTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn int_not_equal(lhs: IntTensor<Self>, rhs: IntTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn int_equal_elem(lhs: IntTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn int_not_equal_elem(lhs: IntTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn int_greater(lhs: IntTensor<Self>, rhs: IntTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn int_greater_elem(lhs: IntTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn int_greater_equal(lhs: IntTensor<Self>, rhs: IntTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn int_greater_equal_elem(lhs: IntTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn int_lower(lhs: IntTensor<Self>, rhs: IntTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn int_lower_elem(lhs: IntTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn int_lower_equal(lhs: IntTensor<Self>, rhs: IntTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn int_lower_equal_elem(lhs: IntTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn int_add(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
            fn int_add_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
            fn int_powi(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
            fn int_powi_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
            fn int_powi_scalar_impl(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
            fn int_clamp_min(tensor: IntTensor<Self>, min: Scalar) -> IntTensor<Self>;
            fn int_clamp_max(tensor: IntTensor<Self>, max: Scalar) -> IntTensor<Self>;
            fn int_clamp(tensor: IntTensor<Self>, min: Scalar, max: Scalar) -> IntTensor<Self>;
            fn int_sub(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
            fn int_sub_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
            fn int_mul(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
            fn int_mul_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
            fn int_div(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
            fn int_div_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
            fn int_remainder(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
            fn int_remainder_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
            fn int_matmul(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
            fn int_neg(tensor: IntTensor<Self>) -> IntTensor<Self>;
            fn int_zeros(shape: Shape, device: &Device<Self>, dtype: IntDType) -> IntTensor<Self>;
            fn int_ones(shape: Shape, device: &Device<Self>, dtype: IntDType) -> IntTensor<Self>;
            fn int_full(shape: Shape, fill_value: Scalar, device: &Device<Self>, dtype: IntDType) -> IntTensor<Self>;
            fn int_sum(tensor: IntTensor<Self>) -> IntTensor<Self>;
            fn int_sum_dim(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self>;
            fn int_prod(tensor: IntTensor<Self>) -> IntTensor<Self>;
            fn int_prod_dim(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self>;
            fn int_mean(tensor: IntTensor<Self>) -> IntTensor<Self>;
            fn int_mean_dim(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self>;
            fn int_cumsum(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self>;
            fn int_cumprod(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self>;
            fn int_cummin(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self>;
            fn int_cummax(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self>;
            fn int_argmax(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self>;
            fn int_argtopk(tensor: IntTensor<Self>, dim: usize, k: usize) -> IntTensor<Self>;
            fn int_topk(tensor: IntTensor<Self>, dim: usize, k: usize) -> IntTensor<Self>;
            fn int_argmin(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self>;
            fn int_max(tensor: IntTensor<Self>) -> IntTensor<Self>;
            fn int_max_dim(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self>;
            fn int_max_dim_with_indices(tensor: IntTensor<Self>, dim: usize) -> (IntTensor<Self>, IntTensor<Self>);
            fn int_max_abs(tensor: IntTensor<Self>) -> IntTensor<Self>;
            fn int_max_abs_dim(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self>;
            fn int_min(tensor: IntTensor<Self>) -> IntTensor<Self>;
            fn int_min_dim(tensor: IntTensor<Self>, dim: usize) -> IntTensor<Self>;
            fn int_min_dim_with_indices(tensor: IntTensor<Self>, dim: usize) -> (IntTensor<Self>, IntTensor<Self>);
            fn int_abs(tensor: IntTensor<Self>) -> IntTensor<Self>;
            fn int_transpose(tensor: IntTensor<Self>) -> IntTensor<Self>;
            fn int_swap_dims(tensor: IntTensor<Self>, dim1: usize, dim2: usize) -> IntTensor<Self>;
            fn int_permute(tensor: IntTensor<Self>, axes: &[usize]) -> IntTensor<Self>;
            fn int_flip(tensor: IntTensor<Self>, axes: &[usize]) -> IntTensor<Self>;
            fn int_random(shape: Shape, distribution: Distribution, device: &Device<Self>, dtype: IntDType) -> IntTensor<Self>;
            fn int_arange_step(range: Range<i64>, step: usize, device: &Device<Self>, dtype: IntDType) -> IntTensor<Self>;
            fn int_arange(range: Range<i64>, device: &Device<Self>, dtype: IntDType) -> IntTensor<Self>;
            fn int_any(tensor: IntTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn int_any_dim(tensor: IntTensor<Self>, dim: usize, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn int_all(tensor: IntTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn int_all_dim(tensor: IntTensor<Self>, dim: usize, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn int_sign(tensor: IntTensor<Self>) -> IntTensor<Self>;
            fn int_expand(tensor: IntTensor<Self>, shape: Shape) -> IntTensor<Self>;
            fn int_sort(tensor: IntTensor<Self>, dim: usize, descending: bool) -> IntTensor<Self>;
            fn int_sort_with_indices(tensor: IntTensor<Self>, dim: usize, descending: bool) -> (IntTensor<Self>, IntTensor<Self>);
            fn int_argsort(tensor: IntTensor<Self>, dim: usize, descending: bool) -> IntTensor<Self>;
            fn bitwise_and(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
            fn bitwise_and_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
            fn bitwise_or(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
            fn bitwise_or_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
            fn bitwise_xor(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
            fn bitwise_xor_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
            fn bitwise_not(tensor: IntTensor<Self>) -> IntTensor<Self>;
            fn bitwise_left_shift(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
            fn bitwise_left_shift_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
            fn bitwise_right_shift(lhs: IntTensor<Self>, rhs: IntTensor<Self>) -> IntTensor<Self>;
            fn bitwise_right_shift_scalar(lhs: IntTensor<Self>, rhs: Scalar) -> IntTensor<Self>;
            fn int_cast(tensor: IntTensor<Self>, dtype: IntDType) -> IntTensor<Self>;
            fn int_unfold(tensor: IntTensor<Self>, dim: usize, size: usize, step: usize) -> IntTensor<Self>;
        }
        ops BoolTensorOps {
            fn bool_empty(shape: Shape, device: &Device<Self>, dtype: BoolDType) -> BoolTensor<Self>;
            fn bool_zeros(shape: Shape, device: &Device<Self>, dtype: BoolDType) -> BoolTensor<Self>;
            fn bool_ones(shape: Shape, device: &Device<Self>, dtype: BoolDType) -> BoolTensor<Self>;
            #[own] fn bool_into_data(tensor: BoolTensor<Self>) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send;
            fn bool_from_data(data: TensorData, device: &Device<Self>) -> BoolTensor<Self>;
            fn bool_into_int(tensor: BoolTensor<Self>, out_dtype: IntDType) -> IntTensor<Self>;
            fn bool_into_float(tensor: BoolTensor<Self>, out_dtype: FloatDType) -> FloatTensor<Self>;
            fn bool_device(tensor: &BoolTensor<Self>) -> Device<Self>;
            #[own] fn bool_to_device(tensor: BoolTensor<Self>, device: &Device<Self>) -> BoolTensor<Self>;
            fn bool_reshape(tensor: BoolTensor<Self>, shape: Shape) -> BoolTensor<Self>;
            fn bool_slice(tensor: BoolTensor<Self>, slices: &[Slice]) -> BoolTensor<Self>;
            fn bool_slice_assign(tensor: BoolTensor<Self>, slices: &[Slice], value: BoolTensor<Self>) -> BoolTensor<Self>;
            fn bool_mask_where(tensor: BoolTensor<Self>, mask: BoolTensor<Self>, value: BoolTensor<Self>) -> BoolTensor<Self>;
            fn bool_mask_fill(tensor: BoolTensor<Self>, mask: BoolTensor<Self>, value: Scalar) -> BoolTensor<Self>;
            fn bool_gather(dim: usize, tensor: BoolTensor<Self>, indices: IntTensor<Self>) -> BoolTensor<Self>;
            fn bool_scatter_or(dim: usize, tensor: BoolTensor<Self>, indices: IntTensor<Self>, value: BoolTensor<Self>) -> BoolTensor<Self>;
            fn bool_select(tensor: BoolTensor<Self>, dim: usize, indices: IntTensor<Self>) -> BoolTensor<Self>;
            fn bool_select_or(tensor: BoolTensor<Self>, dim: usize, indices: IntTensor<Self>, value: BoolTensor<Self>) -> BoolTensor<Self>;
            fn bool_repeat_dim(tensor: BoolTensor<Self>, dim: usize, times: usize) -> BoolTensor<Self>;
            fn bool_cat(tensors: Vec<BoolTensor<Self>>, dim: usize) -> BoolTensor<Self>;
            fn bool_equal(lhs: BoolTensor<Self>, rhs: BoolTensor<Self>) -> BoolTensor<Self>;
            fn bool_not_equal(lhs: BoolTensor<Self>, rhs: BoolTensor<Self>) -> BoolTensor<Self>;
            fn bool_equal_elem(lhs: BoolTensor<Self>, rhs: Scalar) -> BoolTensor<Self>;
            fn bool_not_equal_elem(lhs: BoolTensor<Self>, rhs: Scalar) -> BoolTensor<Self>;
            fn bool_not(tensor: BoolTensor<Self>) -> BoolTensor<Self>;
            fn bool_and(lhs: BoolTensor<Self>, rhs: BoolTensor<Self>) -> BoolTensor<Self>;
            fn bool_or(lhs: BoolTensor<Self>, rhs: BoolTensor<Self>) -> BoolTensor<Self>;
            fn bool_xor(lhs: BoolTensor<Self>, rhs: BoolTensor<Self>) -> BoolTensor<Self>;
            fn bool_transpose(tensor: BoolTensor<Self>) -> BoolTensor<Self>;
            fn bool_swap_dims(tensor: BoolTensor<Self>, dim1: usize, dim2: usize) -> BoolTensor<Self>;
            fn bool_permute(tensor: BoolTensor<Self>, axes: &[usize]) -> BoolTensor<Self>;
            fn bool_flip(tensor: BoolTensor<Self>, axes: &[usize]) -> BoolTensor<Self>;
            fn bool_any(tensor: BoolTensor<Self>) -> BoolTensor<Self>;
            fn bool_any_dim(tensor: BoolTensor<Self>, dim: usize) -> BoolTensor<Self>;
            fn bool_all(tensor: BoolTensor<Self>) -> BoolTensor<Self>;
            fn bool_all_dim(tensor: BoolTensor<Self>, dim: usize) -> BoolTensor<Self>;
            fn bool_argwhere(tensor: BoolTensor<Self>, out_dtype: IntDType) -> impl Future<Output = IntTensor<Self>> + 'static + Send;
            fn bool_expand(tensor: BoolTensor<Self>, shape: Shape) -> BoolTensor<Self>;
            fn bool_unfold(tensor: BoolTensor<Self>, dim: usize, size: usize, step: usize) -> BoolTensor<Self>;
        }
        ops ModuleOps {
            fn embedding(weights: FloatTensor<Self>, indices: IntTensor<Self>) -> FloatTensor<Self>;
            #[own] fn embedding_backward(weights: FloatTensor<Self>, output_grad: FloatTensor<Self>, indices: IntTensor<Self>) -> FloatTensor<Self>;
            #[own] fn linear(x: FloatTensor<Self>, weight: FloatTensor<Self>, bias: Option<FloatTensor<Self>>) -> FloatTensor<Self>;
            #[own] fn linear_x_backward(weight: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
            #[own] fn linear_weight_backward(x: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
            #[own] fn linear_bias_backward(output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
            fn conv1d(x: FloatTensor<Self>, weight: FloatTensor<Self>, bias: Option<FloatTensor<Self>>, options: ConvOptions<1>) -> FloatTensor<Self>;
            fn conv1d_x_backward(x: FloatTensor<Self>, weight: FloatTensor<Self>, output_grad: FloatTensor<Self>, options: ConvOptions<1>) -> FloatTensor<Self>;
            fn conv1d_weight_backward(x: FloatTensor<Self>, weight: FloatTensor<Self>, output_grad: FloatTensor<Self>, options: ConvOptions<1>) -> FloatTensor<Self>;
            fn conv1d_bias_backward(x: FloatTensor<Self>, bias: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
            fn conv2d(x: FloatTensor<Self>, weight: FloatTensor<Self>, bias: Option<FloatTensor<Self>>, options: ConvOptions<2>) -> FloatTensor<Self>;
            fn conv2d_x_backward(x: FloatTensor<Self>, weight: FloatTensor<Self>, output_grad: FloatTensor<Self>, options: ConvOptions<2>) -> FloatTensor<Self>;
            fn conv2d_weight_backward(x: FloatTensor<Self>, weight: FloatTensor<Self>, output_grad: FloatTensor<Self>, options: ConvOptions<2>) -> FloatTensor<Self>;
            fn conv2d_bias_backward(x: FloatTensor<Self>, bias: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
            fn deform_conv2d(x: FloatTensor<Self>, offset: FloatTensor<Self>, weight: FloatTensor<Self>, mask: Option<FloatTensor<Self>>, bias: Option<FloatTensor<Self>>, options: DeformConvOptions<2>) -> FloatTensor<Self>;
            fn deform_conv2d_backward(x: FloatTensor<Self>, offset: FloatTensor<Self>, weight: FloatTensor<Self>, mask: Option<FloatTensor<Self>>, bias: Option<FloatTensor<Self>>, output_grad: FloatTensor<Self>, options: DeformConvOptions<2>) -> DeformConv2dBackward<Self> => rebind;
            fn conv3d(x: FloatTensor<Self>, weight: FloatTensor<Self>, bias: Option<FloatTensor<Self>>, options: ConvOptions<3>) -> FloatTensor<Self>;
            fn conv3d_x_backward(x: FloatTensor<Self>, weight: FloatTensor<Self>, output_grad: FloatTensor<Self>, options: ConvOptions<3>) -> FloatTensor<Self>;
            fn conv3d_weight_backward(x: FloatTensor<Self>, weight: FloatTensor<Self>, output_grad: FloatTensor<Self>, options: ConvOptions<3>) -> FloatTensor<Self>;
            fn conv3d_bias_backward(x: FloatTensor<Self>, bias: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
            fn conv_transpose1d(x: FloatTensor<Self>, weight: FloatTensor<Self>, bias: Option<FloatTensor<Self>>, options: ConvTransposeOptions<1>) -> FloatTensor<Self>;
            fn conv_transpose1d_x_backward(weight: FloatTensor<Self>, output_grad: FloatTensor<Self>, options: ConvTransposeOptions<1>) -> FloatTensor<Self>;
            fn conv_transpose1d_weight_backward(x: FloatTensor<Self>, weight: FloatTensor<Self>, output_grad: FloatTensor<Self>, options: ConvTransposeOptions<1>) -> FloatTensor<Self>;
            fn conv_transpose1d_bias_backward(x: FloatTensor<Self>, bias: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
            fn conv_transpose2d(x: FloatTensor<Self>, weight: FloatTensor<Self>, bias: Option<FloatTensor<Self>>, options: ConvTransposeOptions<2>) -> FloatTensor<Self>;
            fn conv_transpose2d_x_backward(weight: FloatTensor<Self>, output_grad: FloatTensor<Self>, options: ConvTransposeOptions<2>) -> FloatTensor<Self>;
            fn conv_transpose2d_weight_backward(x: FloatTensor<Self>, weight: FloatTensor<Self>, output_grad: FloatTensor<Self>, options: ConvTransposeOptions<2>) -> FloatTensor<Self>;
            fn conv_transpose2d_bias_backward(x: FloatTensor<Self>, bias: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
            fn conv_transpose3d(x: FloatTensor<Self>, weight: FloatTensor<Self>, bias: Option<FloatTensor<Self>>, options: ConvTransposeOptions<3>) -> FloatTensor<Self>;
            fn conv_transpose3d_x_backward(weight: FloatTensor<Self>, output_grad: FloatTensor<Self>, options: ConvTransposeOptions<3>) -> FloatTensor<Self>;
            fn conv_transpose3d_weight_backward(x: FloatTensor<Self>, weight: FloatTensor<Self>, output_grad: FloatTensor<Self>, options: ConvTransposeOptions<3>) -> FloatTensor<Self>;
            fn conv_transpose3d_bias_backward(x: FloatTensor<Self>, bias: FloatTensor<Self>, output_grad: FloatTensor<Self>) -> FloatTensor<Self>;
            fn unfold4d(x: FloatTensor<Self>, kernel_size: [usize; 2], options: UnfoldOptions) -> FloatTensor<Self>;
            fn avg_pool1d(x: FloatTensor<Self>, kernel_size: usize, stride: usize, padding: usize, count_include_pad: bool, ceil_mode: bool) -> FloatTensor<Self>;
            fn avg_pool1d_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>, kernel_size: usize, stride: usize, padding: usize, count_include_pad: bool, ceil_mode: bool) -> FloatTensor<Self>;
            fn avg_pool2d(x: FloatTensor<Self>, kernel_size: [usize; 2], stride: [usize; 2], padding: [usize; 2], count_include_pad: bool, ceil_mode: bool) -> FloatTensor<Self>;
            fn avg_pool2d_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>, kernel_size: [usize; 2], stride: [usize; 2], padding: [usize; 2], count_include_pad: bool, ceil_mode: bool) -> FloatTensor<Self>;
            fn adaptive_avg_pool2d(x: FloatTensor<Self>, output_size: [usize; 2]) -> FloatTensor<Self>;
            fn adaptive_avg_pool2d_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self>;
            fn adaptive_avg_pool1d(x: FloatTensor<Self>, output_size: usize) -> FloatTensor<Self>;
            fn adaptive_avg_pool1d_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self>;
            fn max_pool1d(x: FloatTensor<Self>, kernel_size: usize, stride: usize, padding: usize, dilation: usize, ceil_mode: bool) -> FloatTensor<Self>;
            fn max_pool1d_with_indices(x: FloatTensor<Self>, kernel_size: usize, stride: usize, padding: usize, dilation: usize, ceil_mode: bool) -> MaxPool1dWithIndices<Self> => rebind;
            fn max_pool1d_with_indices_backward(x: FloatTensor<Self>, kernel_size: usize, stride: usize, padding: usize, dilation: usize, ceil_mode: bool, output_grad: FloatTensor<Self>, indices: IntTensor<Self>) -> MaxPool1dBackward<Self> => rebind;
            fn max_pool2d(x: FloatTensor<Self>, kernel_size: [usize; 2], stride: [usize; 2], padding: [usize; 2], dilation: [usize; 2], ceil_mode: bool) -> FloatTensor<Self>;
            fn max_pool2d_with_indices(x: FloatTensor<Self>, kernel_size: [usize; 2], stride: [usize; 2], padding: [usize; 2], dilation: [usize; 2], ceil_mode: bool) -> MaxPool2dWithIndices<Self> => rebind;
            fn max_pool2d_with_indices_backward(x: FloatTensor<Self>, kernel_size: [usize; 2], stride: [usize; 2], padding: [usize; 2], dilation: [usize; 2], ceil_mode: bool, output_grad: FloatTensor<Self>, indices: IntTensor<Self>) -> MaxPool2dBackward<Self> => rebind;
            fn interpolate(x: FloatTensor<Self>, output_size: [usize; 2], options: InterpolateOptions) -> FloatTensor<Self>;
            fn interpolate_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>, output_size: [usize; 2], options: InterpolateOptions) -> FloatTensor<Self>;
            fn attention(query: FloatTensor<Self>, key: FloatTensor<Self>, value: FloatTensor<Self>, mask: Option<BoolTensor<Self>>, attn_bias: Option<FloatTensor<Self>>, options: AttentionModuleOptions) -> FloatTensor<Self>;
            #[own] fn layer_norm(tensor: FloatTensor<Self>, gamma: FloatTensor<Self>, beta: Option<FloatTensor<Self>>, epsilon: f64) -> FloatTensor<Self>;
            fn ctc_loss(log_probs: FloatTensor<Self>, targets: IntTensor<Self>, input_lengths: IntTensor<Self>, target_lengths: IntTensor<Self>, blank: usize) -> FloatTensor<Self>;
            fn has_ctc_loss_backward() -> bool;
            fn ctc_loss_backward(log_probs: FloatTensor<Self>, targets: IntTensor<Self>, input_lengths: IntTensor<Self>, target_lengths: IntTensor<Self>, grad_loss: FloatTensor<Self>, blank: usize) -> FloatTensor<Self>;
            fn rfft(signal: FloatTensor<Self>, dim: usize, n: Option<usize>) -> (FloatTensor<Self>, FloatTensor<Self>);
            fn irfft(spectrum_re: FloatTensor<Self>, spectrum_im: FloatTensor<Self>, dim: usize, n: Option<usize>) -> FloatTensor<Self>;
        }
        ops ActivationOps {
            fn leaky_relu(tensor: FloatTensor<Self>, negative_slope: Scalar) -> FloatTensor<Self>;
            fn relu(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn relu_backward(output: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self>;
            #[own] fn gelu(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn prelu(tensor: FloatTensor<Self>, alpha: FloatTensor<Self>) -> FloatTensor<Self>;
            #[own] fn gelu_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self>;
            fn sigmoid(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            fn sigmoid_backward(output: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self>;
            fn hard_sigmoid(tensor: FloatTensor<Self>, alpha: Scalar, beta: Scalar) -> FloatTensor<Self>;
            fn log_sigmoid(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
            #[own] fn softmax(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
            #[own] fn log_softmax(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
            #[own] fn softmin(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
            fn log_sigmoid_backward(x: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self>;
        }
        ops QTensorOps {
            fn q_from_data(data: TensorData, device: &Device<Self>) -> QuantizedTensor<Self>;
            fn quantize(tensor: FloatTensor<Self>, scheme: &QuantScheme, #[rebind] qparams: QuantizationParametersPrimitive<Self>) -> QuantizedTensor<Self>;
            fn quantize_dynamic(tensor: FloatTensor<Self>, scheme: &QuantScheme) -> QuantizedTensor<Self>;
            fn dequantize(tensor: QuantizedTensor<Self>, dtype: FloatDType) -> FloatTensor<Self>;
            fn q_device(tensor: &QuantizedTensor<Self>) -> Device<Self>;
            #[own] fn q_to_device(tensor: QuantizedTensor<Self>, device: &Device<Self>) -> QuantizedTensor<Self>;
            fn q_reshape(tensor: QuantizedTensor<Self>, shape: Shape) -> QuantizedTensor<Self>;
            #[own] fn q_into_data(tensor: QuantizedTensor<Self>) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send;
            fn q_detach(tensor: QuantizedTensor<Self>) -> QuantizedTensor<Self>;
            fn q_set_require_grad(tensor: QuantizedTensor<Self>, require_grad: bool) -> QuantizedTensor<Self>;
            fn q_is_require_grad(tensor: &QuantizedTensor<Self>) -> bool;
            fn q_expand(tensor: QuantizedTensor<Self>, shape: Shape) -> QuantizedTensor<Self>;
            fn q_transpose(tensor: QuantizedTensor<Self>) -> QuantizedTensor<Self>;
            fn q_swap_dims(tensor: QuantizedTensor<Self>, dim1: usize, dim2: usize) -> QuantizedTensor<Self>;
            fn q_permute(tensor: QuantizedTensor<Self>, axes: &[usize]) -> QuantizedTensor<Self>;
            fn q_flip(tensor: QuantizedTensor<Self>, axes: &[usize]) -> QuantizedTensor<Self>;
            fn q_select(tensor: QuantizedTensor<Self>, dim: usize, indices: IntTensor<Self>) -> QuantizedTensor<Self>;
            fn q_slice(tensor: QuantizedTensor<Self>, slices: &[Slice]) -> QuantizedTensor<Self>;
            fn q_gather(dim: usize, tensor: QuantizedTensor<Self>, indices: IntTensor<Self>) -> QuantizedTensor<Self>;
            fn q_repeat_dim(tensor: QuantizedTensor<Self>, dim: usize, times: usize) -> QuantizedTensor<Self>;
            fn q_add(lhs: QuantizedTensor<Self>, rhs: QuantizedTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_add_scalar(lhs: QuantizedTensor<Self>, rhs: Scalar) -> TensorPrimitive<Self> => rebind;
            fn q_clamp_min(tensor: QuantizedTensor<Self>, min: Scalar) -> TensorPrimitive<Self> => rebind;
            fn q_clamp_max(tensor: QuantizedTensor<Self>, max: Scalar) -> TensorPrimitive<Self> => rebind;
            fn q_clamp(tensor: QuantizedTensor<Self>, min: Scalar, max: Scalar) -> TensorPrimitive<Self> => rebind;
            fn q_sub(lhs: QuantizedTensor<Self>, rhs: QuantizedTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_sub_scalar(lhs: QuantizedTensor<Self>, rhs: Scalar) -> TensorPrimitive<Self> => rebind;
            fn q_mul(lhs: QuantizedTensor<Self>, rhs: QuantizedTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_mul_scalar(lhs: QuantizedTensor<Self>, rhs: Scalar) -> TensorPrimitive<Self> => rebind;
            fn q_div(lhs: QuantizedTensor<Self>, rhs: QuantizedTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_div_scalar(lhs: QuantizedTensor<Self>, rhs: Scalar) -> TensorPrimitive<Self> => rebind;
            fn q_matmul(#[rebind] lhs: TensorPrimitive<Self>, #[rebind] rhs: TensorPrimitive<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_neg(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_recip(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_sum(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_sum_dim(tensor: QuantizedTensor<Self>, dim: usize) -> TensorPrimitive<Self> => rebind;
            fn q_prod(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_prod_dim(tensor: QuantizedTensor<Self>, dim: usize) -> TensorPrimitive<Self> => rebind;
            fn q_mean(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_mean_dim(tensor: QuantizedTensor<Self>, dim: usize) -> TensorPrimitive<Self> => rebind;
            fn q_cumsum(tensor: QuantizedTensor<Self>, dim: usize) -> TensorPrimitive<Self> => rebind;
            fn q_cumprod(tensor: QuantizedTensor<Self>, dim: usize) -> TensorPrimitive<Self> => rebind;
            fn q_cummin(tensor: QuantizedTensor<Self>, dim: usize) -> TensorPrimitive<Self> => rebind;
            fn q_cummax(tensor: QuantizedTensor<Self>, dim: usize) -> TensorPrimitive<Self> => rebind;
            fn q_exp(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_log(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_log1p(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_powf(lhs: QuantizedTensor<Self>, rhs: QuantizedTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_powi(lhs: QuantizedTensor<Self>, rhs: IntTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_powi_scalar(lhs: QuantizedTensor<Self>, rhs: Scalar) -> TensorPrimitive<Self> => rebind;
            fn q_powf_scalar(tensor: QuantizedTensor<Self>, value: Scalar) -> TensorPrimitive<Self> => rebind;
            fn q_sqrt(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_abs(tensor: QuantizedTensor<Self>) -> QuantizedTensor<Self>;
            fn q_cos(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_sin(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_tan(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_cosh(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_sinh(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_tanh(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_erf(tensor: QuantizedTensor<Self>) -> TensorPrimitive<Self> => rebind;
            fn q_cat(tensors: Vec<QuantizedTensor<Self>>, dim: usize) -> QuantizedTensor<Self>;
            fn q_argmax(tensor: QuantizedTensor<Self>, dim: usize, out_dtype: IntDType) -> IntTensor<Self>;
            fn q_argtopk(tensor: QuantizedTensor<Self>, dim: usize, k: usize, out_dtype: IntDType) -> IntTensor<Self>;
            fn q_topk(tensor: QuantizedTensor<Self>, dim: usize, k: usize) -> QuantizedTensor<Self>;
            fn q_argmin(tensor: QuantizedTensor<Self>, dim: usize, out_dtype: IntDType) -> IntTensor<Self>;
            fn q_max(tensor: QuantizedTensor<Self>) -> QuantizedTensor<Self>;
            fn q_max_dim(tensor: QuantizedTensor<Self>, dim: usize) -> QuantizedTensor<Self>;
            fn q_max_dim_with_indices(tensor: QuantizedTensor<Self>, dim: usize, out_dtype: IntDType) -> (QuantizedTensor<Self>, IntTensor<Self>);
            fn q_min(tensor: QuantizedTensor<Self>) -> QuantizedTensor<Self>;
            fn q_min_dim(tensor: QuantizedTensor<Self>, dim: usize) -> QuantizedTensor<Self>;
            fn q_min_dim_with_indices(tensor: QuantizedTensor<Self>, dim: usize, out_dtype: IntDType) -> (QuantizedTensor<Self>, IntTensor<Self>);
            fn q_max_abs(tensor: QuantizedTensor<Self>) -> QuantizedTensor<Self>;
            fn q_max_abs_dim(tensor: QuantizedTensor<Self>, dim: usize) -> QuantizedTensor<Self>;
            fn q_any(tensor: QuantizedTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn q_any_dim(tensor: QuantizedTensor<Self>, dim: usize, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn q_all(tensor: QuantizedTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn q_all_dim(tensor: QuantizedTensor<Self>, dim: usize, out_dtype: BoolDType) -> BoolTensor<Self>;
            fn q_sort(tensor: QuantizedTensor<Self>, dim: usize, descending: bool) -> QuantizedTensor<Self>;
            fn q_sort_with_indices(tensor: QuantizedTensor<Self>, dim: usize, descending: bool, out_dtype: IntDType) -> (QuantizedTensor<Self>, IntTensor<Self>);
            fn q_argsort(tensor: QuantizedTensor<Self>, dim: usize, descending: bool, out_dtype: IntDType) -> IntTensor<Self>;
        }
        ops TransactionOps {
            #[own] fn tr_execute(#[rebind] transaction: TransactionPrimitive<Self>) -> impl Future<Output = Result<TransactionPrimitiveData, ExecutionError>> + Send;
        }
        }
    };
}

/// Declares [`OwnOps`]: the `#[own]` methods of a signature list, as one trait that
/// [`crate::Ruda`] and [`crate::Autodiff`] both implement (the context is ignored).
macro_rules! declare_own_ops {
    ($ctx:tt $( $kind:ident $trait:ident $([$($assoc:tt)*])? { $($fns:tt)* } )*) => {
        /// The methods of the signature list that a wrapper implements itself (`#[own]` in the
        /// list); the others are delegated.
        pub(crate) trait OwnOps: Backend {
            $( own_ops_item! { $($fns)* } )*
        }
    };
}

/// The declarations of the `#[own]` methods among `fns`.
macro_rules! own_ops_item {
    ($(
        $(#[$how:ident])?
        fn $name:ident $([$($gen:tt)*])?
            ( $( $(#[$arg_conv:ident])? $arg:ident : $arg_ty:ty ),* )
            $(-> $ret:ty)? $(where [$($wc:tt)*])? $(=> $ret_conv:ident)? ;
    )*) => {
        $( own_ops_decl! { $($how)? ; fn $name $([$($gen)*])? ( $( $arg : $arg_ty ),* ) $(-> $ret)? $(where [$($wc)*])? } )*
    };
}

/// One declaration: written for `own`, nothing otherwise.
macro_rules! own_ops_decl {
    (own ; fn $name:ident $([$($gen:tt)*])? ( $( $arg:ident : $arg_ty:ty ),* ) $(-> $ret:ty)? $(where [$($wc:tt)*])?) => {
        fn $name $($($gen)*)? ( $( $arg : $arg_ty ),* ) $(-> $ret)? $(where $($wc)*)?;
    };
    ($($other:tt)*) => {};
}

with_backend_signatures!(declare_own_ops! { {} });

/// Writes one delegating `impl` per section of a signature list (see the module docs).
///
/// Context: `{ impl [generics] Wrapper => Inner; where [bounds]; own OwnTrait }`.
/// Sections: `ops Trait { fns }` (a trait generic over the backend, `Trait<Self>`) or
/// `backend Trait [associated items] { fns }` (a trait implemented by the backend itself).
macro_rules! delegate_backend {
    ($ctx:tt $( $kind:ident $trait:ident $([$($assoc:tt)*])? { $($fns:tt)* } )*) => {
        $( delegate_section! { $ctx $kind $trait [$($($assoc)*)?] { $($fns)* } } )*
    };
}

macro_rules! delegate_section {
    (
        { impl [$($gen:tt)*] $self_ty:ty => $inner:ty; where [$($wc:tt)*]; $($policy:tt)* }
        ops $trait:ident [$($assoc:tt)*] { $($fns:tt)* }
    ) => {
        impl<$($gen)*> $trait<$self_ty> for $self_ty where $($wc)* {
            $($assoc)*
            delegate_fns! { [ops $trait] [$self_ty] [$inner] [$($policy)*] $($fns)* }
        }
    };
    (
        { impl [$($gen:tt)*] $self_ty:ty => $inner:ty; where [$($wc:tt)*]; $($policy:tt)* }
        backend $trait:ident [$($assoc:tt)*] { $($fns:tt)* }
    ) => {
        impl<$($gen)*> $trait for $self_ty where $($wc)* {
            $($assoc)*
            delegate_fns! { [backend $trait] [$self_ty] [$inner] [$($policy)*] $($fns)* }
        }
    };
}

macro_rules! delegate_fns {
    (
        [$kind:ident $trait:ident] [$self_ty:ty] [$inner:ty] $policy:tt
        $(
            $(#[$how:ident])?
            fn $name:ident $([$($gen:tt)*])?
                ( $( $(#[$arg_conv:ident])? $arg:ident : $arg_ty:ty ),* )
                $(-> $ret:ty)? $(where [$($wc:tt)*])? $(=> $ret_conv:ident)? ;
        )*
    ) => {
        $(
            #[allow(clippy::too_many_arguments)]
            fn $name $($($gen)*)? ( $( $arg : $arg_ty ),* ) $(-> $ret)? $(where $($wc)*)? {
                delegate_convert!(
                    $($ret_conv)? ;
                    delegate_call!(
                        $($how)? ; $kind $trait, $self_ty, $inner, $policy, $name,
                        ( $( delegate_convert!($($arg_conv)? ; $arg) ),* ),
                        ( $( $arg ),* )
                    )
                )
            }
        )*
    };
}

/// The call: the inner backend's method with the converted arguments, or (`own`, for a wrapper
/// whose context says `own Trait`) the wrapper's own method with the arguments as they came (the
/// own trait takes the wrapper's types). A context that says `forward` delegates every method.
macro_rules! delegate_call {
    (; ops $trait:ident, $self_ty:ty, $inner:ty, $policy:tt, $name:ident, $args:tt, $raw:tt) => {
        <$inner as $trait<$inner>>::$name $args
    };
    (; backend $trait:ident, $self_ty:ty, $inner:ty, $policy:tt, $name:ident, $args:tt, $raw:tt) => {
        <$inner as $trait>::$name $args
    };
    (own ; $kind:ident $trait:ident, $self_ty:ty, $inner:ty, [own $own:path], $name:ident, $args:tt, $raw:tt) => {
        <$self_ty as $own>::$name $raw
    };
    (own ; $kind:ident $trait:ident, $self_ty:ty, $inner:ty, [forward], $name:ident, $args:tt, $raw:tt) => {
        delegate_call!(; $kind $trait, $self_ty, $inner, [forward], $name, $args, $raw)
    };
}

macro_rules! delegate_convert {
    (; $($value:tt)*) => {
        $($value)*
    };
    (rebind ; $($value:tt)*) => {
        $crate::rebind::Rebind::rebind($($value)*)
    };
}
