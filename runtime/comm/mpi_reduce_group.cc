#include "runtime/comm/mpi_reduce_group.h"

#include <algorithm>
#include <climits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/mpi_status.h"
#include "runtime/comm/wait.h"
#include "runtime/core/element_range.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

// What MPI reads and writes while a bucket's collective is in flight: the tensors, the
// reduce-scatter's send copies and the count and displacement arrays.
struct MpiCollectiveBuffers {
  std::vector<Tensor> tensors;
  std::vector<Tensor> sent;
  std::vector<std::vector<int>> counts;
  std::vector<std::vector<int>> displacements;
};

// A tensor's part counts (and their offsets) over the group, as MPI's ints.
absl::Status PartCounts(int64_t elements, int members, std::vector<int>& counts,
                        std::vector<int>& displacements) {
  if (elements > INT_MAX) {
    return absl::UnimplementedError(absl::StrCat("a tensor of ", elements,
                                                 " elements is too large for MPI's int counts in a "
                                                 "reduce-scatter or all-gather"));
  }
  for (int m = 0; m < members; ++m) {
    const ElementRange range = ShardRange(elements, members, m);
    counts.push_back(static_cast<int>(range.size()));
    displacements.push_back(static_cast<int>(range.begin));
  }
  return absl::OkStatus();
}

// One bucket's collective in flight: its requests and the buffers they use.
class MpiReduceHandle final : public TransferHandle {
 public:
  MpiReduceHandle(std::shared_ptr<DataChannelContext> context,
                  std::shared_ptr<MpiReduceGroup::State> state, std::string description)
      : context_(std::move(context)),
        state_(std::move(state)),
        buffers_(std::make_shared<MpiCollectiveBuffers>()),
        description_(std::move(description)) {}
  MpiReduceHandle(const MpiReduceHandle&) = delete;
  MpiReduceHandle& operator=(const MpiReduceHandle&) = delete;
  ~MpiReduceHandle() override {
    if (!finished_) Finish(absl::CancelledError(absl::StrCat(description_, ": abandoned")));
  }

  // Posts the collective, one per tensor; on failure the destructor abandons what was posted.
  absl::Status Post(Collective collective, std::span<Tensor> tensors) {
    buffers_->tensors.assign(tensors.begin(), tensors.end());
    const size_t count = buffers_->tensors.size();
    for (size_t t = 0; t < count; ++t) {
      Tensor& tensor = buffers_->tensors[t];
      switch (collective) {
        case Collective::kAllReduce:
          RETURN_IF_ERROR(PostAllReduce(tensor));
          break;
        case Collective::kReduceScatter:
          RETURN_IF_ERROR(PostReduceScatter(tensor));
          break;
        case Collective::kAllGather:
          RETURN_IF_ERROR(PostAllGather(tensor));
          break;
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
      context_->Abandon(requests_, buffers_, /*collective=*/true);
    }
    buffers_.reset();
  }

  absl::Status PostAllReduce(Tensor& tensor) {
    float* data = tensor.f32();
    for (int64_t offset = 0; offset < tensor.num_elements();) {
      const int count =
          static_cast<int>(std::min<int64_t>(tensor.num_elements() - offset, INT_MAX));
      RETURN_IF_ERROR(Posted(MPI_Iallreduce(MPI_IN_PLACE, data + offset, count, MPI_FLOAT, MPI_SUM,
                                            state_->comm, &NewRequest()),
                             "MPI_Iallreduce"));
      offset += count;
    }
    return absl::OkStatus();
  }

  // Reduces a copy of the tensor into this member's part of it.
  absl::Status PostReduceScatter(Tensor& tensor) {
    std::vector<int>& counts = buffers_->counts.emplace_back();
    std::vector<int>& displacements = buffers_->displacements.emplace_back();
    RETURN_IF_ERROR(WithContext(
        PartCounts(tensor.num_elements(), state_->members, counts, displacements), description_));
    ASSIGN_OR_RETURN(Tensor copy, tensor.Clone(MemoryKind::kGradient));
    const float* sent = buffers_->sent.emplace_back(std::move(copy)).f32();
    float* own = tensor.f32() + displacements[state_->member];
    return Posted(MPI_Ireduce_scatter(sent, own, counts.data(), MPI_FLOAT, MPI_SUM, state_->comm,
                                      &NewRequest()),
                  "MPI_Ireduce_scatter");
  }

  // In place: every member's part lies where the gathered tensor has it.
  absl::Status PostAllGather(Tensor& tensor) {
    std::vector<int>& counts = buffers_->counts.emplace_back();
    std::vector<int>& displacements = buffers_->displacements.emplace_back();
    RETURN_IF_ERROR(WithContext(
        PartCounts(tensor.num_elements(), state_->members, counts, displacements), description_));
    return Posted(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, tensor.f32(), counts.data(),
                                  displacements.data(), MPI_FLOAT, state_->comm, &NewRequest()),
                  "MPI_Iallgatherv");
  }

  // A slot for the next request; one whose post fails stays MPI_REQUEST_NULL (done at once).
  MPI_Request& NewRequest() { return requests_.emplace_back(MPI_REQUEST_NULL); }
  absl::Status Posted(int error, const char* call) {
    return WithContext(MpiStatus(error, call), description_);
  }

  std::shared_ptr<DataChannelContext> context_;
  std::shared_ptr<MpiReduceGroup::State> state_;
  std::shared_ptr<MpiCollectiveBuffers> buffers_;
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
  state->members = static_cast<int>(group.size());
  state->member =
      static_cast<int>(std::find(group.begin(), group.end(), context->rank) - group.begin());
  return std::unique_ptr<ReduceGroup>(new MpiReduceGroup(
      std::move(context), std::move(state), *std::move(layout), std::move(description)));
}

MpiReduceGroup::~MpiReduceGroup() {
  // MPI frees the communicator once reductions still pending on it are through.
  FreeCommunicator(state_->comm);
}

absl::StatusOr<std::unique_ptr<TransferHandle>> MpiReduceGroup::StartCollective(
    Collective collective, int bucket, std::span<Tensor> tensors) {
  context_->orphans.Reap();
  if (state_->broken) {
    return absl::FailedPreconditionError(absl::StrCat(
        description_, ": an earlier reduction on this group failed; the group is unusable"));
  }
  RETURN_IF_ERROR(layout_.Advance(collective, bucket, tensors, description_));
  for (const Tensor& tensor : tensors) {
    if (!tensor.allocator().host_accessible()) {
      return absl::FailedPreconditionError(
          absl::StrCat(description_,
                       ": MpiDataChannel reduces host tensors; stage device tensors through "
                       "host memory"));
    }
  }
  auto handle = std::make_unique<MpiReduceHandle>(
      context_, state_,
      absl::StrCat(description_, " (", CollectiveName(collective), " of bucket ", bucket, ")"));
  RETURN_IF_ERROR(handle->Post(collective, tensors));
  return std::unique_ptr<TransferHandle>(std::move(handle));
}

}  // namespace gpipe
