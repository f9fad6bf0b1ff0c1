#include "runtime/device/sim/sim_ops.h"

namespace gpipe {

absl::Status SimTensorOps::DoFill(Tensor& out, double value) const { return absl::OkStatus(); }

absl::Status SimTensorOps::DoCopy(const Tensor& in, Tensor& out) const { return absl::OkStatus(); }

absl::Status SimTensorOps::DoAdd(const Tensor& a, const Tensor& b, Tensor& out) const {
  return absl::OkStatus();
}

absl::Status SimTensorOps::DoAxpy(float alpha, const Tensor& x, Tensor& y) const {
  return absl::OkStatus();
}

absl::Status SimTensorOps::DoScale(float alpha, Tensor& x) const { return absl::OkStatus(); }

absl::Status SimTensorOps::DoCast(const Tensor& in, Tensor& out) const { return absl::OkStatus(); }

absl::Status SimTensorOps::DoSumAccumulate(const Tensor& in, int64_t outer, int64_t mid,
                                           int64_t inner, Tensor& out) const {
  return absl::OkStatus();
}

absl::Status SimTensorOps::DoFillRandom(const RandomKey& key, RandomDistribution distribution,
                                        double a, double b, Tensor& out) const {
  return absl::OkStatus();
}

absl::Status SimTensorOps::DoDropoutMask(const RandomKey& key, double p, const Tensor& in,
                                         Tensor& out) const {
  return absl::OkStatus();
}

absl::Status SimTensorOps::DoFlagNonFinite(std::span<const Tensor> tensors, Tensor& flag) const {
  return absl::OkStatus();
}

absl::Status SimTensorOps::DoSumSquares(std::span<const Tensor> tensors, Tensor& out) const {
  return absl::OkStatus();
}

absl::Status SimMatmulOps::DoGemm(const MatrixView& a, const MatrixView& b, const MatrixView& c,
                                  const GemmOptions& options) const {
  return absl::OkStatus();
}

absl::Status SimActivationOps::DoForward(Activation activation, const Tensor& x, Tensor& y) const {
  return absl::OkStatus();
}

absl::Status SimActivationOps::DoBackward(Activation activation, const Tensor& saved,
                                          const Tensor& dy, Tensor& dx) const {
  return absl::OkStatus();
}

absl::Status SimActivationOps::DoSwiGluForward(const Tensor& gate, const Tensor& up,
                                               Tensor& y) const {
  return absl::OkStatus();
}

absl::Status SimActivationOps::DoSwiGluBackward(const Tensor& gate, const Tensor& up,
                                                const Tensor& dy, Tensor& dgate,
                                                Tensor& dup) const {
  return absl::OkStatus();
}

absl::Status SimNormOps::DoRmsNormForward(const RmsNormArgs& args, const Tensor& x, Tensor& y,
                                          Tensor& stats) const {
  return absl::OkStatus();
}

absl::Status SimNormOps::DoRmsNormBackwardInput(const RmsNormArgs& args, const Tensor& x,
                                                const Tensor& stats, const Tensor& dy,
                                                Tensor& dx) const {
  return absl::OkStatus();
}

absl::Status SimNormOps::DoRmsNormBackwardParams(const RmsNormArgs& args, const Tensor& x,
                                                 const Tensor& stats, const Tensor& dy,
                                                 Tensor& dweight) const {
  return absl::OkStatus();
}

absl::Status SimNormOps::DoLayerNormForward(const LayerNormArgs& args, const Tensor& x, Tensor& y,
                                            Tensor& stats) const {
  return absl::OkStatus();
}

absl::Status SimNormOps::DoLayerNormBackwardInput(const LayerNormArgs& args, const Tensor& x,
                                                  const Tensor& stats, const Tensor& dy,
                                                  Tensor& dx) const {
  return absl::OkStatus();
}

absl::Status SimNormOps::DoLayerNormBackwardParams(const LayerNormArgs& args, const Tensor& x,
                                                   const Tensor& stats, const Tensor& dy,
                                                   Tensor& dweight, Tensor& dbias) const {
  return absl::OkStatus();
}

absl::Status SimNormOps::DoBatchNormTrainForward(const BatchNormArgs& args, const Tensor& x,
                                                 Tensor& running_mean, Tensor& running_var,
                                                 bool update_running, Tensor& y,
                                                 Tensor& stats) const {
  return absl::OkStatus();
}

absl::Status SimNormOps::DoBatchNormEvalForward(const BatchNormArgs& args, const Tensor& x,
                                                const Tensor& running_mean,
                                                const Tensor& running_var, Tensor& y) const {
  return absl::OkStatus();
}

absl::Status SimNormOps::DoBatchNormBackward(const BatchNormArgs& args, const Tensor& x,
                                             const Tensor& stats, const Tensor& dy, Tensor& dx,
                                             Tensor& dweight, Tensor& dbias) const {
  return absl::OkStatus();
}

absl::Status SimConvOps::DoConv2dForward(const Conv2dGeometry& g, ProductPrecision precision,
                                         const Tensor& x, const Tensor& weight, const Tensor& bias,
                                         Tensor& y) const {
  return absl::OkStatus();
}

absl::Status SimConvOps::DoConv2dBackwardInput(const Conv2dGeometry& g, ProductPrecision precision,
                                               const Tensor& weight, const Tensor& dy,
                                               Tensor& dx) const {
  return absl::OkStatus();
}

absl::Status SimConvOps::DoConv2dBackwardParams(const Conv2dGeometry& g, ProductPrecision precision,
                                                const Tensor& x, const Tensor& dy, Tensor& dweight,
                                                Tensor& dbias) const {
  return absl::OkStatus();
}

absl::Status SimConvOps::DoPool2dForward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x,
                                         Tensor& y) const {
  return absl::OkStatus();
}

