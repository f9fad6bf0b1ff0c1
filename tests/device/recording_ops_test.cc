// RecordingOps (runtime/device/recording_ops.h) over the CPU device's ops: a recorded call computes
// nothing; running its closure gives the bits of a direct call, reading memory as it is when it
// runs; a call that fails its checks records nothing; the closures pass views that keep the
// aliasing of the recorded tensors and own none of their bytes.
#include "runtime/device/recording_ops.h"

#include <cstdint>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "runtime/core/shape.h"
#include "runtime/core/tensor.h"
#include "runtime/device/cpu/cpu_device.h"
#include "runtime/device/ops.h"

namespace gpipe {
namespace {

// Test values keyed by (seed, index): multiples of 1/8 in [-6/8, 6/8], exact in float, so sums
// and products of a few of them are exact too.
float Value(int seed, int64_t index) {
  return static_cast<float>((seed * 7 + index * 5) % 13 - 6) / 8.0f;
}

std::vector<char> Bytes(const Tensor& tensor) {
  const char* data = static_cast<const char*>(tensor.raw_data());
  return std::vector<char>(data, data + tensor.bytes());
}

// An op applied to a test's tensors, on one table or the other.
using OpOn = std::function<absl::Status(const Ops& ops, std::vector<Tensor>& tensors)>;

// `tensor` (laid out as `batch` row-major [rows, cols] matrices one after another) as a batched
// MatrixView.
MatrixView Batched(const Tensor& tensor, int64_t rows, int64_t cols) {
  return MatrixView{.tensor = tensor,
                    .offset = 0,
                    .rows = rows,
                    .cols = cols,
                    .ld = cols,
                    .batch_stride = rows * cols};
}

class RecordingOpsTest : public ::testing::Test {
 protected:
  // f32 of `shape` holding Value(seed, i) at element i.
  Tensor F32(const Shape& shape, int seed) {
    Tensor tensor = Empty(shape, DType::kF32);
    for (int64_t i = 0; i < tensor.num_elements(); ++i) tensor.f32()[i] = Value(seed, i);
    return tensor;
  }
  Tensor F32(const Shape& shape, const std::vector<float>& values) {
    Tensor tensor = Empty(shape, DType::kF32);
    std::memcpy(tensor.raw_data(), values.data(), tensor.bytes());
    return tensor;
  }
  Tensor F64(const Shape& shape, double value) {
    Tensor tensor = Empty(shape, DType::kF64);
    for (int64_t i = 0; i < tensor.num_elements(); ++i) tensor.data<double>()[i] = value;
    return tensor;
  }
  Tensor Ids(const Shape& shape, const std::vector<int64_t>& ids) {
    Tensor tensor = Empty(shape, DType::kI64);
    std::memcpy(tensor.raw_data(), ids.data(), tensor.bytes());
    return tensor;
  }

  const Ops& recording() { return recording_.ops(); }
  const Ops& direct() { return device_.ops(); }

  // Records `op` on `tensors` and checks that it wrote nothing; then runs a copy of the recorded
  // closure (the original destroyed: the copy holds all it needs, a GEMM bias included) and
  // checks that every tensor has the bits `op` gives called directly on clones of the tensors.
  void ExpectReplayMatchesDirect(const std::vector<Tensor>& tensors, const OpOn& op) {
    std::vector<Tensor> recorded_on = tensors;
    std::vector<Tensor> direct_on;
    std::vector<std::vector<char>> before;
    for (const Tensor& tensor : tensors) {
      absl::StatusOr<Tensor> clone = tensor.Clone(MemoryKind::kActivation);
      ASSERT_TRUE(clone.ok()) << clone.status();
      direct_on.push_back(*std::move(clone));
      before.push_back(Bytes(tensor));
    }

    const absl::Status recorded = op(recording(), recorded_on);
    ASSERT_TRUE(recorded.ok()) << recorded;
    ASSERT_EQ(recorded_.size(), 1u);
    for (size_t i = 0; i < tensors.size(); ++i) {
      EXPECT_EQ(Bytes(tensors[i]), before[i]) << "recording wrote tensor " << i;
    }

    const RecordedOp replay = recorded_.front();
    recorded_.clear();
    const absl::Status replayed = replay();
    ASSERT_TRUE(replayed.ok()) << replayed;
    const absl::Status called = op(direct(), direct_on);
    ASSERT_TRUE(called.ok()) << called;

    bool written = false;
    for (size_t i = 0; i < tensors.size(); ++i) {
      EXPECT_EQ(Bytes(tensors[i]), Bytes(direct_on[i])) << "tensor " << i;
      written = written || Bytes(tensors[i]) != before[i];
    }
    EXPECT_TRUE(written) << "the op wrote nothing, so the comparison shows nothing";
  }

