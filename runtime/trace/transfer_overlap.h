// TransferOverlap: how much of each boundary transfer the compute hid, per rank, from a traced
// run's events on rank 0's clock. A transfer is in flight from the later of its send's and its
// receive's posts until the receive completed; the part of that span during which the receiving
// instruction (RecvActivation / RecvGrad) was blocked is exposed, the rest hidden. (A receive
// instruction that waits for a send not yet posted waits for the pipeline, not the transfer:
// that time is the bubble and is not counted.) Training steps and evaluations alike. The
// figures are as good as the ranks' clock alignment (the trace's clock_uncertainty_us): a
// transfer whose send seems to come after its receive completed counts as instantaneous.
#ifndef GPIPE_RUNTIME_TRACE_TRANSFER_OVERLAP_H_
#define GPIPE_RUNTIME_TRACE_TRANSFER_OVERLAP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/control.pb.h"

namespace gpipe {

struct RankTransferOverlap {
  int rank = 0;
  int stage = 0;
  int replica = 0;
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t transfers_received = 0;  // matched with their send
  // Of the received transfers. A completion is seen when the executor polls, between
  // instructions, so this is an upper bound (and the hidden fraction with it); exposed_ms, the
  // time the receiving instructions were blocked while the data was on its way, is exact.
  double in_flight_ms = 0;
  double exposed_ms = 0;
  // 1 - exposed / in flight; 1 when nothing was in flight.
  double hidden_fraction() const {
    return in_flight_ms > 0 ? 1.0 - exposed_ms / in_flight_ms : 1.0;
  }
};

// One entry per rank in `ranks` (any order; sorted by rank). `stages`: the pipeline's stage
// count (the chunk a send names is translated to its receiver's as the pipeline wraps).
std::vector<RankTransferOverlap> SummarizeTransferOverlap(const std::vector<pb::RankTrace>& ranks,
                                                          int stages);

// "stage 1, replica 0: received 1.50 MiB in 24 transfers, 3.20 ms in flight, 0.28 ms exposed,
// 91.2% hidden; sent 1.50 MiB", one line per rank.
std::string FormatTransferOverlap(const std::vector<RankTransferOverlap>& overlap);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_TRACE_TRANSFER_OVERLAP_H_
