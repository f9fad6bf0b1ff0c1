#include "runtime/device/recording_ops.h"

#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace gpipe {
namespace {

// What every family's decorator shares: the views its closures hold and where closures go.
class Recorder {
 public:
  Recorder(Tensor::UnownedViews& views, std::function<void(RecordedOp)> record)
      : views_(views), record_(std::move(record)) {}

  // Hands `op` on and returns OK: a recorded op has computed nothing yet.
  absl::Status Record(RecordedOp op) const {
    record_(std::move(op));
    return absl::OkStatus();
  }

  // An argument as its closure holds it: every tensor in it replaced by its unowned view.
  Tensor View(const Tensor& tensor) const { return views_.Of(tensor); }
  std::vector<Tensor> View(std::span<const Tensor> tensors) const {
    std::vector<Tensor> viewed;
    viewed.reserve(tensors.size());
    for (const Tensor& tensor : tensors) viewed.push_back(views_.Of(tensor));
    return viewed;
  }
  MatrixView View(MatrixView matrix) const {
    matrix.tensor = views_.Of(matrix.tensor);
    return matrix;
  }
  LayerNormArgs View(LayerNormArgs args) const {
    args.weight = views_.Of(args.weight);
    args.bias = views_.Of(args.bias);
    return args;
  }
  RmsNormArgs View(RmsNormArgs args) const {
    args.weight = views_.Of(args.weight);
    return args;
  }
  BatchNormArgs View(BatchNormArgs args) const {
    args.weight = views_.Of(args.weight);
    args.bias = views_.Of(args.bias);
    return args;
  }

 private:
  Tensor::UnownedViews& views_;
  const std::function<void(RecordedOp)> record_;
};

// Each decorator below records, for every Do kernel, a closure calling the inner family's public
// entry with the same arguments as views. Closures are `mutable` because outputs are `Tensor&`.

class RecordingTensorOps final : public TensorOps {
 public:
  RecordingTensorOps(const TensorOps& inner, const Recorder& recorder)
      : inner_(inner), r_(recorder) {}

 private:
  absl::Status DoFill(Tensor& out, double value) const override {
    return r_.Record(
        [&inner = inner_, out = r_.View(out), value]() mutable { return inner.Fill(out, value); });
  }
  absl::Status DoCopy(const Tensor& in, Tensor& out) const override {
    return r_.Record([&inner = inner_, in = r_.View(in), out = r_.View(out)]() mutable {
      return inner.Copy(in, out);
    });
  }
  absl::Status DoAdd(const Tensor& a, const Tensor& b, Tensor& out) const override {
    return r_.Record([&inner = inner_, a = r_.View(a), b = r_.View(b),
                      out = r_.View(out)]() mutable { return inner.Add(a, b, out); });
  }
  absl::Status DoAxpy(float alpha, const Tensor& x, Tensor& y) const override {
    return r_.Record([&inner = inner_, alpha, x = r_.View(x), y = r_.View(y)]() mutable {
      return inner.Axpy(alpha, x, y);
    });
  }
  absl::Status DoScale(float alpha, Tensor& x) const override {
    return r_.Record(
        [&inner = inner_, alpha, x = r_.View(x)]() mutable { return inner.Scale(alpha, x); });
  }
  absl::Status DoCast(const Tensor& in, Tensor& out) const override {
    return r_.Record([&inner = inner_, in = r_.View(in), out = r_.View(out)]() mutable {
      return inner.Cast(in, out);
    });
  }
  absl::Status DoSumAccumulate(const Tensor& in, int64_t outer, int64_t mid, int64_t inner_size,
                               Tensor& out) const override {
    return r_.Record(
        [&inner = inner_, in = r_.View(in), outer, mid, inner_size, out = r_.View(out)]() mutable {
          return inner.SumAccumulate(in, outer, mid, inner_size, out);
        });
  }
  absl::Status DoFillRandom(const RandomKey& key, RandomDistribution distribution, double a,
                            double b, Tensor& out) const override {
    return r_.Record([&inner = inner_, key, distribution, a, b, out = r_.View(out)]() mutable {
      return inner.FillRandom(key, distribution, a, b, out);
    });
  }
  absl::Status DoDropoutMask(const RandomKey& key, double p, const Tensor& in,
                             Tensor& out) const override {
    return r_.Record([&inner = inner_, key, p, in = r_.View(in), out = r_.View(out)]() mutable {
      return inner.DropoutMask(key, p, in, out);
    });
  }
  absl::Status DoFlagNonFinite(std::span<const Tensor> tensors, Tensor& flag) const override {
    return r_.Record([&inner = inner_, tensors = r_.View(tensors), flag = r_.View(flag)]() mutable {
      return inner.FlagNonFinite(tensors, flag);
    });
  }
  absl::Status DoSumSquares(std::span<const Tensor> tensors, Tensor& out) const override {
    return r_.Record([&inner = inner_, tensors = r_.View(tensors), out = r_.View(out)]() mutable {
      return inner.SumSquares(tensors, out);
    });
  }

