// CudaConvOps' convolutions on cuDNN's convolution API (NCHW fp32, groups, dilation): descriptors
// and the algorithms cuDNN measures fastest (or, with runtime.cuda.measure_conv_algorithms off,
// ranks first) are chosen once per geometry and cached; only
// deterministic algorithms are taken (forward ones all are; backward ones are filtered), with FMA
// math (no TF32) unless runtime.cuda.allow_tf32. Workspaces come from the device (counted, freed in
// stream order).
//
// ProductPrecision::kBF16: the two operands are rounded to bf16 values (f32 workspace copies)
// and convolved by a plan of their own whose algorithms may use tensor cores in TF32. TF32 keeps
// 10 mantissa bits, so a bf16 value (7) converts exactly and every product is exact: the result
// is f32 accumulation of the rounded operands, as the contract asks, at tensor-core speed.
// cuDNN's legacy API has no bf16-in, f32-out configuration (its bf16 ones write bf16). Only
// algorithms that multiply the operands themselves are taken for these plans (implicit or
// explicit GEMM, direct); FFT and Winograd transform them first, and TF32 would round the
// transformed values. The bias is added by a small kernel and its gradient summed in double by
// sum_accumulate.h. (cuDNN 9 marks this API deprecated in favour of its graph API; it remains
// supported, and the warnings are silenced for this file.)
#include <cuda_bf16.h>
#include <cudnn.h>

#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_conv_ops.h"
#include "runtime/device/cuda/cuda_conv_plan.h"
#include "runtime/device/cuda/cuda_status.h"
#include "runtime/device/cuda/device_pointer.h"
#include "runtime/device/cuda/kernel_launch.h"
#include "runtime/device/cuda/sum_accumulate.h"
#include "runtime/device/ops/conv_shapes.h"

namespace gpipe {
namespace {

constexpr int kMaxAlgorithms = 16;

// y[b, c, :] += bias[c] over each plane.
__global__ void AddBiasKernel(float* y, const float* bias, int64_t total, int64_t channels,
                              int64_t plane) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    y[e] += bias[(e / plane) % channels];
  }
}

// out[i] = in[i] rounded to the nearest bf16 value (ties to even), kept as f32.
__global__ void RoundToBf16Kernel(const float* in, float* out, int64_t n) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n;
       e += int64_t{gridDim.x} * blockDim.x) {
    out[e] = __bfloat162float(__float2bfloat16_rn(in[e]));
  }
}

// Algorithms that multiply the operands as given (no FFT or Winograd transform first).
bool MultipliesOperands(cudnnConvolutionFwdAlgo_t algo) {
  return algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
         algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
         algo == CUDNN_CONVOLUTION_FWD_ALGO_GEMM || algo == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
}
bool MultipliesOperands(cudnnConvolutionBwdDataAlgo_t algo) {
  return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
}
bool MultipliesOperands(cudnnConvolutionBwdFilterAlgo_t algo) {
  return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 ||
         algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 || algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
}

std::string Where(const char* op, const Conv2dGeometry& g) {
  return absl::StrCat(op, " (", GeometryString(g), ")");
}

absl::Status InOp(absl::Status status, const char* op, const Conv2dGeometry& g) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(Where(op, g), ": ", status.message()));
}

// The first result that succeeded, is deterministic and, with `operands_only`, multiplies the
// operands as given (results come fastest first; the descriptor's math type, FMA unless TF32 is
// allowed, binds every algorithm).
template <typename Perf>
const Perf* FirstDeterministic(const Perf* results, int count, bool operands_only) {
  for (int i = 0; i < count; ++i) {
    if (results[i].status == CUDNN_STATUS_SUCCESS &&
        results[i].determinism == CUDNN_DETERMINISTIC &&
        (!operands_only || MultipliesOperands(results[i].algo))) {
      return &results[i];
    }
  }
  return nullptr;
}

