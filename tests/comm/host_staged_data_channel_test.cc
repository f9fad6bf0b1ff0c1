// HostStagedDataChannel over a real MpiDataChannel between 2 ranks, with the CPU device standing
// in for a device the host cannot read (its copies are memcpy, counted here): device tensors
// travel through host staging memory, a receive writes its device tensor exactly once and only
// when it completes, and the inner channel's header checks still reach the caller.
#include "runtime/comm/host_staged_data_channel.h"

#include <mpi.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/mpi_data_channel.h"
#include "runtime/device/cpu/cpu_device.h"
#include "tests/comm/mpi_test_support.h"

namespace gpipe {
namespace {

using ::gpipe::testing::CountKeyedMismatches;
using ::gpipe::testing::DeadlineIn;
using ::gpipe::testing::FillKeyed;
using ::gpipe::testing::KeyedValue;
using ::gpipe::testing::SyncRanks;

constexpr absl::Duration kGenerous = absl::Seconds(20);
constexpr float kUntouched = -7.0f;

// A CpuDevice that counts its host<->device copies.
class CopyCountingDevice final : public Device {
 public:
  absl::StatusOr<void*> Allocate(int64_t bytes, MemoryKind kind) override {
    return cpu_.Allocate(bytes, kind);
  }
  void Free(void* ptr, int64_t bytes, MemoryKind kind) override { cpu_.Free(ptr, bytes, kind); }
  void Recount(int64_t bytes, MemoryKind from, MemoryKind to) override {
    cpu_.Recount(bytes, from, to);
  }
  bool host_accessible() const override { return cpu_.host_accessible(); }
  std::string name() const override { return "counting-cpu"; }
  MemoryTracker& memory() override { return cpu_.memory(); }
  const Ops& ops() override { return cpu_.ops(); }
  Allocator& host_staging() override { return cpu_.host_staging(); }
  absl::Status CopyFromHost(const void* source, int64_t source_bytes,
                            Tensor& destination) override {
    ++copies_from_host;
    return cpu_.CopyFromHost(source, source_bytes, destination);
  }
  absl::Status CopyToHost(const Tensor& source, void* destination,
                          int64_t destination_bytes) override {
    ++copies_to_host;
    return cpu_.CopyToHost(source, destination, destination_bytes);
  }
  Allocator& offload_host() override { return cpu_.offload_host(); }
  MemoryTracker& offload_memory() override { return cpu_.offload_memory(); }
  absl::StatusOr<std::unique_ptr<AsyncCopy>> StartCopyToHost(Tensor source,
                                                             Tensor destination) override {
    return cpu_.StartCopyToHost(std::move(source), std::move(destination));
  }
  absl::StatusOr<std::unique_ptr<AsyncCopy>> StartCopyFromHost(Tensor source,
                                                               Tensor destination) override {
    return cpu_.StartCopyFromHost(std::move(source), std::move(destination));
  }
  absl::StatusOr<std::unique_ptr<DeviceEvent>> RecordEvent() override { return cpu_.RecordEvent(); }
  absl::StatusOr<double> ElapsedSeconds(const DeviceEvent& start, const DeviceEvent& end) override {
    return cpu_.ElapsedSeconds(start, end);
  }
  absl::Status Synchronize() override { return cpu_.Synchronize(); }

  int copies_from_host = 0;
  int copies_to_host = 0;

 private:
  CpuDevice cpu_;
};

class HostStagedDataChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rank_ = gpipe::testing::WorldRank();
    absl::StatusOr<std::unique_ptr<MpiDataChannel>> host_channel =
        MpiDataChannel::Create(MPI_COMM_WORLD, AbortPoller(), nullptr);
    ASSERT_TRUE(host_channel.ok()) << host_channel.status();
    channel_ = std::make_unique<HostStagedDataChannel>(std::move(*host_channel), device_);
  }
  // Runs after failed assertions too, so ranks stay in step from test to test.
  void TearDown() override { SyncRanks(); }

