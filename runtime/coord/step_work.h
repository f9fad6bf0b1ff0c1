// StepWork: what one training step computes, from the plan and its partition, so that rank 0
// can turn a step's time into throughput: tokens/s, each rank's achieved TFLOP/s and the model
// FLOPs utilization (MFU). Counts model FLOPs only: forward + backward = 3x each layer's
// ForwardFlopsPerSample (the analysis' StageSpec.flops); re-materialization's second forward is
// work the model does not need, so it is not counted, as MFU's definition asks (PaLM, Chowdhery
// et al. 2022, appendix B). A value type.
#ifndef GPIPE_RUNTIME_COORD_STEP_WORK_H_
#define GPIPE_RUNTIME_COORD_STEP_WORK_H_

#include <cstdint>
#include <vector>

#include "proto/control.pb.h"
#include "runtime/coord/step_summary.h"

namespace gpipe {

struct StepWork {
  // Indexed by pipeline stage: the FLOPs one rank of that stage computes in a step, its parts'
  // (all its chunks') FLOPs per sample times one replica's samples (global_batch /
  // data_parallel).
  std::vector<double> stage_flops;
  // Tokens in a step over every replica: global_batch x the input's positions when model.input
  // holds token ids (type INT64, which the plan check allows only from data.text, data.tokens or
  // a program's own source, into a first layer that takes ids: an embedding); 0 otherwise.
  int64_t tokens = 0;
  // runtime.peak_tflops; 0 when unset (no MFU).
  double peak_tflops = 0.0;
};

// From rank 0's setup: its plan (resolved) and the partition's parts (StageSpec.flops).
StepWork StepWorkOf(const pb::Setup& setup);

// Sets summary.tokens_per_s (when work.tokens > 0), tflops_per_rank (by the rank's stage) and mfu
// (when work.peak_tflops > 0) from summary.step_ms and summary.stage. Every rank is held for
// the whole step (rank 0 decides it after every rank has reported), so each rank's rate is its
// FLOPs over the step's time, idle time included, as MFU wants.
void AddThroughput(const StepWork& work, StepSummary& summary);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COORD_STEP_WORK_H_
