// A GPU timeline recorder for any CUDA program, loaded by the CUDA driver itself:
//
//   CUDA_INJECTION64_PATH=/path/libcupti_trace.so CUPTI_TRACE_OUT=trace.tsv PROGRAM...
//
// The driver calls InitializeInjection() at cuInit; it turns on CUPTI's activity records for
// kernels, copies, memsets, synchronizations and every driver and runtime API call, and writes one line per
// record to CUPTI_TRACE_OUT as CUPTI hands its buffers back (off the program's threads), the
// rest at exit. benches/device/gpu_timeline.py reads the file.
//
// Why our own: the GPU machine's Nsight Systems cannot make a report (it writes a .qdstrm and
// stops), and Nsight Compute times kernels one at a time, so neither shows what the GPU does
// between kernels in a real step. CUPTI's activity API is the layer both are built on.
//
// Lines (tab-separated, times in ns on CUPTI's clock, the same for host and device records):
//   K start end stream correlation grid block name          a kernel
//   C start end stream correlation bytes copy_kind          a memcpy (1 HtoD, 2 DtoH, 8 DtoD, ...)
//   S start end stream correlation bytes                    a memset
//   A start end thread correlation name                     a driver API call
//   R start end thread correlation name                     a runtime API call (cudart: how
//                                                           PyTorch launches; its kernels
//                                                           correlate with these)
//   Y start end stream correlation type event               a synchronization (1 event sync,
//                                                           2 stream wait event, 3 stream sync,
//                                                           4 context sync)
//   D dropped_records                                       records CUPTI could not keep
#include <cupti.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUFFER_SIZE (16u << 20)

static FILE *out;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

// CUPTI calls back for an empty buffer: hand it a fresh one, 8-byte aligned as it requires.
static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = aligned_alloc(8, BUFFER_SIZE);
  *size = *buffer ? BUFFER_SIZE : 0;
  *max_records = 0;
}

static const char *api_name(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  const char *name = NULL;
  if (cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || !name)
    return "unknown";
  return name;
}

static void write_record(CUpti_Activity *record) {
  switch (record->kind) {
  case CUPTI_ACTIVITY_KIND_KERNEL:
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
    CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)record;
    fprintf(out, "K\t%llu\t%llu\t%u\t%u\t%ux%ux%u\t%ux%ux%u\t%s\n", (unsigned long long)k->start,
            (unsigned long long)k->end, k->streamId, k->correlationId, k->gridX, k->gridY,
            k->gridZ, k->blockX, k->blockY, k->blockZ, k->name ? k->name : "?");
    break;
  }
  case CUPTI_ACTIVITY_KIND_MEMCPY: {
    CUpti_ActivityMemcpy6 *c = (CUpti_ActivityMemcpy6 *)record;
    fprintf(out, "C\t%llu\t%llu\t%u\t%u\t%llu\t%u\n", (unsigned long long)c->start,
            (unsigned long long)c->end, c->streamId, c->correlationId,
            (unsigned long long)c->bytes, (unsigned)c->copyKind);
    break;
  }
  case CUPTI_ACTIVITY_KIND_MEMSET: {
    CUpti_ActivityMemset4 *s = (CUpti_ActivityMemset4 *)record;
    fprintf(out, "S\t%llu\t%llu\t%u\t%u\t%llu\n", (unsigned long long)s->start,
            (unsigned long long)s->end, s->streamId, s->correlationId,
            (unsigned long long)s->bytes);
    break;
  }
  case CUPTI_ACTIVITY_KIND_DRIVER:
  case CUPTI_ACTIVITY_KIND_RUNTIME: {
    CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)record;
    int driver = record->kind == CUPTI_ACTIVITY_KIND_DRIVER;
    fprintf(out, "%c\t%llu\t%llu\t%u\t%u\t%s\n", driver ? 'A' : 'R',
            (unsigned long long)a->start, (unsigned long long)a->end, a->threadId,
            a->correlationId,
            api_name(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid));
    break;
  }
  case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
    CUpti_ActivitySynchronization2 *y = (CUpti_ActivitySynchronization2 *)record;
    fprintf(out, "Y\t%llu\t%llu\t%u\t%u\t%u\t%u\n", (unsigned long long)y->start,
            (unsigned long long)y->end, y->streamId, y->correlationId, (unsigned)y->type,
            y->cudaEventId);
    break;
  }
  default:
    break;
  }
}

// CUPTI hands a filled buffer back (on its own thread, or in cuptiActivityFlushAll).
static void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t *buffer,
                                      size_t size, size_t valid) {
  (void)context;
  (void)stream;
  (void)size;
  CUpti_Activity *record = NULL;
  pthread_mutex_lock(&out_lock);
  if (out) {
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS)
      write_record(record);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS &&
        dropped)
      fprintf(out, "D\t%zu\n", dropped);
    fflush(out);
  }
  pthread_mutex_unlock(&out_lock);
  free(buffer);
}

static void finish(void) {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  pthread_mutex_lock(&out_lock);
  if (out) {
    fclose(out);
    out = NULL;
  }
  pthread_mutex_unlock(&out_lock);
}

#define CHECK(call)                                                                            \
  do {                                                                                         \
    CUptiResult status = (call);                                                               \
    if (status != CUPTI_SUCCESS) {                                                             \
      const char *message = NULL;                                                              \
      cuptiGetResultString(status, &message);                                                  \
      fprintf(stderr, "cupti_trace: %s failed: %s\n", #call, message ? message : "?");         \
      return 1;                                                                                \
    }                                                                                          \
  } while (0)

// The driver's injection entry point: returns 1 on success (the driver ignores failures, so
// each is also reported on stderr and the program runs untraced).
int InitializeInjection(void) {
  const char *path = getenv("CUPTI_TRACE_OUT");
  if (!path || !*path)
    path = "cupti_trace.tsv";
  out = fopen(path, "w");
  if (!out) {
    perror("cupti_trace: cannot open CUPTI_TRACE_OUT");
    return 0;
  }
  // A large stdio buffer: the writes come in bursts of a whole activity buffer.
  setvbuf(out, NULL, _IOFBF, 4u << 20);
  CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
  CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
  CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER));
  // Runtime calls only name what issued a cudart program's kernels: without them the trace
  // still holds everything else.
  if (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME) != CUPTI_SUCCESS)
    fprintf(stderr, "cupti_trace: runtime API records unavailable; recording the rest\n");
  CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));
  // Hand full buffers back every second, so a run stopped by a timeout loses at most that.
  cuptiActivityFlushPeriod(1000);
  atexit(finish);
  return 1;
}