  // A device tensor whose every element is kUntouched.
  Tensor DeviceTensor(const Shape& shape) {
    absl::StatusOr<Tensor> tensor =
        Tensor::Empty(device_, shape, DType::kF32, MemoryKind::kBoundary);
    GPIPE_CHECK(tensor.ok()) << tensor.status();
    for (float& v : tensor->f32_span()) v = kUntouched;
    return *std::move(tensor);
  }
  static bool AllUntouched(const Tensor& tensor) {
    for (float v : tensor.f32_span()) {
      if (v != kUntouched) return false;
    }
    return true;
  }
  // Rank 1 sends a keyed tensor of `shape` to rank 0 under `key` and waits for the send.
  void SendFromRankOne(const Shape& shape, const TransferKey& key, int fill_key) {
    Tensor outgoing = DeviceTensor(shape);
    FillKeyed(outgoing, rank_, fill_key);
    auto send = channel_->Send(outgoing, 0, key);
    ASSERT_TRUE(send.ok()) << send.status();
    EXPECT_TRUE((*send)->Wait(DeadlineIn(kGenerous)).ok());
    EXPECT_EQ(device_.copies_to_host, 1) << "a send stages its tensor once";
  }

  int rank_ = 0;
  // Declared first so it outlives every tensor the channel might still hold.
  CopyCountingDevice device_;
  std::unique_ptr<HostStagedDataChannel> channel_;
};

TEST_F(HostStagedDataChannelTest, ReceiveWritesTheDeviceTensorOnlyWhenDoneAndOnlyOnce) {
  if (rank_ > 1) GTEST_SKIP() << "between ranks 0 and 1";
  const TransferKey key{.step = 2, .micro_batch = 3};
  const Shape shape({5, 77});
  if (rank_ == 1) {
    SyncRanks();  // rank 0 has posted its receive and checked that nothing happened yet
    SendFromRankOne(shape, key, 3);
    return;
  }
  Tensor inbox = DeviceTensor(shape);
  auto receive = channel_->Recv(inbox, 1, key);
  ASSERT_TRUE(receive.ok()) << receive.status();
  EXPECT_FALSE((*receive)->Done());
  EXPECT_TRUE(AllUntouched(inbox)) << "written before anything was sent";
  EXPECT_EQ(device_.copies_from_host, 0);
  SyncRanks();
  const absl::Time give_up = DeadlineIn(kGenerous);
  while (!(*receive)->Done() && absl::Now() < give_up) absl::SleepFor(absl::Microseconds(200));
  ASSERT_TRUE((*receive)->Done());
  EXPECT_EQ(device_.copies_from_host, 1);
  EXPECT_EQ(CountKeyedMismatches(inbox, 1, 3), 0);
  // Asking again neither copies again nor changes the outcome.
  for (float& v : inbox.f32_span()) v = kUntouched;
  EXPECT_TRUE((*receive)->Done());
  EXPECT_TRUE((*receive)->Wait(absl::InfinitePast()).ok());
  EXPECT_EQ(device_.copies_from_host, 1);
  EXPECT_TRUE(AllUntouched(inbox));
}

TEST_F(HostStagedDataChannelTest, WaitAloneDeliversTheValuesOnce) {
  if (rank_ > 1) GTEST_SKIP() << "between ranks 0 and 1";
  const TransferKey key{.step = 5, .micro_batch = 0, .kind = TransferKind::kGradient};
  const Shape shape({64, 100});
  if (rank_ == 1) {
    SendFromRankOne(shape, key, 11);
    return;
  }
  Tensor inbox = DeviceTensor(shape);
  auto receive = channel_->Recv(inbox, 1, key);
  ASSERT_TRUE(receive.ok()) << receive.status();
  const absl::Status status = (*receive)->Wait(DeadlineIn(kGenerous));
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(CountKeyedMismatches(inbox, 1, 11), 0);
  EXPECT_TRUE((*receive)->Wait(DeadlineIn(kGenerous)).ok());
  EXPECT_EQ(device_.copies_from_host, 1);
}

