// Zero-bubble schedules ZB-H1 and ZB-H2 (Qi et al., "Zero Bubble Pipeline Parallelism",
// ICLR 2024). Every backward is split into BackwardInput (B: dL/d input, on the critical path
// because the previous stage waits for it) and BackwardWeight (W: the parameter gradients,
// which nothing downstream waits for), so W can fill the bubbles 1F1B leaves.
//
// ZB-H1 is the paper's hand-crafted order. Stage s of K runs 1F1B's order of F and B (warm-up
// min(K-s-1, M) forwards, then one F and one B while forwards remain, then the remaining B's;
// one_f_one_b_builder.h), puts W(j - s) right after B(j) once j >= s, and runs the last s W's at
// the end: W lags s micro-batches on stage s, so the later stages, idle in 1F1B's cool-down
// while the last B's ripple back, keep W's to fill that time. Every stage holds at most
// min(K, M) micro-batches (forwarded, W not yet run): 1F1B's peak, the first stage's, now on
// every stage. With unit costs (F = B = W = 1, free transfers) it takes 3M + K - 1 when M >= K
// (2K + 2M - 1 when M < K) against 1F1B's 3M + 3K - 3: bubble (K-1)/(3M+K-1), about a third of
// 1F1B's, and 3M + K - 1 is the least any schedule takes (stage K-1 cannot start before K-1).
// With other costs, free transfers and M >= K, each stage idles (K-1)(F + B - W), the paper's
// figure, when W <= min(F, B) (measured for K <= 16, M <= 64 at several such costs; with a
// larger W the order cannot hide the whole W's and idles more).
//
// ZB-H2 comes from a deterministic list scheduler: it simulates all stages with unit costs and
// free transfers and, whenever a stage is free, starts the first of
//   1. B of its oldest un-backwarded micro-batch, when the output gradient is there (the last
//      stage: when its forward is done) -- B first keeps the critical path moving;
//   2. F of the next micro-batch, when its input is there and the stage holds fewer than
//      2K - 1 - s micro-batches;
//   3. W of its oldest micro-batch whose B has run;
// and otherwise idles. It cannot stall: with no W pending, either the deepest stage holding a
// micro-batch can run its B, or the stage after it holds nothing and can take the F it has
// already been sent. It also takes 3M + K - 1 (2K + 2M - 1 when M < K) with unit costs.
//
// What H2's extra memory buys, measured with VerifyProgram (K in 2..16, M in 1..64): with free
// transfers nothing -- H2's makespan equals H1's for every shape under unit costs and under
// unequal costs (W = 0.5, W = 2, B = 1.5 with W = 0.5, load = 0.5). The paper's H2 is a
// parallelogram (stage s busy from s to 3M + s) whose ramps vanish only because the paper also
// drops the synchronization before the optimizer step, so the next step's start overlaps this
// one's end; here every step ends with AllReduceGrads, OptimizerStep and the makespan is the
// last stage's finish, so the ramp K - 1 stays for both. With transfer latency H2 is shorter
// for every shape with M >= 3 (930 of 960) and never longer: forwards further ahead of their
// backwards leave slack for the round trips. OpCosts{send = 0.25}: K=4 M=16 H1 54, H2 52.5
// (1F1B 64); K=8 M=32 H1 110, H2 106.5 (1F1B 134). send = 1: K=4 M=16 H1 71, H2 57; K=8 M=32
// H1 151, H2 117. H2 holds up to 2K - 1 - s on stage s.
//
// F, B and W each run in micro-batch order 0..M-1 on every stage in both, so gradients
// accumulate in the same order as 1F1B's. Pure function of (variant, K, M).
#ifndef GPIPE_RUNTIME_SCHEDULE_ZERO_BUBBLE_BUILDER_H_
#define GPIPE_RUNTIME_SCHEDULE_ZERO_BUBBLE_BUILDER_H_

#include "runtime/schedule/program.h"

namespace gpipe::schedule {

enum class ZeroBubbleVariant { kH1, kH2 };

// Most micro-batches stage `stage` of `stages` holds under `variant` (forwarded, W not yet
// run), at most M as well: H1 K on every stage (1F1B's peak on its first stage); H2 2K - 1 - s,
// the cap its list scheduler enforces.
int ZeroBubbleLiveCap(ZeroBubbleVariant variant, int stage, int stages);

// All stages' programs, kind ZERO_BUBBLE_H1 or ZERO_BUBBLE_H2, one chunk. Callers validate
// K >= 1, M >= 1 (BuildProgram does).
Program BuildZeroBubbleProgram(ZeroBubbleVariant variant, int stages, int micro_batches);

}  // namespace gpipe::schedule

#endif  // GPIPE_RUNTIME_SCHEDULE_ZERO_BUBBLE_BUILDER_H_
