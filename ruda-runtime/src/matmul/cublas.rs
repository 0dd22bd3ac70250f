//! cuBLAS products on [`RudaCuda`], issued from CubeCL's device thread.
//!
//! Each product is one task on the device thread of CubeCL's CUDA server (the thread that
//! launches every CubeCL kernel of the device, in the order the program queued them). The task
//! resolves the three buffers to device pointers through the server, then, on ruda's own stream:
//! waits for all work the context has queued so far (`cuCtxRecordEvent` + `cuStreamWaitEvent`),
//! runs `cublasGemmStridedBatchedEx` (or, for a nested batch layout, uploads one pointer per
//! batch entry and runs `cublasGemmBatchedEx`), and makes all work queued later in the context
//! wait for it (`cuEventRecord` + `cuCtxWaitEvent`). Operands are therefore written before the
//! product reads them, and the output is written before anything reads it or reuses the
//! operands' memory, on every CubeCL stream, without a host synchronisation.
//!
//! The task cannot return an error to the program (it runs later, on another thread). A failure
//! is kept in [`crate::faults`] and reported, naming the product and the device, as an error at
//! the device's next read or sync; the product's output is never written.
//!
//! No lock is shared by the three threads a product passes through (the training thread asks
//! [`available`], burn-fusion's thread queues the product, CubeCL's device thread issues it):
//! whether a device is ready is read under a read lock written once per device, the cuBLAS handle
//! and events live in the device thread's own storage, and a failure raises an atomic flag before
//! anyone takes the lock that holds its message. (A global mutex held across the cuBLAS call on
//! the device thread stalled the other two threads for every product: H200 stack samples,
//! `docs/perf/host-launch.md`.)

use core::ffi::c_void;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use burn_backend::DType;
use cubecl::{
    Runtime as CubeclRuntime,
    client::ComputeClient,
    cuda::CudaDevice,
    device::Device,
    device_handle::DeviceHandle,
    server::{ComputeServer, Handle},
    stream_id::StreamId,
    zspace::Strides,
};
use cudarc::cublas::sys as blas;
use cudarc::driver::sys as cu;

use super::plan::{
    BatchLayout, GemmPlan, GemmUnsupported, output_shape, output_strides, plan, plan_into,
    plan_strided,
};
use super::supports_dtype;
use crate::layout::into_contiguous;
use crate::runtime::cuda::RudaCuda;
use crate::tensor_buffer::TensorBuffer;

type Server = <RudaCuda as CubeclRuntime>::Server;

/// The first driver API with context-wide events (CUDA 12.5).
const MIN_DRIVER_API: i32 = 12050;

/// Whether products on `device` run through cuBLAS: `Ok` once the library loaded and its handle,
/// stream and events exist for the device; `Err` with the reason otherwise (checked once per
/// device, on the first call; later calls take a read lock only).
pub fn available(device: &CudaDevice) -> Result<(), String> {
    if !super::settings().native {
        return Err(format!("{}=cubecl", super::ENV_MATMUL));
    }
    if let Some(known) = AVAILABILITY
        .read()
        .expect("ruda matmul availability lock")
        .get(&device.index)
    {
        return known.clone();
    }
    // First call for this device: one thread sets it up while the others wait for the answer.
    let mut availability = AVAILABILITY.write().expect("ruda matmul availability lock");
    if let Some(known) = availability.get(&device.index) {
        return known.clone();
    }
    let result = initialize(device);
    if let Err(reason) = &result {
        log::warn!(
            "ruda: matrix products on cuda:{} stay Burn's: {reason}",
            device.index
        );
    }
    availability.insert(device.index, result.clone());
    result
}

/// `lhs x rhs` through cuBLAS: a fresh row-major `[broadcast batch.., m, n]` buffer of `lhs`'s
/// dtype. [`available`] must have returned `Ok` for the device, both dtypes must be equal and
/// [`supports_dtype`](super::supports_dtype); an operand whose layout [`plan`] refuses is
/// copied row-major first.
pub fn matmul(
    client: &ComputeClient<RudaCuda>,
    device: &CudaDevice,
    lhs: TensorBuffer,
    rhs: TensorBuffer,
) -> TensorBuffer {
    matmul_with(client, device, lhs, rhs, super::settings().tf32)
}

