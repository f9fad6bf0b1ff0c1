#include "runtime/comm/mpi_reduce_group.h"

#include <algorithm>
#include <climits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/mpi_status.h"
#include "runtime/comm/wait.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// One bucket's reduction in flight: its requests and the tensors they write.
class MpiReduceHandle final : public TransferHandle {
 public:
  MpiReduceHandle(std::shared_ptr<DataChannelContext> context,
                  std::shared_ptr<MpiReduceGroup::State> state, std::string description)
      : context_(std::move(context)),
        state_(std::move(state)),
        tensors_(std::make_shared<std::vector<Tensor>>()),
        description_(std::move(description)) {}
  MpiReduceHandle(const MpiReduceHandle&) = delete;
  MpiReduceHandle& operator=(const MpiReduceHandle&) = delete;
  ~MpiReduceHandle() override {
    if (!finished_) Finish(absl::CancelledError(absl::StrCat(description_, ": abandoned")));
  }

  // Posts the reductions; on failure the destructor abandons what was posted.
  absl::Status Post(std::span<Tensor> tensors) {
    tensors_->assign(tensors.begin(), tensors.end());
    for (Tensor& tensor : *tensors_) {
      float* data = tensor.f32();
      for (int64_t offset = 0; offset < tensor.num_elements();) {
        const int count =
            static_cast<int>(std::min<int64_t>(tensor.num_elements() - offset, INT_MAX));
        MPI_Request request = MPI_REQUEST_NULL;
        RETURN_IF_ERROR(
            WithContext(MpiStatus(MPI_Iallreduce(MPI_IN_PLACE, data + offset, count, MPI_FLOAT,
                                                 MPI_SUM, state_->comm, &request),
                                  "MPI_Iallreduce"),
                        description_));
        requests_.push_back(request);
        offset += count;
      }
    }
    return absl::OkStatus();
  }

  bool Done() override {
    if (finished_) return true;
    context_->ProgressPendingReceives();
    const absl::StatusOr<bool> done = TestRequests(requests_, {});
    if (!done.ok()) {
      Finish(WithContext(done.status(), description_));
      return true;
    }
    if (*done) Finish(absl::OkStatus());
    return *done;
  }

  absl::Status Wait(absl::Time deadline) override {
    if (finished_) return result_;
    absl::Status status = WaitForRequests(
        requests_, {}, deadline, context_->abort_poller, context_->clock(),
        [&] { return description_; }, /*cancel_on_failure=*/false);
    if (!status.ok() && !absl::IsDeadlineExceeded(status) && !absl::IsAborted(status)) {
      status = WithContext(status, description_);
    }
    Finish(std::move(status));
    return result_;
  }

 private:
  void Finish(absl::Status status) {
    finished_ = true;
    result_ = std::move(status);
    if (!result_.ok()) {
      // A half-done collective leaves the communicator unusable; MPI keeps the tensors until
      // it lets go of them.
      state_->broken = true;
      context_->Abandon(requests_, tensors_, /*collective=*/true);
    }
    tensors_.reset();
  }

  std::shared_ptr<DataChannelContext> context_;
  std::shared_ptr<MpiReduceGroup::State> state_;
  std::shared_ptr<std::vector<Tensor>> tensors_;
  std::vector<MPI_Request> requests_;
  std::string description_;
  bool finished_ = false;
  absl::Status result_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ReduceGroup>> MpiReduceGroup::Create(
    std::shared_ptr<DataChannelContext> context, MpiGroupSetup& group_setup,
    std::span<const int> group_ranks, std::vector<std::vector<int64_t>> buckets,
    absl::Time deadline) {
  context->orphans.Reap();
  std::vector<int> group(group_ranks.begin(), group_ranks.end());
  std::sort(group.begin(), group.end());
  std::string description =
      absl::StrCat("rank ", context->rank, " all-reducing gradient buckets over ranks [",
                   absl::StrJoin(group, ", "), "]");
  RETURN_IF_ERROR(group_setup.CheckGroup(group, description));
  absl::StatusOr<ReduceGroupLayout> layout = ReduceGroupLayout::Create(buckets);
  if (!layout.ok()) return WithContext(layout.status(), description);
  if (group.size() == 1) return SoloReduceGroup::Create(context->rank, std::move(buckets));
  RETURN_IF_ERROR(group_setup.CheckAgreement(layout->buckets(), group, deadline, description));
  auto state = std::make_shared<State>();
  ASSIGN_OR_RETURN(state->comm, group_setup.CreateCommunicator(group));
  return std::unique_ptr<ReduceGroup>(new MpiReduceGroup(
      std::move(context), std::move(state), *std::move(layout), std::move(description)));
}

MpiReduceGroup::~MpiReduceGroup() {
  // MPI frees the communicator once reductions still pending on it are through.
  FreeCommunicator(state_->comm);
}

absl::StatusOr<std::unique_ptr<TransferHandle>> MpiReduceGroup::Start(int bucket,
                                                                      std::span<Tensor> tensors) {
  context_->orphans.Reap();
  if (state_->broken) {
    return absl::FailedPreconditionError(absl::StrCat(
        description_, ": an earlier reduction on this group failed; the group is unusable"));
  }
  RETURN_IF_ERROR(layout_.Advance(bucket, tensors, description_));
  for (const Tensor& tensor : tensors) {
    if (!tensor.allocator().host_accessible()) {
      return absl::FailedPreconditionError(
          absl::StrCat(description_,
                       ": MpiDataChannel reduces host tensors; stage device tensors through "
                       "host memory"));
    }
  }
  auto handle = std::make_unique<MpiReduceHandle>(
      context_, state_, absl::StrCat(description_, " (bucket ", bucket, ")"));
  RETURN_IF_ERROR(handle->Post(tensors));
  return std::unique_ptr<TransferHandle>(std::move(handle));
}

}  // namespace gpipe
