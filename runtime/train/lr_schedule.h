// LrSchedule: the learning rate of each applied update (training.lr_schedule): linear warm-up to
// the optimizer's lr (the peak), then a constant, linear or cosine decay to peak * min_lr_ratio,
// then flat. It is a pure function of the number of updates applied before, so skipped steps do
// not advance it and a resumed run continues it exactly from the checkpoint's applied_steps.
#ifndef GPIPE_RUNTIME_TRAIN_LR_SCHEDULE_H_
#define GPIPE_RUNTIME_TRAIN_LR_SCHEDULE_H_

#include <cstdint>

#include "proto/plan.pb.h"

namespace gpipe {

class LrSchedule {
 public:
  // The plan's schedule around `peak_lr`; decay_steps 0 means training.steps. Without
  // training.lr_schedule every update gets peak_lr. The plan check has judged the values.
  LrSchedule(const pb::Training& training, double peak_lr);

  // The learning rate of update `applied` (the number of updates applied before it, from 0):
  //   peak * (applied + 1) / warmup_steps                 while applied < warmup_steps,
  //   peak * f(progress), progress = (applied - warmup_steps) / (decay_steps - warmup_steps)
  //                                                        while applied < decay_steps,
  //   peak * min_lr_ratio (peak for CONSTANT)              after,
  // with f = 1 (CONSTANT), 1 - (1 - min) * progress (LINEAR) or
  // min + (1 - min) * 0.5 * (1 + cos(pi * progress)) (COSINE).
  double LrAt(int64_t applied) const;

 private:
  double peak_lr_;
  int64_t warmup_steps_ = 0;
  int64_t decay_steps_ = 0;
  pb::LrDecay decay_ = pb::CONSTANT;
  double min_lr_ratio_ = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_TRAIN_LR_SCHEDULE_H_
