#include "runtime/device/cuda/cuda_device.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/logger.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/capture_memory.h"
#include "runtime/device/cuda/cuda_activation_ops.h"
#include "runtime/device/cuda/cuda_attention_ops.h"
#include "runtime/device/cuda/cuda_context.h"
#include "runtime/device/cuda/cuda_conv_ops.h"
#include "runtime/device/cuda/cuda_embedding_ops.h"
#include "runtime/device/cuda/cuda_handles.h"
#include "runtime/device/cuda/cuda_loss_ops.h"
#include "runtime/device/cuda/cuda_matmul_ops.h"
#include "runtime/device/cuda/cuda_memory_pool.h"
#include "runtime/device/cuda/cuda_norm_ops.h"
#include "runtime/device/cuda/cuda_optimizer_ops.h"
#include "runtime/device/cuda/cuda_status.h"
#include "runtime/device/cuda/cuda_tensor_ops.h"
#include "runtime/device/cuda/cudnn_attention.h"
#include "runtime/device/cuda/id_check.h"
#include "runtime/device/cuda/pinned_host_allocator.h"
#include "runtime/device/ops.h"
#include "runtime/device/ops/offload_copy.h"

namespace gpipe {
namespace {

// A timing event recorded on a device's compute stream; remembers its device so that events of
// two devices are never compared.
class CudaEvent final : public DeviceEvent {
 public:
  CudaEvent(const Device* owner, cuda::Event event) : owner_(owner), event_(std::move(event)) {}
  const Device* owner() const { return owner_; }
  cudaEvent_t get() const { return event_.get(); }

 private:
  const Device* owner_;
  cuda::Event event_;
};

// Everything a CudaDevice owns that can fail to be created, made before the device so that its
// constructor cannot fail; each part releases itself if a later one fails.
struct CudaDeviceParts {
  CudaDeviceOptions options;
  int multiprocessors = 0;
  cuda::Stream compute_stream;
  cuda::Stream host_to_device_stream;
  cuda::Stream offload_stream;
  cuda::Stream capture_memory_stream;
  cuda::Event compute_ready;
  cuda::Event copy_done;
  cuda::MemPool pool;
  cuda::CublasHandle cublas;
  cuda::CublasLtHandle cublas_lt;
  cuda::CudnnHandle cudnn;
  cuda::IdChecks id_checks;
};

absl::StatusOr<CudaDeviceParts> CreateParts(const CudaDeviceOptions& options) {
  ASSIGN_OR_RETURN(cuda::IdChecks id_checks,
                   cuda::IdChecks::Create(absl::StrCat("cuda:", options.ordinal)));
  CudaDeviceParts parts{.options = options, .id_checks = std::move(id_checks)};
  int pools_supported = 0;
  GPIPE_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&pools_supported, cudaDevAttrMemoryPoolsSupported, options.ordinal));
  if (pools_supported == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cuda:", options.ordinal,
        " does not support stream-ordered memory pools "
        "(cudaMallocAsync), which the CUDA backend allocates from; use a newer GPU or driver"));
  }
  GPIPE_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(
      &parts.multiprocessors, cudaDevAttrMultiProcessorCount, options.ordinal));
  ASSIGN_OR_RETURN(parts.compute_stream, cuda::CreateStream());
  ASSIGN_OR_RETURN(parts.host_to_device_stream, cuda::CreateStream());
  ASSIGN_OR_RETURN(parts.offload_stream, cuda::CreateStream());
  ASSIGN_OR_RETURN(parts.capture_memory_stream, cuda::CreateStream());
  ASSIGN_OR_RETURN(parts.compute_ready, cuda::CreateEvent(/*timing=*/false));
  ASSIGN_OR_RETURN(parts.copy_done, cuda::CreateEvent(/*timing=*/false));
  ASSIGN_OR_RETURN(parts.pool, cuda::CreateMemPool(options.ordinal));
  ASSIGN_OR_RETURN(parts.cublas,
                   cuda::CreateCublas(parts.compute_stream.get(), options.allow_tf32));
  ASSIGN_OR_RETURN(parts.cublas_lt, cuda::CreateCublasLt());
  ASSIGN_OR_RETURN(parts.cudnn, cuda::CreateCudnn(parts.compute_stream.get()));
  return parts;
}

