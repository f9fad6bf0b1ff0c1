#include "runtime/device/cpu/cpu_device.h"

#include <cblas.h>

#include <cstdlib>
#include <new>

#include "absl/strings/str_cat.h"

namespace gpipe {
namespace {
constexpr size_t kAlignment = 64;
}  // namespace

CpuDevice::CpuDevice(CpuDeviceOptions options) : options_(options) {
  openblas_set_num_threads(options_.threads > 0 ? options_.threads : 1);
}

absl::StatusOr<void*> CpuDevice::Allocate(int64_t bytes, MemoryKind kind) {
  if (bytes < 0) return absl::InvalidArgumentError("negative allocation size");
  if (options_.memory_limit_bytes > 0 && memory_.current() + bytes > options_.memory_limit_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cpu: allocating ", bytes, " bytes (", MemoryKindName(kind), ") exceeds the limit of ",
        options_.memory_limit_bytes, " bytes (", memory_.current(), " in use)"));
  }
  const size_t rounded = ((static_cast<size_t>(bytes) + kAlignment - 1) / kAlignment) * kAlignment;
  void* ptr = ::operator new(rounded == 0 ? kAlignment : rounded, std::align_val_t(kAlignment),
                             std::nothrow);
  if (ptr == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cpu: out of memory allocating ", bytes,
                                                     " bytes (", MemoryKindName(kind), ")"));
  }
  memory_.Allocated(kind, bytes);
  return ptr;
}

void CpuDevice::Free(void* ptr, int64_t bytes, MemoryKind kind) {
  ::operator delete(ptr, std::align_val_t(kAlignment));
  memory_.Freed(kind, bytes);
}

void CpuDevice::Recount(int64_t bytes, MemoryKind from, MemoryKind to) {
  memory_.Moved(from, to, bytes);
}

absl::Status CpuDevice::Gemm(const GemmArgs& g) {
  if (g.m < 0 || g.n < 0 || g.k < 0) return absl::InvalidArgumentError("negative GEMM size");
  if (g.m == 0 || g.n == 0) return absl::OkStatus();
  cblas_sgemm(CblasRowMajor, g.transpose_a ? CblasTrans : CblasNoTrans,
              g.transpose_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(g.m),
              static_cast<blasint>(g.n), static_cast<blasint>(g.k), g.alpha, g.a,
              static_cast<blasint>(g.lda), g.b, static_cast<blasint>(g.ldb), g.beta, g.c,
              static_cast<blasint>(g.ldc));
  return absl::OkStatus();
}

}  // namespace gpipe
