// gpipe/plan.h — where a runtime's plan comes from.
//
// Contract: a PlanSource names the plan (protobuf text, proto/plan.proto; the reference is
// proto/plan-reference.md) as a file, as text in memory, or as a gpipe::pb::Plan object, plus
// overrides (text-proto fragments merged in order, as gpipe-worker's --override). Only rank 0
// reads it; the other ranks' sources are ignored. Errors in it are reported by Runtime::Create
// with file:line:col (text and objects are printed under `name`, so their locations point into
// that text). A value type: copyable, no shared state; thread-compatible.
#ifndef GPIPE_PLAN_H_
#define GPIPE_PLAN_H_

#include <string>
#include <utility>
#include <vector>

#include "proto/plan.pb.h"

namespace gpipe {

class PlanSource {
 public:
  // The plan file at `path`; relative data paths in it resolve against its directory.
  static PlanSource File(std::string path);
  // Plan text in memory. `name` stands for the file in messages; relative data paths resolve
  // against `directory` ("": the working directory).
  static PlanSource Text(std::string text, std::string name = "<plan text>",
                         std::string directory = "");
  // A plan built in code, checked exactly as a file would be.
  static PlanSource Proto(const pb::Plan& plan, std::string name = "<plan object>",
                          std::string directory = "");

  // Adds a text-proto fragment merged into the plan after the ones before it, e.g.
  // "pipeline { micro_batches: 16 }". Returns *this for chaining.
  PlanSource& Override(std::string fragment) &;
  PlanSource&& Override(std::string fragment) &&;

  bool is_file() const { return is_file_; }
  const std::string& path_or_name() const { return path_or_name_; }
  const std::string& text() const { return text_; }  // empty for a file
  const std::string& directory() const { return directory_; }
  const std::vector<std::string>& overrides() const { return overrides_; }

 private:
  PlanSource() = default;
  bool is_file_ = false;
  std::string path_or_name_;
  std::string text_;
  std::string directory_;
  std::vector<std::string> overrides_;
};

}  // namespace gpipe

#endif  // GPIPE_PLAN_H_
