// The NCCL channel on what one GPU allows, under mpirun: a rank's transfers to itself over a
// one-rank communicator (matched by key in either order, ordered after the compute stream, the
// header checks), the one-rank NCCL all-reduce group, the initialization deadline and the job
// abort, and, with two ranks, the refusal of ranks that share the GPU. Pairs of GPUs (a real
// two-rank link) need two GPUs: those paths are compiled here and run in a job across GPUs.
// Every test skips where no GPU is visible.
#include "runtime/comm/nccl/nccl_data_channel.h"

#include <mpi.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/nccl/nccl_communicator.h"
#include "runtime/comm/nccl/nccl_reduce_group.h"
#include "runtime/device/cuda/cuda_device.h"
#include "runtime/device/ops.h"
#include "tests/comm/mpi_test_support.h"

namespace gpipe {
namespace {

using ::gpipe::testing::DeadlineIn;
using ::gpipe::testing::WorldRank;
using ::gpipe::testing::WorldSize;
using ::testing::HasSubstr;

class NcclChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (VisibleGpuCount() == 0) GTEST_SKIP() << "no GPU is visible to this process";
    absl::StatusOr<std::unique_ptr<Device>> device = CreateCudaDevice({.ordinal = 0});
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = *std::move(device);
  }

  // A channel whose only link is to this rank itself.
  std::unique_ptr<NcclDataChannel> SelfChannel(std::vector<int> peers = {}) {
    if (peers.empty()) peers = {WorldRank()};
    absl::StatusOr<std::unique_ptr<NcclDataChannel>> channel = NcclDataChannel::Create(
        MPI_COMM_WORLD, nullptr, nullptr,
        NcclDataChannelOptions{.device = device_.get(),
                               .compute_stream = ComputeStreamOf(*device_),
                               .placement = absl::StrCat("test rank ", WorldRank()),
                               .peers = std::move(peers),
                               .setup_timeout = absl::Seconds(30)});
    EXPECT_TRUE(channel.ok()) << channel.status();
    return channel.ok() ? *std::move(channel) : nullptr;
  }

  Tensor DeviceTensor(const Shape& shape, DType dtype = DType::kF32) {
    absl::StatusOr<Tensor> tensor = Tensor::Empty(*device_, shape, dtype, MemoryKind::kBoundary);
    EXPECT_TRUE(tensor.ok()) << tensor.status();
    return tensor.ok() ? *std::move(tensor) : Tensor();
  }

  // f32 values start, start + 1, ... copied to a new device tensor.
  Tensor Counting(int64_t elements, float start) {
    Tensor tensor = DeviceTensor(Shape{elements});
    std::vector<float> values(static_cast<size_t>(elements));
    for (int64_t i = 0; i < elements; ++i) values[i] = start + static_cast<float>(i);
    EXPECT_TRUE(device_->CopyFromHost(values.data(), tensor.bytes(), tensor).ok());
    return tensor;
  }

  std::vector<float> Read(const Tensor& tensor) {
    std::vector<float> values(static_cast<size_t>(tensor.num_elements()));
    const absl::Status status = device_->CopyToHost(tensor, values.data(), tensor.bytes());
    EXPECT_TRUE(status.ok()) << status;
    return values;
  }

  std::unique_ptr<Device> device_;
};

TransferKey Key(int64_t step, int32_t micro_batch, TransferKind kind = TransferKind::kActivation) {
  return TransferKey{.step = step, .micro_batch = micro_batch, .chunk = 0, .kind = kind};
}

TEST_F(NcclChannelTest, SelfTransfersMatchByKeyInEitherOrder) {
  std::unique_ptr<NcclDataChannel> channel = SelfChannel();
  ASSERT_NE(channel, nullptr);
  const int me = WorldRank();
  // Two transfers posted receive-first and send-first, interleaved, and a gradient.
  Tensor sent_a = Counting(1000, 1.0f), sent_b = Counting(3, 500.0f), sent_g = Counting(7, -3.0f);
  Tensor got_a = DeviceTensor(Shape{1000}), got_b = DeviceTensor(Shape{3});
  Tensor got_g = DeviceTensor(Shape{7});
  auto recv_a = channel->Recv(got_a, me, Key(1, 0));
  auto send_b = channel->Send(sent_b, me, Key(1, 1));
  auto send_a = channel->Send(sent_a, me, Key(1, 0));
  auto recv_g = channel->Recv(got_g, me, Key(1, 0, TransferKind::kGradient));
  auto recv_b = channel->Recv(got_b, me, Key(1, 1));
  auto send_g = channel->Send(sent_g, me, Key(1, 0, TransferKind::kGradient));
  for (auto* handle : {&recv_a, &send_b, &send_a, &recv_g, &recv_b, &send_g}) {
    ASSERT_TRUE(handle->ok()) << handle->status();
    const absl::Status status = (**handle)->Wait(DeadlineIn(absl::Seconds(20)));
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_TRUE((**handle)->Done());
  }
  EXPECT_EQ(Read(got_a), Read(sent_a));
  EXPECT_EQ(Read(got_b), Read(sent_b));
  EXPECT_EQ(Read(got_g), Read(sent_g));
}

