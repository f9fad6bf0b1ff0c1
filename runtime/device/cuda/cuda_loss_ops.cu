#include <algorithm>
#include <cmath>
#include <cstdint>

#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/block_reduce.cuh"
#include "runtime/device/cuda/cuda_loss_ops.h"
#include "runtime/device/cuda/device_pointer.h"
#include "runtime/device/cuda/id_check.h"
#include "runtime/device/cuda/kernel_launch.h"

namespace gpipe {
namespace {

constexpr int kTotalThreads = 1024;

// One block per row (grid-stride over rows), in the CPU backend's arithmetic (cpu_loss_ops.cc):
// argmax with ties to the lowest class (row[0] when it is NaN, as the CPU's scan leaves it),
// log-sum-exp shifted by the max in double, gradient (softmax - onehot) * scale. The argmax and
// max are exactly the CPU's; the sum of exponentials is each thread's strided partial sum
// combined by the block's fixed tree (block_reduce.cuh): the same bits every run, not the CPU's
// left-to-right order (they agree to rounding). Each row's loss and hit go to `row_loss` /
// `row_hit` for the fixed-order total below.
__global__ void CrossEntropyRowsKernel(const float* logits, const int64_t* ids, int64_t rows,
                                       int64_t classes, double scale, float* grad, double* row_loss,
                                       double* row_hit) {
  __shared__ float max_scratch[32];
  __shared__ long long index_scratch[32];
  __shared__ double sum_scratch[32];
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    const float* row = logits + i * classes;
    float* grad_row = grad + i * classes;
    float best = -INFINITY;
    long long best_index = cuda::kArgMaxNoIndex;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      if (cuda::ArgMaxPrefers(row[c], c, best, best_index)) {
        best = row[c];
        best_index = c;
      }
    }
    cuda::BlockArgMax(best, best_index, max_scratch, index_scratch);
    const int64_t argmax = row[0] != row[0] ? 0 : best_index;
    const double max_logit = row[argmax];
    double sum_exp = 0.0;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) sum_exp += exp(row[c] - max_logit);
    sum_exp = cuda::BlockReduce(sum_exp, cuda::SumOp(), sum_scratch);
    const double log_sum_exp = max_logit + log(sum_exp);
    // A target outside [0, classes) reads nothing (the row adds nothing to the totals, its
    // gradient is the softmax's): the id check reports it later.
    const int64_t target = ids[i];
    const bool known = target >= 0 && target < classes;
    if (threadIdx.x == 0) {
      row_loss[i] = known ? log_sum_exp - row[target] : 0.0;
      row_hit[i] = known && argmax == target ? 1.0 : 0.0;
    }
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      const double softmax = exp(row[c] - log_sum_exp);
      grad_row[c] = static_cast<float>((softmax - (c == target ? 1.0 : 0.0)) * scale);
    }
  }
}

// Threads per row block: a warp for small class counts, up to 256 for vocabularies. A function
// of `classes` only, so a given shape always sums in the same tree.
int RowThreads(int64_t classes) {
  const int64_t warps = (classes + 31) / 32;
  return static_cast<int>(std::min<int64_t>(warps, 8) * 32);
}

__global__ void SquaredErrorKernel(const float* output, const float* targets, int64_t n,
                                   double scale, float* grad, double* squared) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const double diff = static_cast<double>(output[i]) - targets[i];
    squared[i] = diff * diff;
    grad[i] = static_cast<float>(2.0 * diff * scale);
  }
}

// One block: totals[kLossSum] += scale * sum(values); totals[kLossCorrect] += sum(hits) when
// hits is given. Each thread sums a fixed stride of the values, then the block tree combines
// them: the same order every run (not the CPU's left-to-right order; sums agree to rounding).
__global__ void AddTotalsKernel(const double* values, const double* hits, int64_t n, double scale,
                                double* totals) {
  __shared__ double scratch[32];
  double sum = 0.0, hit_sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    sum += values[i];
    if (hits != nullptr) hit_sum += hits[i];
  }
  sum = cuda::BlockReduce(sum, cuda::SumOp(), scratch);
  if (hits != nullptr) hit_sum = cuda::BlockReduce(hit_sum, cuda::SumOp(), scratch);
  if (threadIdx.x == 0) {
    totals[kLossSum] += sum * scale;
    if (hits != nullptr) totals[kLossCorrect] += hit_sum;
  }
}

}  // namespace

absl::Status CudaLossOps::DoSoftmaxCrossEntropy(const Tensor& logits, const Tensor& ids,
                                                double scale, Tensor& grad, Tensor& totals) const {
  const int64_t classes = logits.shape().last();
  const int64_t rows = ids.num_elements();
  RETURN_IF_ERROR(
      context_.id_checks->Issue(context_.stream, ids, classes, cuda::IdUse::kClassTarget));
  if (rows == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(Tensor per_row, Tensor::Empty(*context_.workspace, Shape{2, rows}, DType::kF64,
                                                 MemoryKind::kWorkspace));
  double* row_loss = DevicePointer<double>(per_row);
  double* row_hit = row_loss + rows;
  CrossEntropyRowsKernel<<<cuda::BlocksFor(rows, 1), RowThreads(classes), 0, context_.stream>>>(
      DevicePointer<float>(logits), DevicePointer<int64_t>(ids), rows, classes, scale,
      DevicePointer<float>(grad), row_loss, row_hit);
  RETURN_IF_ERROR(cuda::LaunchStatus("cross-entropy rows"));
  AddTotalsKernel<<<1, kTotalThreads, 0, context_.stream>>>(row_loss, row_hit, rows, scale,
                                                            DevicePointer<double>(totals));
  return cuda::LaunchStatus("cross-entropy totals");
}

absl::Status CudaLossOps::DoMeanSquaredError(const Tensor& output, const Tensor& targets,
                                             double scale, Tensor& grad, Tensor& totals) const {
  const int64_t n = output.num_elements();
  if (n == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(Tensor squared, Tensor::Empty(*context_.workspace, Shape{n}, DType::kF64,
                                                 MemoryKind::kWorkspace));
  SquaredErrorKernel<<<cuda::BlocksFor(n), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      DevicePointer<float>(output), DevicePointer<float>(targets), n, scale,
      DevicePointer<float>(grad), DevicePointer<double>(squared));
  RETURN_IF_ERROR(cuda::LaunchStatus("squared error"));
  AddTotalsKernel<<<1, kTotalThreads, 0, context_.stream>>>(
      DevicePointer<double>(squared), nullptr, n, scale, DevicePointer<double>(totals));
  return cuda::LaunchStatus("squared error totals");
}

}  // namespace gpipe
