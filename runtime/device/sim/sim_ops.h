// The simulated device's kernel families: shape-only tensors hold no values, so every op
// computes nothing.
#ifndef GPIPE_RUNTIME_DEVICE_SIM_SIM_OPS_H_
#define GPIPE_RUNTIME_DEVICE_SIM_SIM_OPS_H_

#include "runtime/device/ops/activation_ops.h"
#include "runtime/device/ops/attention_ops.h"
#include "runtime/device/ops/conv_ops.h"
#include "runtime/device/ops/embedding_ops.h"
#include "runtime/device/ops/loss_ops.h"
#include "runtime/device/ops/matmul_ops.h"
#include "runtime/device/ops/norm_ops.h"
#include "runtime/device/ops/optimizer_ops.h"
#include "runtime/device/ops/tensor_ops.h"

namespace gpipe {

class SimTensorOps final : public TensorOps {
 private:
  absl::Status DoFill(Tensor& out, double value) const override;
  absl::Status DoCopy(const Tensor& in, Tensor& out) const override;
  absl::Status DoAdd(const Tensor& a, const Tensor& b, Tensor& out) const override;
  absl::Status DoAxpy(float alpha, const Tensor& x, Tensor& y) const override;
  absl::Status DoScale(float alpha, Tensor& x) const override;
  absl::Status DoCast(const Tensor& in, Tensor& out) const override;
  absl::Status DoSumAccumulate(const Tensor& in, int64_t outer, int64_t mid, int64_t inner,
                               Tensor& out) const override;
  absl::Status DoFillRandom(const RandomKey& key, RandomDistribution distribution, double a,
                            double b, Tensor& out) const override;
  absl::Status DoDropoutMask(const RandomKey& key, double p, const Tensor& in,
                             Tensor& out) const override;
  absl::Status DoFlagNonFinite(std::span<const Tensor> tensors, Tensor& flag) const override;
  absl::Status DoSumSquares(std::span<const Tensor> tensors, Tensor& out) const override;
};

class SimMatmulOps final : public MatmulOps {
 private:
  absl::Status DoGemm(const MatrixView& a, const MatrixView& b, const MatrixView& c,
                      const GemmOptions& options) const override;
};

class SimActivationOps final : public ActivationOps {
 private:
  absl::Status DoForward(Activation activation, const Tensor& x, Tensor& y) const override;
  absl::Status DoBackward(Activation activation, const Tensor& saved, const Tensor& dy,
                          Tensor& dx) const override;
  absl::Status DoSwiGluForward(const Tensor& gate, const Tensor& up, Tensor& y) const override;
  absl::Status DoSwiGluBackward(const Tensor& gate, const Tensor& up, const Tensor& dy,
                                Tensor& dgate, Tensor& dup) const override;
};

class SimNormOps final : public NormOps {
 private:
  absl::Status DoLayerNormForward(const LayerNormArgs& args, const Tensor& x, Tensor& y,
                                  Tensor& stats) const override;
  absl::Status DoLayerNormBackwardInput(const LayerNormArgs& args, const Tensor& x,
                                        const Tensor& stats, const Tensor& dy,
                                        Tensor& dx) const override;
  absl::Status DoLayerNormBackwardParams(const LayerNormArgs& args, const Tensor& x,
                                         const Tensor& stats, const Tensor& dy, Tensor& dweight,
                                         Tensor& dbias) const override;
  absl::Status DoRmsNormForward(const RmsNormArgs& args, const Tensor& x, Tensor& y,
                                Tensor& stats) const override;
  absl::Status DoRmsNormBackwardInput(const RmsNormArgs& args, const Tensor& x, const Tensor& stats,
                                      const Tensor& dy, Tensor& dx) const override;
  absl::Status DoRmsNormBackwardParams(const RmsNormArgs& args, const Tensor& x,
                                       const Tensor& stats, const Tensor& dy,
                                       Tensor& dweight) const override;
  absl::Status DoBatchNormTrainForward(const BatchNormArgs& args, const Tensor& x,
                                       Tensor& running_mean, Tensor& running_var,
                                       bool update_running, Tensor& y,
                                       Tensor& stats) const override;
  absl::Status DoBatchNormEvalForward(const BatchNormArgs& args, const Tensor& x,
                                      const Tensor& running_mean, const Tensor& running_var,
                                      Tensor& y) const override;
  absl::Status DoBatchNormBackward(const BatchNormArgs& args, const Tensor& x, const Tensor& stats,
                                   const Tensor& dy, Tensor& dx, Tensor& dweight,
                                   Tensor& dbias) const override;
};

class SimConvOps final : public ConvOps {
 private:
  absl::Status DoConv2dForward(const Conv2dGeometry& g, ProductPrecision precision, const Tensor& x,
                               const Tensor& weight, const Tensor& bias, Tensor& y) const override;
  absl::Status DoConv2dBackwardInput(const Conv2dGeometry& g, ProductPrecision precision,
                                     const Tensor& weight, const Tensor& dy,
                                     Tensor& dx) const override;
  absl::Status DoConv2dBackwardParams(const Conv2dGeometry& g, ProductPrecision precision,
                                      const Tensor& x, const Tensor& dy, Tensor& dweight,
                                      Tensor& dbias) const override;
  absl::Status DoPool2dForward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x,
                               Tensor& y) const override;
  absl::Status DoPool2dBackward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x,
                                const Tensor& y, const Tensor& dy, Tensor& dx) const override;
  absl::Status DoGlobalAvgPool2dForward(const Tensor& x, Tensor& y) const override;
  absl::Status DoGlobalAvgPool2dBackward(const Tensor& dy, Tensor& dx) const override;
};

