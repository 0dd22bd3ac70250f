//! [`TensorBuffer`], the currency of the LayerNorm hooks, and its conversions.

use alloc::{boxed::Box, vec::Vec};

use burn_backend::DType;
use burn_cubecl::{CubeRuntime, tensor::CubeTensor};
use cubecl::{
    client::ComputeClient,
    server::{Handle, MemoryLayoutDescriptor, MemoryLayoutStrategy},
    std::tensor::TensorHandle,
    zspace::{Shape, Strides, metadata::Metadata},
};

/// A device buffer with its logical layout: handle, shape, strides (in elements) and dtype.
///
/// It carries no runtime type parameter so that the hooks of [`crate::Runtime`] can take and
/// return it whatever the runtime; it converts to and from burn-cubecl's [`CubeTensor`] and
/// CubeCL's [`TensorHandle`] without copying.
#[derive(Clone, Debug)]
pub struct TensorBuffer {
    /// The device memory.
    pub handle: Handle,
    /// The size of each dimension.
    pub shape: Shape,
    /// The distance, in elements, between two neighbours along each dimension.
    pub strides: Strides,
    /// The element type stored in `handle`.
    pub dtype: DType,
}

impl TensorBuffer {
    /// A buffer with the given layout.
    pub fn new(handle: Handle, shape: Shape, strides: Strides, dtype: DType) -> Self {
        assert_eq!(
            shape.num_dims(),
            strides.len(),
            "TensorBuffer: shape {shape:?} and strides {strides:?} have different ranks"
        );
        Self {
            handle,
            shape,
            strides,
            dtype,
        }
    }

    /// A buffer laid out row-major (the last dimension contiguous).
    pub fn contiguous(handle: Handle, shape: Shape, dtype: DType) -> Self {
        let strides = contiguous_strides(&shape);
        Self::new(handle, shape, strides, dtype)
    }

    /// Allocates an uninitialised row-major buffer on `client`'s device.
    pub fn empty<R: cubecl::Runtime>(
        client: &ComputeClient<R>,
        shape: Shape,
        dtype: DType,
    ) -> Self {
        let bytes = shape.num_elements() * dtype.size();
        let handle = client.empty(bytes.max(1));
        Self::contiguous(handle, shape, dtype)
    }

    /// Allocates `N` uninitialised row-major buffers that live and die together (a call's
    /// statistics, its column sums) in one storage buffer, each at an aligned offset: one task
    /// for CubeCL's device thread instead of `N`. That thread launches every kernel of a
    /// training step and paces the step (`docs/perf/host-launch.md`).
    /// The storage is freed when the last of the `N` is dropped.
    pub fn empty_together<R: cubecl::Runtime, const N: usize>(
        client: &ComputeClient<R>,
        buffers: [(Shape, DType); N],
    ) -> [Self; N] {
        let descriptors = buffers
            .iter()
            .map(|(shape, dtype)| {
                // Never zero bytes, as `empty`.
                let elements = shape.num_elements().max(1);
                MemoryLayoutDescriptor::new(
                    MemoryLayoutStrategy::Contiguous,
                    Shape::new([elements]),
                    dtype.size(),
                )
            })
            .collect();
        let mut layouts = client.empty_tensors(descriptors).into_iter();
        buffers.map(|(shape, dtype)| {
            let layout = layouts
                .next()
                .expect("CubeCL returns one layout per descriptor");
            Self::contiguous(layout.memory, shape, dtype)
        })
    }

    /// Uploads f32 values to `client`'s device, converted to `dtype` (f64, f32, f16 or bf16).
    pub fn from_f32s<R: cubecl::Runtime>(
        client: &ComputeClient<R>,
        values: &[f32],
        shape: Shape,
        dtype: DType,
    ) -> Self {
        // f32 -> f64 is exact, so each value rounds to `dtype` as it would from f32 directly.
        Self::upload(
            "from_f32s",
            client,
            values.iter().map(|&v| f64::from(v)),
            shape,
            dtype,
        )
    }

    /// Uploads f64 values to `client`'s device, converted to `dtype` (f64, f32, f16 or bf16).
    pub fn from_f64s<R: cubecl::Runtime>(
        client: &ComputeClient<R>,
        values: &[f64],
        shape: Shape,
        dtype: DType,
    ) -> Self {
        Self::upload("from_f64s", client, values.iter().copied(), shape, dtype)
    }

    fn upload<R: cubecl::Runtime>(
        caller: &str,
        client: &ComputeClient<R>,
        values: impl ExactSizeIterator<Item = f64>,
        shape: Shape,
        dtype: DType,
    ) -> Self {
        assert_eq!(
            values.len(),
            shape.num_elements(),
            "TensorBuffer::{caller}: {} values for shape {shape:?}",
            values.len()
        );
        assert_float(caller, dtype);
        let mut bytes = Vec::with_capacity(values.len() * dtype.size());
        for v in values {
            match dtype {
                DType::F64 => bytes.extend_from_slice(&v.to_le_bytes()),
                DType::F32 => bytes.extend_from_slice(&(v as f32).to_le_bytes()),
                DType::F16 => bytes.extend_from_slice(&half::f16::from_f64(v).to_le_bytes()),
                _ => bytes.extend_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
            }
        }
        // An empty buffer still needs a valid binding.
        let handle = client.create_from_slice(if bytes.is_empty() { &[0u8; 4] } else { &bytes });
        Self::contiguous(handle, shape, dtype)
    }

