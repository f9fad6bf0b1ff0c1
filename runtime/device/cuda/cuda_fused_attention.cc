// CudaAttentionOps' fused causal attention (contracts in runtime/device/ops/attention_ops.h) as
// cuBLAS products through the device's own MatmulOps (cuda_matmul_ops.cu: strided batched
// GEMMs over the heads, bf16 tensor cores with f32 accumulation under ProductPrecision::kBF16)
// and two row kernels (cuda_attention_rows.h) between them. The scores of a chunk of samples,
// [chunk, heads, t, t] f32, live in workspace for the call only: the caller keeps nothing
// quadratic in t, and the score buffers stay under kScoreBytesBound unless one sample alone
// needs more. At kBF16 the row kernels also write P (and dS) into bf16 buffers of the same
// layout, counted in that bound, which the products read as they are: no operand is packed
// (f32 qkv, out or dout views still are, by MatmulOps, one product's at a time).
//
// At kBF16, qkv, out, dout and dqkv may be bf16 (mixed precision's storage): the products read
// bf16 views in place and write bf16 outputs rounded from their f32 results (matmul_ops.h), so
// no operand is packed, and the gradient kernel reads bf16 out and dout as their widening.
//
// Causal rows come in blocks of kRowBlock: row block i's products cover columns 0 up to its
// own last row, so the blocks above the diagonal are neither computed nor stored (at t = 2048
// the products do 62.5% of the full t x t work; t <= kRowBlock is one block, the full t x t).
// Every product's sums run in cuBLAS's fixed order, no atomics: the same bits every run, and
// per sample whatever the batch or chunk (each sample's GEMMs are issued on their own, and the
// samples' score blocks are equally aligned).
//
// Under runtime.cuda.cudnn_attention a call cudnn_attention.h takes (bf16 storage) runs there
// instead, with no [t, t] workspace at all.
#include <algorithm>
#include <cstdint>

#include "runtime/core/status_macros.h"
#include "runtime/device/cuda/cuda_attention_ops.h"
#include "runtime/device/cuda/cuda_attention_rows.h"
#include "runtime/device/cuda/device_pointer.h"

namespace gpipe {
namespace {

// Transient score bytes per call (one buffer in forward, S and dP in backward), at least one
// sample's.
constexpr int64_t kScoreBytesBound = int64_t{512} << 20;
// Rows per causal block of the products.
constexpr int64_t kRowBlock = 512;
// Floats between samples' score blocks are a multiple of this (256 bytes): every sample's
// products see the same alignment, so cuBLAS picks the same kernels whatever the chunk.
constexpr int64_t kSampleAlignment = 64;

// Where a call's operands live and how it walks them.
class Layout {
 public:
  // The call holds `f32_buffers` f32 and, at kBF16, `bf16_buffers` bf16 [chunk, heads, t, t]
  // score buffers at once.
  Layout(const FusedAttentionArgs& args, int f32_buffers, int bf16_buffers)
      : args_(args),
        width_(args.heads * args.head_dim),
        sample_stride_((args.heads * args.t * args.t + kSampleAlignment - 1) / kSampleAlignment *
                       kSampleAlignment),
        chunk_(std::clamp<int64_t>(
            kScoreBytesBound /
                (sample_stride_ * (4 * f32_buffers + (bf16() ? 2 * bf16_buffers : 0))),
            1, args.batch)) {}

  int64_t chunk() const { return chunk_; }
  int64_t width() const { return width_; }
  // Whether P and dS go to bf16 buffers, the products' operands as they are.
  bool bf16() const { return args_.precision == ProductPrecision::kBF16; }

  // A score buffer for a chunk of samples.
  absl::StatusOr<Tensor> ScoreBuffer(Allocator& workspace, DType dtype = DType::kF32) const {
    return Tensor::Empty(workspace, Shape{chunk_ * sample_stride_}, dtype, MemoryKind::kWorkspace);
  }

  // The rows a chunk of `samples` fills in a score buffer.
  cuda::ScoreRows Rows(int64_t samples) const {
    return {.samples = samples,
            .heads = args_.heads,
            .t = args_.t,
            .sample_stride = sample_stride_,
            .row_block = kRowBlock};
  }

  // Rows [first, first + rows) of part (0: q, 1: k, 2: v) of sample b in a [batch, t, 3 width]
  // tensor, one matrix per head.
  MatrixView Qkv(const Tensor& qkv, int64_t b, int part, int64_t first, int64_t rows) const {
    return {.tensor = qkv,
            .offset = (b * args_.t + first) * 3 * width_ + part * width_,
            .rows = rows,
            .cols = args_.head_dim,
            .ld = 3 * width_,
            .batch_stride = args_.head_dim};
  }