// An offload copy issued on the device's offload stream: `done` is recorded after it. Holds both
// tensors until it has finished (the device storage is freed in compute-stream order, which
// knows nothing of the offload stream); an unfinished copy is waited for when destroyed.
class CudaCopy final : public AsyncCopy {
 public:
  CudaCopy(Tensor source, Tensor destination, cuda::Event done, cudaStream_t compute,
           const Logger& logger)
      : source_(std::move(source)),
        destination_(std::move(destination)),
        done_(std::move(done)),
        compute_(compute),
        logger_(logger) {}
  CudaCopy(const CudaCopy&) = delete;
  CudaCopy& operator=(const CudaCopy&) = delete;
  ~CudaCopy() override {
    if (const cudaError_t error = cudaEventSynchronize(done_.get()); error != cudaSuccess) {
      logger_.Error(absl::StrCat("an offload copy failed: ", cudaGetErrorString(error)));
    }
  }

  absl::StatusOr<bool> Finished() override {
    const cudaError_t query = cudaEventQuery(done_.get());
    if (query == cudaErrorNotReady) return false;
    GPIPE_CUDA_RETURN_IF_ERROR(query);
    return true;
  }
  absl::Status OrderComputeAfter() override {
    GPIPE_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(compute_, done_.get(), 0));
    return absl::OkStatus();
  }

 private:
  Tensor source_;
  Tensor destination_;
  cuda::Event done_;
  cudaStream_t compute_;
  const Logger& logger_;
};

// The capture arena's blocks (capture_memory.h): taken from the device's pool off the compute
// stream, which may be being captured, and given back on it, outside any capture.
class CaptureBlocks final : public Allocator {
 public:
  CaptureBlocks(CudaMemoryPool& pool, cudaStream_t side_stream)
      : pool_(pool), side_stream_(side_stream) {}
  absl::StatusOr<void*> Allocate(int64_t bytes, MemoryKind kind) override {
    return pool_.AllocateOffStream(bytes, kind, side_stream_);
  }
  void Free(void* ptr, int64_t bytes, MemoryKind kind) override { pool_.Free(ptr, bytes, kind); }
  void Recount(int64_t bytes, MemoryKind from, MemoryKind to) override {
    pool_.Recount(bytes, from, to);
  }
  bool host_accessible() const override { return false; }

 private:
  CudaMemoryPool& pool_;
  const cudaStream_t side_stream_;
};

// A captured CUDA graph, instantiated once, launched on the compute stream.
class CudaWorkGraph final : public WorkGraph {
 public:
  CudaWorkGraph(const Device& device, const CaptureMemory& capture_memory, cudaStream_t stream,
                std::unique_ptr<CaptureMemory::GraphHold> hold, cuda::Graph graph,
                cuda::GraphExec exec)
      : device_(device),
        capture_memory_(capture_memory),
        stream_(stream),
        hold_(std::move(hold)),
        graph_(std::move(graph)),
        exec_(std::move(exec)) {}

  absl::Status Launch() override {
    if (capture_memory_.capturing()) {
      return absl::FailedPreconditionError(
          absl::StrCat(device_.name(), ": WorkGraph::Launch while work is being captured"));
    }
    GPIPE_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec_.get(), stream_));
    return absl::OkStatus();
  }

 private:
  const Device& device_;
  const CaptureMemory& capture_memory_;
  const cudaStream_t stream_;
  // Destroyed last: the deferred frees and the arena's blocks go back on the stream, after the
  // launches issued before.
  const std::unique_ptr<CaptureMemory::GraphHold> hold_;
  const cuda::Graph graph_;
  const cuda::GraphExec exec_;
};

