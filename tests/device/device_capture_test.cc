// Device capture (Device::BeginCapture, WorkGraph; runtime/device/capture_memory.h) on every
// backend: captured ops run at Launch and not before, read their tensors as they are at each
// Launch, keep the addresses of what they allocated, reuse blocks in capture order, keep what
// they did not allocate until the graph goes, and nothing that waits for the host is allowed
// while capturing. The CPU records ops (RecordingOps); a GPU captures its compute stream.
#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device/device.h"
#include "runtime/device/ops.h"
#include "tests/device/backends_under_test.h"

namespace gpipe::testing {
namespace {

using ::testing::Each;
using ::testing::Eq;

class CaptureTest : public OpsConformanceTest {
 protected:
  // c = a b (a [2, 3], b [3, 2]), then c *= 0.5: the captured work of most cases.
  absl::Status ProductAndHalf(const Tensor& a, const Tensor& b, Tensor& c) {
    absl::Status status = ops().matmul.Gemm(WholeMatrix(a, 2, 3), WholeMatrix(b, 3, 2),
                                            WholeMatrix(c, 2, 2), GemmOptions{});
    if (status.ok()) status = ops().tensor.Scale(0.5f, c);
    return status;
  }
  // The same work run directly on copies of a and b's values.
  std::vector<float> Direct(const std::vector<float>& a, const std::vector<float>& b) {
    Tensor c = Uninitialized(Shape{2, 2});
    EXPECT_TRUE(ProductAndHalf(Upload(a, Shape{2, 3}), Upload(b, Shape{3, 2}), c).ok());
    return Download(c);
  }
  void Overwrite(Tensor& tensor, const std::vector<float>& values) {
    ASSERT_TRUE(device()
                    .CopyFromHost(values.data(),
                                  static_cast<int64_t>(values.size() * sizeof(float)), tensor)
                    .ok());
  }
  std::unique_ptr<WorkGraph> End() {
    absl::StatusOr<std::unique_ptr<WorkGraph>> graph = device().EndCapture();
    EXPECT_TRUE(graph.ok()) << graph.status();
    return graph.ok() ? *std::move(graph) : nullptr;
  }
};

TEST_P(CaptureTest, CapturedOpsRunAtLaunchNotBefore) {
  const std::vector<float> a_values = TestValues(1, 6), b_values = TestValues(2, 6);
  Tensor a = Upload(a_values, Shape{2, 3});
  const Tensor b = Upload(b_values, Shape{3, 2});
  Tensor c = Upload(std::vector<float>(4, 7.0f), Shape{2, 2});
  ASSERT_TRUE(device().BeginCapture().ok());
  ASSERT_TRUE(ProductAndHalf(a, b, c).ok());
  const std::unique_ptr<WorkGraph> graph = End();
  ASSERT_NE(graph, nullptr);
  EXPECT_THAT(Download(c), Each(Eq(7.0f)));  // nothing ran yet

  ASSERT_TRUE(graph->Launch().ok());
  EXPECT_EQ(Download(c), Direct(a_values, b_values));
  // Each launch reads its inputs as they are then.
  const std::vector<float> new_a = TestValues(3, 6);
  Overwrite(a, new_a);
  ASSERT_TRUE(graph->Launch().ok());
  ASSERT_TRUE(device().Synchronize().ok());
  EXPECT_EQ(Download(c), Direct(new_a, b_values));
}

// What captured work allocates keeps its address for every launch; a block it frees serves a
// later allocation of the same size in the capture; the arena's memory is counted while the
// graph holds it and goes back when the graph and the tensors are gone.
TEST_P(CaptureTest, AllocationsKeepTheirAddressesAndFreedBlocksAreReused) {
  const std::vector<float> a_values = TestValues(4, 6), b_values = TestValues(5, 6);
  Tensor a = Upload(a_values, Shape{2, 3});
  const Tensor b = Upload(b_values, Shape{3, 2});
  const int64_t before = device().memory().current();
  ASSERT_TRUE(device().BeginCapture().ok());
  Tensor product = Uninitialized(Shape{2, 2});
  ASSERT_TRUE(ProductAndHalf(a, b, product).ok());
  Tensor result = Uninitialized(Shape{2, 2});
  ASSERT_TRUE(ops().tensor.Copy(product, result).ok());
  const void* freed = product.raw_data();
  product = Tensor();  // freed inside the capture: its block is free for what follows
  Tensor reuse = Uninitialized(Shape{2, 2});
  EXPECT_EQ(reuse.raw_data(), freed);
  ASSERT_TRUE(ops().tensor.Fill(reuse, 3.0).ok());  // after the copy read the block
  std::unique_ptr<WorkGraph> graph = End();
  ASSERT_NE(graph, nullptr);
  const void* result_address = result.raw_data();
  EXPECT_GT(device().memory().current(), before);

  for (uint64_t seed : {6, 7}) {
    const std::vector<float> new_a = TestValues(seed, 6);
    Overwrite(a, new_a);
    ASSERT_TRUE(graph->Launch().ok());
    EXPECT_EQ(result.raw_data(), result_address);
    EXPECT_EQ(Download(result), Direct(new_a, b_values));
    EXPECT_THAT(Download(reuse), Each(Eq(3.0f)));
  }
  // The host lets go of result and reuse outside any capture: the graph keeps them, so its next
  // launch still writes memory no one else was given.
  result = Tensor();
  reuse = Tensor();
  Tensor other = Uninitialized(Shape{2, 2});
  EXPECT_NE(other.raw_data(), result_address);
  EXPECT_NE(other.raw_data(), freed);
  other = Tensor();
  ASSERT_TRUE(graph->Launch().ok());
  ASSERT_TRUE(device().Synchronize().ok());
  graph.reset();
  EXPECT_EQ(device().memory().current(), before);
}

// A tensor made before the capture and dropped during it stays allocated, and readable by the
// graph, until the graph is destroyed.
TEST_P(CaptureTest, WhatTheCaptureDroppedButDidNotAllocateIsKeptUntilTheGraphGoes) {
  const std::vector<float> a_values = TestValues(8, 6), b_values = TestValues(9, 6);
  Tensor a = Upload(a_values, Shape{2, 3});
  Tensor b = Upload(b_values, Shape{3, 2});
  Tensor c = Uninitialized(Shape{2, 2});
  const int64_t with_b = device().memory().current();
  ASSERT_TRUE(device().BeginCapture().ok());
  ASSERT_TRUE(ProductAndHalf(a, b, c).ok());
  b = Tensor();
  std::unique_ptr<WorkGraph> graph = End();
  ASSERT_NE(graph, nullptr);
  EXPECT_GE(device().memory().current(), with_b);  // b's bytes (and any workspace the capture took)
  ASSERT_TRUE(graph->Launch().ok());
  EXPECT_EQ(Download(c), Direct(a_values, b_values));
  graph.reset();
  ASSERT_TRUE(device().Synchronize().ok());
  EXPECT_EQ(device().memory().current(), with_b - 3 * 2 * static_cast<int64_t>(sizeof(float)));
}

// Graphs launched in capture order: the second one's allocation reuses the block of a tensor the
// first one made and the second one read and dropped, and every launch computes as if nothing
// were reused.
TEST_P(CaptureTest, GraphsLaunchedInCaptureOrderShareFreedBlocks) {
  const std::vector<float> b_values = TestValues(10, 6);
  Tensor a = Upload(TestValues(11, 6), Shape{2, 3});
  const Tensor b = Upload(b_values, Shape{3, 2});
  ASSERT_TRUE(device().BeginCapture().ok());
  Tensor hidden = Uninitialized(Shape{2, 2});
  ASSERT_TRUE(ProductAndHalf(a, b, hidden).ok());
  const std::unique_ptr<WorkGraph> first = End();
  ASSERT_NE(first, nullptr);

  ASSERT_TRUE(device().BeginCapture().ok());
  Tensor out = Uninitialized(Shape{2, 2});
  ASSERT_TRUE(ops().tensor.Add(hidden, hidden, out).ok());
  const void* hidden_block = hidden.raw_data();
  hidden = Tensor();
  Tensor scratch = Uninitialized(Shape{2, 2});
  EXPECT_EQ(scratch.raw_data(), hidden_block);
  ASSERT_TRUE(ops().tensor.Fill(scratch, -1.0).ok());
  ASSERT_TRUE(ops().tensor.Axpy(0.0f, scratch, out).ok());
  const std::unique_ptr<WorkGraph> second = End();
  ASSERT_NE(second, nullptr);

  for (uint64_t seed : {12, 13}) {
    const std::vector<float> new_a = TestValues(seed, 6);
    Overwrite(a, new_a);
    ASSERT_TRUE(first->Launch().ok());
    ASSERT_TRUE(second->Launch().ok());
    std::vector<float> expected = Direct(new_a, b_values);
    for (float& value : expected) value = value + value;
    EXPECT_EQ(Download(out), expected);
  }
}

TEST_P(CaptureTest, WaitsCopiesAndLaunchesAreRefusedWhileCapturing) {
  Tensor a = Upload(TestValues(14, 6), Shape{2, 3});
  float host[6] = {};
  ASSERT_TRUE(device().BeginCapture().ok());
  EXPECT_EQ(device().Synchronize().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(device().CopyToHost(a, host, sizeof(host)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(device().CopyFromHost(host, sizeof(host), a).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(device().RecordEvent().status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(ops().tensor.Scale(2.0f, a).ok());
  const std::unique_ptr<WorkGraph> graph = End();
  ASSERT_NE(graph, nullptr);

  ASSERT_TRUE(device().BeginCapture().ok());
  EXPECT_EQ(graph->Launch().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(End(), nullptr);
  EXPECT_TRUE(device().Synchronize().ok());
}

TEST_P(CaptureTest, CapturesDoNotNestAndEndOnlyWhatBegan) {
  EXPECT_EQ(device().EndCapture().status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(device().BeginCapture().ok());
  EXPECT_EQ(device().BeginCapture().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(End(), nullptr);  // the first capture is still open, and ends well
  EXPECT_EQ(device().EndCapture().status().code(), absl::StatusCode::kFailedPrecondition);
}

// An op whose arguments are wrong fails when it is issued in the capture, and the rest of the
// capture still works.
TEST_P(CaptureTest, AnOpWithWrongArgumentsFailsAtCapture) {
  const std::vector<float> a_values = TestValues(15, 6), b_values = TestValues(16, 6);
  const Tensor a = Upload(a_values, Shape{2, 3});
  const Tensor b = Upload(b_values, Shape{3, 2});
  Tensor c = Uninitialized(Shape{2, 2});
  Tensor wrong = Uninitialized(Shape{3});
  ASSERT_TRUE(device().BeginCapture().ok());
  EXPECT_EQ(ops().tensor.Copy(c, wrong).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(ProductAndHalf(a, b, c).ok());
  const std::unique_ptr<WorkGraph> graph = End();
  ASSERT_NE(graph, nullptr);
  ASSERT_TRUE(graph->Launch().ok());
  EXPECT_EQ(Download(c), Direct(a_values, b_values));
}

GPIPE_INSTANTIATE_ON_EVERY_BACKEND(CaptureTest);

}  // namespace
}  // namespace gpipe::testing
