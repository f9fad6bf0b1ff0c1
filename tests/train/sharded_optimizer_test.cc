// ShardedOptimizer: D replicas, each updating its parts of every parameter and the parts put
// together (what the replicas' all-gather does), take exactly the unsharded update for SGD with
// momentum, Adam and AdamW (decay_only_matrices included), keep about 1/D of the state, and
// continue bit-identically after their state is exported in parts, put together and imported
// under another replica count (what a checkpoint does).
#include "runtime/train/sharded_optimizer.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "runtime/device/cpu/cpu_device.h"
#include "runtime/train/optimizer_factory.h"
#include "runtime/train/optimizer_state_io.h"

namespace gpipe {
namespace {

const char* const kSpecs[] = {
    "sgd { lr: 0.1 momentum: 0.9 nesterov: true weight_decay: 0.01 }",
    "adam { lr: 0.01 weight_decay: 0.01 }",
    "adamw { lr: 0.01 weight_decay: 0.1 decay_only_matrices: true }",
};
// A matrix, a vector, one smaller than the replica count (the last replica's whole) and one the
// replica count divides.
const std::vector<Shape> kShapes = {Shape({5, 3}), Shape({7}), Shape({2}), Shape({4, 3})};
const std::vector<std::string> kNames = {"a.weight", "a.bias", "b.scale", "c.weight"};

std::unique_ptr<Optimizer> Make(const char* spec) {
  pb::Optimizer proto;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(spec, &proto)) << spec;
  return *CreateOptimizer(proto);
}

// Deterministic, distinct values: parameter p, element i, step s.
float Value(int p, int64_t i) { return 0.1f * static_cast<float>((p * 31 + i * 7) % 23) - 1.1f; }
float Grad(int p, int64_t i, int step) {
  return 0.05f * static_cast<float>((p * 13 + i * 5 + step * 11) % 17) - 0.4f;
}

std::vector<Tensor> Tensors(CpuDevice& device, MemoryKind kind) {
  std::vector<Tensor> out;
  for (size_t p = 0; p < kShapes.size(); ++p) {
    Tensor t = *Tensor::Empty(device, kShapes[p], DType::kF32, kind);
    for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = Value(static_cast<int>(p), i);
    out.push_back(t);
  }
  return out;
}

void SetGrads(std::vector<Tensor>& grads, int step) {
  for (size_t p = 0; p < grads.size(); ++p) {
    for (int64_t i = 0; i < grads[p].num_elements(); ++i) {
      grads[p].f32()[i] = Grad(static_cast<int>(p), i, step);
    }
  }
}

// One replica: its copy of the parameters, its gradients and its optimizer.
struct Replica {
  std::vector<Tensor> values;
  std::vector<Tensor> grads;
  std::unique_ptr<ShardedOptimizer> optimizer;
};

std::vector<Replica> MakeReplicas(CpuDevice& device, const char* spec, int replicas) {
  std::vector<Replica> out;
  for (int r = 0; r < replicas; ++r) {
    out.push_back({Tensors(device, MemoryKind::kParameter), Tensors(device, MemoryKind::kGradient),
                   std::make_unique<ShardedOptimizer>(Make(spec), r, replicas)});
  }
  return out;
}

// Every replica's parts into every replica's values (the all-gather).
void Gather(std::vector<Replica>& replicas) {
  const int count = static_cast<int>(replicas.size());
  for (size_t p = 0; p < kShapes.size(); ++p) {
    for (int owner = 0; owner < count; ++owner) {
      const ElementRange part = ShardRange(replicas[owner].values[p].num_elements(), count, owner);
      for (Replica& replica : replicas) {
        for (int64_t i = part.begin; i < part.end; ++i) {
          replica.values[p].f32()[i] = replicas[owner].values[p].f32()[i];
        }
      }
    }
  }
}

void ExpectSame(const std::vector<Tensor>& got, const std::vector<Tensor>& expected,
                const std::string& what) {
  for (size_t p = 0; p < expected.size(); ++p) {
    for (int64_t i = 0; i < expected[p].num_elements(); ++i) {
      ASSERT_EQ(got[p].f32()[i], expected[p].f32()[i])
          << what << ": parameter " << p << " element " << i;
    }
  }
}

int64_t StateElements(const Optimizer& optimizer) {
  int64_t elements = 0;
  for (size_t k = 0; k < optimizer.StateKeys().size(); ++k) {
    for (const Tensor& t : optimizer.State(static_cast<int>(k))) {
      if (t.defined()) elements += t.num_elements();
    }
  }
  return elements;
}

// Step `step` of the unsharded optimizer on `values` and of every replica on its copy, then the
// replicas' gather.
::testing::AssertionResult StepAll(CpuDevice& device, int step, Optimizer& whole,
                                   std::vector<Tensor>& values, std::vector<Tensor>& grads,
                                   std::vector<Replica>& replicas) {
  SetGrads(grads, step);
  if (absl::Status s = whole.Step(device, 0.1, values, grads); !s.ok()) {
    return ::testing::AssertionFailure() << "unsharded: " << s;
  }
  for (Replica& replica : replicas) {
    SetGrads(replica.grads, step);
    if (absl::Status s = replica.optimizer->Step(device, 0.1, replica.values, replica.grads);
        !s.ok()) {
      return ::testing::AssertionFailure()
             << "replica " << replica.optimizer->replica() << ": " << s;
    }
  }
  Gather(replicas);
  return ::testing::AssertionSuccess();
}

// `to` takes `from`'s values.
void CopyValues(const std::vector<Tensor>& from, std::vector<Tensor>& to) {
  for (size_t p = 0; p < from.size(); ++p) {
    for (int64_t i = 0; i < from[p].num_elements(); ++i) to[p].f32()[i] = from[p].f32()[i];
  }
}

class ShardedOptimizerTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ShardedOptimizerTest, PartsPutTogetherAreTheUnshardedUpdate) {
  CpuDevice device;
  std::vector<Tensor> values = Tensors(device, MemoryKind::kParameter);
  std::vector<Tensor> grads = Tensors(device, MemoryKind::kGradient);
  std::unique_ptr<Optimizer> whole = Make(GetParam());
  std::vector<Replica> replicas = MakeReplicas(device, GetParam(), 3);
  for (int step = 0; step < 4; ++step) {
    ASSERT_TRUE(StepAll(device, step, *whole, values, grads, replicas));
    for (const Replica& replica : replicas) {
      ExpectSame(replica.values, values, "step " + std::to_string(step));
    }
  }
  // The state is split: the parts add up to the whole, and the smallest parameter's state is
  // the last replica's alone.
  int64_t sharded = 0;
  for (const Replica& replica : replicas) sharded += StateElements(*replica.optimizer);
  EXPECT_EQ(sharded, StateElements(*whole));
  if (!whole->StateKeys().empty()) {
    EXPECT_FALSE(replicas[0].optimizer->State(0)[2].defined());
    EXPECT_TRUE(replicas[2].optimizer->State(0)[2].defined());
    EXPECT_LT(StateElements(*replicas[0].optimizer), StateElements(*whole) / 3 + 1);
  }
  EXPECT_EQ(replicas[1].optimizer->steps(), 4);
}

