// IdChecks: ids in an i64 device tensor checked against [0, limit) before an op uses them as
// indices (embedding gather and scatter-add, cross-entropy targets), without the host waiting
// for the GPU. Each check is one single-block kernel on the compute stream that finds the lowest
// bad index of its call and, when its call is the earliest with a bad id since the last report,
// writes (call, index, id, limit, use) into a small record in mapped pinned host memory. Nothing
// is copied back and nothing waits: the device reads the record after each of its own waits
// (Synchronize, CopyToHost) and returns the op's own BadId status from there (Device's contract:
// errors of queued work surface from the next call that synchronizes), naming the work the call
// was issued under (Device::LabelWork: the executor's instruction and step). So the step can run
// ahead of the GPU and be captured in a CUDA graph (issue 28 item 4).
//
// In training the data path has checked the same ids on the host before their upload
// (Layer::CheckHostInput, Loss::CheckHostTargets) and said which sample and position in the
// layer's words; this is the backstop for ids that reach an op another way. The ops' kernels
// treat a bad id as no row (they read and write nothing outside their tensors), so the outputs
// of a call with a bad id are unspecified until its error is reported.
// Thread-compatible (the device's one issuing thread).
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_ID_CHECK_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_ID_CHECK_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/core/tensor.h"

namespace gpipe::cuda {

// What the ids index: the op whose BadId status a bad one is reported as.
enum class IdUse : int32_t {
  kEmbeddingRow = 0,  // op_checks::EmbeddingBadId ("index <r> has id <id>, outside [0, rows)")
  kClassTarget = 1,   // op_checks::CrossEntropyBadId ("row <r> has class id <id>, ...")
};

// Where a check kernel leaves its finding; lives in mapped pinned host memory.
struct IdFaultRecord {
  // (call << kIndexBits) | index of the earliest bad id, kNoFault when none.
  unsigned long long key;
  long long id;
  long long limit;
  int32_t use;  // IdUse
};

class IdChecks {
 public:
  static constexpr int kIndexBits = 40;  // flat indices below 2^40
  static constexpr unsigned long long kNoFault = ~0ULL;

  // Allocates the record. `device_name` words the reports ("cuda:0").
  static absl::StatusOr<IdChecks> Create(std::string device_name);

  IdChecks(IdChecks&&) = default;
  IdChecks& operator=(IdChecks&&) = default;

  // Issues the check of `ids` (a defined i64 tensor on the stream's device) on `stream`; the op
  // that uses them is issued after it. INVALID_ARGUMENT only for a tensor of 2^40 or more ids.
  absl::Status Issue(cudaStream_t stream, const Tensor& ids, int64_t limit, IdUse use);

  // Names the work whose checks are issued from now on (Device::LabelWork); a report names the
  // label its call was issued under.
  void LabelWork(std::string label) { label_ = std::move(label); }

  // Called after the stream the checks ran on has been waited for: the status of the earliest
  // checked call since the last report that saw an id outside its range (the op's own message
  // and BadId payload, that it was found after the call returned, and the label of the work that
  // issued it), OK when none. Clears the record and starts counting calls again.
  absl::Status TakeReport();

 private:
  struct RecordDeleter {
    void operator()(IdFaultRecord* record) const;
  };

  IdChecks(std::string device_name, std::unique_ptr<IdFaultRecord, RecordDeleter> record,
           IdFaultRecord* on_device)
      : device_name_(std::move(device_name)), record_(std::move(record)), on_device_(on_device) {}

  std::string device_name_;
  std::unique_ptr<IdFaultRecord, RecordDeleter> record_;  // host view
  IdFaultRecord* on_device_;                              // the same memory as the GPU sees it
  unsigned long long next_call_ = 0;                      // calls issued since the last report
  std::string label_;                                     // the work being issued
  // Since the last report: (first call, label) each time a call was issued under a new label.
  std::vector<std::pair<unsigned long long, std::string>> call_labels_;
};

}  // namespace gpipe::cuda

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_ID_CHECK_H_