// Streams: every op, allocation, free and device-to-host copy is issued on the compute stream,
// so they run in issue order. Host-to-device copies from pinned memory run on their own copy
// stream, ordered against the compute stream by events both ways (see CopyFromHost). Offload
// copies (activation offload) run on a third stream in both directions, one after another, each
// after the compute stream's end when it was issued; the compute stream waits for a copy back
// only when the copy's OrderComputeAfter says so, so both overlap the compute issued meanwhile.
class CudaDevice final : public Device {
 public:
  explicit CudaDevice(CudaDeviceParts parts)
      : name_(absl::StrCat("cuda:", parts.options.ordinal)),
        logger_(/*rank=*/-1),
        compute_stream_(std::move(parts.compute_stream)),
        host_to_device_stream_(std::move(parts.host_to_device_stream)),
        offload_stream_(std::move(parts.offload_stream)),
        capture_memory_stream_(std::move(parts.capture_memory_stream)),
        compute_ready_(std::move(parts.compute_ready)),
        copy_done_(std::move(parts.copy_done)),
        memory_(name_, std::move(parts.pool), compute_stream_.get(),
                parts.options.memory_limit_bytes, logger_),
        staging_(absl::StrCat(name_, " staging"), logger_),
        offload_(absl::StrCat(name_, " offload"), logger_),
        capture_blocks_(memory_, capture_memory_stream_.get()),
        capture_memory_(name_, capture_blocks_),
        cublas_(std::move(parts.cublas)),
        cublas_lt_(std::move(parts.cublas_lt)),
        cudnn_(std::move(parts.cudnn)),
        id_checks_(std::move(parts.id_checks)),
        context_{.ordinal = parts.options.ordinal,
                 .multiprocessors = parts.multiprocessors,
                 .stream = compute_stream_.get(),
                 .cublas = cublas_.get(),
                 .cublas_lt = cublas_lt_.get(),
                 .cudnn = cudnn_.get(),
                 .workspace = this,
                 .id_checks = &id_checks_,
                 .allow_tf32 = parts.options.allow_tf32,
                 .measure_conv_algorithms = parts.options.measure_conv_algorithms,
                 .cublaslt_gemm = parts.options.cublaslt_gemm,
                 .cudnn_attention = parts.options.cudnn_attention},
        tensor_ops_(context_),
        matmul_ops_(context_),
        activation_ops_(context_),
        norm_ops_(context_),
        conv_ops_(context_),
        attention_ops_(context_, matmul_ops_),
        embedding_ops_(context_),
        loss_ops_(context_),
        optimizer_ops_(context_),
        ops_{.tensor = tensor_ops_,
             .matmul = matmul_ops_,
             .activation = activation_ops_,
             .norm = norm_ops_,
             .conv = conv_ops_,
             .attention = attention_ops_,
             .embedding = embedding_ops_,
             .loss = loss_ops_,
             .optimizer = optimizer_ops_} {}
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  cudaStream_t compute_stream() const { return compute_stream_.get(); }

  // Queued work may still read memory, events and handles about to be destroyed: wait for it.
  // An error of that work has no caller left to return to, so it is logged.
  ~CudaDevice() override {
    if (const absl::Status status = Synchronize(); !status.ok()) {
      logger_.Error(
          absl::StrCat(name_, ": work still queued at shutdown failed: ", status.message()));
    }
  }

  absl::StatusOr<void*> Allocate(int64_t bytes, MemoryKind kind) override {
    if (capture_memory_.capturing()) return capture_memory_.Allocate(bytes, kind);
    return memory_.Allocate(bytes, kind);
  }
  void Free(void* ptr, int64_t bytes, MemoryKind kind) override {
    if (!capture_memory_.Free(ptr, bytes, kind)) memory_.Free(ptr, bytes, kind);
  }
  void Recount(int64_t bytes, MemoryKind from, MemoryKind to) override {
    memory_.Recount(bytes, from, to);
  }
  bool host_accessible() const override { return false; }

  std::string name() const override { return name_; }
  MemoryTracker& memory() override { return memory_.memory(); }
  Allocator& host_staging() override { return staging_; }
  const Ops& ops() override { return ops_; }

  absl::Status CopyFromHost(const void* source, int64_t source_bytes, Tensor& destination) override;
  absl::Status CopyToHost(const Tensor& source, void* destination,
                          int64_t destination_bytes) override;
  Allocator& offload_host() override { return offload_; }
  MemoryTracker& offload_memory() override { return offload_.memory(); }
  absl::StatusOr<std::unique_ptr<AsyncCopy>> StartCopyToHost(Tensor source,
                                                             Tensor destination) override {
    RETURN_IF_ERROR(RefuseWhileCapturing("StartCopyToHost"));
    RETURN_IF_ERROR(CheckOffloadCopy(name_, *this, offload_, source, destination));
    return StartOffloadCopy(std::move(source), std::move(destination), cudaMemcpyDeviceToHost);
  }
  absl::StatusOr<std::unique_ptr<AsyncCopy>> StartCopyFromHost(Tensor source,
                                                               Tensor destination) override {
    RETURN_IF_ERROR(RefuseWhileCapturing("StartCopyFromHost"));
    RETURN_IF_ERROR(CheckOffloadCopy(name_, *this, offload_, destination, source));
    return StartOffloadCopy(std::move(source), std::move(destination), cudaMemcpyHostToDevice);
  }
  absl::StatusOr<std::unique_ptr<DeviceEvent>> RecordEvent() override;
  absl::StatusOr<double> ElapsedSeconds(const DeviceEvent& start, const DeviceEvent& end) override;
  absl::Status Synchronize() override;
  void LabelWork(std::string label) override { id_checks_.LabelWork(std::move(label)); }
  // Stream capture of the compute stream (relaxed mode: the capture memory's own allocations
  // on a side stream are legal meanwhile). Capture after the work has run once uncaptured:
  // cuDNN's algorithm search and other first-use set-up wait for the GPU.
  absl::Status BeginCapture() override;
  absl::StatusOr<std::unique_ptr<WorkGraph>> EndCapture() override;

