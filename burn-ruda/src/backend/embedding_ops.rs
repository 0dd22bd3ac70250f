//! `ModuleOps::embedding_backward` for [`Ruda`]: for tables where it is the faster choice
//! ([`ruda_runtime::embedding::prefers_native`]), the native kernel, launched directly on
//! burn-cubecl's tensors or, under the `fusion` feature, queued in Burn's fusion stream as a
//! custom operation (see [`crate::embedding`]); Burn's own for larger tables.

use burn_backend::ops::ModuleOps;
use burn_backend::tensor::{FloatTensor, IntTensor};
use burn_cubecl::{BoolElement, CubeRuntime, FloatElement, IntElement};

use super::{Inner, Ruda};

pub(super) use imp::embedding_backward;

/// Checks the shapes before anything is queued; returns the table's shape `[V, D]`.
fn check_shapes(
    weights: &burn_backend::Shape,
    grad: &burn_backend::Shape,
    indices: &burn_backend::Shape,
) -> [usize; 2] {
    assert_eq!(
        weights.num_dims(),
        2,
        "Embedding backward: the weights must be a [num_embeddings, d_model] table, got shape {weights:?}"
    );
    let d = ruda_runtime::embedding::check_shapes(grad, indices);
    assert_eq!(
        d, weights[1],
        "Embedding backward: the output gradient's last dimension must be the table's d_model, \
         got gradient {grad:?} and weights {weights:?}"
    );
    [weights[0], d]
}

/// Burn's embedding backward (its default `select_add`), on the inner backend.
fn burns<R, F, I, BT>(
    weights: FloatTensor<Ruda<R, F, I, BT>>,
    output_grad: FloatTensor<Ruda<R, F, I, BT>>,
    indices: IntTensor<Ruda<R, F, I, BT>>,
) -> FloatTensor<Ruda<R, F, I, BT>>
where
    R: ruda_runtime::Runtime + CubeRuntime,
    F: FloatElement,
    I: IntElement,
    BT: BoolElement,
{
    <Inner<R, F, I, BT> as ModuleOps<Inner<R, F, I, BT>>>::embedding_backward(
        weights,
        output_grad,
        indices,
    )
}

#[cfg(not(feature = "fusion"))]
mod imp {
    use super::*;
    use crate::embedding::cube_embedding_backward;

    /// The native embedding backward on `Ruda`'s tensors: `[weights.rows, D]` from the output
    /// gradient (`indices.shape + [D]`).
    pub(crate) fn embedding_backward<R, F, I, BT>(
        weights: FloatTensor<Ruda<R, F, I, BT>>,
        output_grad: FloatTensor<Ruda<R, F, I, BT>>,
        indices: IntTensor<Ruda<R, F, I, BT>>,
    ) -> FloatTensor<Ruda<R, F, I, BT>>
    where
        R: ruda_runtime::Runtime + CubeRuntime,
        F: FloatElement,
        I: IntElement,
        BT: BoolElement,
    {
        let [rows, _] = check_shapes(
            weights.meta.shape(),
            output_grad.meta.shape(),
            indices.meta.shape(),
        );
        if !ruda_runtime::embedding::prefers_native(rows) {
            return burns::<R, F, I, BT>(weights, output_grad, indices);
        }
        cube_embedding_backward::<R>(rows, output_grad, indices)
    }
}

#[cfg(feature = "fusion")]
mod imp {
    use super::*;

    use core::fmt;
    use core::marker::PhantomData;

    use burn_backend::Shape;
    use burn_cubecl::CubeBackend;
    use burn_fusion::{
        FusionBackend, FusionRuntime,
        stream::{Operation, OperationStreams},
    };
    use burn_ir::{CustomOpIr, HandleContainer, OperationIr, TensorIr};

    use crate::embedding::cube_embedding_backward;

    type Cube<R, F, I, BT> = CubeBackend<R, F, I, BT>;
    type CubeFusionRuntime<R, F, I, BT> = <Cube<R, F, I, BT> as FusionBackend>::FusionRuntime;
    type Handles<R, F, I, BT> =
        HandleContainer<<CubeFusionRuntime<R, F, I, BT> as FusionRuntime>::FusionHandle>;
    /// Names the backend without owning any of its types.
    type BackendMarker<R, F, I, BT> = PhantomData<fn() -> (R, F, I, BT)>;

    /// The native embedding backward queued in the fusion stream: inputs `[grad, indices]`,
    /// output `[dweights]`. The table itself is not an input (only its row count is needed), so
    /// the stream does not keep it alive.
    struct NativeEmbeddingBackward<R, F, I, BT> {
        desc: CustomOpIr,
        rows: usize,
        _backend: BackendMarker<R, F, I, BT>,
    }

    impl<R, F, I, BT> fmt::Debug for NativeEmbeddingBackward<R, F, I, BT> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("NativeEmbeddingBackward")
                .field("desc", &self.desc)
                .field("rows", &self.rows)
                .finish()
        }
    }

    impl<R, F, I, BT> Operation<CubeFusionRuntime<R, F, I, BT>> for NativeEmbeddingBackward<R, F, I, BT>
    where
        R: ruda_runtime::Runtime + CubeRuntime,
        F: FloatElement,
        I: IntElement,
        BT: BoolElement,
    {
        fn execute(&self, handles: &mut Handles<R, F, I, BT>) {
            let _span = tracing::trace_span!("ruda_embedding_backward").entered();
            let [grad, indices] = &self.desc.inputs[..] else {
                unreachable!("embedding backward: queued with two inputs")
            };
            let grad = handles.get_float_tensor::<Cube<R, F, I, BT>>(grad);
            let indices = handles.get_int_tensor::<Cube<R, F, I, BT>>(indices);
            let out = cube_embedding_backward::<R>(self.rows, grad, indices);
            handles.register_float_tensor::<Cube<R, F, I, BT>>(&self.desc.outputs[0].id, out);
        }
    }

    /// The native embedding backward on `Ruda`'s tensors: `[weights.rows, D]` from the output
    /// gradient (`indices.shape + [D]`).
    pub(crate) fn embedding_backward<R, F, I, BT>(
        weights: FloatTensor<Ruda<R, F, I, BT>>,
        output_grad: FloatTensor<Ruda<R, F, I, BT>>,
        indices: IntTensor<Ruda<R, F, I, BT>>,
    ) -> FloatTensor<Ruda<R, F, I, BT>>
    where
        R: ruda_runtime::Runtime + CubeRuntime,
        F: FloatElement,
        I: IntElement,
        BT: BoolElement,
    {
        let [rows, d] = check_shapes(&weights.shape, &output_grad.shape, &indices.shape);
        if !ruda_runtime::embedding::prefers_native(rows) {
            return burns::<R, F, I, BT>(weights, output_grad, indices);
        }
        let client = output_grad.client.clone();
        let dtype = output_grad.dtype;
        let streams = OperationStreams::with_inputs([&output_grad, &indices]);
        let out = TensorIr::uninit(client.create_empty_handle(), Shape::new([rows, d]), dtype);
        let inputs = [output_grad.into_ir(), indices.into_ir()];
        let desc = CustomOpIr::new("ruda_embedding_backward", &inputs, &[out]);
        let op = NativeEmbeddingBackward::<R, F, I, BT> {
            desc: desc.clone(),
            rows,
            _backend: PhantomData,
        };
        let [out] = client
            .register(streams, OperationIr::Custom(desc), op)
            .try_into()
            .expect("embedding backward: one output");
        out
    }
}
