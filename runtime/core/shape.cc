#include "runtime/core/shape.h"

#include "absl/strings/str_join.h"

namespace gpipe {

int64_t Shape::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

int64_t Shape::rows() const {
  if (dims_.empty()) return 1;
  int64_t n = 1;
  for (size_t i = 0; i + 1 < dims_.size(); ++i) n *= dims_[i];
  return n;
}

Shape Shape::WithBatch(int64_t batch) const {
  std::vector<int64_t> dims;
  dims.reserve(dims_.size() + 1);
  dims.push_back(batch);
  dims.insert(dims.end(), dims_.begin(), dims_.end());
  return Shape(std::move(dims));
}

Shape Shape::WithoutBatch() const {
  return Shape(std::vector<int64_t>(dims_.begin() + 1, dims_.end()));
}

Shape Shape::WithLast(int64_t last) const {
  std::vector<int64_t> dims = dims_;
  dims.back() = last;
  return Shape(std::move(dims));
}

std::string Shape::ToString() const { return "[" + absl::StrJoin(dims_, ", ") + "]"; }

}  // namespace gpipe
