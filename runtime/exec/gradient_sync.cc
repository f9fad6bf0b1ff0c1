#include "runtime/exec/gradient_sync.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {

GradientSync::GradientSync(GradientBuckets& buckets, ReduceGroup& group, Device& device,
                           const StepScope& scope, int micro_batches, int replicas,
                           Collective reduction)
    : buckets_(buckets),
      group_(group),
      device_(device),
      scope_(scope),
      micro_batches_(micro_batches),
      replicas_(replicas),
      reduction_(reduction) {
  for (const GradientBuckets::Bucket& bucket : buckets_.buckets()) {
    pending_layers_.push_back(static_cast<int>(bucket.layers.size()));
    for (const auto& [chunk, layer] : bucket.layers) {
      if (chunk >= static_cast<int>(accumulated_.size())) accumulated_.resize(chunk + 1);
      if (layer >= static_cast<int>(accumulated_[chunk].size())) {
        accumulated_[chunk].resize(layer + 1, 0);
      }
    }
  }
}

absl::Status GradientSync::Accumulated(int chunk, int layer) {
  const int bucket = buckets_.BucketOf(chunk, layer);
  if (bucket < 0) return Poll();  // no parameters: nothing to reduce
  if (finished_) {
    return absl::FailedPreconditionError(
        absl::StrCat("chunk ", chunk, " layer ", layer,
                     " accumulated gradients after the step's all-reduce finished"));
  }
  int& count = accumulated_[chunk][layer];
  if (++count > micro_batches_) {
    return absl::FailedPreconditionError(
        absl::StrCat("chunk ", chunk, " layer ", layer, " accumulated gradients ", count,
                     " times in a step of ", micro_batches_, " micro-batches"));
  }
  if (count == micro_batches_) --pending_layers_[bucket];
  return Poll();
}

absl::Status GradientSync::Poll() {
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    if (!it->handle->Done()) {
      ++it;
      continue;
    }
    RETURN_IF_ERROR(it->handle->Wait(absl::InfinitePast()));  // done: returns its outcome
    Completed(*it, absl::Now());
    it = in_flight_.erase(it);
  }
  return StartReady(/*all=*/false);
}

absl::Status GradientSync::StartReady(bool all) {
  std::vector<GradientBuckets::Bucket>& buckets = buckets_.buckets();
  while (next_ < static_cast<int>(buckets.size())) {
    GradientBuckets::Bucket& bucket = buckets[next_];
    // The buffers bucket waits for the step's end: the last forward may still update them.
    if (!all && (bucket.buffers || pending_layers_[next_] > 0)) break;
    InFlight started{.bucket = next_, .started_ns = scope_.TraceNow()};
    first_start_ = std::min(first_start_, absl::Now());
    // The buffers are averaged whole on every replica, whatever the gradients do.
    const Collective collective = bucket.buffers ? Collective::kAllReduce : reduction_;
    absl::StatusOr<std::unique_ptr<TransferHandle>> handle =
        group_.StartCollective(collective, next_, std::span<Tensor>(bucket.tensors));
    if (!handle.ok()) {
      return WithContext(handle.status(),
                         absl::StrCat("starting the ", CollectiveName(collective), " of ",
                                      bucket.buffers ? "the buffers bucket " : "gradient bucket ",
                                      next_, " (", bucket.bytes, " bytes)"));
    }
    started.handle = *std::move(handle);
    in_flight_.push_back(std::move(started));
    ++next_;
  }
  return absl::OkStatus();
}

void GradientSync::Completed(const InFlight& done, absl::Time at) {
  last_done_ = std::max(last_done_, at);
  if (!scope_.Traced()) return;
  TraceEvent event = scope_.EventAt(TraceKind::kAllReduceBucket);
  event.instruction = -1;
  event.micro_batch = done.bucket;
  event.bytes = buckets_.buckets()[done.bucket].bytes;
  event.begin_ns = done.started_ns;
  event.end_ns = scope_.TraceNow();
  scope_.trace()->Add(event);
}

absl::Status GradientSync::Finish(absl::Time deadline) {
  if (finished_) return absl::FailedPreconditionError("the step's all-reduce finished twice");
  finished_ = true;
  const absl::Time begin = absl::Now();
  RETURN_IF_ERROR(StartReady(/*all=*/true));
  for (InFlight& flight : in_flight_) {
    RETURN_IF_ERROR(WithContext(
        flight.handle->Wait(deadline),
        absl::StrCat("the ", CollectiveName(reduction_), " of bucket ", flight.bucket)));
    Completed(flight, absl::Now());
  }
  in_flight_.clear();
  exposed_ = absl::Now() - begin;
  for (GradientBuckets::Bucket& bucket : buckets_.buckets()) {
    if (!bucket.buffers) continue;
    for (Tensor& buffer : bucket.tensors) {
      RETURN_IF_ERROR(device_.ops().tensor.Scale(1.0f / static_cast<float>(replicas_), buffer));
    }
  }
  return absl::OkStatus();
}

void GradientSync::Report(pb::StepReport& report) const {
  report.set_all_reduce_buckets(next_);
  if (next_ == 0) return;
  report.set_all_reduce_ms(absl::ToDoubleMilliseconds(last_done_ - first_start_));
  report.set_all_reduce_exposed_ms(absl::ToDoubleMilliseconds(exposed_));
}

}  // namespace gpipe