/// [`matmul`] with f32 products in TF32 (`tf32`) or full f32, whatever the settings say.
pub fn matmul_with(
    client: &ComputeClient<RudaCuda>,
    device: &CudaDevice,
    lhs: TensorBuffer,
    rhs: TensorBuffer,
    tf32: bool,
) -> TensorBuffer {
    assert!(
        lhs.dtype == rhs.dtype && supports_dtype(lhs.dtype),
        "ruda matmul: operands of dtypes {:?} and {:?} (f32, f16, bf16 or f64, equal)",
        lhs.dtype,
        rhs.dtype
    );
    // An operand whose strides no GEMM operand describes (neither its rows nor its columns
    // contiguous, or more nested batch dimensions than a plan walks; with
    // `RUDA_MATMUL_NESTED=off` also any nested batch) is copied row-major first: at most one
    // copy an operand, since a row-major operand always has a strided plan. The output follows
    // an operand's memory order where `output_strides` says so (attention's layouts, the
    // key's gradient included; `RUDA_MATMUL_OUTPUT_ORDER=off`: never; `=rhs`: not a transposed
    // left-hand side's), else, or where no plan writes that order, it is row-major.
    let settings = super::settings();
    let (mut lhs, mut rhs) = (lhs, rhs);
    let mut follow = settings.nested && settings.output_order;
    let (gemm, out_strides) = loop {
        let out_strides = match output_shape(&lhs.shape, &rhs.shape) {
            Ok(shape) if follow => output_strides(
                &shape,
                (&lhs.shape, &lhs.strides),
                (&rhs.shape, &rhs.strides),
                settings.transposed_order,
            ),
            _ => Vec::new(),
        };
        let planned = match (settings.nested, out_strides.is_empty()) {
            (false, _) => plan_strided(&lhs.shape, &lhs.strides, &rhs.shape, &rhs.strides),
            (true, true) => plan(&lhs.shape, &lhs.strides, &rhs.shape, &rhs.strides),
            (true, false) => plan_into(
                &lhs.shape,
                &lhs.strides,
                &rhs.shape,
                &rhs.strides,
                &out_strides,
            ),
        };
        match planned {
            Ok(gemm) => break (gemm, out_strides),
            Err(GemmUnsupported::OutputLayout) if follow => follow = false,
            Err(GemmUnsupported::LhsLayout) if !lhs.is_contiguous() => {
                lhs = into_contiguous(client, lhs)
            }
            Err(GemmUnsupported::RhsLayout) if !rhs.is_contiguous() => {
                rhs = into_contiguous(client, rhs)
            }
            Err(why) => panic!(
                "ruda matmul: no GEMM for shapes {:?} x {:?} with strides {:?} and {:?}: {why}",
                lhs.shape, rhs.shape, lhs.strides, rhs.strides
            ),
        }
    };
    let shape = output_shape(&lhs.shape, &rhs.shape).expect("planned above");
    let mut out = TensorBuffer::empty(client, shape.into(), lhs.dtype);
    if !out_strides.is_empty() {
        // Same elements, no gaps (`output_strides`): only the order differs.
        out.strides = Strides::new(&out_strides);
    }
    let call = GemmCall {
        device: device.index,
        gemm,
        dtype: lhs.dtype,
        tf32,
        lhs: lhs.handle,
        rhs: rhs.handle,
        out: out.handle.clone(),
    };
    DeviceHandle::<Server>::new(device.to_id()).submit(move |server| call.run(server));
    out
}

/// Number of products queued through cuBLAS by this process (a test hook).
pub fn calls() -> usize {
    CALLS.load(Ordering::SeqCst)
}

static CALLS: AtomicUsize = AtomicUsize::new(0);

