// RecordingOps: an Ops table whose ops are recorded rather than run, for a device's captured work
// (a CPU device's Device::BeginCapture). A call on ops() first runs the family's own argument
// checks (the base class's public entry, as for any backend): a call that fails them returns that
// error and records nothing. Otherwise `record` receives a RecordedOp that issues the same op on
// `inner` through inner's public entry, and the call returns OK having computed nothing.
//
// In the RecordedOp every Tensor argument is replaced by views.Of(tensor) (Tensor::UnownedViews: a
// view that does not own the bytes; tensors that share storage get views that share storage) and
// every other argument is copied by value: a span of tensors becomes a vector of views, a
// MatrixView's tensor and the tensors inside norm arguments become views, and a GemmOptions'
// `bias` points at a view the RecordedOp holds. So a RecordedOp keeps no memory alive and reads
// the bytes as they are when it runs, not when it was recorded; the caller keeps the memory it
// views (a capture's rules) for as long as it may run.
//
// `inner`, `views` and whatever `record` refers to must outlive this object and every RecordedOp.
// Thread-compatible, as a Device is.
#ifndef GPIPE_RUNTIME_DEVICE_RECORDING_OPS_H_
#define GPIPE_RUNTIME_DEVICE_RECORDING_OPS_H_

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "runtime/core/tensor.h"
#include "runtime/device/ops.h"

namespace gpipe {

// A recorded op: issues the op again, on the table it was recorded for; its status is the op's.
using RecordedOp = std::function<absl::Status()>;

class RecordingOps {
 public:
  RecordingOps(const Ops& inner, Tensor::UnownedViews& views,
               std::function<void(RecordedOp)> record);
  RecordingOps(const RecordingOps&) = delete;
  RecordingOps& operator=(const RecordingOps&) = delete;
  ~RecordingOps();

  const Ops& ops() const { return ops_; }

 private:
  struct Families;  // one recording decorator per op family (recording_ops.cc)

  std::unique_ptr<Families> families_;
  Ops ops_;  // references into *families_
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_RECORDING_OPS_H_
