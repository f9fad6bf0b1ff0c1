// Tensor: a shaped, typed view of reference-counted device storage.
//
// Copying a Tensor shares its storage (like torch.Tensor); Clone() copies the data. Storage is
// returned to its Allocator when the last Tensor viewing it goes away, so memory accounting
// follows ownership exactly. A default-constructed Tensor is undefined (defined() == false).
// Not thread-safe for concurrent writes to the same storage.
#ifndef GPIPE_RUNTIME_CORE_TENSOR_H_
#define GPIPE_RUNTIME_CORE_TENSOR_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/core/allocator.h"
#include "runtime/core/check.h"
#include "runtime/core/dtype.h"
#include "runtime/core/memory_tracker.h"
#include "runtime/core/shape.h"

namespace gpipe {

class Tensor {
  struct Storage;  // below

 public:
  Tensor() = default;

  // Uninitialized storage for `shape` elements of `dtype`, counted under `kind`.
  static absl::StatusOr<Tensor> Empty(Allocator& allocator, const Shape& shape, DType dtype,
                                      MemoryKind kind);
  // Zero-filled (host-accessible allocators only).
  static absl::StatusOr<Tensor> Zeros(Allocator& allocator, const Shape& shape, DType dtype,
                                      MemoryKind kind);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t num_elements() const { return shape_.num_elements(); }
  int64_t bytes() const { return num_elements() * SizeOf(dtype_); }
  MemoryKind memory_kind() const;
  Allocator& allocator() const;

  // Typed element pointers for host code; CHECK-fail (naming the tensor) on a dtype mismatch,
  // an undefined tensor, or memory the host cannot read (a GPU's, a simulated device's).
  template <typename T>
  T* data() {
    CheckAccess(DTypeOf<T>());
    return reinterpret_cast<T*>(static_cast<char*>(storage_->ptr) + offset_bytes_);
  }
  template <typename T>
  const T* data() const {
    CheckAccess(DTypeOf<T>());
    return reinterpret_cast<const T*>(static_cast<const char*>(storage_->ptr) + offset_bytes_);
  }
  float* f32() { return data<float>(); }
  const float* f32() const { return data<float>(); }
  std::span<float> f32_span() { return {f32(), static_cast<size_t>(num_elements())}; }
  std::span<const float> f32_span() const { return {f32(), static_cast<size_t>(num_elements())}; }
  void* raw_data();
  const void* raw_data() const;

  // Same storage, another shape with the same element count.
  absl::StatusOr<Tensor> Reshaped(const Shape& shape) const;
  // Same storage: rows [begin, end) of the leading dimension.
  absl::StatusOr<Tensor> SliceRows(int64_t begin, int64_t end) const;
  // New storage (same allocator) holding a copy, counted under `kind`.
  absl::StatusOr<Tensor> Clone(MemoryKind kind) const;
  // Counts the storage under `kind` from now on (for every tensor sharing it): a tensor changed
  // role, e.g. a layer's output became a boundary tensor awaiting its send. No-op if undefined.
  void Retag(MemoryKind kind);
  // Whether the host can read and write the storage through data<T>().
  bool host_accessible() const { return defined() && storage_->allocator->host_accessible(); }
  // Sets every element to zero (host-accessible only; devices use Ops).
  void SetZero();
  // Whether two tensors view the same bytes.
  bool SharesStorageWith(const Tensor& other) const { return storage_ == other.storage_; }

  // "f32[4, 784]".
  std::string DebugString() const;

  // Views of tensors that do not own their bytes, for work recorded now and run later (a CPU
  // device's captured work, runtime/device/device.h), which must not keep memory alive that the
  // capture's rules free or reuse. Of(t) views t's bytes with t's allocator, shape, dtype and
  // offset; the bytes go back to the allocator when the owning tensors go, whatever views remain.
  // Tensors that share storage get views that share storage (so an op sees the same aliasing);
  // Retag of a view does nothing (the owner counts the bytes).
  class UnownedViews {
   public:
    Tensor Of(const Tensor& tensor);

   private:
    absl::flat_hash_map<const void*, std::shared_ptr<Storage>> views_;  // by owner's storage
  };

 private:
  struct Storage {
    Storage(Allocator* allocator, void* ptr, int64_t bytes, MemoryKind kind, bool owned = true)
        : allocator(allocator), ptr(ptr), bytes(bytes), kind(kind), owned(owned) {}
    ~Storage() {
      if (owned) allocator->Free(ptr, bytes, kind);
    }
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    Allocator* allocator;
    void* ptr;
    int64_t bytes;
    MemoryKind kind;
    bool owned;  // false: an UnownedViews view
  };

  Tensor(std::shared_ptr<Storage> storage, Shape shape, DType dtype, int64_t offset_bytes)
      : storage_(std::move(storage)),
        shape_(std::move(shape)),
        dtype_(dtype),
        offset_bytes_(offset_bytes) {}
  void CheckAccess(DType requested) const;

  std::shared_ptr<Storage> storage_;
  Shape shape_;
  DType dtype_ = DType::kF32;
  int64_t offset_bytes_ = 0;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_TENSOR_H_