/// Per device index: whether cuBLAS is set up (written once, on the first [`available`]).
static AVAILABILITY: RwLock<BTreeMap<usize, Result<(), String>>> = RwLock::new(BTreeMap::new());

thread_local! {
    /// The cuBLAS handle, stream and events of each device whose CubeCL thread this is: created
    /// by a task on that thread and used only by tasks on it.
    static DEVICE_BLAS: RefCell<BTreeMap<usize, DeviceBlas>> = const { RefCell::new(BTreeMap::new()) };
}

/// What one device's products need, created on its device thread and used only there.
struct DeviceBlas {
    handle: blas::cublasHandle_t,
    stream: cu::CUstream,
    context: cu::CUcontext,
    /// Recorded over the whole context before a product: what its operands wait for.
    operands_ready: cu::CUevent,
    /// Recorded on `stream` after a product: what later work waits for.
    product_done: cu::CUevent,
    /// Device memory for the pointer arrays of [`BatchLayout::Nested`] products, as
    /// `(address, bytes)` (0 until the first such product); written in `stream`'s order, so
    /// that the next product's upload waits for the previous product that read it.
    pointer_arrays: Cell<(cu::CUdeviceptr, usize)>,
}

/// Loads cuBLAS and creates the device's handle, stream and events on its CubeCL thread, kept
/// there.
fn initialize(device: &CudaDevice) -> Result<(), String> {
    // SAFETY: only probes whether the shared library can be opened.
    if !unsafe { blas::is_culib_present() } {
        return Err(
            "libcublas does not load (install the CUDA toolkit's cuBLAS, or put the \
                    directory of libcublas.so on LD_LIBRARY_PATH)"
                .into(),
        );
    }
    let mut api = 0i32;
    // SAFETY: the driver writes one integer.
    let status = unsafe { cu::cuDriverGetVersion(&mut api) };
    if status != cu::CUresult::CUDA_SUCCESS || api < MIN_DRIVER_API {
        return Err(format!(
            "the CUDA driver implements API {api}, context-wide events need {MIN_DRIVER_API}"
        ));
    }
    let index = device.index;
    let created = DeviceHandle::<Server>::new(device.to_id())
        .submit_blocking(move |_server| {
            // Kept in the device thread's storage, where the products' tasks will run.
            DeviceBlas::create(index).map(|blas| {
                DEVICE_BLAS.with_borrow_mut(|all| {
                    all.insert(index, blas);
                })
            })
        })
        .map_err(|err| format!("CubeCL's device thread did not answer: {err:?}"))?;
    created.map_err(|err| format!("setting up cuBLAS on cuda:{index}: {err}"))
}

impl DeviceBlas {
    fn create(index: usize) -> Result<Self, String> {
        use cudarc::driver::result::{device, event, primary_ctx, stream};
        // SAFETY: plain driver calls on a valid ordinal; the primary context is the one CubeCL's
        // server retained for this device (`primary_ctx::retain` returns the same context).
        unsafe {
            let dev = device::get(index as i32).map_err(|e| format!("cuDeviceGet: {e}"))?;
            let context = primary_ctx::retain(dev).map_err(|e| format!("retain context: {e}"))?;
            cudarc::driver::result::ctx::set_current(context)
                .map_err(|e| format!("cuCtxSetCurrent: {e}"))?;
            let stream = stream::create(stream::StreamKind::NonBlocking)
                .map_err(|e| format!("cuStreamCreate: {e}"))?;
            let flags = cu::CUevent_flags::CU_EVENT_DISABLE_TIMING;
            let operands_ready = event::create(flags).map_err(|e| format!("cuEventCreate: {e}"))?;
            let product_done = event::create(flags).map_err(|e| format!("cuEventCreate: {e}"))?;
            // The context-wide event calls once, so that a driver without them says so now.
            driver(
                cu::cuCtxRecordEvent(context, operands_ready),
                "cuCtxRecordEvent",
            )?;
            driver(
                cu::cuCtxWaitEvent(context, operands_ready),
                "cuCtxWaitEvent",
            )?;
            let mut handle = core::ptr::null_mut();
            cublas(blas::cublasCreate_v2(&mut handle), "cublasCreate")?;
            cublas(
                blas::cublasSetStream_v2(handle, stream as blas::cudaStream_t),
                "cublasSetStream",
            )?;
            Ok(Self {
                handle,
                stream,
                context,
                operands_ready,
                product_done,
                pointer_arrays: Cell::new((0, 0)),
            })
        }
    }
}