  const TensorOps& inner_;
  const Recorder& r_;
};

class RecordingMatmulOps final : public MatmulOps {
 public:
  RecordingMatmulOps(const MatmulOps& inner, const Recorder& recorder)
      : inner_(inner), r_(recorder) {}

 private:
  absl::Status DoGemm(const MatrixView& a, const MatrixView& b, const MatrixView& c,
                      const GemmOptions& options) const override {
    // The closure holds the bias view and points the options at it when it runs: a pointer taken
    // now would dangle once std::function copies or moves the closure.
    std::optional<Tensor> bias;
    if (options.bias != nullptr) bias = r_.View(*options.bias);
    GemmOptions held = options;
    held.bias = nullptr;
    return r_.Record([&inner = inner_, a = r_.View(a), b = r_.View(b), c = r_.View(c), held,
                      bias = std::move(bias)] {
      GemmOptions run = held;
      if (bias.has_value()) run.bias = &*bias;
      return inner.Gemm(a, b, c, run);
    });
  }

  const MatmulOps& inner_;
  const Recorder& r_;
};

class RecordingActivationOps final : public ActivationOps {
 public:
  RecordingActivationOps(const ActivationOps& inner, const Recorder& recorder)
      : inner_(inner), r_(recorder) {}

 private:
  absl::Status DoForward(Activation activation, const Tensor& x, Tensor& y) const override {
    return r_.Record([&inner = inner_, activation, x = r_.View(x), y = r_.View(y)]() mutable {
      return inner.Forward(activation, x, y);
    });
  }
  absl::Status DoBackward(Activation activation, const Tensor& saved, const Tensor& dy,
                          Tensor& dx) const override {
    return r_.Record(
        [&inner = inner_, activation, saved = r_.View(saved), dy = r_.View(dy),
         dx = r_.View(dx)]() mutable { return inner.Backward(activation, saved, dy, dx); });
  }
  absl::Status DoSwiGluForward(const Tensor& gate, const Tensor& up, Tensor& y) const override {
    return r_.Record([&inner = inner_, gate = r_.View(gate), up = r_.View(up),
                      y = r_.View(y)]() mutable { return inner.SwiGluForward(gate, up, y); });
  }
  absl::Status DoSwiGluBackward(const Tensor& gate, const Tensor& up, const Tensor& dy,
                                Tensor& dgate, Tensor& dup) const override {
    return r_.Record([&inner = inner_, gate = r_.View(gate), up = r_.View(up), dy = r_.View(dy),
                      dgate = r_.View(dgate), dup = r_.View(dup)]() mutable {
      return inner.SwiGluBackward(gate, up, dy, dgate, dup);
    });
  }

  const ActivationOps& inner_;
  const Recorder& r_;
};

class RecordingNormOps final : public NormOps {
 public:
  RecordingNormOps(const NormOps& inner, const Recorder& recorder) : inner_(inner), r_(recorder) {}

