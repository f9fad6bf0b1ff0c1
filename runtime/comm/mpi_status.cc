#include "runtime/comm/mpi_status.h"

#include <mpi.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace gpipe {
namespace {

absl::StatusCode CodeForClass(int error_class) {
  switch (error_class) {
    case MPI_ERR_TRUNCATE:
      return absl::StatusCode::kDataLoss;
    case MPI_ERR_BUFFER:
    case MPI_ERR_COUNT:
    case MPI_ERR_TYPE:
    case MPI_ERR_TAG:
    case MPI_ERR_RANK:
    case MPI_ERR_ROOT:
    case MPI_ERR_GROUP:
    case MPI_ERR_OP:
    case MPI_ERR_ARG:
    case MPI_ERR_DIMS:
      return absl::StatusCode::kInvalidArgument;
    case MPI_ERR_NO_MEM:
      return absl::StatusCode::kResourceExhausted;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::Status MpiStatus(int code, const char* what) {
  if (code == MPI_SUCCESS) return absl::OkStatus();
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  std::string description;
  if (MPI_Error_string(code, text, &length) == MPI_SUCCESS) {
    description.assign(text, static_cast<size_t>(length));
  } else {
    description = absl::StrCat("unknown MPI error code ", code);
  }
  int error_class = MPI_ERR_UNKNOWN;
  if (MPI_Error_class(code, &error_class) != MPI_SUCCESS) error_class = MPI_ERR_UNKNOWN;
  return absl::Status(
      CodeForClass(error_class),
      absl::StrCat(what, ": ", description, " (MPI error class ", error_class, ")"));
}

}  // namespace gpipe
