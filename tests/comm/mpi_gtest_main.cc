// gtest main for tests run under mpirun: every rank runs every test; rank 0 prints the usual
// report, the other ranks print only their failures (prefixed with the rank); the process exits
// non-zero on every rank when any rank failed.
#include <mpi.h>

#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace {

// Prints a non-zero rank's failed assertions, which rank 0's report cannot show.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  // The test's name is remembered here: asking UnitTest for it from OnTestPartResult would
  // deadlock (gtest holds its lock while reporting a result).
  void OnTestStart(const ::testing::TestInfo& test) override {
    test_name_ = std::string(test.test_suite_name()) + "." + test.name();
  }
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s failed at %s:%d\n%s\n", rank_, test_name_.c_str(),
                 result.file_name() != nullptr ? result.file_name() : "?", result.line_number(),
                 result.summary());
    std::fflush(stderr);
  }

 private:
  int rank_;
  std::string test_name_ = "(outside a test)";
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) return 2;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = failed;
  if (MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS) {
    any_failed = 1;
  }
  if (rank == 0 && any_failed && !failed) {
    std::fprintf(stderr, "[rank 0] another rank failed (see its [rank N] lines)\n");
  }
  MPI_Finalize();
  return any_failed ? 1 : 0;
}
