#include "tests/comm/mpi_test_support.h"

#include <mpi.h>

#include <cstdlib>
#include <span>
#include <string>

#include "absl/time/clock.h"
#include "runtime/comm/clock.h"
#include "runtime/comm/wait.h"
#include "runtime/core/check.h"

namespace gpipe::testing {

absl::StatusOr<void*> CountingHostAllocator::Allocate(int64_t bytes, MemoryKind kind) {
  const size_t rounded = static_cast<size_t>((bytes + 63) / 64 * 64);
  void* ptr = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (ptr == nullptr) return absl::ResourceExhaustedError("test allocator out of memory");
  live_bytes_ += bytes;
  return ptr;
}

void CountingHostAllocator::Free(void* ptr, int64_t bytes, MemoryKind kind) {
  live_bytes_ -= bytes;
  std::free(ptr);
}

int WorldRank() {
  int rank = 0;
  GPIPE_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank) == MPI_SUCCESS);
  return rank;
}

int WorldSize() {
  int size = 0;
  GPIPE_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size) == MPI_SUCCESS);
  return size;
}

void SyncRanks() {
  MPI_Request request = MPI_REQUEST_NULL;
  GPIPE_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &request) == MPI_SUCCESS);
  RealClock clock;
  const absl::Status status = WaitForRequests(
      std::span<MPI_Request>(&request, 1), {}, absl::Now() + absl::Seconds(30), AbortPoller(),
      clock, [] { return std::string("test barrier"); }, /*cancel_on_failure=*/false);
  GPIPE_CHECK(status.ok()) << status;
}

absl::Time DeadlineIn(absl::Duration duration) { return absl::Now() + duration; }

int64_t KeyedValue(int rank, int key, int64_t index) {
  return (int64_t{rank} * 64 + key % 64) * 4096 + index % 4096 + (index / 4096) % 7;
}

void FillKeyed(Tensor& tensor, int rank, int key) {
  for (int64_t i = 0; i < tensor.num_elements(); ++i) {
    if (tensor.dtype() == DType::kF32) {
      tensor.f32()[i] = static_cast<float>(KeyedValue(rank, key, i));
    } else {
      tensor.data<int64_t>()[i] = KeyedValue(rank, key, i) * 1'000'003;
    }
  }
}

int64_t CountKeyedMismatches(const Tensor& tensor, int rank, int key) {
  int64_t mismatches = 0;
  for (int64_t i = 0; i < tensor.num_elements(); ++i) {
    if (tensor.dtype() == DType::kF32) {
      mismatches += tensor.f32()[i] != static_cast<float>(KeyedValue(rank, key, i));
    } else {
      mismatches += tensor.data<int64_t>()[i] != KeyedValue(rank, key, i) * 1'000'003;
    }
  }
  return mismatches;
}

}  // namespace gpipe::testing
