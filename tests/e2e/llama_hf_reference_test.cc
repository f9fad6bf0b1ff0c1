// Against Hugging Face transformers' LlamaForCausalLM, computed independently of gpipe
// (tests/e2e/oracles/llama_hf_oracle.py wrote tests/e2e/testdata/llama_hf): the same initial
// weights, written by transformers under their Hugging Face names, the same tokens, a few SGD and
// AdamW steps with warm-up, cosine decay and gradient clipping. gpipe, loading those weights with
// --init-from, must end where transformers ended at K = 1, 2 and 4 stages (each step's loss,
// gradient norm and learning rate on the way included), and its layers, built in this process,
// must give transformers' logits and loss on the first mini-batch.
//
// Tolerance, everywhere: max |gpipe - transformers| <= 1e-5 * max |transformers| over each tensor
// (each parameter, the first mini-batch's logits), and |gpipe - transformers| <= 1e-5 *
// |transformers| for each scalar (every step's loss and gradient norm); the learning rates, which
// are a formula of doubles on both sides, within 1e-12.
//
// The embed_head plans train the same embedding and head without the decoder (PyTorch's modules,
// layers gpipe has had all along): they pin this harness (the first mini-batch's token ids, the
// sample order, loss reduction, lr schedule, clipping, optimizer hyperparameters) to the reference
// apart from the Llama layers, so that a failure of the Llama cases is the Llama layers'.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "layers/layer.h"
#include "layers/registry.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/data/batch_sampler.h"
#include "runtime/data/open_dataset.h"
#include "runtime/device/cpu/cpu_device.h"
#include "runtime/plan/plan_loader.h"
#include "tests/support/process_runner.h"
#include "tests/support/scratch_dir.h"

namespace gpipe {
namespace {

constexpr char kDir[] = "tests/e2e/testdata/llama_hf";
constexpr double kTolerance = 1e-5;
constexpr double kLrTolerance = 1e-12;

using Weights = std::map<std::string, NamedTensorData>;

std::string Fixture(const std::string& name) {
  return testing::SourcePath(absl::StrCat(kDir, "/", name));
}

SafetensorsContents ReadContents(const std::string& path) {
  absl::StatusOr<SafetensorsContents> read = ReadSafetensorsWithMetadata(path);
  EXPECT_TRUE(read.ok()) << read.status();
  return read.ok() ? *std::move(read) : SafetensorsContents();
}

Weights ByName(std::vector<NamedTensorData> tensors) {
  Weights weights;
  for (NamedTensorData& t : tensors) weights[t.name] = std::move(t);
  return weights;
}

// A comma-separated list of numbers from the reference's metadata.
std::vector<double> Numbers(const SafetensorsContents& contents, const std::string& key) {
  std::vector<double> numbers;
  const auto it = contents.metadata.find(key);
  EXPECT_NE(it, contents.metadata.end()) << "no metadata \"" << key << "\"";
  if (it == contents.metadata.end()) return numbers;
  for (absl::string_view field : absl::StrSplit(it->second, ',')) {
    double value = 0;
    EXPECT_TRUE(absl::SimpleAtod(field, &value)) << key << ": " << field;
    numbers.push_back(value);
  }
  return numbers;
}

// max |got - want| <= tolerance * max |want| over the tensor.
void ExpectTensorClose(const std::vector<float>& got, const std::vector<float>& want,
                       double tolerance, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double max_diff = 0, max_want = 0;
  size_t worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double diff = std::abs(double{got[i]} - double{want[i]});
    if (diff > max_diff) {
      max_diff = diff;
      worst = i;
    }
    max_want = std::max(max_want, std::abs(double{want[i]}));
  }
  // The measured gap, relative to the tensor's largest value, in the test's XML/JSON output.
  ::testing::Test::RecordProperty(what, absl::StrCat(max_diff / std::max(max_want, 1e-30)));
  EXPECT_LE(max_diff, tolerance * max_want)
      << what << ": max |gpipe - reference| = " << max_diff << " at element " << worst << " (gpipe "
      << got[worst] << ", reference " << want[worst] << "), max |reference| = " << max_want;
}

// Each got[i] within tolerance * |want[i]|.
void ExpectScalarsClose(const std::vector<double>& got, const std::vector<double>& want,
                        double tolerance, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tolerance * std::abs(want[i])) << what << " of step " << i;
  }
}

