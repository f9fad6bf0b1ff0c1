// The files a plan's data source reads, each with the plan field that names it, and the data's
// fingerprint: what a checkpoint records so that a run resumed on other data is refused.
#ifndef GPIPE_RUNTIME_DATA_DATA_FILES_H_
#define GPIPE_RUNTIME_DATA_DATA_FILES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"
#include "runtime/core/file_ownership.h"

namespace gpipe {

// data.npy.*, data.idx.*, data.text.paths and data.tokens.path as the plan gives them
// (ResolveDataPaths has made them absolute or plan-relative), role = the field
// ("data.text.paths[1]"). None for synthetic and custom sources.
std::vector<FileRole> DataFiles(const pb::Plan& plan);

// One line per training file: "data.npy.inputs: 4000128 bytes, crc32 0x1a2b3c4d" where the CRC
// covers at most 16 pieces of 64 KiB spread evenly over the file (its first and last included),
// so a terabyte corpus costs a millisecond; for synthetic data its settings' text, for a custom
// source its name and settings. The held-out split (eval/test files, eval_samples, eval_split)
// is left out: a resume may change it. NOT_FOUND / DATA_LOSS naming the field and file when one
// cannot be read.
absl::StatusOr<std::string> DataFingerprint(const pb::Plan& plan);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DATA_DATA_FILES_H_