// The algorithm for one direction. With `measure`, cuDNN's measured choice (its Find call times
// every algorithm on scratch buffers it allocates itself, once per geometry), falling back to
// its heuristic ranking where measuring fails (e.g. no memory left for the scratch buffers) or
// offers no deterministic algorithm; without, the heuristic ranking alone, which gives the same
// algorithms every run but picks worse for fp32 without TF32: on an H200 the measured forward
// choices ran 2 to 5 times faster (bench/report-gpu-2026-11-26.md).
template <typename Perf, typename Find, typename Get>
absl::StatusOr<Perf> ChooseAlgorithm(bool measure, bool operands_only, Find find, Get get) {
  Perf results[kMaxAlgorithms];
  int found = 0;
  if (measure && find(results, &found) == CUDNN_STATUS_SUCCESS) {
    if (const Perf* best = FirstDeterministic(results, found, operands_only)) return *best;
  }
  cudaGetLastError();  // a failed measurement is not an error of queued work
  GPIPE_CUDNN_RETURN_IF_ERROR(get(results, &found));
  if (const Perf* best = FirstDeterministic(results, found, operands_only)) return *best;
  return absl::UnimplementedError(
      operands_only ? "cudnn offers no deterministic GEMM or direct algorithm for this geometry"
                    : "cudnn offers no deterministic algorithm for this geometry");
}

int Int(int64_t value) { return static_cast<int>(value); }

}  // namespace

absl::StatusOr<const CudaConvPlan*> CudaConvOps::PlanFor(const Conv2dGeometry& g,
                                                         ProductPrecision precision) const {
  const bool bf16 = precision == ProductPrecision::kBF16;
  const std::array<int64_t, 17> key = {
      g.batch,     g.in_channels, g.in_h,       g.in_w,     g.out_channels, g.out_h,
      g.out_w,     g.kernel_h,    g.kernel_w,   g.stride_h, g.stride_w,     g.padding_h,
      g.padding_w, g.dilation_h,  g.dilation_w, g.groups,   bf16 ? 1 : 0};
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  auto plan = std::make_unique<CudaConvPlan>();
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  GPIPE_CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(&x));
  plan->x.reset(x);
  GPIPE_CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(&y));
  plan->y.reset(y);
  GPIPE_CUDNN_RETURN_IF_ERROR(cudnnCreateFilterDescriptor(&w));
  plan->w.reset(w);
  GPIPE_CUDNN_RETURN_IF_ERROR(cudnnCreateConvolutionDescriptor(&conv));
  plan->conv.reset(conv);
  GPIPE_CUDNN_RETURN_IF_ERROR(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                         Int(g.batch), Int(g.in_channels),
                                                         Int(g.in_h), Int(g.in_w)));
  GPIPE_CUDNN_RETURN_IF_ERROR(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                         Int(g.batch), Int(g.out_channels),
                                                         Int(g.out_h), Int(g.out_w)));
  GPIPE_CUDNN_RETURN_IF_ERROR(
      cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, Int(g.out_channels),
                                 Int(g.in_channels / g.groups), Int(g.kernel_h), Int(g.kernel_w)));
  GPIPE_CUDNN_RETURN_IF_ERROR(cudnnSetConvolution2dDescriptor(
      conv, Int(g.padding_h), Int(g.padding_w), Int(g.stride_h), Int(g.stride_w), Int(g.dilation_h),
      Int(g.dilation_w), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  GPIPE_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionGroupCount(conv, Int(g.groups)));
  // bf16 plans: tensor cores in TF32 are exact on bf16 values (see the top of this file).
  const cudnnMathType_t math =
      bf16 ? CUDNN_TENSOR_OP_MATH : (context_.allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH);
  GPIPE_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(conv, math));
  // cuDNN's output size must be the geometry's (PyTorch's floor rule, checked before).
  int n = 0, c = 0, h = 0, wd = 0;
  GPIPE_CUDNN_RETURN_IF_ERROR(cudnnGetConvolution2dForwardOutputDim(conv, x, w, &n, &c, &h, &wd));
  if (n != g.batch || c != g.out_channels || h != g.out_h || wd != g.out_w) {
    return absl::InternalError(absl::StrCat("cudnn computes an output of [", n, ", ", c, ", ", h,
                                            ", ", wd, "] for this geometry"));
  }
  cudnnHandle_t cudnn = context_.cudnn;
  ASSIGN_OR_RETURN(const cudnnConvolutionFwdAlgoPerf_t fwd,
                   ChooseAlgorithm<cudnnConvolutionFwdAlgoPerf_t>(
                       context_.measure_conv_algorithms, /*operands_only=*/bf16,
                       [&](cudnnConvolutionFwdAlgoPerf_t* r, int* n) {
                         return cudnnFindConvolutionForwardAlgorithm(cudnn, x, w, conv, y,
                                                                     kMaxAlgorithms, n, r);
                       },
                       [&](cudnnConvolutionFwdAlgoPerf_t* r, int* n) {
                         return cudnnGetConvolutionForwardAlgorithm_v7(cudnn, x, w, conv, y,
                                                                       kMaxAlgorithms, n, r);
                       }));
  ASSIGN_OR_RETURN(const cudnnConvolutionBwdDataAlgoPerf_t bwd_data,
                   ChooseAlgorithm<cudnnConvolutionBwdDataAlgoPerf_t>(
                       context_.measure_conv_algorithms, /*operands_only=*/bf16,
                       [&](cudnnConvolutionBwdDataAlgoPerf_t* r, int* n) {
                         return cudnnFindConvolutionBackwardDataAlgorithm(cudnn, w, y, conv, x,
                                                                          kMaxAlgorithms, n, r);
                       },
                       [&](cudnnConvolutionBwdDataAlgoPerf_t* r, int* n) {
                         return cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnn, w, y, conv, x,
                                                                            kMaxAlgorithms, n, r);
                       }));
  ASSIGN_OR_RETURN(const cudnnConvolutionBwdFilterAlgoPerf_t bwd_filter,
                   ChooseAlgorithm<cudnnConvolutionBwdFilterAlgoPerf_t>(
                       context_.measure_conv_algorithms, /*operands_only=*/bf16,
                       [&](cudnnConvolutionBwdFilterAlgoPerf_t* r, int* n) {
                         return cudnnFindConvolutionBackwardFilterAlgorithm(cudnn, x, y, conv, w,
                                                                            kMaxAlgorithms, n, r);
                       },
                       [&](cudnnConvolutionBwdFilterAlgoPerf_t* r, int* n) {
                         return cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnn, x, y, conv, w,
                                                                              kMaxAlgorithms, n, r);
                       }));
  plan->forward = fwd.algo;
  plan->forward_bytes = fwd.memory;
  plan->backward_data = bwd_data.algo;
  plan->backward_data_bytes = bwd_data.memory;
  plan->backward_filter = bwd_filter.algo;
  plan->backward_filter_bytes = bwd_filter.memory;
  const CudaConvPlan* result = plan.get();
  plans_.emplace(key, std::move(plan));
  return result;
}

