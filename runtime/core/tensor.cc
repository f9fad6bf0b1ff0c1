#include "runtime/core/tensor.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

absl::StatusOr<Tensor> Tensor::Empty(Allocator& allocator, const Shape& shape, DType dtype,
                                     MemoryKind kind) {
  int64_t bytes = SizeOf(dtype);
  for (int64_t d : shape.dims()) {
    if (d < 0) return absl::InvalidArgumentError("negative dimension in " + shape.ToString());
    if (__builtin_mul_overflow(bytes, d, &bytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", DTypeName(dtype), shape.ToString(), " is too large to address"));
    }
  }
  ASSIGN_OR_RETURN(void* ptr, allocator.Allocate(bytes, kind));
  return Tensor(std::make_shared<Storage>(&allocator, ptr, bytes, kind), shape, dtype, 0);
}

absl::StatusOr<Tensor> Tensor::Zeros(Allocator& allocator, const Shape& shape, DType dtype,
                                     MemoryKind kind) {
  ASSIGN_OR_RETURN(Tensor t, Empty(allocator, shape, dtype, kind));
  t.SetZero();
  return t;
}

MemoryKind Tensor::memory_kind() const {
  GPIPE_CHECK(defined());
  return storage_->kind;
}

Allocator& Tensor::allocator() const {
  GPIPE_CHECK(defined());
  return *storage_->allocator;
}

void Tensor::CheckAccess(DType requested) const {
  GPIPE_CHECK(defined()) << "access to an undefined tensor";
  GPIPE_CHECK(storage_->allocator->host_accessible())
      << "host access to tensor " << DebugString() << " (" << MemoryKindName(storage_->kind)
      << ") whose memory the host cannot read; compute on it through the device's Ops, or copy "
         "it with Device::CopyToHost";
  GPIPE_CHECK(requested == dtype_)
      << "tensor " << DebugString() << " accessed as " << DTypeName(requested);
}

void* Tensor::raw_data() {
  GPIPE_CHECK(defined());
  return static_cast<char*>(storage_->ptr) + offset_bytes_;
}

const void* Tensor::raw_data() const {
  GPIPE_CHECK(defined());
  return static_cast<const char*>(storage_->ptr) + offset_bytes_;
}

absl::StatusOr<Tensor> Tensor::Reshaped(const Shape& shape) const {
  if (shape.num_elements() != num_elements()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot reshape ", DebugString(), " to ", shape.ToString()));
  }
  return Tensor(storage_, shape, dtype_, offset_bytes_);
}

absl::StatusOr<Tensor> Tensor::SliceRows(int64_t begin, int64_t end) const {
  if (shape_.rank() < 1 || begin < 0 || end < begin || end > shape_.dim(0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows [", begin, ", ", end, ") out of range for ", DebugString()));
  }
  std::vector<int64_t> dims = shape_.dims();
  dims[0] = end - begin;
  const int64_t row_bytes = shape_.WithoutBatch().num_elements() * SizeOf(dtype_);
  return Tensor(storage_, Shape(std::move(dims)), dtype_, offset_bytes_ + begin * row_bytes);
}

absl::StatusOr<Tensor> Tensor::Clone(MemoryKind kind) const {
  GPIPE_CHECK(defined());
  if (!storage_->allocator->host_accessible()) {
    return absl::UnimplementedError("Clone of device-resident tensors goes through the Device");
  }
  ASSIGN_OR_RETURN(Tensor copy, Empty(*storage_->allocator, shape_, dtype_, kind));
  std::memcpy(copy.raw_data(), raw_data(), bytes());
  return copy;
}

void Tensor::Retag(MemoryKind kind) {
  if (!defined() || storage_->kind == kind || !storage_->owned) return;
  storage_->allocator->Recount(storage_->bytes, storage_->kind, kind);
  storage_->kind = kind;
}

void Tensor::SetZero() {
  GPIPE_CHECK(defined());
  GPIPE_CHECK(storage_->allocator->host_accessible())
      << "SetZero on tensor " << DebugString() << " whose memory the host cannot write; use "
         "the device's Ops (tensor.Fill)";
  std::memset(raw_data(), 0, bytes());
}

Tensor Tensor::UnownedViews::Of(const Tensor& tensor) {
  if (!tensor.defined()) return Tensor();
  // A storage created where a freed one was is another key with the same address: its view is
  // made anew unless the bytes are the same.
  const Storage& owner = *tensor.storage_;
  std::shared_ptr<Storage>& view = views_[&owner];
  if (view == nullptr || view->ptr != owner.ptr || view->bytes != owner.bytes ||
      view->allocator != owner.allocator) {
    view = std::make_shared<Storage>(owner.allocator, owner.ptr, owner.bytes, owner.kind,
                                     /*owned=*/false);
  }
  return Tensor(view, tensor.shape_, tensor.dtype_, tensor.offset_bytes_);
}

std::string Tensor::DebugString() const {
  if (!defined()) return "undefined";
  return absl::StrCat(DTypeName(dtype_), shape_.ToString());
}

}  // namespace gpipe
