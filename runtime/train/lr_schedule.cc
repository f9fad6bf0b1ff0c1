#include "runtime/train/lr_schedule.h"

#include <cmath>
#include <numbers>

namespace gpipe {

LrSchedule::LrSchedule(const pb::Training& training, double peak_lr) : peak_lr_(peak_lr) {
  if (!training.has_lr_schedule()) return;
  const pb::LrSchedule& schedule = training.lr_schedule();
  warmup_steps_ = schedule.warmup_steps();
  decay_steps_ = schedule.decay_steps() > 0 ? schedule.decay_steps() : training.steps();
  decay_ = schedule.decay();
  min_lr_ratio_ = schedule.min_lr_ratio();
}

double LrSchedule::LrAt(int64_t applied) const {
  if (applied < warmup_steps_) {
    return peak_lr_ * static_cast<double>(applied + 1) / static_cast<double>(warmup_steps_);
  }
  if (decay_ == pb::CONSTANT) return peak_lr_;
  if (applied >= decay_steps_) return peak_lr_ * min_lr_ratio_;
  const double progress = static_cast<double>(applied - warmup_steps_) /
                          static_cast<double>(decay_steps_ - warmup_steps_);
  if (decay_ == pb::LINEAR) return peak_lr_ * (1.0 - (1.0 - min_lr_ratio_) * progress);
  return peak_lr_ * (min_lr_ratio_ +
                     (1.0 - min_lr_ratio_) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
}

}  // namespace gpipe