  // Rows [first, first + rows) of sample b in a [batch, t, width] tensor, one matrix per head.
  MatrixView Heads(const Tensor& heads, int64_t b, int64_t first, int64_t rows) const {
    return {.tensor = heads,
            .offset = (b * args_.t + first) * width_,
            .rows = rows,
            .cols = args_.head_dim,
            .ld = width_,
            .batch_stride = args_.head_dim};
  }

  // Rows [first_row, + rows) and columns [first_col, + cols) of the chunk's sample c's scores,
  // one matrix per head.
  MatrixView Scores(const Tensor& scores, int64_t c, int64_t first_row, int64_t rows,
                    int64_t first_col, int64_t cols) const {
    return {.tensor = scores,
            .offset = c * sample_stride_ + first_row * args_.t + first_col,
            .rows = rows,
            .cols = cols,
            .ld = args_.t,
            .batch_stride = args_.t * args_.t};
  }

  GemmOptions Options(bool transpose_a, bool transpose_b, float alpha) const {
    return {.transpose_a = transpose_a,
            .transpose_b = transpose_b,
            .alpha = alpha,
            .batch = args_.heads,
            .precision = args_.precision};
  }

 private:
  FusedAttentionArgs args_;
  int64_t width_;
  int64_t sample_stride_;
  int64_t chunk_;
};

// A bf16 score buffer's elements for the row kernels; null for an f32 one (the kernels then
// work in place in f32).
uint16_t* Bf16Bits(Tensor& buffer) {
  return buffer.dtype() == DType::kBF16 ? static_cast<uint16_t*>(buffer.raw_data()) : nullptr;
}

// `tensor`'s elements from flat index `first` on, f32 or bf16.
cuda::RowsIn RowsFrom(const Tensor& tensor, int64_t first) {
  return {.data = static_cast<const char*>(tensor.raw_data()) + first * SizeOf(tensor.dtype()),
          .bf16 = tensor.dtype() == DType::kBF16};
}

// Runs per_block(first, rows) over the causal row blocks of [0, t), in order.
template <typename PerBlock>
absl::Status ForEachRowBlock(int64_t t, PerBlock per_block) {
  for (int64_t first = 0; first < t; first += kRowBlock) {
    RETURN_IF_ERROR(per_block(first, std::min(kRowBlock, t - first)));
  }
  return absl::OkStatus();
}

}  // namespace

// Per chunk: S = scale q k^T, the softmax in place with the log-sum-exp, O = P v.
absl::Status CudaAttentionOps::DoFusedCausalForward(const FusedAttentionArgs& args,
                                                    const Tensor& qkv, Tensor& out,
                                                    Tensor& logsumexp) const {
  if (args.batch == 0 || args.t == 0) return absl::OkStatus();
  if (context_.cudnn_attention) {
    ASSIGN_OR_RETURN(const bool ran, cudnn_.Forward(args, qkv, out, logsumexp));
    if (ran) return absl::OkStatus();
  }
  const Layout layout(args, 1, 1);
  ASSIGN_OR_RETURN(Tensor scores, layout.ScoreBuffer(*context_.workspace));
  // At kBF16 the softmax writes P as the P v product's bf16 operand.
  Tensor probs = scores;
  if (layout.bf16()) {
    ASSIGN_OR_RETURN(probs, layout.ScoreBuffer(*context_.workspace, DType::kBF16));
  }
  for (int64_t b0 = 0; b0 < args.batch; b0 += layout.chunk()) {
    const int64_t samples = std::min(layout.chunk(), args.batch - b0);
    for (int64_t c = 0; c < samples; ++c) {
      RETURN_IF_ERROR(ForEachRowBlock(args.t, [&](int64_t first, int64_t rows) {
        const int64_t end = first + rows;
        return matmul_.Gemm(
            layout.Qkv(qkv, b0 + c, 0, first, rows), layout.Qkv(qkv, b0 + c, 1, 0, end),
            layout.Scores(scores, c, first, rows, 0, end), layout.Options(false, true, args.scale));
      }));
    }
    RETURN_IF_ERROR(cuda::CausalSoftmaxWithLogSumExp(
        context_.stream, layout.Rows(samples), DevicePointer<float>(scores), Bf16Bits(probs),
        DevicePointer<float>(logsumexp) + b0 * args.heads * args.t));
    for (int64_t c = 0; c < samples; ++c) {
      RETURN_IF_ERROR(ForEachRowBlock(args.t, [&](int64_t first, int64_t rows) {
        const int64_t end = first + rows;
        return matmul_.Gemm(
            layout.Scores(probs, c, first, rows, 0, end), layout.Qkv(qkv, b0 + c, 2, 0, end),
            layout.Heads(out, b0 + c, first, rows), layout.Options(false, false, 1.0f));
      }));
    }
  }
  return absl::OkStatus();
}

// Per chunk: S = scale q k^T and dP = dO v^T; P = exp(S - lse) and dS = scale P (dP - D) in
// place (D = rowsum(dO * O), as the CPU backend takes it); dq = dS k by row blocks, dk = dS^T q
// and dv = P^T dO by column blocks (block j's keys meet the queries from j's first row on).
absl::Status CudaAttentionOps::DoFusedCausalBackward(const FusedAttentionArgs& args,
                                                     const Tensor& qkv, const Tensor& out,
                                                     const Tensor& logsumexp, const Tensor& dout,
                                                     Tensor& dqkv) const {
  if (args.batch == 0 || args.t == 0) return absl::OkStatus();
  if (context_.cudnn_attention) {
    ASSIGN_OR_RETURN(const bool ran, cudnn_.Backward(args, qkv, out, logsumexp, dout, dqkv));
    if (ran) return absl::OkStatus();
  }
  const Layout layout(args, 2, 2);
  ASSIGN_OR_RETURN(Tensor scores, layout.ScoreBuffer(*context_.workspace));
  ASSIGN_OR_RETURN(Tensor dscores, layout.ScoreBuffer(*context_.workspace));
  // At kBF16 the gradient kernel writes P and dS as the products' bf16 operands.
  Tensor probs = scores;
  Tensor ds_operand = dscores;
  if (layout.bf16()) {
    ASSIGN_OR_RETURN(probs, layout.ScoreBuffer(*context_.workspace, DType::kBF16));
    ASSIGN_OR_RETURN(ds_operand, layout.ScoreBuffer(*context_.workspace, DType::kBF16));
  }
  const int64_t t = args.t;
  for (int64_t b0 = 0; b0 < args.batch; b0 += layout.chunk()) {
    const int64_t samples = std::min(layout.chunk(), args.batch - b0);
    for (int64_t c = 0; c < samples; ++c) {
      const int64_t b = b0 + c;
      RETURN_IF_ERROR(ForEachRowBlock(t, [&](int64_t first, int64_t rows) {
        const int64_t end = first + rows;
        RETURN_IF_ERROR(matmul_.Gemm(layout.Qkv(qkv, b, 0, first, rows),
                                     layout.Qkv(qkv, b, 1, 0, end),
                                     layout.Scores(scores, c, first, rows, 0, end),
                                     layout.Options(false, true, args.scale)));
        return matmul_.Gemm(layout.Heads(dout, b, first, rows), layout.Qkv(qkv, b, 2, 0, end),
                            layout.Scores(dscores, c, first, rows, 0, end),
                            layout.Options(false, true, 1.0f));
      }));
    }
    const int64_t row0 = b0 * t * layout.width();
    RETURN_IF_ERROR(cuda::CausalSoftmaxGradient(
        context_.stream,
        {.scores = layout.Rows(samples),
         .head_dim = args.head_dim,
         .width = layout.width(),
         .scale = args.scale,
         .bf16 = args.precision == ProductPrecision::kBF16},
        RowsFrom(out, row0), RowsFrom(dout, row0),
        DevicePointer<float>(logsumexp) + b0 * args.heads * t, DevicePointer<float>(scores),
        DevicePointer<float>(dscores), Bf16Bits(probs), Bf16Bits(ds_operand)));
    for (int64_t c = 0; c < samples; ++c) {
      const int64_t b = b0 + c;
      RETURN_IF_ERROR(ForEachRowBlock(t, [&](int64_t first, int64_t rows) {
        const int64_t end = first + rows;
        RETURN_IF_ERROR(matmul_.Gemm(
            layout.Scores(ds_operand, c, first, rows, 0, end), layout.Qkv(qkv, b, 1, 0, end),
            layout.Qkv(dqkv, b, 0, first, rows), layout.Options(false, false, 1.0f)));
        // Keys [first, end) against queries [first, t): dS and P there are zero above the
        // diagonal and filled below it.
        RETURN_IF_ERROR(matmul_.Gemm(layout.Scores(ds_operand, c, first, t - first, first, rows),
                                     layout.Qkv(qkv, b, 0, first, t - first),
                                     layout.Qkv(dqkv, b, 1, first, rows),
                                     layout.Options(true, false, 1.0f)));
        return matmul_.Gemm(layout.Scores(probs, c, first, t - first, first, rows),
                            layout.Heads(dout, b, first, t - first),
                            layout.Qkv(dqkv, b, 2, first, rows), layout.Options(true, false, 1.0f));
      }));
    }
  }
  return absl::OkStatus();
}

}  // namespace gpipe