absl::StatusOr<Tensor> CudaConvOps::Workspace(size_t bytes) const {
  return Tensor::Empty(*context_.workspace, Shape{static_cast<int64_t>((bytes + 3) / 4)},
                       DType::kF32, MemoryKind::kWorkspace);
}

absl::StatusOr<Tensor> CudaConvOps::Operand(const Tensor& tensor,
                                            ProductPrecision precision) const {
  if (precision != ProductPrecision::kBF16) return tensor;
  ASSIGN_OR_RETURN(Tensor rounded, Tensor::Empty(*context_.workspace, tensor.shape(), DType::kF32,
                                                 MemoryKind::kWorkspace));
  const int64_t n = tensor.num_elements();
  RoundToBf16Kernel<<<cuda::BlocksFor(n), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      DevicePointer<float>(tensor), DevicePointer<float>(rounded), n);
  RETURN_IF_ERROR(cuda::LaunchStatus("conv2d bf16 rounding"));
  return rounded;
}

absl::Status CudaConvOps::DoConv2dForward(const Conv2dGeometry& g, ProductPrecision precision,
                                          const Tensor& x, const Tensor& weight, const Tensor& bias,
                                          Tensor& y) const {
  constexpr const char* kOp = "Conv2dForward";
  if (g.batch == 0) return absl::OkStatus();
  absl::StatusOr<const CudaConvPlan*> plan = PlanFor(g, precision);
  RETURN_IF_ERROR(InOp(plan.status(), kOp, g));
  ASSIGN_OR_RETURN(const Tensor x_operand, Operand(x, precision));
  ASSIGN_OR_RETURN(const Tensor weight_operand, Operand(weight, precision));
  ASSIGN_OR_RETURN(Tensor workspace, Workspace((*plan)->forward_bytes));
  const float one = 1.0f, zero = 0.0f;
  RETURN_IF_ERROR(InOp(
      CudnnStatus(cudnnConvolutionForward(
                      context_.cudnn, &one, (*plan)->x.get(), DevicePointer<float>(x_operand),
                      (*plan)->w.get(), DevicePointer<float>(weight_operand), (*plan)->conv.get(),
                      (*plan)->forward, workspace.raw_data(), (*plan)->forward_bytes, &zero,
                      (*plan)->y.get(), DevicePointer<float>(y)),
                  "cudnnConvolutionForward"),
      kOp, g));
  if (!bias.defined()) return absl::OkStatus();
  const int64_t total = y.num_elements();
  AddBiasKernel<<<cuda::BlocksFor(total), cuda::kThreadsPerBlock, 0, context_.stream>>>(
      DevicePointer<float>(y), DevicePointer<float>(bias), total, g.out_channels,
      g.out_h * g.out_w);
  return cuda::LaunchStatus("conv2d bias");
}