TEST_F(NcclChannelTest, EveryDtypeTravelsBitForBit) {
  std::unique_ptr<NcclDataChannel> channel = SelfChannel();
  ASSERT_NE(channel, nullptr);
  const int me = WorldRank();
  int micro_batch = 0;
  for (const DType dtype : {DType::kF32, DType::kBF16, DType::kI64, DType::kF64}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Shape shape{5, 3};
    Tensor sent = DeviceTensor(shape, dtype);
    Tensor received = DeviceTensor(shape, dtype);
    std::vector<uint8_t> bytes(static_cast<size_t>(sent.bytes()));
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 37 + 11);
    ASSERT_TRUE(device_->CopyFromHost(bytes.data(), sent.bytes(), sent).ok());
    auto send = channel->Send(sent, me, Key(0, micro_batch));
    auto recv = channel->Recv(received, me, Key(0, micro_batch));
    ++micro_batch;
    ASSERT_TRUE(send.ok()) << send.status();
    ASSERT_TRUE(recv.ok()) << recv.status();
    EXPECT_TRUE((*recv)->Wait(DeadlineIn(absl::Seconds(20))).ok());
    EXPECT_TRUE((*send)->Wait(DeadlineIn(absl::Seconds(20))).ok());
    std::vector<uint8_t> back(bytes.size());
    ASSERT_TRUE(device_->CopyToHost(received, back.data(), received.bytes()).ok());
    EXPECT_EQ(back, bytes);
  }
}

TEST_F(NcclChannelTest, SendsAreOrderedAfterTheComputeThatProducedTheTensor) {
  std::unique_ptr<NcclDataChannel> channel = SelfChannel();
  ASSERT_NE(channel, nullptr);
  const int me = WorldRank();
  // 16 M elements updated 40 times on the compute stream, sent right after the last update is
  // issued (not finished): the receiver must see the final values everywhere.
  constexpr int64_t kElements = int64_t{1} << 24;
  constexpr int kUpdates = 40;
  Tensor value = DeviceTensor(Shape{kElements});
  Tensor ones = DeviceTensor(Shape{kElements});
  Tensor received = DeviceTensor(Shape{kElements});
  const TensorOps& ops = device_->ops().tensor;
  ASSERT_TRUE(ops.Fill(value, 0.0).ok());
  ASSERT_TRUE(ops.Fill(ones, 1.0).ok());
  ASSERT_TRUE(ops.Fill(received, -1.0).ok());
  for (int i = 0; i < kUpdates; ++i) ASSERT_TRUE(ops.Axpy(1.0f, ones, value).ok());
  auto send = channel->Send(value, me, Key(2, 0));
  auto recv = channel->Recv(received, me, Key(2, 0));
  ASSERT_TRUE(send.ok() && recv.ok());
  ASSERT_TRUE((*recv)->Wait(DeadlineIn(absl::Seconds(30))).ok());
  ASSERT_TRUE((*send)->Wait(DeadlineIn(absl::Seconds(30))).ok());
  const std::vector<float> values = Read(received);
  int64_t wrong = 0;
  for (const float v : values) wrong += v != static_cast<float>(kUpdates);
  EXPECT_EQ(wrong, 0) << "first value " << values.front() << ", last " << values.back();
}