 private:
  absl::Status DoLayerNormForward(const LayerNormArgs& args, const Tensor& x, Tensor& y,
                                  Tensor& stats) const override {
    return r_.Record(
        [&inner = inner_, args = r_.View(args), x = r_.View(x), y = r_.View(y),
         stats = r_.View(stats)]() mutable { return inner.LayerNormForward(args, x, y, stats); });
  }
  absl::Status DoLayerNormBackwardInput(const LayerNormArgs& args, const Tensor& x,
                                        const Tensor& stats, const Tensor& dy,
                                        Tensor& dx) const override {
    return r_.Record([&inner = inner_, args = r_.View(args), x = r_.View(x), stats = r_.View(stats),
                      dy = r_.View(dy), dx = r_.View(dx)]() mutable {
      return inner.LayerNormBackwardInput(args, x, stats, dy, dx);
    });
  }
  absl::Status DoLayerNormBackwardParams(const LayerNormArgs& args, const Tensor& x,
                                         const Tensor& stats, const Tensor& dy, Tensor& dweight,
                                         Tensor& dbias) const override {
    return r_.Record([&inner = inner_, args = r_.View(args), x = r_.View(x), stats = r_.View(stats),
                      dy = r_.View(dy), dweight = r_.View(dweight),
                      dbias = r_.View(dbias)]() mutable {
      return inner.LayerNormBackwardParams(args, x, stats, dy, dweight, dbias);
    });
  }
  absl::Status DoRmsNormForward(const RmsNormArgs& args, const Tensor& x, Tensor& y,
                                Tensor& stats) const override {
    return r_.Record(
        [&inner = inner_, args = r_.View(args), x = r_.View(x), y = r_.View(y),
         stats = r_.View(stats)]() mutable { return inner.RmsNormForward(args, x, y, stats); });
  }
  absl::Status DoRmsNormBackwardInput(const RmsNormArgs& args, const Tensor& x, const Tensor& stats,
                                      const Tensor& dy, Tensor& dx) const override {
    return r_.Record([&inner = inner_, args = r_.View(args), x = r_.View(x), stats = r_.View(stats),
                      dy = r_.View(dy), dx = r_.View(dx)]() mutable {
      return inner.RmsNormBackwardInput(args, x, stats, dy, dx);
    });
  }
  absl::Status DoRmsNormBackwardParams(const RmsNormArgs& args, const Tensor& x,
                                       const Tensor& stats, const Tensor& dy,
                                       Tensor& dweight) const override {
    return r_.Record([&inner = inner_, args = r_.View(args), x = r_.View(x), stats = r_.View(stats),
                      dy = r_.View(dy), dweight = r_.View(dweight)]() mutable {
      return inner.RmsNormBackwardParams(args, x, stats, dy, dweight);
    });
  }
  absl::Status DoBatchNormTrainForward(const BatchNormArgs& args, const Tensor& x,
                                       Tensor& running_mean, Tensor& running_var,
                                       bool update_running, Tensor& y,
                                       Tensor& stats) const override {
    return r_.Record([&inner = inner_, args = r_.View(args), x = r_.View(x),
                      running_mean = r_.View(running_mean), running_var = r_.View(running_var),
                      update_running, y = r_.View(y), stats = r_.View(stats)]() mutable {
      return inner.BatchNormTrainForward(args, x, running_mean, running_var, update_running, y,
                                         stats);
    });
  }
  absl::Status DoBatchNormEvalForward(const BatchNormArgs& args, const Tensor& x,
                                      const Tensor& running_mean, const Tensor& running_var,
                                      Tensor& y) const override {
    return r_.Record([&inner = inner_, args = r_.View(args), x = r_.View(x),
                      running_mean = r_.View(running_mean), running_var = r_.View(running_var),
                      y = r_.View(y)]() mutable {
      return inner.BatchNormEvalForward(args, x, running_mean, running_var, y);
    });
  }
  absl::Status DoBatchNormBackward(const BatchNormArgs& args, const Tensor& x, const Tensor& stats,
                                   const Tensor& dy, Tensor& dx, Tensor& dweight,
                                   Tensor& dbias) const override {
    return r_.Record([&inner = inner_, args = r_.View(args), x = r_.View(x), stats = r_.View(stats),
                      dy = r_.View(dy), dx = r_.View(dx), dweight = r_.View(dweight),
                      dbias = r_.View(dbias)]() mutable {
      return inner.BatchNormBackward(args, x, stats, dy, dx, dweight, dbias);
    });
  }

