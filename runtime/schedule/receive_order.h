// MatchReceivesToSends: the receive order a transport that matches by issue order per pair of
// ranks (NCCL: one communicator per direction) needs. Builders place a receive right before the
// instruction that consumes it (instruction_blocks.h); when one direction between two stages
// carries both kinds (a V_SHAPE pair carries chunk 0's activations and chunk 1's gradients the
// same way), the consumers' order can differ from the order the sender issues the sends. This
// moves receives earlier, never later, until each stage posts its receives from each peer in that
// peer's send order: receive j (in send order) goes to min(its consumer, receive j+1's place).
// This adds no deadlock: a receive moves only to right before the receive of an item its sender
// sends later, so reaching its new place the stage would wait anyway, for that later item, which
// cannot come before this one. Callers still verify the result (VerifyProgram). Local hand-offs
// (a stage to itself) are left alone. A skip connection's receive (skip_transfers.h) is paired
// with the send of its own item, so receives of several routes on one link, placed per
// instruction, also come into the send order.
// Precondition: the pipeline's own transfers pair up per link (Transfers::Check), and every skip
// receive's item is sent on its link. Pure.
#ifndef GPIPE_RUNTIME_SCHEDULE_RECEIVE_ORDER_H_
#define GPIPE_RUNTIME_SCHEDULE_RECEIVE_ORDER_H_

#include <vector>

#include "runtime/schedule/program.h"

namespace gpipe::schedule {

// Reorders `program` in place; returns, per stage, the old index of each instruction now at
// index i (the identity where nothing moved).
std::vector<std::vector<int>> MatchReceivesToSends(Program& program);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_RECEIVE_ORDER_H_