absl::Status SimConvOps::DoPool2dBackward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x,
                                          const Tensor& y, const Tensor& dy, Tensor& dx) const {
  return absl::OkStatus();
}

absl::Status SimConvOps::DoGlobalAvgPool2dForward(const Tensor& x, Tensor& y) const {
  return absl::OkStatus();
}

absl::Status SimConvOps::DoGlobalAvgPool2dBackward(const Tensor& dy, Tensor& dx) const {
  return absl::OkStatus();
}

absl::Status SimAttentionOps::DoCausalSoftmaxForward(int64_t blocks, int64_t t,
                                                     Tensor& scores) const {
  return absl::OkStatus();
}

absl::Status SimAttentionOps::DoCausalSoftmaxBackward(int64_t blocks, int64_t t, float scale,
                                                      const Tensor& probs, Tensor& grad) const {
  return absl::OkStatus();
}

absl::Status SimAttentionOps::DoFusedCausalForward(const FusedAttentionArgs& args,
                                                   const Tensor& qkv, Tensor& out,
                                                   Tensor& logsumexp) const {
  return absl::OkStatus();
}

absl::Status SimAttentionOps::DoFusedCausalBackward(const FusedAttentionArgs& args,
                                                    const Tensor& qkv, const Tensor& out,
                                                    const Tensor& logsumexp, const Tensor& dout,
                                                    Tensor& dqkv) const {
  return absl::OkStatus();
}

absl::Status SimEmbeddingOps::DoGather(const Tensor& table, const Tensor& ids, Tensor& out) const {
  return absl::OkStatus();
}

absl::Status SimEmbeddingOps::DoScatterAdd(const Tensor& ids, const Tensor& dout,
                                           Tensor& dtable) const {
  return absl::OkStatus();
}

absl::Status SimEmbeddingOps::DoAddRowBroadcast(const Tensor& in, const Tensor& row, int64_t n,
                                                Tensor& out) const {
  return absl::OkStatus();
}

absl::Status SimLossOps::DoSoftmaxCrossEntropy(const Tensor& logits, const Tensor& ids,
                                               double scale, Tensor& grad, Tensor& totals) const {
  return absl::OkStatus();
}

absl::Status SimLossOps::DoMeanSquaredError(const Tensor& output, const Tensor& targets,
                                            double scale, Tensor& grad, Tensor& totals) const {
  return absl::OkStatus();
}

absl::Status SimOptimizerOps::DoSgd(const SgdUpdate& u, Tensor& param, const Tensor& grad,
                                    Tensor& momentum_buffer) const {
  return absl::OkStatus();
}

absl::Status SimOptimizerOps::DoAdam(const AdamUpdate& u, Tensor& param, const Tensor& grad,
                                     Tensor& exp_avg, Tensor& exp_avg_sq) const {
  return absl::OkStatus();
}

absl::Status SimAttentionOps::DoPackRotaryQkv(const RotaryQkvArgs& args, const Tensor& q,
                                              const Tensor& k, const Tensor& v, Tensor& qkv) const {
  return absl::OkStatus();
}

absl::Status SimAttentionOps::DoUnpackRotaryQkvGrad(const RotaryQkvArgs& args, const Tensor& dqkv,
                                                    Tensor& dq, Tensor& dk, Tensor& dv) const {
  return absl::OkStatus();
}

}  // namespace gpipe