/// One queued product.
struct GemmCall {
    device: usize,
    gemm: GemmPlan,
    dtype: DType,
    tf32: bool,
    lhs: Handle,
    rhs: Handle,
    out: Handle,
}

impl GemmCall {
    /// Runs on the device thread; a failure (or an injected one: [`crate::faults`]) is kept
    /// for the device's next read or sync to report, and the output stays unwritten.
    fn run(self, server: &mut Server) {
        let (device, dtype, gemm) = (self.device, self.dtype, self.gemm);
        let id = CudaDevice::new(device).to_id();
        let name = format!("cuda:{device}");
        if crate::faults::take_injected("ruda_matmul") {
            crate::faults::record(id, name, "ruda_matmul", "injected failure (a test hook)");
            return;
        }
        if let Err(err) = self.issue(server) {
            crate::faults::record(
                id,
                name,
                "ruda_matmul",
                format!("{err} ({dtype:?} {gemm:?})"),
            );
        }
    }

    fn issue(self, server: &mut Server) -> Result<(), String> {
        let GemmCall {
            device,
            gemm,
            dtype,
            tf32,
            lhs,
            rhs,
            out,
        } = self;
        let stream = StreamId::current();
        let mut pointer = |handle: Handle, what: &str| {
            server
                .get_resource(handle.binding(), stream)
                .map_err(|e| format!("resolving the {what} buffer: {e:?}"))
        };
        // The resources keep the allocations alive until the product is queued; CubeCL's later
        // reuse of the memory waits for the product through the context-wide event.
        let lhs = pointer(lhs, "left-hand")?;
        let rhs = pointer(rhs, "right-hand")?;
        let out = pointer(out, "output")?;
        let pointers = [lhs.resource().ptr, rhs.resource().ptr, out.resource().ptr];
        DEVICE_BLAS.with_borrow(|all| {
            let blas = all
                .get(&device)
                .ok_or("cuBLAS is not set up on this thread for this device")?;
            gemm_on(blas, gemm, dtype, tf32, pointers)
        })?;
        CALLS.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// Queues the product `g` on `device`'s stream between the two context-wide events, on the
/// device pointers `[lhs, rhs, out]`.
fn gemm_on(
    device: &DeviceBlas,
    g: GemmPlan,
    dtype: DType,
    tf32: bool,
    pointers: [u64; 3],
) -> Result<(), String> {
    // SAFETY: the events and stream belong to this thread's context (`DeviceBlas::create`).
    unsafe { device.wait_for_context()? };
    gemm_call(device, g, dtype, tf32, pointers)?;
    // SAFETY: as above.
    unsafe { device.make_context_wait() }
}

impl DeviceBlas {
    /// Makes ruda's stream wait for all work queued so far on any stream of the context.
    ///
    /// # Safety
    /// On the thread whose context this is.
    unsafe fn wait_for_context(&self) -> Result<(), String> {
        // SAFETY: the caller's contract.
        unsafe {
            driver(
                cu::cuCtxRecordEvent(self.context, self.operands_ready),
                "cuCtxRecordEvent",
            )?;
            driver(
                cu::cuStreamWaitEvent(self.stream, self.operands_ready, 0),
                "cuStreamWaitEvent",
            )
        }
    }

    /// Makes all work queued later on any stream of the context wait for ruda's stream.
    ///
    /// # Safety
    /// On the thread whose context this is.
    unsafe fn make_context_wait(&self) -> Result<(), String> {
        // SAFETY: the caller's contract.
        unsafe {
            driver(
                cu::cuEventRecord(self.product_done, self.stream),
                "cuEventRecord",
            )?;
            driver(
                cu::cuCtxWaitEvent(self.context, self.product_done),
                "cuCtxWaitEvent",
            )
        }
    }
}

impl DeviceBlas {
    /// Copies `pointers` into the device's pointer-array memory on `stream` and returns its
    /// device address. The copy is queued in `stream`'s order, so it starts after the products
    /// queued before it have read the previous arrays; the driver has taken `pointers` from
    /// host memory when this returns. Growing the memory (a few times a process: the capacity
    /// doubles) waits for `stream` before freeing the old block, so that no queued product
    /// reads freed memory; plain `cuMemAlloc`, since not every device has stream-ordered pools.
    ///
    /// # Safety
    /// On the thread whose context this is.
    unsafe fn upload_pointer_arrays(&self, pointers: &[u64]) -> Result<cu::CUdeviceptr, String> {
        let bytes = core::mem::size_of_val(pointers);
        let (mut address, capacity) = self.pointer_arrays.get();
        // SAFETY: the caller's contract; the old block is freed only once `stream`, the only
        // stream that reads it, has drained.
        unsafe {
            if capacity < bytes {
                if address != 0 {
                    driver(cu::cuStreamSynchronize(self.stream), "cuStreamSynchronize")?;
                    self.pointer_arrays.set((0, 0));
                    driver(cu::cuMemFree_v2(address), "cuMemFree")?;
                }
                let grown = bytes.next_power_of_two().max(4096);
                driver(cu::cuMemAlloc_v2(&mut address, grown), "cuMemAlloc")?;
                self.pointer_arrays.set((address, grown));
            }
            driver(
                cu::cuMemcpyHtoDAsync_v2(address, pointers.as_ptr().cast(), bytes, self.stream),
                "cuMemcpyHtoDAsync",
            )?;
        }
        Ok(address)
    }
}

/// The cuBLAS call of the product `g` on `device`'s stream, with no ordering around it.
fn gemm_call(
    device: &DeviceBlas,
    g: GemmPlan,
    dtype: DType,
    tf32: bool,
    [lhs, rhs, out]: [u64; 3],
) -> Result<(), String> {
    let (data, compute) = types(dtype, tf32);
    let (one_f32, zero_f32, one_f64, zero_f64) = (1.0f32, 0.0f32, 1.0f64, 0.0f64);
    let (alpha, beta): (*const core::ffi::c_void, *const core::ffi::c_void) = if dtype == DType::F64
    {
        (
            (&one_f64 as *const f64).cast(),
            (&zero_f64 as *const f64).cast(),
        )
    } else {
        (
            (&one_f32 as *const f32).cast(),
            (&zero_f32 as *const f32).cast(),
        )
    };
    let op = |column_major: bool| {
        if column_major {
            blas::cublasOperation_t::CUBLAS_OP_T
        } else {
            blas::cublasOperation_t::CUBLAS_OP_N
        }
    };
    // Row-major C = A B is column-major C^T = B^T A^T: cuBLAS's first operand is our
    // right-hand side, its `m` our `n`. A row-major operand read column-major is its
    // transpose already (op N); a column-major one needs op T.
    let int = |v: usize| v as i32;
    if let BatchLayout::Nested { .. } = g.batch_layout {
        // One array of pointers each for the right-hand side, the left-hand side and the
        // output, back to back.
        let bytes = dtype.size() as u64;
        let mut pointers = Vec::with_capacity(3 * g.batch);
        pointers.extend(g.entry_offsets().map(|(_, r, _)| rhs + r as u64 * bytes));
        pointers.extend(g.entry_offsets().map(|(l, _, _)| lhs + l as u64 * bytes));
        pointers.extend(g.entry_offsets().map(|(_, _, o)| out + o as u64 * bytes));
        // SAFETY: on the device thread, whose context owns `device`'s stream.
        let arrays = unsafe { device.upload_pointer_arrays(&pointers)? };
        let entry = core::mem::size_of::<u64>() as u64;
        let array = |i: u64| (arrays + i * g.batch as u64 * entry) as *const *const c_void;
        let (rhs_array, lhs_array) = (array(0), array(1));
        // A row-major output is computed as C^T = B^T A^T (cuBLAS's A, B are our rhs, lhs);
        // a column-major one (an output in a transposed operand's order) is cuBLAS's own
        // C = A B, with A, B our lhs, rhs: a row-major operand read column-major is then its
        // transpose (op T).
        let ((a, op_a, lda), (b, op_b, ldb), (rows, cols)) = if g.out.column_major {
            (
                (lhs_array, op(!g.lhs.column_major), g.lhs.ld),
                (rhs_array, op(!g.rhs.column_major), g.rhs.ld),
                (g.m, g.n),
            )
        } else {
            (
                (rhs_array, op(g.rhs.column_major), g.rhs.ld),
                (lhs_array, op(g.lhs.column_major), g.lhs.ld),
                (g.n, g.m),
            )
        };
        // SAFETY: the arrays hold `batch` pointers each into live device buffers of the sizes
        // the plan was made from (the caller holds them), uploaded on this stream before the
        // call; `device`'s handle belongs to this thread's context.
        return unsafe {
            cublas(
                blas::cublasGemmBatchedEx(
                    device.handle,
                    op_a,
                    op_b,
                    int(rows),
                    int(cols),
                    int(g.k),
                    alpha,
                    a,
                    data,
                    int(lda),
                    b,
                    data,
                    int(ldb),
                    beta,
                    array(2) as *const *mut c_void,
                    data,
                    int(g.out.ld),
                    int(g.batch),
                    compute,
                    blas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                ),
                "cublasGemmBatchedEx",
            )
        };
    }
    debug_assert!(
        !g.out.column_major && g.out.ld == g.n,
        "a strided plan writes row-major"
    );
    // SAFETY: the pointers are live device buffers of the sizes the plan was made from (the
    // caller holds them); `device`'s handle belongs to this thread's context.
    unsafe {
        cublas(
            blas::cublasGemmStridedBatchedEx(
                device.handle,
                op(g.rhs.column_major),
                op(g.lhs.column_major),
                int(g.n),
                int(g.m),
                int(g.k),
                alpha,
                rhs as *const core::ffi::c_void,
                data,
                int(g.rhs.ld),
                g.rhs.batch_stride as i64,
                lhs as *const core::ffi::c_void,
                data,
                int(g.lhs.ld),
                g.lhs.batch_stride as i64,
                beta,
                out as *mut core::ffi::c_void,
                data,
                int(g.n),
                (g.m * g.n) as i64,
                int(g.batch),
                compute,
                blas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            ),
            "cublasGemmStridedBatchedEx",
        )
    }
}

/// cuBLAS's data and compute types for `dtype`.
fn types(dtype: DType, tf32: bool) -> (blas::cudaDataType, blas::cublasComputeType_t) {
    use blas::cublasComputeType_t::*;
    use blas::cudaDataType::*;
    match dtype {
        DType::F32 if tf32 => (CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32),
        DType::F32 => (CUDA_R_32F, CUBLAS_COMPUTE_32F),
        DType::F16 => (CUDA_R_16F, CUBLAS_COMPUTE_32F),
        DType::BF16 => (CUDA_R_16BF, CUBLAS_COMPUTE_32F),
        DType::F64 => (CUDA_R_64F, CUBLAS_COMPUTE_64F),
        other => unreachable!("ruda matmul: dtype {other:?} was checked before queueing"),
    }
}

fn driver(status: cu::CUresult, call: &str) -> Result<(), String> {
    if status == cu::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(format!("{call}: {status:?}"))
    }
}

fn cublas(status: blas::cublasStatus_t, call: &str) -> Result<(), String> {
    if status == blas::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(format!("{call}: {status:?}"))
    }
}

