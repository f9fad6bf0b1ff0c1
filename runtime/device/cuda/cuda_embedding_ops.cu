#include <cstdint>

#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_embedding_ops.h"
#include "runtime/device/cuda/device_pointer.h"
#include "runtime/device/cuda/id_check.h"
#include "runtime/device/cuda/kernel_launch.h"
#include "runtime/device/ops/embedding_checks.h"

namespace gpipe {
namespace {

__global__ void GatherKernel(const float* table, const int64_t* ids, int64_t n, int64_t dim,
                             float* out) {
  const int64_t total = n * dim;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = e / dim;
    out[e] = table[ids[r] * dim + e % dim];
  }
}

// One thread per column of the table: it walks r in order and adds every row's contribution to
// its column, so rows sharing an id add up in the CPU backend's order (no float atomics).
__global__ void ScatterAddKernel(const int64_t* ids, const float* dout, int64_t n, int64_t dim,
                                 float* dtable) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < dim;
       i += int64_t{gridDim.x} * blockDim.x) {
    for (int64_t r = 0; r < n; ++r) dtable[ids[r] * dim + i] += dout[r * dim + i];
  }
}

__global__ void AddRowBroadcastKernel(const float* in, const float* row, int64_t n, int64_t total,
                                      float* out) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    out[e] = in[e] + row[e % n];
  }
}

}  // namespace

absl::Status CudaEmbeddingOps::DoGather(const Tensor& table, const Tensor& ids, Tensor& out) const {
  const int64_t rows = table.shape().dim(0);
  ASSIGN_OR_RETURN(std::optional<BadId> bad, cuda::FirstBadId(context_, ids, rows));
  if (bad.has_value()) return op_checks::EmbeddingBadId(*bad, rows);
  const int64_t dim = table.shape().dim(1);
  const int64_t total = ids.num_elements() * dim;
  if (total == 0) return absl::OkStatus();
  GatherKernel<<<cuda::BlocksFor(total), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      DevicePointer<float>(table), DevicePointer<int64_t>(ids), ids.num_elements(), dim,
      DevicePointer<float>(out));
  return cuda::LaunchStatus("embedding gather");
}

absl::Status CudaEmbeddingOps::DoScatterAdd(const Tensor& ids, const Tensor& dout,
                                            Tensor& dtable) const {
  const int64_t rows = dtable.shape().dim(0);
  ASSIGN_OR_RETURN(std::optional<BadId> bad, cuda::FirstBadId(context_, ids, rows));
  if (bad.has_value()) return op_checks::EmbeddingBadId(*bad, rows);
  const int64_t dim = dtable.shape().dim(1);
  const int64_t n = ids.num_elements();
  if (n == 0 || dim == 0) return absl::OkStatus();
  ScatterAddKernel<<<cuda::BlocksFor(dim, 128), 128, 0, context_.stream>>>(
      DevicePointer<int64_t>(ids), DevicePointer<float>(dout), n, dim,
      DevicePointer<float>(dtable));
  return cuda::LaunchStatus("embedding scatter-add");
}

absl::Status CudaEmbeddingOps::DoAddRowBroadcast(const Tensor& in, const Tensor& row, int64_t n,
                                                 Tensor& out) const {
  const int64_t total = in.num_elements();
  if (total == 0) return absl::OkStatus();
  AddRowBroadcastKernel<<<cuda::BlocksFor(total), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      DevicePointer<float>(in), DevicePointer<float>(row), n, total, DevicePointer<float>(out));
  return cuda::LaunchStatus("add row broadcast");
}

}  // namespace gpipe