  const NormOps& inner_;
  const Recorder& r_;
};

class RecordingConvOps final : public ConvOps {
 public:
  RecordingConvOps(const ConvOps& inner, const Recorder& recorder) : inner_(inner), r_(recorder) {}

 private:
  absl::Status DoConv2dForward(const Conv2dGeometry& g, ProductPrecision precision, const Tensor& x,
                               const Tensor& weight, const Tensor& bias, Tensor& y) const override {
    return r_.Record([&inner = inner_, g, precision, x = r_.View(x), weight = r_.View(weight),
                      bias = r_.View(bias), y = r_.View(y)]() mutable {
      return inner.Conv2dForward(g, precision, x, weight, bias, y);
    });
  }
  absl::Status DoConv2dBackwardInput(const Conv2dGeometry& g, ProductPrecision precision,
                                     const Tensor& weight, const Tensor& dy,
                                     Tensor& dx) const override {
    return r_.Record([&inner = inner_, g, precision, weight = r_.View(weight), dy = r_.View(dy),
                      dx = r_.View(dx)]() mutable {
      return inner.Conv2dBackwardInput(g, precision, weight, dy, dx);
    });
  }
  absl::Status DoConv2dBackwardParams(const Conv2dGeometry& g, ProductPrecision precision,
                                      const Tensor& x, const Tensor& dy, Tensor& dweight,
                                      Tensor& dbias) const override {
    return r_.Record([&inner = inner_, g, precision, x = r_.View(x), dy = r_.View(dy),
                      dweight = r_.View(dweight), dbias = r_.View(dbias)]() mutable {
      return inner.Conv2dBackwardParams(g, precision, x, dy, dweight, dbias);
    });
  }
  absl::Status DoPool2dForward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x,
                               Tensor& y) const override {
    return r_.Record([&inner = inner_, kind, g, x = r_.View(x), y = r_.View(y)]() mutable {
      return inner.Pool2dForward(kind, g, x, y);
    });
  }
  absl::Status DoPool2dBackward(PoolKind kind, const Conv2dGeometry& g, const Tensor& x,
                                const Tensor& y, const Tensor& dy, Tensor& dx) const override {
    return r_.Record(
        [&inner = inner_, kind, g, x = r_.View(x), y = r_.View(y), dy = r_.View(dy),
         dx = r_.View(dx)]() mutable { return inner.Pool2dBackward(kind, g, x, y, dy, dx); });
  }
  absl::Status DoGlobalAvgPool2dForward(const Tensor& x, Tensor& y) const override {
    return r_.Record([&inner = inner_, x = r_.View(x), y = r_.View(y)]() mutable {
      return inner.GlobalAvgPool2dForward(x, y);
    });
  }
  absl::Status DoGlobalAvgPool2dBackward(const Tensor& dy, Tensor& dx) const override {
    return r_.Record([&inner = inner_, dy = r_.View(dy), dx = r_.View(dx)]() mutable {
      return inner.GlobalAvgPool2dBackward(dy, dx);
    });
  }

  const ConvOps& inner_;
  const Recorder& r_;
};

class RecordingAttentionOps final : public AttentionOps {
 public:
  RecordingAttentionOps(const AttentionOps& inner, const Recorder& recorder)
      : inner_(inner), r_(recorder) {}