 private:
  // FAILED_PRECONDITION naming `what` while a capture is open.
  absl::Status RefuseWhileCapturing(const char* what) const {
    if (!capture_memory_.capturing()) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat(name_, ": ", what,
                     " while work is being captured (captured work never waits for the host)"));
  }

  // The offload stream first waits for the compute stream's current end: a device source is
  // written by the work issued before, and a device destination came from the pool in
  // compute-stream order, so work issued before may still use its storage.
  absl::StatusOr<std::unique_ptr<AsyncCopy>> StartOffloadCopy(Tensor source, Tensor destination,
                                                              cudaMemcpyKind kind) {
    cudaStream_t offload = offload_stream_.get();
    ASSIGN_OR_RETURN(cuda::Event compute_end, cuda::CreateEvent(/*timing=*/false));
    ASSIGN_OR_RETURN(cuda::Event done, cuda::CreateEvent(/*timing=*/false));
    GPIPE_CUDA_RETURN_IF_ERROR(cudaEventRecord(compute_end.get(), compute_stream_.get()));
    GPIPE_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(offload, compute_end.get(), 0));
    GPIPE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(destination.raw_data(), source.raw_data(),
                                               static_cast<size_t>(source.bytes()), kind, offload));
    GPIPE_CUDA_RETURN_IF_ERROR(cudaEventRecord(done.get(), offload));
    return std::make_unique<CudaCopy>(std::move(source), std::move(destination), std::move(done),
                                      compute_stream_.get(), logger_);
  }

  // Whether `tensor` lives in this device's memory (not another device's, not host memory).
  bool OnThisDevice(const Tensor& tensor) const {
    return tensor.defined() && &tensor.allocator() == this;
  }
  absl::Status CopyFromPinned(const void* source, int64_t bytes, void* destination);

  const std::string name_;
  Logger logger_;  // rank-less: the device is built before it knows of any rank's logger
  cuda::Stream compute_stream_;
  cuda::Stream host_to_device_stream_;
  cuda::Stream offload_stream_;
  cuda::Stream capture_memory_stream_;  // where the capture arena's blocks are allocated
  cuda::Event compute_ready_;  // the compute stream's end, for the copy stream to wait on
  cuda::Event copy_done_;      // the end of the last host-to-device copy
  CudaMemoryPool memory_;
  PinnedHostAllocator staging_;
  PinnedHostAllocator offload_;
  CaptureBlocks capture_blocks_;
  CaptureMemory capture_memory_;
  cuda::CublasHandle cublas_;
  cuda::CublasLtHandle cublas_lt_;
  cuda::CudnnHandle cudnn_;
  cuda::IdChecks id_checks_;  // read after each wait for the compute stream
  CudaContext context_;
  CudaTensorOps tensor_ops_;
  CudaMatmulOps matmul_ops_;
  CudaActivationOps activation_ops_;
  CudaNormOps norm_ops_;
  CudaConvOps conv_ops_;
  CudaAttentionOps attention_ops_;
  CudaEmbeddingOps embedding_ops_;
  CudaLossOps loss_ops_;
  CudaOptimizerOps optimizer_ops_;
  Ops ops_;
};