/// Host time per call of a product's pieces, measured on the device thread (the thread that
/// issues every product), microseconds: the median over `rounds` batches of `calls` back-to-back
/// calls, each batch followed by an untimed stream sync. For the launch-cost benchmark
/// (`gpu_suite --launch-costs`), which sets these beside a whole product and a CubeCL launch.
#[derive(Clone, Copy, Debug)]
pub struct ProductHostCosts {
    /// The four driver calls that order a product with CubeCL's streams (a context-wide event
    /// record and a stream wait before it, an event record and a context-wide wait after it).
    pub fence_us: f64,
    /// `cublasGemmStridedBatchedEx` alone, a 16x16x16 f32 product on scratch buffers.
    pub gemm_us: f64,
    /// Both, as a product issues them.
    pub fenced_gemm_us: f64,
}

/// Measures [`ProductHostCosts`] on `device`'s CubeCL thread. `Err` when cuBLAS is not
/// available there ([`available`]) or a driver call fails.
pub fn product_host_costs(
    device: &CudaDevice,
    calls: usize,
    rounds: usize,
) -> Result<ProductHostCosts, String> {
    available(device)?;
    let index = device.index;
    DeviceHandle::<Server>::new(device.to_id())
        .submit_blocking(move |_server| {
            DEVICE_BLAS.with_borrow(|all| {
                let blas = all
                    .get(&index)
                    .ok_or("cuBLAS is not set up on this thread for this device")?;
                measure_host_costs(blas, calls.max(1), rounds.max(1))
            })
        })
        .map_err(|err| format!("CubeCL's device thread did not answer: {err:?}"))?
}

