// ControlChannel: the control plane. Small protobuf messages (setup, step commands, reports,
// decisions, aborts) as point-to-point MPI messages on a private duplicate of the world
// communicator. Every call takes a deadline and ends early with ABORTED when any rank has
// called NotifyAbort; PollAbort is the abort poller every comm wait (control and data) uses.
// Messages travel with their type name: receiving another type fails naming both.
// Thread-compatible: one thread drives it (and every other MPI object of the process).
#ifndef GPIPE_RUNTIME_COMM_CONTROL_CHANNEL_H_
#define GPIPE_RUNTIME_COMM_CONTROL_CHANNEL_H_

#include <mpi.h>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/message_lite.h"
#include "runtime/comm/clock.h"
#include "runtime/comm/orphaned_requests.h"

namespace gpipe {

// Control-plane message tags (the step protocol is documented in coord/worker.cc).
// kControlTagAbort is reserved for NotifyAbort; Broadcast and GatherToRoot default to their own.
enum ControlTag : int {
  kControlTagSetup = 1,
  kControlTagStepCommand = 2,
  kControlTagStepReport = 3,
  kControlTagDecision = 4,
  kControlTagExport = 5,
  kControlTagAbort = 6,
  kControlTagBroadcast = 7,
  kControlTagGather = 8,
  kControlTagClock = 9,        // clock-offset probes of a traced run
  kControlTagTrace = 10,       // every rank's trace, gathered to rank 0
  kControlTagCheckpoint = 11,  // checkpoint shard reports and the commit's result
  kControlTagResume = 12,      // what each rank restored from a checkpoint, and the verdict
};
// "step report" for kControlTagStepReport, "tag 42" for tags outside the enum.
std::string ControlTagName(int tag);

class ControlChannel {
 public:
  // Collective over `world`: every rank must call it. `clock` (nullable: real time) must
  // outlive the channel. Fails with DEADLINE_EXCEEDED when some rank does not join within
  // `setup_timeout`.
  static absl::StatusOr<std::unique_ptr<ControlChannel>> Create(
      MPI_Comm world, const Clock* clock, absl::Duration setup_timeout = absl::Minutes(5));

  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;
  ~ControlChannel();

  // Point-to-point. Messages from one rank with one tag arrive in the order they were sent.
  absl::Status Send(int peer, int tag, const google::protobuf::MessageLite& message,
                    absl::Time deadline);
  // Receives the next `tag` message from `peer` into `message`. INVALID_ARGUMENT when it holds
  // another message type, DATA_LOSS when it does not parse; both name the peer and the tag.
  absl::Status Recv(int peer, int tag, google::protobuf::MessageLite& message, absl::Time deadline);
  // Rank 0 sends `message` to every other rank (point-to-point); the others receive into it.
  absl::Status Broadcast(google::protobuf::MessageLite& message, absl::Time deadline,
                         int tag = kControlTagBroadcast);
  // Rank 0 returns every rank's serialized message in rank order (its own included); the
  // others send theirs and return an empty vector. Rank 0's deadline error names the ranks it
  // has not heard from.
  absl::StatusOr<std::vector<std::string>> GatherToRoot(
      const google::protobuf::MessageLite& message, absl::Time deadline,
      int tag = kControlTagGather);

  // Tells every other rank that this rank is aborting the job with `message` (best effort,
  // returns within about a second even when peers are dead or never look). Only the first
  // call sends. Afterwards this rank's own PollAbort reports it too.
  void NotifyAbort(const std::string& message);
  // "rank R aborted the job: <message>" once an abort from any rank has been seen (sticky);
  // nullopt while none has.
  std::optional<std::string> PollAbort();

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  ControlChannel(MPI_Comm comm, int rank, int size, int tag_ub, const Clock* clock);

  absl::Status CheckPeerAndTag(int peer, int tag) const;
  // Cancels what is still active in `requests` and keeps `buffer` until MPI lets go of it.
  void Abandon(std::span<MPI_Request> requests, std::shared_ptr<const void> buffer);
  const Clock& clock() const { return clock_ != nullptr ? *clock_ : real_clock_; }

  MPI_Comm comm_;
  int rank_;
  int size_;
  int tag_ub_;
  const Clock* clock_;
  RealClock real_clock_;
  std::optional<std::string> abort_message_;
  bool abort_sent_ = false;
  OrphanedRequests orphans_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_CONTROL_CHANNEL_H_