class SimAttentionOps final : public AttentionOps {
 private:
  absl::Status DoCausalSoftmaxForward(int64_t blocks, int64_t t, Tensor& scores) const override;
  absl::Status DoCausalSoftmaxBackward(int64_t blocks, int64_t t, float scale, const Tensor& probs,
                                       Tensor& grad) const override;
  absl::Status DoFusedCausalForward(const FusedAttentionArgs& args, const Tensor& qkv, Tensor& out,
                                    Tensor& logsumexp) const override;
  absl::Status DoFusedCausalBackward(const FusedAttentionArgs& args, const Tensor& qkv,
                                     const Tensor& out, const Tensor& logsumexp, const Tensor& dout,
                                     Tensor& dqkv) const override;
  absl::Status DoPackRotaryQkv(const RotaryQkvArgs& args, const Tensor& q, const Tensor& k,
                               const Tensor& v, Tensor& qkv) const override;
  absl::Status DoUnpackRotaryQkvGrad(const RotaryQkvArgs& args, const Tensor& dqkv, Tensor& dq,
                                     Tensor& dk, Tensor& dv) const override;
};

// Ids hold no values here, so only their shape is checked (by EmbeddingOps' entries).
class SimEmbeddingOps final : public EmbeddingOps {
 private:
  absl::Status DoGather(const Tensor& table, const Tensor& ids, Tensor& out) const override;
  absl::Status DoScatterAdd(const Tensor& ids, const Tensor& dout, Tensor& dtable) const override;
  absl::Status DoAddRowBroadcast(const Tensor& in, const Tensor& row, int64_t n,
                                 Tensor& out) const override;
};

// Class ids hold no values here, so only their shape is checked (by LossOps' entries).
class SimLossOps final : public LossOps {
 private:
  absl::Status DoSoftmaxCrossEntropy(const Tensor& logits, const Tensor& ids, double scale,
                                     Tensor& grad, Tensor& totals) const override;
  absl::Status DoMeanSquaredError(const Tensor& output, const Tensor& targets, double scale,
                                  Tensor& grad, Tensor& totals) const override;
};

class SimOptimizerOps final : public OptimizerOps {
 private:
  absl::Status DoSgd(const SgdUpdate& u, Tensor& param, const Tensor& grad,
                     Tensor& momentum_buffer) const override;
  absl::Status DoAdam(const AdamUpdate& u, Tensor& param, const Tensor& grad, Tensor& exp_avg,
                      Tensor& exp_avg_sq) const override;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_SIM_SIM_OPS_H_