TEST_F(NcclChannelTest, SelfTransfersThatDisagreeFailNamingBothSides) {
  std::unique_ptr<NcclDataChannel> channel = SelfChannel();
  ASSERT_NE(channel, nullptr);
  const int me = WorldRank();
  Tensor four = Counting(4, 0.0f);
  Tensor five = DeviceTensor(Shape{5});
  auto recv = channel->Recv(five, me, Key(3, 2));
  ASSERT_TRUE(recv.ok());
  auto send = channel->Send(four, me, Key(3, 2));
  ASSERT_FALSE(send.ok());
  EXPECT_EQ(send.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(send.status().message(),
              HasSubstr(absl::StrCat("rank ", me, " expected activation step=3 mb=2 f32[5]")));
  EXPECT_THAT(send.status().message(), HasSubstr("f32[4]"));
  // The receive that was waiting fails with the same error.
  EXPECT_EQ((*recv)->Wait(DeadlineIn(absl::Seconds(5))).code(), absl::StatusCode::kInvalidArgument);
  // Posting the same receive twice is refused.
  Tensor again = DeviceTensor(Shape{5});
  ASSERT_TRUE(channel->Recv(again, me, Key(4, 0)).ok());
  EXPECT_EQ(channel->Recv(again, me, Key(4, 0)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(NcclChannelTest, AReceiveWhoseSendNeverComesEndsAtItsDeadlineNamingTheTransfer) {
  std::unique_ptr<NcclDataChannel> channel = SelfChannel();
  ASSERT_NE(channel, nullptr);
  const int me = WorldRank();
  Tensor tensor = DeviceTensor(Shape{8});
  auto recv = channel->Recv(tensor, me, Key(7, 3, TransferKind::kGradient));
  ASSERT_TRUE(recv.ok());
  EXPECT_FALSE((*recv)->Done());
  const absl::Status status = (*recv)->Wait(DeadlineIn(absl::Milliseconds(300)));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat("rank ", me, " receiving gradient step=7 mb=3 f32[8]")));
  EXPECT_THAT(status.message(), HasSubstr("no progress after"));
}

TEST_F(NcclChannelTest, MisuseIsRefusedBeforeAnythingIsIssued) {
  std::unique_ptr<NcclDataChannel> channel = SelfChannel();
  ASSERT_NE(channel, nullptr);
  const int me = WorldRank();
  Tensor tensor = DeviceTensor(Shape{8});
  const int stranger = WorldSize() + 3;
  absl::StatusOr<std::unique_ptr<TransferHandle>> no_link =
      channel->Send(tensor, stranger, Key(0, 0));
  EXPECT_EQ(no_link.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(no_link.status().message(), HasSubstr("has no NCCL link to rank"));
  testing::CountingHostAllocator host;
  absl::StatusOr<Tensor> host_tensor =
      Tensor::Empty(host, Shape{8}, DType::kF32, MemoryKind::kBoundary);
  ASSERT_TRUE(host_tensor.ok());
  EXPECT_THAT(channel->Send(*host_tensor, me, Key(0, 0)).status().message(),
              HasSubstr("NCCL moves device tensors"));
}

// A one-rank NCCL reduce group: the real NCCL all-reduce path (the channel hands groups of one a
// SoloReduceGroup), buckets in order, device tensors only. A sum over one rank leaves the values
// as they are, so this shows the path runs and keeps the data, not that it adds: the two-rank
// sums need two GPUs.
TEST_F(NcclChannelTest, OneRankReduceGroupRunsTheNcclPath) {
  if (WorldSize() != 1) GTEST_SKIP() << "one rank per group here";
  RealClock clock;
  absl::StatusOr<PrivateCommunicator> comm = CreatePrivateCommunicator(
      MPI_COMM_WORLD, DeadlineIn(absl::Seconds(10)), nullptr, clock, "test");
  ASSERT_TRUE(comm.ok()) << comm.status();
  auto context = std::make_shared<DataChannelContext>(comm->comm, comm->rank, comm->size,
                                                      comm->tag_upper_bound, nullptr, nullptr);
  MpiGroupSetup reducer(context);
  const std::vector<int> group = {0};
  absl::StatusOr<std::unique_ptr<NcclReduceGroup>> reduce =
      NcclReduceGroup::Create(*context, reducer, ComputeStreamOf(*device_), group,
                              {{1000, 3}, {77}}, DeadlineIn(absl::Seconds(30)), absl::Seconds(30));
  ASSERT_TRUE(reduce.ok()) << reduce.status();
  for (int step = 0; step < 3; ++step) {
    std::vector<Tensor> first = {Counting(1000, step), Counting(3, -5.0f)};
    std::vector<Tensor> second = {Counting(77, 2.5f)};
    // Written on the compute stream right before the start: the sum (of one) sees it.
    ASSERT_TRUE(device_->ops().tensor.Scale(2.0f, first[0]).ok());
    std::vector<Tensor> wrong_order = {Counting(77, 0.0f)};
    EXPECT_EQ((*reduce)->Start(1, wrong_order).status().code(),
              absl::StatusCode::kFailedPrecondition);
    auto a = (*reduce)->Start(0, first);
    ASSERT_TRUE(a.ok()) << a.status();
    auto b = (*reduce)->Start(1, second);
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_TRUE((*a)->Wait(DeadlineIn(absl::Seconds(20))).ok());
    ASSERT_TRUE((*b)->Wait(DeadlineIn(absl::Seconds(20))).ok());
    const std::vector<float> values = Read(first[0]);
    EXPECT_EQ(values[0], 2.0f * step);
    EXPECT_EQ(values[999], 2.0f * (step + 999));
    EXPECT_EQ(Read(second[0])[76], 2.5f + 76);
  }
  // A sharded optimizer state's step: reduce-scatter both buckets, then all-gather them (one
  // member owns everything: ncclReduceScatter and ncclAllGather of whole tensors, in place).
  std::vector<Tensor> first = {Counting(1000, 1.0f), Counting(3, -5.0f)};
  std::vector<Tensor> second = {Counting(77, 2.5f)};
  for (Collective collective : {Collective::kReduceScatter, Collective::kAllGather}) {
    SCOPED_TRACE(CollectiveName(collective));
    // Reductions start in ascending bucket order, gathers in descending order.
    const bool gather = collective == Collective::kAllGather;
    auto b = gather ? (*reduce)->StartCollective(collective, 1, second)
                    : absl::StatusOr<std::unique_ptr<TransferHandle>>(nullptr);
    auto a = (*reduce)->StartCollective(collective, 0, first);
    ASSERT_TRUE(a.ok()) << a.status();
    if (!gather) b = (*reduce)->StartCollective(collective, 1, second);
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_TRUE((*a)->Wait(DeadlineIn(absl::Seconds(20))).ok());
    ASSERT_TRUE((*b)->Wait(DeadlineIn(absl::Seconds(20))).ok());
    EXPECT_EQ(Read(first[0])[999], 1.0f + 999);
    EXPECT_EQ(Read(first[1])[2], -3.0f);
    EXPECT_EQ(Read(second[0])[76], 2.5f + 76);
  }
}

// A communicator whose other member never comes: the non-blocking initialization ends at the
// deadline and the half-made communicator is aborted; a job abort ends it at once.
TEST_F(NcclChannelTest, InitializationWaitsNoLongerThanItsDeadlineOrAJobAbort) {
  RealClock clock;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::shared_ptr<NcclCommunicator>> lonely = NcclCommunicator::Create(
      id, 2, 0, start + absl::Seconds(1),
      {.description = "rank 0's NCCL link to rank 1", .abort_poller = nullptr, .clock = &clock});
  EXPECT_EQ(lonely.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(lonely.status().message(), HasSubstr("rank 0's NCCL link to rank 1"));
  EXPECT_THAT(lonely.status().message(), HasSubstr("the communicator was aborted"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));

  ncclUniqueId id2;
  ASSERT_EQ(ncclGetUniqueId(&id2), ncclSuccess);
  absl::StatusOr<std::shared_ptr<NcclCommunicator>> aborted = NcclCommunicator::Create(
      id2, 2, 0, absl::Now() + absl::Seconds(60),
      {.description = "rank 0's NCCL link to rank 1",
       .abort_poller = [] { return std::optional<std::string>("rank 1 aborted the job: test"); },
       .clock = &clock});
  EXPECT_EQ(aborted.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(aborted.status().message(), HasSubstr("rank 1 aborted the job: test"));
}

// Two ranks on the one GPU: NCCL would refuse them, so the channel refuses first, on every rank,
// naming the MPI transport.
TEST_F(NcclChannelTest, TwoRanksSharingTheGpuAreRefusedNamingTheMpiTransport) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs two ranks (on the one GPU)";
  absl::StatusOr<std::string> bus = PciBusIdOf(0);
  ASSERT_TRUE(bus.ok()) << bus.status();
  absl::StatusOr<std::unique_ptr<NcclDataChannel>> channel = NcclDataChannel::Create(
      MPI_COMM_WORLD, nullptr, nullptr,
      NcclDataChannelOptions{.device = device_.get(),
                             .compute_stream = ComputeStreamOf(*device_),
                             .placement = absl::StrCat("host test GPU ", *bus),
                             .peers = {WorldRank() ^ 1},
                             .setup_timeout = absl::Seconds(30)});
  ASSERT_FALSE(channel.ok());
  EXPECT_EQ(channel.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(channel.status().message(), HasSubstr("ranks 0 and 1 both compute on host test GPU"));
  EXPECT_THAT(channel.status().message(), HasSubstr("transport: MPI"));
}

}  // namespace
}  // namespace gpipe
