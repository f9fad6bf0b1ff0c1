// Device: one accelerator (or the CPU) as a stage sees it: memory with every byte counted by
// kind, its kernels (Ops), copies between host and device memory, and its ordering and timing
// primitives. Backends are separate targets (cpu/, sim/, later cuda/) built behind the backend
// registry; shared code sees only this interface and never asks which device it runs on.
//
// Ordering: every op and copy is issued on the device's compute stream and runs in issue order
// (on the CPU it runs at once). Storage freed while work that reads it may still be queued is
// reused only after that work (stream-ordered free). Synchronize() waits for all issued work.
// Errors of queued work surface from the next call that synchronizes.
//
// Thread-compatibility: one thread uses a Device at a time, except memory(), which is
// thread-safe.
#ifndef GPIPE_RUNTIME_DEVICE_DEVICE_H_
#define GPIPE_RUNTIME_DEVICE_DEVICE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/allocator.h"
#include "runtime/core/memory_tracker.h"
#include "runtime/core/tensor.h"

namespace gpipe {

struct Ops;


// A point in the device's stream of work. Recorded by Device::RecordEvent; the device can tell
// whether the work before it has finished and how much device time separates two events.
class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
};

// A copy between device memory and host memory running on the device's copy engine, alongside
// the compute stream (Device::StartCopyToHost, StartCopyFromHost). It holds both tensors until the
// copy has finished, so neither storage is reused under it; destroying an unfinished copy waits
// for it.
class AsyncCopy {
 public:
  virtual ~AsyncCopy() = default;
  // Whether the copy has finished; never blocks. An error of the copy is returned here.
  virtual absl::StatusOr<bool> Finished() = 0;
  // Orders the work the device is given after this call after the copy: on a GPU the compute
  // stream waits for it and the host goes on; a simulated device's compute waits (the host
  // sleeps) until the modelled copy ends; on the CPU the copy is already done.
  virtual absl::Status OrderComputeAfter() = 0;
};

// Work captured once and issued again (Device::BeginCapture): a CUDA graph on a GPU, the recorded
// ops on the CPU. Destroy it before its device.
class WorkGraph {
 public:
  virtual ~WorkGraph() = default;
  // Issues the captured work again, after all work issued before, reading and writing the same
  // memory as every other Launch (the arena blocks its capture allocated, and whatever memory
  // the caller keeps for it). Errors of the work surface as any op's do: on the CPU here, on a
  // GPU from the next wait.
  virtual absl::Status Launch() = 0;
};

class Device : public Allocator {
 public:
  // "cpu", "cuda:0", "sim".
  virtual std::string name() const = 0;
  // Byte accounting of every allocation made through this device.
  virtual MemoryTracker& memory() = 0;
  // The device's kernels. Valid as long as the device.
  virtual const Ops& ops() = 0;
  // Host memory the device copies from fastest (pinned on a GPU): where micro-batches are
  // gathered before CopyFromHost. Counted apart from the device's own memory.
  virtual Allocator& host_staging() = 0;

  // Copies the whole of `source` (any dtype) from host memory into `destination`, which must
  // hold exactly source_bytes bytes. `source` may be reused when the call returns.
  virtual absl::Status CopyFromHost(const void* source, int64_t source_bytes,
                                    Tensor& destination) = 0;
  // Copies the whole of `source` into host memory of `destination_bytes` (== source.bytes()),
  // after all work issued before; returns when the bytes are there. FAILED_PRECONDITION on a
  // device that holds no values (SIM).
  virtual absl::Status CopyToHost(const Tensor& source, void* destination,
                                  int64_t destination_bytes) = 0;

  // Host memory that holds tensors moved off the device until they come back (activation
  // offload): pinned on a GPU, simulated on SIM; counted by offload_memory(), apart from the
  // device's memory and from host_staging().
  virtual Allocator& offload_host() = 0;
  virtual MemoryTracker& offload_memory() = 0;
  // Starts copying the whole of device tensor `source` into `destination` (offload_host()
  // memory of the same bytes) after all work issued before, on the copy engine, overlapping the
  // compute issued next. INVALID_ARGUMENT for tensors of other memory or sizes.
  virtual absl::StatusOr<std::unique_ptr<AsyncCopy>> StartCopyToHost(Tensor source,
                                                                     Tensor destination) = 0;
  // Starts copying host tensor `source` (offload_host() memory) into device tensor `destination`
  // of the same bytes on the copy engine, after the work issued before has let go of the
  // destination's storage; ops that read `destination` must come after the copy's
  // OrderComputeAfter().
  virtual absl::StatusOr<std::unique_ptr<AsyncCopy>> StartCopyFromHost(Tensor source,
                                                                       Tensor destination) = 0;

  // Marks the current end of the compute stream.
  virtual absl::StatusOr<std::unique_ptr<DeviceEvent>> RecordEvent() = 0;
  // Waits for the work before `event`; returns the device time in seconds between `start`
  // and `end` (both recorded by this device, start first): busy time measured by the device,
  // not by the host clock around a launch.
  virtual absl::StatusOr<double> ElapsedSeconds(const DeviceEvent& start,
                                                const DeviceEvent& end) = 0;
  // Waits until all issued work has finished; returns the first error of queued work.
  virtual absl::Status Synchronize() = 0;

  // Capture (CUDA graphs). Between BeginCapture and EndCapture the ops issued on the device are
  // recorded, not run, into the WorkGraph EndCapture returns; its Launch issues them again.
  // - Memory that captured work allocates comes from the device's capture arena and keeps its
  //   address for every Launch (runtime/device/capture_memory.h): a block that captured work
  //   frees may serve an allocation captured after it, one that the host frees outside a capture
  //   stays its graph's. So graphs must be launched in the order they were captured, one after
  //   another (one sequence per device), before new captures are made of other work.
  // - Memory the work uses but did not allocate (parameters, inputs copied into a buffer kept for
  //   the graph) must stay allocated for every Launch: the caller keeps it. A tensor allocated
  //   before the capture and dropped during it is kept until the graph is destroyed.
  // - A tensor dropped during a capture must have no use outside the captured work still to
  //   come (a transfer in flight on another stream): its block may be handed to work captured
  //   later.
  // - Nothing in a capture may wait for the host or move data between host and device:
  //   CopyFromHost, CopyToHost, StartCopyToHost, StartCopyFromHost, RecordEvent, ElapsedSeconds,
  //   Synchronize and WorkGraph::Launch fail with FAILED_PRECONDITION while a capture is open
  //   (the capture goes on).
  // BeginCapture: FAILED_PRECONDITION when a capture is open; UNIMPLEMENTED on a device that
  // cannot capture (SIM).
  virtual absl::Status BeginCapture() {
    return absl::UnimplementedError(absl::StrCat(name(), " cannot capture work"));
  }
  // Ends the capture. An op that failed while capturing makes the capture fail here on a GPU
  // (on the CPU its error was returned at once and it is not in the graph); either way a failed
  // capture is closed and leaves nothing behind. FAILED_PRECONDITION when no capture is open.
  virtual absl::StatusOr<std::unique_ptr<WorkGraph>> EndCapture() {
    return absl::UnimplementedError(absl::StrCat(name(), " cannot capture work"));
  }

  // Names the work issued from now on ("instruction Forward(mb=3) of step 7"), for errors of
  // queued work: a device that finds one after the call that issued it returned
  // (a GPU's id checks, reported at the next wait) says which work issued that call. A device
  // that returns every error from the call itself (CPU, SIM) has nothing to name and ignores it.
  virtual void LabelWork(std::string label) {}
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_DEVICE_H_
