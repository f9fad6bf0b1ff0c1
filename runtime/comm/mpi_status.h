// MpiStatus: the one place an MPI error code becomes an absl::Status. Every MPI call in gpipe
// goes through it (communicators use MPI_ERRORS_RETURN, so errors come back as codes).
// Thread-safe (MPI_Error_string is a pure lookup).
#ifndef GPIPE_RUNTIME_COMM_MPI_STATUS_H_
#define GPIPE_RUNTIME_COMM_MPI_STATUS_H_

#include "absl/status/status.h"

namespace gpipe {

// OK for MPI_SUCCESS; otherwise "<what>: <MPI's error string> (MPI error class N)" with a code
// that says what kind of failure it is (e.g. MPI_ERR_TRUNCATE -> DATA_LOSS, a bad argument ->
// INVALID_ARGUMENT, anything else -> INTERNAL).
absl::Status MpiStatus(int code, const char* what);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_COMM_MPI_STATUS_H_
