// Helpers for the MPI tests: a counting host allocator, deterministic tensor contents keyed by
// (rank, key, index) like nccl-tests, and a deadline-bounded barrier. One thread per process.
#ifndef GPIPE_TESTS_COMM_MPI_TEST_SUPPORT_H_
#define GPIPE_TESTS_COMM_MPI_TEST_SUPPORT_H_

#include <cstdint>

#include "absl/time/time.h"
#include "runtime/core/allocator.h"
#include "runtime/core/tensor.h"

namespace gpipe::testing {

// Host memory from the C++ heap, with the bytes currently handed out.
class CountingHostAllocator final : public Allocator {
 public:
  absl::StatusOr<void*> Allocate(int64_t bytes, MemoryKind kind) override;
  void Free(void* ptr, int64_t bytes, MemoryKind kind) override;
  void Recount(int64_t, MemoryKind, MemoryKind) override {}  // counts bytes, not kinds
  bool host_accessible() const override { return true; }
  int64_t live_bytes() const { return live_bytes_; }

 private:
  int64_t live_bytes_ = 0;
};

int WorldRank();
int WorldSize();

// MPI_Ibarrier on MPI_COMM_WORLD, polled for at most 30 s; aborts the job if it does not finish
// (so a broken test fails instead of hanging).
void SyncRanks();

absl::Time DeadlineIn(absl::Duration duration);

// The value element `index` of a tensor sent by `rank` under `key` holds: an integer below
// 2^24, so exact in f32 and unique per (rank, key, index) for the sizes used in tests.
int64_t KeyedValue(int rank, int key, int64_t index);
// Fills f32 or i64 `tensor` with KeyedValue(rank, key, i).
void FillKeyed(Tensor& tensor, int rank, int key);
// How many elements differ from KeyedValue(rank, key, i).
int64_t CountKeyedMismatches(const Tensor& tensor, int rank, int key);

}  // namespace gpipe::testing

#endif  // GPIPE_TESTS_COMM_MPI_TEST_SUPPORT_H_