// Two paths, both of which leave `source` free for reuse when the call returns:
// - Pinned source (host_staging(), or any cudaHostAlloc'd / registered memory): the copy runs
//   on the host-to-device stream, where the DMA engine reads the source directly. That stream
//   first waits for the compute stream's current end, because the destination came from the
//   pool in compute-stream order and work queued before may still use that storage; the
//   compute stream then waits for the copy, so ops issued next read the new bytes. The host
//   blocks on the copy's own event (which, through that first wait, also covers the work queued
//   before it) rather than synchronizing a stream.
// - Pageable source: cudaMemcpyAsync on the compute stream. CUDA first stages pageable memory
//   into its own pinned buffers and returns only once the source has been read (the runtime's
//   "API synchronization behavior"), so the caller may reuse it; the copy itself stays
//   stream-ordered with the ops.
absl::Status CudaDevice::CopyFromHost(const void* source, int64_t source_bytes,
                                      Tensor& destination) {
  RETURN_IF_ERROR(RefuseWhileCapturing("CopyFromHost"));
  if (!OnThisDevice(destination) || destination.bytes() != source_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": copying ", source_bytes,
                                                   " host bytes into ", destination.DebugString(),
                                                   " (must be ", name_, " memory of that size)"));
  }
  if (source_bytes == 0) return absl::OkStatus();
  cudaPointerAttributes attributes = {};
  const cudaError_t query = cudaPointerGetAttributes(&attributes, source);
  // Plain heap memory is reported as cudaMemoryTypeUnregistered; should a driver reject the
  // query instead, the pageable path is correct for any host memory.
  if (query != cudaSuccess) cudaGetLastError();
  if (query == cudaSuccess && attributes.type == cudaMemoryTypeHost) {
    return CopyFromPinned(source, source_bytes, destination.raw_data());
  }
  GPIPE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(destination.raw_data(), source,
                                             static_cast<size_t>(source_bytes),
                                             cudaMemcpyHostToDevice, compute_stream_.get()));
  return absl::OkStatus();
}

absl::Status CudaDevice::CopyFromPinned(const void* source, int64_t bytes, void* destination) {
  cudaStream_t compute = compute_stream_.get();
  cudaStream_t copy = host_to_device_stream_.get();
  GPIPE_CUDA_RETURN_IF_ERROR(cudaEventRecord(compute_ready_.get(), compute));
  GPIPE_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy, compute_ready_.get(), 0));
  GPIPE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(destination, source, static_cast<size_t>(bytes),
                                             cudaMemcpyHostToDevice, copy));
  GPIPE_CUDA_RETURN_IF_ERROR(cudaEventRecord(copy_done_.get(), copy));
  GPIPE_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(compute, copy_done_.get(), 0));
  GPIPE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(copy_done_.get()));
  return absl::OkStatus();
}

// Issued on the compute stream after all work before it, then waited for: the Device contract
// returns with the bytes in place, whether `destination` is pinned or pageable. A bad id an op
// found before it is reported here (the wait is the first chance).
absl::Status CudaDevice::CopyToHost(const Tensor& source, void* destination,
                                    int64_t destination_bytes) {
  RETURN_IF_ERROR(RefuseWhileCapturing("CopyToHost"));
  if (!OnThisDevice(source) || source.bytes() != destination_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": copying ", source.DebugString(),
                                                   " into ", destination_bytes, " host bytes (",
                                                   "must be ", name_, " memory of that size)"));
  }
  if (destination_bytes == 0) return absl::OkStatus();
  GPIPE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(destination, source.raw_data(),
                                             static_cast<size_t>(destination_bytes),
                                             cudaMemcpyDeviceToHost, compute_stream_.get()));
  GPIPE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute_stream_.get()));
  return id_checks_.TakeReport();
}

absl::StatusOr<std::unique_ptr<DeviceEvent>> CudaDevice::RecordEvent() {
  RETURN_IF_ERROR(RefuseWhileCapturing("RecordEvent"));
  ASSIGN_OR_RETURN(cuda::Event event, cuda::CreateEvent(/*timing=*/true));
  GPIPE_CUDA_RETURN_IF_ERROR(cudaEventRecord(event.get(), compute_stream_.get()));
  return std::make_unique<CudaEvent>(this, std::move(event));
}

absl::StatusOr<double> CudaDevice::ElapsedSeconds(const DeviceEvent& start,
                                                  const DeviceEvent& end) {
  RETURN_IF_ERROR(RefuseWhileCapturing("ElapsedSeconds"));
  const auto* first = dynamic_cast<const CudaEvent*>(&start);
  const auto* last = dynamic_cast<const CudaEvent*>(&end);
  if (first == nullptr || last == nullptr || first->owner() != this || last->owner() != this) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": ElapsedSeconds of an event recorded by another device"));
  }
  GPIPE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(last->get()));
  float milliseconds = 0;
  GPIPE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&milliseconds, first->get(), last->get()));
  return static_cast<double>(milliseconds) / 1000.0;
}