// The value of `field` in every training record of a metrics file.
std::vector<double> MetricsField(const std::string& path, const std::string& field) {
  std::ifstream in(path);
  std::vector<double> values;
  const std::string key = absl::StrCat("\"", field, "\":");
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find(key);
    if (at == std::string::npos || line.find("\"eval\"") != std::string::npos) continue;
    values.push_back(std::stod(line.substr(at + key.size())));
  }
  return values;
}

// The plan's layers built in this process on the CPU backend, the initial weights loaded by name,
// the first mini-batch gathered by gpipe's own data path (the token file and the batch sampler):
// the ids must be the reference's, and the logits and their mean cross-entropy the reference's.
void ExpectFirstMiniBatchMatches(const std::string& plan_name, const std::string& init,
                                 const std::string& first_step_name) {
  absl::StatusOr<LoadedPlan> loaded = LoadPlanFile(Fixture(plan_name), {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const pb::Plan& plan = loaded->plan;
  const SafetensorsContents first_step = ReadContents(Fixture(first_step_name));
  ASSERT_EQ(first_step.tensors.size(), 1u);
  const NamedTensorData& want_logits = first_step.tensors[0];
  ASSERT_EQ(want_logits.name, "logits");
  ASSERT_EQ(want_logits.shape.size(), 3u);
  const int64_t batch = want_logits.shape[0], seq_len = want_logits.shape[1],
                vocab = want_logits.shape[2];
  ASSERT_EQ(batch, plan.training().global_batch());

  // The first mini-batch, as the first and last stages gather it.
  pb::Data data = plan.data();
  data.mutable_tokens()->set_path(absl::StrCat(loaded->directory, "/", data.tokens().path()));
  DataRequirements requirements;
  requirements.input_shape = Shape{seq_len};
  requirements.input_dtype = DType::kI64;
  requirements.target_shape = Shape{seq_len};
  requirements.target_dtype = DType::kI64;
  requirements.num_classes = vocab;
  requirements.seed = plan.training().seed();
  absl::StatusOr<std::unique_ptr<Dataset>> dataset = OpenDataset(data, requirements);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  const std::vector<int64_t> samples =
      BatchSampler((*dataset)->size(), batch, data.shuffle(), plan.training().seed())
          .IndicesForStep(0);
  CpuDevice device;
  absl::StatusOr<Tensor> ids =
      Tensor::Empty(device, Shape{batch, seq_len}, DType::kI64, MemoryKind::kData);
  absl::StatusOr<Tensor> targets =
      Tensor::Empty(device, Shape{batch, seq_len}, DType::kI64, MemoryKind::kData);
  ASSERT_TRUE(ids.ok() && targets.ok());
  ASSERT_TRUE((*dataset)->GatherInputs(samples, *ids).ok());
  ASSERT_TRUE((*dataset)->GatherTargets(samples, *targets).ok());
  const std::vector<double> want_ids = Numbers(first_step, "token_ids");
  ASSERT_EQ(static_cast<int64_t>(want_ids.size()), batch * seq_len);
  for (int64_t i = 0; i < batch * seq_len; ++i) {
    ASSERT_EQ(ids->data<int64_t>()[i], static_cast<int64_t>(want_ids[i])) << "token " << i;
  }

  // The forward, layer by layer, with the initial weights.
  const Weights initial = ByName(ReadContents(init).tensors);
  const LayerRegistry registry = LayerRegistry::WithBuiltins();
  Shape shape{seq_len};
  Tensor activation = *std::move(ids);
  size_t parameters_used = 0;
  for (int l = 0; l < plan.model().layers_size(); ++l) {
    absl::StatusOr<std::unique_ptr<Layer>> layer = registry.Create(plan.model().layers(l), shape);
    ASSERT_TRUE(layer.ok()) << plan.model().layers(l).name() << ": " << layer.status();
    std::vector<Tensor> params;
    for (const ParamSpec& spec : (*layer)->parameter_specs()) {
      const std::string name = absl::StrCat((*layer)->name(), ".", spec.name);
      ASSERT_TRUE(initial.contains(name)) << name << " is not a parameter of the reference";
      const NamedTensorData& value = initial.at(name);
      ASSERT_TRUE(Shape(value.shape) == spec.shape)
          << name << ": reference " << Shape(value.shape).ToString() << ", gpipe "
          << spec.shape.ToString();
      absl::StatusOr<Tensor> param =
          Tensor::Empty(device, spec.shape, DType::kF32, MemoryKind::kParameter);
      ASSERT_TRUE(param.ok());
      std::copy(value.values.begin(), value.values.end(), param->f32());
      params.push_back(*std::move(param));
      ++parameters_used;
    }
    LayerContext ctx{.device = device,
                     .seed = plan.training().seed(),
                     .layer_index = l,
                     .need_input_grad = l > 0};
    SavedTensors saved;
    absl::StatusOr<Tensor> output = (*layer)->Forward(ctx, params, activation, saved);
    ASSERT_TRUE(output.ok()) << (*layer)->name() << ": " << output.status();
    activation = *std::move(output);
    shape = (*layer)->output_shape();
  }
  EXPECT_EQ(parameters_used, initial.size()) << "every parameter of the reference has its layer";
  ASSERT_EQ(activation.dtype(), DType::kF32);
  ASSERT_TRUE(activation.shape() == (Shape{batch, seq_len, vocab}))
      << activation.shape().ToString();
  const std::vector<float> logits(activation.f32(), activation.f32() + activation.num_elements());
  ExpectTensorClose(logits, want_logits.values, kTolerance, "logits");

  // The mean cross-entropy over every sample and position, in double from gpipe's logits.
  double loss = 0;
  for (int64_t row = 0; row < batch * seq_len; ++row) {
    const float* z = logits.data() + row * vocab;
    const double top = *std::max_element(z, z + vocab);
    double sum = 0;
    for (int64_t c = 0; c < vocab; ++c) sum += std::exp(z[c] - top);
    loss += top + std::log(sum) - z[targets->data<int64_t>()[row]];
  }
  loss /= static_cast<double>(batch * seq_len);
  ExpectScalarsClose({loss}, Numbers(first_step, "loss"), kTolerance, "first mini-batch loss");
}

// One partition of the run: K stages, M micro-batches, a schedule and re-materialization.
struct Partition {
  int stages;
  int micro_batches;
  std::string schedule;
  std::string remat;
  std::string boundaries;  // pipeline.boundaries, as text
};

std::string PipelineOverride(const Partition& p) {
  return absl::StrCat("pipeline { stages: ", p.stages, " micro_batches: ", p.micro_batches,
                      " schedule: ", p.schedule, " remat: ", p.remat, " boundaries: [",
                      p.boundaries, "] }");
}

// The Llama plan's 7 layers: K = 1; K = 2 with two blocks a stage; K = 4 with one block a stage
// (the embedding on the first, the norm and head on the last), every micro-batch re-materialized.
const std::vector<Partition>& LlamaPartitions() {
  static const std::vector<Partition> partitions = {
      {1, 1, "GPIPE", "EXCEPT_LAST", ""},
      {2, 2, "ONE_F_ONE_B", "EXCEPT_LAST", R"("model.layers.2")"},
      {4, 4, "GPIPE", "ALWAYS", R"("model.layers.1", "model.layers.2", "model.layers.3")"},
  };
  return partitions;
}

class LlamaHfReferenceTest : public ::testing::Test {
 protected:
  std::string Scratch(const std::string& name) const { return scratch_.path() + "/" + name; }

  // Trains `plan` (a fixture) from `init` under every partition and compares the exported weights
  // and each step's loss, gradient norm and learning rate with `expected` (a fixture).
  void ExpectTrainingMatches(const std::string& plan, const std::string& init,
                             const std::string& expected,
                             const std::vector<Partition>& partitions) {
    const SafetensorsContents reference = ReadContents(Fixture(expected));
    const Weights want = ByName(reference.tensors);
    const Weights initial = ByName(ReadContents(init).tensors);
    ASSERT_FALSE(want.empty());
    ASSERT_EQ(initial.size(), want.size());
    const std::vector<double> want_loss = Numbers(reference, "loss");
    const std::vector<double> want_norm = Numbers(reference, "grad_norm");
    const std::vector<double> want_lr = Numbers(reference, "lr");
    for (const Partition& p : partitions) {
      SCOPED_TRACE(absl::StrCat(plan, " at ", p.stages, " stages, ", p.micro_batches,
                                " micro-batches, ", p.schedule, ", remat ", p.remat));
      const std::string run_name = absl::StrCat(plan, "_", p.stages);
      const std::string exported = Scratch(run_name + ".safetensors");
      const std::string metrics = Scratch(run_name + ".jsonl");
      std::vector<std::string> argv = testing::MpirunPrefix(p.stages);
      argv.insert(argv.end(), {testing::BinPath("gpipe-worker"), "--plan", Fixture(plan),
                               "--init-from", init, "--export", exported, "--metrics-out", metrics,
                               "--override", PipelineOverride(p)});
      const testing::ProcessResult run = testing::RunProcess(argv, 180);
      ASSERT_EQ(run.exit_code, 0) << run.output;

      const Weights got = ByName(ReadContents(exported).tensors);
      ASSERT_EQ(got.size(), want.size());
      for (const auto& [name, reference_tensor] : want) {
        ASSERT_TRUE(got.contains(name)) << name << " is not in gpipe's export";
        ASSERT_EQ(got.at(name).shape, reference_tensor.shape) << name;
        ExpectTensorClose(got.at(name).values, reference_tensor.values, kTolerance, name);
        // Training moved every tensor far beyond the tolerance, so the match is not trivial.
        double moved = 0, scale = 0;
        for (size_t i = 0; i < reference_tensor.values.size(); ++i) {
          moved = std::max(
              moved, std::abs(double{reference_tensor.values[i]} - initial.at(name).values[i]));
          scale = std::max(scale, std::abs(double{reference_tensor.values[i]}));
        }
        EXPECT_GT(moved, 100 * kTolerance * scale) << name;
      }
      // Step 0's loss is the first mini-batch's under the initial weights; later ones follow the
      // updates.
      ExpectScalarsClose(MetricsField(metrics, "loss"), want_loss, kTolerance, "loss");
      ExpectScalarsClose(MetricsField(metrics, "grad_norm"), want_norm, kTolerance, "grad_norm");
      ExpectScalarsClose(MetricsField(metrics, "lr"), want_lr, kLrTolerance, "lr");
    }
  }

  const testing::ScratchDir scratch_;  // this test's own, removed after it
};

TEST_F(LlamaHfReferenceTest, FirstMiniBatchLogitsAndLossMatchTransformers) {
  ExpectFirstMiniBatchMatches("llama_sgd.pbtxt", Fixture("init.safetensors"),
                              "llama_first_step.safetensors");
}

TEST_F(LlamaHfReferenceTest, SgdWithWarmupCosineAndClippingMatchesTransformers) {
  ExpectTrainingMatches("llama_sgd.pbtxt", Fixture("init.safetensors"),
                        "llama_sgd_expected.safetensors", LlamaPartitions());
}

TEST_F(LlamaHfReferenceTest, AdamWWithWarmupCosineAndClippingMatchesTransformers) {
  ExpectTrainingMatches("llama_adamw.pbtxt", Fixture("init.safetensors"),
                        "llama_adamw_expected.safetensors", LlamaPartitions());
}

// The harness without the Llama layers: embedding and head only, trained by PyTorch from the
// same initial embedding and head with the same data, schedule, clipping and optimizers.
TEST_F(LlamaHfReferenceTest, EmbeddingAndHeadAloneMatchPyTorch) {
  const Weights initial = ByName(ReadContents(Fixture("init.safetensors")).tensors);
  std::vector<NamedTensorData> subset;
  for (const char* name : {"model.embed_tokens.weight", "lm_head.weight"}) {
    ASSERT_TRUE(initial.contains(name)) << name;
    subset.push_back(initial.at(name));
  }
  const std::string init = Scratch("embed_head_init.safetensors");
  ASSERT_TRUE(WriteSafetensors(init, subset, {}).ok());
  ExpectFirstMiniBatchMatches("embed_head_sgd.pbtxt", init, "embed_head_first_step.safetensors");
  const std::vector<Partition> partitions = {{1, 1, "GPIPE", "EXCEPT_LAST", ""},
                                             {2, 2, "ONE_F_ONE_B", "ALWAYS", R"("lm_head")"}};
  for (const char* scenario : {"sgd", "adamw"}) {
    SCOPED_TRACE(scenario);
    ExpectTrainingMatches(absl::StrCat("embed_head_", scenario, ".pbtxt"), init,
                          absl::StrCat("embed_head_", scenario, "_expected.safetensors"),
                          partitions);
  }
}

}  // namespace
}  // namespace gpipe
