// The op families' argument checks run in front of every backend's kernels (the non-virtual
// entries of runtime/device/ops/*_ops.h), so the CPU reference and the simulated device refuse
// the same bad call with the same INVALID_ARGUMENT message. SIM computes nothing and used to
// accept anything; a plan that runs on SIM must fail there as it would on a real device.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/check.h"
#include "runtime/core/tensor.h"
#include "runtime/device/cpu/cpu_device.h"
#include "runtime/device/ops.h"
#include "runtime/device/sim/sim_device.h"

namespace gpipe {
namespace {

using ::testing::HasSubstr;

// A tensor of `shape` on `device` (its values are never read: every call below is refused).
Tensor On(Device& device, const Shape& shape, DType dtype = DType::kF32) {
  absl::StatusOr<Tensor> tensor = Tensor::Empty(device, shape, dtype, MemoryKind::kActivation);
  GPIPE_CHECK(tensor.ok()) << tensor.status();
  return *std::move(tensor);
}

// Runs `call` on a CPU and a SIM device: both must refuse it as INVALID_ARGUMENT with the same
// message, which contains `expected`.
void ExpectSameRefusal(const std::function<absl::Status(Device&)>& call,
                       const std::string& expected) {
  CpuDevice cpu;
  SimDevice sim;
  const absl::Status on_cpu = call(cpu);
  const absl::Status on_sim = call(sim);
  EXPECT_EQ(on_cpu.code(), absl::StatusCode::kInvalidArgument) << on_cpu;
  EXPECT_EQ(on_sim.code(), absl::StatusCode::kInvalidArgument) << on_sim;
  EXPECT_EQ(on_sim.message(), on_cpu.message());
  EXPECT_THAT(std::string(on_cpu.message()), HasSubstr(expected));
}

TEST(OpsArgumentChecksTest, ActivationsRefuseMismatchedTensorsOnEveryBackend) {
  ExpectSameRefusal(
      [](Device& d) {
        Tensor y = On(d, Shape{5});
        return d.ops().activation.Forward(Activation::kRelu, On(d, Shape{4}), y);
      },
      "ActivationOps::Forward (relu): x f32[4] and y f32[5] must be f32 or bf16 with the same "
      "element "
      "count");
  ExpectSameRefusal(
      [](Device& d) {
        Tensor dx = On(d, Shape{4}, DType::kI64);
        return d.ops().activation.Backward(Activation::kGelu, On(d, Shape{4}), On(d, Shape{4}), dx);
      },
      "ActivationOps::Backward (gelu): dy f32[4] and dx i64[4]");
}

// CUDA used to run an out-of-range Activation as the identity; CPU refused it.
TEST(OpsArgumentChecksTest, AnUnknownActivationIsRefusedOnEveryBackend) {
  const auto unknown = static_cast<Activation>(7);
  ExpectSameRefusal(
      [&](Device& d) {
        Tensor y = On(d, Shape{4});
        return d.ops().activation.Forward(unknown, On(d, Shape{4}), y);
      },
      "ActivationOps::Forward: unknown activation 7 (relu, tanh or gelu)");
}

TEST(OpsArgumentChecksTest, CausalSoftmaxRefusesScoresOfTheWrongShapeOnEveryBackend) {
  ExpectSameRefusal(
      [](Device& d) {
        Tensor scores = On(d, Shape{2, 3, 4});
        return d.ops().attention.CausalSoftmaxForward(2, 3, scores);
      },
      "AttentionOps::CausalSoftmaxForward: scores must be f32 [2, 3, 3], got f32[2, 3, 4]");
  ExpectSameRefusal(
      [](Device& d) {
        Tensor grad = On(d, Shape{2, 3, 3});
        return d.ops().attention.CausalSoftmaxBackward(2, -3, 1.0f, On(d, Shape{2, 3, 3}), grad);
      },
      "AttentionOps::CausalSoftmaxBackward: negative blocks (2) or t (-3)");
}

TEST(OpsArgumentChecksTest, FusedAttentionRefusesTensorsThatDoNotFitOnEveryBackend) {
  const FusedAttentionArgs args{.batch = 2, .t = 3, .heads = 2, .head_dim = 4};
  ExpectSameRefusal(
      [&](Device& d) {
        Tensor out = On(d, Shape{2, 3, 8});
        Tensor lse = On(d, Shape{2, 3, 2});
        return d.ops().attention.FusedCausalForward(args, On(d, Shape{2, 3, 8}), out, lse);
      },
      "AttentionOps::FusedCausalForward: qkv must be f32 [2, 3, 24], got f32[2, 3, 8]");
  ExpectSameRefusal(
      [&](Device& d) {
        FusedAttentionArgs no_heads = args;
        no_heads.heads = 0;
        Tensor dqkv = On(d, Shape{2, 3, 24});
        return d.ops().attention.FusedCausalBackward(no_heads, On(d, Shape{2, 3, 24}),
                                                     On(d, Shape{2, 3, 8}), On(d, Shape{2, 2, 3}),
                                                     On(d, Shape{2, 3, 8}), dqkv);
      },
      "AttentionOps::FusedCausalBackward: needs batch (2) and t (3) >= 0, heads (0) and "
      "head_dim (4) >= 1");
  ExpectSameRefusal(
      [&](Device& d) {
        Tensor dqkv = On(d, Shape{2, 3, 24});
        return d.ops().attention.FusedCausalBackward(
            args, dqkv, On(d, Shape{2, 3, 8}), On(d, Shape{2, 2, 3}), On(d, Shape{2, 3, 8}), dqkv);
      },
      "AttentionOps::FusedCausalBackward: dqkv f32[2, 3, 24] shares storage with an input");
}

// The ids' shape is checked in front of the backend; their values only by backends that hold them.
TEST(OpsArgumentChecksTest, EmbeddingRefusesOperandsThatDoNotFitOnEveryBackend) {
  ExpectSameRefusal(
      [](Device& d) {
        Tensor out = On(d, Shape{3, 4});
        return d.ops().embedding.Gather(On(d, Shape{10, 4}), On(d, Shape{3}, DType::kF32), out);
      },
      "EmbeddingOps::Gather: table f32[10, 4], ids f32[3] and rows f32[3, 4] do not fit");
  ExpectSameRefusal(
      [](Device& d) {
        Tensor dtable = On(d, Shape{10, 4});
        return d.ops().embedding.ScatterAdd(On(d, Shape{3}, DType::kI64), On(d, Shape{3, 5}),
                                            dtable);
      },
      "EmbeddingOps::ScatterAdd: table f32[10, 4], ids i64[3] and rows f32[3, 5] do not fit");
  ExpectSameRefusal(
      [](Device& d) {
        Tensor out = On(d, Shape{2, 6});
        return d.ops().embedding.AddRowBroadcast(On(d, Shape{2, 6}), On(d, Shape{8}), 5, out);
      },
      "EmbeddingOps::AddRowBroadcast: in f32[2, 6], row f32[8], n 5, out f32[2, 6]");
}

// The class ids' shape is checked in front of the backend; their values only by backends that hold
// them.
TEST(OpsArgumentChecksTest, LossesRefuseOperandsThatDoNotFitOnEveryBackend) {
  ExpectSameRefusal(
      [](Device& d) {
        Tensor grad = On(d, Shape{3, 5});
        Tensor totals = On(d, Shape{2}, DType::kF32);
        return d.ops().loss.SoftmaxCrossEntropy(On(d, Shape{3, 5}), On(d, Shape{3}, DType::kI64),
                                                1.0, grad, totals);
      },
      "LossOps::SoftmaxCrossEntropy: totals must be f64 [2], got f32[2]");
  ExpectSameRefusal(
      [](Device& d) {
        Tensor grad = On(d, Shape{3, 5});
        Tensor totals = On(d, Shape{2}, DType::kF64);
        return d.ops().loss.SoftmaxCrossEntropy(On(d, Shape{3, 5}), On(d, Shape{4}, DType::kI64),
                                                1.0, grad, totals);
      },
      "LossOps::SoftmaxCrossEntropy: logits f32[3, 5], ids i64[4], grad f32[3, 5]");
  ExpectSameRefusal(
      [](Device& d) {
        Tensor grad = On(d, Shape{6});
        Tensor totals = On(d, Shape{2}, DType::kF64);
        return d.ops().loss.MeanSquaredError(On(d, Shape{6}), On(d, Shape{5}), 1.0, grad, totals);
      },
      "LossOps::MeanSquaredError: output f32[6], targets f32[5], grad f32[6] must be f32 with the "
      "same element count");
}

TEST(OpsArgumentChecksTest, GemmRefusesMismatchedViewsOnEveryBackend) {
  ExpectSameRefusal(
      [](Device& d) {
        return d.ops().matmul.Gemm(WholeMatrix(On(d, Shape{2, 3}), 2, 3),
                                   WholeMatrix(On(d, Shape{4, 5}), 4, 5),
                                   WholeMatrix(On(d, Shape{2, 5}), 2, 5), GemmOptions{});
      },
      "MatmulOps::Gemm: op(A) [2, 3] op(B) [4, 5] does not give C [2, 5]");
  ExpectSameRefusal(
      [](Device& d) {
        const Tensor bias = On(d, Shape{4});
        return d.ops().matmul.Gemm(WholeMatrix(On(d, Shape{2, 3}), 2, 3),
                                   WholeMatrix(On(d, Shape{3, 5}), 3, 5),
                                   WholeMatrix(On(d, Shape{2, 5}), 2, 5), {.bias = &bias});
      },
      "MatmulOps::Gemm: bias must be f32 with n = 5 elements, got f32[4]");
  ExpectSameRefusal(
      [](Device& d) {
        MatrixView c = WholeMatrix(On(d, Shape{2, 5}), 2, 5);
        c.offset = 1;
        return d.ops().matmul.Gemm(WholeMatrix(On(d, Shape{2, 3}), 2, 3),
                                   WholeMatrix(On(d, Shape{3, 5}), 3, 5), c, GemmOptions{});
      },
      "MatmulOps::Gemm: C f32[2, 5] @ 1 [2 x 5, ld 5, batch stride 0] x 1 leaves its tensor");
}

TEST(OpsArgumentChecksTest, NormsRefuseBadSizesAndTensorsOnEveryBackend) {
  ExpectSameRefusal(
      [](Device& d) {
        Tensor y = On(d, Shape{2, 4});
        Tensor stats = On(d, Shape{2, kLayerNormStatsPerRow});
        return d.ops().norm.LayerNormForward({.rows = 2, .features = 4, .eps = 0.0},
                                             On(d, Shape{2, 4}), y, stats);
      },
      "LayerNormForward: needs rows >= 0, features >= 1 and eps > 0, got rows 2, features 4, "
      "eps 0");
  ExpectSameRefusal(
      [](Device& d) {
        Tensor dx = On(d, Shape{2, 5});
        return d.ops().norm.LayerNormBackwardInput({.rows = 2, .features = 4}, On(d, Shape{2, 4}),
                                                   On(d, Shape{2, kLayerNormStatsPerRow}),
                                                   On(d, Shape{2, 4}), dx);
      },
      "LayerNormBackwardInput: dx must be f32 with 8 elements, got f32[2, 5]");
  ExpectSameRefusal(
      [](Device& d) {
        Tensor running_mean = On(d, Shape{3});
        Tensor running_var = On(d, Shape{3});
        Tensor y = On(d, Shape{1, 3, 1});
        Tensor stats = On(d, Shape{3, kBatchNormStatsPerChannel});
        return d.ops().norm.BatchNormTrainForward({.batch = 1, .channels = 3},
                                                  On(d, Shape{1, 3, 1}), running_mean, running_var,
                                                  true, y, stats);
      },
      "BatchNormTrainForward: one value per channel (batch 1, positions 1) has no variance");
  ExpectSameRefusal(
      [](Device& d) {
        Tensor dx;
        Tensor dweight = On(d, Shape{3});
        Tensor dbias = On(d, Shape{4});
        return d.ops().norm.BatchNormBackward({.batch = 2, .channels = 3}, On(d, Shape{2, 3}),
                                              On(d, Shape{3, kBatchNormStatsPerChannel}),
                                              On(d, Shape{2, 3}), dx, dweight, dbias);
      },
      "BatchNormBackward: dbias must be f32 with 3 elements, got f32[4]");
}

TEST(OpsArgumentChecksTest, RmsNormRefusesBadSizesAndTensorsOnEveryBackend) {
  ExpectSameRefusal(
      [](Device& d) {
        Tensor y = On(d, Shape{2, 4});
        Tensor stats = On(d, Shape{2, kRmsNormStatsPerRow});
        return d.ops().norm.RmsNormForward(
            {.rows = 2, .features = 4, .eps = 0.0, .weight = On(d, Shape{4})}, On(d, Shape{2, 4}),
            y, stats);
      },
      "RmsNormForward: needs rows >= 0, features >= 1 and eps > 0, got rows 2, features 4, eps 0");
  ExpectSameRefusal(
      [](Device& d) {
        Tensor y = On(d, Shape{4, 2});
        Tensor stats = On(d, Shape{2, kRmsNormStatsPerRow});
        return d.ops().norm.RmsNormForward({.rows = 2, .features = 4, .weight = On(d, Shape{4})},
                                           On(d, Shape{4, 2}), y, stats);
      },
      "RmsNormForward: x must end in 4 features, got f32[4, 2]");
  ExpectSameRefusal(
      [](Device& d) {
        Tensor y = On(d, Shape{2, 4});
        Tensor stats = On(d, Shape{2, 3});
        return d.ops().norm.RmsNormForward({.rows = 2, .features = 4, .weight = On(d, Shape{4})},
                                           On(d, Shape{2, 4}), y, stats);
      },
      "RmsNormForward: stats must be f32 with 2 elements, got f32[2, 3]");
  ExpectSameRefusal(
      [](Device& d) {
        Tensor y = On(d, Shape{2, 4});
        Tensor stats = On(d, Shape{2, kRmsNormStatsPerRow});
        return d.ops().norm.RmsNormForward({.rows = 2, .features = 4}, On(d, Shape{2, 4}), y,
                                           stats);
      },
      "RmsNormForward: weight must be f32 with 4 elements");
  ExpectSameRefusal(
      [](Device& d) {
        Tensor dx = On(d, Shape{2, 5});
        return d.ops().norm.RmsNormBackwardInput(
            {.rows = 2, .features = 4, .weight = On(d, Shape{4})}, On(d, Shape{2, 4}),
            On(d, Shape{2, kRmsNormStatsPerRow}), On(d, Shape{2, 4}), dx);
      },
      "RmsNormBackwardInput: dx must be f32 with 8 elements, got f32[2, 5]");
  ExpectSameRefusal(
      [](Device& d) {
        Tensor dweight = On(d, Shape{5});
        return d.ops().norm.RmsNormBackwardParams({.rows = 2, .features = 4}, On(d, Shape{2, 4}),
                                                  On(d, Shape{2, kRmsNormStatsPerRow}),
                                                  On(d, Shape{2, 4}), dweight);
      },
      "RmsNormBackwardParams: dweight must be f32 with 4 elements, got f32[5]");
}

TEST(OpsArgumentChecksTest, SwiGluRefusesMismatchedOrAliasedTensorsOnEveryBackend) {
  ExpectSameRefusal(
      [](Device& d) {
        Tensor y = On(d, Shape{2, 3});
        return d.ops().activation.SwiGluForward(On(d, Shape{2, 3}), On(d, Shape{5}), y);
      },
      "ActivationOps::SwiGluForward: up must be f32 or bf16 with 6 elements, got f32[5]");
  ExpectSameRefusal(
      [](Device& d) {
        Tensor gate = On(d, Shape{2, 3});
        return d.ops().activation.SwiGluForward(gate, On(d, Shape{2, 3}), gate);
      },
      "ActivationOps::SwiGluForward: y f32[2, 3] shares storage with an input");
  ExpectSameRefusal(
      [](Device& d) {
        Tensor dgate = On(d, Shape{6});
        Tensor dup = On(d, Shape{6}, DType::kF64);
        return d.ops().activation.SwiGluBackward(On(d, Shape{6}), On(d, Shape{6}), On(d, Shape{6}),
                                                 dgate, dup);
      },
      "ActivationOps::SwiGluBackward: dup must be f32 or bf16 with 6 elements, got f64[6]");
  ExpectSameRefusal(
      [](Device& d) {
        Tensor dgate = On(d, Shape{6});
        return d.ops().activation.SwiGluBackward(On(d, Shape{6}), On(d, Shape{6}), On(d, Shape{6}),
                                                 dgate, dgate);
      },
      "ActivationOps::SwiGluBackward: dup f32[6] shares storage with an input");
}

TEST(OpsArgumentChecksTest, RotaryQkvRefusesBadGeometryShapesAndAliasesOnEveryBackend) {
  const RotaryQkvArgs args{.batch = 2, .t = 3, .heads = 4, .kv_heads = 2, .head_dim = 4};
  // q [2, 3, 16], k and v [2, 3, 8], qkv [2, 3, 48].
  ExpectSameRefusal(
      [&](Device& d) {
        RotaryQkvArgs odd = args;
        odd.head_dim = 5;
        Tensor qkv = On(d, Shape{2, 3, 60});
        return d.ops().attention.PackRotaryQkv(odd, On(d, Shape{2, 3, 20}), On(d, Shape{2, 3, 10}),
                                               On(d, Shape{2, 3, 10}), qkv);
      },
      "AttentionOps::PackRotaryQkv: needs batch (2) and t (3) >= 0, kv_heads (2) >= 1 dividing "
      "heads (4), an even head_dim (5) and rope_theta (10000) > 0");
  ExpectSameRefusal(
      [&](Device& d) {
        RotaryQkvArgs three = args;
        three.kv_heads = 3;
        Tensor dq = On(d, Shape{2, 3, 16});
        Tensor dk = On(d, Shape{2, 3, 12});
        Tensor dv = On(d, Shape{2, 3, 12});
        return d.ops().attention.UnpackRotaryQkvGrad(three, On(d, Shape{2, 3, 48}), dq, dk, dv);
      },
      "AttentionOps::UnpackRotaryQkvGrad: needs batch (2) and t (3) >= 0, kv_heads (3) >= 1 "
      "dividing heads (4)");
  ExpectSameRefusal(
      [&](Device& d) {
        Tensor qkv = On(d, Shape{2, 3, 48});
        return d.ops().attention.PackRotaryQkv(args, On(d, Shape{2, 3, 16}), On(d, Shape{2, 3, 16}),
                                               On(d, Shape{2, 3, 8}), qkv);
      },
      "AttentionOps::PackRotaryQkv: k must be f32 [2, 3, 8], got f32[2, 3, 16]");
  ExpectSameRefusal(
      [&](Device& d) {
        Tensor qkv = On(d, Shape{2, 3, 16});
        return d.ops().attention.PackRotaryQkv(args, On(d, Shape{2, 3, 16}), On(d, Shape{2, 3, 8}),
                                               On(d, Shape{2, 3, 8}), qkv);
      },
      "AttentionOps::PackRotaryQkv: qkv must be f32 or bf16 [2, 3, 48], got f32[2, 3, 16]");
  ExpectSameRefusal(
      [&](Device& d) {
        Tensor dq = On(d, Shape{2, 3, 16});
        Tensor dk = On(d, Shape{2, 3, 8});
        Tensor dv = On(d, Shape{2, 3, 8}, DType::kF64);
        return d.ops().attention.UnpackRotaryQkvGrad(args, On(d, Shape{2, 3, 48}), dq, dk, dv);
      },
      "AttentionOps::UnpackRotaryQkvGrad: dv must be f32 [2, 3, 8], got f64[2, 3, 8]");
  ExpectSameRefusal(
      [&](Device& d) {
        // q is the two rows after qkv's 288 values in one storage.
        const Tensor storage = On(d, Shape{8, 48});
        absl::StatusOr<Tensor> qkv = storage.SliceRows(0, 6);
        absl::StatusOr<Tensor> q = storage.SliceRows(6, 8);
        GPIPE_CHECK(qkv.ok() && q.ok());
        return d.ops().attention.PackRotaryQkv(args, *q, On(d, Shape{2, 3, 8}),
                                               On(d, Shape{2, 3, 8}), *qkv);
      },
      "AttentionOps::PackRotaryQkv: qkv f32[6, 48] shares storage with another operand");
  ExpectSameRefusal(
      [&](Device& d) {
        Tensor dq = On(d, Shape{2, 3, 16});
        Tensor dk = On(d, Shape{2, 3, 8});
        return d.ops().attention.UnpackRotaryQkvGrad(args, On(d, Shape{2, 3, 48}), dq, dk, dk);
      },
      "AttentionOps::UnpackRotaryQkvGrad: dk f32[2, 3, 8] shares storage with another operand");
}

TEST(OpsArgumentChecksTest, SumSquaresRefusesOperandsThatDoNotFitOnEveryBackend) {
  ExpectSameRefusal(
      [](Device& d) {
        const std::vector<Tensor> tensors = {On(d, Shape{4}), On(d, Shape{3})};
        Tensor out = On(d, Shape{2});
        return d.ops().tensor.SumSquares(tensors, out);
      },
      "SumSquares: out must be a f64 tensor, got f32[2]");
  ExpectSameRefusal(
      [](Device& d) {
        const std::vector<Tensor> tensors = {On(d, Shape{4}), On(d, Shape{3})};
        Tensor out = On(d, Shape{3}, DType::kF64);
        return d.ops().tensor.SumSquares(tensors, out);
      },
      "SumSquares: out f64[3] must have 2 elements");
  ExpectSameRefusal(
      [](Device& d) {
        const std::vector<Tensor> tensors = {On(d, Shape{4}), On(d, Shape{3}, DType::kF64)};
        Tensor out = On(d, Shape{2}, DType::kF64);
        return d.ops().tensor.SumSquares(tensors, out);
      },
      "SumSquares: tensors[1] must be a f32 tensor, got f64[3]");
  ExpectSameRefusal(
      [](Device& d) {
        const std::vector<Tensor> tensors = {On(d, Shape{4}), Tensor()};
        Tensor out = On(d, Shape{2}, DType::kF64);
        return d.ops().tensor.SumSquares(tensors, out);
      },
      "SumSquares: tensors[1] must be a f32 tensor");
}

}  // namespace
}  // namespace gpipe
