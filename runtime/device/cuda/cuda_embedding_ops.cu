#include <algorithm>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>
#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_embedding_ops.h"
#include "runtime/device/cuda/device_pointer.h"
#include "runtime/device/cuda/id_check.h"
#include "runtime/device/cuda/kernel_launch.h"

namespace gpipe {
namespace {

// An id outside [0, rows) reads nothing (its row is zeros): the id check reports it later.
__global__ void GatherKernel(const float* table, int64_t rows, const int64_t* ids, int64_t n,
                             int64_t dim, float* out) {
  const int64_t total = n * dim;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t id = ids[e / dim];
    out[e] = id >= 0 && id < rows ? table[id * dim + e % dim] : 0.0f;
  }
}

__global__ void IotaKernel(int64_t n, int64_t* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = i;
  }
}

// Rows sharing an id, added in the CPU backend's order without float atomics. `sorted_ids` and
// `positions` are the ids and their flat positions sorted by id with a stable sort, so each id's
// positions form one run in ascending order. The block at run start k (grid-stride over x) owns
// that id's table row; its threads take columns (grid-stride over y) and add the run's dout rows
// to the row in position order, one float add after another: the same additions, in the same
// order, as the CPU's loop over r (bit-identical). Blocks at a k inside a run return at once.
// An id outside [0, rows) (negative ones are huge as uint64) adds nothing; the id check reports
// it later. (The sort looks only at the bits of valid ids, so a bad id may split a valid id's
// run; the values are then unspecified, but nothing outside dtable is written.)
__global__ void ScatterAddRunsKernel(const uint64_t* sorted_ids, const int64_t* positions,
                                     int64_t n, const float* dout, int64_t dim, uint64_t rows,
                                     float* dtable) {
  for (int64_t k = blockIdx.x; k < n; k += gridDim.x) {
    const uint64_t id = sorted_ids[k];
    if (id >= rows || (k > 0 && sorted_ids[k - 1] == id)) continue;
    int64_t end = k + 1;
    while (end < n && sorted_ids[end] == id) ++end;
    float* table_row = dtable + static_cast<int64_t>(id) * dim;
    for (int64_t c = blockIdx.y * int64_t{blockDim.x} + threadIdx.x; c < dim;
         c += int64_t{gridDim.y} * blockDim.x) {
      float sum = table_row[c];
      for (int64_t j = k; j < end; ++j) sum += dout[positions[j] * dim + c];
      table_row[c] = sum;
    }
  }
}

constexpr int kScatterColumns = 128;  // threads per block of ScatterAddRunsKernel

// Bits that hold every id in [0, rows): the radix sort looks at no others.
int IdBits(int64_t rows) {
  int bits = 1;
  while (bits < 63 && (int64_t{1} << bits) < rows) ++bits;
  return bits;
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
  RETURN_IF_ERROR(
      context_.id_checks->Issue(context_.stream, ids, rows, cuda::IdUse::kEmbeddingRow));
  const int64_t dim = table.shape().dim(1);
  const int64_t total = ids.num_elements() * dim;
  if (total == 0) return absl::OkStatus();
  GatherKernel<<<cuda::BlocksFor(total), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      DevicePointer<float>(table), rows, DevicePointer<int64_t>(ids), ids.num_elements(), dim,
      DevicePointer<float>(out));
  return cuda::LaunchStatus("embedding gather");
}

// Groups the positions by id on the device (CUB's stable radix sort of (id, position) pairs on
// the compute stream: no host wait, capturable in a CUDA graph), then adds each id's rows in
// position order (ScatterAddRunsKernel).
absl::Status CudaEmbeddingOps::DoScatterAdd(const Tensor& ids, const Tensor& dout,
                                            Tensor& dtable) const {
  const int64_t rows = dtable.shape().dim(0);
  RETURN_IF_ERROR(
      context_.id_checks->Issue(context_.stream, ids, rows, cuda::IdUse::kEmbeddingRow));
  const int64_t dim = dtable.shape().dim(1);
  const int64_t n = ids.num_elements();
  if (n == 0 || dim == 0) return absl::OkStatus();
  if (n > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "EmbeddingOps::ScatterAdd: ", n, " ids are more than the CUDA backend sorts in one call (",
        std::numeric_limits<int>::max(), "); use smaller micro-batches"));
  }
  const auto scratch = [&](int64_t elements) {
    return Tensor::Empty(*context_.workspace, Shape{elements}, DType::kI64, MemoryKind::kWorkspace);
  };
  ASSIGN_OR_RETURN(Tensor positions, scratch(n));
  ASSIGN_OR_RETURN(Tensor sorted_ids, scratch(n));
  ASSIGN_OR_RETURN(Tensor sorted_positions, scratch(n));
  const auto* keys = reinterpret_cast<const uint64_t*>(DevicePointer<int64_t>(ids));
  auto* sorted_keys = reinterpret_cast<uint64_t*>(DevicePointer<int64_t>(sorted_ids));
  const int bits = IdBits(rows);
  size_t sort_bytes = 0;
  GPIPE_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(
      nullptr, sort_bytes, keys, sorted_keys, DevicePointer<int64_t>(positions),
      DevicePointer<int64_t>(sorted_positions), static_cast<int>(n), 0, bits, context_.stream));
  ASSIGN_OR_RETURN(Tensor sort_scratch,
                   scratch(std::max<int64_t>(1, (static_cast<int64_t>(sort_bytes) + 7) / 8)));
  IotaKernel<<<cuda::BlocksFor(n), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      n, DevicePointer<int64_t>(positions));
  RETURN_IF_ERROR(cuda::LaunchStatus("embedding scatter-add positions"));
  GPIPE_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(
      DevicePointer<int64_t>(sort_scratch), sort_bytes, keys, sorted_keys,
      DevicePointer<int64_t>(positions), DevicePointer<int64_t>(sorted_positions),
      static_cast<int>(n), 0, bits, context_.stream));
  const dim3 grid(cuda::BlocksFor(n, 1), cuda::BlocksFor(dim, kScatterColumns));
  ScatterAddRunsKernel<<<grid, kScatterColumns, 0, context_.stream>>>(
      sorted_keys, DevicePointer<int64_t>(sorted_positions), n, DevicePointer<float>(dout), dim,
      static_cast<uint64_t>(rows), DevicePointer<float>(dtable));
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
