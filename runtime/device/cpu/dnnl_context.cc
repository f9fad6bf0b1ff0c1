#include "runtime/device/cpu/dnnl_context.h"

#include <omp.h>

#include "absl/strings/str_cat.h"

namespace gpipe {

DnnlContext::DnnlContext(int threads)
    : threads_(threads > 0 ? threads : 1), engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {
  // oneDNN (Debian's build) runs on OpenMP, whose pool is per process: one device per process.
  omp_set_num_threads(threads_);
}

absl::Status DnnlError(const dnnl::error& error, const char* what) {
  return absl::InternalError(
      absl::StrCat("oneDNN failed in ", what, ": ", error.what(), " (status ", error.status, ")"));
}

}  // namespace gpipe
