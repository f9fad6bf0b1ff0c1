// Shared by the checkpoint tests: a fresh directory per test, small file helpers, and a
// two-stage checkpoint written the way rank 0 and the writing ranks write one.
#ifndef GPIPE_TESTS_CKPT_CHECKPOINT_FIXTURE_H_
#define GPIPE_TESTS_CKPT_CHECKPOINT_FIXTURE_H_

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "proto/checkpoint.pb.h"
#include "runtime/ckpt/checkpoint_layout.h"
#include "runtime/ckpt/checkpoint_manifest.h"
#include "runtime/ckpt/checkpoint_writer.h"
#include "tests/support/scratch_dir.h"

namespace gpipe::testing {

// An empty directory named after the running test.
inline std::string FreshTempDir() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::filesystem::path dir = std::filesystem::path(ProcessScratchDir()) /
                                    "gpipe_checkpoint" /
                                    (std::string(info->test_suite_name()) + "." + info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline bool Contains(const absl::Status& status, const std::string& text) {
  return std::string(status.message()).find(text) != std::string::npos;
}

// A two-stage checkpoint of step `step` under `dir`: stage 0 holds "a" and its optimizer state,
// stage 1 holds "b". Returns the manifest committed; `removed` (when given) gets what the commit
// removed.
inline pb::CheckpointManifest WriteTwoStageCheckpoint(const std::string& dir, int64_t step,
                                                      const CheckpointRetention& retention,
                                                      std::vector<std::string>* removed = nullptr) {
  absl::StatusOr<std::string> checkpoint = PrepareCheckpoint(dir, step);
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
  const std::vector<NamedTensorData> stage0 = {{"a", {2}, {1.0f, 2.0f}},
                                               {"a:exp_avg", {2}, {0.5f, 0.25f}}};
  const std::vector<NamedTensorData> stage1 = {{"b", {1, 1}, {static_cast<float>(step)}}};
  pb::CheckpointManifest manifest;
  manifest.set_format_version(kCheckpointFormatVersion);
  manifest.set_step(step);
  manifest.set_applied_steps(step);
  int shard = 0;
  for (const auto* tensors : {&stage0, &stage1}) {
    absl::StatusOr<pb::CheckpointShard> written =
        WriteCheckpointShard(*checkpoint, shard, 2, *tensors);
    EXPECT_TRUE(written.ok()) << written.status();
    *manifest.add_shards() = *written;
    for (const NamedTensorData& t : *tensors) {
      pb::CheckpointTensor* entry = manifest.add_tensors();
      entry->set_name(t.name);
      for (int64_t d : t.shape) entry->add_shape(d);
      entry->set_kind(t.name.find(':') == std::string::npos
                          ? pb::CheckpointTensor::PARAMETER
                          : pb::CheckpointTensor::OPTIMIZER_STATE);
      entry->set_shard(shard);
    }
    ++shard;
  }
  absl::StatusOr<std::vector<std::string>> committed =
      CommitCheckpoint(dir, *checkpoint, manifest, retention);
  EXPECT_TRUE(committed.ok()) << committed.status();
  if (removed != nullptr && committed.ok()) *removed = *committed;
  return manifest;
}

inline pb::CheckpointManifest WriteTwoStageCheckpoint(const std::string& dir, int64_t step,
                                                      int keep_last = 0) {
  return WriteTwoStageCheckpoint(dir, step, CheckpointRetention{.keep_last = keep_last});
}

// The steps of the step directories under `dir`, ascending.
inline std::vector<int64_t> StepsIn(const std::string& dir) {
  std::vector<int64_t> steps;
  for (const CheckpointEntry& e : ListCheckpoints(dir)) steps.push_back(e.step);
  return steps;
}

}  // namespace gpipe::testing

#endif  // GPIPE_TESTS_CKPT_CHECKPOINT_FIXTURE_H_
