#include "runtime/device/cuda/cuda_device.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/logger.h"
#include "runtime/core/status_macros.h"
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
        compute_ready_(std::move(parts.compute_ready)),
        copy_done_(std::move(parts.copy_done)),
        memory_(name_, std::move(parts.pool), compute_stream_.get(),
                parts.options.memory_limit_bytes, logger_),
        staging_(absl::StrCat(name_, " staging"), logger_),
        offload_(absl::StrCat(name_, " offload"), logger_),
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
                 .cublaslt_gemm = parts.options.cublaslt_gemm},
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
    return memory_.Allocate(bytes, kind);
  }
  void Free(void* ptr, int64_t bytes, MemoryKind kind) override { memory_.Free(ptr, bytes, kind); }
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
    RETURN_IF_ERROR(CheckOffloadCopy(name_, *this, offload_, source, destination));
    return StartOffloadCopy(std::move(source), std::move(destination), cudaMemcpyDeviceToHost);
  }
  absl::StatusOr<std::unique_ptr<AsyncCopy>> StartCopyFromHost(Tensor source,
                                                               Tensor destination) override {
    RETURN_IF_ERROR(CheckOffloadCopy(name_, *this, offload_, destination, source));
    return StartOffloadCopy(std::move(source), std::move(destination), cudaMemcpyHostToDevice);
  }
  absl::StatusOr<std::unique_ptr<DeviceEvent>> RecordEvent() override;
  absl::StatusOr<double> ElapsedSeconds(const DeviceEvent& start, const DeviceEvent& end) override;
  absl::Status Synchronize() override;
  void LabelWork(std::string label) override { id_checks_.LabelWork(std::move(label)); }

 private:
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
  cuda::Event compute_ready_;  // the compute stream's end, for the copy stream to wait on
  cuda::Event copy_done_;      // the end of the last host-to-device copy
  CudaMemoryPool memory_;
  PinnedHostAllocator staging_;
  PinnedHostAllocator offload_;
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
  ASSIGN_OR_RETURN(cuda::Event event, cuda::CreateEvent(/*timing=*/true));
  GPIPE_CUDA_RETURN_IF_ERROR(cudaEventRecord(event.get(), compute_stream_.get()));
  return std::make_unique<CudaEvent>(this, std::move(event));
}

absl::StatusOr<double> CudaDevice::ElapsedSeconds(const DeviceEvent& start,
                                                  const DeviceEvent& end) {
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
