#include "runtime/coord/trace_session.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/file_io.h"
#include "runtime/core/status_macros.h"
#include "runtime/trace/trace_parts.h"
#include "runtime/trace/transfer_overlap.h"

namespace gpipe {
namespace {

bool Exists(const std::string& path) {
  std::error_code error;
  return std::filesystem::exists(path, error);
}

// This kernel boot's id: processes that share it share one monotonic clock. Empty if unknown.
std::string BootId() {
  // A /proc file reports size 0: read it as a stream.
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!file || !std::getline(file, id)) return "";
  return std::string(absl::StripAsciiWhitespace(id));
}

}  // namespace

std::unique_ptr<TraceSession> TraceSession::Create(const pb::Setup& setup, int rank,
                                                   int world_size) {
  const pb::Plan& plan = setup.plan();
  if (plan.runtime().trace().empty()) return nullptr;
  TraceRunInfo info = TraceRunInfoOf(plan, world_size);
  // Replica r's stage s is rank r * stages + s (runtime/schedule/rank_layout.h).
  const int replica = rank / std::max(1, setup.layout().stages());
  return std::unique_ptr<TraceSession>(new TraceSession(plan.runtime().trace(), std::move(info),
                                                        rank, setup.stage(), replica,
                                                        plan.runtime().trace_steps()));
}

void TraceSession::RemoveStaleParts(const std::string& path, int world_size) {
  if (path.empty()) return;
  for (int r = 0; r < world_size; ++r) RemoveTraceParts(path, r);
}

TraceSession::TraceSession(std::string path, TraceRunInfo info, int rank, int stage, int replica,
                           int steps)
    : path_(std::move(path)),
      info_(std::move(info)),
      rank_(rank),
      stage_(stage),
      replica_(replica),
      recorder_(TraceRecorderOptions{.steps = steps}) {}

std::string TraceSession::PartPath(int rank) const { return TracePartPath(path_, rank); }

void TraceSession::SaveProgress() {
  const size_t recorded = recorder_.events().size();
  if (!saving_progress_ || finished_ || recorded == saved_events_) return;
  pb::RankTrace events = recorder_.ToProto(rank_, stage_, replica_, saved_events_);
  events.set_clock_offset_ns(offset_ns_);
  events.set_clock_uncertainty_ns(uncertainty_ns_);
  saving_progress_ = AppendTraceProgress(TraceProgressPath(path_, rank_), events).ok();
  saved_events_ = recorded;
}

absl::Status TraceSession::AlignClocks(ControlChannel& control, absl::Time deadline, int rounds) {
  const std::string boot_id = BootId();
  if (rank_ != 0) {
    while (true) {
      pb::ClockProbe probe;
      RETURN_IF_ERROR(control.Recv(0, kControlTagClock, probe, deadline));
      if (probe.final()) {
        offset_ns_ = probe.offset_ns();
        uncertainty_ns_ = probe.uncertainty_ns();
        return absl::OkStatus();
      }
      pb::ClockProbe answer;
      answer.set_t_ns(recorder_.NowNs());
      answer.set_boot_id(boot_id);
      answer.set_epoch_ns(recorder_.EpochNs());
      RETURN_IF_ERROR(control.Send(0, kControlTagClock, answer, deadline));
    }
  }
  for (int r = 1; r < control.size(); ++r) {
    int64_t best_rtt = std::numeric_limits<int64_t>::max();
    int64_t best_offset = 0;
    for (int i = 0; i < rounds; ++i) {
      pb::ClockProbe probe;
      const int64_t sent = recorder_.NowNs();
      probe.set_t_ns(sent);
      RETURN_IF_ERROR(control.Send(r, kControlTagClock, probe, deadline));
      pb::ClockProbe answer;
      RETURN_IF_ERROR(control.Recv(r, kControlTagClock, answer, deadline));
      const int64_t received = recorder_.NowNs();
      // The rank read its clock somewhere in [sent, received]: assume the middle.
      if (received - sent < best_rtt) {
        best_rtt = received - sent;
        best_offset = sent + (received - sent) / 2 - answer.t_ns();
      }
      if (!boot_id.empty() && answer.boot_id() == boot_id) {
        // One machine, one monotonic clock: the epochs give the offset exactly.
        best_rtt = 0;
        best_offset = answer.epoch_ns() - recorder_.EpochNs();
      }
    }
    pb::ClockProbe final_probe;
    final_probe.set_final(true);
    final_probe.set_offset_ns(best_offset);
    final_probe.set_uncertainty_ns(best_rtt / 2);
    RETURN_IF_ERROR(control.Send(r, kControlTagClock, final_probe, deadline));
  }
  return absl::OkStatus();
}

