#include "runtime/train/dataset.h"

#include <limits>
#include <numeric>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "runtime/core/check.h"
#include "runtime/core/rng.h"
#include "runtime/core/status_macros.h"
#include "runtime/train/data_source_registry.h"
#include "runtime/train/idx_dataset.h"
#include "runtime/train/npy_dataset.h"
#include "runtime/train/synthetic.h"
#include "runtime/train/text_dataset.h"

namespace gpipe {
namespace {

constexpr uint64_t kShuffleTag = 0x53485546464C4531ull;  // "SHUFFLE1"

// Uniform in [0, bound) without modulo bias (rejection on 64-bit draws).
uint64_t UniformBelow(RandomStream& stream, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
  while (true) {
    const uint64_t high = stream.NextU32();
    const uint64_t r = (high << 32) | stream.NextU32();
    if (r >= threshold) return r % bound;
  }
}

// Fisher-Yates shuffle of 0..n-1 drawn from the stream of (seed, epoch).
std::vector<int64_t> ShuffledPermutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), int64_t{0});
  RandomStream stream(seed, {kShuffleTag, static_cast<uint64_t>(epoch)});
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(UniformBelow(stream, static_cast<uint64_t>(i + 1)));
    std::swap(order[i], order[j]);
  }
  return order;
}

// FAILED_PRECONDITION for an evaluation request on a source without a held-out split.
absl::Status NoEvalSplitError(const pb::Data& data) {
  std::string remedy;
  switch (data.source_case()) {
    case pb::Data::kSynthetic:
      remedy = "set data.synthetic.eval_samples to the number of held-out samples (>= 1)";
      break;
    case pb::Data::kNpy:
      remedy = "set data.npy.eval_inputs and data.npy.eval_targets to the held-out .npy files";
      break;
    case pb::Data::kIdx:
      remedy =
          "set data.idx.test_images and data.idx.test_labels to the held-out IDX files (for "
          "Fashion-MNIST t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz)";
      break;
    case pb::Data::kText:
      remedy = "set data.text.eval_fraction in (0, 1) to hold out the end of the text";
      break;
    case pb::Data::kCustom:
      remedy = "set data.custom.eval_split: true when the source serves a held-out split";
      break;
    case pb::Data::SOURCE_NOT_SET:
      break;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("evaluation needs a held-out split but the data source has none; ", remedy));
}

}  // namespace

bool HasEvalSplit(const pb::Data& data) {
  switch (data.source_case()) {
    case pb::Data::kSynthetic:
      return data.synthetic().eval_samples() > 0;
    case pb::Data::kNpy:
      return !data.npy().eval_inputs().empty() || !data.npy().eval_targets().empty();
    case pb::Data::kIdx:
      return !data.idx().test_images().empty() || !data.idx().test_labels().empty();
    case pb::Data::kText:
      return data.text().eval_fraction() > 0;
    case pb::Data::kCustom:
      return data.custom().eval_split();
    case pb::Data::SOURCE_NOT_SET:
      break;
  }
  return false;
}

absl::StatusOr<std::unique_ptr<Dataset>> OpenDataset(const pb::Data& data,
                                                     const DataRequirements& requirements,
                                                     DataSplit split,
                                                     const DataSourceRegistry* custom) {
  if (split == DataSplit::kEval && data.source_case() != pb::Data::SOURCE_NOT_SET &&
      !HasEvalSplit(data)) {
    return NoEvalSplitError(data);
  }
  switch (data.source_case()) {
    case pb::Data::kSynthetic: {
      ASSIGN_OR_RETURN(std::unique_ptr<SyntheticDataset> synthetic,
                       SyntheticDataset::Create(data.synthetic(), requirements, split));
      return std::unique_ptr<Dataset>(std::move(synthetic));
    }
    case pb::Data::kNpy: {
      ASSIGN_OR_RETURN(std::unique_ptr<NpyDataset> npy,
                       NpyDataset::Open(data.npy(), requirements, split));
      return std::unique_ptr<Dataset>(std::move(npy));
    }
    case pb::Data::kIdx: {
      ASSIGN_OR_RETURN(std::unique_ptr<IdxDataset> idx,
                       IdxDataset::Open(data.idx(), requirements, split));
      return std::unique_ptr<Dataset>(std::move(idx));
    }
    case pb::Data::kText: {
      ASSIGN_OR_RETURN(std::unique_ptr<TextDataset> text,
                       TextDataset::Open(data.text(), requirements, split));
      return std::unique_ptr<Dataset>(std::move(text));
    }
    case pb::Data::kCustom: {
      // Without the program's registry the name is unknown: the empty one says so.
      if (custom == nullptr) return DataSourceRegistry().Open(data.custom(), requirements, split);
      return custom->Open(data.custom(), requirements, split);
    }
    case pb::Data::SOURCE_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "data has no source; give exactly one of synthetic { ... }, npy { inputs: ... targets: ... "
      "}, idx { train_images: ... train_labels: ... } or text { paths: ... }");
}

struct BatchSampler::PermutationCache {
  absl::Mutex mu;
  int64_t epoch ABSL_GUARDED_BY(mu) = -1;
  std::vector<int64_t> order ABSL_GUARDED_BY(mu);
};

BatchSampler::BatchSampler(int64_t dataset_size, int64_t global_batch, bool shuffle, uint64_t seed)
    : dataset_size_(dataset_size),
      global_batch_(global_batch),
      shuffle_(shuffle),
      seed_(seed),
      cache_(std::make_shared<PermutationCache>()) {
  GPIPE_CHECK(dataset_size >= 1) << "BatchSampler needs a non-empty data set, got " << dataset_size;
  GPIPE_CHECK(global_batch >= 1) << "BatchSampler needs global_batch >= 1, got " << global_batch;
}

std::vector<int64_t> BatchSampler::EpochPermutation(int64_t epoch) const {
  GPIPE_CHECK(epoch >= 0) << epoch;
  if (!shuffle_) {
    std::vector<int64_t> order(dataset_size_);
    std::iota(order.begin(), order.end(), int64_t{0});
    return order;
  }
  return ShuffledPermutation(dataset_size_, seed_, epoch);
}

std::vector<int64_t> BatchSampler::IndicesForStep(int64_t step) const {
  GPIPE_CHECK(step >= 0) << step;
  GPIPE_CHECK(step <= std::numeric_limits<int64_t>::max() / global_batch_ - 1)
      << "step " << step << " overflows the sample position";
  std::vector<int64_t> indices(global_batch_);
  const int64_t first = step * global_batch_;
  if (!shuffle_) {
    for (int64_t j = 0; j < global_batch_; ++j) indices[j] = (first + j) % dataset_size_;
    return indices;
  }
  absl::MutexLock lock(&cache_->mu);
  for (int64_t j = 0; j < global_batch_; ++j) {
    const int64_t position = first + j;
    const int64_t epoch = position / dataset_size_;
    if (cache_->epoch != epoch) {
      cache_->order = ShuffledPermutation(dataset_size_, seed_, epoch);
      cache_->epoch = epoch;
    }
    indices[j] = cache_->order[position % dataset_size_];
  }
  return indices;
}

}  // namespace gpipe