 private:
  absl::Status DoCausalSoftmaxForward(int64_t blocks, int64_t t, Tensor& scores) const override {
    return r_.Record([&inner = inner_, blocks, t, scores = r_.View(scores)]() mutable {
      return inner.CausalSoftmaxForward(blocks, t, scores);
    });
  }
  absl::Status DoCausalSoftmaxBackward(int64_t blocks, int64_t t, float scale, const Tensor& probs,
                                       Tensor& grad) const override {
    return r_.Record([&inner = inner_, blocks, t, scale, probs = r_.View(probs),
                      grad = r_.View(grad)]() mutable {
      return inner.CausalSoftmaxBackward(blocks, t, scale, probs, grad);
    });
  }
  absl::Status DoFusedCausalForward(const FusedAttentionArgs& args, const Tensor& qkv, Tensor& out,
                                    Tensor& logsumexp) const override {
    return r_.Record([&inner = inner_, args, qkv = r_.View(qkv), out = r_.View(out),
                      logsumexp = r_.View(logsumexp)]() mutable {
      return inner.FusedCausalForward(args, qkv, out, logsumexp);
    });
  }
  absl::Status DoFusedCausalBackward(const FusedAttentionArgs& args, const Tensor& qkv,
                                     const Tensor& out, const Tensor& logsumexp, const Tensor& dout,
                                     Tensor& dqkv) const override {
    return r_.Record([&inner = inner_, args, qkv = r_.View(qkv), out = r_.View(out),
                      logsumexp = r_.View(logsumexp), dout = r_.View(dout),
                      dqkv = r_.View(dqkv)]() mutable {
      return inner.FusedCausalBackward(args, qkv, out, logsumexp, dout, dqkv);
    });
  }
  absl::Status DoPackRotaryQkv(const RotaryQkvArgs& args, const Tensor& q, const Tensor& k,
                               const Tensor& v, Tensor& qkv) const override {
    return r_.Record(
        [&inner = inner_, args, q = r_.View(q), k = r_.View(k), v = r_.View(v),
         qkv = r_.View(qkv)]() mutable { return inner.PackRotaryQkv(args, q, k, v, qkv); });
  }
  absl::Status DoUnpackRotaryQkvGrad(const RotaryQkvArgs& args, const Tensor& dqkv, Tensor& dq,
                                     Tensor& dk, Tensor& dv) const override {
    return r_.Record(
        [&inner = inner_, args, dqkv = r_.View(dqkv), dq = r_.View(dq), dk = r_.View(dk),
         dv = r_.View(dv)]() mutable { return inner.UnpackRotaryQkvGrad(args, dqkv, dq, dk, dv); });
  }

  const AttentionOps& inner_;
  const Recorder& r_;
};

class RecordingEmbeddingOps final : public EmbeddingOps {
 public:
  RecordingEmbeddingOps(const EmbeddingOps& inner, const Recorder& recorder)
      : inner_(inner), r_(recorder) {}

 private:
  absl::Status DoGather(const Tensor& table, const Tensor& ids, Tensor& out) const override {
    return r_.Record([&inner = inner_, table = r_.View(table), ids = r_.View(ids),
                      out = r_.View(out)]() mutable { return inner.Gather(table, ids, out); });
  }
  absl::Status DoScatterAdd(const Tensor& ids, const Tensor& dout, Tensor& dtable) const override {
    return r_.Record(
        [&inner = inner_, ids = r_.View(ids), dout = r_.View(dout),
         dtable = r_.View(dtable)]() mutable { return inner.ScatterAdd(ids, dout, dtable); });
  }
  absl::Status DoAddRowBroadcast(const Tensor& in, const Tensor& row, int64_t n,
                                 Tensor& out) const override {
    return r_.Record(
        [&inner = inner_, in = r_.View(in), row = r_.View(row), n, out = r_.View(out)]() mutable {
          return inner.AddRowBroadcast(in, row, n, out);
        });
  }