pb::RankTrace TraceSession::OwnTrace(const std::string& error) const {
  pb::RankTrace trace = recorder_.ToProto(rank_, stage_, replica_);
  trace.set_clock_offset_ns(offset_ns_);
  trace.set_clock_uncertainty_ns(uncertainty_ns_);
  if (!error.empty()) trace.set_error(error);
  return trace;
}

absl::Status TraceSession::Finish(ControlChannel& control, absl::Time deadline) {
  // Until this succeeds the failure path still writes this rank's events.
  ASSIGN_OR_RETURN(std::vector<std::string> gathered,
                   control.GatherToRoot(OwnTrace(""), deadline, kControlTagTrace));
  std::remove(TraceProgressPath(path_, rank_).c_str());
  if (rank_ != 0) {
    finished_ = true;
    return absl::OkStatus();
  }
  std::vector<pb::RankTrace> ranks(gathered.size());
  for (size_t r = 0; r < gathered.size(); ++r) {
    if (!ranks[r].ParseFromString(gathered[r])) {
      return absl::DataLossError(absl::StrCat("unreadable trace from rank ", r));
    }
  }
  RETURN_IF_ERROR(WithContext(WriteChromeTrace(path_, info_, ranks), "runtime.trace"));
  transfer_overlap_ = FormatTransferOverlap(SummarizeTransferOverlap(ranks, info_.stages));
  finished_ = true;
  return absl::OkStatus();
}

absl::Status TraceSession::FinishAfterFailure(const std::string& error, absl::Duration wait) {
  if (finished_) return absl::OkStatus();
  finished_ = true;
  const pb::RankTrace own = OwnTrace(error);
  if (rank_ != 0) {
    RETURN_IF_ERROR(WriteFileAtomically(PartPath(rank_), own.SerializeAsString()));
    std::remove(TraceProgressPath(path_, rank_).c_str());  // the whole part supersedes it
    return absl::OkStatus();
  }

  // Rank 0: the parts of the other ranks that arrive in time.
  std::vector<pb::RankTrace> ranks = {own};
  std::vector<bool> have(info_.ranks, false);
  have[0] = true;
  const absl::Time until = absl::Now() + wait;
  int missing = info_.ranks - 1;
  while (true) {
    for (int r = 1; r < info_.ranks; ++r) {
      if (have[r] || !Exists(PartPath(r))) continue;
      auto bytes = ReadWholeFile(PartPath(r));
      pb::RankTrace part;
      if (!bytes.ok() || !part.ParseFromString(*bytes)) continue;  // retried until the wait ends
      ranks.push_back(std::move(part));
      have[r] = true;
      --missing;
    }
    if (missing == 0 || absl::Now() >= until) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  // A rank that never wrote its part (killed) may have left its events up to its last step.
  const TraceParts progress = ReadTraceParts(path_, info_.ranks, have);
  for (const pb::RankTrace& part : progress.ranks) ranks.push_back(part);
  TraceRunInfo info = info_;
  info.status = error;
  RETURN_IF_ERROR(WithContext(WriteChromeTrace(path_, info, ranks), "runtime.trace"));
  // Only now: a rank waiting in AwaitMerge may let the job end once its part is gone.
  for (int r = 1; r < info_.ranks; ++r) {
    if (have[r]) std::remove(PartPath(r).c_str());
  }
  for (const std::string& file : progress.files) std::remove(file.c_str());
  std::remove(TraceProgressPath(path_, 0).c_str());
  return absl::OkStatus();
}

bool TraceSession::AwaitMerge(absl::Duration wait) const {
  const absl::Time until = absl::Now() + wait;
  while (Exists(PartPath(rank_))) {
    if (absl::Now() >= until) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

}  // namespace gpipe
