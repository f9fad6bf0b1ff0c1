#include "runtime/trace/trace_event.h"

namespace gpipe {

TraceTrack TrackOf(TraceKind kind) {
  switch (kind) {
    case TraceKind::kStep:
    case TraceKind::kEval:
      return TraceTrack::kSteps;
    case TraceKind::kForward:
    case TraceKind::kBackward:
    case TraceKind::kBackwardInput:
    case TraceKind::kBackwardWeight:
    case TraceKind::kLoad:
    case TraceKind::kOptimizer:
    case TraceKind::kAllReduce:
      return TraceTrack::kCompute;
    case TraceKind::kRecvActivation:
    case TraceKind::kRecvGrad:
    case TraceKind::kSendActivation:
    case TraceKind::kSendGrad:
    case TraceKind::kSync:
    case TraceKind::kRecvSkip:
    case TraceKind::kSendSkip:
      return TraceTrack::kComm;
    case TraceKind::kTransferActivationOut:
    case TraceKind::kTransferGradOut:
    case TraceKind::kTransferActivationIn:
    case TraceKind::kTransferGradIn:
    case TraceKind::kAllReduceBucket:
    case TraceKind::kTransferSkipOut:
    case TraceKind::kTransferSkipIn:
      return TraceTrack::kTransfers;
  }
  return TraceTrack::kSteps;
}

const char* CategoryOf(TraceKind kind) {
  switch (kind) {
    case TraceKind::kStep:
      return "step";
    case TraceKind::kEval:
      return "eval";
    case TraceKind::kForward:
      return "forward";
    case TraceKind::kBackward:
      return "backward";
    case TraceKind::kBackwardInput:
      return "backward_input";
    case TraceKind::kBackwardWeight:
      return "backward_weight";
    case TraceKind::kLoad:
      return "load";
    case TraceKind::kOptimizer:
      return "optimizer";
    case TraceKind::kAllReduce:
      return "allreduce";
    case TraceKind::kRecvActivation:
    case TraceKind::kRecvGrad:
      return "recv_wait";
    case TraceKind::kSendActivation:
    case TraceKind::kSendGrad:
      return "send";
    case TraceKind::kSync:
      return "sync";
    case TraceKind::kTransferActivationOut:
    case TraceKind::kTransferGradOut:
    case TraceKind::kTransferActivationIn:
    case TraceKind::kTransferGradIn:
      return "transfer";
    case TraceKind::kAllReduceBucket:
      return "allreduce_bucket";
    case TraceKind::kRecvSkip:
      return "recv_skip_wait";
    case TraceKind::kSendSkip:
      return "send_skip";
    case TraceKind::kTransferSkipOut:
    case TraceKind::kTransferSkipIn:
      return "skip_transfer";
  }
  return "unknown";
}

bool IsValidTraceKind(int32_t kind) { return kind >= 0 && kind < kTraceKinds; }

}  // namespace gpipe
