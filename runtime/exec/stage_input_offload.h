// StageInputOffload: the stage inputs one step keeps in host memory (pipeline.offload
// STAGE_INPUTS), by (chunk, micro-batch), between a micro-batch's Forward and its backward: the
// input from the previous stage and the skip connections received from other chunks, which a
// re-materialized forward joins again.
//
// Park starts the copy out on the device's copy engine right after the Forward was issued; the
// device storage is let go once that copy has finished (Poll, which the executor runs after every
// instruction), so the device's memory drops while the compute goes on. StartRestore starts the
// copy back into fresh device memory; the executor issues it before the instruction
// MicroBatchPlan::RestoresBefore names, so it overlaps that instruction; the host memory is
// released once that copy has finished (at once on the CPU). Take orders the compute after the
// copy back and hands the tensor to the backward. A restore that finds the copy out still running
// takes the device tensor as it is (nothing has left). The bytes are copied as they are, so the
// backward sees the same bits as without offload. Each tensor of a micro-batch moves on its own
// copy; the micro-batch is taken back whole.
//
// Single-threaded; lives for one step. Destruction waits for copies still running.
#ifndef GPIPE_RUNTIME_EXEC_STAGE_INPUT_OFFLOAD_H_
#define GPIPE_RUNTIME_EXEC_STAGE_INPUT_OFFLOAD_H_

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device.h"

namespace gpipe {

// What a micro-batch keeps for its backward: the stage input and the received skip
// connections, by join layer (MicroBatch::input and ::skip_inputs).
struct StageInputs {
  Tensor input;
  std::map<int, Tensor> skips;
};

class StageInputOffload {
 public:
  // `device` must outlive the object.
  explicit StageInputOffload(Device& device) : device_(device) {}
  StageInputOffload(const StageInputOffload&) = delete;
  StageInputOffload& operator=(const StageInputOffload&) = delete;

  // Starts moving micro-batch `m`'s stage inputs (device memory) to host memory.
  // FAILED_PRECONDITION when the input is missing or that micro-batch is already parked; the
  // device's error when host memory or a copy cannot be had (nothing is parked then).
  absl::Status Park(int chunk, int m, StageInputs inputs);
  // Starts bringing it back (nothing when already started). FAILED_PRECONDITION when nothing is
  // parked for (chunk, m) or it was taken.
  absl::Status StartRestore(int chunk, int m);
  // The stage inputs on the device, ordered before any work issued next (the restore starts here
  // when it has not yet). FAILED_PRECONDITION as StartRestore.
  absl::StatusOr<StageInputs> Take(int chunk, int m);
  // Lets go of what finished copies no longer need (a parked input's device storage, a restored
  // input's host memory) and forgets the inputs taken whose copies have all finished.
  absl::Status Poll();
  // INTERNAL naming the first micro-batch (lowest chunk, then index) parked and never taken;
  // otherwise waits for the copies still running and releases everything.
  absl::Status Finish();

  // Bytes copied out in this step.
  int64_t offloaded_bytes() const { return offloaded_bytes_; }
  // Host time spent in Take waiting for copies back (a simulated device's compute stalls there;
  // a GPU's stream waits without the host).
  absl::Duration waited() const { return waited_; }

 private:
  // One tensor on its way out and back.
  struct Piece {
    int skip_layer = -1;  // the join layer of a skip input; -1 for the stage input
    Tensor device;        // until the copy out has finished
    Tensor host;
    std::unique_ptr<AsyncCopy> out;
    std::unique_ptr<AsyncCopy> in;
    Tensor restored;  // from StartRestore to Take
  };
  struct Parked {
    std::vector<Piece> pieces;  // the stage input first
    bool restoring = false;
    bool taken = false;
  };
  absl::StatusOr<Piece> StartCopyOut(int skip_layer, Tensor tensor);
  absl::Status StartCopyBack(Piece& piece);
  absl::StatusOr<Parked*> Find(int chunk, int m, const char* what);
  // Lets go of what the piece's finished copies no longer need; whether none is running.
  absl::StatusOr<bool> Release(Piece& piece);

  Device& device_;
  std::map<std::pair<int, int>, Parked> parked_;  // by (chunk, micro-batch)
  int64_t offloaded_bytes_ = 0;
  absl::Duration waited_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_EXEC_STAGE_INPUT_OFFLOAD_H_