  CpuDevice device_;
  Tensor::UnownedViews views_;
  std::vector<RecordedOp> recorded_;
  RecordingOps recording_{device_.ops(), views_,
                          [this](RecordedOp op) { recorded_.push_back(std::move(op)); }};

 private:
  Tensor Empty(const Shape& shape, DType dtype) {
    absl::StatusOr<Tensor> tensor = Tensor::Empty(device_, shape, dtype, MemoryKind::kActivation);
    GPIPE_CHECK(tensor.ok()) << tensor.status();
    return *std::move(tensor);
  }
};

TEST_F(RecordingOpsTest, FillReplaysAsTheDirectCall) {
  ExpectReplayMatchesDirect({F32({5}, 1)}, [](const Ops& ops, std::vector<Tensor>& t) {
    return ops.tensor.Fill(t[0], 2.5);
  });
}

TEST_F(RecordingOpsTest, AxpyReplaysAsTheDirectCall) {
  ExpectReplayMatchesDirect({F32({6}, 1), F32({6}, 2)}, [](const Ops& ops, std::vector<Tensor>& t) {
    return ops.tensor.Axpy(0.5f, t[0], t[1]);
  });
}

TEST_F(RecordingOpsTest, SumSquaresOfASpanReplaysAsTheDirectCall) {
  ExpectReplayMatchesDirect({F32({3}, 1), F32({5}, 2), F32({2, 2}, 3), F64({3}, -1.0)},
                            [](const Ops& ops, std::vector<Tensor>& t) {
                              const std::vector<Tensor> span = {t[0], t[1], t[2]};
                              return ops.tensor.SumSquares(span, t[3]);
                            });
}

TEST_F(RecordingOpsTest, BatchedGemmWithBiasReplaysAsTheDirectCall) {
  // Two products [3, 4] x [4, 5] with beta (C is read) and a bias: the closure must hold its own
  // bias view, as the options' pointer names a tensor of this lambda's caller.
  ExpectReplayMatchesDirect({F32({2, 3, 4}, 1), F32({2, 4, 5}, 2), F32({2, 3, 5}, 3), F32({5}, 4)},
                            [](const Ops& ops, std::vector<Tensor>& t) {
                              const Tensor bias = t[3];
                              GemmOptions options;
                              options.beta = 0.5f;
                              options.batch = 2;
                              options.bias = &bias;
                              return ops.matmul.Gemm(Batched(t[0], 3, 4), Batched(t[1], 4, 5),
                                                     Batched(t[2], 3, 5), options);
                            });
}

TEST_F(RecordingOpsTest, ActivationForwardReplaysAsTheDirectCall) {
  ExpectReplayMatchesDirect({F32({8}, 1), F32({8}, 2)}, [](const Ops& ops, std::vector<Tensor>& t) {
    return ops.activation.Forward(Activation::kGelu, t[0], t[1]);
  });
}

TEST_F(RecordingOpsTest, LayerNormForwardWithAffineArgsReplaysAsTheDirectCall) {
  ExpectReplayMatchesDirect(
      {F32({2, 4}, 1), F32({2, 4}, 2), F32({2, kLayerNormStatsPerRow}, 3), F32({4}, 4),
       F32({4}, 5)},
      [](const Ops& ops, std::vector<Tensor>& t) {
        const LayerNormArgs args{
            .rows = 2, .features = 4, .eps = 1e-5, .weight = t[3], .bias = t[4]};
        return ops.norm.LayerNormForward(args, t[0], t[1], t[2]);
      });
}

TEST_F(RecordingOpsTest, FusedCausalAttentionForwardReplaysAsTheDirectCall) {
  ExpectReplayMatchesDirect({F32({1, 3, 12}, 1), F32({1, 3, 4}, 2), F32({1, 2, 3}, 3)},
                            [](const Ops& ops, std::vector<Tensor>& t) {
                              const FusedAttentionArgs args{
                                  .batch = 1, .t = 3, .heads = 2, .head_dim = 2, .scale = 0.5f};
                              return ops.attention.FusedCausalForward(args, t[0], t[1], t[2]);
                            });
}

TEST_F(RecordingOpsTest, EmbeddingGatherReplaysAsTheDirectCall) {
  ExpectReplayMatchesDirect({F32({4, 3}, 1), Ids({3}, {2, 0, 3}), F32({3, 3}, 2)},
                            [](const Ops& ops, std::vector<Tensor>& t) {
                              return ops.embedding.Gather(t[0], t[1], t[2]);
                            });
}

TEST_F(RecordingOpsTest, SoftmaxCrossEntropyReplaysAsTheDirectCall) {
  ExpectReplayMatchesDirect(
      {F32({3, 4}, 1), Ids({3}, {1, 3, 0}), F32({3, 4}, 2), F64({kLossTotalsSize}, 0.0)},
      [](const Ops& ops, std::vector<Tensor>& t) {
        return ops.loss.SoftmaxCrossEntropy(t[0], t[1], 0.25, t[2], t[3]);
      });
}

TEST_F(RecordingOpsTest, AdamReplaysAsTheDirectCall) {
  ExpectReplayMatchesDirect(
      {F32({6}, 1), F32({6}, 2), F32({6}, 3), F32({6}, {0.25f, 0.5f, 0.125f, 1.0f, 0.0f, 2.0f})},
      [](const Ops& ops, std::vector<Tensor>& t) {
        AdamUpdate update;
        update.neg_step_size = -0.01f;
        update.l2 = 0.5f;
        return ops.optimizer.Adam(update, t[0], t[1], t[2], t[3]);
      });
}

TEST_F(RecordingOpsTest, AClosureReadsTheInputAsItIsWhenItRuns) {
  Tensor x = F32({4}, {1.0f, 1.0f, 1.0f, 1.0f});
  Tensor y = F32({4}, {0.5f, 0.25f, -1.0f, 2.0f});
  ASSERT_TRUE(recording().tensor.Axpy(2.0f, x, y).ok());
  ASSERT_EQ(recorded_.size(), 1u);

  const std::vector<float> new_x = {1.0f, 2.0f, 3.0f, -4.0f};
  std::memcpy(x.raw_data(), new_x.data(), x.bytes());
  ASSERT_TRUE(recorded_.front()().ok());
  EXPECT_EQ(y.f32()[0], 0.5f + 2.0f * 1.0f);
  EXPECT_EQ(y.f32()[1], 0.25f + 2.0f * 2.0f);
  EXPECT_EQ(y.f32()[2], -1.0f + 2.0f * 3.0f);
  EXPECT_EQ(y.f32()[3], 2.0f + 2.0f * -4.0f);
}

TEST_F(RecordingOpsTest, ACallThatFailsItsChecksRecordsNothing) {
  Tensor x = F32({4}, 1);
  Tensor y = F32({5}, 2);
  EXPECT_EQ(recording().tensor.Axpy(2.0f, x, y).code(), absl::StatusCode::kInvalidArgument);

  // k differs: [3, 4] x [5, 2].
  const Tensor a = F32({3, 4}, 1);
  const Tensor b = F32({5, 2}, 2);
  const Tensor c = F32({3, 2}, 3);
  EXPECT_EQ(recording()
                .matmul.Gemm(WholeMatrix(a, 3, 4), WholeMatrix(b, 5, 2), WholeMatrix(c, 3, 2), {})
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(recorded_.empty());
}

TEST_F(RecordingOpsTest, InPlaceOpsReplayOnTheSharedStorage) {
  // Add with out = a, and a Scale: the output is an input.
  ExpectReplayMatchesDirect({F32({6}, 1), F32({6}, 2)}, [](const Ops& ops, std::vector<Tensor>& t) {
    return ops.tensor.Add(t[0], t[1], t[0]);
  });
  ExpectReplayMatchesDirect({F32({6}, 1)}, [](const Ops& ops, std::vector<Tensor>& t) {
    return ops.tensor.Scale(-1.5f, t[0]);
  });
  // A copy between two slices of one tensor writes that tensor's rows 2 and 3.
  ExpectReplayMatchesDirect({F32({4, 3}, 1)}, [](const Ops& ops, std::vector<Tensor>& t) {
    const absl::StatusOr<Tensor> top = t[0].SliceRows(0, 2);
    absl::StatusOr<Tensor> bottom = t[0].SliceRows(2, 4);
    if (!top.ok() || !bottom.ok()) return absl::InternalError("slicing failed");
    return ops.tensor.Copy(*top, *bottom);
  });
}

// A TensorOps that keeps the tensors its Add is given, to see what a closure passes; its other
// kernels do nothing.
class AddSpy final : public TensorOps {
 public:
  mutable std::vector<Tensor> add_arguments;  // a, b, out of the last Add

 private:
  absl::Status DoAdd(const Tensor& a, const Tensor& b, Tensor& out) const override {
    add_arguments = {a, b, out};
    return absl::OkStatus();
  }
  absl::Status DoFill(Tensor&, double) const override { return absl::OkStatus(); }
  absl::Status DoCopy(const Tensor&, Tensor&) const override { return absl::OkStatus(); }
  absl::Status DoAxpy(float, const Tensor&, Tensor&) const override { return absl::OkStatus(); }
  absl::Status DoScale(float, Tensor&) const override { return absl::OkStatus(); }
  absl::Status DoCast(const Tensor&, Tensor&) const override { return absl::OkStatus(); }
  absl::Status DoSumAccumulate(const Tensor&, int64_t, int64_t, int64_t, Tensor&) const override {
    return absl::OkStatus();
  }
  absl::Status DoFillRandom(const RandomKey&, RandomDistribution, double, double,
                            Tensor&) const override {
    return absl::OkStatus();
  }
  absl::Status DoDropoutMask(const RandomKey&, double, const Tensor&, Tensor&) const override {
    return absl::OkStatus();
  }
  absl::Status DoFlagNonFinite(std::span<const Tensor>, Tensor&) const override {
    return absl::OkStatus();
  }
  absl::Status DoSumSquares(std::span<const Tensor>, Tensor&) const override {
    return absl::OkStatus();
  }
};

TEST_F(RecordingOpsTest, ClosuresPassViewsThatShareStorageAsTheRecordedTensorsDid) {
  AddSpy spy;
  const Ops& cpu = device_.ops();
  const Ops inner{.tensor = spy,
                  .matmul = cpu.matmul,
                  .activation = cpu.activation,
                  .norm = cpu.norm,
                  .conv = cpu.conv,
                  .attention = cpu.attention,
                  .embedding = cpu.embedding,
                  .loss = cpu.loss,
                  .optimizer = cpu.optimizer};
  Tensor::UnownedViews views;
  std::vector<RecordedOp> recorded;
  RecordingOps recording(inner, views, [&](RecordedOp op) { recorded.push_back(std::move(op)); });

  const Tensor a = F32({2, 3}, 1);
  const absl::StatusOr<Tensor> a_flat = a.Reshaped({6});
  ASSERT_TRUE(a_flat.ok());
  Tensor out = F32({6}, 2);
  ASSERT_TRUE(recording.ops().tensor.Add(a, *a_flat, out).ok());
  ASSERT_EQ(recorded.size(), 1u);
  EXPECT_TRUE(spy.add_arguments.empty()) << "recording ran the inner op";
  ASSERT_TRUE(recorded.front()().ok());

  ASSERT_EQ(spy.add_arguments.size(), 3u);
  const Tensor& seen_a = spy.add_arguments[0];
  const Tensor& seen_b = spy.add_arguments[1];
  const Tensor& seen_out = spy.add_arguments[2];
  EXPECT_TRUE(seen_a.SharesStorageWith(seen_b));
  EXPECT_FALSE(seen_a.SharesStorageWith(seen_out));
  // Views, not the owners, of the same bytes with the same shapes.
  EXPECT_FALSE(seen_a.SharesStorageWith(a));
  EXPECT_FALSE(seen_out.SharesStorageWith(out));
  EXPECT_EQ(seen_a.raw_data(), a.raw_data());
  EXPECT_EQ(seen_out.raw_data(), out.raw_data());
  EXPECT_EQ(seen_a.shape(), a.shape());
  EXPECT_EQ(seen_b.shape(), a_flat->shape());
}

TEST_F(RecordingOpsTest, ARecordedOpKeepsNoMemoryAlive) {
  const int64_t before = device_.memory().current();
  Tensor x = F32({1024}, 1);
  Tensor y = F32({1024}, 2);
  EXPECT_GE(device_.memory().current(), before + 2 * 1024 * 4);
  ASSERT_TRUE(recording().tensor.Axpy(2.0f, x, y).ok());
  ASSERT_EQ(recorded_.size(), 1u);

  x = Tensor();
  y = Tensor();
  EXPECT_EQ(device_.memory().current(), before) << "the closure still owns the bytes";
  EXPECT_EQ(recorded_.size(), 1u);  // and it is not run: its memory is gone
}

}  // namespace
}  // namespace gpipe
