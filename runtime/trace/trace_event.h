// TraceEvent: one thing a rank did during a traced run (an instruction, a transfer in flight, a
// step), with its time span on that rank's clock. Kinds map to the tracks a trace viewer shows
// per rank ("one track per stream"): the step track, the compute stream, the communication
// instructions, and the transfers in flight (several may overlap, so they are async spans).
#ifndef GPIPE_RUNTIME_TRACE_TRACE_EVENT_H_
#define GPIPE_RUNTIME_TRACE_TRACE_EVENT_H_

#include <cstdint>

namespace gpipe {

enum class TraceTrack : int32_t { kSteps = 0, kCompute = 1, kComm = 2, kTransfers = 3 };
inline constexpr int kTraceTracks = 4;

enum class TraceKind : int32_t {
  kStep = 0,     // a training step on this rank (StageExecutor::RunStep)
  kEval = 1,     // one batch of a forward-only evaluation pass
  kForward = 2,  // compute track
  kBackward = 3,
  kBackwardInput = 4,
  kBackwardWeight = 5,
  kLoad = 6,
  kOptimizer = 7,
  kAllReduce = 8,
  kRecvActivation = 9,  // comm track: the receive instruction, i.e. the time blocked in it
  kRecvGrad = 10,
  kSendActivation = 11,  // comm track: posting the send
  kSendGrad = 12,
  kSync = 13,                   // comm track: the gradient-sync barrier with rank 0
  kTransferActivationOut = 14,  // transfers track: a send from post to observed completion
  kTransferGradOut = 15,
  kTransferActivationIn = 16,  // transfers track: a receive from post to completion
  kTransferGradIn = 17,
  // transfers track: one gradient bucket's all-reduce over the stage's data-parallel replicas,
  // from its start (its last gradient is ready) to observed completion; `micro_batch` is the
  // bucket's index.
  kAllReduceBucket = 18,
  // A skip connection's transfer (plan: skip_add, skip_concat), output or gradient: the receive
  // and send instructions (comm track) and the transfer in flight (transfers track).
  kRecvSkip = 19,
  kSendSkip = 20,
  kTransferSkipOut = 21,
  kTransferSkipIn = 22,
};
inline constexpr int kTraceKinds = 23;

struct TraceEvent {
  TraceKind kind = TraceKind::kStep;
  int64_t begin_ns = 0;  // on the recording rank's clock, since its trace epoch
  int64_t end_ns = 0;
  int64_t step = 0;
  int32_t micro_batch = -1;  // kAllReduceBucket: the bucket
  int32_t chunk = -1;        // the recording stage's chunk
  int32_t instruction = -1;  // position in the stage program
  int32_t peer = -1;         // transfers: the other rank
  int64_t bytes = 0;         // transfers: payload bytes
  bool eval = false;
};

TraceTrack TrackOf(TraceKind kind);
// "forward", "recv_wait", ... (the trace's "cat" field).
const char* CategoryOf(TraceKind kind);
bool IsValidTraceKind(int32_t kind);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_TRACE_TRACE_EVENT_H_
