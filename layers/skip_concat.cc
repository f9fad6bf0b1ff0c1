#include "layers/skip_concat.h"

#include "absl/strings/str_cat.h"
#include "layers/skip_add.h"
#include "runtime/core/status_macros.h"
#include "runtime/device/ops.h"

namespace gpipe {

absl::StatusOr<std::unique_ptr<Layer>> SkipConcat::Create(const pb::Layer& spec,
                                                          const Shape& input_shape,
                                                          const Shape& skip_shape) {
  const int rank = input_shape.rank();
  const int axis =
      spec.skip_concat().axis() < 0 ? spec.skip_concat().axis() + rank : spec.skip_concat().axis();
  if (axis < 0 || axis >= rank) {
    return absl::InvalidArgumentError(absl::StrCat("axis ", spec.skip_concat().axis(),
                                                   " is outside its input ", input_shape.ToString(),
                                                   "; give 0..", rank - 1, " or -", rank, "..-1"));
  }
  bool fits = skip_shape.rank() == rank;
  for (int d = 0; fits && d < rank; ++d) {
    fits = d == axis || skip_shape.dim(d) == input_shape.dim(d);
  }
  if (!fits) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot concatenate the output of '", spec.skip_concat().from(), "' ",
                     skip_shape.ToString(), " to its input ", input_shape.ToString(),
                     " along axis ", axis, ": every other dimension must be equal"));
  }
  std::vector<int64_t> out = input_shape.dims();
  out[axis] += skip_shape.dim(axis);
  return std::unique_ptr<Layer>(new SkipConcat(spec.name(), spec.skip_concat().from(), input_shape,
                                               skip_shape, Shape(std::move(out)), axis));
}

SkipConcat::SkipConcat(std::string name, std::string from, Shape input, Shape skip, Shape output,
                       int axis)
    : Layer(std::move(name), std::move(input), std::move(output)),
      from_(std::move(from)),
      skip_shape_(std::move(skip)) {
  int64_t after = 1;
  for (int d = axis + 1; d < input_shape().rank(); ++d) after *= input_shape().dim(d);
  for (int d = 0; d < axis; ++d) rows_per_sample_ *= input_shape().dim(d);
  x_width_ = input_shape().dim(axis) * after;
  s_width_ = skip_shape_.dim(axis) * after;
}

absl::StatusOr<Tensor> SkipConcat::Forward(const LayerContext&, std::span<const Tensor>,
                                           const Tensor&, SavedTensors&) const {
  return JoinCalledAlone(*this);
}

absl::StatusOr<Tensor> SkipConcat::Backward(const LayerContext&, std::span<const Tensor>,
                                            std::span<Tensor>, const SavedTensors&,
                                            const Tensor&) const {
  return JoinCalledAlone(*this);
}

absl::Status SkipConcat::CopyBlocks(const LayerContext& ctx, Tensor& x, Tensor& s, Tensor& y,
                                    bool into_parts) const {
  const int64_t rows = x.shape().dim(0) * rows_per_sample_;
  const int64_t width = x_width_ + s_width_;
  ASSIGN_OR_RETURN(const Tensor x_rows, x.Reshaped(Shape({rows, x_width_})));
  ASSIGN_OR_RETURN(const Tensor s_rows, s.Reshaped(Shape({rows, s_width_})));
  ASSIGN_OR_RETURN(const Tensor y_rows, y.Reshaped(Shape({rows, width})));
  const TensorOps& ops = ctx.device.ops().tensor;
  for (int64_t r = 0; r < rows; ++r) {
    ASSIGN_OR_RETURN(Tensor x_row, x_rows.SliceRows(r, r + 1));
    ASSIGN_OR_RETURN(Tensor s_row, s_rows.SliceRows(r, r + 1));
    // Row r of y as a column, so its two parts are row ranges.
    ASSIGN_OR_RETURN(const Tensor y_row, y_rows.SliceRows(r, r + 1));
    ASSIGN_OR_RETURN(const Tensor y_column, y_row.Reshaped(Shape({width, 1})));
    ASSIGN_OR_RETURN(Tensor y_x, y_column.SliceRows(0, x_width_));
    ASSIGN_OR_RETURN(Tensor y_s, y_column.SliceRows(x_width_, width));
    if (into_parts) {
      RETURN_IF_ERROR(ops.Copy(y_x, x_row));
      RETURN_IF_ERROR(ops.Copy(y_s, s_row));
    } else {
      RETURN_IF_ERROR(ops.Copy(x_row, y_x));
      RETURN_IF_ERROR(ops.Copy(s_row, y_s));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> SkipConcat::ForwardJoin(const LayerContext& ctx, const Tensor& x,
                                               const Tensor& skip, SavedTensors&) const {
  RETURN_IF_ERROR(CheckJoinOperand(*this, "the input", x, input_shape(), -1));
  const int64_t batch = x.shape().dim(0);
  RETURN_IF_ERROR(CheckJoinOperand(*this, "the skip input", skip, skip_shape_, batch));
  ASSIGN_OR_RETURN(Tensor y, Tensor::Empty(ctx.device, output_shape().WithBatch(batch), DType::kF32,
                                           MemoryKind::kActivation));
  Tensor x_view = x;
  Tensor s_view = skip;
  RETURN_IF_ERROR(CopyBlocks(ctx, x_view, s_view, y, /*into_parts=*/false));
  return y;
}

absl::StatusOr<SkipJoin::Grads> SkipConcat::BackwardJoin(const LayerContext& ctx,
                                                         const SavedTensors&,
                                                         const Tensor& dy) const {
  RETURN_IF_ERROR(CheckJoinOperand(*this, "the output gradient", dy, output_shape(), -1));
  const int64_t batch = dy.shape().dim(0);
  Grads grads;
  ASSIGN_OR_RETURN(grads.dx, Tensor::Empty(ctx.device, input_shape().WithBatch(batch), DType::kF32,
                                           MemoryKind::kActivation));
  ASSIGN_OR_RETURN(grads.dskip, Tensor::Empty(ctx.device, skip_shape_.WithBatch(batch), DType::kF32,
                                              MemoryKind::kActivation));
  Tensor y = dy;
  RETURN_IF_ERROR(CopyBlocks(ctx, grads.dx, grads.dskip, y, /*into_parts=*/true));
  return grads;
}

}  // namespace gpipe