TEST_F(HostStagedDataChannelTest, HeaderMismatchIsReportedAndTheDeviceTensorStaysUntouched) {
  if (rank_ > 1) GTEST_SKIP() << "between ranks 0 and 1";
  if (rank_ == 1) {
    SendFromRankOne(Shape({8, 16}), TransferKey{.step = 4, .micro_batch = 5}, 0);
    return;
  }
  Tensor inbox = DeviceTensor(Shape({8, 16}));
  auto receive = channel_->Recv(inbox, 1, TransferKey{.step = 3, .micro_batch = 5});
  ASSERT_TRUE(receive.ok()) << receive.status();
  const absl::Status status = (*receive)->Wait(DeadlineIn(kGenerous));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "rank 0 expected activation step=3 mb=5 f32[8, 16] from rank 1 but received "
            "activation step=4 mb=5 f32[8, 16]");
  EXPECT_TRUE((*receive)->Done());
  EXPECT_EQ((*receive)->Wait(absl::InfinitePast()), status) << "the failure is kept";
  EXPECT_TRUE(AllUntouched(inbox));
  EXPECT_EQ(device_.copies_from_host, 0);
}

TEST_F(HostStagedDataChannelTest, ReceiveDeadlineIsReportedAndTheDeviceTensorStaysUntouched) {
  if (rank_ != 0) return;  // nobody sends
  Tensor inbox = DeviceTensor(Shape({9}));
  auto receive = channel_->Recv(inbox, 1, TransferKey{.step = 6, .micro_batch = 2});
  ASSERT_TRUE(receive.ok()) << receive.status();
  const absl::Status status = (*receive)->Wait(absl::Now() + absl::Milliseconds(100));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("from rank 1"));
  EXPECT_TRUE(AllUntouched(inbox));
  EXPECT_EQ(device_.copies_from_host, 0);
}

TEST_F(HostStagedDataChannelTest, ReduceGroupStagesABucketAndCopiesTheSumsBackWhenDone) {
  // The data-parallel gradient path of a GPU: a bucket is staged to the host at its start and
  // the device tensors are written once, when the reduction is seen complete.
  const int size = gpipe::testing::WorldSize();
  std::vector<int> group(size);
  for (int r = 0; r < size; ++r) group[r] = r;
  absl::StatusOr<std::unique_ptr<ReduceGroup>> reducer =
      channel_->CreateReduceGroup(group, {{120, 17}}, DeadlineIn(kGenerous));
  ASSERT_TRUE(reducer.ok()) << reducer.status();
  std::vector<Tensor> bucket = {DeviceTensor(Shape({3, 40})), DeviceTensor(Shape({17}))};
  FillKeyed(bucket[0], rank_, 1);
  FillKeyed(bucket[1], rank_, 2);
  absl::StatusOr<std::unique_ptr<TransferHandle>> handle = (*reducer)->Start(0, bucket);
  ASSERT_TRUE(handle.ok()) << handle.status();
  EXPECT_EQ(device_.copies_to_host, 2);
  EXPECT_EQ(device_.copies_from_host, 0);
  EXPECT_EQ(bucket[1].f32()[0], KeyedValue(rank_, 2, 0));  // not yet summed on the device
  ASSERT_TRUE((*handle)->Wait(DeadlineIn(kGenerous)).ok());
  EXPECT_EQ(device_.copies_from_host, 2);
  for (int t = 0; t < 2; ++t) {
    for (int64_t i = 0; i < bucket[t].num_elements(); ++i) {
      double expected = 0;
      for (int r = 0; r < size; ++r) expected += static_cast<double>(KeyedValue(r, t + 1, i));
      ASSERT_EQ(bucket[t].f32()[i], static_cast<float>(expected))
          << "tensor " << t << "[" << i << "]";
    }
  }
}

TEST_F(HostStagedDataChannelTest, ReduceGroupOfOneRankCopiesNothing) {
  absl::StatusOr<std::unique_ptr<ReduceGroup>> reducer =
      channel_->CreateReduceGroup(std::vector<int>{rank_}, {{4}}, DeadlineIn(kGenerous));
  ASSERT_TRUE(reducer.ok()) << reducer.status();
  std::vector<Tensor> gradients = {DeviceTensor(Shape({4}))};
  absl::StatusOr<std::unique_ptr<TransferHandle>> handle = (*reducer)->Start(0, gradients);
  ASSERT_TRUE(handle.ok()) << handle.status();
  EXPECT_TRUE((*handle)->Done());
  EXPECT_TRUE(AllUntouched(gradients[0]));
  EXPECT_EQ(device_.copies_to_host + device_.copies_from_host, 0);
}

}  // namespace
}  // namespace gpipe