// Waits for every stream even when the first reports an error, so that nothing is left
// running; returns the first error, then any launch error not yet reported, then an id outside
// its range that an op's check found meanwhile (id_check.h).
absl::Status CudaDevice::Synchronize() {
  RETURN_IF_ERROR(RefuseWhileCapturing("Synchronize"));
  absl::Status status =
      CudaStatus(cudaStreamSynchronize(compute_stream_.get()), "cudaStreamSynchronize(compute)");
  status.Update(CudaStatus(cudaStreamSynchronize(host_to_device_stream_.get()),
                           "cudaStreamSynchronize(host_to_device)"));
  status.Update(
      CudaStatus(cudaStreamSynchronize(offload_stream_.get()), "cudaStreamSynchronize(offload)"));
  status.Update(CudaStatus(cudaGetLastError(), "cudaGetLastError"));
  status.Update(id_checks_.TakeReport());
  return status;
}

// The capture memory's state follows the stream's: a capture that CUDA refuses to begin leaves
// none open, and one that fails to end is closed all the same.
absl::Status CudaDevice::BeginCapture() {
  RETURN_IF_ERROR(capture_memory_.Begin());
  const cudaError_t code =
      cudaStreamBeginCapture(compute_stream_.get(), cudaStreamCaptureModeRelaxed);
  if (code != cudaSuccess) {
    const absl::Status status = CudaStatus(code, "cudaStreamBeginCapture");
    capture_memory_.End().IgnoreError();  // destroyed at once: nothing was captured
    return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<WorkGraph>> CudaDevice::EndCapture() {
  if (!capture_memory_.capturing()) return capture_memory_.End().status();
  cudaGraph_t captured = nullptr;
  const cudaError_t end_code = cudaStreamEndCapture(compute_stream_.get(), &captured);
  cuda::Graph graph(captured);
  // Closed before any return: a failed capture's deferred frees and blocks go back with it.
  ASSIGN_OR_RETURN(std::unique_ptr<CaptureMemory::GraphHold> hold, capture_memory_.End());
  if (end_code != cudaSuccess) {
    cudaGetLastError();  // the capture's error, reported here
    return CudaStatus(end_code,
                      "cudaStreamEndCapture (an op issued during the capture failed, or "
                      "the capture was invalidated)");
  }
  cudaGraphExec_t instantiated = nullptr;
  GPIPE_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&instantiated, graph.get(), 0));
  return std::unique_ptr<WorkGraph>(std::make_unique<CudaWorkGraph>(
      *this, capture_memory_, compute_stream_.get(), std::move(hold), std::move(graph),
      cuda::GraphExec(instantiated)));
}

}  // namespace

int VisibleGpuCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // "no device" is an answer here, not an error for later calls
    return 0;
  }
  return count;
}

absl::StatusOr<std::unique_ptr<Device>> CreateCudaDevice(const CudaDeviceOptions& options) {
  if (options.memory_limit_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda: memory_limit_bytes must be >= 0 (0: no limit), got ", options.memory_limit_bytes));
  }
  if (options.cudnn_attention && !cuda::CudnnAttention::Available()) {
    return absl::FailedPreconditionError(
        "cuda: runtime.cuda.cudnn_attention needs gpipe built with cudnn-frontend's headers, "
        "which CMake did not find for this build (scripts/cudnn_frontend.sh installs them; then "
        "reconfigure), or set cudnn_attention: false");
  }
  const int visible = VisibleGpuCount();
  if (options.ordinal < 0 || options.ordinal >= visible) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda: no GPU with ordinal ", options.ordinal, ": this process sees ", visible,
                     " GPU(s)", visible == 0 ? " (no device or no driver)" : "",
                     "; check CUDA_VISIBLE_DEVICES and how many ranks share a node"));
  }
  // Handles, streams and the pool are created for the current device, and kernels are issued
  // to it: it stays current on this thread.
  GPIPE_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.ordinal));
  ASSIGN_OR_RETURN(CudaDeviceParts parts, CreateParts(options));
  return std::unique_ptr<Device>(std::make_unique<CudaDevice>(std::move(parts)));
}

cudaStream_t ComputeStreamOf(Device& device) {
  auto* cuda_device = dynamic_cast<CudaDevice*>(&device);
  return cuda_device != nullptr ? cuda_device->compute_stream() : nullptr;
}

absl::StatusOr<std::string> PciBusIdOf(int ordinal) {
  char bus_id[64] = {};
  GPIPE_CUDA_RETURN_IF_ERROR(cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), ordinal));
  return std::string(bus_id);
}

absl::StatusOr<int64_t> TotalMemoryOf(int ordinal) {
  cudaDeviceProp properties{};
  GPIPE_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&properties, ordinal));
  return static_cast<int64_t>(properties.totalGlobalMem);
}

}  // namespace gpipe
