// Typed device pointers of a tensor for kernel launches. Tensor::data<T>() is host-only (it
// refuses memory the host cannot read); kernels take these instead. The dtype is checked as
// data<T>() checks it; an undefined tensor gives nullptr (ops check their arguments first).
#ifndef GPIPE_RUNTIME_DEVICE_CUDA_DEVICE_POINTER_H_
#define GPIPE_RUNTIME_DEVICE_CUDA_DEVICE_POINTER_H_

#include <cstdint>

#include "runtime/core/check.h"
#include "runtime/core/tensor.h"

namespace gpipe {

template <typename T>
T* DevicePointer(Tensor& tensor) {
  if (!tensor.defined()) return nullptr;
  GPIPE_CHECK(tensor.dtype() == DTypeOf<T>())
      << "device pointer of the wrong type for " << tensor.DebugString();
  return static_cast<T*>(tensor.raw_data());
}

template <typename T>
const T* DevicePointer(const Tensor& tensor) {
  if (!tensor.defined()) return nullptr;
  GPIPE_CHECK(tensor.dtype() == DTypeOf<T>())
      << "device pointer of the wrong type for " << tensor.DebugString();
  return static_cast<const T*>(tensor.raw_data());
}

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_DEVICE_CUDA_DEVICE_POINTER_H_