absl::Status CudaConvOps::DoConv2dBackwardInput(const Conv2dGeometry& g, ProductPrecision precision,
                                                const Tensor& weight, const Tensor& dy,
                                                Tensor& dx) const {
  constexpr const char* kOp = "Conv2dBackwardInput";
  if (g.batch == 0) return absl::OkStatus();
  absl::StatusOr<const CudaConvPlan*> plan = PlanFor(g, precision);
  RETURN_IF_ERROR(InOp(plan.status(), kOp, g));
  ASSIGN_OR_RETURN(const Tensor weight_operand, Operand(weight, precision));
  ASSIGN_OR_RETURN(const Tensor dy_operand, Operand(dy, precision));
  ASSIGN_OR_RETURN(Tensor workspace, Workspace((*plan)->backward_data_bytes));
  const float one = 1.0f, zero = 0.0f;
  return InOp(
      CudnnStatus(cudnnConvolutionBackwardData(
                      context_.cudnn, &one, (*plan)->w.get(), DevicePointer<float>(weight_operand),
                      (*plan)->y.get(), DevicePointer<float>(dy_operand), (*plan)->conv.get(),
                      (*plan)->backward_data, workspace.raw_data(), (*plan)->backward_data_bytes,
                      &zero, (*plan)->x.get(), DevicePointer<float>(dx)),
                  "cudnnConvolutionBackwardData"),
      kOp, g);
}

absl::Status CudaConvOps::DoConv2dBackwardParams(const Conv2dGeometry& g,
                                                 ProductPrecision precision, const Tensor& x,
                                                 const Tensor& dy, Tensor& dweight,
                                                 Tensor& dbias) const {
  constexpr const char* kOp = "Conv2dBackwardParams";
  if (g.batch == 0) return absl::OkStatus();
  absl::StatusOr<const CudaConvPlan*> plan = PlanFor(g, precision);
  RETURN_IF_ERROR(InOp(plan.status(), kOp, g));
  ASSIGN_OR_RETURN(const Tensor x_operand, Operand(x, precision));
  ASSIGN_OR_RETURN(const Tensor dy_operand, Operand(dy, precision));
  ASSIGN_OR_RETURN(Tensor workspace, Workspace((*plan)->backward_filter_bytes));
  // beta = 1: the weight gradient accumulates, as the contract says. The bias gradient below
  // sums dy as given.
  const float one = 1.0f;
  RETURN_IF_ERROR(
      InOp(CudnnStatus(
               cudnnConvolutionBackwardFilter(
                   context_.cudnn, &one, (*plan)->x.get(), DevicePointer<float>(x_operand),
                   (*plan)->y.get(), DevicePointer<float>(dy_operand), (*plan)->conv.get(),
                   (*plan)->backward_filter, workspace.raw_data(), (*plan)->backward_filter_bytes,
                   &one, (*plan)->w.get(), DevicePointer<float>(dweight)),
               "cudnnConvolutionBackwardFilter"),
           kOp, g));
  if (!dbias.defined()) return absl::OkStatus();
  cuda::LaunchSumAccumulate(cuda::F32OrBf16In(dy), g.batch, g.out_channels, g.out_h * g.out_w,
                            DevicePointer<float>(dbias), context_.stream);
  return cuda::LaunchStatus("conv2d bias gradient");
}

}  // namespace gpipe
