#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/block_reduce.cuh"
#include "runtime/device/cuda/cuda_status.h"
#include "runtime/device/cuda/device_pointer.h"
#include "runtime/device/cuda/id_check.h"
#include "runtime/device/cuda/kernel_launch.h"
#include "runtime/device/ops/bad_id.h"
#include "runtime/device/ops/embedding_checks.h"
#include "runtime/device/ops/loss_checks.h"

namespace gpipe::cuda {
namespace {

constexpr int kCheckThreads = 1024;

// One block. Thread j walks indices j, j + blockDim.x, ... and stops at its first bad one, so its
// value is the lowest bad index of its stride; the block's minimum is the call's lowest. Thread 0
// writes the record only when a bad id was found and this call's key is below the record's: the
// earliest call wins whatever came later. Calls on one stream run one after another, so no
// other kernel touches the record meanwhile, and a call with no bad id never touches it (no
// traffic to host memory on good data).
__global__ void CheckIdsKernel(const int64_t* ids, long long n, long long limit,
                               unsigned long long call, int32_t use, IdFaultRecord* record) {
  __shared__ long long scratch[32];
  long long first = n;
  for (long long i = threadIdx.x; i < n; i += blockDim.x) {
    if (ids[i] < 0 || ids[i] >= limit) {
      first = i;
      break;
    }
  }
  first = BlockReduce(first, MinOp(), scratch);
  if (threadIdx.x == 0 && first < n) {
    const unsigned long long key =
        (call << IdChecks::kIndexBits) | static_cast<unsigned long long>(first);
    if (key < record->key) {
      record->key = key;
      record->id = ids[first];
      record->limit = limit;
      record->use = use;
    }
  }
}

}  // namespace

void IdChecks::RecordDeleter::operator()(IdFaultRecord* record) const {
  cudaFreeHost(record);  // nothing to report to in a destructor
}

absl::StatusOr<IdChecks> IdChecks::Create(std::string device_name) {
  void* memory = nullptr;
  GPIPE_CUDA_RETURN_IF_ERROR(
      cudaHostAlloc(&memory, sizeof(IdFaultRecord), cudaHostAllocMapped | cudaHostAllocPortable));
  std::unique_ptr<IdFaultRecord, RecordDeleter> record(static_cast<IdFaultRecord*>(memory));
  *record = IdFaultRecord{.key = kNoFault, .id = 0, .limit = 0, .use = 0};
  void* on_device = nullptr;
  GPIPE_CUDA_RETURN_IF_ERROR(cudaHostGetDevicePointer(&on_device, memory, 0));
  return IdChecks(std::move(device_name), std::move(record),
                  static_cast<IdFaultRecord*>(on_device));
}

absl::Status IdChecks::Issue(cudaStream_t stream, const Tensor& ids, int64_t limit, IdUse use) {
  const int64_t n = ids.num_elements();
  if (n == 0) return absl::OkStatus();
  if (n >= (int64_t{1} << kIndexBits)) {
    return absl::InvalidArgumentError(
        absl::StrCat(device_name_, ": ", n, " ids in one op are more than its id check indexes (2^",
                     kIndexBits, "); use smaller micro-batches"));
  }
  // Calls past the key's 24 bits share the last number: their order among themselves is lost,
  // never their order after the earlier ones.
  constexpr unsigned long long kLastCall = (1ULL << (64 - kIndexBits)) - 1;
  const unsigned long long call = std::min(next_call_, kLastCall);
  ++next_call_;
  if (call_labels_.empty() || call_labels_.back().second != label_) {
    call_labels_.emplace_back(call, label_);
  }
  const unsigned threads =
      static_cast<unsigned>(std::clamp<int64_t>((n + 31) / 32 * 32, 32, kCheckThreads));
  CheckIdsKernel<<<1, threads, 0, stream>>>(DevicePointer<int64_t>(ids), n, limit, call,
                                            static_cast<int32_t>(use), on_device_);
  return LaunchStatus("id range check");
}

absl::Status IdChecks::TakeReport() {
  next_call_ = 0;
  const std::vector<std::pair<unsigned long long, std::string>> labels = std::move(call_labels_);
  call_labels_.clear();
  const IdFaultRecord found = *record_;
  if (found.key == kNoFault) return absl::OkStatus();
  record_->key = kNoFault;
  // The label of the last run of calls that starts at or before the faulting call.
  const unsigned long long call = found.key >> kIndexBits;
  const auto after = std::upper_bound(
      labels.begin(), labels.end(), call,
      [](unsigned long long c, const std::pair<unsigned long long, std::string>& run) {
        return c < run.first;
      });
  const std::string issued_by = after == labels.begin() || (after - 1)->second.empty()
                                    ? std::string()
                                    : absl::StrCat(" in ", (after - 1)->second);
  const BadId bad{.index = static_cast<int64_t>(found.key & ((1ULL << kIndexBits) - 1)),
                  .id = found.id};
  const absl::Status op_status = static_cast<IdUse>(found.use) == IdUse::kClassTarget
                                     ? op_checks::CrossEntropyBadId(bad, found.limit)
                                     : op_checks::EmbeddingBadId(bad, found.limit);
  return BadIdError(absl::StrCat(op_status.message(), " (found by ", device_name_,
                                 "'s id check after the op was issued", issued_by,
                                 ", reported at the next wait for the device; the op's outputs "
                                 "are unspecified)"),
                    bad);
}

}  // namespace gpipe::cuda
