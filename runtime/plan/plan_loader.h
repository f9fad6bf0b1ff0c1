// Plan loading: reads a plan in protobuf text format, merges command-line overrides into it and
// remembers where every field was written, so later errors can say "plan.pbtxt:12:5".
//
// Overrides are text-proto fragments (`pipeline { stages: 4 }`) merged after the file, in order.
// Singular fields merge (MergeFrom). A repeated field an override mentions REPLACES the plan's
// list instead of appending to it, at any depth: `model { layers { ... } }` replaces every layer,
// and `pipeline { boundaries: [] }` clears the boundaries. Pure functions; thread-compatible.
#ifndef GPIPE_RUNTIME_PLAN_PLAN_LOADER_H_
#define GPIPE_RUNTIME_PLAN_PLAN_LOADER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/plan.pb.h"

namespace gpipe {

// Where a field was written: "plans/x.pbtxt:12:5" (1-based line and column; a tab advances the
// column to the next multiple of 8, as protobuf counts it).
struct SourceLocation {
  std::string source;  // the plan path as given, or "--override[2]"
  int line = 0;
  int column = 0;
  std::string ToString() const;
};

struct LoadedPlan {
  pb::Plan plan;          // the file merged with the overrides, in order
  std::string path;       // as given
  std::string directory;  // the plan file's directory (relative data paths resolve here)
  // Field path -> where it was last set. Paths look like "pipeline.stages",
  // "model.layers[2].linear.out_features", "model.layers[2]" (the element's opening) and
  // "model.input.shape" (a repeated field: its first mention). A message keeps the location
  // where it was first opened even when an override later sets fields inside it. (Protobuf
  // records positions only for the first block of a message opened twice in one text, so fields
  // of a second `pipeline { ... }` block in the same file fall back to the first block.)
  absl::flat_hash_map<std::string, SourceLocation> locations;

  // "file:line:col" of the field path, or of its nearest located ancestor, or just the file.
  std::string LocationOf(absl::string_view field_path) const;
};

// The largest plan file read (protobuf's own text limit is far above any real plan).
inline constexpr int64_t kMaxPlanBytes = 64 << 20;

// Reads and parses `path`, then applies `overrides`. NOT_FOUND when the file cannot be read;
// INVALID_ARGUMENT when it is not a regular file (a device or FIFO) or larger than
// kMaxPlanBytes, and "path:line:col: message" for syntax errors, unknown fields or enum values,
// and "--override[i]:line:col: message" (i 1-based) for errors inside an override.
absl::StatusOr<LoadedPlan> LoadPlanFile(const std::string& path,
                                        const std::vector<std::string>& overrides);

// As LoadPlanFile on text already in memory; `source_name` stands for the file in messages and
// locations, and `directory` is where relative data paths will resolve.
absl::StatusOr<LoadedPlan> ParsePlanText(const std::string& text, const std::string& source_name,
                                         const std::string& directory,
                                         const std::vector<std::string>& overrides);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_PLAN_PLAN_LOADER_H_
