//! Rows of ones kept for the process, one per device, dtype and length: the bias gradients'
//! products (`ones [1, rows] x dy`, see [`super::linear`]) read one instead of filling a new
//! one on every backward. Each fill is a CubeCL launch on the device thread, which paces a bf16
//! transformer step on CUDA: 37 of its launches a step before this cache.
//!
//! What must hold: a cached row is never written. Every caller gets a clone of its handle, so
//! burn-cubecl never reuses its buffer in place (a shared handle is not mutable), and the only
//! reader, a native product, reads its operands.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use burn_backend::{DType, Shape, ops::FloatTensorOps};
use burn_cubecl::{CubeBackend, tensor::CubeTensor};

use super::RudaRuntime;

/// Rows kept per runtime before the cache starts over: a training job needs a few lengths (one
/// per batch shape); a server with many batch shapes refills rather than growing without bound.
const MAX_ROWS_PER_RUNTIME: usize = 16;

/// The rows of one runtime: (device, dtype, length) and the row.
type Rows<R> = Vec<(
    <R as ruda_runtime::cubecl::Runtime>::Device,
    DType,
    usize,
    CubeTensor<R>,
)>;

/// Per runtime type, its [`Rows`] (the runtimes are generic, so the map is keyed by type).
static CACHE: Mutex<Option<HashMap<TypeId, Box<dyn Any + Send>>>> = Mutex::new(None);

/// A `[1, len]` row of ones of `dtype` on `device`, filled on first use and kept.
pub(crate) fn ones_row<R: RudaRuntime>(
    len: usize,
    device: &R::Device,
    dtype: DType,
) -> CubeTensor<R> {
    let mut cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    let rows = cache
        .get_or_insert_with(HashMap::new)
        .entry(TypeId::of::<R>())
        .or_insert_with(|| Box::new(Rows::<R>::new()))
        .downcast_mut::<Rows<R>>()
        .expect("the ones cache is keyed by its runtime's type");
    if let Some((.., row)) = rows
        .iter()
        .find(|(d, t, l, _)| d == device && *t == dtype && *l == len)
    {
        return row.clone();
    }
    if rows.len() >= MAX_ROWS_PER_RUNTIME {
        rows.clear();
    }
    let row =
        CubeBackend::<R, f32, i32, u32>::float_ones(Shape::new([1, len]), device, dtype.into());
    rows.push((device.clone(), dtype, len, row.clone()));
    row
}

#[cfg(all(test, feature = "wgpu"))]
mod tests {
    use burn_backend::{TensorData, TensorMetadata};
    use ruda_runtime::RudaWgpu;
    use ruda_runtime::cubecl::future::block_on;

    use super::*;

    /// The identity of a row's buffer.
    fn buffer(row: &CubeTensor<RudaWgpu>) -> String {
        format!("{:?}", row.handle.memory)
    }

    fn rows_kept() -> usize {
        let mut cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
        cache
            .get_or_insert_with(HashMap::new)
            .get(&TypeId::of::<RudaWgpu>())
            .map_or(0, |rows| {
                rows.downcast_ref::<Rows<RudaWgpu>>().unwrap().len()
            })
    }

    // One test, so that no other test of this binary fills the cache meanwhile.
    #[test]
    fn a_row_is_filled_once_per_device_dtype_and_length_and_the_cache_is_bounded() {
        let device = Default::default();
        let row = ones_row::<RudaWgpu>(7, &device, DType::F32);
        assert_eq!(row.shape(), Shape::new([1, 7]));
        let read = CubeBackend::<RudaWgpu, f32, i32, u32>::float_into_data(row.clone());
        let data: TensorData = block_on(read).expect("read the row");
        assert_eq!(data.to_vec::<f32>().unwrap(), vec![1.0; 7]);
        assert!(
            !row.handle.can_mut(),
            "the cache keeps a handle: never written in place"
        );
        let again = ones_row::<RudaWgpu>(7, &device, DType::F32);
        assert_eq!(
            buffer(&again),
            buffer(&row),
            "the same length reads the same buffer"
        );
        let longer = ones_row::<RudaWgpu>(9, &device, DType::F32);
        assert_ne!(buffer(&longer), buffer(&row));
        assert_eq!(longer.shape(), Shape::new([1, 9]));

        for len in 10..10 + MAX_ROWS_PER_RUNTIME {
            ones_row::<RudaWgpu>(len, &device, DType::F32);
            assert!(rows_kept() <= MAX_ROWS_PER_RUNTIME);
        }
        let refilled = ones_row::<RudaWgpu>(7, &device, DType::F32);
        assert_ne!(buffer(&refilled), buffer(&row), "a full cache starts over");
    }
}
