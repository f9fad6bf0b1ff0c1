// Shape: the dimensions of a tensor, outermost first (row-major, PyTorch order).
// A value type; cheap to copy for the small ranks used here.
#ifndef GPIPE_RUNTIME_CORE_SHAPE_H_
#define GPIPE_RUNTIME_CORE_SHAPE_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace gpipe {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t dim(int i) const { return dims_.at(i); }
  // The last dimension (features); requires rank() >= 1.
  int64_t last() const { return dims_.back(); }
  const std::vector<int64_t>& dims() const { return dims_; }
  // Product of the dimensions (1 for rank 0).
  int64_t num_elements() const;
  // Product of all dimensions but the last (the "rows" a feature-wise op iterates over).
  int64_t rows() const;

  // This shape with a leading batch dimension.
  Shape WithBatch(int64_t batch) const;
  // This shape without its leading dimension; requires rank() >= 1.
  Shape WithoutBatch() const;
  // This shape with the last dimension replaced.
  Shape WithLast(int64_t last) const;

  // "[4, 784]".
  std::string ToString() const;

  friend bool operator==(const Shape& a, const Shape& b) { return a.dims_ == b.dims_; }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

 private:
  std::vector<int64_t> dims_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_SHAPE_H_