TEST_P(ShardedOptimizerTest, StateSavedInPartsResumesUnderAnotherReplicaCount) {
  CpuDevice device;
  std::vector<Tensor> values = Tensors(device, MemoryKind::kParameter);
  std::vector<Tensor> grads = Tensors(device, MemoryKind::kGradient);
  std::unique_ptr<Optimizer> whole = Make(GetParam());
  std::vector<Replica> three = MakeReplicas(device, GetParam(), 3);
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(StepAll(device, step, *whole, values, grads, three));
  }
  // Each replica exports its parts; put together by name as the checkpoint reader does.
  absl::flat_hash_map<std::string, NamedTensorData> assembled;
  for (int r = 0; r < 3; ++r) {
    absl::StatusOr<std::vector<ExportedState>> parts = ExportOptimizerState(
        device, *three[r].optimizer, kNames, three[r].values, ReplicaParts(three[r].values, r, 3));
    ASSERT_TRUE(parts.ok()) << parts.status();
    for (ExportedState& part : *parts) {
      ASSERT_TRUE(part.part.has_value());
      NamedTensorData& full = assembled[part.tensor.name];
      full.name = part.tensor.name;
      full.shape = part.whole_shape;
      int64_t elements = 1;
      for (int64_t d : full.shape) elements *= d;
      full.values.resize(elements);
      for (int64_t i = 0; i < part.part->size(); ++i) {
        full.values[part.part->begin + i] = part.tensor.values[i];
      }
    }
  }
  absl::flat_hash_map<std::string, const NamedTensorData*> by_name;
  for (const auto& [name, tensor] : assembled) by_name.emplace(name, &tensor);
  // Two replicas continue from it, and so does an unsharded optimizer.
  std::vector<Replica> two = MakeReplicas(device, GetParam(), 2);
  for (int r = 0; r < 2; ++r) {
    CopyValues(values, two[r].values);
    const absl::Status imported =
        ImportOptimizerState(device, *two[r].optimizer, 2, kNames, two[r].values, by_name,
                             ReplicaParts(two[r].values, r, 2));
    ASSERT_TRUE(imported.ok()) << imported;
  }
  std::vector<Tensor> resumed_values = Tensors(device, MemoryKind::kParameter);
  CopyValues(values, resumed_values);
  std::unique_ptr<Optimizer> resumed = Make(GetParam());
  ASSERT_TRUE(ImportOptimizerState(device, *resumed, 2, kNames, resumed_values, by_name).ok());
  for (int step = 2; step < 4; ++step) {
    ASSERT_TRUE(StepAll(device, step, *whole, values, grads, two));
    ASSERT_TRUE(resumed->Step(device, 0.1, resumed_values, grads).ok());
    ExpectSame(resumed_values, values, "unsharded, step " + std::to_string(step));
    for (const Replica& replica : two) {
      ExpectSame(replica.values, values, "two replicas, step " + std::to_string(step));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, ShardedOptimizerTest, ::testing::ValuesIn(kSpecs));

TEST(ShardedOptimizerStateTest, ImportRefusesAMisshapenWhole) {
  CpuDevice device;
  std::vector<Tensor> values = Tensors(device, MemoryKind::kParameter);
  ShardedOptimizer optimizer(Make(kSpecs[1]), 0, 2);
  absl::flat_hash_map<std::string, NamedTensorData> held;
  for (size_t p = 0; p < kNames.size(); ++p) {
    for (const char* key : {"exp_avg", "exp_avg_sq"}) {
      const std::string name = kNames[p] + ":" + key;
      // a.bias ([7]) saved with 8 elements.
      std::vector<int64_t> shape = values[p].shape().dims();
      if (p == 1) shape = {8};
      held[name] = {name, shape, std::vector<float>(p == 1 ? 8 : values[p].num_elements())};
    }
  }
  absl::flat_hash_map<std::string, const NamedTensorData*> by_name;
  for (const auto& [name, tensor] : held) by_name.emplace(name, &tensor);
  const absl::Status status = ImportOptimizerState(device, optimizer, 3, kNames, values, by_name,
                                                   ReplicaParts(values, 0, 2));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find("'a.bias:exp_avg' has shape [8]"), std::string::npos)
      << status;
  EXPECT_EQ(optimizer.steps(), 0);  // nothing changed
}

}  // namespace
}  // namespace gpipe
