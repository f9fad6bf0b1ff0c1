#include "runtime/core/element_range.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/check.h"
#include "runtime/core/status_macros.h"

namespace gpipe {

std::string ElementRange::ToString() const { return absl::StrCat("[", begin, ", ", end, ")"); }

ElementRange ShardRange(int64_t elements, int members, int member) {
  GPIPE_CHECK(members >= 1 && member >= 0 && member < members);
  const int64_t part = elements / members;
  const int64_t begin = part * member;
  return {.begin = begin, .end = member == members - 1 ? elements : begin + part};
}

absl::StatusOr<Tensor> ElementView(const Tensor& tensor, ElementRange range) {
  if (!tensor.defined() || range.empty() || range.begin < 0 || range.end > tensor.num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat("elements ", range.ToString(), " of ",
                                                   tensor.DebugString(), " (a non-empty part)"));
  }
  ASSIGN_OR_RETURN(const Tensor flat, tensor.Reshaped(Shape{tensor.num_elements()}));
  ASSIGN_OR_RETURN(Tensor part, flat.SliceRows(range.begin, range.end));
  if (tensor.shape().rank() < 2) return part;
  return part.Reshaped(Shape{1, range.size()});
}

}  // namespace gpipe