  const EmbeddingOps& inner_;
  const Recorder& r_;
};

class RecordingLossOps final : public LossOps {
 public:
  RecordingLossOps(const LossOps& inner, const Recorder& recorder) : inner_(inner), r_(recorder) {}

 private:
  absl::Status DoSoftmaxCrossEntropy(const Tensor& logits, const Tensor& ids, double scale,
                                     Tensor& grad, Tensor& totals) const override {
    return r_.Record([&inner = inner_, logits = r_.View(logits), ids = r_.View(ids), scale,
                      grad = r_.View(grad), totals = r_.View(totals)]() mutable {
      return inner.SoftmaxCrossEntropy(logits, ids, scale, grad, totals);
    });
  }
  absl::Status DoMeanSquaredError(const Tensor& output, const Tensor& targets, double scale,
                                  Tensor& grad, Tensor& totals) const override {
    return r_.Record([&inner = inner_, output = r_.View(output), targets = r_.View(targets), scale,
                      grad = r_.View(grad), totals = r_.View(totals)]() mutable {
      return inner.MeanSquaredError(output, targets, scale, grad, totals);
    });
  }

  const LossOps& inner_;
  const Recorder& r_;
};

class RecordingOptimizerOps final : public OptimizerOps {
 public:
  RecordingOptimizerOps(const OptimizerOps& inner, const Recorder& recorder)
      : inner_(inner), r_(recorder) {}

 private:
  absl::Status DoSgd(const SgdUpdate& u, Tensor& param, const Tensor& grad,
                     Tensor& momentum_buffer) const override {
    return r_.Record([&inner = inner_, u, param = r_.View(param), grad = r_.View(grad),
                      momentum_buffer = r_.View(momentum_buffer)]() mutable {
      return inner.Sgd(u, param, grad, momentum_buffer);
    });
  }
  absl::Status DoAdam(const AdamUpdate& u, Tensor& param, const Tensor& grad, Tensor& exp_avg,
                      Tensor& exp_avg_sq) const override {
    return r_.Record([&inner = inner_, u, param = r_.View(param), grad = r_.View(grad),
                      exp_avg = r_.View(exp_avg), exp_avg_sq = r_.View(exp_avg_sq)]() mutable {
      return inner.Adam(u, param, grad, exp_avg, exp_avg_sq);
    });
  }

  const OptimizerOps& inner_;
  const Recorder& r_;
};

}  // namespace

struct RecordingOps::Families {
  Families(const Ops& inner, Tensor::UnownedViews& views, std::function<void(RecordedOp)> record)
      : recorder(views, std::move(record)),
        tensor(inner.tensor, recorder),
        matmul(inner.matmul, recorder),
        activation(inner.activation, recorder),
        norm(inner.norm, recorder),
        conv(inner.conv, recorder),
        attention(inner.attention, recorder),
        embedding(inner.embedding, recorder),
        loss(inner.loss, recorder),
        optimizer(inner.optimizer, recorder) {}

  const Recorder recorder;  // before the decorators, which refer to it
  RecordingTensorOps tensor;
  RecordingMatmulOps matmul;
  RecordingActivationOps activation;
  RecordingNormOps norm;
  RecordingConvOps conv;
  RecordingAttentionOps attention;
  RecordingEmbeddingOps embedding;
  RecordingLossOps loss;
  RecordingOptimizerOps optimizer;
};

RecordingOps::RecordingOps(const Ops& inner, Tensor::UnownedViews& views,
                           std::function<void(RecordedOp)> record)
    : families_(std::make_unique<Families>(inner, views, std::move(record))),
      ops_{.tensor = families_->tensor,
           .matmul = families_->matmul,
           .activation = families_->activation,
           .norm = families_->norm,
           .conv = families_->conv,
           .attention = families_->attention,
           .embedding = families_->embedding,
           .loss = families_->loss,
           .optimizer = families_->optimizer} {}

RecordingOps::~RecordingOps() = default;

}  // namespace gpipe
