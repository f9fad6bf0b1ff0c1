#include "runtime/comm/data_channel_context.h"

#include <climits>

#include "absl/strings/str_cat.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/transfer_header.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

DataChannelContext::~DataChannelContext() { FreeCommunicator(comm); }

void DataChannelContext::Abandon(std::span<MPI_Request> requests,
                                 std::shared_ptr<const void> buffers, bool collective) {
  CancelRequests(requests, clock(), kCancelGrace, /*cancel=*/!collective);
  orphans.Adopt(requests, std::move(buffers), collective);
}

MPI_Datatype MpiElementType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return MPI_FLOAT;
    case DType::kI64:
      return MPI_INT64_T;
    case DType::kF64:
      return MPI_DOUBLE;
    case DType::kBF16:
      return MPI_UINT16_T;  // moved as bits; never reduced
  }
  return MPI_BYTE;
}

namespace {

absl::Status CheckTransferable(const Tensor& tensor, const std::string& context) {
  if (!tensor.defined()) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": the tensor is undefined"));
  }
  if (!tensor.allocator().host_accessible()) {
    return absl::FailedPreconditionError(absl::StrCat(
        context, ": MpiDataChannel moves host tensors; stage device tensors through host memory"));
  }
  if (tensor.num_elements() > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": ", tensor.num_elements(),
                                                   " elements exceed an MPI count (", INT_MAX,
                                                   "); split the tensor"));
  }
  if (tensor.shape().rank() > kMaxTransferRank) {
    return absl::InvalidArgumentError(
        absl::StrCat(context, ": tensors of rank ", tensor.shape().rank(),
                     " exceed the transfer header's ", kMaxTransferRank, " dimensions"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TransferTags> PrepareTransfer(const DataChannelContext& context,
                                             const Tensor& tensor, int peer, const TransferKey& key,
                                             const std::string& description) {
  RETURN_IF_ERROR(CheckTransferable(tensor, description));
  if (peer < 0 || peer >= context.size) {
    return absl::InvalidArgumentError(
        absl::StrCat(description, ": no such rank (ranks 0..", context.size - 1, ")"));
  }
  TransferTags tags;
  for (auto [part, tag] : {std::pair{TransferPart::kHeader, &tags.header},
                           std::pair{TransferPart::kPayload, &tags.payload}}) {
    absl::StatusOr<int> value = TransferTag(key, part, context.tag_ub);
    if (!value.ok()) return WithContext(value.status(), description);
    *tag = *value;
  }
  return tags;
}

}  // namespace gpipe
