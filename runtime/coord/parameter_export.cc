#include "runtime/coord/parameter_export.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/control.pb.h"
#include "runtime/ckpt/safetensors.h"
#include "runtime/ckpt/safetensors_shards.h"
#include "runtime/core/file_ownership.h"
#include "runtime/core/output_path.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// A data-parallel replica's copy of a parameter (from `rank`) against replica 0's.
absl::Status CheckReplicaCopy(const NamedTensorData& first, const NamedTensorData& copy, int rank) {
  if (copy.shape != first.shape) {
    return absl::InternalError(absl::StrCat("rank ", rank, " exported '", copy.name,
                                            "' with another shape than replica 0"));
  }
  for (size_t i = 0; i < copy.values.size(); ++i) {
    // Bitwise, so that NaNs compare too.
    if (std::memcmp(&copy.values[i], &first.values[i], sizeof(float)) != 0) {
      return absl::InternalError(absl::StrCat("the data-parallel replicas diverged: rank ", rank,
                                              " holds ", copy.name, "[", i, "] = ", copy.values[i],
                                              ", replica 0 holds ", first.values[i],
                                              "; a gpipe bug, please report it"));
    }
  }
  return absl::OkStatus();
}

// Rank 0: merges every rank's shard (replica copies checked against replica 0's) and writes one
// safetensors file, or save_pretrained's shards and index with ExportMetadata::shard_bytes.
absl::Status WriteExport(const FileRole& destination, const RunFiles& files,
                         const std::vector<std::string>& gathered, const ExportMetadata& metadata,
                         const Logger& logger) {
  const std::string& path = destination.path;
  std::vector<NamedTensorData> all;
  std::map<std::string, size_t> index;  // name -> position in `all`
  for (size_t r = 0; r < gathered.size(); ++r) {
    pb::ParameterShard received;
    if (!received.ParseFromString(gathered[r])) {
      return absl::DataLossError(absl::StrCat("unreadable parameters from rank ", r));
    }
    if (received.has_error()) {
      return absl::FailedPreconditionError(
          absl::StrCat("rank ", r, " could not read its parameters: ", received.error()));
    }
    for (const pb::NamedTensor& named : received.tensors()) {
      NamedTensorData t{named.name(), {named.shape().begin(), named.shape().end()}, {}};
      t.values.resize(named.f32_data().size() / sizeof(float));
      std::memcpy(t.values.data(), named.f32_data().data(), t.values.size() * sizeof(float));
      if (const auto it = index.find(t.name); it != index.end()) {
        RETURN_IF_ERROR(CheckReplicaCopy(all[it->second], t, static_cast<int>(r)));
        continue;
      }
      index.emplace(t.name, all.size());
      all.push_back(std::move(t));
    }
  }
  std::map<std::string, std::string> file_metadata = {
      {"format", "pt"},
      {"gpipe_plan", metadata.plan_name},
      {"gpipe_steps", absl::StrCat(metadata.steps)}};
  ASSIGN_OR_RETURN(const ShardedExport shards,
                   PlanShards(path, all, metadata.dtype, metadata.shard_bytes));
  if (!shards.index.empty()) {
    // The shards and the index are outputs too: none may be an input or inside a checkpoint.
    std::vector<std::string> outputs = shards.shards;
    outputs.push_back(shards.index);
    for (const std::string& output : outputs) {
      const FileRole role{.role = absl::StrCat(destination.role, "'s shard"), .path = output};
      RETURN_IF_ERROR(CheckOutputFile(role.role, output));
      RETURN_IF_ERROR(CheckLaterOutput(files, role));
    }
  }
  RETURN_IF_ERROR(WriteShards(shards, all, file_metadata, metadata.dtype));
  if (!shards.index.empty()) {
    // A single file of the same name would shadow the index for readers (save_pretrained's and
    // --init-from's both prefer it); it is this export's own destination, so it goes.
    std::error_code error;
    std::filesystem::remove(path, error);
  }
  logger.Info(absl::StrCat("exported ", all.size(), " parameters to ",
                           shards.index.empty() ? path
                                                : absl::StrCat(shards.shards.size(),
                                                               " shards indexed by ", shards.index),
                           metadata.dtype == SafetensorsDtype::kBF16 ? " as bf16" : "",
                           metadata.note.empty() ? "" : absl::StrCat(" (", metadata.note, ")")));
  return absl::OkStatus();
}

}  // namespace

absl::Status ExportParameters(ControlChannel& control, const StageChunks& chunks,
                              const FileRole& destination, const RunFiles& files,
                              const ExportMetadata& metadata, absl::Duration timeout,
                              const Logger& logger) {
  const int rank = control.rank();
  const std::string& path = destination.path;
  // Rank 0 checks the destination first and every rank learns the verdict, so no rank gathers
  // for a file that cannot be written.
  pb::ExportResult checked;
  if (rank == 0) {
    absl::Status ok = CheckOutputFile(destination.role, path);
    if (ok.ok()) ok = CheckLaterOutput(files, destination);
    if (!ok.ok()) checked.set_error(std::string(ok.message()));
  }
  RETURN_IF_ERROR(control.Broadcast(checked, absl::Now() + timeout, kControlTagExport));
  if (checked.has_error()) return absl::InvalidArgumentError(checked.error());
  pb::ParameterShard shard;
  shard.set_rank(rank);
  // A rank that cannot read its parameters still takes part in the gather, carrying its error,
  // so no rank waits for it.
  const absl::StatusOr<std::vector<NamedTensorData>> exported = chunks.Export();
  if (!exported.ok()) shard.set_error(std::string(exported.status().message()));
  const std::vector<NamedTensorData> none;
  for (const NamedTensorData& t : exported.ok() ? *exported : none) {
    pb::NamedTensor* named = shard.add_tensors();
    named->set_name(t.name);
    for (int64_t d : t.shape) named->add_shape(d);
    named->set_f32_data(std::string(reinterpret_cast<const char*>(t.values.data()),
                                    t.values.size() * sizeof(float)));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> gathered,
                   control.GatherToRoot(shard, absl::Now() + timeout, kControlTagExport));
  // Every rank learns whether rank 0 wrote the file, so none exits 0 after a failed export.
  pb::ExportResult result;
  if (rank == 0) {
    const absl::Status written = WriteExport(destination, files, gathered, metadata, logger);
    if (!written.ok()) result.set_error(std::string(written.message()));
  }
  RETURN_IF_ERROR(control.Broadcast(result, absl::Now() + timeout, kControlTagExport));
  if (result.has_error()) {
    return absl::InternalError(
        absl::StrCat("exporting parameters failed on rank 0: ", result.error()));
  }
  return absl::OkStatus();
}

}  // namespace gpipe
