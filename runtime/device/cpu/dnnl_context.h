// DnnlContext: the oneDNN CPU engine and stream one CpuDevice computes with, and the thread
// count it was set up for. Primitives are created against it and cached by their users.
// Thread-compatible (one thread uses a device at a time).
#ifndef GPIPE_RUNTIME_DEVICE_CPU_DNNL_CONTEXT_H_
#define GPIPE_RUNTIME_DEVICE_CPU_DNNL_CONTEXT_H_

#include "absl/status/status.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace gpipe {

class DnnlContext {
 public:
  // `threads` >= 1: the compute threads of this process (oneDNN's OpenMP pool is per process).
  explicit DnnlContext(int threads);
  DnnlContext(const DnnlContext&) = delete;
  DnnlContext& operator=(const DnnlContext&) = delete;

  dnnl::engine& engine() { return engine_; }
  dnnl::stream& stream() { return stream_; }
  int threads() const { return threads_; }

 private:
  int threads_;
  dnnl::engine engine_;
  dnnl::stream stream_;
};

// Converts a oneDNN error into a Status naming `what` (the op and its shapes): the one place
// oneDNN's error codes become Status.
absl::Status DnnlError(const dnnl::error& error, const char* what);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CPU_DNNL_CONTEXT_H_
