// The table of malformed plans: each case edits lines of one good plan and pins the exact
// messages, including file:line:col. A case's messages must be all the errors reported, in order.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "layers/registry.h"
#include "runtime/plan/plan_analysis.h"
#include "runtime/plan/plan_loader.h"

namespace gpipe {
namespace {

const std::string kTestdata = GPIPE_PLAN_TESTDATA;

// The good plan every case starts from. Columns used below: line 3 name:12; line 8 stages:12,
// micro_batches:22; line 9 global_batch:12, steps:28, optimizer:37, sgd:49, lr:55.
const std::vector<std::string> kGoodPlan = {
    /* 1 */ "model {",
    /* 2 */ "  input { shape: [4] }",
    /* 3 */ "  layers { name: \"fc1\" linear { out_features: 8 } }",
    /* 4 */ "  layers { name: \"act\" relu {} }",
    /* 5 */ "  layers { name: \"fc2\" linear { out_features: 3 } }",
    /* 6 */ "  loss { softmax_cross_entropy {} }",
    /* 7 */ "}",
    /* 8 */ "pipeline { stages: 2 micro_batches: 2 }",
    /* 9 */ "training { global_batch: 8 steps: 1 optimizer { sgd { lr: 0.1 } } }",
    /* 10 */ "data { synthetic {} }",
};

struct MalformedCase {
  std::string name;
  std::vector<std::pair<int, std::string>> edits;  // 1-based line -> new text ("" blanks it)
  std::vector<std::string> expected;               // one per reported error, in order
};

std::string Render(const MalformedCase& c) {
  std::vector<std::string> lines = kGoodPlan;
  for (const auto& [line, text] : c.edits) {
    if (line > static_cast<int>(lines.size())) lines.resize(line);
    lines[line - 1] = text;
  }
  std::string out;
  for (const auto& line : lines) out += line + "\n";
  return out;
}

std::vector<MalformedCase> Cases() {
  const std::string sgd = " optimizer { sgd { lr: 0.1 } } }";
  return {
      {"MissingModel",
       {{1, ""}, {2, ""}, {3, ""}, {4, ""}, {5, ""}, {6, ""}, {7, ""}},
       {"bad.pbtxt: model: is missing; add model { input"}},
      {"MissingInput", {{2, ""}}, {"bad.pbtxt:1:1: model.input: is missing; add input { shape:"}},
      {"EmptyInputShape",
       {{2, "  input { shape: [] }"}},
       {"bad.pbtxt:2:11: model.input.shape: is empty; give the per-sample input shape"}},
      {"NonPositiveInputDimensions",
       {{2, "  input { shape: [4, 0, -2] }"}},
       {"bad.pbtxt:2:11: model.input.shape[1]: is 0; every dimension must be >= 1",
        "bad.pbtxt:2:11: model.input.shape[2]: is -2; every dimension must be >= 1"}},
      {"NoLayers",
       {{3, ""}, {4, ""}, {5, ""}},
       {"bad.pbtxt:1:1: model.layers: the model has no layers; add at least one"}},
      {"EmptyLayerName",
       {{4, "  layers { relu {} }"}},
       {"bad.pbtxt:4:3: model.layers[1].name: is empty; give every layer a unique name"}},
      {"DuplicateLayerNameNamesBothLines",
       {{5, "  layers { name: \"fc1\" linear { out_features: 3 } }"}},
       {"bad.pbtxt:5:12: model.layers[2].name: 'fc1' is already the name of model.layers[0] at "
        "bad.pbtxt:3:12; layer names must be unique"}},
      {"LayerWithoutKind",
       {{4, "  layers { name: \"act\" }"}},
       {"bad.pbtxt:4:3: model.layers[1]: layer 'act' has no kind; set one of linear, relu, "
        "gelu, tanh, layer_norm, dropout"}},
      {"UnnamedLayerWithoutKind",
       {{4, "  layers {}"}},
       {"bad.pbtxt:4:3: model.layers[1].name: is empty; give every layer a unique name",
        "bad.pbtxt:4:3: model.layers[1]: the unnamed layer has no kind; set one of linear"}},
      {"InputTooLargeToCount",
       {{2, "  input { shape: [4000000000, 4000000000, 4] }"}},
       {"bad.pbtxt:2:11: model.input.shape: [4000000000, 4000000000, 4] has too many elements "
        "per sample to count in 64 bits; check the dimensions"}},
      {"LayerParametersTooLargeToCount",
       {{3, "  layers { name: \"fc1\" linear { out_features: 4000000000000000000 } }"}},
       {"bad.pbtxt:3:3: model.layers[0]: layer 'fc1' (linear, input [4]): its parameter "
        "'weight' [4000000000000000000, 4] has too many elements to count in 64 bits; check its "
        "configuration"}},
      {"LayerConfigRejectedByItsFactory",
       {{3, "  layers { name: \"fc1\" linear { bias: false } }"}},
       {"bad.pbtxt:3:3: model.layers[0]: layer 'fc1' (linear, input [4]): linear.out_features "
        "must be set and >= 1"}},
      {"SkipFromNamingNoLayer",
       {{4, "  layers { name: \"act\" skip_add { from: \"nope\" } }"}},
       {"bad.pbtxt:4:35: model.layers[1].skip_add.from: layer 'act' (skip_add, input [8]): from "
        "'nope' names no layer of the model"}},
      {"SkipFromNamingALaterLayer",
       {{4, "  layers { name: \"act\" skip_add { from: \"fc2\" } }"}},
       {"bad.pbtxt:4:35: model.layers[1].skip_add.from: layer 'act' (skip_add, input [8]): from "
        "'fc2' is not an earlier layer; a skip connection reads an earlier layer's output"}},
      {"SkipAddOfAnotherShape",
       {{4, "  layers { name: \"act\" linear { out_features: 5 } }"},
        {5, "  layers { name: \"fc2\" skip_add { from: \"fc1\" } }"}},
       {"bad.pbtxt:5:3: model.layers[2]: layer 'fc2' (skip_add, input [5]): adds the output of "
        "'fc1' [8] to its input [5]; the shapes must be equal (skip_concat joins different "
        "ones)"}},
      {"SkipConcatAxisOutsideTheShape",
       {{4, "  layers { name: \"act\" skip_concat { from: \"fc1\" axis: 2 } }"}},
       {"bad.pbtxt:4:3: model.layers[1]: layer 'act' (skip_concat, input [8]): axis 2 is outside "
        "its input [8]; give 0..0 or -1..-1"}},
      {"DropoutProbabilityRejectedWithItsInputShape",
       {{4, "  layers { name: \"act\" dropout { p: 1.5 } }"}},
       {"bad.pbtxt:4:3: model.layers[1]: layer 'act' (dropout, input [8]): dropout.p must be "
        "in [0, 1), got 1.5"}},
      {"LlamaKeyValueHeadsNotDividingQueryHeads",
       {{2, "  input { shape: [4, 8] }"},
        {4,
         "  layers { name: \"model.layers.0\" llama_block { num_heads: 4 num_kv_heads: 3 "
         "intermediate_size: 16 } }"}},
       {"bad.pbtxt:4:3: model.layers[1]: layer 'model.layers.0' (llama_block, input [4, 8]): "
        "llama_block.num_kv_heads must be >= 1 and divide num_heads 4, got 3"}},
      {"LlamaOddHeadDimForRotaryEmbedding",
       {{2, "  input { shape: [4, 8] }"},
        {4,
         "  layers { name: \"model.layers.0\" llama_block { num_heads: 8 "
         "intermediate_size: 16 } }"}},
       {"bad.pbtxt:4:3: model.layers[1]: layer 'model.layers.0' (llama_block, input [4, 8]): "
        "llama_block: rotary position embedding needs an even head_dim, got d_model 8 / "
        "num_heads 8 = 1"}},
      {"MissingLoss",
       {{6, ""}},
       {"bad.pbtxt:1:1: model.loss: is missing; add loss { softmax_cross_entropy {} } or loss { "
        "mse {} }"}},
      {"LossWithoutKind",
       {{6, "  loss {}"}},
       {"bad.pbtxt:6:3: model.loss: has no kind; set softmax_cross_entropy {} or mse {}"}},
      {"SoftmaxCrossEntropyNeedsTwoClasses",
       {{5, "  layers { name: \"fc2\" linear { out_features: 1 } }"}},
       {"bad.pbtxt:6:3: model.loss: softmax_cross_entropy needs the model output to be "
        "[num_classes] or [positions..., num_classes] with num_classes >= 2, but the last "
        "layer 'fc2' outputs [1]"}},
      {"ZeroStages",
       {{8, "pipeline { stages: 0 micro_batches: 2 }"}},
       {"bad.pbtxt:8:12: pipeline.stages: is 0; it must be >= 1 (one process per stage)"}},
      {"MoreStagesThanLayers",
       {{8, "pipeline { stages: 4 micro_batches: 2 }"}},
       {"bad.pbtxt:8:12: pipeline.stages: 4 stages need at least 4 layers but the model has 3; "
        "set pipeline.stages to at most 3"}},
      {"ZeroMicroBatches",
       {{8, "pipeline { stages: 2 micro_batches: 0 }"}},
       {"bad.pbtxt:8:22: pipeline.micro_batches: is 0; it must be >= 1"}},
      {"GlobalBatchNotDivisibleByMicroBatches",
       {{8, "pipeline { stages: 2 micro_batches: 5 }"},
        {9, "training { global_batch: 64 steps: 1" + sgd}},
       {"bad.pbtxt:8:22: pipeline.micro_batches: global_batch 64 is not divisible by "
        "micro_batches 5; choose a divisor of 64 such as 1, 2, 4, 8, 16 (or change "
        "training.global_batch at bad.pbtxt:9:12)"}},
      {"GlobalBatchSmallerThanMicroBatches",
       {{8, "pipeline { stages: 2 micro_batches: 12 }"}},
       {"bad.pbtxt:8:22: pipeline.micro_batches: global_batch 8 is not divisible by "
        "micro_batches 12; choose a divisor of 8 such as 1, 2, 4, 8"}},
      {"ZeroDataParallelReplicas",
       {{8, "pipeline { stages: 2 micro_batches: 2 data_parallel: 0 }"}},
       {"bad.pbtxt:8:39: pipeline.data_parallel: is 0; it must be >= 1 (replicas of the whole "
        "pipeline)"}},
      {"GlobalBatchNotDivisibleByReplicasTimesMicroBatches",
       {{8, "pipeline { stages: 2 micro_batches: 4 data_parallel: 3 }"},
        {9, "training { global_batch: 30 steps: 1" + sgd}},
       {"bad.pbtxt:9:12: training.global_batch: is 30, not divisible by data_parallel 3 x "
        "micro_batches 4 = 12 (each replica splits its global_batch / data_parallel samples into "
        "micro_batches micro-batches); use a multiple of 12, or micro_batches dividing 10 such as "
        "1, 2, 5, 10"}},
      {"ZeroGradientBucketBytes",
       {{11, "runtime { gradient_bucket_bytes: 0 }"}},
       {"bad.pbtxt:11:11: runtime.gradient_bucket_bytes: is 0; it must be from 1 to "
        "1152921504606846976 (1 EiB)"}},
      {"NcclTransportOffTheGpu",
       {{11, "runtime { transport: NCCL }"}},
       {"bad.pbtxt:11:11: runtime.transport: is NCCL, which moves GPU tensors, but runtime.device "
        "is CPU; use transport: MPI (the default) or device: CUDA"}},
      {"ZeroGlobalBatch",
       {{9, "training { global_batch: 0 steps: 1" + sgd}},
       {"bad.pbtxt:9:12: training.global_batch: is 0; it must be >= 1"}},
      {"MissingGlobalBatch",
       {{9, "training { steps: 1" + sgd}},
       {"bad.pbtxt:9:1: training.global_batch: is missing; set the samples per optimizer step"}},
      {"ZeroSteps",
       {{9, "training { global_batch: 8 steps: 0" + sgd}},
       {"bad.pbtxt:9:28: training.steps: is 0; it must be >= 1"}},
      {"MissingTraining", {{9, ""}}, {"bad.pbtxt: training: is missing; add e.g. training {"}},
      {"MissingOptimizer",
       {{9, "training { global_batch: 8 steps: 1 }"}},
       {"bad.pbtxt:9:1: training.optimizer: is missing; add e.g. optimizer { sgd { lr: 0.1 } }"}},
      {"OptimizerWithoutKind",
       {{9, "training { global_batch: 8 steps: 1 optimizer {} }"}},
       {"bad.pbtxt:9:37: training.optimizer: has no kind; set one of sgd"}},
      {"ZeroLearningRate",
       {{9, "training { global_batch: 8 steps: 1 optimizer { sgd { lr: 0 } } }"}},
       {"bad.pbtxt:9:55: training.optimizer.sgd.lr: is 0; the learning rate must be > 0"}},
      {"MissingSgdLearningRate",
       {{9, "training { global_batch: 8 steps: 1 optimizer { sgd { momentum: 0.9 } } }"}},
       {"bad.pbtxt:9:49: training.optimizer.sgd.lr: is missing; set the learning rate (> 0)"}},
      {"NesterovWithoutMomentum",
       {{9, "training { global_batch: 8 steps: 1 optimizer { sgd { lr: 0.1 nesterov: true } } }"}},
       {"bad.pbtxt:9:63: training.optimizer.sgd.nesterov: Nesterov momentum needs momentum > 0 "
        "and dampening 0, but momentum is 0 and dampening 0"}},
      {"AdamBetaOfOne",
       {{9, "training { global_batch: 8 steps: 1 optimizer { adam { beta2: 1 } } }"}},
       {"bad.pbtxt:9:56: training.optimizer.adam.beta2: is 1; it must be in [0, 1)"}},
      {"AdamWNegativeLearningRate",
       {{9, "training { global_batch: 8 steps: 1 optimizer { adamw { lr: -0.5 } } }"}},
       {"bad.pbtxt:9:57: training.optimizer.adamw.lr: is -0.5; the learning rate must be > 0"}},
      {"MissingData", {{10, ""}}, {"bad.pbtxt: data: is missing; add data { synthetic {} }"}},
      {"DataWithoutSource",
       {{10, "data { shuffle: true }"}},
       {"bad.pbtxt:10:1: data: has no source; set synthetic {}, npy { inputs: ... targets: ... "
        "}, idx { train_images: ... train_labels: ... }, text { paths: ... } or tokens { path: ... "
        "}"}},
      {"SyntheticWithoutSamples",
       {{10, "data { synthetic { num_samples: 0 } }"}},
       {"bad.pbtxt:10:20: data.synthetic.num_samples: is 0; it must be >= 1"}},
      {"NpyInputsFileMissing",
       {{10, "data { npy { inputs: \"nope/x.npy\" targets: \"npy_plan/data/targets.npy\" } }"}},
       {"bad.pbtxt:10:14: data.npy.inputs: file $TESTDATA/nope/x.npy does not exist (relative "
        "paths resolve against the plan's directory $TESTDATA); fix the path or create the "
        "file"}},
      {"NpyTargetsNotGiven",
       {{10, "data { npy { inputs: \"npy_plan/data/inputs.npy\" } }"}},
       {"bad.pbtxt:10:8: data.npy.targets: is missing; give the path of a .npy array of "
        "targets"}},
      {"NpyInputsIsADirectory",
       {{10, "data { npy { inputs: \"npy_plan/data\" targets: \"npy_plan/data/targets.npy\" } }"}},
       {"bad.pbtxt:10:14: data.npy.inputs: $TESTDATA/npy_plan/data is a directory"}},
      {"TieOfAnUnknownParameter",
       {{7, "  ties { parameters: [\"fc1.weight\", \"fc9.weight\"] } }"}},
       {"bad.pbtxt:7:10: model.ties[0].parameters[1]: 'fc9.weight' is not a parameter of the "
        "model; names are <layer>.<parameter>, e.g. 'embed.weight'"}},
      {"TieOfDifferentShapes",
       {{7, "  ties { parameters: [\"fc1.weight\", \"fc2.weight\"] } }"}},
       {"bad.pbtxt:7:10: model.ties[0].parameters[1]: 'fc2.weight' has shape [3, 8] but "
        "'fc1.weight' has [8, 4]; tied parameters must have the same shape"}},
      {"TieOfOneParameter",
       {{7, "  ties { parameters: [\"fc1.weight\"] } }"}},
       {"bad.pbtxt:7:10: model.ties[0].parameters: needs at least two parameter names"}},
      {"ParameterTiedTwice",
       {{7,
         "  ties { parameters: [\"fc1.bias\", \"fc1.bias\"] } ties { parameters: "
         "[\"fc2.bias\", \"fc1.bias\"] } }"}},
       {"bad.pbtxt:7:10: model.ties[0].parameters[1]: 'fc1.bias' appears twice in this tie",
        "bad.pbtxt:7:56: model.ties[1].parameters[1]: 'fc1.bias' is already tied in "
        "model.ties[0]; put all of its partners in one tie"}},
      {"EvaluationWithoutAHeldOutSplit",
       {{9, "training { global_batch: 8 steps: 1 eval_every: 5" + sgd}},
       {"bad.pbtxt:9:37: training.eval_every: is 5 but the data has no held-out split to "
        "evaluate: set data.synthetic.eval_samples"}},
      {"NegativeEvalEveryAndEvalSamples",
       {{9, "training { global_batch: 8 steps: 1 eval_every: -1 eval_samples: -2" + sgd}},
       {"bad.pbtxt:9:37: training.eval_every: is -1; it must be >= 0 (0: never)",
        "bad.pbtxt:9:52: training.eval_samples: is -2; it must be >= 0 (0: all)"}},
      {"WarmUpLongerThanTheRun",
       {{9, "training { global_batch: 8 steps: 4 lr_schedule { warmup_steps: 5 }" + sgd}},
       {"bad.pbtxt:9:51: training.lr_schedule.warmup_steps: is 5, longer than the run "
        "(training.steps 4 at bad.pbtxt:9:28); the peak would never be reached: use at most 4"}},
      {"WarmUpLongerThanTheDecay",
       {{9,
         "training { global_batch: 8 steps: 9 lr_schedule { warmup_steps: 5 decay_steps: 3 "
         "decay: LINEAR }" +
             sgd}},
       {"bad.pbtxt:9:51: training.lr_schedule.warmup_steps: is 5, longer than decay_steps 3 "
        "(at bad.pbtxt:9:67); the decay ends at update decay_steps, so it must be >= "
        "warmup_steps"}},
      {"NegativeScheduleCountsARatioOutsideTheUnitIntervalAndANegativeClip",
       {{9,
         "training { global_batch: 8 steps: 9 lr_schedule { warmup_steps: -1 decay_steps: -2 "
         "min_lr_ratio: 1.5 } clip_grad_norm: -1" +
             sgd}},
       {"bad.pbtxt:9:51: training.lr_schedule.warmup_steps: is -1; it must be >= 0 (0: no "
        "warm-up)",
        "bad.pbtxt:9:68: training.lr_schedule.decay_steps: is -2; it must be >= 0 (0: "
        "training.steps)",
        "bad.pbtxt:9:84: training.lr_schedule.min_lr_ratio: is 1.5; it must be in [0, 1] (the "
        "final learning rate as a fraction of the optimizer's lr)",
        "bad.pbtxt:9:104: training.clip_grad_norm: is -1; it must be > 0 (the largest gradient "
        "norm kept; 0: no clipping)"}},
      {"SyntheticNegativeEvalSamples",
       {{10, "data { synthetic { eval_samples: -1 } }"}},
       {"bad.pbtxt:10:20: data.synthetic.eval_samples: is -1; it must be >= 0 (the held-out "
        "samples; 0: none)"}},
      {"NpyEvalTargetsWithoutEvalInputs",
       {{10,
         "data { npy { inputs: \"npy_plan/data/inputs.npy\" targets: "
         "\"npy_plan/data/targets.npy\" eval_targets: \"npy_plan/data/targets.npy\" } }"}},
       {"bad.pbtxt:10:8: data.npy.eval_inputs: is missing but data.npy.eval_targets is set (at "
        "bad.pbtxt:10:86); give both held-out files or neither"}},
      {"NpyEvalInputsFileMissing",
       {{10,
         "data { npy { inputs: \"npy_plan/data/inputs.npy\" targets: "
         "\"npy_plan/data/targets.npy\" eval_inputs: \"nope.npy\" eval_targets: "
         "\"npy_plan/data/targets.npy\" } }"}},
       {"bad.pbtxt:10:86: data.npy.eval_inputs: file $TESTDATA/nope.npy does not exist"}},
      {"IdxFilesMissingAndUnpaired",
       {{10,
         "data { idx { train_images: \"nope-images.gz\" test_labels: "
         "\"npy_plan/data/targets.npy\" std: 0 } }"}},
       {"bad.pbtxt:10:14: data.idx.train_images: file $TESTDATA/nope-images.gz does not exist "
        "(relative paths resolve against the plan's directory $TESTDATA)",
        "bad.pbtxt:10:8: data.idx.train_labels: is missing; give the path of an IDX file of "
        "uint8 labels [N]",
        "bad.pbtxt:10:8: data.idx.test_images: is missing but data.idx.test_labels is set (at "
        "bad.pbtxt:10:45)",
        "bad.pbtxt:10:86: data.idx.std: is 0; it must be > 0 (pixels are divided by it)"}},
      {"TextWithoutPaths",
       {{2, "  input { shape: [4] type: INT64 }"},
        {3, "  layers { name: \"fc1\" embedding { num_embeddings: 256 embedding_dim: 8 } }"},
        {10, "data { text { eval_fraction: 1 } }"}},
       {"bad.pbtxt:10:8: data.text.paths: is empty; list at least one text file",
        "bad.pbtxt:10:15: data.text.eval_fraction: is 1; it must be in [0, 1)"}},
      {"TextPathMissing",
       {{2, "  input { shape: [4] type: INT64 }"},
        {3, "  layers { name: \"fc1\" embedding { num_embeddings: 256 embedding_dim: 8 } }"},
        {10, "data { text { paths: [\"mlp.pbtxt\", \"nope.txt\"] } }"}},
       {"bad.pbtxt:10:15: data.text.paths[1]: file $TESTDATA/nope.txt does not exist"}},
      {"TextNeedsInt64Input",
       {{10, "data { text { paths: \"mlp.pbtxt\" } }"}},
       {"bad.pbtxt:2:3: model.input.type: is FLOAT32 but data.text (at bad.pbtxt:10:8) gives "
        "int64 token ids (one per byte); set model.input { type: INT64 shape: [seq_len] }"}},
      {"TextNeedsOneDimensionalTokenIdInput",
       {{2, "  input { shape: [2, 4] }"}, {10, "data { text { paths: \"mlp.pbtxt\" } }"}},
       {"bad.pbtxt:2:3: model.input.type: is FLOAT32 but data.text (at bad.pbtxt:10:8) gives "
        "int64 token ids",
        "bad.pbtxt:2:11: model.input.shape: has 2 dimensions but a data.text sample is a window "
        "of seq_len token ids; use shape: [seq_len]"}},
      {"Int64InputNeedsTextData",
       {{2, "  input { shape: [4] type: INT64 }"},
        {3, "  layers { name: \"fc1\" embedding { num_embeddings: 256 embedding_dim: 8 } }"}},
       {"bad.pbtxt:2:22: model.input.type: is INT64 (token ids) but data.synthetic gives float32 "
        "inputs; only data.text and data.tokens give int64 token ids"}},
      {"TokensPathMissingAndEvalFractionOutOfRange",
       {{2, "  input { shape: [4] type: INT64 }"},
        {3, "  layers { name: \"fc1\" embedding { num_embeddings: 256 embedding_dim: 8 } }"},
        {10, "data { tokens { path: \"nope.bin\" eval_fraction: -0.5 } }"}},
       {"bad.pbtxt:10:17: data.tokens.path: file $TESTDATA/nope.bin does not exist",
        "bad.pbtxt:10:34: data.tokens.eval_fraction: is -0.5; it must be in [0, 1)"}},
      {"TokensFileNotAWholeNumberOfIds",
       {{2, "  input { shape: [4] type: INT64 }"},
        {3, "  layers { name: \"fc1\" embedding { num_embeddings: 256 embedding_dim: 8 } }"},
        {10, "data { tokens { path: \"tokens_odd.bin\" } }"}},
       {"bad.pbtxt:10:17: data.tokens.path: $TESTDATA/tokens_odd.bin has 7 bytes, not a whole "
        "number of UINT16 ids (2 bytes each); is data.tokens.dtype right, or the file cut short?"}},
      {"TokensNeedInt64Input",
       {{10, "data { tokens { path: \"tokens_u16.bin\" } }"}},
       {"bad.pbtxt:2:3: model.input.type: is FLOAT32 but data.tokens (at bad.pbtxt:10:8) gives "
        "int64 token ids; set model.input { type: INT64 shape: [seq_len] } and a first layer "
        "that embeds the ids"}},
      // Checked after everything else: the embedding (256 rows) is the bound, not the loss (300).
      {"TokenIdOutsideTheEmbedding",
       {{2, "  input { shape: [4] type: INT64 }"},
        {3, "  layers { name: \"fc1\" embedding { num_embeddings: 256 embedding_dim: 8 } }"},
        {5, "  layers { name: \"fc2\" linear { out_features: 300 } }"},
        {10, "data { tokens { path: \"tokens_u16.bin\" } }"}},
       {"bad.pbtxt:10:17: data.tokens.path: $TESTDATA/tokens_u16.bin: the token at offset 25 "
        "(byte 50) is 300, outside the model's vocabulary [0, 256) (model.layers[0] 'fc1' embeds "
        "256 ids)"}},
      {"TokenIdOutsideTheLossClasses",
       {{2, "  input { shape: [4] type: INT64 }"},
        {3, "  layers { name: \"fc1\" embedding { num_embeddings: 512 embedding_dim: 8 } }"},
        {5, "  layers { name: \"fc2\" linear { out_features: 30 } }"},
        {10, "data { tokens { path: \"tokens_u16.bin\" dtype: UINT16 } }"}},
       {"bad.pbtxt:10:17: data.tokens.path: $TESTDATA/tokens_u16.bin: the token at offset 25 "
        "(byte 50) is 300, outside the model's vocabulary [0, 30) (the loss scores 30 classes)"}},
      {"BoundariesOfTheWrongCount",
       {{8, "pipeline { stages: 3 boundaries: [\"act\"] }"}},
       {"bad.pbtxt:8:22: pipeline.boundaries: lists 1 layer name(s) but pipeline.stages 3 needs "
        "2 (the first layer of each stage after the first); fix the list, or remove it to let "
        "the balancer choose"}},
      {"BoundaryNamesAnUnknownLayer",
       {{8, "pipeline { stages: 2 boundaries: [\"fc3\"] }"}},
       {"bad.pbtxt:8:22: pipeline.boundaries[0]: no layer is named 'fc3'; name one of: fc1, act, "
        "fc2"}},
      {"BoundariesOutOfModelOrder",
       {{8, "pipeline { stages: 3 boundaries: [\"fc2\", \"act\"] }"}},
       {"bad.pbtxt:8:22: pipeline.boundaries[1]: 'act' (model.layers[1]) does not come after "
        "'fc2' (model.layers[2]); list boundaries in model order, each stage non-empty"}},
      {"RepeatedBoundaryPointsAtItsOwnLine",
       {{8, ""},
        {11, "pipeline {"},
        {12, "  stages: 3"},
        {13, "  boundaries: \"act\""},
        {14, "  boundaries: \"act\""},
        {15, "}"}},
       {"bad.pbtxt:14:3: pipeline.boundaries[1]: 'act' (model.layers[1]) does not come after "
        "'act' (model.layers[1])"}},
      {"BoundaryAtTheFirstLayerLeavesStageZeroEmpty",
       {{8, "pipeline { stages: 2 boundaries: \"fc1\" }"}},
       {"bad.pbtxt:8:22: pipeline.boundaries[0]: 'fc1' is the model's first layer, which always "
        "starts stage 0, so stage 0 would be empty"}},
      {"EvalIsNotATrainingSchedule",
       {{8, "pipeline { stages: 2 micro_batches: 2 schedule: EVAL }"}},
       {"bad.pbtxt:8:39: pipeline.schedule: EVAL is forward-only (it evaluates, it cannot "
        "train); choose a training schedule: GPIPE, ONE_F_ONE_B, INTERLEAVED_1F1B, "
        "ZERO_BUBBLE_H1, ZERO_BUBBLE_H2, ZERO_BUBBLE_V, DUALPIPE_V or CUSTOM"}},
      {"CustomNeedsItsActions",
       {{8, "pipeline { stages: 2 micro_batches: 2 schedule: CUSTOM }"}},
       {"bad.pbtxt:8:39: pipeline.schedule: CUSTOM needs its actions: set pipeline.custom { ranks "
        "{ actions: \"0F0 0B0\" } ... } (one ranks entry per stage) or pipeline.schedule_csv: "
        "\"schedule.csv\""}},
      {"CustomActionsNeedTheCustomSchedule",
       {{8, "pipeline { stages: 2 micro_batches: 2 schedule_csv: \"s.csv\" }"}},
       {"bad.pbtxt:8:39: pipeline.schedule_csv: is set but pipeline.schedule is GPIPE; set "
        "schedule: CUSTOM to run it, or remove pipeline.schedule_csv"}},
      {"CustomScheduleIsRefusedNamingTheAction",
       {{8,
         "pipeline { stages: 2 micro_batches: 2 schedule: CUSTOM custom { ranks { actions: \"0F0 "
         "0F1 0B0 0B1\" } ranks { actions: \"1F0 1B0 1F1\" } } }"}},
       {"bad.pbtxt:8:65: pipeline.custom.ranks[0]: action 3 (0B1): micro-batch 1's gradient for "
        "stage 0 comes from stage 1, whose backward (1B1, or 1I1 then 1W1) is never scheduled"}},
      {"CustomScheduleHasOneRowPerStage",
       {{8,
         "pipeline { stages: 3 micro_batches: 2 schedule: CUSTOM custom { ranks { actions: \"0F0 "
         "0B0\" } } }"}},
       {"bad.pbtxt:8:56: pipeline.custom: has 1 row(s), one per rank, but pipeline.stages is 3; "
        "write one row per stage or set pipeline.stages: 1"}},
      {"VirtualStagesOnlyWithInterleaving",
       {{8, "pipeline { stages: 1 micro_batches: 2 virtual_stages: 2 }"}},
       {"bad.pbtxt:8:39: pipeline.virtual_stages: pipeline.virtual_stages is 2 but "
        "pipeline.schedule GPIPE runs one chunk per stage: set pipeline.virtual_stages to 1, or "
        "use pipeline.schedule INTERLEAVED_1F1B"}},
      {"InterleavingNeedsEnoughLayers",
       {{8,
         "pipeline { stages: 2 micro_batches: 2 schedule: INTERLEAVED_1F1B virtual_stages: 2 "
         "}"}},
       {"bad.pbtxt:8:66: pipeline.virtual_stages: 2 stages x 2 chunks need at least 4 layers but "
        "the model has 3; use fewer stages or chunks (this model allows 1 chunk(s) per stage "
        "with 2 stages)"}},
      {"InterleavingNeedsTwoChunks",
       {{8, "pipeline { stages: 2 micro_batches: 2 schedule: INTERLEAVED_1F1B }"}},
       {"bad.pbtxt:8:39: pipeline.schedule: INTERLEAVED_1F1B needs pipeline.virtual_stages >= 2 "
        "(got 1): set it to the number of chunks per stage (2 or more), or use "
        "pipeline.schedule ONE_F_ONE_B"}},
      {"VSchedulesRunTwoChunks",
       {{4,
         "  layers { name: \"act\" relu {} } layers { name: \"act2\" relu {} } layers { name: "
         "\"act3\" relu {} } layers { name: \"act4\" relu {} }"},
        {8, "pipeline { stages: 2 micro_batches: 2 schedule: ZERO_BUBBLE_V virtual_stages: 3 }"}},
       {"bad.pbtxt:8:63: pipeline.virtual_stages: pipeline.virtual_stages is 3 but "
        "pipeline.schedule ZERO_BUBBLE_V runs two chunks per stage in a V: remove "
        "pipeline.virtual_stages (it is then 2)"}},
      {"VShapePlacementNeedsAVSchedule",
       {{8, "pipeline { stages: 2 micro_batches: 2 placement: V_SHAPE }"}},
       {"bad.pbtxt:8:39: pipeline.placement: is V_SHAPE but GPIPE runs LOOPED; V_SHAPE comes with "
        "ZERO_BUBBLE_V, DUALPIPE_V or a CUSTOM schedule that zigzags: remove pipeline.placement "
        "(the schedule sets it)"}},
      {"InterleavedBoundariesNameEveryPart",
       {{4, "  layers { name: \"act\" relu {} } layers { name: \"act2\" relu {} }"},
        {8,
         "pipeline { stages: 2 micro_batches: 2 schedule: INTERLEAVED_1F1B virtual_stages: 2 "
         "boundaries: \"act\" }"}},
       {"bad.pbtxt:8:84: pipeline.boundaries: lists 1 layer name(s) but pipeline.stages 2 x "
        "pipeline.virtual_stages 2 parts need 3 (the first layer of each part after the first, "
        "in model order); fix the list, or remove it to let the balancer choose"}},
      {"RuntimeLimits",
       {{11, "runtime { threads: 0 log_every: -1 timeouts { wait_seconds: 0 } }"}},
       {"bad.pbtxt:11:11: runtime.threads: is 0; use at least 1 compute thread per process",
        "bad.pbtxt:11:22: runtime.log_every: is -1; use 0 (never) or a step interval >= 1",
        "bad.pbtxt:11:47: runtime.timeouts.wait_seconds: is 0; every wait needs a deadline > 0 "
        "and <= 1000000 seconds"}},
      // 1e10 s overflowed the start-up watchdog's nanosecond deadline into one already past.
      {"TimeoutsBeyondWhatADeadlineHolds",
       {{11, "runtime { timeouts { wait_seconds: 1e10 startup_seconds: 2e6 } }"}},
       {"bad.pbtxt:11:22: runtime.timeouts.wait_seconds: is 1e+10; every wait needs a deadline "
        "> 0 and <= 1000000 seconds",
        "bad.pbtxt:11:41: runtime.timeouts.startup_seconds: is 2e+06; every wait needs a "
        "deadline > 0 and <= 1000000 seconds"}},
      {"ByteCountsBeyondOneExbibyte",
       {{11,
         "runtime { gradient_bucket_bytes: 2000000000000000000 memory_limit_bytes: "
         "9223372036854775807 }"}},
       {"bad.pbtxt:11:11: runtime.gradient_bucket_bytes: is 2000000000000000000; it must be from "
        "1 to 1152921504606846976 (1 EiB)",
        "bad.pbtxt:11:54: runtime.memory_limit_bytes: is 9223372036854775807; use 0 (no limit) "
        "or a byte budget up to 1152921504606846976 (1 EiB)"}},
      {"NonPositivePeakTflops",
       {{11, "runtime { peak_tflops: -989 }"}},
       {"bad.pbtxt:11:11: runtime.peak_tflops: is -989; give one device's peak dense TFLOP/s at "
        "the run's precision (> 0, e.g. 989 for an H100 SXM in bf16), or remove it (no MFU)"}},
      {"NonFinitePeakTflops",
       {{11, "runtime { peak_tflops: inf }"}},
       {"bad.pbtxt:11:11: runtime.peak_tflops: is inf; give one device's peak dense TFLOP/s at "
        "the run's precision (> 0, e.g. 989 for an H100 SXM in bf16), or remove it (no MFU)"}},
      {"TraceSteps",
       {{11, "runtime { trace: \"t.json\" trace_steps: -2 }"}},
       {"bad.pbtxt:11:27: runtime.trace_steps: is -2; use 0 (every step) or a step count"}},
      {"EveryErrorIsReportedNotJustTheFirst",
       {{3, "  layers { name: \"fc1\" linear {} }"},
        {8, "pipeline { stages: 0 micro_batches: 2 }"},
        {9, "training { global_batch: 8 steps: 0" + sgd}},
       {"bad.pbtxt:3:3: model.layers[0]: layer 'fc1' (linear, input [4]): "
        "linear.out_features must be set and >= 1",
        "bad.pbtxt:8:12: pipeline.stages: is 0; it must be >= 1",
        "bad.pbtxt:9:28: training.steps: is 0; it must be >= 1"}},
  };
}

class MalformedPlanTest : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(MalformedPlanTest, ReportsEveryErrorWithItsLocation) {
  const MalformedCase& c = GetParam();
  const std::string text = Render(c);
  auto loaded = ParsePlanText(text, "bad.pbtxt", kTestdata, {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto analyzed = AnalyzePlan(*loaded, LayerRegistry::WithBuiltins());
  ASSERT_FALSE(analyzed.ok()) << "plan:\n" << text;
  EXPECT_EQ(analyzed.status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<std::string> lines = absl::StrSplit(analyzed.status().message(), '\n');
  ASSERT_EQ(lines.size(), c.expected.size()) << analyzed.status().message();
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string expected = absl::StrReplaceAll(c.expected[i], {{"$TESTDATA", kTestdata}});
    EXPECT_NE(lines[i].find(expected), std::string::npos)
        << "error " << i << "\n  got:      " << lines[i] << "\n  expected: " << expected;
  }
}

INSTANTIATE_TEST_SUITE_P(Table, MalformedPlanTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

TEST(MalformedPlanTableTest, TheGoodPlanTheCasesEditIsValid) {
  MalformedCase unchanged{"Unchanged", {}, {}};
  auto loaded = ParsePlanText(Render(unchanged), "good.pbtxt", kTestdata, {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto analyzed = AnalyzePlan(*loaded, LayerRegistry::WithBuiltins());
  EXPECT_TRUE(analyzed.ok()) << analyzed.status();
}

}  // namespace
}  // namespace gpipe
