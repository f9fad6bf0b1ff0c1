// The point-to-point transfers of a Program, paired. Every (kind, sender stage, receiver stage)
// link is a FIFO stream, as an MPI message stream between two ranks is: the n-th send on a link
// meets the n-th receive. Check() fails (INVALID_ARGUMENT, naming stage, instruction index and
// instruction) when a send has no receive, a receive no send, or the two orders differ.
#ifndef GPIPE_RUNTIME_SCHEDULE_TRANSFERS_H_
#define GPIPE_RUNTIME_SCHEDULE_TRANSFERS_H_

#include <vector>

#include "absl/status/status.h"
#include "runtime/schedule/program.h"

namespace gpipe::schedule {

// kSkip and kSkipGrad carry skip connections (Program::skips): the output a join layer reads,
// sent straight from the virtual stage that computes it, and its gradient back.
enum class TransferKind { kActivation, kGrad, kSkip, kSkipGrad };

// One end of a transfer. `micro_batch` and `chunk` are as the receiving side names them
// (a send's chunk is translated to its receiver's), so paired ends compare equal.
struct TransferEnd {
  int stage = 0;
  int index = 0;  // instruction index on `stage`
  int micro_batch = 0;
  int chunk = 0;
  int skip_layer = -1;  // the join layer of a skip transfer; -1 for the others
};

struct Link {
  TransferKind kind = TransferKind::kActivation;
  int from_stage = 0;
  int to_stage = 0;
  std::vector<TransferEnd> sends;  // in issue order
  std::vector<TransferEnd> recvs;  // in post order
};

// Where one instruction sits on the links: link = -1 for non-transfers.
struct TransferSlot {
  int link = -1;
  int position = 0;  // n: the n-th send or receive on the link
  bool is_send = false;
};

class Transfers {
 public:
  // Precondition: every stage passed WalkStage (ranges and stage positions are valid).
  static Transfers Collect(const Program& program);

  absl::Status Check(const Program& program) const;
  // The stricter matching of a transport that pairs point-to-point operations by issue order
  // per pair of ranks, whatever they carry (NCCL): between two stages, the n-th send of either
  // kind must meet the n-th receive posted by the other side. INVALID_ARGUMENT naming both
  // instructions otherwise. A stage's link to itself (a V_SHAPE turn, a local hand-off) is
  // exempt. Call after Check.
  absl::Status CheckPerPeerOrder(const Program& program) const;

  const std::vector<Link>& links() const { return links_; }
  const TransferSlot& slot(int stage, int index) const { return slots_[stage][index]; }

 private:
  std::vector<Link> links_;
  std::vector<std::vector<TransferSlot>> slots_;  // [stage][instruction index]
};

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_TRANSFERS_H_