fn measure_host_costs(
    blas: &DeviceBlas,
    calls: usize,
    rounds: usize,
) -> Result<ProductHostCosts, String> {
    use cudarc::driver::result::{ctx, free_sync, malloc_sync, stream};
    const N: usize = 16;
    let gemm = plan(&[N, N], &[N, 1], &[N, N], &[N, 1]).map_err(|e| format!("{e:?}"))?;
    // SAFETY: the context is the device's primary context, current on this thread for the
    // scratch buffers' lifetime; every queued call reads or writes only them and finishes
    // before they are freed (the stream and context syncs below).
    unsafe {
        ctx::set_current(blas.context).map_err(|e| format!("cuCtxSetCurrent: {e}"))?;
        let mut scratch = [0u64; 3];
        for buffer in &mut scratch {
            *buffer = malloc_sync(N * N * 4).map_err(|e| format!("cuMemAlloc: {e}"))?;
        }
        let time = |piece: &mut dyn FnMut() -> Result<(), String>| {
            let mut per_call = Vec::with_capacity(rounds);
            for _ in 0..rounds {
                let start = std::time::Instant::now();
                for _ in 0..calls {
                    piece()?;
                }
                per_call.push(start.elapsed().as_secs_f64() * 1e6 / calls as f64);
                stream::synchronize(blas.stream)
                    .map_err(|e| format!("cuStreamSynchronize: {e}"))?;
                ctx::synchronize().map_err(|e| format!("cuCtxSynchronize: {e}"))?;
            }
            per_call.sort_by(f64::total_cmp);
            Ok::<f64, String>(per_call[rounds / 2])
        };
        let fence_us = time(&mut || {
            blas.wait_for_context()?;
            blas.make_context_wait()
        });
        let gemm_us = time(&mut || gemm_call(blas, gemm, DType::F32, false, scratch));
        let fenced_gemm_us = time(&mut || gemm_on(blas, gemm, DType::F32, false, scratch));
        for buffer in scratch {
            free_sync(buffer).map_err(|e| format!("cuMemFree: {e}"))?;
        }
        Ok(ProductHostCosts {
            fence_us: fence_us?,
            gemm_us: gemm_us?,
            fenced_gemm_us: fenced_gemm_us?,
        })
    }
}