    /// Reads the buffer back as f32 values in row-major order of its shape, whatever its
    /// strides (a strided buffer is gathered on the host); f64 values are rounded to f32.
    pub fn to_f32s<R: cubecl::Runtime>(&self, client: &ComputeClient<R>) -> Vec<f32> {
        self.read("to_f32s", client, |v| v as f32)
    }

    /// Reads the buffer back as f64 values in row-major order of its shape, whatever its
    /// strides (a strided buffer is gathered on the host); every float dtype converts exactly.
    pub fn to_f64s<R: cubecl::Runtime>(&self, client: &ComputeClient<R>) -> Vec<f64> {
        self.read("to_f64s", client, |v| v)
    }

    fn read<R: cubecl::Runtime, T>(
        &self,
        caller: &str,
        client: &ComputeClient<R>,
        convert: impl Fn(f64) -> T,
    ) -> Vec<T> {
        assert_float(caller, self.dtype);
        let n = self.shape.num_elements();
        if n == 0 {
            return Vec::new();
        }
        // The highest element offset the layout touches, plus one.
        let span = 1 + self
            .shape
            .iter()
            .zip(self.strides.iter())
            .map(|(&size, &stride)| (size - 1) * stride)
            .sum::<usize>();
        let bytes = client.read_one(self.handle.clone()).unwrap_or_else(|e| {
            panic!("TensorBuffer::{caller}: reading the device buffer failed: {e:?}")
        });
        let size = self.dtype.size();
        assert!(
            bytes.len() >= span * size,
            "TensorBuffer::{caller}: buffer of {} bytes is shorter than its layout ({span} elements of {size} bytes)",
            bytes.len()
        );
        let at = |i: usize| -> f64 {
            let b = &bytes[i * size..(i + 1) * size];
            match self.dtype {
                DType::F64 => f64::from_le_bytes(b.try_into().expect("8 bytes")),
                DType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]).into(),
                DType::F16 => half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
                _ => half::bf16::from_le_bytes([b[0], b[1]]).to_f64(),
            }
        };
        let rank = self.shape.num_dims();
        let mut index = alloc::vec![0usize; rank];
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let offset: usize = index
                .iter()
                .zip(self.strides.iter())
                .map(|(i, s)| i * s)
                .sum();
            out.push(convert(at(offset)));
            for dim in (0..rank).rev() {
                index[dim] += 1;
                if index[dim] < self.shape[dim] {
                    break;
                }
                index[dim] = 0;
            }
        }
        out
    }

    /// Number of logical elements.
    pub fn num_elements(&self) -> usize {
        self.shape.num_elements()
    }

    /// Whether the layout is row-major with no gaps.
    pub fn is_contiguous(&self) -> bool {
        contiguous_strides(&self.shape)
            .iter()
            .zip(self.strides.iter())
            .zip(self.shape.iter())
            .all(|((expected, actual), &size)| size <= 1 || expected == actual)
    }

    /// Converts into burn-cubecl's tensor on `client`/`device` (no copy).
    pub fn into_cube_tensor<R: CubeRuntime>(
        self,
        client: ComputeClient<R>,
        device: R::Device,
    ) -> CubeTensor<R> {
        CubeTensor::new(
            client,
            self.handle,
            Metadata::new(self.shape, self.strides),
            device,
            self.dtype,
        )
    }

    /// Converts into CubeCL's standard-library tensor handle (no copy).
    pub fn into_tensor_handle<R: cubecl::Runtime>(self) -> TensorHandle<R> {
        let storage: cubecl::ir::StorageType = self.dtype.into();
        TensorHandle::new(self.handle, self.shape, self.strides, storage)
    }
}

impl<R: CubeRuntime> From<CubeTensor<R>> for TensorBuffer {
    fn from(tensor: CubeTensor<R>) -> Self {
        let meta: Box<Metadata> = tensor.meta;
        Self::new(
            tensor.handle,
            meta.shape().clone(),
            meta.strides().clone(),
            tensor.dtype,
        )
    }
}

impl<R: cubecl::Runtime> From<TensorHandle<R>> for TensorBuffer {
    fn from(tensor: TensorHandle<R>) -> Self {
        let dtype = DType::from(tensor.dtype.elem_type());
        Self::new(
            tensor.handle,
            tensor.metadata.shape().clone(),
            tensor.metadata.strides().clone(),
            dtype,
        )
    }
}

/// The host conversions take the float dtypes the kernels store: f64, f32, f16, bf16.
fn assert_float(caller: &str, dtype: DType) {
    assert!(
        matches!(dtype, DType::F64 | DType::F32 | DType::F16 | DType::BF16),
        "TensorBuffer::{caller}: dtype {dtype:?} is not a float type"
    );
}

/// Row-major strides for `shape`.
pub fn contiguous_strides(shape: &Shape) -> Strides {
    let mut strides = alloc::vec![0usize; shape.num_dims()];
    let mut current = 1;
    for (dim, &size) in shape.iter().enumerate().rev() {
        strides[dim] = current;
        current *= size.max(1);
    }
    Strides::new(&strides)
}
